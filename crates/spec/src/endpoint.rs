//! Thread endpoints (`agents/api/`, `defineThreadEndpoint`): files routed under a thread by their
//! path (`agents/api/orders/[id].get.ts` is `GET /threads/{key}/api/orders/[id]`), read and
//! checked into [`EndpointDef`]s; [`crate::Project::endpoint`] finds the one a request is for
//! (static segments over `[name]` over `[*]`). The code host serves them.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::code::CodeRef;
use crate::eval::{EvalError, Evaluated, JsValue};
use crate::issue::{Code, Issue};
use crate::node::Span;

const METHODS: &[&str] = &["get", "post", "put", "patch", "delete", "head", "options"];

/// A thread endpoint: its file's route and method, and its handler.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EndpointDef {
    /// The file (`agents/api/orders/[id].get.ts`).
    pub file: String,
    /// `GET`, `POST`…
    pub method: String,
    /// The route under `/threads/{key}/api` (`/orders/[id]`).
    pub route: String,
    /// The handler `defineThreadEndpoint` was given.
    pub code: CodeRef,
}

/// The endpoint a request is for, and what its dynamic segments captured (`[*]` as `*`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointMatch<'p> {
    /// The endpoint.
    pub def: &'p EndpointDef,
    /// `params`: each `[name]` segment's value, and `*` for a `[*]` (segments joined by `/`).
    pub params: BTreeMap<String, String>,
}

/// How a route segment matches: the precedence order, best first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Rank {
    Static,
    Dynamic,
    CatchAll,
}

