//! Approvals: a parked question by its id (`{thread}:{session}:{seq}`), the approvals of a
//! thread that waits for the caller (listed by `service::waiting`), the chain of parents above
//! a question, the question with its conversation, the answer each park got, and the answer
//! itself. The inbox's answer form and
//! `POST /approvals/{id}` both call [`answer`], so a question answered through either is refused
//! through the other with the same [`ServiceError::AlreadyAnswered`].

use duet_runtime::{
    Answered, AnsweredQuery, Child, DecisionLanded, FirstAnswer, ImageRef, JournalEntry, Listed,
    Message, Park, RecordBody, Thread, ThreadId, ThreadStatus, ToolCall,
};

use super::approvers::{self, absent};
use super::deliveries::{self, Delivered, Inbound, Landed};
use super::{ServiceError, threads};
use crate::auth::Caller;
use crate::state::AppState;
use crate::views::{ApprovalId, ApprovalView, ParentView};
use duet_runtime::deadline::{self, Subject};

/// How deep a parent chain is followed (as deep as the store's listing reads it).
const MAX_DEPTH: usize = duet_runtime::MAX_PARENTS;

/// The approval `id` and its thread, if `caller` may see the thread (its owner, or an admin) —
/// or, for a question, its deadline escalated to the caller — and the thread ever reached that
/// park (answered or not). A tool call's approvers who do not own the thread reach it through
/// [`get`] and [`decide`] only.
pub(crate) async fn find(
    state: &AppState,
    caller: &Caller,
    id: &str,
) -> Result<(ApprovalId, Thread), ServiceError> {
    let (approval, t) = approvers::locate(state, id).await?;
    if caller.may_see(&t) || approvers::escalated_to(state, caller, &t, approval.park).await? {
        return Ok((approval, t));
    }
    Err(absent(id))
}

/// An answer to one question.
pub(crate) struct Answer<'a> {
    pub text: &'a str,
    pub images: &'a [ImageRef],
    /// Paths of the thread's files that come with it (each must be one).
    pub attachments: &'a [String],
    /// Its message id: a retried answer writes nothing.
    pub message_id: Option<&'a str>,
    /// Follow the resumed run until the thread settles.
    pub wait: bool,
}

/// Answers approval `id` for `caller`: the first answer wins, a later one is
/// [`ServiceError::AlreadyAnswered`] naming it.
pub(crate) async fn answer(
    state: &AppState,
    caller: &Caller,
    id: &str,
    answer: Answer<'_>,
) -> Result<Delivered, ServiceError> {
    let (approval, t) = find(state, caller, id).await?;
    let inbound = Inbound {
        key: &t.key,
        agent: None,
        thread: Some(&t),
        text: answer.text,
        images: answer.images,
        attachments: answer.attachments,
        answers: Some(approval.park),
        message_id: answer.message_id,
        wait: answer.wait,
        // Found without seeing the thread: the question escalated to the caller.
        for_owner: !caller.may_see(&t),
    };
    deliveries::deliver(state, caller, inbound).await
}

/// The tool calls of listed thread `l` that wait for a decision `caller` may take, as
/// approvals (`kind: tool_call`): the id's seq is that of the call's `approval_requested`
/// record. Its parents are those the listing read.
pub(crate) async fn listed_calls(
    state: &AppState,
    caller: &Caller,
    l: &Listed,
) -> Result<Vec<ApprovalView>, ServiceError> {
    pending_calls(state, caller, &l.thread, Some(&l.parents), true).await
}

