//! Thread endpoints (`agents/api/`, `defineThreadEndpoint`): files routed under a thread by their
//! path (`agents/api/orders/[id].get.ts` is `GET /threads/{key}/api/orders/[id]`). duet reads
//! and checks them; serving them needs the code host, so each is a warning that it is not
//! served yet.

use crate::eval::{EvalError, Evaluated, JsValue};
use crate::issue::{Code, Issue};
use crate::node::Span;

const METHODS: &[&str] = &["get", "post", "put", "patch", "delete", "head", "options"];

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

/// The issues of the endpoint file `path` (`text`), evaluated as `evaluation` when an evaluator
/// ran it.
pub(crate) fn check(
    path: &str,
    text: &str,
    evaluation: Option<&Result<Evaluated, EvalError>>,
) -> Vec<Issue> {
    let (def, mut issues) = crate::ts::parse_source(text, crate::ts_file::is_js(path));
    if issues.iter().any(|i| i.code == Code::TsSyntax) {
        return located(issues, path);
    }
    let at = def.as_ref().map_or(Span::new(1, 1), |d| d.span);
    let (method, route) = route(path);
    let define = match evaluation {
        Some(Err(e)) => return vec![crate::evaluated::issue(path, e, at)],
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
    match define.as_deref() {
        Some("defineThreadEndpoint") => issues.push(
            Issue::new(
                Code::TsFunctionNotRun,
                format!("thread endpoint `{method} /threads/{{key}}/api{route}` is read, but duet does not run a definition's functions yet, so it is not served"),
            )
            .at(path, "", Some(at)),
        ),
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
    located(issues, path)
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
