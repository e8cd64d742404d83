//! Content as chunks: a file's bytes cut into [`CHUNK_BYTES`] pieces, each named by its SHA-256
//! (hex). Equal chunks are stored once, so a file copied to another thread costs its rows only.

use sha2::{Digest, Sha256};

/// Bytes in every chunk of a file but its last.
pub const CHUNK_BYTES: usize = 1 << 20;

/// The name of a chunk holding `data`: its SHA-256, lowercase hex.
pub fn hash(data: &[u8]) -> String {
    format!("{:x}", Sha256::digest(data))
}

/// Cuts a stream of bytes into chunks as they arrive, holding at most one chunk.
#[derive(Debug, Default)]
pub struct Chunker {
    buf: Vec<u8>,
    total: u64,
}

impl Chunker {
    /// An empty chunker.
    pub fn new() -> Self {
        Chunker::default()
    }

    /// Takes `bytes`; gives every chunk they complete.
    pub fn push(&mut self, mut bytes: &[u8]) -> Vec<Vec<u8>> {
        self.total += bytes.len() as u64;
        let mut out = Vec::new();
        while !bytes.is_empty() {
            let room = CHUNK_BYTES - self.buf.len();
            let take = room.min(bytes.len());
            self.buf.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if self.buf.len() == CHUNK_BYTES {
                out.push(std::mem::replace(
                    &mut self.buf,
                    Vec::with_capacity(CHUNK_BYTES.min(64 << 10)),
                ));
            }
        }
        out
    }

    /// Bytes taken so far.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The last, short chunk, if any bytes are left.
    pub fn finish(self) -> Option<Vec<u8>> {
        (!self.buf.is_empty()).then_some(self.buf)
    }
}

/// `data` as chunks (for content already in memory).
pub fn split(data: &[u8]) -> impl Iterator<Item = &[u8]> {
    data.chunks(CHUNK_BYTES)
}

/// Which chunks of a file of `size` bytes hold bytes `start..end` (end exclusive, both within
/// the file): the first and last chunk's indexes and the offset of `start` in the first.
pub fn span(start: u64, end: u64) -> (usize, usize, usize) {
    let c = CHUNK_BYTES as u64;
    let first = (start / c) as usize;
    let last = (end.saturating_sub(1) / c) as usize;
    (first, last.max(first), (start % c) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunker_cuts_at_the_size() {
        let mut c = Chunker::new();
        let mut out = c.push(&vec![1u8; CHUNK_BYTES - 1]);
        assert!(out.is_empty());
        out.extend(c.push(&[2u8; 3]));
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].len(), CHUNK_BYTES);
        assert_eq!(c.total(), CHUNK_BYTES as u64 + 2);
        assert_eq!(c.finish().map(|b| b.len()), Some(2));
    }

    #[test]
    fn hash_is_sha256_hex() {
        assert_eq!(
            hash(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn spans() {
        let c = CHUNK_BYTES as u64;
        assert_eq!(span(0, 10), (0, 0, 0));
        assert_eq!(span(c - 1, c + 1), (0, 1, CHUNK_BYTES - 1));
        assert_eq!(span(2 * c + 5, 2 * c + 6), (2, 2, 5));
    }
}
