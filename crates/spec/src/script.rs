//! A scripted model's `script` (`agents/models/`, provider `scripted`): one entry per model call
//! (or per `repeat` calls in a row), per thread, in call order; an entry may instead offer
//! `branches`, chosen by what the model was last answered (a tool's result, success or error, or
//! its text), so a scripted gate that is told "no" says no.

use serde::Serialize;

use crate::decode::{Ctx, join};
use crate::issue::Code;
use crate::node::Node;

/// One scripted model response, or (with `branches`) a choice of them.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ScriptEntry {
    /// `text`: the answer's text; an entry needs `text`, `tool_calls` or `branches`.
    pub text: Option<String>,
    /// `thinking`: reasoning streamed before the answer; optional.
    pub thinking: Option<String>,
    /// `tool_calls`: the tools the response calls, in order; default none.
    pub tool_calls: Vec<ScriptToolCall>,
    /// `delayMs`: milliseconds to wait before answering, latency for demos and tests; optional.
    pub delay_ms: Option<u32>,
    /// `branches`: alternative answers for this call; the first whose `when` matches what the
    /// model was answered plays. An entry with `branches` has no answer of its own.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub branches: Vec<ScriptBranch>,
    /// `repeat`: how many calls in a row the entry answers (at least 1); omitted, one. A long
    /// run of like calls (a benchmark's history, a soak) is one entry, not thousands. An entry
    /// with `branches` chooses again on each of its calls.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repeat: Option<u32>,
}

/// One alternative of an entry's `branches`: a condition and the answer it plays (an entry's
/// `text`, `thinking`, `tool_calls`, `delayMs`, written beside `when`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ScriptBranch {
    /// `when`: what the model must have been answered; omitted, the branch always matches (the
    /// fallback, written last).
    pub when: Option<ScriptWhen>,
    /// The answer it plays (never with `branches` of its own).
    #[serde(flatten)]
    pub answer: ScriptEntry,
}

/// A branch's condition over what the model was answered: the messages after its own last
/// answer (all of them before its first). Every field given must hold.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ScriptWhen {
    /// `result`: `error` — a tool result among them failed (a person's rejection included);
    /// `success` — there are tool results, and none failed.
    pub result: Option<ScriptResult>,
    /// `contains`: one of them contains this text, compared case-insensitively.
    pub contains: Option<String>,
}

/// How the tool results the model was answered went (`when.result`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ScriptResult {
    /// Every tool result succeeded.
    Success,
    /// A tool result failed.
    Error,
}

/// One tool call of a scripted response.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ScriptToolCall {
    /// `name`: the tool called; required.
    pub name: String,
    /// `arguments`: the call's argument object; default `{}`.
    pub arguments: serde_json::Value,
}

/// The placeholder a scripted answer's `text` and string arguments may hold: the text of the
/// last message the model was answered (a tool's result, a person's reason, a user's line).
pub const ANSWER_PLACEHOLDER: &str = "{{answer}}";

const ENTRY_FIELDS: &[&str] = &[
    "text",
    "thinking",
    "tool_calls",
    "delayMs",
    "branches",
    "repeat",
];
const BRANCH_FIELDS: &[&str] = &["when", "text", "thinking", "tool_calls", "delayMs"];

pub(crate) fn decode(ctx: &mut Ctx<'_>, node: &Node) -> Vec<ScriptEntry> {
    let mut out = Vec::new();
    for (i, item) in ctx.array(node, "script").iter().enumerate() {
        let path = format!("script[{i}]");
        let Some(mut o) = ctx.object(item, &path) else {
            continue;
        };
        let mut entry = answer(ctx, &mut o, &path);
        entry.repeat = o.count(ctx, "repeat");
        if let Some(branches) = o.take("branches") {
            let branches_path = join(&path, "branches");
            if o.has("text") || o.has("tool_calls") {
                ctx.report(
                    Code::ScriptBranchesMixed,
                    format!(
                        "`{path}` has `branches` and an answer of its own (`text` or `tool_calls`): a branch's answer is written in the branch"
                    ),
                    &branches_path,
                    branches.span,
                );
            }
            entry.branches = decode_branches(ctx, branches, &branches_path);
        } else if !o.has("text") && !o.has("tool_calls") {
            ctx.report(
                Code::MissingField,
                format!("`{path}` needs `text`, `tool_calls` or `branches`"),
                &path,
                item.span,
            );
        }
        o.finish(ctx, ENTRY_FIELDS);
        out.push(entry);
    }
    out
}

