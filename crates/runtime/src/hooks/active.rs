//! Running the hooks in force for one step: `ActiveHooks` calls one kind's hooks in order, skips
//! one that fails (keeping the failure for the journal), and keeps the writes hooks buffered.

use std::sync::Arc;

use duet_spec::Project;

use super::{
    Hook, HookContext, HookError, HookSource, HookState, HookWrites, Hooks, Policy, PolicyCall,
    Prefiltered,
};
use crate::model::ChatMessage;
use crate::record::RecordBody;
use crate::tools::ToolResult;
use crate::types::{Message, Thread, ToolCall};

/// One hook to run: its kind, implementation, id and provenance.
#[derive(Clone)]
pub(crate) struct Active {
    pub(crate) kind: String,
    pub(crate) hook: Arc<dyn Hook>,
    pub(crate) id: String,
    pub(crate) source: HookSource,
}

impl Hooks {
    /// The implementations for `refs`; a reference with no definition or no registered
    /// implementation is returned as the error (composition fails closed).
    pub(crate) fn activate(
        &self,
        project: &Project,
        refs: Vec<(String, HookSource)>,
    ) -> Result<ActiveHooks, String> {
        let hooks: Vec<Active> = refs
            .into_iter()
            .map(|(id, source)| {
                let def = project
                    .hooks
                    .get(&id)
                    .ok_or_else(|| format!("hook `{id}` is not defined"))?;
                if def.def.code.is_some() {
                    if self.0.contains_key(&def.def.builtin) {
                        return Err(format!(
                            "hook `{id}` is defined twice: by its own `execute` in {} and by the \
                             Rust hook registered as `{}`; keep one",
                            def.source.file, def.def.builtin
                        ));
                    }
                    let hook = self.1.get(&id).cloned().ok_or_else(|| {
                        format!("hook `{id}`'s code is not loaded in this runtime")
                    })?;
                    return Ok(Active {
                        kind: def.def.hook.clone(),
                        hook,
                        id,
                        source,
                    });
                }
                let hook = self.0.get(&def.def.builtin).cloned().ok_or_else(|| {
                    let builtin = &def.def.builtin;
                    format!(
                        "hook `{id}` needs the implementation `{builtin}`, which this runtime \
                         does not register: register it with `RuntimeBuilder::hooks` \
                         (`.hooks(Hooks::new().with(\"{builtin}\", …))`; duet's own hooks are \
                         `.hooks(duet_handlers::hooks())`, which `duet::compose` registers)"
                    )
                })?;
                Ok(Active {
                    kind: def.def.hook.clone(),
                    hook,
                    id,
                    source,
                })
            })
            .collect::<Result<_, String>>()?;
        Ok(ActiveHooks {
            hooks: hooks.into(),
            failures: Vec::new(),
            state: Arc::new(HookState::default()),
        })
    }
}

/// The hooks in force for one step (or handler delivery), in order, and the failures seen: each
/// failed hook is skipped, its input passed on, and the failure journaled with the step (as is a
/// `tool_call_policy` hook's denial).
#[derive(Clone, Default)]
pub(crate) struct ActiveHooks {
    hooks: Arc<[Active]>,
    pub(crate) failures: Vec<RecordBody>,
    /// The store, env and buffered writes behind every context (shared by clones: a handler
    /// turn's deliveries take the writes after each).
    state: Arc<HookState>,
}

impl ActiveHooks {
    /// Gives the hooks their side's env and the store they read values from.
    pub(crate) fn with_state(
        mut self,
        store: &Arc<dyn crate::store::Store>,
        files: &crate::thread_files::ThreadFiles,
        env: &std::collections::BTreeMap<String, String>,
    ) -> Self {
        if self.hooks.is_empty() {
            // No hook runs, so none reads or writes: nothing to set up on this hot path.
            return self;
        }
        self.state = Arc::new(HookState {
            store: Some(store.clone()),
            files: Some(files.clone()),
            env: env.clone(),
            writes: Default::default(),
        });
        self
    }

