//! A thread's files as a caller reaches them over HTTP, through [`duet_runtime::ThreadFiles`]
//! (`Runtime::files()`): the thread an upload goes to (opened idle for an agent when the caller
//! asks), an upload streamed into the chunk store and named by a row only once it is whole, a
//! directory's entries a page at a time, one file, its bytes, its removal. Visibility is
//! [`super::threads::find`]'s.

use duet_runtime::files::{FileError, FileRecord};
use duet_runtime::{NewThread, RunError, StreamError, Thread, ThreadId};
use futures::Stream;

use super::{ServiceError, threads};
use crate::auth::Caller;
use crate::state::AppState;

/// The thread `caller` calls `key` for an upload: when there is none and `agent` is given, a
/// thread of that agent opened idle for the caller (nothing runs until a message comes), its
/// source `source` (`http`, `a2a`).
pub(crate) async fn for_upload(
    state: &AppState,
    caller: &Caller,
    key: &str,
    agent: Option<&str>,
    source: &'static str,
) -> Result<Thread, ServiceError> {
    let found = threads::find(state, caller, key).await;
    let (Err(ServiceError::NotFound(_)), Some(agent)) = (&found, agent) else {
        return found;
    };
    let rt = state.runtime();
    if !rt.project().agents.contains_key(agent) {
        return Err(ServiceError::run(
            RunError::UnknownAgent(agent.to_owned()),
            key,
        ));
    }
    let new = NewThread {
        id: uuid::Uuid::now_v7(),
        agent,
        parent: None,
        principal: caller.acting_for(None),
        source: Some(source),
        now: rt.now_ms(),
    };
    let t = rt.store().open_thread(&caller.stored_key(key), new).await?;
    // Opened meanwhile by someone else under the same stored key (an admin's raw key).
    if !caller.may_see(&t) {
        return Err(ServiceError::NotFound(format!("no thread `{key}`")));
    }
    Ok(t)
}

/// Stores `body` as the file at `path` of `t` (its type as declared, if it was), at most `room`
/// bytes ([`room`]), and only then writes its row: a body refused or broken off leaves no file
/// (its chunks stored so far are swept later).
pub(crate) async fn upload<S, B, E>(
    state: &AppState,
    t: &Thread,
    path: &str,
    body: S,
    declared: Option<&str>,
    room: u64,
) -> Result<FileRecord, StreamError<E>>
where
    S: Stream<Item = Result<B, E>> + Unpin,
    B: AsRef<[u8]>,
{
    let files = state.runtime().files();
    let record = files.store_stream(path, body, declared, Some(room)).await?;
    files.put(t.id, record).await.map_err(StreamError::File)
}

/// The bytes one upload to `t` may have: the per-file limit, or what the thread's own limit
/// leaves of it, whichever is less (a file it replaces is not counted back: an upload over its
/// old self is refused at the edge rather than stored whole first).
pub(crate) async fn room(state: &AppState, t: &Thread) -> Result<u64, ServiceError> {
    let files = state.runtime().files();
    let limits = files.limits();
    let used = u64::try_from(files.stats(t.id).await?.bytes).unwrap_or(0);
    Ok(limits
        .max_file_bytes
        .min(limits.max_thread_bytes.saturating_sub(used)))
}

/// The per-file limit, in bytes.
pub(crate) fn max_file_bytes(state: &AppState) -> u64 {
    state.runtime().files().limits().max_file_bytes
}

/// The entries directly inside directory `dir` of `t`, by path, at most `limit` after `after`.
pub(crate) async fn list(
    state: &AppState,
    t: &Thread,
    dir: &str,
    after: Option<&str>,
    limit: usize,
) -> Result<Vec<FileRecord>, ServiceError> {
    Ok(state
        .runtime()
        .files()
        .list(t.id, dir, after, limit)
        .await?)
}

/// The file at `path` of `t`.
pub(crate) async fn file(
    state: &AppState,
    t: &Thread,
    path: &str,
) -> Result<FileRecord, ServiceError> {
    Ok(state.runtime().files().file(t.id, path).await?)
}

/// Bytes `start..end` of `record`, a chunk at a time.
pub(crate) fn bytes(
    state: &AppState,
    record: &FileRecord,
    start: u64,
    end: u64,
) -> impl Stream<Item = Result<Vec<u8>, FileError>> + Send + 'static {
    state.runtime().files().range(record, start, end)
}

/// Removes the file at `path` of `t`.
pub(crate) async fn remove(state: &AppState, t: &Thread, path: &str) -> Result<(), ServiceError> {
    let files = state.runtime().files();
    let writes = files.plan_unlink(t.id, path, &[]).await?;
    Ok(files.apply(t.id, writes).await?)
}

/// Stores `body` in `t` as an attachment named `name` (made safe) under `/attachments`: at
/// `/attachments/<name>`, or `<name>-2…` when another file is there (the same content reuses
/// its path), so nothing a message already names is replaced. Streamed within the limits, and
/// its row written only once the body is whole, as [`upload`].
pub(crate) async fn attach<S, B, E>(
    state: &AppState,
    t: &Thread,
    name: &str,
    body: S,
    declared: Option<&str>,
) -> Result<FileRecord, StreamError<E>>
where
    S: Stream<Item = Result<B, E>> + Unpin,
    B: AsRef<[u8]>,
{
    let files = state.runtime().files();
    let dir = duet_runtime::files::ATTACHMENTS;
    let name = duet_runtime::files::path::safe_name(name);
    let mut record = files
        .store_stream(&format!("{dir}/{name}"), body, declared, None)
        .await?;
    record.path = files
        .free_path(t.id, (dir, &name), &record.chunks, &[], &[])
        .await
        .map_err(StreamError::File)?;
    files.put(t.id, record).await.map_err(StreamError::File)
}

/// The file at `path` of thread `holder` as the inbox serves it on approval `id`'s pages:
/// `holder` is the approval's thread or one of its parents (whoever may open the page may
/// read it, [`super::approvals::find`]), and some message of it names the file as an
/// attachment — the inbox serves what its conversations show, no other file of the thread.
pub(crate) async fn attached(
    state: &AppState,
    caller: &Caller,
    id: &str,
    holder: ThreadId,
    path: &str,
) -> Result<FileRecord, ServiceError> {
    let (_, thread) = super::approvals::find(state, caller, id).await?;
    let holder = if thread.id == holder {
        thread
    } else {
        super::approvals::parents(state, &thread)
            .await?
            .into_iter()
            .find(|p| p.id == holder)
            .ok_or_else(|| ServiceError::NotFound("no such thread on this page".into()))?
    };
    let path = duet_runtime::files::path::normalize(path)?;
    let named = state
        .runtime()
        .store()
        .messages(holder.id)
        .await?
        .iter()
        .any(|m| !m.silent && m.attachments.iter().any(|a| a.path == path));
    if !named {
        return Err(ServiceError::NotFound(format!(
            "no message of this conversation attaches `{path}`"
        )));
    }
    file(state, &holder, &path).await
}
