//! One `.ts`/`.js` definition file into its located value tree: read statically, and, when an
//! evaluator ran it, its computed value laid over that reading (`evaluated.rs`).

use std::collections::BTreeSet;

use crate::Kind;
use crate::eval::{EvalError, Evaluated};
use crate::evaluated;
use crate::issue::{Code, Issue};
use crate::node::{Node, Span};
use crate::ts;

/// What reading a `.ts`/`.js` file gives.
pub(crate) struct TsFile {
    /// The definition's value tree; `None` when there is none to decode.
    pub(crate) node: Option<Node>,
    /// The file's issues (an empty `file` is set by the caller; an evaluation
    /// that failed in a helper names the helper).
    pub(crate) issues: Vec<Issue>,
    /// The paths whose value was a zod schema (see [`evaluated::Laid::schemas`]).
    pub(crate) schemas: BTreeSet<String>,
    /// Whether the value was computed by evaluating the file.
    pub(crate) evaluated: bool,
}

/// Reads `text` (the file at `path`, of `kind` in `agents/{folder}/`), with `evaluation` the
/// evaluator's result for it when one ran.
pub(crate) fn read(
    path: &str,
    text: &str,
    kind: Kind,
    folder: &str,
    evaluation: Option<&Result<Evaluated, EvalError>>,
) -> TsFile {
    let (def, mut issues) = ts::parse_source(text, is_js(path));
    let mut out = TsFile {
        node: None,
        issues: Vec::new(),
        schemas: BTreeSet::new(),
        evaluated: false,
    };
    // Two default exports are not a module an engine loads: the static reader reports them
    // and reads the first, which says more than the engine's redefinition error would.
    let two_exports = issues
        .iter()
        .any(|i| i.code == Code::TsMultipleDefaultExports);
    let evaluation = evaluation.filter(|_| !two_exports);
    let Some(evaluation) = evaluation else {
        // Static reading only.
        out.node = def.map(|d| {
            check_define(&mut issues, path, kind, folder, &d.function, d.span);
            d.node
        });
        out.issues = issues;
        return out;
    };
    if issues.iter().any(|i| i.code == Code::TsSyntax) {
        // The evaluator could not have run it either; oxc's message is the better one.
        out.issues = issues;
        return out;
    }
    // What needs evaluation is evaluated: the static reader's complaints about it are moot,
    // and so is its wish for `export default defineX({...})` written out.
    issues.retain(|i| !matches!(i.code, Code::TsNotStatic | Code::TsNoDefinition));
    for i in issues.iter_mut().filter(|i| i.code == Code::DuplicateKey) {
        // Evaluated, JavaScript keeps the last value written, not the first.
        i.hint = Some("remove one of them; the last one written is used".into());
    }
    let at = def
        .as_ref()
        .map_or_else(|| export_position(text), |d| d.span);
    match evaluation {
        Err(error) => {
            let at = match (&error.path, &def) {
                (Some(p), Some(d)) => evaluated::locate(&d.node, p),
                _ => at,
            };
            issues.push(evaluated::issue(path, error, at));
        }
        Ok(ev) => match &ev.define {
            None => issues.push(
                Issue::new(
                    Code::TsNoDefinition,
                    if ev.value == crate::eval::JsValue::Undefined {
                        "the file has no `export default`"
                    } else {
                        "the default export was not made by a define function"
                    },
                )
                .at("", "", Some(at))
                .hint(format!(
                    "export what `{}({{ ... }})` returns",
                    kind.define_function()
                )),
            ),
            Some(function) => {
                check_define(&mut issues, path, kind, folder, function, at);
                let laid = evaluated::lay(&ev.value, def.as_ref().map(|d| &d.node), at);
                out.node = Some(laid.node);
                out.schemas = laid.schemas;
                out.evaluated = true;
            }
        },
    }
    out.issues = issues;
    out
}

/// Whether `path` is JavaScript rather than TypeScript.
pub(crate) fn is_js(path: &str) -> bool {
    path.ends_with(".js") || path.ends_with(".mjs")
}

/// Where `export default` is written, else the file's start.
fn export_position(text: &str) -> Span {
    let lines = crate::node::LineIndex::new(text);
    text.find("export default")
        .map_or(Span::new(1, 1), |offset| lines.span(offset))
}

fn check_define(
    issues: &mut Vec<Issue>,
    path: &str,
    kind: Kind,
    folder: &str,
    function: &str,
    at: Span,
) {
    if function == kind.define_function() {
        return;
    }
    let correct = Kind::ALL
        .into_iter()
        .find(|k| k.define_function() == function);
    let message = match correct {
        Some(k) => format!(
            "`{function}` defines a {}, but `agents/{folder}/` holds {}s",
            k.noun(),
            kind.noun()
        ),
        None => format!(
            "`{function}` is not a Standard Agents define function; `agents/{folder}/` files call `{}`",
            kind.define_function()
        ),
    };
    issues.push(
        Issue::new(Code::WrongDefineFunction, message)
            .at(path, "", Some(at))
            .hint(format!(
                "call `{}`, or move the file to the folder of its kind",
                kind.define_function()
            )),
    );
}
