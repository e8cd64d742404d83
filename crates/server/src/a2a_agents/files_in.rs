//! A message's `file` parts as thread files (#34): a part of bytes (`raw`, base64) is decoded
//! and checked against the per-file limit with the message, before anything is read or
//! written; a part that points at a `url` is fetched under the push guard ([`super::fetch`]).
//! All of a message's files land in one transaction under `/attachments/<name>` (the part's
//! `filename` made safe, else `part-N`; a name that holds other content is numbered), and the
//! message names them as its attachments. A part refused, or past the thread's limits, is an
//! invalid-params error naming the part, with nothing written.

use base64::Engine as _;
use duet_a2a::A2aError;
use duet_runtime::files::{ATTACHMENTS, FileError, FileWrite, path};
use duet_runtime::{Thread, ThreadFiles};

use crate::input::{self, Fault};
use crate::state::AppState;

/// One file part of a message, checked.
pub(crate) struct Incoming {
    /// Its index among the message's parts.
    pub index: usize,
    /// The part's `filename`, as sent.
    pub filename: Option<String>,
    /// The part's `mediaType`, as sent.
    pub media_type: Option<String>,
    /// Its content, or where to fetch it.
    pub source: Source,
}

/// Where a file part's content is.
pub(crate) enum Source {
    /// Decoded from the part's `raw`.
    Bytes(Vec<u8>),
    /// At the part's `url`.
    Url(String),
}

impl Incoming {
    /// The field a refusal names (`message.parts[i].raw` or `.url`).
    pub(crate) fn field(&self) -> String {
        match self.source {
            Source::Bytes(_) => format!("message.parts[{}].raw", self.index),
            Source::Url(_) => format!("message.parts[{}].url", self.index),
        }
    }

    /// The name it is stored under: its `filename` made one safe segment, else `part-N`.
    fn name(&self) -> String {
        match self.filename.as_deref().filter(|f| !f.trim().is_empty()) {
            Some(f) => path::safe_name(f),
            None => format!("part-{}", self.index),
        }
    }
}

/// An invalid-params error about part `field`.
pub(crate) fn refused(field: &str, why: impl Into<String>) -> A2aError {
    let why = why.into();
    A2aError::invalid_params(
        format!("{field} cannot be used: {why}"),
        vec![(field.to_owned(), why)],
    )
}

/// A media type a file part may declare: `type/subtype`, printable, at most 127 bytes.
fn media_type(field: &str, m: &str) -> Result<(), A2aError> {
    let token = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "!#$&-^_.+".contains(c))
    };
    let ok = m.len() <= 127
        && m.split_once('/').is_some_and(|(t, rest)| {
            let sub = rest.split(';').next().unwrap_or_default().trim();
            token(t) && token(sub) && !rest.chars().any(char::is_control)
        });
    if ok {
        return Ok(());
    }
    let shown: String = m.chars().take(64).collect();
    Err(refused(
        field,
        format!(
            "must be a media type (type/subtype), not `{}`",
            shown.escape_debug()
        ),
    ))
}

/// Part `i`'s bytes (`raw`, base64), checked: a media type that is one, bytes that are
/// base64 and not empty, at most `max` of them (the per-file limit).
pub(crate) fn raw(
    i: usize,
    data: &str,
    (media, filename): (Option<&str>, Option<&str>),
    max: u64,
) -> Result<Incoming, A2aError> {
    let raw_field = format!("message.parts[{i}].raw");
    if let Some(m) = media {
        media_type(&format!("message.parts[{i}].mediaType"), m)?;
    }
    if data.is_empty() {
        return Err(refused(&raw_field, "is empty"));
    }
    // Base64 is 4 characters for 3 bytes: a part far past the limit is refused unread.
    if (data.len() as u64 / 4).saturating_mul(3) > max.saturating_add(3) {
        return Err(too_large(&raw_field, data.len() as u64 / 4 * 3, max));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|e| refused(&raw_field, format!("is not base64 (RFC 4648, padded): {e}")))?;
    if bytes.len() as u64 > max {
        return Err(too_large(&raw_field, bytes.len() as u64, max));
    }
    if let Some(f) = filename {
        input::text(&format!("message.parts[{i}].filename"), f).map_err(Fault::into_a2a)?;
    }
    Ok(Incoming {
        index: i,
        filename: filename.map(str::to_owned),
        media_type: media.map(str::to_owned),
        source: Source::Bytes(bytes),
    })
}

