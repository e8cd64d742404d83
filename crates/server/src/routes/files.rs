//! `/threads/{key}/files`: a thread's files over HTTP. An upload (a raw body at `?path=`, or a
//! `multipart/form-data` `file` part under `?dir=`) is streamed into the chunk store and refused
//! with 413 as soon as it passes the limit (at once for a `Content-Length` over it); its row is
//! written only once the body is whole, so a refused or broken-off upload leaves no file. A
//! listing goes a page at a time; a download streams chunk by chunk, one `Range` honoured, as
//! the type duet sniffed with `nosniff`, inline only for raster images and PDFs.

use axum::body::Body;
use axum::extract::{FromRequest, Multipart, Request, State};
use axum::http::StatusCode;
use axum::http::header::{self, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use duet_runtime::StreamError;
use duet_runtime::files::{FileKind, FileRecord, path};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use utoipa::{IntoParams, ToSchema};

use super::threads::page_size;
use crate::auth::Caller;
use crate::body::{Path, Query};
use crate::problem::Problem;
use crate::service::{files, threads};
use crate::state::AppState;
use crate::views::{Page, segment};

/// The OpenAPI entries of the file routes, registered by hand (a wildcard is no OpenAPI path).
#[derive(utoipa::OpenApi)]
#[openapi(paths(upload, list, download, remove), components(schemas(FileView)))]
pub(crate) struct Doc;

/// A file or directory of a thread.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct FileView {
    /// Its path in the thread (`/attachments/report.pdf`).
    pub path: String,
    /// Its last segment.
    pub name: String,
    /// `file` or `directory`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// A file's media type, as sniffed from its first bytes and its name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// A file's size in bytes (0 for a directory).
    pub size: i64,
    /// When it was made, in ms since the Unix epoch.
    pub created_at: i64,
    /// When it was last written, in ms since the Unix epoch.
    pub updated_at: i64,
}

impl FileView {
    fn of(r: &FileRecord) -> FileView {
        FileView {
            path: r.path.clone(),
            name: r.name().to_owned(),
            kind: match r.kind {
                FileKind::File => "file",
                FileKind::Directory => "directory",
            },
            mime_type: r.mime_type.clone(),
            size: r.size,
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

/// Where an upload goes.
#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub(crate) struct UploadQuery {
    /// The file's path (a raw body's; for multipart, in place of `dir` + the part's name).
    pub path: Option<String>,
    /// Multipart: the directory the `file` part goes in, under its file name made safe
    /// (default `/attachments`).
    pub dir: Option<String>,
    /// When the thread does not exist: open it (idle) for this agent. Without it, 404.
    pub agent: Option<String>,
}

/// Uploads a file: a raw body (the path in `path`, the type from `Content-Type`), or
/// `multipart/form-data` with a `file` part (stored under `dir` by its file name). Streamed;
/// over the per-file limit is a 413 and no file.
#[utoipa::path(post, path = "/threads/{key}/files", tag = "files", params(
        ("key" = String, Path, description = "The thread's key (percent-encoded)"), UploadQuery),
    request_body(content = Vec<u8>, description = "The file's bytes, or a multipart form with a `file` part", content_type = "*/*"),
    responses((status = 201, description = "Stored (`Location`: where to download it)", body = FileView),
        (status = 400, description = "A path a thread file may not have (`invalid_path`), no path, a body broken off", body = crate::problem::ProblemBody),
        (status = 404, description = "No such thread (pass `agent` to open one)", body = crate::problem::ProblemBody),
        (status = 409, description = "A directory is at the path, or a file where a directory would be (`wrong_kind`)", body = crate::problem::ProblemBody),
        (status = 413, description = "Over the per-file or per-thread limit (`too_large`, `too_many`); nothing was written", body = crate::problem::ProblemBody)))]
