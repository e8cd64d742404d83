//! Thread files a message names ([`crate::files::AttachmentRef`]), turned into what a model is
//! sent: an image (png, jpeg, gif, webp, by the type the file was stored with) of at most
//! [`MAX_IMAGE_BYTES`] becomes an image part, a PDF of at most [`MAX_DOCUMENT_BYTES`] a document
//! part, each when the model's definition does not say it takes none; anything else (another
//! type, too large, a file no longer there) becomes a line of the message's text
//! ([`crate::model::attachment_line`]), so the model knows the file exists and can read it with
//! a tool. Bytes are read through [`ThreadFiles`] when the step builds its request.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use crate::files::{AttachmentRef, FileRecord};
use crate::model::{ChatMessage, DocumentRef, attachment_line};
use crate::thread_files::ThreadFiles;
use crate::types::{ImageRef, ThreadId};

/// The largest image sent as an image part.
pub(crate) const MAX_IMAGE_BYTES: i64 = 5 * 1024 * 1024;
/// The largest PDF sent as a document part.
pub(crate) const MAX_DOCUMENT_BYTES: i64 = 10 * 1024 * 1024;

/// The most attachment bytes one request carries as parts: past it, older messages' files go
/// as lines (the newest messages' first), so a long history of files never outgrows what a
/// provider takes in one request.
pub(crate) const MAX_REQUEST_BYTES: i64 = 20 * 1024 * 1024;

/// The image types a model is sent as images.
const IMAGE_TYPES: &[&str] = &["image/png", "image/jpeg", "image/gif", "image/webp"];
/// The document types a model is sent as documents.
const DOCUMENT_TYPES: &[&str] = &["application/pdf"];

/// What a model takes, from its definition's `capabilities` (unset: taken).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Takes {
    pub(crate) images: bool,
    pub(crate) documents: bool,
}

impl Takes {
    /// What the model `name` of `project` takes (a model the project does not define: all).
    pub(crate) fn of(project: &duet_spec::Project, name: &str) -> Takes {
        let caps = project.models.get(name).map(|d| &d.def.capabilities);
        Takes {
            images: caps.is_none_or(|c| c.supports_images != Some(false)),
            documents: caps.is_none_or(|c| c.supports_documents != Some(false)),
        }
    }
}

/// How one attachment is sent.
#[derive(Debug, PartialEq, Eq)]
enum Part {
    Image,
    Document,
    Line,
}

fn part(record: &FileRecord, takes: Takes) -> Part {
    let mime = record.mime_type.as_deref().unwrap_or_default();
    if takes.images && IMAGE_TYPES.contains(&mime) && record.size <= MAX_IMAGE_BYTES {
        Part::Image
    } else if takes.documents && DOCUMENT_TYPES.contains(&mime) && record.size <= MAX_DOCUMENT_BYTES
    {
        Part::Document
    } else {
        Part::Line
    }
}

/// Turns each message's `attachments` (drained) into images, documents or lines of its text,
/// reading the files of `thread` through `files`. Only a `user` message (what the acting side
/// is sent) carries parts — providers take images and documents there alone — and at most
/// [`MAX_REQUEST_BYTES`] of them in all, the newest messages first; the rest, and a file that
/// cannot be read (gone, a store failure), are sent as their lines.
pub(crate) async fn load(
    files: &ThreadFiles,
    thread: ThreadId,
    messages: &mut [ChatMessage],
    takes: Takes,
) {
    let mut budget = MAX_REQUEST_BYTES;
    for m in messages.iter_mut().rev() {
        let mut lines = Vec::new();
        let mut parts: Vec<Loaded> = Vec::new();
        let takes_parts = if m.role == crate::types::Role::User {
            takes
        } else {
            Takes {
                images: false,
                documents: false,
            }
        };
        for a in std::mem::take(&mut m.attachments) {
            let takes = if a.size > budget {
                Takes {
                    images: false,
                    documents: false,
                }
            } else {
                takes_parts
            };
            let loaded = one(files, thread, &a, takes).await;
            if !matches!(loaded, Loaded::Line(_)) {
                budget -= a.size;
            }
            parts.push(loaded);
        }
        for loaded in parts {
            match loaded {
                Loaded::Image(i) => m.images.push(i),
                Loaded::Document(d) => m.documents.push(d),
                Loaded::Line(l) => lines.push(l),
            }
        }
        if lines.is_empty() {
            continue;
        }
        let lines = lines.join("\n");
        m.content = Some(match m.content.take().filter(|c| !c.is_empty()) {
            Some(text) => format!("{text}\n\n{lines}"),
            None => lines,
        });
    }
}