    /// Adds what a step's `.ts` tool wrote through its `state` to what this step's hooks
    /// wrote: the step's commit writes it (a tool call that failed wrote nothing).
    pub(crate) fn absorb(&self, writes: crate::handler::Writes) {
        if let Ok(mut w) = self.state.writes.lock() {
            w.messages.extend(writes.injected);
            w.values.extend(writes.values);
            w.queued.extend(writes.queued);
            if writes.status.is_some() {
                w.status = writes.status;
            }
            w.timers.extend(writes.timers);
            w.cancel.extend(writes.cancel);
            w.events.extend(writes.events);
            w.files.extend(writes.files);
        }
    }

    /// The file rows this step's `.ts` tools wrote that the commit has not written yet.
    pub(crate) fn pending_files(&self) -> Vec<crate::files::FileWrite> {
        self.state
            .writes
            .lock()
            .map(|w| w.files.clone())
            .unwrap_or_default()
    }

    /// A durable value this step's hooks (or `.ts` tools) set and the commit has not written yet:
    /// `Some(None)` for one they deleted.
    pub(crate) fn pending_value(&self, key: &str) -> Option<Option<serde_json::Value>> {
        let writes = self.state.writes.lock().ok()?;
        writes
            .values
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    }

    /// What the hooks wrote so far (taken: the next commit writes it).
    pub(crate) fn take_writes(&self) -> HookWrites {
        self.state
            .writes
            .lock()
            .map(|mut w| std::mem::take(&mut *w))
            .unwrap_or_default()
    }

    fn of(&self, kind: &'static str) -> Vec<Active> {
        self.hooks
            .iter()
            .filter(|h| h.kind == kind)
            .cloned()
            .collect()
    }

    pub(crate) fn has(&self, kind: &str) -> bool {
        self.hooks.iter().any(|h| h.kind == kind)
    }

    /// Whether no hook is in force.
    pub(crate) fn is_empty(&self) -> bool {
        self.hooks.is_empty()
    }

    fn failed(&mut self, h: &Active, e: &HookError) {
        self.failures.push(RecordBody::HookFailed {
            id: h.id.clone(),
            kind: h.kind.clone(),
            error: e.0.clone(),
        });
    }

    pub(crate) async fn after_thread_created(&mut self, t: &Thread) {
        for h in self.of("after_thread_created") {
            if let Err(e) = h.hook.after_thread_created(&h.ctx(t, &self.state)).await {
                self.failed(&h, &e);
            }
        }
    }

    pub(crate) async fn after_subagent_created(&mut self, t: &Thread, child: &Thread) {
        for h in self.of("after_subagent_created") {
            if let Err(e) = h
                .hook
                .after_subagent_created(&h.ctx(t, &self.state), child)
                .await
            {
                self.failed(&h, &e);
            }
        }
    }

    pub(crate) async fn after_system_message(&mut self, t: &Thread, mut text: String) -> String {
        for h in self.of("after_system_message") {
            match h
                .hook
                .after_system_message(&h.ctx(t, &self.state), text.clone())
                .await
            {
                Ok(new) => text = new,
                Err(e) => self.failed(&h, &e),
            }
        }
        text
    }

    pub(crate) async fn filter_messages(
        &mut self,
        t: &Thread,
        mut messages: Vec<ChatMessage>,
    ) -> Vec<ChatMessage> {
        let hooks = self.of("filter_messages");
        if hooks.is_empty() {
            return messages;
        }
        for h in hooks {
            match h
                .hook
                .filter_messages(&h.ctx(t, &self.state), messages.clone())
                .await
            {
                Ok(new) => messages = new,
                Err(e) => self.failed(&h, &e),
            }
        }
        repair_pairs(messages)
    }

    pub(crate) async fn prefilter_llm_history(
        &mut self,
        t: &Thread,
        mut messages: Vec<ChatMessage>,
    ) -> Prefiltered {
        for h in self.of("prefilter_llm_history") {
            match h
                .hook
                .prefilter_llm_history(&h.ctx(t, &self.state), messages.clone())
                .await
            {
                Ok(Prefiltered::Messages(new)) => messages = new,
                Ok(Prefiltered::Block(why)) => return Prefiltered::Block(why),
                Err(e) => self.failed(&h, &e),
            }
        }
        Prefiltered::Messages(messages)
    }