/// The tool calls of `t` (whose parents are `known`, when read already) that wait for a
/// decision, as approvals; only those `caller` may decide when `decidable`.
async fn pending_calls(
    state: &AppState,
    caller: &Caller,
    t: &Thread,
    known: Option<&[Thread]>,
    decidable: bool,
) -> Result<Vec<ApprovalView>, ServiceError> {
    if t.status != ThreadStatus::Waiting {
        return Ok(Vec::new());
    }
    let store = state.runtime().store();
    let (records, messages) = tokio::try_join!(store.records(t.id), store.messages(t.id))?;
    let mut pending = duet_runtime::approval::pending(&records, &messages);
    if decidable {
        pending.retain(|p| approvers::may_decide(caller, t, &records, p.seq, &p.approvers));
    }
    if pending.is_empty() {
        return Ok(Vec::new());
    }
    let parents = match known {
        Some(known) => parent_views(caller, known),
        None => parent_views(caller, &parents(state, t).await?),
    };
    // Their deadlines as the timer table has them (one read: from the first one's ask on).
    let first_asked = pending
        .iter()
        .filter_map(|p| approvers::asked(&records, p.seq).map(|(_, at)| at))
        .min()
        .unwrap_or(t.updated_at);
    let timers = store
        .timers(&deadline::timer_query(t.id, first_asked))
        .await?;
    Ok(pending
        .into_iter()
        .map(|p| {
            let session =
                p.id.split_once(':')
                    .and_then(|(s, _)| s.parse().ok())
                    .unwrap_or(t.session);
            let park = Park {
                session,
                seq: p.seq,
            };
            let deadline = deadline::standing(&timers, &records, Subject::Approval(p.seq));
            ApprovalView {
                deadline,
                id: ApprovalId { thread: t.id, park }.to_string(),
                kind: "tool_call",
                tool: Some(p.tool),
                call: Some(p.call),
                arguments: Some(p.arguments),
                decisions: Some(p.decisions.iter().map(|d| d.as_str().to_owned()).collect()),
                approvers: Some(serde_json::json!(p.approvers)),
                decided: None,
                thread: caller.visible_key(&t.key),
                agent: t.agent.clone(),
                park: park.to_string(),
                question: None,
                since: t.updated_at,
                parents: parents.clone(),
            }
        })
        .collect())
}

/// A decision stored (or replayed), as [`decide`] reports it.
pub(crate) struct Decision {
    pub decided: duet_runtime::approval::Decided,
    pub landed: Landed,
    /// The thread's key as the caller names it.
    pub visible: String,
    /// Whether the caller sees the thread (its owner, an admin), or only decides its call (an
    /// approver named by the call's approval): it is then told nothing of the thread.
    pub seeing: bool,
    /// The journal's last seq before the decision: where a follower starts.
    pub since: i64,
    /// Whether the thread settled since (the caller waited) or this was a replay: the caller
    /// is answered with the outcome, not where to follow it.
    pub settled: bool,
    /// The thread as it stands now, with its parent — read when `settled` for a caller that
    /// sees the thread; `None` otherwise.
    pub now: Option<(Thread, Option<Thread>)>,
}

/// Decides approval `id` (a tool call waiting for a decision) as `caller`: stored before this
/// returns (the first decision wins, a later one is refused naming it; a decision the
/// definitions no longer allow, or an edit the tool's `args` refuse, writes nothing), the
/// thread run on in a task of its own and — with `wait` — followed until it settles, as an
/// answer to a question is ([`deliveries::deliver`]). `message_id` (the `Idempotency-Key`)
/// makes a retry a replay that writes nothing.
pub(crate) async fn decide(
    state: &AppState,
    caller: &Caller,
    id: &str,
    input: duet_runtime::DecisionInput,
    message_id: Option<&str>,
    wait: bool,
) -> Result<Decision, ServiceError> {
    let author = caller.canonical.clone();
    decide_by(state, caller, author, id, input, message_id, wait).await
}

/// [`decide`] with the decision recorded as `author`'s while `caller`'s rights decide whether it
/// may be taken: a notification's link, followed by whoever holds it (a Slack user acting
/// through the channel's link), without waiting for the run.
pub(crate) async fn decide_as(
    state: &AppState,
    caller: &Caller,
    author: Option<String>,
    id: &str,
    input: duet_runtime::DecisionInput,
) -> Result<(), ServiceError> {
    decide_by(state, caller, author, id, input, None, false)
        .await
        .map(|_| ())
}

