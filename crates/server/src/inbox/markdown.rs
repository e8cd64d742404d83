//! Markdown from agents and people, rendered inert: CommonMark (with tables and strikethrough)
//! where raw HTML is shown as text, a link keeps its target only when that is `http`, `https`,
//! `mailto` or relative (a `javascript:`, `data:` or `vbscript:` link becomes its text), every
//! link opens with `rel="noopener noreferrer nofollow"`, and an image is its alt text (nothing
//! is fetched from elsewhere). The page's Content-Security-Policy is the second line of defence.

use pulldown_cmark::{CowStr, Event, Options, Parser, Tag, TagEnd, html};

/// `source` as safe HTML.
pub(crate) fn render(source: &str) -> String {
    let mut options = Options::empty();
    options.insert(Options::ENABLE_TABLES);
    options.insert(Options::ENABLE_STRIKETHROUGH);
    let mut dropped_link = false;
    let mut in_image = 0usize;
    let events = Parser::new_ext(source, options).filter_map(|event| match event {
        // Whatever HTML the source holds is shown, not interpreted.
        Event::Html(raw) | Event::InlineHtml(raw) => Some(Event::Text(raw)),
        Event::Start(Tag::Link { dest_url, .. }) => match safe_url(&dest_url) {
            true => Some(Event::InlineHtml(CowStr::from(format!(
                "<a href=\"{}\" rel=\"noopener noreferrer nofollow\">",
                attribute(&dest_url)
            )))),
            false => {
                dropped_link = true;
                None
            }
        },
        Event::End(TagEnd::Link) => match std::mem::take(&mut dropped_link) {
            true => None,
            false => Some(Event::InlineHtml(CowStr::from("</a>"))),
        },
        // An image is its alt text: the text events between its start and end.
        Event::Start(Tag::Image { .. }) => {
            in_image += 1;
            None
        }
        Event::End(TagEnd::Image) => {
            in_image = in_image.saturating_sub(1);
            None
        }
        other => Some(other),
    });
    let mut out = String::with_capacity(source.len() * 3 / 2);
    html::push_html(&mut out, events);
    out
}

/// Whether a link may point at `url`: `http`, `https`, `mailto`, or no scheme at all (a path or
/// a fragment). Judged as a browser reads it: with the whitespace and control characters a
/// browser strips from a scheme removed, case-insensitively.
fn safe_url(url: &str) -> bool {
    let plain: String = url
        .chars()
        .filter(|c| !c.is_whitespace() && !c.is_control())
        .collect::<String>()
        .to_ascii_lowercase();
    let scheme_end = plain.find(':');
    let path_start = plain.find(['/', '?', '#']);
    match (scheme_end, path_start) {
        // A colon after the first `/`, `?` or `#` is in the path, not a scheme.
        (None, _) => true,
        (Some(colon), Some(path)) if path < colon => true,
        (Some(colon), _) => matches!(&plain[..colon], "http" | "https" | "mailto"),
    }
}

/// `s` escaped for a double-quoted HTML attribute.
fn attribute(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `tests/markdown/NAME.md` renders to `NAME.html` (`DUET_BLESS=1` rewrites them), and
    /// no output holds a script, an event handler, an image or a link that is not plain.
    #[test]
    fn the_corpus_renders_as_recorded_and_inert() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/markdown");
        let bless = std::env::var("DUET_BLESS").is_ok_and(|v| v == "1");
        let mut cases = 0;
        for entry in std::fs::read_dir(&dir).expect("tests/markdown") {
            let path = entry.expect("entry").path();
            if path.extension().is_none_or(|e| e != "md") {
                continue;
            }
            cases += 1;
            let source = std::fs::read_to_string(&path).expect("read");
            let html = render(&source);
            // Every tag the output holds (text is escaped, so a `<` opens a real tag).
            for tag in html
                .split('<')
                .skip(1)
                .filter_map(|t| t.split_once('>').map(|(t, _)| t))
            {
                let tag = tag.to_ascii_lowercase();
                let name = tag
                    .trim_start_matches('/')
                    .split([' ', '\n'])
                    .next()
                    .unwrap_or_default();
                assert!(
                    !matches!(
                        name,
                        "script" | "iframe" | "img" | "style" | "object" | "embed"
                    ),
                    "{}: <{tag}>",
                    path.display()
                );
                assert!(
                    !tag.contains(" on"),
                    "{}: an event handler in <{tag}>",
                    path.display()
                );
                if let Some(href) = tag.split("href=\"").nth(1) {
                    assert!(
                        safe_url(href.split('"').next().unwrap_or_default()),
                        "{}: <{tag}>",
                        path.display()
                    );
                }
            }
            let expected = path.with_extension("html");
            if bless {
                std::fs::write(&expected, &html).expect("bless");
            } else {
                let want = std::fs::read_to_string(&expected).unwrap_or_else(|_| {
                    panic!("{} is missing: run with DUET_BLESS=1", expected.display())
                });
                assert_eq!(html, want, "{}", path.display());
            }
        }
        assert!(cases >= 5, "the corpus is in {}", dir.display());
    }

    #[test]
    fn only_plain_schemes_keep_a_link() {
        for ok in [
            "https://example.com",
            "http://x",
            "mailto:a@b.c",
            "/inbox",
            "#top",
            "a/b:c",
        ] {
            assert!(safe_url(ok), "{ok}");
        }
        for bad in [
            "javascript:alert(1)",
            "JavaScript:alert(1)",
            "java\tscript:alert(1)",
            " javascript:alert(1)",
            "data:text/html,<script>",
            "vbscript:x",
        ] {
            assert!(!safe_url(bad), "{bad}");
        }
    }
}