    /// `before_create_message` for a message the runtime writes: a failing hook is skipped.
    pub(crate) async fn before_create_message(&mut self, t: &Thread, message: Message) -> Message {
        let hooks = self.of("before_create_message");
        if hooks.is_empty() {
            return message;
        }
        let original = message.clone();
        let mut message = message;
        for h in hooks {
            match h
                .hook
                .before_create_message(&h.ctx(t, &self.state), message.clone())
                .await
            {
                Ok(new) => message = new,
                Err(e) => self.failed(&h, &e),
            }
        }
        keep_identity(message, &original)
    }

    /// `before_create_message` for a message a handler writes: a failing hook rejects the write.
    pub(crate) async fn before_create_message_strict(
        &self,
        t: &Thread,
        message: Message,
    ) -> Result<Message, HookError> {
        let hooks = self.of("before_create_message");
        if hooks.is_empty() {
            return Ok(message);
        }
        let original = message.clone();
        let mut message = message;
        for h in hooks {
            message = h
                .hook
                .before_create_message(&h.ctx(t, &self.state), message)
                .await
                .map_err(|e| HookError(format!("hook `{}`: {}", h.id, e.0)))?;
        }
        Ok(keep_identity(message, &original))
    }

    /// `before_create_message` for each of `messages`, in order.
    pub(crate) async fn before_create_all(
        &mut self,
        t: &Thread,
        messages: Vec<Message>,
    ) -> Vec<Message> {
        let mut out = Vec::with_capacity(messages.len());
        for m in messages {
            out.push(self.before_create_message(t, m).await);
        }
        out
    }

    /// `after_create_message` for messages already committed: a failure has no step left to be
    /// journaled with, so it goes to the log.
    pub(crate) async fn after_create_message(&self, t: &Thread, messages: &[Message]) {
        for h in self.of("after_create_message") {
            let ctx = HookContext {
                writable: false,
                ..h.ctx(t, &self.state)
            };
            for m in messages {
                if let Err(e) = h.hook.after_create_message(&ctx, m).await {
                    tracing::warn!(thread = %t.id, hook = %h.id, error = %e, "after_create_message failed");
                }
            }
        }
    }

    /// `question_reminder`, after its record is committed: a failure goes to the log.
    pub(crate) async fn question_reminder(
        &self,
        t: &Thread,
        reminder: &crate::hooks::Reminder<'_>,
    ) {
        for h in self.of("question_reminder") {
            let ctx = HookContext {
                writable: false,
                ..h.ctx(t, &self.state)
            };
            if let Err(e) = h.hook.question_reminder(&ctx, reminder).await {
                tracing::warn!(thread = %t.id, hook = %h.id, error = %e, "question_reminder failed");
            }
        }
    }

    /// `tool_call_policy` for one call: the hooks' answers combined (most restrictive wins; the
    /// first `Deny` ends the asking), with the id of the hook that gave it. A failing hook is
    /// journaled and counts as `Ask` (fail closed). `None`: no such hook is in force.
    pub(crate) async fn tool_call_policy(
        &mut self,
        t: &Thread,
        call: &PolicyCall<'_>,
    ) -> Option<(String, Policy)> {
        let mut verdict: Option<(String, Policy)> = None;
        for h in self.of("tool_call_policy") {
            let answer = match h.hook.tool_call_policy(&h.ctx(t, &self.state), call).await {
                Ok(p) => p,
                Err(e) => {
                    self.failed(&h, &e);
                    Policy::Ask {
                        decisions: None,
                        deadline: None,
                    }
                }
            };
            let stronger = verdict
                .as_ref()
                .is_none_or(|(_, v)| answer.rank() > v.rank());
            let deny = matches!(answer, Policy::Deny { .. });
            if stronger {
                verdict = Some((h.id.clone(), answer));
            }
            if deny {
                break;
            }
        }
        verdict
    }

    /// Journals `body` with the step the hooks run in (a policy's denial).
    pub(crate) fn record(&mut self, body: RecordBody) {
        self.failures.push(body);
    }

    pub(crate) async fn tool_call_started(&mut self, t: &Thread, call: &ToolCall) {
        for h in self.of("tool_call_started") {
            if let Err(e) = h.hook.tool_call_started(&h.ctx(t, &self.state), call).await {
                self.failed(&h, &e);
            }
        }
    }