pub(crate) async fn upload(
    State(state): State<AppState>,
    caller: Caller,
    Path(key): Path<String>,
    Query(q): Query<UploadQuery>,
    request: Request,
) -> Result<Response, Problem> {
    let max = files::max_file_bytes(&state);
    let length = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let multipart = content_type(request.headers())
        .is_some_and(|t| t.to_ascii_lowercase().starts_with("multipart/form-data"));
    // The part of a form is smaller than the form: only a raw body's length says it all.
    if let Some(n) = length.filter(|&n| n > max && !multipart) {
        return Err(too_large(n, max));
    }
    // The path is checked before any thread is opened for it.
    if let Some(p) = &q.path {
        path::normalize(p).map_err(|e| Problem::from(crate::service::ServiceError::from(e)))?;
    }
    if let Some(d) = &q.dir {
        path::normalize_dir(d).map_err(|e| Problem::from(crate::service::ServiceError::from(e)))?;
    }
    if let Some(agent) = &q.agent {
        crate::input::key("agent", agent)?;
        crate::input::key("key", &key)?;
    }
    let t = files::for_upload(&state, &caller, &key, q.agent.as_deref(), "http").await?;
    // What the thread can still take: the per-file limit, or what its files leave of its own.
    let room = files::room(&state, &t).await?;
    if let Some(n) = length.filter(|&n| n > room && !multipart) {
        return Err(too_large(n, room));
    }
    let record = if multipart {
        let mut form = Multipart::from_request(request, &state)
            .await
            .map_err(|e| Problem::bad_request("invalid_multipart", e.body_text()))?;
        loop {
            let field = form
                .next_field()
                .await
                .map_err(|e| Problem::bad_request("invalid_multipart", e.body_text()))?
                .ok_or_else(|| {
                    Problem::bad_request("missing_file", "the form has no `file` part")
                })?;
            if field.name() != Some("file") {
                continue;
            }
            let target = match (&q.path, field.file_name()) {
                (Some(p), _) => p.clone(),
                (None, Some(name)) => format!(
                    "{}/{}",
                    q.dir
                        .as_deref()
                        .unwrap_or(duet_runtime::files::ATTACHMENTS)
                        .trim_end_matches('/'),
                    path::safe_name(name)
                ),
                (None, None) => {
                    return Err(Problem::bad_request(
                        "missing_path",
                        "the `file` part has no file name: pass `path`",
                    ));
                }
            };
            let declared = field.content_type().map(str::to_owned);
            let stored = files::upload(
                &state,
                &t,
                &target,
                Box::pin(field),
                declared.as_deref(),
                room,
            )
            .await;
            break stored.map_err(|e| refused(e, |e| e.body_text()))?;
        }
    } else {
        let target = q.path.as_deref().ok_or_else(|| {
            Problem::bad_request("missing_path", "pass the file's path as `?path=`")
        })?;
        let declared = content_type(request.headers()).map(str::to_owned);
        let body = request.into_body().into_data_stream();
        files::upload(&state, &t, target, body, declared.as_deref(), room)
            .await
            .map_err(|e| refused(e, |e| e.to_string()))?
    };
    let location = format!(
        "/threads/{}/files{}",
        segment(&caller.visible_key(&t.key)),
        encode_path(&record.path)
    );
    let mut response = (StatusCode::CREATED, axum::Json(FileView::of(&record))).into_response();
    if let Ok(v) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, v);
    }
    Ok(response)
}

fn content_type(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
}

fn too_large(size: u64, limit: u64) -> Problem {
    Problem::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "too_large",
        format!("file: {size} bytes is over the limit of {limit}; nothing was stored"),
    )
}

/// An upload's failure as a problem: the file API's refusal, or a body that broke off.
pub(crate) fn refused<E>(e: StreamError<E>, say: impl Fn(E) -> String) -> Problem {
    match e {
        StreamError::File(e) => crate::service::ServiceError::from(e).into(),
        StreamError::Source(e) => Problem::bad_request(
            "body_incomplete",
            format!("the body broke off: {}; nothing was stored", say(e)),
        ),
    }
}

/// A path's segments percent-encoded, `/`s kept.
fn encode_path(p: &str) -> String {
    p.split('/').map(segment).collect::<Vec<_>>().join("/")
}

/// A directory's entries, a page at a time.
#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListQuery {
    /// The directory (default `/`).
    pub dir: Option<String>,
    /// The previous page's `nextCursor` (a path).
    pub after: Option<String>,
    /// Page size, 1–500 (default 50).
    pub limit: Option<usize>,
}

/// The entries directly inside a directory of the thread, by path.
#[utoipa::path(get, path = "/threads/{key}/files", tag = "files", params(
        ("key" = String, Path, description = "The thread's key (percent-encoded)"), ListQuery),
    responses((status = 200, description = "A page of entries", body = Page<FileView>),
        (status = 404, description = "No such thread or directory", body = crate::problem::ProblemBody),
        (status = 409, description = "`dir` is a file", body = crate::problem::ProblemBody)))]