async fn decide_by(
    state: &AppState,
    caller: &Caller,
    author: Option<String>,
    id: &str,
    input: duet_runtime::DecisionInput,
    message_id: Option<&str>,
    wait: bool,
) -> Result<Decision, ServiceError> {
    let (approval, t) = approvers::locate(state, id).await?;
    let seeing = caller.may_see(&t);
    let visible = caller.visible_key(&t.key);
    if t.park() == Some(approval.park) && !seeing {
        return Err(absent(id));
    }
    if t.park() == Some(approval.park) {
        let why = duet_runtime::approval::Refusal::Incomplete(
            "this approval is a question, not a tool call: answer it with `{\"text\": …}`".into(),
        );
        return Err(ServiceError::run(
            duet_runtime::RunError::DecisionRefused {
                key: visible.clone(),
                approval: approval.park.seq,
                why,
            },
            &visible,
        ));
    }
    // Who may decide: the approvers the call's record names (nobody named: the owner). The
    // record and any escalation of it are in the call's session.
    let records = approvers::session_records(state, &t, approval.park.session).await?;
    match approvers::asked(&records, approval.park.seq) {
        Some((asked, _))
            if approvers::may_decide(caller, &t, &records, approval.park.seq, &asked.approvers) => {
        }
        Some((asked, _)) if seeing => {
            return Err(ServiceError::NotAnApprover {
                id: id.to_owned(),
                approvers: approvers::describe(&asked.approvers),
            });
        }
        // Not a call the thread asked: the runtime says so to whoever sees the thread.
        None if seeing => {}
        _ => return Err(absent(id)),
    }
    let since = t.next_seq - 1;
    let accepted = state
        .runtime()
        .accept_decision(&t.key, approval.park.seq, input, author, message_id)
        .await
        .map_err(|e| ServiceError::run(e, &visible))?;
    // Stored: from here on the caller is told where to follow the thread, whatever its run
    // does, rather than an error it might retry into a second decision.
    let mut waited = wait;
    // The thread as the run this decision started left it, when waited for: not read again.
    let mut last = None;
    let landed = match accepted.landed {
        DecisionLanded::Claimed(claim) => {
            let outcome = state.spawn_run(claim);
            if wait {
                match outcome.await {
                    Ok(Ok(s)) => last = Some(*s.last),
                    Ok(Err(e)) => {
                        tracing::info!(error = %e, "a waited-for run did not settle here");
                        waited = false;
                    }
                    Err(_) => waited = false,
                }
            }
            Landed::Accepted
        }
        DecisionLanded::Queued => {
            if wait {
                waited = deliveries::settled(state, accepted.thread).await?;
            }
            Landed::Queued
        }
        DecisionLanded::Duplicate => Landed::Duplicate,
    };
    let settled = waited || landed == Landed::Duplicate;
    let now = if seeing && settled {
        Some(threads::settled_with_parent(state, last, accepted.thread, &visible).await?)
    } else {
        None
    };
    Ok(Decision {
        decided: accepted.decided,
        landed,
        visible,
        seeing,
        since,
        settled,
        now,
    })
}

/// Where the question park id `park` of `t` names stands now (or was answered): past the
/// deadline records written at it ([`deadline::park_span`]).
pub(crate) async fn question_now(
    state: &AppState,
    t: &Thread,
    park: Park,
) -> Result<Park, ServiceError> {
    let records = approvers::session_records(state, t, park.session).await?;
    Ok(deadline::park_span(&records, park).now())
}

/// The threads above `t`, nearest first, up to the top-level one (at most [`MAX_DEPTH`]).
pub(crate) async fn parents(state: &AppState, t: &Thread) -> Result<Vec<Thread>, ServiceError> {
    let store = state.runtime().store();
    let mut parents = Vec::new();
    let mut up = t.parent;
    while let Some(id) = up
        && parents.len() < MAX_DEPTH
    {
        let Some(p) = store.thread_by_id(id).await? else {
            break;
        };
        up = p.parent;
        parents.push(p);
    }
    Ok(parents)
}

/// The answer park `park` of thread `t` got, as the store recorded it.
pub(crate) async fn answer_to(
    state: &AppState,
    t: ThreadId,
    park: Park,
) -> Result<Option<FirstAnswer>, ServiceError> {
    let query = AnsweredQuery {
        thread: Some(t),
        limit: 1_000,
        ..AnsweredQuery::default()
    };
    let answered = state.runtime().store().answered(&query).await?;
    Ok(answered
        .into_iter()
        .find(|a| a.park == park)
        .map(|a| a.answer))
}

/// The questions `caller` may see that were answered, newest answer first: at most `limit`,
/// older than `before` (the last of the previous page: `(at, thread, park)`).
pub(crate) async fn answered(
    state: &AppState,
    caller: &Caller,
    before: Option<(i64, ThreadId, Park)>,
    limit: usize,
) -> Result<Vec<Answered>, ServiceError> {
    let query = AnsweredQuery {
        principal: caller.owner_filter(),
        before,
        limit,
        ..AnsweredQuery::default()
    };
    Ok(state.runtime().store().answered(&query).await?)
}

/// The decisions on tool calls `caller` may see, newest first: at most `limit`, older than
/// `before` (the last of the previous page: `(written_at, thread, seq)`).
pub(crate) async fn decisions(
    state: &AppState,
    caller: &Caller,
    before: Option<(i64, ThreadId, i64)>,
    limit: usize,
) -> Result<Vec<duet_runtime::DecisionEntry>, ServiceError> {
    let query = AnsweredQuery {
        principal: caller.owner_filter(),
        before: before.map(|(at, t, seq)| (at, t, Park { session: 0, seq })),
        limit,
        ..AnsweredQuery::default()
    };
    Ok(state.runtime().store().decisions(&query).await?)
}