enum Loaded {
    Image(ImageRef),
    Document(DocumentRef),
    Line(String),
}

async fn one(files: &ThreadFiles, thread: ThreadId, a: &AttachmentRef, takes: Takes) -> Loaded {
    let line = |r: Option<&FileRecord>| {
        Loaded::Line(match r {
            Some(r) => attachment_line(
                &r.path,
                r.mime_type.as_deref().unwrap_or(&a.mime_type),
                r.size,
            ),
            None => attachment_line(&a.path, &a.mime_type, a.size),
        })
    };
    let record = match files.file(thread, &a.path).await {
        Ok(r) => r,
        Err(e) => {
            tracing::debug!(path = %a.path, error = %e, "an attachment is sent as its line");
            return line(None);
        }
    };
    let kind = part(&record, takes);
    if kind == Part::Line {
        return line(Some(&record));
    }
    let bytes = match files.content(&record).await {
        Ok(b) => b,
        Err(e) => {
            tracing::warn!(path = %a.path, error = %e, "an attachment could not be read");
            return line(Some(&record));
        }
    };
    let mime_type = record.mime_type.clone().unwrap_or_default();
    let data = STANDARD.encode(bytes);
    match kind {
        Part::Image => Loaded::Image(ImageRef { mime_type, data }),
        _ => Loaded::Document(DocumentRef {
            path: record.path,
            mime_type,
            size: record.size,
            data,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(mime: &str, size: i64) -> FileRecord {
        let mut r = FileRecord::directory("/attachments/x".into(), 0);
        r.kind = crate::files::FileKind::File;
        r.mime_type = Some(mime.into());
        r.size = size;
        r
    }

    #[test]
    fn parts_by_type_size_and_capability() {
        let all = Takes {
            images: true,
            documents: true,
        };
        let none = Takes {
            images: false,
            documents: false,
        };
        let cases: &[(&str, i64, Takes, Part)] = &[
            ("image/png", 10, all, Part::Image),
            ("image/webp", MAX_IMAGE_BYTES, all, Part::Image),
            ("image/jpeg", MAX_IMAGE_BYTES + 1, all, Part::Line),
            ("image/png", 10, none, Part::Line),
            ("image/bmp", 10, all, Part::Line),
            ("application/pdf", MAX_DOCUMENT_BYTES, all, Part::Document),
            ("application/pdf", MAX_DOCUMENT_BYTES + 1, all, Part::Line),
            ("application/pdf", 10, none, Part::Line),
            ("text/csv", 10, all, Part::Line),
        ];
        for (mime, size, takes, want) in cases {
            assert_eq!(&part(&record(mime, *size), *takes), want, "{mime} {size}");
        }
    }

    #[test]
    fn lines_name_path_type_and_size() {
        assert_eq!(
            attachment_line("/attachments/x.csv", "text/csv", 12 * 1024),
            "[attachment /attachments/x.csv, text/csv, 12 KB]"
        );
        assert_eq!(
            attachment_line("/a", "text/plain", 5),
            "[attachment /a, text/plain, 5 bytes]"
        );
        assert_eq!(
            attachment_line("/b.pdf", "application/pdf", 11 * 1024 * 1024 / 2),
            "[attachment /b.pdf, application/pdf, 5.5 MB]"
        );
    }
}