fn decode_branches(ctx: &mut Ctx<'_>, node: &Node, path: &str) -> Vec<ScriptBranch> {
    let items = ctx.array(node, path);
    if items.is_empty() && matches!(node.value, crate::node::Value::Array(_)) {
        ctx.report(
            Code::MissingField,
            format!("`{path}` is empty: give at least one branch"),
            path,
            node.span,
        );
    }
    let mut out = Vec::new();
    let mut fallback: Option<usize> = None;
    for (k, item) in items.iter().enumerate() {
        let branch_path = format!("{path}[{k}]");
        let Some(mut b) = ctx.object(item, &branch_path) else {
            continue;
        };
        if let Some(first) = fallback {
            ctx.report(
                Code::ScriptBranchUnreachable,
                format!(
                    "`{branch_path}` never plays: `{path}[{first}]` has no `when` and matches every answer first"
                ),
                &branch_path,
                item.span,
            );
        }
        let when = match b.take("when") {
            None => {
                fallback.get_or_insert(k);
                None
            }
            Some(w) => decode_when(ctx, w, &join(&branch_path, "when")),
        };
        let answer = answer(ctx, &mut b, &branch_path);
        if !b.has("text") && !b.has("tool_calls") {
            ctx.report(
                Code::MissingField,
                format!("`{branch_path}` needs `text` or `tool_calls`"),
                &branch_path,
                item.span,
            );
        }
        b.finish(ctx, BRANCH_FIELDS);
        out.push(ScriptBranch { when, answer });
    }
    out
}

fn decode_when(ctx: &mut Ctx<'_>, node: &Node, path: &str) -> Option<ScriptWhen> {
    let mut w = ctx.object(node, path)?;
    let result = w.take("result").and_then(|n| {
        let at = join(path, "result");
        match ctx.string(n, &at)?.as_str() {
            "success" => Some(ScriptResult::Success),
            "error" => Some(ScriptResult::Error),
            other => {
                ctx.report(
                    Code::InvalidValue,
                    format!("`{at}` is `success` or `error`, not `{other}`"),
                    &at,
                    n.span,
                );
                None
            }
        }
    });
    let contains = w.take("contains").and_then(|n| {
        let at = join(path, "contains");
        ctx.name(n, &at)
    });
    if !w.has("result") && !w.has("contains") {
        ctx.report(
            Code::MissingField,
            format!("`{path}` needs `result` or `contains` (omit `when` for a fallback)"),
            path,
            node.span,
        );
    }
    w.finish(ctx, &["result", "contains"]);
    Some(ScriptWhen { result, contains })
}

/// The answer fields of an entry or a branch (`text`, `thinking`, `tool_calls`, `delayMs`).
fn answer(ctx: &mut Ctx<'_>, o: &mut crate::decode::Obj<'_>, path: &str) -> ScriptEntry {
    let mut entry = ScriptEntry {
        text: o.string(ctx, "text"),
        thinking: o.string(ctx, "thinking"),
        tool_calls: Vec::new(),
        delay_ms: o.count(ctx, "delayMs"),
        branches: Vec::new(),
        repeat: None,
    };
    if let Some(calls) = o.take("tool_calls") {
        let calls_path = join(path, "tool_calls");
        for (j, call) in ctx.array(calls, &calls_path).iter().enumerate() {
            let call_path = format!("{calls_path}[{j}]");
            let Some(mut c) = ctx.object(call, &call_path) else {
                continue;
            };
            let name = c.required_name(ctx, "name");
            let arguments = match c.take("arguments") {
                None => Some(serde_json::Value::Object(serde_json::Map::new())),
                Some(a) => ctx
                    .json_object(a, &join(&call_path, "arguments"))
                    .map(serde_json::Value::Object),
            };
            c.finish(ctx, &["name", "arguments"]);
            if let (Some(name), Some(arguments)) = (name, arguments) {
                entry.tool_calls.push(ScriptToolCall { name, arguments });
            }
        }
    }
    entry
}

impl ScriptEntry {
    /// How many calls in a row the entry answers (`repeat`, one when omitted).
    pub fn calls(&self) -> u64 {
        u64::from(self.repeat.unwrap_or(1).max(1))
    }

    /// The entry of `script` that answers call `index` (from 0), with its position in the
    /// script; `None` past the script's last call.
    pub fn at(script: &[ScriptEntry], index: usize) -> Option<(usize, &ScriptEntry)> {
        let mut left = u64::try_from(index).ok()?;
        for (i, entry) in script.iter().enumerate() {
            if left < entry.calls() {
                return Some((i, entry));
            }
            left -= entry.calls();
        }
        None
    }

    /// Every answer the entry may play, with its path under the entry (`""` for the entry's
    /// own, `.branches[K]` for a branch's).
    pub fn answers(&self) -> Vec<(String, &ScriptEntry)> {
        if self.branches.is_empty() {
            return vec![(String::new(), self)];
        }
        self.branches
            .iter()
            .enumerate()
            .map(|(k, b)| (format!(".branches[{k}]"), &b.answer))
            .collect()
    }
}