pub(crate) async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Path(key): Path<String>,
    Query(q): Query<ListQuery>,
) -> Result<axum::Json<Page<FileView>>, Problem> {
    let t = threads::find(&state, &caller, &key).await?;
    let limit = page_size(q.limit)?;
    let dir = q.dir.as_deref().unwrap_or("/");
    let page = files::list(&state, &t, dir, q.after.as_deref(), limit).await?;
    let next_cursor = (page.len() == limit)
        .then(|| page.last().map(|r| r.path.clone()))
        .flatten();
    let items = page.iter().map(FileView::of).collect();
    Ok(axum::Json(Page { items, next_cursor }))
}

/// What of a file a request wants.
#[derive(Debug, PartialEq, Eq)]
enum Want {
    /// All of it (no `Range`, or one this route does not take: several, another unit).
    Whole,
    /// Bytes `start..end` (end exclusive).
    Part(u64, u64),
    /// A range that starts past the end.
    Unsatisfiable,
}

/// Reads a single `Range: bytes=a-b | a- | -n` against a file of `size` bytes.
fn want(range: Option<&HeaderValue>, size: u64) -> Want {
    let Some(spec) = range
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().strip_prefix("bytes="))
        .filter(|s| !s.contains(','))
    else {
        return Want::Whole;
    };
    let Some((a, b)) = spec.trim().split_once('-') else {
        return Want::Whole;
    };
    let num = |s: &str| s.trim().parse::<u64>().ok();
    match (a.trim().is_empty(), b.trim().is_empty()) {
        (true, false) => match num(b) {
            Some(0) => Want::Unsatisfiable,
            Some(_) if size == 0 => Want::Unsatisfiable,
            Some(n) => Want::Part(size - n.min(size), size),
            None => Want::Whole,
        },
        (false, _) => match (num(a), if b.trim().is_empty() { None } else { num(b) }) {
            (Some(start), _) if start >= size => Want::Unsatisfiable,
            (Some(start), None) if b.trim().is_empty() => Want::Part(start, size),
            (Some(start), Some(last)) if last >= start => {
                Want::Part(start, last.saturating_add(1).min(size))
            }
            _ => Want::Whole,
        },
        (true, true) => Want::Whole,
    }
}

/// How a file of type `mime` is shown: inline for raster images and PDFs, which a browser
/// shows without running anything; anything else (SVG, HTML, text, …) is a download.
fn disposition(mime: &str, name: &str) -> String {
    let inline =
        (mime.starts_with("image/") && !mime.starts_with("image/svg")) || mime == "application/pdf";
    let ascii: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() && c != '"' && c != '\\' || c == ' ' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut encoded = String::new();
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b"!#$&+-.^_`|~".contains(&b) {
            encoded.push(char::from(b));
        } else {
            encoded.push_str(&format!("%{b:02X}"));
        }
    }
    let kind = if inline { "inline" } else { "attachment" };
    format!("{kind}; filename=\"{ascii}\"; filename*=UTF-8''{encoded}")
}

/// The entity tag of a file: the SHA-256 of its chunk list (its content, named).
fn etag(r: &FileRecord) -> String {
    let mut h = Sha256::new();
    for c in &r.chunks {
        h.update(c.as_bytes());
        h.update(b"\n");
    }
    let digest = h.finalize();
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("\"{hex}\"")
}

/// Downloads a file (`HEAD`: its headers alone). One `Range` is honoured (206, or 416 past the
/// end); the body streams a chunk at a time. `Content-Type` is the type duet sniffed, with
/// `nosniff`.
#[utoipa::path(get, path = "/threads/{key}/files/{path}", tag = "files", params(
        ("key" = String, Path, description = "The thread's key (percent-encoded)"),
        ("path" = String, Path, description = "The file's path, `/`s and all"),
        ("Range" = Option<String>, Header, description = "`bytes=a-b`, `bytes=a-` or `bytes=-n`")),
    responses((status = 200, description = "The file", content_type = "application/octet-stream", body = Vec<u8>),
        (status = 206, description = "The range asked for (`Content-Range`)", content_type = "application/octet-stream", body = Vec<u8>),
        (status = 404, description = "No such thread or file", body = crate::problem::ProblemBody),
        (status = 409, description = "A directory is at the path", body = crate::problem::ProblemBody),
        (status = 416, description = "The range starts past the end (`Content-Range: bytes */SIZE`)", body = crate::problem::ProblemBody)))]
