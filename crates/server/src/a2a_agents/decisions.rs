//! Decisions on tool calls that wait for a person (issue #29), over A2A: a task whose thread
//! waits on them is `INPUT_REQUIRED` with the calls listed in its status (`asking.rs`); a
//! message to it answers with a data part `{"decisions": [{"id", "decision", …}]}`, each
//! decision stored through the service `POST /approvals/{id}` uses — every one checked before
//! any is stored, so a batch with a bad item writes nothing. A message without decisions (text)
//! is refused, naming what waits: words are never taken as a decision. See `docs/a2a.md`.

use duet_a2a::{A2aError, PartContent, SendMessageRequest, TaskState};
use duet_runtime::approval::Refusal;
use duet_runtime::{DecisionInput, RunError, Thread, ThreadStatus};
use serde_json::{Map, Value};

use super::agent::DuetAgent;
use super::asking::pending_ids;
use super::follow;
use super::tasks::{TaskRef, View};
use crate::auth::Caller;
use crate::routes::approvals::{AnswerBody, decision_input};
use crate::service::tasks::Named;
use crate::service::{self, ServiceError};
use crate::views::ApprovalId;

/// The `kind` a decisions data part may name (it is optional).
const DECISIONS: &str = "duet.decisions";

/// One decision a message carries.
struct Item {
    /// Where it is in the message (`message.parts[0].data.decisions[1]`).
    field: String,
    /// The approval id as sent.
    id: String,
    approval: ApprovalId,
    input: DecisionInput,
}

/// The decisions a message carries: each data part that is an object with `decisions`. A
/// message that carries some carries nothing else. `Ok(empty)`: none.
fn carried(req: &SendMessageRequest) -> Result<Vec<Item>, A2aError> {
    let parts = &req.message.parts;
    let mut items = Vec::new();
    let mut with = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        let PartContent::Data(Value::Object(o)) = &part.content else {
            continue;
        };
        if !o.contains_key("decisions") {
            continue;
        }
        with.push(i);
        let at = format!("message.parts[{i}].data");
        if let Some(k) = o.get("kind").filter(|k| k.as_str() != Some(DECISIONS)) {
            return Err(bad(
                &format!("{at}.kind"),
                format!("a decisions part's kind is `{DECISIONS}` (or none), not {k}"),
            ));
        }
        if let Some(other) = o.keys().find(|k| *k != "decisions" && *k != "kind") {
            return Err(bad(
                &format!("{at}.{other}"),
                "a decisions part has `decisions` (and `kind`) only".into(),
            ));
        }
        let list = match o.get("decisions") {
            Some(Value::Array(l)) if !l.is_empty() => l,
            _ => {
                return Err(bad(
                    &format!("{at}.decisions"),
                    "a non-empty array of decisions".into(),
                ));
            }
        };
        for (j, d) in list.iter().enumerate() {
            items.push(item(&format!("{at}.decisions[{j}]"), d)?);
        }
    }
    if !items.is_empty() && with.len() != parts.len() {
        let i = (0..parts.len()).find(|i| !with.contains(i)).unwrap_or(0);
        return Err(bad(
            &format!("message.parts[{i}]"),
            "a message with decisions carries only decisions parts: its text would be lost".into(),
        ));
    }
    for (n, it) in items.iter().enumerate() {
        if items[..n].iter().any(|o| o.approval == it.approval) {
            return Err(bad(
                &format!("{}.id", it.field),
                format!("approval {} is decided twice in this message", it.id),
            ));
        }
    }
    Ok(items)
}

/// One decision: `{"id", "decision", "args" | "reason" | "text", "remember"}`, read as
/// `POST /approvals/{id}` reads its body.
fn item(field: &str, d: &Value) -> Result<Item, A2aError> {
    let Value::Object(o) = d else {
        return Err(bad(field, "a decision is an object".into()));
    };
    let mut body: Map<String, Value> = o.clone();
    let id = match body.remove("id") {
        Some(Value::String(id)) => id,
        _ => {
            return Err(bad(
                &format!("{field}.id"),
                "the approval's id, a string".into(),
            ));
        }
    };
    let approval: ApprovalId = id
        .parse()
        .map_err(|e: String| bad(&format!("{field}.id"), e))?;
    let body: AnswerBody = serde_json::from_value(Value::Object(body))
        .map_err(|e| bad(field, format!("not a decision: {e}")))?;
    let Some(decision) = body.decision.clone() else {
        return Err(bad(
            &format!("{field}.decision"),
            "approve, edit, reject or respond".into(),
        ));
    };
    let input = decision_input(&decision, body).map_err(|p| bad(field, p.detail))?;
    Ok(Item {
        field: field.to_owned(),
        id,
        approval,
        input,
    })
}