/// Part `i`'s `url`, checked as far as it can be without a request: an http(s) URL.
pub(crate) fn url(
    i: usize,
    url: &str,
    (media, filename): (Option<&str>, Option<&str>),
) -> Result<Incoming, A2aError> {
    let field = format!("message.parts[{i}].url");
    let parsed = url::Url::parse(url).map_err(|e| refused(&field, format!("not a URL: {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(refused(&field, "only http and https URLs are fetched"));
    }
    if let Some(m) = media {
        media_type(&format!("message.parts[{i}].mediaType"), m)?;
    }
    if let Some(f) = filename {
        input::text(&format!("message.parts[{i}].filename"), f).map_err(Fault::into_a2a)?;
    }
    Ok(Incoming {
        index: i,
        filename: filename.map(str::to_owned),
        media_type: media.map(str::to_owned),
        source: Source::Url(url.to_owned()),
    })
}

/// A part over the per-file limit.
fn too_large(field: &str, size: u64, limit: u64) -> A2aError {
    refused(
        field,
        format!("the file is {size} bytes, over the limit of {limit} bytes per file"),
    )
    .with("limit", limit.to_string())
}

/// A file error about part `p` as the client's error (a store failure is the server's).
fn file_error(p: &Incoming, e: FileError) -> A2aError {
    match e {
        FileError::Store(e) => A2aError::internal(e),
        FileError::TooLarge { what, size, limit } => refused(
            &p.field(),
            format!("{what}: {size} bytes would pass the limit of {limit} bytes"),
        )
        .with("limit", limit.to_string()),
        other => refused(&p.field(), other.to_string()),
    }
}

/// `parts` with every `url` fetched (under the push guard, at most the per-file limit): all
/// bytes, or the first refusal, before anything is opened or written.
pub(crate) async fn fetched(
    state: &AppState,
    parts: Vec<Incoming>,
) -> Result<Vec<Incoming>, A2aError> {
    let max = state.runtime().files().limits().max_file_bytes;
    let mut out = Vec::with_capacity(parts.len());
    for mut p in parts {
        if let Source::Url(u) = &p.source {
            let allow = state.options().allow_private_push;
            let (bytes, served) = super::fetch::get(u, allow, max)
                .await
                .map_err(|why| refused(&p.field(), why))?;
            if p.media_type.is_none() {
                p.media_type = served;
            }
            if p.filename.is_none() {
                p.filename = url::Url::parse(u).ok().and_then(|u| {
                    u.path_segments()
                        .and_then(|mut s| s.next_back().map(str::to_owned))
                        .filter(|s| !s.is_empty())
                });
            }
            p.source = Source::Bytes(bytes);
        }
        out.push(p);
    }
    Ok(out)
}

/// Stores `parts` (fetched: [`fetched`]) as files of `t` under `/attachments`, all in one
/// transaction: the paths, in the parts' order. Nothing is written when one is refused.
pub(crate) async fn store(
    state: &AppState,
    t: &Thread,
    parts: Vec<Incoming>,
) -> Result<Vec<String>, A2aError> {
    let files: &ThreadFiles = state.runtime().files();
    let mut pending: Vec<FileWrite> = Vec::new();
    let mut paths: Vec<String> = Vec::new();
    for p in parts {
        let Source::Bytes(bytes) = &p.source else {
            continue;
        };
        let name = p.name();
        // The chunks first (content-addressed: chunks no row names are harmless), then the
        // free name for them, then the rows, planned over this message's earlier ones.
        let record = files
            .store_bytes(
                &format!("{ATTACHMENTS}/{name}"),
                bytes,
                p.media_type.as_deref(),
            )
            .await
            .map_err(|e| file_error(&p, e))?;
        let at = files
            .free_path(t.id, (ATTACHMENTS, &name), &record.chunks, &pending, &paths)
            .await
            .map_err(|e| file_error(&p, e))?;
        let record = duet_runtime::files::FileRecord {
            path: at.clone(),
            ..record
        };
        let writes = files
            .plan_put(t.id, record, &pending)
            .await
            .map_err(|e| file_error(&p, e))?;
        pending.extend(writes);
        paths.push(at);
    }
    if !pending.is_empty() {
        files.apply(t.id, pending).await.map_err(|e| match e {
            FileError::Store(e) => A2aError::internal(e),
            other => refused("message.parts", other.to_string()),
        })?;
    }
    Ok(paths)
}
