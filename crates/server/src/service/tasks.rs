//! A thread's sessions as A2A reads them (a task is one session of one thread): a task's
//! thread if the caller may see it on the agent's routes, what a context id names, what the
//! journal says about one session (read consistently with the thread), whether anything waits
//! in the queue, and the agent's top-level threads. How the facts read as an A2A task is
//! `a2a_agents/tasks.rs`'s.

use duet_runtime::approval::Asked;
use duet_runtime::deadline;
use duet_runtime::files::{AttachmentRef, FileError};
use duet_runtime::{
    JournalEntry, Message, ParentFilter, Record, RecordBody, Role, SideId, StopReason, Thread,
    ThreadId, ThreadQuery, ThreadStatus, Timer,
};

use super::ServiceError;
use super::threads::on_agent;
use crate::auth::Caller;
use crate::state::AppState;

/// Thread `thread` if it is one `agent`'s routes show `caller` ([`on_agent`]) and it has (or
/// is about to open) session `session`.
pub(crate) async fn find(
    state: &AppState,
    caller: &Caller,
    agent: &str,
    thread: ThreadId,
    session: i64,
) -> Result<Option<Thread>, ServiceError> {
    let t = state.runtime().store().thread_by_id(thread).await?;
    Ok(t.filter(|t| on_agent(caller, agent, t) && session <= t.session.max(1)))
}

/// What a context id names.
pub(crate) enum Named {
    /// No thread yet: a message there starts one.
    Free,
    /// Another principal's thread.
    Hidden,
    /// The caller's thread, of another agent.
    OtherAgent,
    /// The caller's thread of this agent.
    Ours(Box<Thread>),
}

/// What the key `caller` calls `context` names on `agent`'s routes.
pub(crate) async fn named(
    state: &AppState,
    caller: &Caller,
    agent: &str,
    context: &str,
) -> Result<Named, ServiceError> {
    let key = caller.stored_key(context);
    Ok(match state.runtime().store().thread(&key).await? {
        None => Named::Free,
        Some(t) if !caller.may_see(&t) => Named::Hidden,
        Some(t) if !on_agent(caller, agent, &t) => Named::OtherAgent,
        Some(t) => Named::Ours(Box::new(t)),
    })
}

/// What the journal says about one session.
#[derive(Debug, Default)]
pub(crate) struct SessionFacts {
    /// Its messages with text, in order.
    pub messages: Vec<Message>,
    /// How it ended, and its result, if it did.
    pub ended: Option<(StopReason, Option<String>)>,
    /// When its last entry was written (ms).
    pub last_at: i64,
    /// The journal seq of its last entry.
    pub last_seq: i64,
    /// Its tool calls that wait for a person's decision (asked, no result written yet), by the
    /// seq of their `approval_requested` record, in order.
    pub pending: Vec<PendingCall>,
    /// The deadline timers of what it waits on (a pending call, or the question it parked at
    /// last), read only when it waits on one, and the deadlines' records: what
    /// [`deadline::standing`] reads.
    pub deadlines: (Vec<Timer>, Vec<Record>),
    /// When these facts were read (ms, the runtime's clock): what a deadline is counted from.
    pub read_at: i64,
    /// The side and the attachments of each of its messages (tool results too), in order: the
    /// session's result files are those of its last message not the client's.
    pub attached: Vec<(Option<SideId>, Vec<AttachmentRef>)>,
    /// The files its result names, read by [`result_files`] for a completed task's artifacts
    /// (empty until then).
    pub files: Vec<ResultFile>,
}

/// A file a session's result names, as a task's artifact carries it.
#[derive(Debug, Clone)]
pub(crate) struct ResultFile {
    /// The file.
    pub file: AttachmentRef,
    /// Its bytes, when it is at most [`RAW_MAX`] long.
    pub bytes: Option<Vec<u8>>,
}

/// The largest result file an artifact carries as bytes; a larger one is a link to its download.
pub(crate) const RAW_MAX: i64 = 1024 * 1024;

/// A tool call of the session waiting for a decision, with what the project says of its tool
/// now.
#[derive(Debug, Clone)]
pub(crate) struct PendingCall {
    /// The seq of its `approval_requested` record (the approval's id in its thread).
    pub seq: i64,
    /// When it was asked.
    pub asked_at: i64,
    /// The call as asked.
    pub asked: Asked,
    /// The tool's description, if the project still defines it.
    pub description: Option<String>,
    /// The tool's `args` schema, if it has one.
    pub schema: Option<serde_json::Value>,
}

/// Reads session `session` of thread `t` from the journal as `t` was read: the session's own
/// range of it (from its `session_started` record to the next session's), below `t`'s next seq.
/// A commit writes its entries and the thread row in one transaction and entries are never
/// rewritten, so the facts are those of the journal when `t` was read, whatever committed
/// since; and the read is O(the session), not O(the thread's history).
pub(crate) async fn facts(
    state: &AppState,
    t: &Thread,
    session: i64,
) -> Result<SessionFacts, ServiceError> {
    facts_of(state, t, session, None).await
}