fn bad(field: &str, why: String) -> A2aError {
    A2aError::invalid_params(format!("{field}: {why}"), vec![(field.to_owned(), why)])
}

/// A refused decision as an A2A error, for the item at `field`: a decision someone took first
/// is the double-answer refusal (`UnsupportedOperationError` with `answeredAt`/`answeredBy`);
/// a decision not offered or an edit the tool's `args` refuse is `InvalidParamsError` at the
/// field; definitions that changed under the call, `UnsupportedOperationError`.
fn refused(e: RunError, field: &str, id: &str) -> A2aError {
    match e {
        RunError::DecisionTaken { first, .. } => A2aError::unsupported_operation(format!(
            "approval {id} was already decided ({}): another decision came first; nothing was written",
            first.decision.as_str()
        ))
        .with("approval", id)
        .with("decision", first.decision.as_str())
        .with("answeredAt", first.at.to_string())
        .with(
            "answeredBy",
            first
                .author
                .as_deref()
                .map(Caller::author_name)
                .unwrap_or_default(),
        ),
        RunError::DecisionRefused {
            why: Refusal::InvalidArgs(at),
            ..
        } => {
            let (path, what) = at.split_once(": ").unwrap_or(("/", at.as_str()));
            let field = format!("{field}.args{}", dotted(path));
            A2aError::invalid_params(
                format!("the edited arguments do not match the tool's `args` at {field}: {what}"),
                vec![(field, what.to_owned())],
            )
        }
        RunError::DecisionRefused {
            why: why @ Refusal::Stale(_),
            ..
        } => A2aError::unsupported_operation(format!("approval {id}: {why}; nothing was written"))
            .with("approval", id)
            .with("reason", "stale_definition"),
        RunError::DecisionRefused { why, .. } => bad(&format!("{field}.decision"), why.to_string()),
        RunError::UnknownApproval { .. } => bad(
            &format!("{field}.id"),
            format!("no tool call of this task waits on approval {id}"),
        ),
        RunError::Terminated(key) => {
            A2aError::unsupported_operation(format!("context {key} has ended"))
        }
        other => A2aError::internal(other),
    }
}

fn refused_service(e: ServiceError, field: &str, id: &str) -> A2aError {
    match e {
        ServiceError::Run { error, .. } => refused(error, field, id),
        ServiceError::NotFound(_) => refused(
            RunError::UnknownApproval {
                key: String::new(),
                approval: 0,
            },
            field,
            id,
        ),
        other => A2aError::internal(other),
    }
}

/// A JSON pointer (`/items/0/sku`) as the rest of a field path (`.items[0].sku`).
fn dotted(pointer: &str) -> String {
    pointer
        .split('/')
        .filter(|s| !s.is_empty())
        .map(|s| match s.parse::<usize>() {
            Ok(n) => format!("[{n}]"),
            Err(_) => format!(".{}", s.replace("~1", "/").replace("~0", "~")),
        })
        .collect()
}

impl DuetAgent {
    /// The thread a message goes to, if it exists and the caller may use it: the task it names
    /// (`task`, as the request found it), else its context's thread.
    async fn addressed(
        &self,
        caller: &Caller,
        req: &SendMessageRequest,
        task: Option<&(Thread, TaskRef)>,
    ) -> Result<Option<(Thread, TaskRef)>, A2aError> {
        if let Some(id) = &req.message.task_id {
            let Some((t, r)) = task else {
                return Err(A2aError::task_not_found(id));
            };
            let (t, r) = (t.clone(), *r);
            let context = caller.visible_key(&t.key);
            if req
                .message
                .context_id
                .as_ref()
                .is_some_and(|c| *c != context)
            {
                return Err(bad(
                    "message.contextId",
                    format!("task {id} is in context {context}"),
                ));
            }
            return Ok(Some((t, r)));
        }
        let Some(context) = &req.message.context_id else {
            return Ok(None);
        };
        match service::tasks::named(&self.state, caller, &self.agent, context)
            .await
            .map_err(A2aError::internal)?
        {
            Named::Ours(t) => {
                let r = TaskRef::next_for(&t);
                Ok(Some((*t, r)))
            }
            _ => Ok(None),
        }
    }

