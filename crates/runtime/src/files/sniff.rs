//! A file's type from its first bytes (the formats a model or a browser treats specially), and
//! from its extension; [`choose`] decides which one a file is served and sent as.

/// The type of bytes nothing else names.
pub const OCTET_STREAM: &str = "application/octet-stream";

/// Magic numbers: (offset, bytes, type).
const MAGIC: &[(usize, &[u8], &str)] = &[
    (0, b"\x89PNG\r\n\x1a\n", "image/png"),
    (0, b"\xff\xd8\xff", "image/jpeg"),
    (0, b"GIF87a", "image/gif"),
    (0, b"GIF89a", "image/gif"),
    (0, b"%PDF-", "application/pdf"),
    (0, b"PK\x03\x04", "application/zip"),
    (0, b"\x1f\x8b", "application/gzip"),
    (0, b"OggS", "audio/ogg"),
];

/// The type `head` (a file's first bytes) says it is, when it says: images, PDF, archives, a few
/// media formats; `None` when the bytes name no format we know (text included: see [`choose`]).
pub fn sniff(head: &[u8]) -> Option<&'static str> {
    if head.len() >= 12 && &head[0..4] == b"RIFF" && &head[8..12] == b"WEBP" {
        return Some("image/webp");
    }
    if head.len() >= 12 && &head[4..8] == b"ftyp" {
        return Some(match &head[8..12] {
            b"avif" => "image/avif",
            b"heic" | b"heix" => "image/heic",
            _ => "video/mp4",
        });
    }
    // Short magic numbers only with what must follow them, so text that starts the same way
    // (`BMW,…`, `ID3 tags`) stays text: a BMP's reserved bytes are zero and its header size is
    // one of the known ones; an ID3 tag's version is 2 to 4 and its flags' low bits are clear.
    if head.len() >= 18
        && &head[0..2] == b"BM"
        && head[6..10] == [0, 0, 0, 0]
        && matches!(head[14], 12 | 40 | 52 | 56 | 108 | 124)
        && head[15..18] == [0, 0, 0]
    {
        return Some("image/bmp");
    }
    if head.len() >= 10
        && &head[0..3] == b"ID3"
        && (2..=4).contains(&head[3])
        && head[5] & 0x0f == 0
    {
        return Some("audio/mpeg");
    }
    MAGIC
        .iter()
        .find(|(at, magic, _)| head.get(*at..*at + magic.len()) == Some(*magic))
        .map(|(_, _, t)| *t)
}

/// The type a path's extension names, for the common ones.
pub fn by_extension(path: &str) -> Option<&'static str> {
    let ext = path.rsplit_once('.')?.1.to_ascii_lowercase();
    Some(match ext.as_str() {
        "txt" | "log" => "text/plain",
        "md" | "markdown" => "text/markdown",
        "csv" => "text/csv",
        "tsv" => "text/tab-separated-values",
        "json" => "application/json",
        "jsonl" | "ndjson" => "application/x-ndjson",
        "yaml" | "yml" => "application/yaml",
        "xml" => "application/xml",
        "html" | "htm" => "text/html",
        "css" => "text/css",
        "js" | "mjs" => "text/javascript",
        "ts" => "text/x-typescript",
        "py" => "text/x-python",
        "rs" => "text/x-rust",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "svg" => "image/svg+xml",
        "pdf" => "application/pdf",
        "zip" => "application/zip",
        "gz" => "application/gzip",
        "docx" => "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "xlsx" => "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        _ => return None,
    })
}

/// Whether `mime` is a declared type worth keeping (`type/subtype`, printable, short).
fn well_formed(mime: &str) -> bool {
    let mime = mime.split(';').next().unwrap_or_default().trim();
    // RFC 6838's restricted names: a letter or digit first, then letters, digits and `!#$&-^_.+`.
    let token = |t: &str| {
        t.len() <= 63
            && t.bytes().next().is_some_and(|c| c.is_ascii_alphanumeric())
            && t.bytes()
                .all(|c| c.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&c))
    };
    mime.split_once('/')
        .is_some_and(|(a, b)| token(a) && token(b))
}

/// The type a file at `path` with first bytes `head`, declared as `declared`, is served and sent
/// as: what the bytes say when they name a format (a declared type that disagrees is not
/// believed); else the declared type, unless it claims a format the bytes would have shown
/// (an image, a PDF: those are sniffed, so a claim the bytes do not back is a lie) — then, as
/// for no declared type, the extension's, or `text/plain` for UTF-8 text, or
/// `application/octet-stream`.
pub fn choose(path: &str, head: &[u8], declared: Option<&str>) -> String {
    if let Some(sniffed) = sniff(head) {
        return sniffed.to_owned();
    }
    let claims_sniffable =
        |m: &str| (m.starts_with("image/") && m != "image/svg+xml") || m == "application/pdf";
    if let Some(d) = declared.map(str::trim).filter(|d| {
        well_formed(d) && d.len() <= 255 && d.bytes().all(|c| (0x20..0x7f).contains(&c))
    }) && !claims_sniffable(&d.to_ascii_lowercase())
    {
        return d.to_ascii_lowercase();
    }
    if let Some(ext) = by_extension(path).filter(|m| !claims_sniffable(m)) {
        return ext.to_owned();
    }
    if !head.is_empty() && looks_like_text(head) {
        return "text/plain".to_owned();
    }
    OCTET_STREAM.to_owned()
}

/// Whether `head` reads as UTF-8 text (a cut last character allowed) without NUL bytes.
pub fn looks_like_text(head: &[u8]) -> bool {
    if head.contains(&0) {
        return false;
    }
    match std::str::from_utf8(head) {
        Ok(_) => true,
        Err(e) => e.error_len().is_none() && e.valid_up_to() + 4 > head.len(),
    }
}

/// Whether a file of type `mime` is text grep may read.
pub fn is_text(mime: &str) -> bool {
    mime.starts_with("text/")
        || matches!(
            mime,
            "application/json"
                | "application/x-ndjson"
                | "application/yaml"
                | "application/xml"
                | "image/svg+xml"
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_magic_needs_what_follows() {
        assert_eq!(choose("/cars.csv", b"BMW,Audi\n1,2\n", None), "text/csv");
        assert_eq!(
            choose("/notes", b"ID3 tags are metadata", None),
            "text/plain"
        );
        assert_eq!(
            choose(
                "/a",
                b"text/csv; charset=\x01",
                Some("text/csv; charset=\x01")
            ),
            "text/plain"
        );
    }

    #[test]
    fn the_bytes_win_over_a_lie() {
        assert_eq!(
            choose("/a.png", b"%PDF-1.7 ...", Some("image/png")),
            "application/pdf"
        );
        assert_eq!(choose("/a.png", b"<html>", Some("image/png")), "text/plain");
        assert_eq!(
            choose("/a.bin", b"\x89PNG\r\n\x1a\n....", None),
            "image/png"
        );
        assert_eq!(choose("/a.csv", b"a,b\n1,2", None), "text/csv");
        assert_eq!(
            choose("/a.csv", b"a,b", Some("text/csv; charset=utf-8")),
            "text/csv; charset=utf-8"
        );
        assert_eq!(choose("/a", &[0, 1, 2], None), OCTET_STREAM);
        assert_eq!(choose("/a", &[0, 1, 2], Some("x/../y")), OCTET_STREAM);
    }
}
