//! A message's attachments on the inbox's pages — a raster image (PNG, JPEG, GIF, WebP by the
//! file's type) shown inline, anything else (PDFs and SVGs included) a download link with its
//! name, type and size — and `GET /inbox/items/{id}/files/{thread}/{*path}`, which serves them
//! on the session cookie to whoever may open the item's page, and only files a message of that
//! page's conversation attaches (`service::files::attached`).

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use duet_runtime::ThreadId;
use duet_runtime::files::AttachmentRef;
use maud::{Markup, html};

use super::viewer::Viewer;
use crate::body::Path;
use crate::problem::Problem;
use crate::service::files;
use crate::state::AppState;
use crate::views::segment;

/// Where a page's attachments are read: the item the page is (its approval id) and the thread
/// holding the message (the item's, or a parent's).
#[derive(Clone, Copy)]
pub(crate) struct Where<'a> {
    pub item: &'a str,
    pub thread: ThreadId,
}

impl Where<'_> {
    /// The inbox's URL of the file at `path`.
    fn url(&self, path: &str) -> String {
        let encoded: Vec<String> = path
            .split('/')
            .filter(|s| !s.is_empty())
            .map(segment)
            .collect();
        format!(
            "/inbox/items/{}/files/{}/{}",
            segment(self.item),
            self.thread,
            encoded.join("/")
        )
    }
}

/// Whether a file of type `mime` is shown inline: raster images a browser draws without running
/// anything. Never an SVG (it may carry script), never a PDF (a viewer of its own).
fn inline(mime: &str) -> bool {
    let bare = mime.split(';').next().unwrap_or_default().trim();
    ["image/png", "image/jpeg", "image/gif", "image/webp"]
        .iter()
        .any(|t| bare.eq_ignore_ascii_case(t))
}

/// `bytes` for people: `512 B`, `1.2 KB`, `34 MB` (powers of 1000).
pub(crate) fn size(bytes: i64) -> String {
    const UNITS: [&str; 4] = ["KB", "MB", "GB", "TB"];
    if bytes < 1000 {
        return format!("{} B", bytes.max(0));
    }
    #[allow(clippy::cast_precision_loss)] // a size to one decimal
    let mut v = bytes as f64 / 1000.0;
    let mut unit = 0;
    while v >= 1000.0 && unit + 1 < UNITS.len() {
        v /= 1000.0;
        unit += 1;
    }
    // Rounded as shown: 999.96 KB is 1.0 MB, not 1000 KB.
    if v >= 999.95 && unit + 1 < UNITS.len() {
        v /= 1000.0;
        unit += 1;
    }
    if v < 10.0 {
        format!("{v:.1} {}", UNITS[unit])
    } else {
        format!("{v:.0} {}", UNITS[unit])
    }
}

/// A message's attachments (nothing when it has none).
pub(crate) fn list(attachments: &[AttachmentRef], at: Where<'_>) -> Markup {
    html! {
        @if !attachments.is_empty() {
            ul.attachments aria-label="Attachments" {
                @for a in attachments {
                    @let url = at.url(&a.path);
                    @if inline(&a.mime_type) {
                        li.attachment.image data-path=(a.path) {
                            a href=(url) target="_blank" rel="noopener" {
                                img src=(url) alt=(a.name) width=[a.width] height=[a.height];
                            }
                            span.file-meta { (a.name) " — " (a.mime_type) ", " (size(a.size)) }
                        }
                    } @else {
                        li.attachment.file data-path=(a.path) {
                            a href=(url) download=(a.name) { (a.name) }
                            span.file-meta { " — " (a.mime_type) ", " (size(a.size)) }
                        }
                    }
                }
            }
        }
    }
}

/// `GET /inbox/items/{id}/files/{thread}/{*path}`: an attachment of the item's conversation, as
/// the API's download serves it (`Range`, `nosniff`, the sniffed type).
pub(crate) async fn serve(
    State(state): State<AppState>,
    viewer: Viewer,
    Path((id, thread, path)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Result<Response, Problem> {
    let thread: ThreadId = thread
        .parse()
        .map_err(|_| Problem::not_found(format!("no thread `{thread}` on this page")))?;
    let record = files::attached(&state, &viewer.caller, &id, thread, &format!("/{path}")).await?;
    Ok(crate::routes::files::serve(&state, &record, &headers))
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes_read_for_people() {
        for (bytes, said) in [
            (0, "0 B"),
            (999, "999 B"),
            (1_000, "1.0 KB"),
            (1_234_567, "1.2 MB"),
            (34_000_000, "34 MB"),
            (999_960, "1.0 MB"),
            (5_000_000_000_000_000, "5000 TB"),
        ] {
            assert_eq!(super::size(bytes), said, "{bytes}");
        }
    }

    #[test]
    fn only_raster_images_are_inline() {
        for (mime, shown) in [
            ("image/png", true),
            ("image/JPEG", true),
            ("image/gif", true),
            ("image/webp", true),
            ("image/svg+xml", false),
            ("application/pdf", false),
            ("text/html", false),
            ("image/png; charset=x", true),
        ] {
            assert_eq!(super::inline(mime), shown, "{mime}");
        }
    }
}
