//! A tool's `approval` (a duet extension to tool definitions): its calls wait for a person's
//! decision — always, or when the arguments match a JSON Schema — with the decisions offered,
//! the scopes an approval may be remembered for, and who may answer.

use serde::Serialize;

use crate::deadline::{self, Deadline};
pub use crate::decision::{Approvers, Decision};
use crate::decode::{Ctx, nearest};
use crate::issue::{Code, Issue};
use crate::node::{Node, Value};
use crate::schema;

/// A tool's `approval`: when its calls wait for a person, and what the person may decide.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Approval {
    /// `when`: `always` (the default), or a JSON Schema the arguments must match for the call
    /// to wait.
    pub when: ApprovalWhen,
    /// `decisions`: the decisions a person may make, in the order written; default all four.
    pub decisions: Vec<Decision>,
    /// `remember`: the scopes an approval may be remembered for ("approve for the rest of this
    /// session / thread"); default none.
    pub remember: Vec<RememberScope>,
    /// `approvers`: the roles and principals that may decide; empty, the thread's owner.
    pub approvers: Approvers,
    /// `waivable`: a `tool_call_policy` hook's `allow` may let a call run without asking; default
    /// `false` (a hook may deny or ask, never waive the tool's approval).
    pub waivable: bool,
    /// `deadline` (a duet extension): a pending call does not wait forever — a default
    /// decision after a duration, reminders, escalation.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline: Option<Deadline>,
}

impl Approval {
    /// Whether a call with `args` waits for a decision. A `when` schema that does not compile
    /// (validation reports it) counts as matching: the call waits rather than runs unchecked.
    pub fn applies(&self, args: &serde_json::Value) -> bool {
        match &self.when {
            ApprovalWhen::Always => true,
            ApprovalWhen::Matches(schema) => {
                jsonschema::validator_for(schema).map_or(true, |v| v.is_valid(args))
            }
        }
    }

    /// Whether `decision` is offered.
    pub fn offers(&self, decision: Decision) -> bool {
        self.decisions.contains(&decision)
    }
}

/// `approval.when`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ApprovalWhen {
    /// `always`: every call waits.
    Always,
    /// A JSON Schema over the arguments: the call waits iff they match it.
    Matches(serde_json::Value),
}

/// A scope an approval may be remembered for.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum RememberScope {
    /// The rest of the session the call was made in.
    Session,
    /// The rest of the thread.
    Thread,
}

impl RememberScope {
    /// The name as written.
    pub fn as_str(self) -> &'static str {
        match self {
            RememberScope::Session => "session",
            RememberScope::Thread => "thread",
        }
    }

    /// The scope named `name`.
    pub fn parse(name: &str) -> Option<RememberScope> {
        [RememberScope::Session, RememberScope::Thread]
            .into_iter()
            .find(|s| s.as_str() == name)
    }
}

const APPROVAL_FIELDS: &[&str] = &[
    "when",
    "decisions",
    "remember",
    "approvers",
    "waivable",
    "deadline",
];
const APPROVER_FIELDS: &[&str] = &["roles", "principals"];

