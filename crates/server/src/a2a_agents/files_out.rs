//! The files a completed session's result names as an artifact of its task (#34): one
//! `{task}.files` artifact, a `file` part per file — its bytes (`raw`, base64) when it is at
//! most 1 MiB ([`crate::service::tasks::RAW_MAX`]), else a `url` to its REST download
//! (`/threads/{key}/files/{path}`, under the caller's key, which the client's own API key can
//! read) — each with its `filename` and `mediaType`, its path and size in the part's metadata.
//! The URL is absolute on the server's public URL, else the origin the request reached
//! (`View::origin`), else root-relative (a push payload of a server without `--public-url`).

use base64::Engine as _;
use duet_a2a::{Artifact, Part, PartContent};
use serde_json::json;

use crate::service::tasks::ResultFile;

/// The artifact carrying `files` for task `task` of context `context` (`None` for none).
pub(crate) fn artifact(
    task: &str,
    context: &str,
    files: &[ResultFile],
    origin: Option<&str>,
) -> Option<Artifact> {
    if files.is_empty() {
        return None;
    }
    let parts = files.iter().map(|f| part(context, f, origin)).collect();
    Some(Artifact {
        artifact_id: format!("{task}.files"),
        name: Some("files".into()),
        description: Some("the files the session's result names".into()),
        parts,
        metadata: None,
        extensions: vec![],
    })
}

/// One file as a part.
fn part(context: &str, f: &ResultFile, origin: Option<&str>) -> Part {
    let content = match &f.bytes {
        Some(bytes) => PartContent::Raw(base64::engine::general_purpose::STANDARD.encode(bytes)),
        None => PartContent::Url(download(context, &f.file.path, origin)),
    };
    let mut metadata = serde_json::Map::new();
    metadata.insert("path".into(), json!(f.file.path));
    metadata.insert("size".into(), json!(f.file.size));
    Part {
        content,
        metadata: Some(metadata),
        filename: Some(f.file.name.clone()),
        media_type: Some(f.file.mime_type.clone()),
    }
}

/// The origin a download URL starts with, as a thread endpoint's `req.url` is made: the
/// public URL; the request's origin (forwarded headers when trusted, a loopback `Host`); the
/// listener's. `None` for no request (a push payload): the public URL, else the listener's.
pub(crate) fn origin(
    state: &crate::state::AppState,
    request: Option<&axum::http::request::Parts>,
) -> String {
    match request {
        Some(r) => crate::routes::endpoints::origin(state, &r.headers, &r.uri),
        None => crate::routes::endpoints::origin(
            state,
            &axum::http::HeaderMap::new(),
            &axum::http::Uri::default(),
        ),
    }
}

/// The REST download of file `path` of the thread the caller calls `context`.
pub(crate) fn download(context: &str, path: &str, origin: Option<&str>) -> String {
    let encoded: Vec<String> = path.split('/').map(crate::views::segment).collect();
    format!(
        "{}/threads/{}/files{}",
        origin.unwrap_or_default().trim_end_matches('/'),
        crate::views::segment(context),
        encoded.join("/")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_download_url_encodes_the_key_and_each_segment() {
        assert_eq!(
            download(
                "ctx 1/a",
                "/attachments/r port.csv",
                Some("https://d.example/")
            ),
            "https://d.example/threads/ctx%201%2Fa/files/attachments/r%20port.csv"
        );
        assert_eq!(download("c", "/x", None), "/threads/c/files/x");
    }
}