    /// A message to a task waiting on decisions: its decisions stored (the task, its view and
    /// the journal floor its outcome lies past; `None` inside for a replay), or refused. `None`:
    /// the message is for [`DuetAgent::deliver`] — its task waits for no decision and it carries
    /// none.
    pub(super) async fn decisions(
        &self,
        caller: &Caller,
        req: &SendMessageRequest,
        task: Option<&(Thread, TaskRef)>,
    ) -> Result<Option<(TaskRef, View, Option<i64>)>, A2aError> {
        let items = carried(req)?;
        let addressed = self.addressed(caller, req, task).await?;
        let waiting = match &addressed {
            Some((t, r)) if t.status == ThreadStatus::Waiting && r.session == t.session => {
                let view = View {
                    context: caller.visible_key(&t.key),
                    client: self.client,
                    history: 0,
                    artifacts: true,
                    origin: None,
                };
                let (t, task, _) = follow::read(&self.state, *r, &view).await?;
                let pending = pending_ids(&task);
                (task.status.state == TaskState::InputRequired && !pending.is_empty())
                    .then_some((t, *r, view, pending))
            }
            _ => None,
        };
        let Some((t, r, view, pending)) = waiting else {
            if items.is_empty() {
                return Ok(None);
            }
            return Err(A2aError::invalid_params(
                "nothing this message names waits for a decision on a tool call",
                vec![(
                    "message.parts".into(),
                    "decisions answer a task in input-required whose status lists approvals".into(),
                )],
            ));
        };
        if items.is_empty() {
            return Err(A2aError::invalid_params(
                format!(
                    "task {} waits for decisions on tool calls, not words: send a data part {{\"decisions\": [{{\"id\": …, \"decision\": …}}]}} for {}",
                    r.id(),
                    pending.join(", ")
                ),
                vec![(
                    "message.parts".into(),
                    format!("a data part with `decisions` for {}", pending.join(", ")),
                )],
            )
            .with("taskId", r.id())
            .with("pendingApprovals", pending.join(",")));
        }
        let floor = t.next_seq - 1;
        // Each decision's idempotency key: the message's id and the approval, so the message
        // sent again replays what it stored and stores what it had not.
        let key = |it: &Item| format!("{}#{}", req.message.message_id, it.approval.park.seq);
        let mut todo = Vec::new();
        for it in items {
            if it.approval.thread != r.thread || it.approval.park.session != r.session {
                return Err(bad(
                    &format!("{}.id", it.field),
                    format!("approval {} is not one of task {}", it.id, r.id()),
                ));
            }
            if service::messages::delivered(&self.state, &t, &key(&it))
                .await
                .map_err(A2aError::internal)?
            {
                continue;
            }
            todo.push(it);
        }
        if todo.is_empty() {
            return Ok(Some((r, view, None)));
        }
        // Every decision checked before any is stored: one refused, none written.
        for it in &todo {
            self.state
                .runtime()
                .check_decision(&t.key, it.approval.park.seq, it.input.clone())
                .await
                .map_err(|e| refused(e, &it.field, &it.id))?;
        }
        for it in todo {
            let mid = key(&it);
            service::approvals::decide(&self.state, caller, &it.id, it.input, Some(&mid), false)
                .await
                .map_err(|e| refused_service(e, &it.field, &it.id))?;
        }
        Ok(Some((r, view, Some(floor))))
    }
}

#[cfg(test)]
mod tests {
    use super::dotted;

    #[test]
    fn a_pointer_reads_as_a_field_path() {
        assert_eq!(dotted("/"), "");
        assert_eq!(dotted("/amount"), ".amount");
        assert_eq!(dotted("/items/0/sku"), ".items[0].sku");
        assert_eq!(dotted("/a~1b/c~0d"), ".a/b.c~d");
    }
}
