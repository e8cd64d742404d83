//! A question's `deadline` (a duet extension): on a human side (`sideB: {human: true,
//! deadline: {...}}`) its parks, on a tool's `approval` its pending calls, do not wait forever.
//! `after` a duration the `default` answers (a text for a question, `approve` or `reject` for a
//! call); `remind` lists durations after the ask at which the person is reminded; `escalate`
//! names who may answer too from its `after` on. Every field is optional; at least one action.

use serde::{Deserialize, Serialize};

use crate::decision::{Approvers, Decision};
use crate::decode::Ctx;
use crate::issue::{Code, Issue};
use crate::node::{Node, Value};

/// The longest duration a deadline takes: ten years (a due time stays far inside `i64` ms).
pub const MAX_DURATION_MS: u64 = 10 * 365 * 86_400_000;

/// A question's deadline: what happens, and when (ms after the ask).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Deadline {
    /// `after`: when `default` answers, in ms after the ask.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<u64>,
    /// `default`: the answer given at `after` when nobody answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<DeadlineDefault>,
    /// `remind`: when to remind, each in ms after the ask (each fires once).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remind: Vec<u64>,
    /// `escalate`: who may answer too from its `after` on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalate: Option<Escalation>,
}

impl Deadline {
    /// Whether it does anything.
    pub fn acts(&self) -> bool {
        self.default.is_some() || !self.remind.is_empty() || self.escalate.is_some()
    }
}

/// The answer a deadline gives.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum DeadlineDefault {
    /// A question's: the answer's text.
    Answer(String),
    /// A pending tool call's: `approve`, or `reject` with a reason.
    Decide {
        /// `approve` or `reject`.
        decision: Decision,
        /// `reject`: why.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
}

impl DeadlineDefault {
    /// In words, for listings: the text, or `reject: REASON` / `approve`.
    pub fn describe(&self) -> String {
        match self {
            DeadlineDefault::Answer(text) => text.clone(),
            DeadlineDefault::Decide {
                decision,
                reason: Some(r),
            } => format!("{}: {r}", decision.as_str()),
            DeadlineDefault::Decide { decision, .. } => decision.as_str().to_owned(),
        }
    }
}

/// `deadline.escalate`: from `after` on, these may answer too.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Escalation {
    /// `after`: ms after the ask.
    pub after: u64,
    /// `roles` and `principals`.
    #[serde(flatten)]
    pub to: Approvers,
}

/// What the deadline is on: its `default` takes a different shape on each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum On {
    /// A human side's question: a text.
    Question,
    /// A tool's approval: a decision.
    Approval,
}

const FIELDS: &[&str] = &["after", "default", "remind", "escalate"];
const ESCALATE_FIELDS: &[&str] = &["after", "roles", "principals"];
const DEFAULT_FIELDS: &[&str] = &["decision", "reason"];

/// A duration: whole milliseconds, or a string `90s`, `15m`, `48h`, `3d` (`ms` too).
pub fn parse_duration(text: &str) -> Option<u64> {
    let text = text.trim();
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (n, unit) = text.split_at(digits);
    let n: u64 = n.parse().ok()?;
    let scale = match unit.trim() {
        "" | "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return None,
    };
    let ms = n.checked_mul(scale)?;
    (1..=MAX_DURATION_MS).contains(&ms).then_some(ms)
}

/// A duration in words: `48h`, `90s`, `1500ms` (the largest whole unit).
pub fn format_duration(ms: u64) -> String {
    for (unit, scale) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1_000),
    ] {
        if ms >= scale && ms.is_multiple_of(scale) {
            return format!("{}{unit}", ms / scale);
        }
    }
    format!("{ms}ms")
}

fn duration(ctx: &mut Ctx<'_>, node: &Node, path: &str) -> Option<u64> {
    let parsed = match &node.value {
        Value::Number(n) => n.as_u64().filter(|ms| (1..=MAX_DURATION_MS).contains(ms)),
        Value::String(s) => parse_duration(s),
        _ => None,
    };
    if parsed.is_none() {
        ctx.push(
            Issue::new(
                Code::DeadlineDuration,
                format!(
                    "`{path}` is a duration: whole milliseconds, or a number with `s`, `m`, `h` or `d` (`90s`, `48h`, `3d`), at least 1 ms and at most 10 years; not {}",
                    node.kind()
                ),
            )
            .at(ctx.file, path, Some(node.span))
            .hint("write e.g. `after: 48h`"),
        );
    }
    parsed
}

