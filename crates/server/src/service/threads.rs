//! Threads as a caller sees them. [`find`] is the one visibility check: a thread by the key the
//! caller calls it, refused as [`ServiceError::NotFound`] when it is another principal's (what
//! the caller may not see is not there); [`on_agent`] narrows it to one agent's own routes (the
//! control plane, A2A). Listings are filtered to the caller's principal here, and a thread is
//! read with its parent once, for every adapter that shows both.

use std::collections::HashMap;

use duet_runtime::control::ControlError;
use duet_runtime::{Child, ParentFilter, Thread, ThreadId, ThreadQuery, ThreadStatus};

use super::ServiceError;
use crate::auth::Caller;
use crate::state::AppState;

/// The thread `caller` calls `key`: [`ServiceError::Invalid`] for a key that is not one,
/// [`ServiceError::NotFound`] when there is none or it is another principal's.
pub(crate) async fn find(
    state: &AppState,
    caller: &Caller,
    key: &str,
) -> Result<Thread, ServiceError> {
    crate::input::key("key", key).map_err(ServiceError::Invalid)?;
    let stored = caller.stored_key(key);
    match state.runtime().store().thread(&stored).await? {
        Some(t) if caller.may_see(&t) => Ok(t),
        _ => Err(ServiceError::NotFound(format!("no thread `{key}`"))),
    }
}

/// Whether `t` is a thread `agent`'s own routes show `caller`: one it may see, of that agent or
/// started by it.
pub(crate) fn on_agent(caller: &Caller, agent: &str, t: &Thread) -> bool {
    caller.may_see(t) && (t.agent == agent || t.origin == agent)
}

/// The thread `caller` calls `key` (a checked key) on `agent`'s routes, if [`on_agent`] shows it.
pub(crate) async fn find_on(
    state: &AppState,
    caller: &Caller,
    agent: &str,
    key: &str,
) -> Result<Option<Thread>, ServiceError> {
    let t = state
        .runtime()
        .store()
        .thread(&caller.stored_key(key))
        .await?;
    Ok(t.filter(|t| on_agent(caller, agent, t)))
}

/// Thread `id` read again: one the caller was already found allowed to, as it is now (gone:
/// `None`).
pub(crate) async fn reread(state: &AppState, id: ThreadId) -> Result<Option<Thread>, ServiceError> {
    Ok(state.runtime().store().thread_by_id(id).await?)
}

/// Thread `id` (the caller calls it `visible`) with its parent: as the run the caller waited for
/// left it (`last`, when it is that thread), else as read now.
pub(crate) async fn settled_with_parent(
    state: &AppState,
    last: Option<Thread>,
    id: ThreadId,
    visible: &str,
) -> Result<(Thread, Option<Thread>), ServiceError> {
    let t = match last.filter(|t| t.id == id) {
        Some(t) => t,
        None => reread(state, id)
            .await?
            .ok_or_else(|| ServiceError::NotFound(format!("no thread `{visible}`")))?,
    };
    with_parent(state, t).await
}

/// `t` with its parent (none for a top-level thread, or a parent gone).
pub(crate) async fn with_parent(
    state: &AppState,
    t: Thread,
) -> Result<(Thread, Option<Thread>), ServiceError> {
    let parent = match t.parent {
        Some(p) => reread(state, p).await?,
        None => None,
    };
    Ok((t, parent))
}

/// What a new thread's key finds.
pub(crate) enum Slot {
    /// No thread: it may be created.
    Free,
    /// The caller's thread, which already has the create's message id: a retried create.
    Replay(Box<Thread>),
    /// The caller's thread, and this is not a retry of its create.
    Taken,
}

/// What the key `caller` calls `key` (a checked key) holds for a create carrying
/// `message_id`; another principal's thread is [`ServiceError::NotFound`].
pub(crate) async fn slot(
    state: &AppState,
    caller: &Caller,
    key: &str,
    message_id: Option<&str>,
) -> Result<Slot, ServiceError> {
    let Some(t) = state
        .runtime()
        .store()
        .thread(&caller.stored_key(key))
        .await?
    else {
        return Ok(Slot::Free);
    };
    if !caller.may_see(&t) {
        return Err(ServiceError::NotFound(format!("no thread `{key}`")));
    }
    let replay = match message_id {
        Some(id) => super::messages::delivered(state, &t, id).await?,
        None => false,
    };
    Ok(if replay {
        Slot::Replay(Box::new(t))
    } else {
        Slot::Taken
    })
}

/// Which of the caller's threads to list, a page at a time.
pub(crate) struct Listing<'a> {
    pub agent: Option<&'a str>,
    pub status: Option<ThreadStatus>,
    pub parent: ParentFilter,
    /// The last thread of the previous page.
    pub after: Option<ThreadId>,
    pub newest_first: bool,
    pub limit: usize,
}

/// A page of the threads `caller` may see, each with its parent (each parent read once).
pub(crate) async fn list(
    state: &AppState,
    caller: &Caller,
    listing: &Listing<'_>,
) -> Result<Vec<(Thread, Option<Thread>)>, ServiceError> {
    let query = ThreadQuery {
        agent: listing.agent,
        status: listing.status,
        parent: listing.parent,
        principal: caller.owner_filter(),
        after: listing.after,
        newest_first: listing.newest_first,
        limit: listing.limit,
    };
    let threads = state.runtime().store().list_threads(&query).await?;
    let mut parents: HashMap<ThreadId, Option<Thread>> = HashMap::new();
    let mut out = Vec::with_capacity(threads.len());
    for t in threads {
        let parent = match t.parent {
            Some(p) => match parents.get(&p) {
                Some(read) => read.clone(),
                None => {
                    let read = reread(state, p).await?;
                    parents.insert(p, read.clone());
                    read
                }
            },
            None => None,
        };
        out.push((t, parent));
    }
    Ok(out)
}

/// A thread with its parent and its subagents (each with its thread's stored key).
pub(crate) struct Detail {
    pub thread: Thread,
    pub parent: Option<Thread>,
    pub children: Vec<(Child, String)>,
}

/// The thread `caller` calls `key` ([`find`]), with its parent and its subagents.
pub(crate) async fn detail(
    state: &AppState,
    caller: &Caller,
    key: &str,
) -> Result<Detail, ServiceError> {
    let (thread, parent) = with_parent(state, find(state, caller, key).await?).await?;
    let store = state.runtime().store();
    let mut children = Vec::new();
    for c in store.children(thread.id).await? {
        if let Some(child) = store.thread_by_id(c.child).await? {
            children.push((c, child.key));
        }
    }
    Ok(Detail {
        thread,
        parent,
        children,
    })
}

/// Terminates `t` (one the caller was found allowed to) and every descendant: how many ended.
pub(crate) async fn terminate(state: &AppState, t: &Thread) -> Result<usize, ControlError> {
    // An admin may end another principal's thread; the runtime checks the principal again, so
    // it is asked as the thread's owner.
    state.runtime().terminate(&owner_scope(t)).await
}

/// The control-plane scope of `t` as its owner sees it.
fn owner_scope(t: &Thread) -> duet_runtime::Scope {
    duet_runtime::Scope {
        session: t.key.clone(),
        principal: t
            .principal
            .as_deref()
            .and_then(|p| serde_json::from_str(p).ok()),
        source: None,
    }
}
