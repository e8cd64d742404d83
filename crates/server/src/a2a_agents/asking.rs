//! What a task whose tool calls wait for a person's decision (issue #29) shows over A2A: its
//! status message says what is asked in a text part and lists the calls in a data part
//! (`{"kind": "duet.approvals", "approvals": […]}`, each with its deadline), and the ids a
//! client answers with (`decisions.rs` reads the answer). A question with a deadline (issue
//! #30) says it in its status message too ([`with_deadline`]). See `docs/a2a.md`.

use duet_a2a::{Message as A2aMessage, Part, PartContent, Role, Task};
use duet_runtime::{Park, ThreadId};
use serde_json::{Value, json};

use crate::service::tasks::{PendingCall, SessionFacts};
use crate::views::ApprovalId;
use duet_runtime::deadline::{self, Standing, Subject};

/// The `kind` of the data part that lists the calls waiting for a decision.
pub(crate) const KIND: &str = "duet.approvals";

/// The `kind` of the data part that gives a question's deadline.
const DEADLINE: &str = "duet.deadline";

/// The id a client posts back for `seq` (the `approval_requested` record's) of `thread`'s
/// session `session`: the one `GET /approvals` lists, so REST and A2A name a call alike.
fn approval_id(thread: ThreadId, session: i64, seq: i64) -> String {
    ApprovalId {
        thread,
        park: Park { session, seq },
    }
    .to_string()
}

/// The status message of task `task` (session `session` of `thread`) while its calls
/// `pending` wait for a decision: a text part saying what is asked, and a data part listing
/// the calls (`application/json`).
pub(super) fn status_message(
    task: &str,
    thread: ThreadId,
    session: i64,
    pending: &[PendingCall],
    facts: &SessionFacts,
) -> A2aMessage {
    let (timers, notes) = &facts.deadlines;
    let deadline = |p: &PendingCall| deadline::standing(timers, notes, Subject::Approval(p.seq));
    let approvals: Vec<Value> = pending
        .iter()
        .map(|p| {
            let a = &p.asked;
            let mut v = json!({
                "id": approval_id(thread, session, p.seq),
                "tool": a.tool,
                "call": a.call,
                "arguments": a.arguments,
                "decisions": a.decisions.iter().map(|d| d.as_str()).collect::<Vec<_>>(),
                "remember": a.remember.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
                "approvers": a.approvers,
            });
            if let Some(d) = &p.description {
                v["description"] = json!(d);
            }
            if let Some(s) = &p.schema {
                v["schema"] = s.clone();
            }
            if let Some(d) = deadline(p) {
                v["deadline"] = json!(d);
            }
            v
        })
        .collect();
    let mut text = format!(
        "Waiting for a decision on {} tool call{}:",
        pending.len(),
        if pending.len() == 1 { "" } else { "s" }
    );
    for p in pending {
        let a = &p.asked;
        let offered: Vec<&str> = a.decisions.iter().map(|d| d.as_str()).collect();
        text.push_str(&format!(
            "\n- {} {} ({}); id {}",
            a.tool,
            a.arguments,
            offered.join(", "),
            approval_id(thread, session, p.seq)
        ));
        if let Some(d) = deadline(p) {
            text.push_str(&format!("; deadline: {}", d.sentence(facts.read_at)));
        }
    }
    text.push_str(
        "\nAnswer with a data part {\"decisions\": [{\"id\": ID, \"decision\": \"approve\"}]} \
         (or \"edit\" with \"args\", \"reject\" with \"reason\", \"respond\" with \"text\").",
    );
    let mut data = Part::data(json!({"kind": KIND, "approvals": approvals}));
    data.media_type = Some("application/json".into());
    let first = pending.first().map_or(0, |p| p.seq);
    A2aMessage {
        parts: vec![Part::text(text), data],
        ..A2aMessage::agent_text(format!("{task}.approvals.{first}"), "")
    }
}

/// `message` (the question a parked task asks, its status message) with what its deadline
/// will do, as of `now`: a text part in words, and a data part
/// `{"kind": "duet.deadline", "deadline": {…}}` as `GET /approvals` shows it.
pub(super) fn with_deadline(mut message: A2aMessage, d: &Standing, now: i64) -> A2aMessage {
    message
        .parts
        .push(Part::text(format!("Deadline: {}.", d.sentence(now))));
    let mut data = Part::data(json!({"kind": DEADLINE, "deadline": d}));
    data.media_type = Some("application/json".into());
    message.parts.push(data);
    message
}

/// The approval ids a task's status message lists (its data part of kind [`KIND`]).
pub(crate) fn pending_ids(task: &Task) -> Vec<String> {
    task.status
        .message
        .iter()
        .filter(|m| m.role == Role::Agent)
        .flat_map(|m| &m.parts)
        .filter_map(|p| match &p.content {
            PartContent::Data(d) if d.get("kind").and_then(Value::as_str) == Some(KIND) => {
                d.get("approvals").and_then(Value::as_array)
            }
            _ => None,
        })
        .flatten()
        .filter_map(|a| a.get("id").and_then(Value::as_str).map(str::to_owned))
        .collect()
}
