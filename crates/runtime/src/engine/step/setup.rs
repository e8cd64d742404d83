//! What a step runs with: its prompt, model, env and the hooks in force (any of which failing
//! is the step's error), and the model request — the context the
//! side sees, shaped by the hooks — and the model call itself.

use std::collections::BTreeMap;
use std::sync::Arc;

use duet_spec::{Project, PromptDef, PromptSide};
use tracing::Instrument;

use super::super::router::Offer;
use super::super::{Runtime, Turn, model_call};
use crate::context;
use crate::hooks::{ActiveHooks, Prefiltered};
use crate::model::{Model, ModelError, ModelRequest};
use crate::plan::ModelAnswer;
use crate::types::{Message, Thread};

/// A step's definitions and what they resolved to.
pub(in crate::engine) struct Setup<'p> {
    pub(in crate::engine) prompt: &'p PromptDef,
    model: Arc<dyn Model>,
    pub(in crate::engine) env: BTreeMap<String, String>,
    /// The hooks of this prompt on this agent, in order.
    pub(in crate::engine) hooks: ActiveHooks,
}

impl Runtime {
    /// Resolves the step's prompt, model and hooks (a missing hook fails closed). `Err`: why
    /// the step cannot run.
    pub(in crate::engine) async fn setup<'p>(
        &self,
        project: &'p Project,
        cfg: &PromptSide,
        turn: &Turn<'_>,
    ) -> Result<Setup<'p>, String> {
        let prompt = project
            .prompts
            .get(&cfg.prompt)
            .map(|d| &d.def)
            .ok_or_else(|| format!("no prompt `{}`", cfg.prompt))?;
        let model = self.model(&prompt.model).map_err(|e| e.message)?;
        let env = self.env(turn.agent, Some(prompt), &turn.scope.env);
        let hooks = self
            .hooks_for(turn.agent, Some(prompt), &env)
            .map_err(|e| format!("hooks fail closed: {e}"))?;
        Ok(Setup {
            prompt,
            model,
            env,
            hooks,
        })
    }

    /// The model request: the system prompt and the side's context after the hooks that shape
    /// them, the tools on offer. `Err(why)`: a `prefilter_llm_history` hook blocked the step.
    pub(in crate::engine) async fn request(
        &self,
        offer: &Offer<'_>,
        s: &mut Setup<'_>,
        turn: &Turn<'_>,
        t: &Thread,
        msgs: &[Message],
    ) -> Result<ModelRequest, String> {
        let project = &self.inner.project;
        let (prompt, env, hooks) = (s.prompt, &s.env, &mut s.hooks);
        let system = context::system_prompt(project, prompt, env, &turn.scope.arguments);
        let mut context_messages = context::messages(msgs, turn.side, prompt);
        let takes = crate::model_files::Takes::of(project, &prompt.model);
        crate::model_files::load(self.files(), t.id, &mut context_messages, takes).await;
        let system = hooks.after_system_message(t, system).await;
        let context_messages = hooks.filter_messages(t, context_messages).await;
        let context_messages = match hooks.prefilter_llm_history(t, context_messages).await {
            Prefiltered::Messages(m) => m,
            Prefiltered::Block(why) => return Err(why),
        };
        Ok(ModelRequest {
            thread: t.id,
            call_index: context::call_index(msgs, &prompt.model),
            system,
            messages: context_messages,
            tools: offer.specs.clone(),
            tool_choice: prompt.tool_choice,
            parallel_tool_calls: prompt.parallel_tool_calls,
            reasoning: prompt.reasoning.clone(),
            provider_options: prompt.provider_options.clone(),
        })
    }

    /// Calls the step's model inside its `chat` span, streaming to the caller as it answers;
    /// `Ok(None)`: the run was cancelled meanwhile.
    pub(in crate::engine) async fn ask(
        &self,
        s: &Setup<'_>,
        request: ModelRequest,
        turn: &Turn<'_>,
        live_text: bool,
    ) -> Result<Option<ModelAnswer>, ModelError> {
        let chat = model_call::span(&self.inner.project, &s.prompt.model);
        if self.inner.capture_content {
            crate::telemetry::record_input(&chat, &request.system, &request.messages);
        }
        let call = model_call::call(
            s.model.as_ref(),
            request,
            turn.cancel,
            turn.events,
            live_text,
        );
        let answer = call.instrument(chat.clone()).await?;
        if let (Some(answer), true) = (&answer, self.inner.capture_content) {
            crate::telemetry::record_output(&chat, &answer.text, &answer.calls);
        }
        Ok(answer)
    }
}
