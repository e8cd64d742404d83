//! `ListTasks` for a duet agent: the caller's top-level threads of this agent, newest first,
//! each thread's current session a task; with `contextId`, every session of that one thread.
//! Filters by state and status time; the page token is the last thread (or session) listed.

use duet_a2a::{A2aError, Context, Handled, ListTasksRequest, ListTasksResponse, Task};
use duet_runtime::Thread;

use super::agent::DuetAgent;
use super::follow;
use super::tasks::{self, TaskRef, View};
use crate::auth::Caller;
use crate::service;

/// How many threads one store read lists while scanning.
const BATCH: usize = 500;

impl DuetAgent {
    /// `ListTasks` (`A2aAgent::list_tasks`) for this agent.
    pub(super) async fn tasks(
        &self,
        caller: &Caller,
        req: ListTasksRequest,
        cx: &Context,
    ) -> Handled<ListTasksResponse> {
        let after = req.status_after().map(|t| t.timestamp_millis());
        // A task's status time: its thread's last change for the current session, its last
        // entry's for an earlier one.
        let matches = |task_state, at: i64| {
            req.status.is_none_or(|s| s == task_state) && after.is_none_or(|a| at > a)
        };
        let bad_token = || {
            A2aError::invalid_params(
                "pageToken is not one this server gave",
                vec![(
                    "pageToken".into(),
                    "a nextPageToken from a previous page".into(),
                )],
            )
        };
        let view = |t: &Thread| View {
            context: caller.visible_key(&t.key),
            client: self.client,
            history: cx.history_length,
            artifacts: req.include_artifacts.unwrap_or(false),
            origin: Some(super::files_out::origin(&self.state, Some(&cx.request))),
        };
        let mut page: Vec<Task> = Vec::new();
        let mut total = 0usize;
        let mut next = String::new();
        if let Some(context) = &req.context_id {
            crate::input::key("contextId", context).map_err(crate::input::Fault::into_a2a)?;
            let Some(t) = service::threads::find_on(&self.state, caller, &self.agent, context)
                .await
                .map_err(A2aError::internal)?
            else {
                return Ok(empty(cx.page_size));
            };
            let below = match req.page_token.as_deref() {
                Some(tok) => tok.parse::<i64>().map_err(|_| bad_token())?,
                None => i64::MAX,
            };
            let v = view(&t);
            let mut last_listed = None;
            for session in (1..=t.session.max(1)).rev() {
                let r = TaskRef {
                    thread: t.id,
                    session,
                };
                let mut facts = service::tasks::facts(&self.state, &t, session)
                    .await
                    .map_err(A2aError::internal)?;
                let at = if session == t.session {
                    t.updated_at
                } else {
                    facts.last_at
                };
                if !matches(tasks::state(&t, session, &facts), at) {
                    continue;
                }
                total += 1;
                if session >= below {
                    continue;
                }
                if page.len() == cx.page_size {
                    if next.is_empty() {
                        next = last_listed.map(|s: i64| s.to_string()).unwrap_or_default();
                    }
                    continue;
                }
                super::follow::with_files(&self.state, &t, r, &mut facts, &v).await?;
                page.push(tasks::task(&t, r, &facts, &v));
                last_listed = Some(session);
            }
        } else {
            let after = match req.page_token.as_deref() {
                Some(tok) => Some(tok.parse::<uuid::Uuid>().map_err(|_| bad_token())?),
                None => None,
            };
            let mut cursor = None;
            let mut last_listed = None;
            loop {
                let batch =
                    service::tasks::top_level(&self.state, caller, &self.agent, cursor, BATCH)
                        .await
                        .map_err(A2aError::internal)?;
                let Some(end) = batch.last().map(|t| t.id) else {
                    break;
                };
                for t in &batch {
                    let r = TaskRef::current(t);
                    // A `waiting` thread may wait on a child (working) or on decisions
                    // (input-required): only its journal tells.
                    let read = if t.status == duet_runtime::ThreadStatus::Waiting {
                        Some(follow::read(&self.state, r, &view(t)).await?.1)
                    } else {
                        None
                    };
                    let s = read
                        .as_ref()
                        .map_or_else(|| tasks::current_state(t), |k| k.status.state);
                    if !matches(s, t.updated_at) {
                        continue;
                    }
                    total += 1;
                    // Newest first: ids after the token are older (smaller) ones.
                    if after.is_some_and(|a| t.id >= a) {
                        continue;
                    }
                    if page.len() == cx.page_size {
                        if next.is_empty() {
                            next = last_listed
                                .map(|id: uuid::Uuid| id.to_string())
                                .unwrap_or_default();
                        }
                        continue;
                    }
                    let task = match read {
                        Some(task) => task,
                        None => follow::read(&self.state, r, &view(t)).await?.1,
                    };
                    page.push(task);
                    last_listed = Some(t.id);
                }
                if batch.len() < BATCH {
                    break;
                }
                cursor = Some(end);
            }
        }
        Ok(ListTasksResponse {
            page_size: i32::try_from(cx.page_size).unwrap_or(i32::MAX),
            tasks: page,
            next_page_token: next,
            total_size: i32::try_from(total).unwrap_or(i32::MAX),
        })
    }
}

fn empty(page: usize) -> ListTasksResponse {
    ListTasksResponse {
        tasks: vec![],
        next_page_token: String::new(),
        page_size: i32::try_from(page).unwrap_or(i32::MAX),
        total_size: 0,
    }
}