    /// After a tool ran, in the digest's order: `tool_call_done`, then
    /// `after_tool_call_success` or `_failure` (`None`: drop the call from the history), then
    /// `before_store_tool_result`.
    pub(crate) async fn tool_result(
        &mut self,
        t: &Thread,
        call: &ToolCall,
        result: ToolResult,
    ) -> Option<ToolResult> {
        for h in self.of("tool_call_done") {
            if let Err(e) = h
                .hook
                .tool_call_done(&h.ctx(t, &self.state), call, &result)
                .await
            {
                self.failed(&h, &e);
            }
        }
        // The kind follows what the tool did, even if a hook of it changes the status.
        let succeeded = result.is_ok();
        let mut result = result;
        let after = if succeeded {
            "after_tool_call_success"
        } else {
            "after_tool_call_failure"
        };
        for h in self.of(after) {
            let ctx = h.ctx(t, &self.state);
            let answer = if succeeded {
                h.hook
                    .after_tool_call_success(&ctx, call, result.clone())
                    .await
            } else {
                h.hook
                    .after_tool_call_failure(&ctx, call, result.clone())
                    .await
            };
            match answer {
                Ok(Some(new)) => result = new,
                Ok(None) => return None,
                Err(e) => self.failed(&h, &e),
            }
        }
        for h in self.of("before_store_tool_result") {
            match h
                .hook
                .before_store_tool_result(&h.ctx(t, &self.state), call, result.clone())
                .await
            {
                Ok(new) => result = new,
                Err(e) => self.failed(&h, &e),
            }
        }
        Some(result)
    }
}

/// What `before_create_message` may not change: where the message sits (sequence, session),
/// who wrote it (role, side, model) and how it pairs with tool traffic (call ids and names; the
/// tool result's call id, name and status). Content, thinking, silence and call arguments are
/// the hook's to change.
fn keep_identity(mut message: Message, original: &Message) -> Message {
    message.seq = original.seq;
    message.session = original.session;
    message.role = original.role;
    message.side = original.side;
    message.model.clone_from(&original.model);
    message.tool_call_id.clone_from(&original.tool_call_id);
    message.tool_name.clone_from(&original.tool_name);
    message.tool_status = original.tool_status;
    message.created_at = original.created_at;
    message.message_id.clone_from(&original.message_id);
    let same_calls = message.tool_calls.len() == original.tool_calls.len()
        && message
            .tool_calls
            .iter()
            .zip(&original.tool_calls)
            .all(|(a, b)| a.id == b.id && a.name == b.name);
    if !same_calls {
        message.tool_calls.clone_from(&original.tool_calls);
    }
    message
}

impl Active {
    fn ctx<'a>(&'a self, thread: &'a Thread, state: &'a HookState) -> HookContext<'a> {
        HookContext {
            thread,
            id: &self.id,
            source: self.source.clone(),
            state,
            writable: true,
        }
    }
}

/// Drops tool results whose call is gone and calls whose result is gone (a `filter_messages`
/// hook that split a pair), and messages left with nothing in them.
fn repair_pairs(messages: Vec<ChatMessage>) -> Vec<ChatMessage> {
    use crate::types::Role;
    use std::collections::BTreeSet;
    let calls: BTreeSet<String> = messages
        .iter()
        .flat_map(|m| m.tool_calls.iter().map(|c| c.id.clone()))
        .collect();
    let results: BTreeSet<String> = messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .filter_map(|m| m.tool_call_id.clone())
        .collect();
    messages
        .into_iter()
        .filter_map(|mut m| {
            if m.role == Role::Tool {
                return m
                    .tool_call_id
                    .as_ref()
                    .is_some_and(|id| calls.contains(id))
                    .then_some(m);
            }
            let had_calls = !m.tool_calls.is_empty();
            m.tool_calls.retain(|c| results.contains(&c.id));
            let empty = m.content.as_deref().is_none_or(str::is_empty) && m.tool_calls.is_empty();
            (!(had_calls && empty)).then_some(m)
        })
        .collect()
}
