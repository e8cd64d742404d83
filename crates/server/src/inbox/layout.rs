//! The inbox's HTML: one layout every page shares, and the pieces pages have in common (how long
//! something has waited, a parent chain, an error page). Templates are `maud` macros: checked
//! when the server compiles, every value escaped unless it is wrapped in `PreEscaped` (only the
//! Markdown renderer's output is).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::{DOCTYPE, Markup, PreEscaped, html};

use super::viewer::Viewer;

/// Which part of the inbox a page is.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Nav {
    Queue,
    History,
    Other,
}

/// A whole page: `title`, the navigation with `current` marked, and `body`.
pub(crate) fn page(title: &str, viewer: Option<&Viewer>, current: Nav, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="color-scheme" content="light dark";
                title { (title) " · duet inbox" }
                link rel="stylesheet" href=(*super::assets::CSS_PATH);
                script src=(*super::assets::JS_PATH) defer {}
            }
            body {
                a.skip href="#main" { "Skip to content" }
                header.top {
                    a.brand href="/inbox" { "duet" span { " inbox" } }
                    @if let Some(viewer) = viewer {
                        nav aria-label="Inbox" {
                            a href="/inbox" aria-current=[(current == Nav::Queue).then_some("page")] { "Waiting" }
                            a href="/inbox/history" aria-current=[(current == Nav::History).then_some("page")] { "History" }
                        }
                        @if let Some(name) = viewer.name() {
                            form.sign-out method="post" action="/inbox/sign-out" {
                                input type="hidden" name="csrf" value=(viewer.token());
                                span.who { "Signed in as " strong { (name) } }
                                button type="submit" { "Sign out" }
                            }
                        }
                    }
                }
                main #main tabindex="-1" { (body) }
            }
        }
    }
}

/// The sign-in page, with why the last try failed.
pub(crate) fn sign_in(next: &str, error: Option<&str>) -> Markup {
    page(
        "Sign in",
        None,
        Nav::Other,
        html! {
            h1 { "Sign in" }
            p { "Sign in with your duet API key to answer what waits for you." }
            @if let Some(error) = error {
                p.error role="alert" { (error) }
            }
            form.stack method="post" action="/inbox/sign-in" {
                input type="hidden" name="next" value=(next);
                label for="key" { "API key" }
                input #key type="password" name="key" autocomplete="current-password"
                    required autofocus placeholder="duet_…";
                button.primary type="submit" { "Sign in" }
            }
        },
    )
}

/// A page saying what went wrong, with `status`.
pub(crate) fn error_page(status: StatusCode, detail: &str) -> Response {
    let body = page(
        status.canonical_reason().unwrap_or("Error"),
        None,
        Nav::Other,
        html! {
            h1 { (status.canonical_reason().unwrap_or("Error")) }
            p.error role="alert" { (detail) }
            p { a href="/inbox" { "Back to the inbox" } }
        },
    );
    (status, body).into_response()
}

/// How long `ms` is, for people: `under a minute`, `4 min`, `3 h`, `2 d` (the page's script
/// says it the same way: `inbox.js`).
pub(crate) fn duration(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    match s {
        0..60 => "under a minute".into(),
        60..3_600 => format!("{} min", s / 60),
        3_600..86_400 => format!("{} h", s / 3_600),
        _ => format!("{} d", s / 86_400),
    }
}

/// A moment as an ISO 8601 UTC timestamp (for `<time datetime>`).
pub(crate) fn iso(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default()
}

/// A moment for people: `2026-12-01 16:05 UTC`.
pub(crate) fn when(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%d %H:%M UTC").to_string())
        .unwrap_or_default()
}

/// How long since `since`, as a `<time>` the page's script keeps current.
pub(crate) fn waited(since: i64, now: i64) -> Markup {
    html! {
        time datetime=(iso(since)) data-since=(since) title=(when(since)) { (duration(now - since)) }
    }
}

/// A question's deadline as of `now`, in words (`expires in 3 h, then the answer is "…"`),
/// when it falls due beside it.
pub(crate) fn deadline(d: &duet_runtime::deadline::Standing, now: i64) -> Markup {
    let due = d.at.or(d.escalate.as_ref().map(|e| e.at));
    html! {
        span.deadline data-deadline=[due] title=[due.map(when)] { (d.sentence(now)) }
    }
}

/// When `ms` ago was, for people: `just now`, `4 min ago`, `3 h ago`.
pub(crate) fn ago_text(ms: i64) -> String {
    if ms < 60_000 {
        "just now".into()
    } else {
        format!("{} ago", duration(ms))
    }
}

/// A moment as `4 min ago` (`just now` within the minute), as a `<time>` the page's script
/// keeps current.
pub(crate) fn ago(since: i64, now: i64) -> Markup {
    html! {
        time datetime=(iso(since)) data-since=(since) data-ago title=(when(since)) { (ago_text(now - since)) }
    }
}

/// The chain from the top-level thread down to `agent`: `orchestrator → approval_gate`.
pub(crate) fn chain<'a>(parents: impl DoubleEndedIterator<Item = &'a str>, agent: &str) -> Markup {
    html! {
        span.chain {
            @for parent in parents.rev() {
                span.agent { (parent) } span.arrow aria-label="then" { " → " }
            }
            span.agent.here { (agent) }
        }
    }
}

/// Markdown from an agent or a person, rendered inert.
pub(crate) fn markdown(source: &str) -> Markup {
    html! { div.md { (PreEscaped(super::markdown::render(source))) } }
}

/// The first `n` characters of `s`, on one line.
pub(crate) fn excerpt(s: &str, n: usize) -> String {
    let line: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(n) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line,
    }
}

#[cfg(test)]
mod tests {
    /// Every phrase a time is said in (never `just now ago`).
    #[test]
    fn times_read_as_sentences() {
        for (ms, waited, ago) in [
            (0, "under a minute", "just now"),
            (59_999, "under a minute", "just now"),
            (60_000, "1 min", "1 min ago"),
            (3_600_000, "1 h", "1 h ago"),
            (2 * 86_400_000, "2 d", "2 d ago"),
            (-5, "under a minute", "just now"),
        ] {
            assert_eq!(
                (super::duration(ms).as_str(), super::ago_text(ms).as_str()),
                (waited, ago),
                "{ms} ms"
            );
        }
    }
}