/// `%XX` escapes of one path segment decoded (a `%` not followed by two hex digits is kept as
/// it is; bytes that are not UTF-8 become U+FFFD).
fn decoded(segment: &str) -> String {
    let hex = |b: u8| {
        char::from(b)
            .to_digit(16)
            .and_then(|d| u8::try_from(d).ok())
    };
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let escaped = (b == b'%')
            .then(|| Some((hex(*bytes.get(i + 1)?)?, hex(*bytes.get(i + 2)?)?)))
            .flatten();
        match escaped {
            Some((hi, lo)) => {
                out.push((hi << 4) | lo);
                i += 3;
            }
            None => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Matches `path` (`/orders/42`, under the api prefix, as sent: each segment is
/// percent-decoded after the path is split at its `/`s, so an encoded `%2F` stays inside its
/// segment) against `route`: each segment's rank and the params, or `None`.
fn matches(route: &str, path: &str) -> Option<(Vec<Rank>, BTreeMap<String, String>)> {
    let pattern: Vec<&str> = route.split('/').filter(|s| !s.is_empty()).collect();
    let given: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(decoded)
        .collect();
    let mut ranks = Vec::new();
    let mut params = BTreeMap::new();
    for (i, seg) in pattern.iter().enumerate() {
        if *seg == "[*]" || *seg == "[...]" {
            // A catch-all takes the rest, zero or more segments, and must be last.
            if i + 1 != pattern.len() {
                return None;
            }
            params.insert("*".to_owned(), given.get(i..).unwrap_or_default().join("/"));
            ranks.push(Rank::CatchAll);
            return Some((ranks, params));
        }
        let value = given.get(i)?;
        if let Some(name) = seg.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
            params.insert(name.to_owned(), value.clone());
            ranks.push(Rank::Dynamic);
        } else if *seg == value {
            ranks.push(Rank::Static);
        } else {
            return None;
        }
    }
    (given.len() == pattern.len()).then_some((ranks, params))
}

impl crate::Project {
    /// The endpoint for `method` (any case) and `path` (under `/threads/{key}/api`, as sent):
    /// of the routes that match, the one whose segments, left to right, are most specific
    /// (static over `[name]` over `[*]`). A `HEAD` with no `HEAD` endpoint is answered by the
    /// `GET` one (the server sends its headers alone). `Err` with the methods the path answers
    /// (sorted; `HEAD` wherever `GET` is) when it matches only under others (a 405, their
    /// `Allow`), `Ok(None)` when nothing matches (a 404).
    pub fn endpoint(
        &self,
        method: &str,
        path: &str,
    ) -> Result<Option<EndpointMatch<'_>>, Vec<String>> {
        let method = method.to_ascii_uppercase();
        let mut found = self.best(&method, path);
        if found.is_none() && method == "HEAD" {
            found = self.best("GET", path);
        }
        if let Some(m) = found {
            return Ok(Some(m));
        }
        let mut allowed: Vec<String> = self
            .endpoints
            .iter()
            .filter(|def| matches(&def.route, path).is_some())
            .map(|def| def.method.clone())
            .collect();
        if allowed.is_empty() {
            return Ok(None);
        }
        if allowed.iter().any(|m| m == "GET") {
            allowed.push("HEAD".to_owned());
        }
        allowed.sort();
        allowed.dedup();
        Err(allowed)
    }

    /// Of the endpoints for `method` (upper case) whose route matches `path`, the most
    /// specific.
    fn best(&self, method: &str, path: &str) -> Option<EndpointMatch<'_>> {
        let mut best: Option<(Vec<Rank>, EndpointMatch<'_>)> = None;
        for def in self.endpoints.iter().filter(|d| d.method == method) {
            let Some((ranks, params)) = matches(&def.route, path) else {
                continue;
            };
            if best.as_ref().is_none_or(|(r, _)| ranks < *r) {
                best = Some((ranks, EndpointMatch { def, params }));
            }
        }
        best.map(|(_, m)| m)
    }
}

/// Whether `path` is a thread endpoint's file.
pub(crate) fn is_endpoint(path: &str) -> bool {
    path.strip_prefix("agents/api/").is_some_and(|rest| {
        !rest.ends_with(".d.ts") && [".ts", ".js", ".mjs"].iter().any(|e| rest.ends_with(e))
    })
}

/// The method and route of the endpoint file `path` (`GET`, `/orders/[id]`).
pub(crate) fn route(path: &str) -> (String, String) {
    let rest = path.strip_prefix("agents/api/").unwrap_or(path);
    let stem = [".ts", ".mjs", ".js"]
        .iter()
        .find_map(|e| rest.strip_suffix(e))
        .unwrap_or(rest);
    // The method suffix matches in any case; a file without one answers GET.
    let (stem, method) = match stem.rsplit_once('.') {
        Some((s, m)) if METHODS.contains(&m.to_ascii_lowercase().as_str()) => {
            (s, m.to_ascii_uppercase())
        }
        _ => (stem, "GET".to_owned()),
    };
    let stem = stem
        .strip_suffix("/index")
        .or_else(|| (stem == "index").then_some(""))
        .unwrap_or(stem);
    (method, format!("/{stem}"))
}

/// The endpoint of file `path` (`text`), evaluated as `evaluation` when an evaluator ran it,
/// and its issues.
pub(crate) fn check(
    path: &str,
    text: &str,
    evaluation: Option<&Result<Evaluated, EvalError>>,
) -> (Option<EndpointDef>, Vec<Issue>) {
    let (def, mut issues) = crate::ts::parse_source(text, crate::ts_file::is_js(path));
    if issues.iter().any(|i| i.code == Code::TsSyntax) {
        return (None, located(issues, path));
    }
    let at = def.as_ref().map_or(Span::new(1, 1), |d| d.span);
    let (method, route) = route(path);
    let define = match evaluation {
        Some(Err(e)) => return (None, vec![crate::evaluated::issue(path, e, at)]),
        Some(Ok(ev)) => {
            issues.clear();
            match (&ev.define, &ev.value) {
                (Some(f), JsValue::Object(_)) => Some(f.clone()),
                _ => None,
            }
        }
        // Read statically, a handler is no literal: only the file's syntax is checked.
        None => {
            issues.clear();
            Some("defineThreadEndpoint".to_owned())
        }
    };
    let mut endpoint = None;
    match define.as_deref() {
        Some("defineThreadEndpoint") => {
            endpoint = Some(EndpointDef {
                file: path.to_owned(),
                method,
                route,
                code: CodeRef::at(&["handler"]),
            });
        }
        Some(other) => issues.push(
            Issue::new(
                Code::WrongDefineFunction,
                format!("`{other}` is not a thread endpoint; `agents/api/` files export `defineThreadEndpoint(handler)`"),
            )
            .at(path, "", Some(at)),
        ),
        None => issues.push(
            Issue::new(
                Code::TsNoDefinition,
                "a thread endpoint's file exports `defineThreadEndpoint(async (req, state, params) => Response)`",
            )
            .at(path, "", Some(at)),
        ),
    }
    (endpoint, located(issues, path))
}

fn located(mut issues: Vec<Issue>, path: &str) -> Vec<Issue> {
    for i in &mut issues {
        i.file = Some(path.to_owned());
    }
    issues
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_come_from_paths() {
        assert_eq!(
            route("agents/api/orders/[id].get.ts"),
            ("GET".to_owned(), "/orders/[id]".to_owned())
        );
        assert_eq!(
            route("agents/api/status.ts"),
            ("GET".to_owned(), "/status".to_owned())
        );
        assert_eq!(
            route("agents/api/status.POST.ts"),
            ("POST".to_owned(), "/status".to_owned())
        );
        assert_eq!(
            route("agents/api/files/[*].post.js"),
            ("POST".to_owned(), "/files/[*]".to_owned())
        );
        assert_eq!(
            route("agents/api/index.get.ts"),
            ("GET".to_owned(), "/".to_owned())
        );
        assert!(is_endpoint("agents/api/a/b.ts"));
        assert!(!is_endpoint("agents/api/types.d.ts"));
        assert!(!is_endpoint("agents/tools/a.ts"));
    }

    /// A project whose endpoints are these files, in this order.
    fn project(files: &[&str]) -> crate::Project {
        crate::Project {
            endpoints: files
                .iter()
                .map(|file| {
                    let (method, route) = route(file);
                    EndpointDef {
                        file: (*file).to_owned(),
                        method,
                        route,
                        code: CodeRef::at(&["handler"]),
                    }
                })
                .collect(),
            ..crate::Project::default()
        }
    }

    /// The file answering `method path`, and its params as `name=value` pairs.
    fn answer(p: &crate::Project, method: &str, path: &str) -> Option<(String, Vec<String>)> {
        let found = p.endpoint(method, path).expect("not a 405")?;
        let params = found
            .params
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        Some((found.def.file.clone(), params))
    }

    fn file(p: &crate::Project, method: &str, path: &str) -> Option<String> {
        answer(p, method, path).map(|(f, _)| f)
    }

    #[test]
    fn static_beats_dynamic_beats_catch_all_whatever_the_file_order() {
        let p = project(&[
            "agents/api/orders/[*].get.ts",
            "agents/api/orders/[id].get.ts",
            "agents/api/orders/latest.get.ts",
        ]);
        assert_eq!(
            answer(&p, "GET", "/orders/latest"),
            Some(("agents/api/orders/latest.get.ts".to_owned(), vec![]))
        );
        assert_eq!(
            answer(&p, "GET", "/orders/42"),
            Some((
                "agents/api/orders/[id].get.ts".to_owned(),
                vec!["id=42".to_owned()]
            ))
        );
        assert_eq!(
            answer(&p, "GET", "/orders/42/lines/7"),
            Some((
                "agents/api/orders/[*].get.ts".to_owned(),
                vec!["*=42/lines/7".to_owned()]
            ))
        );
    }

    #[test]
    fn segments_are_ranked_left_to_right() {
        // The first segment decides: a static one over a dynamic one, however the rest reads.
        let p = project(&[
            "agents/api/[kind]/list.get.ts",
            "agents/api/users/[*].get.ts",
        ]);
        assert_eq!(
            answer(&p, "GET", "/users/list"),
            Some((
                "agents/api/users/[*].get.ts".to_owned(),
                vec!["*=list".to_owned()]
            ))
        );
        assert_eq!(
            answer(&p, "GET", "/teams/list"),
            Some((
                "agents/api/[kind]/list.get.ts".to_owned(),
                vec!["kind=teams".to_owned()]
            ))
        );
        let p = project(&["agents/api/a/[x]/c.get.ts", "agents/api/a/b/[y].get.ts"]);
        assert_eq!(
            file(&p, "GET", "/a/b/c").as_deref(),
            Some("agents/api/a/b/[y].get.ts")
        );
    }

    #[test]
    fn a_catch_all_takes_zero_or_more_segments() {
        let p = project(&["agents/api/files/[*].ts"]);
        assert_eq!(
            answer(&p, "GET", "/files"),
            Some(("agents/api/files/[*].ts".to_owned(), vec!["*=".to_owned()]))
        );
        assert_eq!(
            answer(&p, "GET", "/files/"),
            Some(("agents/api/files/[*].ts".to_owned(), vec!["*=".to_owned()]))
        );
        assert_eq!(
            answer(&p, "GET", "/files/a/b.txt"),
            Some((
                "agents/api/files/[*].ts".to_owned(),
                vec!["*=a/b.txt".to_owned()]
            ))
        );
        assert_eq!(file(&p, "GET", "/other"), None);
        // The folder's own route is more specific than its catch-all's empty match.
        let p = project(&["agents/api/files/[*].ts", "agents/api/files/index.ts"]);
        assert_eq!(
            file(&p, "GET", "/files").as_deref(),
            Some("agents/api/files/index.ts")
        );
        assert_eq!(
            file(&p, "GET", "/files/x").as_deref(),
            Some("agents/api/files/[*].ts")
        );
    }

    #[test]
    fn a_dynamic_segment_takes_exactly_one() {
        let p = project(&["agents/api/orders/[id].get.ts"]);
        assert_eq!(file(&p, "GET", "/orders"), None);
        assert_eq!(file(&p, "GET", "/orders/1/2"), None);
        // Empty segments do not count: `//` and a trailing `/` are the same path.
        assert_eq!(
            answer(&p, "GET", "//orders//9/"),
            Some((
                "agents/api/orders/[id].get.ts".to_owned(),
                vec!["id=9".to_owned()]
            ))
        );
    }

    #[test]
    fn segments_are_decoded_after_the_split() {
        let p = project(&["agents/api/notes/[name].get.ts", "agents/api/a b.get.ts"]);
        // `%2F` is a slash inside one segment, not a separator.
        assert_eq!(
            answer(&p, "GET", "/notes/a%2Fb%20c"),
            Some((
                "agents/api/notes/[name].get.ts".to_owned(),
                vec!["name=a/b c".to_owned()]
            ))
        );
        assert_eq!(
            file(&p, "GET", "/a%20b").as_deref(),
            Some("agents/api/a b.get.ts")
        );
        // A `%` that starts no escape is itself; bytes that are not UTF-8 are replaced.
        assert_eq!(
            answer(&p, "GET", "/notes/100%").map(|(_, p)| p),
            Some(vec!["name=100%".to_owned()])
        );
        assert_eq!(
            answer(&p, "GET", "/notes/%zz%ff").map(|(_, p)| p),
            Some(vec!["name=%zz\u{fffd}".to_owned()])
        );
    }

    #[test]
    fn index_files_are_their_folders() {
        let p = project(&[
            "agents/api/index.get.ts",
            "agents/api/orders/index.ts",
            "agents/api/orders/index.post.ts",
        ]);
        assert_eq!(
            file(&p, "GET", "/").as_deref(),
            Some("agents/api/index.get.ts")
        );
        assert_eq!(
            file(&p, "GET", "").as_deref(),
            Some("agents/api/index.get.ts")
        );
        assert_eq!(
            file(&p, "GET", "/orders").as_deref(),
            Some("agents/api/orders/index.ts")
        );
        assert_eq!(
            file(&p, "POST", "/orders/").as_deref(),
            Some("agents/api/orders/index.post.ts")
        );
        assert_eq!(file(&p, "GET", "/orders/index"), None);
    }

    #[test]
    fn methods_match_in_any_case() {
        let p = project(&["agents/api/status.Post.ts", "agents/api/status.get.ts"]);
        assert_eq!(
            file(&p, "post", "/status").as_deref(),
            Some("agents/api/status.Post.ts")
        );
        assert_eq!(
            file(&p, "Get", "/status").as_deref(),
            Some("agents/api/status.get.ts")
        );
    }

    #[test]
    fn head_falls_back_to_get_unless_it_has_its_own() {
        let p = project(&["agents/api/report.get.ts"]);
        assert_eq!(
            file(&p, "HEAD", "/report").as_deref(),
            Some("agents/api/report.get.ts")
        );
        let p = project(&["agents/api/report.get.ts", "agents/api/report.head.ts"]);
        assert_eq!(
            file(&p, "HEAD", "/report").as_deref(),
            Some("agents/api/report.head.ts")
        );
    }

    #[test]
    fn a_path_served_under_other_methods_is_a_405_with_them_and_nothing_is_a_404() {
        let p = project(&[
            "agents/api/orders/[id].get.ts",
            "agents/api/orders/[id].delete.ts",
            "agents/api/orders/[*].put.ts",
            "agents/api/status.post.ts",
        ]);
        assert_eq!(
            p.endpoint("PATCH", "/orders/1"),
            Err(vec![
                "DELETE".to_owned(),
                "GET".to_owned(),
                "HEAD".to_owned(),
                "PUT".to_owned()
            ])
        );
        // Only a route that matches the path counts: `[id]` takes no second segment.
        assert_eq!(
            p.endpoint("GET", "/orders/1/2"),
            Err(vec!["PUT".to_owned()])
        );
        assert_eq!(p.endpoint("GET", "/status"), Err(vec!["POST".to_owned()]));
        assert_eq!(p.endpoint("GET", "/nothing"), Ok(None));
        assert_eq!(project(&[]).endpoint("GET", "/"), Ok(None));
    }
}