/// Reads a tool's `approval`; `args` is the tool's argument schema, if any.
pub(crate) fn decode(
    ctx: &mut Ctx<'_>,
    node: &Node,
    args: Option<&serde_json::Value>,
) -> Option<Approval> {
    let mut o = ctx.object(node, "approval")?;
    // A `when` that cannot be read is reported; the call then always waits (fail closed).
    let when = match o.take("when") {
        None => ApprovalWhen::Always,
        Some(n) if n.as_str() == Some("always") => ApprovalWhen::Always,
        Some(n) if matches!(n.value, Value::Object(_)) => {
            match schema::condition_schema(ctx, n, "approval.when") {
                Some(schema) => {
                    when_names_args(ctx, n, &schema, args);
                    ApprovalWhen::Matches(schema)
                }
                None => ApprovalWhen::Always,
            }
        }
        Some(n) => {
            ctx.report(
                Code::WrongType,
                format!(
                    "`approval.when` is `always` or a JSON Schema over the arguments, not {}",
                    n.kind()
                ),
                "approval.when",
                n.span,
            );
            ApprovalWhen::Always
        }
    };
    let decisions = match o.take("decisions") {
        None => Decision::ALL.to_vec(),
        Some(n) => {
            let words = named(
                ctx,
                n,
                "approval.decisions",
                &["approve", "edit", "reject", "respond"],
            );
            let decisions: Vec<Decision> =
                words.iter().filter_map(|w| Decision::parse(w)).collect();
            if matches!(&n.value, Value::Array(items) if items.is_empty()) {
                ctx.push(
                    Issue::new(
                        Code::ApprovalNoDecision,
                        "`approval.decisions` offers no decision: nobody could answer the call",
                    )
                    .at(ctx.file, "approval.decisions", Some(n.span))
                    .hint("list some of approve, edit, reject and respond, or leave it out for all four"),
                );
            }
            decisions
        }
    };
    let remember: Vec<RememberScope> = match o.take("remember") {
        None => Vec::new(),
        Some(n) => named(ctx, n, "approval.remember", &["session", "thread"])
            .iter()
            .filter_map(|w| RememberScope::parse(w))
            .collect(),
    };
    if !remember.is_empty() && !decisions.contains(&Decision::Approve) {
        ctx.push(
            Issue::new(
                Code::ApprovalRememberWithoutApprove,
                "`approval.remember` offers to remember an approval, but `approve` is not offered",
            )
            .at(ctx.file, "approval.remember", Some(o.key_span("remember")))
            .hint("add `approve` to `approval.decisions`, or remove `remember`"),
        );
    }
    let approvers = match o.take("approvers") {
        None => Approvers::default(),
        Some(n) => match ctx.object(n, "approval.approvers") {
            None => Approvers::default(),
            Some(mut a) => {
                let roles = a.strings(ctx, "roles");
                let principals = a.strings(ctx, "principals");
                a.finish(ctx, APPROVER_FIELDS);
                Approvers { roles, principals }
            }
        },
    };
    let waivable = o.boolean(ctx, "waivable").unwrap_or(false);
    let deadline = o.take("deadline").and_then(|n| {
        let d = deadline::decode(ctx, n, "approval.deadline", deadline::On::Approval)?;
        deadline::check_offered(ctx, &d, &decisions, "approval.deadline", n);
        Some(d)
    });
    o.finish(ctx, APPROVAL_FIELDS);
    Some(Approval {
        when,
        decisions,
        remember,
        approvers,
        waivable,
        deadline,
    })
}

/// The strings of the array at `node`, each one of `allowed` (others are reported), each once.
fn named(ctx: &mut Ctx<'_>, node: &Node, path: &str, allowed: &[&str]) -> Vec<String> {
    let items = ctx.array(node, path);
    let mut out: Vec<String> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let at = format!("{path}[{i}]");
        let Some(word) = ctx.string(item, &at) else {
            continue;
        };
        if !allowed.contains(&word.as_str()) {
            let mut issue = Issue::new(
                Code::InvalidValue,
                format!("`{at}` is one of {}, not `{word}`", allowed.join(", ")),
            )
            .at(ctx.file, &at, Some(item.span));
            if let Some(near) = nearest(&word, allowed) {
                issue = issue.hint(format!("did you mean `{near}`?"));
            }
            ctx.push(issue);
        } else if !out.contains(&word) {
            out.push(word);
        }
    }
    out
}

/// Warns of each property a `when` schema tests that the tool's `args` do not declare: the
/// condition would never see it.
fn when_names_args(
    ctx: &mut Ctx<'_>,
    node: &Node,
    when: &serde_json::Value,
    args: Option<&serde_json::Value>,
) {
    let known = args.map(schema::property_names).unwrap_or_default();
    for name in schema::property_names(when) {
        if known.contains(&name) {
            continue;
        }
        let span = node
            .get("properties")
            .and_then(|p| p.get(name))
            .map(|n| n.span);
        ctx.push(
            Issue::new(
                Code::ApprovalUnknownArg,
                format!("`approval.when` tests `{name}`, which `args` does not declare"),
            )
            .at(ctx.file, &format!("approval.when.properties.{name}"), span)
            .hint(if known.is_empty() {
                "declare it under `args.properties`".to_owned()
            } else {
                format!("arguments: {}", known.join(", "))
            }),
        );
    }
}
