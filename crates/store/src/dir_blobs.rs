//! The second chunk backend: a local directory ([`DirBlobs`]), for deployments whose files
//! outgrow the database. The database keeps the file rows either way; only the chunks move.

use std::io::Write;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use duet_runtime::{BlobStore, FileStore, StoreError};

/// How many chunk names one [`DirBlobs::sweep`] asks the file table about at once.
const SWEEP_BATCH: usize = 500;

/// Chunks as files under one directory: chunk `h` (its SHA-256, 64 lowercase hex characters,
/// checked before it names a file) is `DIR/h[0..2]/h`. A chunk is written to a temporary name
/// beside it, synced, renamed into place and its directory synced, so a crash leaves either the
/// whole chunk under its name or none (a temporary file at most, which [`DirBlobs::sweep`]
/// removes). Storing a chunk already there only renews its time (a sweep's grace).
///
/// An embedder picks it by handing it to the runtime in place of the store's own `blobs` table
/// (`RuntimeBuilder::blobs(Arc::new(DirBlobs::open(dir)?))`) and sweeping it now and then with
/// [`DirBlobs::sweep`] against the same store's file rows; every process on one database must
/// then see the same directory (a shared volume). Backups: the database and the directory are
/// two, and the directory is the one to copy second.
#[derive(Clone, Debug)]
pub struct DirBlobs {
    root: PathBuf,
}

fn io_error(what: String, e: std::io::Error) -> StoreError {
    StoreError::backend_in(what, e)
}

/// Refuses anything but a chunk's name: 64 lowercase hex characters.
fn checked(hash: &str) -> Result<&str, StoreError> {
    let ok = hash.len() == 64
        && hash
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if ok {
        Ok(hash)
    } else {
        // Never a name a caller chose: chunk names come from hashing, so this is a bug or a
        // file row written by something else.
        Err(StoreError::Corrupt(format!(
            "`{}` is not a chunk name (64 lowercase hex characters)",
            hash.chars().take(80).collect::<String>()
        )))
    }
}

/// Runs blocking file work off the async threads.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| StoreError::backend_in("a blob file task", e))?
}

/// Syncs directory `dir` (so a rename into it survives a crash).
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

impl DirBlobs {
    /// The chunks under `root`, created if missing.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self, StoreError> {
        let root = root.into();
        std::fs::create_dir_all(&root)
            .map_err(|e| io_error(format!("cannot create {}", root.display()), e))?;
        Ok(DirBlobs { root })
    }

    /// The directory it keeps chunks under.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn file(&self, hash: &str) -> PathBuf {
        self.root.join(&hash[..2]).join(hash)
    }

    /// Removes the chunks stored before `before` (ms since the epoch, by the file's modification
    /// time) that no row of `files` names, asking it [`SWEEP_BATCH`] names at a time, and
    /// temporary files left before `before` by a write that never finished; how many chunks went.
    pub async fn sweep(&self, files: &dyn FileStore, before: i64) -> Result<u64, StoreError> {
        let root = self.root.clone();
        let (old, temporaries) = blocking(move || old_entries(&root, before)).await?;
        for t in temporaries {
            let _ = std::fs::remove_file(t);
        }
        let mut removed = 0;
        for batch in old.chunks(SWEEP_BATCH) {
            let names: Vec<String> = batch.iter().map(|(h, _)| h.clone()).collect();
            let named: std::collections::HashSet<String> =
                files.blobs_named(&names).await?.into_iter().collect();
            let gone: Vec<PathBuf> = batch
                .iter()
                .filter(|(h, _)| !named.contains(h))
                .map(|(_, p)| p.clone())
                .collect();
            removed += blocking(move || {
                let mut n = 0;
                for p in gone {
                    // Stored again since it was listed (a write about to name it): kept.
                    if std::fs::metadata(&p).is_ok_and(|m| modified_ms(&m) >= before) {
                        continue;
                    }
                    match std::fs::remove_file(&p) {
                        Ok(()) => n += 1,
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                        Err(e) => {
                            return Err(io_error(format!("cannot remove {}", p.display()), e));
                        }
                    }
                }
                Ok(n)
            })
            .await?;
        }
        Ok(removed)
    }
}

/// Milliseconds since the epoch of `meta`'s modification time.
fn modified_ms(meta: &std::fs::Metadata) -> i64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The chunks under `root` older than `before` (name, file), and the temporary files as old.
type OldEntries = (Vec<(String, PathBuf)>, Vec<PathBuf>);

fn old_entries(root: &Path, before: i64) -> Result<OldEntries, StoreError> {
    let read = |dir: &Path| {
        std::fs::read_dir(dir).map_err(|e| io_error(format!("cannot read {}", dir.display()), e))
    };
    let (mut chunks, mut temporaries) = (Vec::new(), Vec::new());
    for shard in read(root)?.flatten() {
        let shard_name = shard.file_name().to_string_lossy().into_owned();
        if !shard.file_type().is_ok_and(|t| t.is_dir()) || shard_name.len() != 2 {
            continue;
        }
        for entry in read(&shard.path())?.flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            if !meta.is_file() || modified_ms(&meta) >= before {
                continue;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            if checked(&name).is_ok() && name.starts_with(&shard_name) {
                chunks.push((name, entry.path()));
            } else if name.starts_with(".tmp-") {
                temporaries.push(entry.path());
            }
        }
    }
    Ok((chunks, temporaries))
}

#[async_trait]
impl BlobStore for DirBlobs {
    async fn put_blob(&self, hash: &str, data: Vec<u8>) -> Result<(), StoreError> {
        let file = self.file(checked(hash)?);
        blocking(move || {
            let dir = file.parent().map(Path::to_path_buf).unwrap_or_default();
            let fail = |what: &str, e| io_error(format!("{what} {}", file.display()), e);
            if let Ok(existing) = std::fs::File::options().write(true).open(&file) {
                // Stored already: its time renewed, so a sweep under way leaves it.
                return existing
                    .set_modified(std::time::SystemTime::now())
                    .map_err(|e| fail("cannot touch", e));
            }
            std::fs::create_dir_all(&dir).map_err(|e| fail("cannot create the folder of", e))?;
            let temporary = dir.join(format!(".tmp-{}", uuid::Uuid::now_v7().simple()));
            let written = (|| {
                let mut out = std::fs::File::create_new(&temporary)?;
                out.write_all(&data)?;
                out.sync_all()?;
                std::fs::rename(&temporary, &file)?;
                sync_dir(&dir)
            })();
            if let Err(e) = written {
                let _ = std::fs::remove_file(&temporary);
                return Err(fail("cannot write", e));
            }
            Ok(())
        })
        .await
    }

    async fn blob(&self, hash: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let file = self.file(checked(hash)?);
        blocking(move || match std::fs::read(&file) {
            Ok(data) => Ok(Some(data)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_error(format!("cannot read {}", file.display()), e)),
        })
        .await
    }

    async fn sweep(&self, files: &dyn FileStore, before: i64) -> Result<u64, StoreError> {
        DirBlobs::sweep(self, files, before).await
    }

    async fn has_blob(&self, hash: &str) -> Result<bool, StoreError> {
        let file = self.file(checked(hash)?);
        blocking(move || match std::fs::metadata(&file) {
            Ok(meta) => Ok(meta.is_file()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(io_error(format!("cannot read {}", file.display()), e)),
        })
        .await
    }
}