/// Reads `deadline` at `node` (its path `path`), on a question or an approval.
pub(crate) fn decode(ctx: &mut Ctx<'_>, node: &Node, path: &str, on: On) -> Option<Deadline> {
    let mut o = ctx.object(node, path)?;
    let after_span = o.key_span("after");
    let has_after = o.has("after");
    let after = o
        .take("after")
        .and_then(|n| duration(ctx, n, &format!("{path}.after")));
    let default_node = o.take("default");
    let default = default_node.and_then(|n| default(ctx, n, &format!("{path}.default"), on));
    let remind_node = o.take("remind");
    let mut remind = Vec::new();
    if let Some(n) = remind_node {
        let rpath = format!("{path}.remind");
        // One duration alone is a list of one.
        let items: Vec<&Node> = match &n.value {
            Value::Array(items) => items.iter().collect(),
            _ => vec![n],
        };
        for (i, item) in items.into_iter().enumerate() {
            let at = if matches!(n.value, Value::Array(_)) {
                format!("{rpath}[{i}]")
            } else {
                rpath.clone()
            };
            if let Some(ms) = duration(ctx, item, &at) {
                if let (Some(a), Some(_)) = (after, &default)
                    && ms >= a
                {
                    late(ctx, &at, item, "reminder", a);
                }
                if !remind.contains(&ms) {
                    remind.push(ms);
                }
            }
        }
        remind.sort_unstable();
    }
    let escalate_node = o.take("escalate");
    let escalate = escalate_node.and_then(|n| {
        let default_after = after.filter(|_| default.is_some());
        escalation(ctx, n, &format!("{path}.escalate"), default_after)
    });
    if default_node.is_some() && !has_after {
        ctx.push(
            Issue::new(
                Code::MissingField,
                format!("`{path}.default` answers at `{path}.after`, which is missing"),
            )
            .at(
                ctx.file,
                &format!("{path}.default"),
                default_node.map(|n| n.span),
            )
            .hint("say when: `after: 48h`"),
        );
    }
    if after.is_some() && default_node.is_none() {
        ctx.push(
            Issue::new(
                Code::MissingField,
                format!(
                    "`{path}.after` is when `{path}.default` answers, and there is no `default`"
                ),
            )
            .at(ctx.file, &format!("{path}.after"), Some(after_span))
            .hint(match on {
                On::Question => "add `default: \"...\"` (the answer given when nobody answered)",
                On::Approval => "add `default: reject` (or `approve`)",
            }),
        );
    }
    let span = o.span;
    o.finish(ctx, FIELDS);
    let deadline = Deadline {
        after: after.filter(|_| default.is_some()),
        default: default.filter(|_| after.is_some()),
        remind,
        escalate,
    };
    if !deadline.acts()
        && !has_after
        && default_node.is_none()
        && remind_node.is_none()
        && escalate_node.is_none()
    {
        ctx.push(
            Issue::new(
                Code::DeadlineNoAction,
                format!("`{path}` does nothing: it has no `default`, `remind` or `escalate`"),
            )
            .at(ctx.file, path, Some(span))
            .hint("add `after` with a `default`, `remind: [24h]`, or `escalate: { after: 24h, roles: [...] }`"),
        );
    }
    Some(deadline)
}

fn late(ctx: &mut Ctx<'_>, at: &str, node: &Node, what: &str, after: u64) {
    ctx.push(
        Issue::new(
            Code::DeadlineAfterDefault,
            format!(
                "this {what} is due at or after the default answers ({}): it never happens",
                format_duration(after)
            ),
        )
        .at(ctx.file, at, Some(node.span))
        .hint("make it sooner than `after`, or remove it"),
    );
}

