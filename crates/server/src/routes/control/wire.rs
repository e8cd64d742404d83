//! fastagent's session-control wire shapes (`src/session.ts`, `src/channels/control.ts`), mapped
//! by hand from duet's: the command parser (parse, don't validate: anything malformed is
//! `invalid_command`, and a command is rebuilt, never passed through), the capabilities duet
//! has, journal entries as `SessionEntry`s, and the `SessionEvent` envelope.

use duet_runtime::control::{Command, SessionResult};
use duet_runtime::{ImageRef, JournalEntry, Message, Prompt, RecordBody, Role, StopReason};
use duet_spec::{AgentDef, Side};
use serde::Serialize;
use serde_json::{Value, json};
use utoipa::ToSchema;

/// fastagent's `SessionResult.error.code`s that duet answers.
pub(crate) mod codes {
    pub(crate) use duet_runtime::control::control_codes::{INVALID_COMMAND, NO_ACTIVE_RUN};
    /// A command this runtime does not support (`compact`, `set_model`, ...).
    pub(crate) const UNSUPPORTED_CAPABILITY: &str = "unsupported_capability";
}

/// What a wire command is, once parsed.
#[derive(Debug)]
pub(crate) enum Parsed {
    /// `steer`, `follow_up` or `abort`: the runtime's.
    Run(Command),
    /// A well-formed command duet's runtime has no capability for (its `type`).
    Unsupported(&'static str),
}

/// Reads a prompt: `{text: string, images?: [{data: string, mimeType: string}]}`, rebuilt from
/// exactly those fields.
fn prompt(raw: Option<&Value>) -> Option<Prompt> {
    let p = raw?.as_object()?;
    let text = p.get("text")?.as_str()?.to_owned();
    let images = match p.get("images") {
        None => Vec::new(),
        Some(list) => list
            .as_array()?
            .iter()
            .map(|i| {
                Some(ImageRef {
                    data: i.get("data")?.as_str()?.to_owned(),
                    mime_type: i.get("mimeType")?.as_str()?.to_owned(),
                })
            })
            .collect::<Option<Vec<_>>>()?,
    };
    Some(Prompt {
        images,
        ..Prompt::text(text)
    })
}

/// Parses a wire command; `None` for anything malformed (an unknown `type` included).
pub(crate) fn parse_command(raw: &Value) -> Option<Parsed> {
    let c = raw.as_object()?;
    let string_or_absent = |field: &str| c.get(field).is_none_or(Value::is_string);
    let string = |field: &str| c.get(field).is_some_and(Value::is_string);
    Some(match c.get("type")?.as_str()? {
        "steer" => Parsed::Run(Command::Steer {
            prompt: prompt(c.get("prompt"))?,
        }),
        "follow_up" => Parsed::Run(Command::FollowUp {
            prompt: prompt(c.get("prompt"))?,
        }),
        "abort" => Parsed::Run(Command::Abort),
        "compact" if string_or_absent("instructions") => Parsed::Unsupported("compact"),
        "set_model" if string("model") => Parsed::Unsupported("set_model"),
        "set_thinking" if string("level") => Parsed::Unsupported("set_thinking"),
        "navigate" if string("targetId") => Parsed::Unsupported("navigate"),
        _ => return None,
    })
}

/// A rejection before acceptance.
pub(crate) fn rejected(code: &str, message: impl Into<String>, retryable: bool) -> Value {
    json!({"ok": false, "error": {"code": code, "message": message.into(), "retryable": retryable}})
}

/// A run command on a session the caller has no run on, nor a thread it may see: fastagent's
/// `no_active_run` (its `attach` answers it by starting the run with an invoke). The same words
/// whether the session is absent or another principal's.
pub(crate) fn no_run_yet(session: &str) -> Value {
    rejected(
        codes::NO_ACTIVE_RUN,
        format!(
            "no active run for session `{session}`: a run starts with an invoke \
             (`POST /control/invoke`); steer, follow_up and abort act on it then"
        ),
        false,
    )
}

/// The runtime's answer on the wire, its run named `run` (the control plane's run id). Another
/// principal's session reads as absent (as [`no_run_yet`]).
pub(crate) fn result(r: SessionResult, run: Option<String>, session: &str) -> Value {
    match r {
        SessionResult::Ok { .. } => match run {
            Some(id) => json!({"ok": true, "runId": id}),
            None => json!({"ok": true}),
        },
        SessionResult::Err { code, .. } if code == duet_runtime::codes::FORBIDDEN => {
            no_run_yet(session)
        }
        SessionResult::Err {
            code,
            message,
            retryable,
        } => rejected(code, message, retryable),
    }
}

/// `SessionCapabilities`: what duet's control plane can do. Static (sessionless).
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Capabilities {
    /// `steer`: delivered before the run's next model call.
    steering: bool,
    /// `follow_up`: delivered when the run would otherwise settle.
    follow_up: bool,
    /// `compact`: duet has no compaction.
    manual_compaction: bool,
    /// `set_model`: a thread's models are its definitions'.
    #[schema(value_type = bool)]
    model_selection: bool,
    /// `set_thinking`: no thinking levels.
    thinking_level: bool,
    /// `navigate`: a duet journal is linear.
    navigate: bool,
    /// No `tool_progress` events.
    tool_progress: bool,
    /// No usage in `state`.
    usage: bool,
}

/// duet's capabilities.
pub(crate) const CAPABILITIES: Capabilities = Capabilities {
    steering: true,
    follow_up: true,
    manual_compaction: false,
    model_selection: false,
    thinking_level: false,
    navigate: false,
    tool_progress: false,
    usage: false,
};

/// A `SessionEntry`: one journal entry, its seq as its id.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SessionEntry {
    /// Its seq, as a string: the `since` cursor.
    pub(crate) id: String,
    /// The entry before it (the journal is linear).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) parent_id: Option<String>,
    /// When it was committed (ms since the Unix epoch).
    pub(crate) timestamp: i64,
    /// `user`, `assistant`, `tool`, `system`, or a record kind (`session_started`, `stopped`,
    /// ...): skippable.
    pub(crate) kind: String,
    /// What a client renders: `{text, side, toolCalls?}` for a message, `{toolCallId,
    /// toolName, isError, text}` for a tool result, a record's fields otherwise.
    #[schema(value_type = Object)]
    pub(crate) data: Value,
}

