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

/// Matches `path` (`/orders/42`, under the api prefix) against `route`: each segment's rank and
/// the params, or `None`.
fn matches(route: &str, path: &str) -> Option<(Vec<Rank>, BTreeMap<String, String>)> {
    let split = |p: &str| -> Vec<String> {
        p.split('/')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let (pattern, given) = (split(route), split(path));
    let mut ranks = Vec::new();
    let mut params = BTreeMap::new();
    for (i, seg) in pattern.iter().enumerate() {
        if seg == "[*]" || seg == "[...]" {
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
        } else if seg == value {
            ranks.push(Rank::Static);
        } else {
            return None;
        }
    }
    (given.len() == pattern.len()).then_some((ranks, params))
}

impl crate::Project {
    /// The endpoint for `method` and `path` (under `/threads/{key}/api`): of the routes that
    /// match, the one whose segments, left to right, are most specific (static over `[name]`
    /// over `[*]`). `Err` with the methods the path answers when it matches only under others
    /// (a 405), `Ok(None)` when nothing matches (a 404).
    pub fn endpoint(
        &self,
        method: &str,
        path: &str,
    ) -> Result<Option<EndpointMatch<'_>>, Vec<String>> {
        let method = method.to_ascii_uppercase();
        // HEAD is answered by a GET endpoint when there is no HEAD one.
        let mut best: Option<(Vec<Rank>, EndpointMatch<'_>)> = None;
        let mut others = Vec::new();
        for def in &self.endpoints {
            let Some((ranks, params)) = matches(&def.route, path) else {
                continue;
            };
            if def.method != method {
                others.push(def.method.clone());
                continue;
            }
            if best.as_ref().is_none_or(|(r, _)| ranks < *r) {
                best = Some((ranks, EndpointMatch { def, params }));
            }
        }
        match best {
            Some((_, m)) => Ok(Some(m)),
            None if others.is_empty() => Ok(None),
            None => {
                others.sort();
                others.dedup();
                Err(others)
            }
        }
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
}