fn default(ctx: &mut Ctx<'_>, node: &Node, path: &str, on: On) -> Option<DeadlineDefault> {
    match on {
        On::Question => {
            let text = ctx.string(node, path)?;
            if text.trim().is_empty() {
                ctx.report(
                    Code::InvalidValue,
                    format!("`{path}` is the answer given when nobody answered; it is empty"),
                    path,
                    node.span,
                );
                return None;
            }
            Some(DeadlineDefault::Answer(text))
        }
        On::Approval => {
            let (word, reason, span) = match &node.value {
                Value::String(s) => (s.clone(), None, node.span),
                Value::Object(_) => {
                    let mut o = ctx.object(node, path)?;
                    let dpath = o.path("decision");
                    let word = match o.take("decision") {
                        Some(n) => ctx.string(n, &dpath).map(|w| (w, n.span)),
                        None => {
                            ctx.report(
                                Code::MissingField,
                                format!("`{path}` needs a `decision` (`approve` or `reject`)"),
                                path,
                                node.span,
                            );
                            None
                        }
                    };
                    let reason = o.string(ctx, "reason");
                    o.finish(ctx, DEFAULT_FIELDS);
                    let (word, span) = word?;
                    (word, reason, span)
                }
                _ => {
                    ctx.report(
                        Code::WrongType,
                        format!(
                            "`{path}` is `approve`, `reject` or `{{ decision: reject, reason: ... }}`, not {}",
                            node.kind()
                        ),
                        path,
                        node.span,
                    );
                    return None;
                }
            };
            let decision = match Decision::parse(&word) {
                Some(d @ (Decision::Approve | Decision::Reject)) => d,
                _ => {
                    ctx.report(
                        Code::InvalidValue,
                        format!(
                            "a deadline's default decision is `approve` or `reject`, not `{word}`"
                        ),
                        path,
                        span,
                    );
                    return None;
                }
            };
            let reason = reason.filter(|_| decision == Decision::Reject);
            Some(DeadlineDefault::Decide { decision, reason })
        }
    }
}

fn escalation(
    ctx: &mut Ctx<'_>,
    node: &Node,
    path: &str,
    default_after: Option<u64>,
) -> Option<Escalation> {
    let mut o = ctx.object(node, path)?;
    let after = match o.take("after") {
        Some(n) => {
            let ms = duration(ctx, n, &format!("{path}.after"));
            if let (Some(ms), Some(a)) = (ms, default_after)
                && ms >= a
            {
                late(ctx, &format!("{path}.after"), n, "escalation", a);
            }
            ms
        }
        None => {
            ctx.report(
                Code::MissingField,
                format!("`{path}` needs `after`: when it escalates"),
                path,
                node.span,
            );
            None
        }
    };
    let roles = o.strings(ctx, "roles");
    let principals = o.strings(ctx, "principals");
    let span = o.span;
    o.finish(ctx, ESCALATE_FIELDS);
    if roles.is_empty() && principals.is_empty() {
        ctx.push(
            Issue::new(
                Code::DeadlineEscalateNobody,
                format!(
                    "`{path}` names nobody: it would make the question answerable by no one new"
                ),
            )
            .at(ctx.file, path, Some(span))
            .hint("name `roles: [...]` (API key roles) or `principals: [...]`"),
        );
        return None;
    }
    Some(Escalation {
        after: after?,
        to: Approvers { roles, principals },
    })
}

/// On a tool's approval: a default decision its `decisions` do not offer.
pub(crate) fn check_offered(
    ctx: &mut Ctx<'_>,
    deadline: &Deadline,
    decisions: &[Decision],
    path: &str,
    node: &Node,
) {
    if let Some(DeadlineDefault::Decide { decision, .. }) = &deadline.default
        && !decisions.contains(decision)
    {
        let span = node.get("default").map_or(node.span, |n| n.span);
        ctx.push(
            Issue::new(
                Code::DeadlineDefaultNotOffered,
                format!(
                    "`{path}.default` decides `{}`, which `approval.decisions` does not offer",
                    decision.as_str()
                ),
            )
            .at(ctx.file, &format!("{path}.default"), Some(span))
            .hint(format!(
                "add `{}` to `approval.decisions`",
                decision.as_str()
            )),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90s"), Some(90_000));
        assert_eq!(parse_duration("15m"), Some(900_000));
        assert_eq!(parse_duration("48h"), Some(172_800_000));
        assert_eq!(parse_duration("3d"), Some(259_200_000));
        assert_eq!(parse_duration("250ms"), Some(250));
        assert_eq!(parse_duration("250"), Some(250));
        for bad in ["", "h", "0s", "1w", "-1s", "1.5h", "99999999999d"] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
        assert_eq!(format_duration(172_800_000), "2d");
        assert_eq!(format_duration(90_000), "90s");
        assert_eq!(format_duration(1_500), "1500ms");
    }
}