fn message_data(m: &Message) -> Value {
    let mut data = json!({"text": m.content.clone().unwrap_or_default()});
    if let Some(side) = m.side {
        data["side"] = json!(duet_runtime::side_str(side));
    }
    if m.role == Role::Tool {
        data["toolCallId"] = json!(m.tool_call_id);
        data["toolName"] = json!(m.tool_name);
        data["isError"] = json!(m.tool_status == Some(duet_runtime::ToolStatus::Error));
    }
    if !m.tool_calls.is_empty() {
        let calls: Vec<Value> = m
            .tool_calls
            .iter()
            .map(|c| json!({"id": c.id, "name": c.name, "args": c.arguments}))
            .collect();
        data["toolCalls"] = json!(calls);
    }
    if let Some(t) = &m.thinking {
        data["thinking"] = json!(t);
    }
    if m.silent {
        data["silent"] = json!(true);
    }
    data
}

impl SessionEntry {
    /// `entry`, the one before it being `parent`.
    pub(crate) fn of(entry: &JournalEntry, parent: Option<i64>) -> Self {
        let (kind, data, timestamp) = match entry {
            JournalEntry::Message(m) => (m.role.as_str().to_owned(), message_data(m), m.created_at),
            JournalEntry::Record(r) => (r.kind().to_owned(), r.data(), r.created_at),
        };
        SessionEntry {
            id: entry.seq().to_string(),
            parent_id: parent.filter(|p| *p > 0).map(|p| p.to_string()),
            timestamp,
            kind,
            data,
        }
    }
}

/// `SessionEntries`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SessionEntries {
    /// The entries after the cursor, in append order.
    pub(crate) entries: Vec<SessionEntry>,
    /// The journal's last entry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) leaf_entry_id: Option<String>,
}

/// `SessionState.pending`.
#[derive(Serialize, ToSchema, Default)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Pending {
    /// Messages for the run's next model call (`steer`).
    pub(crate) steering: usize,
    /// Follow-ups.
    pub(crate) follow_up: usize,
}

/// `SessionState`.
#[derive(Serialize, ToSchema, Default)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SessionState {
    /// `idle` or `running` (duet never compacts); a thread waiting for a person is `idle`.
    pub(crate) status: &'static str,
    /// The run in flight, as the events name it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) active_run_id: Option<String>,
    /// What waits for that run.
    pub(crate) pending: Pending,
    /// The journal's last entry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) leaf_entry_id: Option<String>,
}

