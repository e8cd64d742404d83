//! An `http` tool's templates filled in, each value escaped for its place: the URL (where an
//! argument can neither add a path segment, resolve one away with `.` or `..`, nor go unseen
//! when it reaches the host), and the body (JSON-escaped, form-encoded or XML-escaped as its
//! `Content-Type` says).

use duet_runtime::Placeholder;

use crate::secrets::percent_encode;

/// How a template's values are written into it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Escape {
    /// As they are.
    Raw,
    /// Strings JSON-escaped (without quotes), other values as JSON.
    Json,
    /// `application/x-www-form-urlencoded`: every value form-encoded (a `&` or `=` in it
    /// cannot add a field).
    Form,
    /// XML: `&`, `<`, `>`, `"` and `'` as entities.
    Xml,
}

impl Escape {
    /// How a body is escaped for its `Content-Type`: JSON when there is none or it says json,
    /// form-encoded for `application/x-www-form-urlencoded`, XML-escaped for an XML type, and
    /// as is for any other (a format duet knows no escaping for: the definition's author
    /// chose it).
    pub(super) fn for_body(content_type: Option<&str>) -> Escape {
        let Some(ct) = content_type else {
            return Escape::Json;
        };
        let essence = ct
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        if essence.contains("json") {
            Escape::Json
        } else if essence == "application/x-www-form-urlencoded" {
            Escape::Form
        } else if essence.ends_with("/xml") || essence.ends_with("+xml") {
            Escape::Xml
        } else {
            Escape::Raw
        }
    }

    fn apply(self, text: &str) -> String {
        match self {
            Escape::Raw => text.to_owned(),
            Escape::Json => {
                let quoted = serde_json::to_string(text).unwrap_or_default();
                let inner = quoted.strip_prefix('"').and_then(|q| q.strip_suffix('"'));
                inner.unwrap_or_default().to_owned()
            }
            Escape::Form => form_urlencoded::byte_serialize(text.as_bytes()).collect(),
            Escape::Xml => {
                let mut out = String::with_capacity(text.len());
                for c in text.chars() {
                    match c {
                        '&' => out.push_str("&amp;"),
                        '<' => out.push_str("&lt;"),
                        '>' => out.push_str("&gt;"),
                        '"' => out.push_str("&quot;"),
                        '\'' => out.push_str("&apos;"),
                        c => out.push(c),
                    }
                }
                out
            }
        }
    }
}

type Env<'e> = &'e (dyn Fn(&str) -> Option<String> + Sync);

/// `template` with `{{arg}}` and `{{env.NAME}}` filled in as `escape` says; unknown
/// placeholders become empty (as [`duet_runtime::render`]). Env values are escaped too, but
/// for `Raw`; in JSON a non-string argument goes in as JSON.
pub(super) fn fill(
    template: &str,
    args: &serde_json::Value,
    env: Env<'_>,
    escape: Escape,
) -> String {
    duet_runtime::render_with(template, args, env, &|filled| match filled {
        Placeholder::Env(value) => escape.apply(&value),
        Placeholder::Arg(serde_json::Value::String(s)) => escape.apply(s),
        Placeholder::Arg(other) if escape == Escape::Json => other.to_string(),
        Placeholder::Arg(other) => escape.apply(&other.to_string()),
    })
}

/// A filled-in URL template.
#[derive(Debug, PartialEq)]
pub(super) struct FilledUrl {
    /// The URL's text.
    pub text: String,
    /// Whether an argument's value is part of the scheme or authority (before the path
    /// starts): the arguments, not the definition, may then choose where the request goes.
    pub host_from_args: bool,
}

/// Around each argument's value while the URL is examined; removed before it is parsed.
/// (Private-use characters: never in an encoded value, and a URL has no use for them.)
const OPEN: char = '\u{E000}';
const CLOSE: char = '\u{E001}';

/// The URL template filled in: `{{arg}}` values percent-encoded (every byte but
/// `A-Z a-z 0-9 - . _ ~`, so a value is one segment or query value), `{{env.NAME}}` values as
/// they are (a base URL, a key already encoded). Refused when its path would hold a `.` or
/// `..` segment, in any spelling the URL parser resolves (`%2e`, `.%2E`…): the parser, and
/// many servers, would remove it and the segment before it, so a value could change the path.
pub(super) fn fill_url(
    template: &str,
    args: &serde_json::Value,
    env: Env<'_>,
) -> Result<FilledUrl, String> {
    let marked = duet_runtime::render_with(template, args, env, &|filled| match filled {
        Placeholder::Env(value) => value,
        Placeholder::Arg(serde_json::Value::String(s)) => {
            format!("{OPEN}{}{CLOSE}", percent_encode(s))
        }
        Placeholder::Arg(other) => format!("{OPEN}{}{CLOSE}", percent_encode(&other.to_string())),
    });
    let first_arg = marked.find(OPEN);
    let (host_from_args, path) = match marked.find("://") {
        None => (first_arg.is_some(), ""),
        Some(at) => {
            let start = at + 3;
            let end = marked[start..]
                .find(['/', '\\', '?', '#'])
                .map_or(marked.len(), |i| start + i);
            let rest = &marked[end..];
            let path = rest.split(['?', '#']).next().unwrap_or_default();
            (first_arg.is_some_and(|m| m < end), path)
        }
    };
    let unmarked = |s: &str| s.replace([OPEN, CLOSE], "");
    for segment in path.split(['/', '\\']) {
        let segment = unmarked(segment);
        if is_dot_segment(&segment) {
            return Err(format!(
                "its URL's path segment `{segment}` would be resolved away (a `.` or `..` segment \
                 is not a value): the request is not sent"
            ));
        }
    }
    Ok(FilledUrl {
        text: unmarked(&marked),
        host_from_args,
    })
}