pub(crate) async fn download(
    State(state): State<AppState>,
    caller: Caller,
    Path((key, file)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    let t = threads::find(&state, &caller, &key).await?;
    let record = files::file(&state, &t, &format!("/{file}")).await?;
    Ok(serve(&state, &record, &headers))
}

/// `record`'s bytes as a download answers `headers` (its `Range`): the whole file, the range
/// (206), or 416 past the end; as the type duet sniffed, with `nosniff`, inline only for raster
/// images and PDFs. Shared with the inbox, which serves a conversation's attachments.
pub(crate) fn serve(state: &AppState, record: &FileRecord, headers: &HeaderMap) -> Response {
    let size = u64::try_from(record.size).unwrap_or(0);
    let (status, start, end) = match want(headers.get(header::RANGE), size) {
        Want::Whole => (StatusCode::OK, 0, size),
        Want::Part(a, b) => (StatusCode::PARTIAL_CONTENT, a, b),
        Want::Unsatisfiable => {
            let mut r = Problem::new(
                StatusCode::RANGE_NOT_SATISFIABLE,
                "range_not_satisfiable",
                format!("the file is {size} bytes"),
            )
            .into_response();
            if let Ok(v) = HeaderValue::from_str(&format!("bytes */{size}")) {
                r.headers_mut().insert(header::CONTENT_RANGE, v);
            }
            return r;
        }
    };
    let mime = record
        .mime_type
        .clone()
        .unwrap_or_else(|| "application/octet-stream".to_owned());
    let body = Body::from_stream(files::bytes(state, record, start, end));
    let mut response = Response::new(body);
    *response.status_mut() = status;
    let h = response.headers_mut();
    let mut set = |name: header::HeaderName, value: String| {
        if let Ok(v) = HeaderValue::from_str(&value) {
            h.insert(name, v);
        }
    };
    set(header::CONTENT_TYPE, mime.clone());
    set(header::X_CONTENT_TYPE_OPTIONS, "nosniff".to_owned());
    set(
        header::CONTENT_DISPOSITION,
        disposition(&mime, record.name()),
    );
    set(header::ETAG, etag(record));
    set(header::ACCEPT_RANGES, "bytes".to_owned());
    set(header::CONTENT_LENGTH, (end - start).to_string());
    if status == StatusCode::PARTIAL_CONTENT {
        set(
            header::CONTENT_RANGE,
            format!("bytes {start}-{}/{size}", end.saturating_sub(1)),
        );
    }
    response
}

/// Removes a file.
#[utoipa::path(delete, path = "/threads/{key}/files/{path}", tag = "files", params(
        ("key" = String, Path, description = "The thread's key (percent-encoded)"),
        ("path" = String, Path, description = "The file's path, `/`s and all")),
    responses((status = 204, description = "Removed"),
        (status = 404, description = "No such thread or file", body = crate::problem::ProblemBody),
        (status = 409, description = "A directory is at the path", body = crate::problem::ProblemBody)))]
pub(crate) async fn remove(
    State(state): State<AppState>,
    caller: Caller,
    Path((key, file)): Path<(String, String)>,
) -> Result<StatusCode, Problem> {
    let t = threads::find(&state, &caller, &key).await?;
    files::remove(&state, &t, &format!("/{file}")).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_read_as_rfc_9110_says() {
        let cases = [
            ("bytes=0-9", 100, Want::Part(0, 10)),
            ("bytes=90-", 100, Want::Part(90, 100)),
            ("bytes=-10", 100, Want::Part(90, 100)),
            ("bytes=-500", 100, Want::Part(0, 100)),
            ("bytes=50-500", 100, Want::Part(50, 100)),
            ("bytes=100-", 100, Want::Unsatisfiable),
            ("bytes=100-200", 100, Want::Unsatisfiable),
            ("bytes=-0", 100, Want::Unsatisfiable),
            ("bytes=0-", 0, Want::Unsatisfiable),
            ("bytes=9-1", 100, Want::Whole),
            ("bytes=0-1,5-6", 100, Want::Whole),
            ("items=0-1", 100, Want::Whole),
            ("bytes=x-1", 100, Want::Whole),
        ];
        for (header, size, expected) in cases {
            let v = HeaderValue::from_static(header);
            assert_eq!(want(Some(&v), size), expected, "{header}");
        }
        assert_eq!(want(None, 5), Want::Whole);
    }

    #[test]
    fn only_raster_images_and_pdfs_are_inline() {
        assert!(disposition("image/png", "a.png").starts_with("inline"));
        assert!(disposition("application/pdf", "a.pdf").starts_with("inline"));
        for mime in ["image/svg+xml", "text/html", "application/octet-stream"] {
            assert!(disposition(mime, "x").starts_with("attachment"), "{mime}");
        }
        assert_eq!(
            disposition("text/plain", "résumé \"1\".txt"),
            "attachment; filename=\"r_sum_ _1_.txt\"; filename*=UTF-8''r%C3%A9sum%C3%A9%20%221%22.txt"
        );
    }
}