/// `AgentCommand`: duet has no `/` names, so the list is empty.
#[derive(Serialize, ToSchema)]
pub(crate) struct AgentCommand {
    /// The name.
    name: String,
    /// What it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<String>,
    /// Where it comes from.
    source: String,
}

/// The id of the run whose first journal entry is `seq`.
pub(crate) fn run_id(seq: i64) -> String {
    format!("run-{seq}")
}

/// Whether a record settles a run: the run stopped (parked, a limit, an error, an abort) or
/// its session ended.
pub(crate) fn settles(entry: &JournalEntry) -> Option<StopReason> {
    match entry {
        JournalEntry::Record(r) => match &r.body {
            RecordBody::Stopped { stop_reason, .. }
            | RecordBody::SessionEnded { stop_reason, .. } => Some(*stop_reason),
            _ => None,
        },
        JournalEntry::Message(_) => None,
    }
}

/// Whether the settle record that `after` follows did not end its run: a `run_continued`
/// (the run went on under its lease with messages that waited) comes before any other settle.
pub(crate) fn continues(after: &[JournalEntry]) -> bool {
    for entry in after {
        if settles(entry).is_some() {
            return false;
        }
        if let JournalEntry::Record(r) = entry
            && matches!(r.body, RecordBody::RunContinued { .. })
        {
            return true;
        }
    }
    false
}

/// Whether `m` is the agent's output (a model's or a handler's), not a message delivered to it.
pub(crate) fn is_output(m: &Message, agent: Option<&AgentDef>) -> bool {
    let handler_side = match (m.side, agent) {
        (Some(side), Some(a)) => matches!(a.sides[side], Side::Handler(_)),
        _ => false,
    };
    !m.silent
        && matches!(m.role, Role::User | Role::Assistant)
        && (m.model.is_some() || handler_side)
}

/// One `SessionEvent`: `{type, timestamp, runId?, data}`.
pub(crate) fn event(kind: &str, timestamp: i64, run: Option<&str>, data: Value) -> Value {
    let mut e = json!({"type": kind, "timestamp": timestamp, "data": data});
    if let Some(run) = run {
        e["runId"] = json!(run);
    }
    e
}

/// `run_settled`'s data for a run that stopped for `reason` (`error`: the step's error).
pub(crate) fn settled_data(reason: StopReason, error: Option<String>) -> Value {
    match reason {
        StopReason::Aborted => json!({"status": "aborted", "stopReason": "aborted"}),
        StopReason::StepError => json!({
            "status": "failed",
            "stopReason": "step_error",
            "error": {
                "code": duet_runtime::codes::STEP_ERROR,
                "message": error.unwrap_or_else(|| "a step failed".into()),
                "retryable": false,
            },
        }),
        other => json!({"status": "completed", "stopReason": other.as_str()}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_malformed_command_is_none_and_well_formed_ones_parse() {
        for bad in [
            json!({"type": "steer"}),
            json!({"type": "steer", "prompt": {"text": 42}}),
            json!({"type": "steer", "prompt": {"text": "x", "images": [42]}}),
            json!({"type": "follow_up", "prompt": "hi"}),
            json!({"type": "compact", "instructions": 42}),
            json!({"type": "set_model", "model": 42}),
            json!({"type": "set_thinking", "level": 42}),
            json!({"type": "navigate", "targetId": 42}),
            json!({"type": "make_coffee"}),
            json!("abort"),
        ] {
            assert!(parse_command(&bad).is_none(), "{bad}");
        }
        let steer = json!({"type": "steer", "extra": 1, "prompt": {"text": "look", "junk": 1,
            "images": [{"data": "aGk=", "mimeType": "image/png", "junk": "x"}]}});
        match parse_command(&steer) {
            Some(Parsed::Run(Command::Steer { prompt })) => {
                assert_eq!(prompt.text, "look");
                assert_eq!(
                    prompt.images,
                    [ImageRef {
                        data: "aGk=".into(),
                        mime_type: "image/png".into()
                    }]
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            parse_command(&json!({"type": "compact"})),
            Some(Parsed::Unsupported("compact"))
        ));
    }
}