/// The latest answered park of thread `id`, with its answer.
pub(crate) async fn last_answered(
    state: &AppState,
    id: ThreadId,
) -> Result<Option<Answered>, ServiceError> {
    let query = AnsweredQuery {
        thread: Some(id),
        limit: 1,
        ..AnsweredQuery::default()
    };
    Ok(state.runtime().store().answered(&query).await?.pop())
}

/// The approval view of `t` (a thread `caller` may see) while it is parked: its question (the
/// thread's last message) and its parents.
pub(crate) async fn view(
    state: &AppState,
    caller: &Caller,
    t: &Thread,
) -> Result<Option<ApprovalView>, ServiceError> {
    if t.park().is_none() {
        return Ok(None);
    }
    let store = state.runtime().store();
    let listed = Listed {
        question: store.last_message(t.id).await?.and_then(|m| m.content),
        parents: parents(state, t).await?,
        // Read below as it stands.
        deadline: true,
        thread: t.clone(),
    };
    question_view(state, caller, &listed).await
}

/// [`view`] of a listed thread: its question and parents as the listing read them; its
/// deadline read only when the listing found one.
pub(crate) async fn question_view(
    state: &AppState,
    caller: &Caller,
    l: &Listed,
) -> Result<Option<ApprovalView>, ServiceError> {
    let t = &l.thread;
    let Some(park) = t.park() else {
        return Ok(None);
    };
    let deadline = match l.deadline {
        true => question_deadline(state, t).await?,
        false => None,
    };
    Ok(Some(ApprovalView {
        deadline,
        id: ApprovalId { thread: t.id, park }.to_string(),
        kind: "question",
        tool: None,
        call: None,
        arguments: None,
        decisions: None,
        approvers: None,
        decided: None,
        thread: caller.visible_key(&t.key),
        agent: t.agent.clone(),
        park: park.to_string(),
        question: l.question.clone(),
        since: t.updated_at,
        parents: parent_views(caller, &l.parents),
    }))
}

/// Parents as an approval names them: each key as `caller` may see it.
fn parent_views(caller: &Caller, parents: &[Thread]) -> Vec<ParentView> {
    parents
        .iter()
        .map(|p| ParentView {
            key: caller.visible_key(&p.key),
            agent: p.agent.clone(),
        })
        .collect()
}

/// The deadline of the question `t` is parked at, as its timers stand (the human side's, or
/// one code set for this question), with its escalations so far.
pub(crate) async fn question_deadline(
    state: &AppState,
    t: &Thread,
) -> Result<Option<deadline::Standing>, ServiceError> {
    let Some(subject) = Subject::parked(t) else {
        return Ok(None);
    };
    let store = state.runtime().store();
    // The parked session's records (O(the session), not the thread's whole journal): the park's
    // `stopped` record and the deadline's records written while it waits are all in it.
    let records = approvers::session_records(state, t, t.session).await?;
    // The park's `stopped` record: when it was asked.
    let asked_at = records
        .iter()
        .rev()
        .find(|r| matches!(r.body, duet_runtime::RecordBody::Stopped { .. }))
        .map_or(t.updated_at, |r| r.created_at);
    let timers = store.timers(&deadline::timer_query(t.id, asked_at)).await?;
    Ok(deadline::standing(&timers, &records, subject))
}