/// [`facts`], from `read` when it holds the session's entries as `t` was written (a run's
/// settling write read them: `Settled::session_entries`), else read here.
pub(crate) async fn facts_of(
    state: &AppState,
    t: &Thread,
    session: i64,
    read: Option<Vec<JournalEntry>>,
) -> Result<SessionFacts, ServiceError> {
    let thread = t.id;
    let mut facts = SessionFacts {
        read_at: state.runtime().now_ms(),
        ..SessionFacts::default()
    };
    let mut asked = Vec::new();
    let mut answered = std::collections::HashSet::new();
    // When it parked last, while nothing came after but a deadline's records.
    let mut parked_at = None;
    let mut notes = Vec::new();
    let entries = match read {
        Some(entries) => entries,
        None => {
            state
                .runtime()
                .store()
                .session_entries(thread, session, t.next_seq)
                .await?
        }
    };
    for entry in entries {
        match entry {
            JournalEntry::Record(r) => {
                facts.last_at = r.created_at;
                facts.last_seq = r.seq;
                match &r.body {
                    RecordBody::Stopped {
                        status: ThreadStatus::AwaitingHuman,
                        ..
                    } => parked_at = Some(r.created_at),
                    RecordBody::QuestionReminded { .. } | RecordBody::QuestionEscalated { .. } => {
                        notes.push(r.clone());
                    }
                    _ => parked_at = None,
                }
                match r.body {
                    RecordBody::SessionEnded {
                        stop_reason,
                        result,
                    } => facts.ended = Some((stop_reason, result)),
                    RecordBody::ApprovalRequested(a) => asked.push((r.seq, r.created_at, a)),
                    _ => {}
                }
            }
            JournalEntry::Message(m) => {
                if m.session != session {
                    continue;
                }
                facts.last_at = m.created_at;
                facts.last_seq = m.seq;
                parked_at = None;
                if !m.silent && m.side.is_some() {
                    facts.attached.push((m.side, m.attachments.clone()));
                }
                if m.role == Role::Tool
                    && let Some(call) = &m.tool_call_id
                {
                    answered.insert(call.clone());
                }
                let said = m.content.as_deref().is_some_and(|c| !c.trim().is_empty());
                if said && !m.silent && matches!(m.role, Role::User | Role::Assistant) {
                    facts.messages.push(m);
                }
            }
        }
    }
    let tools = &state.runtime().project().tools;
    facts.pending = asked
        .into_iter()
        .filter(|(_, _, a)| !answered.contains(&a.call))
        .map(|(seq, asked_at, asked)| {
            let tool = tools.get(&asked.tool).map(|d| &d.def);
            PendingCall {
                seq,
                asked_at,
                description: tool.map(|t| t.description.clone()),
                schema: tool.and_then(|t| t.args.clone()),
                asked,
            }
        })
        .collect();
    let asked_at = facts
        .pending
        .iter()
        .map(|p| p.asked_at)
        .chain(parked_at)
        .min();
    if let Some(at) = asked_at {
        let timers = state
            .runtime()
            .store()
            .timers(&deadline::timer_query(thread, at))
            .await?;
        facts.deadlines = (timers, notes);
    }
    Ok(facts)
}

/// The files the result of a session of `thread` names (`facts`, read from its journal): the
/// attachments of its last message that is not `client`'s side's (a bound `sessionStop`'s tool
/// message, a model's last word), each with its bytes when it is at most [`RAW_MAX`] long. A
/// file removed since is left out.
pub(crate) async fn result_files(
    state: &AppState,
    thread: ThreadId,
    facts: &SessionFacts,
    client: SideId,
) -> Result<Vec<ResultFile>, ServiceError> {
    let Some((_, named)) = facts
        .attached
        .iter()
        .rev()
        .find(|(side, _)| *side != Some(client))
    else {
        return Ok(Vec::new());
    };
    let files = state.runtime().files();
    let mut out = Vec::with_capacity(named.len());
    for a in named {
        let record = match files.file(thread, &a.path).await {
            Ok(r) => r,
            Err(FileError::Store(e)) => return Err(e.into()),
            Err(_) => continue,
        };
        let bytes = match record.size <= RAW_MAX {
            true => Some(files.content(&record).await?),
            false => None,
        };
        out.push(ResultFile {
            file: record.attachment(),
            bytes,
        });
    }
    Ok(out)
}

/// Thread `thread` and session `session`'s facts as they are now (`None`: the thread is
/// gone): the thread, then its journal as the thread was read ([`facts`]), so the state and
/// the entries agree.
pub(crate) async fn session(
    state: &AppState,
    thread: ThreadId,
    session: i64,
) -> Result<Option<(Thread, SessionFacts)>, ServiceError> {
    let Some(t) = state.runtime().store().thread_by_id(thread).await? else {
        return Ok(None);
    };
    let facts = facts(state, &t, session).await?;
    Ok(Some((t, facts)))
}

/// Whether a message waits in thread `thread`'s queue.
pub(crate) async fn queued(state: &AppState, thread: ThreadId) -> Result<bool, ServiceError> {
    Ok(!state.runtime().store().queue(thread).await?.is_empty())
}

/// A batch of `agent`'s top-level threads that `caller` may see, newest first: at most `limit`,
/// older than `after`.
pub(crate) async fn top_level(
    state: &AppState,
    caller: &Caller,
    agent: &str,
    after: Option<ThreadId>,
    limit: usize,
) -> Result<Vec<Thread>, ServiceError> {
    let query = ThreadQuery {
        agent: Some(agent),
        parent: ParentFilter::TopLevel,
        principal: caller.owner_filter(),
        after,
        newest_first: true,
        limit,
        ..ThreadQuery::default()
    };
    Ok(state.runtime().store().list_threads(&query).await?)
}