/// Whether `segment` is one the URL standard resolves (`.`, `..`, with any dot as `%2e`).
fn is_dot_segment(segment: &str) -> bool {
    matches!(
        segment.to_ascii_lowercase().as_str(),
        "." | ".." | "%2e" | ".%2e" | "%2e." | "%2e%2e"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn env(k: &str) -> Option<String> {
        match k {
            "BASE" => Some("http://h:1/a b".to_owned()),
            "ORIGIN" => Some("http://h.example".to_owned()),
            _ => None,
        }
    }

    #[test]
    fn templates_escape_for_their_place() {
        let args = json!({"q": "a/b c\"", "n": 3, "o": {"k": [1]}});
        let url = fill_url("{{env.BASE}}/s/{{q}}?n={{n}}", &args, &env).expect("a URL");
        assert_eq!(url.text, "http://h:1/a b/s/a%2Fb%20c%22?n=3");
        assert!(!url.host_from_args);
        assert_eq!(
            fill(
                r#"{"q": "{{q}}", "o": {{o}}, "b": "{{env.BASE}}"}"#,
                &args,
                &env,
                Escape::Json
            ),
            r#"{"q": "a/b c\"", "o": {"k":[1]}, "b": "http://h:1/a b"}"#
        );
        assert_eq!(
            fill("{{q}}{{missing}} {{ open", &args, &env, Escape::Raw),
            "a/b c\" {{ open"
        );
        let form = json!({"x": "1&admin=true", "y": "a b+c", "n": 2});
        assert_eq!(
            fill("a={{x}}&b={{y}}&n={{n}}", &form, &env, Escape::Form),
            "a=1%26admin%3Dtrue&b=a+b%2Bc&n=2"
        );
        assert_eq!(
            fill(
                "<a>{{x}}</a>",
                &json!({"x": "</a><b a='1'>&"}),
                &env,
                Escape::Xml
            ),
            "<a>&lt;/a&gt;&lt;b a=&apos;1&apos;&gt;&amp;</a>"
        );
    }

    #[test]
    fn bodies_escape_as_their_content_type_says() {
        for (ct, want) in [
            (None, Escape::Json),
            (Some("application/json; charset=utf-8"), Escape::Json),
            (Some("application/vnd.api+json"), Escape::Json),
            (
                Some("Application/X-WWW-Form-Urlencoded; charset=UTF-8"),
                Escape::Form,
            ),
            (Some("text/xml"), Escape::Xml),
            (Some("application/atom+xml"), Escape::Xml),
            (Some("text/plain"), Escape::Raw),
        ] {
            assert_eq!(Escape::for_body(ct), want, "{ct:?}");
        }
    }

    #[test]
    fn an_argument_before_the_path_chooses_the_host() {
        let args = json!({"host": "a.example", "rest": ".evil.example/x", "p": "x"});
        for (template, from_args) in [
            ("http://{{host}}/x", true),
            ("https://{{host}}:8443", true),
            ("{{env.ORIGIN}}{{rest}}", true),
            ("{{env.BASE}}{{rest}}", false),
            ("http://user:{{p}}@h.example/", true),
            ("{{p}}://h.example/", true),
            ("http://h.example/{{p}}", false),
            ("http://h.example?{{p}}", false),
            ("{{env.BASE}}/{{p}}", false),
        ] {
            let url = fill_url(template, &args, &env).expect("a URL");
            assert_eq!(url.host_from_args, from_args, "{template}");
        }
    }

    #[test]
    fn a_dot_segment_refuses_the_url() {
        for (template, args) in [
            ("http://h/users/{{id}}/profile", json!({"id": ".."})),
            ("http://h/users/{{id}}", json!({"id": "."})),
            ("http://h/files/.{{x}}", json!({"x": "."})),
            ("http://h/a/%2E%2e/b", json!({})),
            ("http://h\\..\\b", json!({})),
        ] {
            assert!(
                fill_url(template, &args, &env).is_err(),
                "{template} {args}"
            );
        }
        for (template, args, want) in [
            (
                "http://h/u/{{id}}/p",
                json!({"id": "..."}),
                "http://h/u/.../p",
            ),
            (
                "http://h/u/{{id}}",
                json!({"id": "%2e%2e"}),
                "http://h/u/%252e%252e",
            ),
            (
                "http://h/u/{{id}}.json",
                json!({"id": ".."}),
                "http://h/u/...json",
            ),
            (
                "http://h/u?q={{id}}",
                json!({"id": ".."}),
                "http://h/u?q=..",
            ),
        ] {
            let url = fill_url(template, &args, &env).expect("a URL");
            assert_eq!(url.text, want, "{template}");
        }
    }
}