/// Approval `id` ([`find`], then its view): a question while it waits; a tool call while it
/// waits and once decided, with its decision as recorded. `None`: a question answered, or a
/// call that ended undecided (its thread aborted).
pub(crate) async fn get(
    state: &AppState,
    caller: &Caller,
    id: &str,
) -> Result<Option<ApprovalView>, ServiceError> {
    let (approval, t) = approvers::locate(state, id).await?;
    // The thread's owner (or an admin) sees all of it; an approver the call names, that call;
    // one a question's deadline escalated to, that question.
    let seeing = caller.may_see(&t);
    let seq = approval.park.seq;
    let store = state.runtime().store();
    let (records, queue) = tokio::try_join!(store.records(t.id), store.queue(t.id))?;
    // A question, still waiting (at this id, or at one a deadline's record moved it to).
    if let Some(park) = t.park()
        && deadline::park_span(&records, approval.park).names(park)
    {
        let escalated = || caller.named_by(&deadline::escalated_at(&records, park));
        return match seeing || escalated() {
            true => view(state, caller, &t).await,
            false => Err(absent(id)),
        };
    }
    let Some((asked, asked_at)) = approvers::asked(&records, seq) else {
        return match seeing {
            true => Ok(None),
            false => Err(absent(id)),
        };
    };
    if !seeing && !approvers::may_decide(caller, &t, &records, seq, &asked.approvers) {
        return Err(absent(id));
    }
    // Queued (approved, its tool not run yet) or written by the run.
    let decided = queue
        .into_iter()
        .filter_map(|q| q.decision)
        .chain(records.into_iter().filter_map(|r| match r.body {
            RecordBody::ApprovalDecided(d) => Some(d),
            _ => None,
        }))
        .find(|d| d.approval == seq);
    let waiting = pending_calls(state, caller, &t, None, false)
        .await?
        .into_iter()
        .find(|v| v.park == approval.park.to_string());
    if let Some(mut v) = waiting {
        v.decided = decided.as_ref().map(crate::views::decided);
        return Ok(Some(v));
    }
    let Some(decided) = decided else {
        return Ok(None);
    };
    let parents = parent_views(caller, &parents(state, &t).await?);
    Ok(Some(ApprovalView {
        // Decided: its deadline no longer applies.
        deadline: None,
        id: approval.to_string(),
        kind: "tool_call",
        tool: Some(asked.tool),
        call: Some(asked.call),
        arguments: Some(asked.arguments),
        decisions: Some(
            asked
                .decisions
                .iter()
                .map(|d| d.as_str().to_owned())
                .collect(),
        ),
        approvers: Some(serde_json::json!(asked.approvers)),
        decided: Some(crate::views::decided(&decided)),
        thread: caller.visible_key(&t.key),
        agent: t.agent.clone(),
        park: approval.park.to_string(),
        question: None,
        since: asked_at,
        parents,
    }))
}

/// A question with what led to it.
pub(crate) struct Conversation {
    pub thread: Thread,
    /// Its parents, nearest first.
    pub parents: Vec<Thread>,
    /// The thread's messages before the park (none silent), in order: the last asks.
    pub before: Vec<Message>,
    /// The thread in its parent's registry, for a subagent.
    pub child: Option<Child>,
    /// The parent's tool call that led to the child.
    pub call: Option<ToolCall>,
    /// Whether the park still waits.
    pub waiting: bool,
    /// The answer it got, once it has one.
    pub answer: Option<FirstAnswer>,
}

/// Approval `id` ([`find`]) with its conversation, its parents and, once answered, the answer.
pub(crate) async fn conversation(
    state: &AppState,
    caller: &Caller,
    id: &str,
) -> Result<Conversation, ServiceError> {
    let (approval, thread) = find(state, caller, id).await?;
    let store = state.runtime().store();
    // The question's own session, read alone (O(its entries), not the thread's whole history):
    // what led to it, and the deadline's records written while it waited. A journal with no
    // `session_started` for it (none is written before a session opens) is read whole.
    let mut entries = store
        .session_entries(thread.id, approval.park.session, thread.next_seq)
        .await?;
    if entries.is_empty() {
        entries = store.journal_since(thread.id, 0).await?;
    }
    let mut records = Vec::new();
    let mut before = Vec::new();
    for entry in entries {
        match entry {
            JournalEntry::Record(r) => records.push(r),
            JournalEntry::Message(m) => {
                if m.seq < approval.park.seq && !m.silent {
                    before.push(m);
                }
            }
        }
    }
    // Where the question stands: a deadline's reminder moves its park past the id's.
    let span = deadline::park_span(&records, approval.park);
    let parents = parents(state, &thread).await?;
    let (child, call) = match parents.first() {
        Some(parent) => {
            let child = store.child(thread.id).await?;
            let call = match &child {
                Some(c) => spawning_call(&store.messages(parent.id).await?, c),
                None => None,
            };
            (child, call)
        }
        None => (None, None),
    };
    let waiting = thread.park().is_some_and(|p| span.names(p));
    let answer = if waiting {
        None
    } else {
        answer_to(state, thread.id, span.now()).await?
    };
    Ok(Conversation {
        thread,
        parents,
        before,
        child,
        call,
        waiting,
        answer,
    })
}

/// The parent's tool call that led to `child`: the one it waits on, else the last call made
/// before the child was spawned.
fn spawning_call(parent: &[Message], child: &Child) -> Option<ToolCall> {
    let mut calls = parent
        .iter()
        .flat_map(|m| m.tool_calls.iter().map(move |c| (m.created_at, c)));
    let awaited = child
        .awaiting
        .as_ref()
        .and_then(|id| calls.clone().find(|(_, c)| &c.id == id));
    awaited
        .or_else(|| calls.rfind(|(at, _)| *at <= child.created_at))
        .map(|(_, c)| c.clone())
}
