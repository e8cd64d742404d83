//! The engine's decisions, as pure functions over a thread's state: which side acts and how,
//! when a step completes a turn, when a session ends, when to park. No IO, no clock: the driver
//! (`engine.rs`) does the doing, and most engine tests live here.

use duet_spec::{AgentDef, PromptSide, Side};

use crate::types::{
    Message, NewQueued, Role, SideId, StopReason, Thread, ThreadStatus, ToolStatus,
};

/// The global step ceiling per run, raised to the largest per-side `maxSteps`.
pub(crate) const MAX_STEPS: i64 = 250;

/// The step ceiling for `agent`.
pub(crate) fn step_ceiling(agent: &AgentDef) -> i64 {
    let side_max = |s: &Side| match s {
        Side::Prompt(p) => p.max_steps.map_or(0, i64::from),
        _ => 0,
    };
    MAX_STEPS
        .max(side_max(&agent.sides.a))
        .max(side_max(&agent.sides.b))
}

/// What the runner does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// Nothing is running and nothing was delivered: settle as is.
    Settle,
    /// The exchange cap is reached: end the session.
    EndSession(StopReason),
    /// The acting side is human: park.
    Park,
    /// A safety limit: stop the run, session still open.
    Stop(StopReason),
    /// Run the acting side's handler turn.
    Handler(SideId),
    /// Run one model step on the acting side.
    Step(SideId),
}

/// The definition of `agent`'s side `id`.
pub(crate) fn side(agent: &AgentDef, id: SideId) -> &Side {
    agent.side(id)
}

/// Whether the exchange cap `maxSessionTurns` is reached: `min(turns_a, turns_b) >= cap`.
pub(crate) fn cap_reached(agent: &AgentDef, t: &Thread) -> bool {
    agent
        .max_session_turns
        .is_some_and(|cap| t.turns.a.min(t.turns.b) >= i64::from(cap))
}

/// The next action for a thread whose runner holds its lease.
pub(crate) fn next(agent: &AgentDef, t: &Thread) -> Next {
    if t.status != ThreadStatus::Running {
        return Next::Settle;
    }
    let Some(acting) = t.acting else {
        return Next::Settle;
    };
    if cap_reached(agent, t) {
        return Next::EndSession(StopReason::MaxSessionTurns);
    }
    match side(agent, acting) {
        Side::Human(_) => Next::Park,
        Side::Handler(_) => Next::Handler(acting),
        Side::Prompt(p) => {
            if p.max_steps.is_some_and(|m| t.steps[acting] >= i64::from(m)) {
                Next::Stop(StopReason::MaxSideSteps)
            } else if t.steps_total >= step_ceiling(agent) {
                Next::Stop(StopReason::MaxTotalSteps)
            } else {
                Next::Step(acting)
            }
        }
    }
}

/// A tool call of a step with how it went.
#[derive(Clone, Debug)]
pub struct CallOutcome<'a> {
    /// The tool it called.
    pub name: &'a str,
    /// The arguments the model gave it.
    pub arguments: &'a serde_json::Value,
    /// Whether it succeeded.
    pub status: ToolStatus,
    /// Its result text.
    pub content: &'a str,
}

/// What a model step means for the turn.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum AfterStep {
    /// A session binding fired: the session ends with this result.
    EndSession {
        /// `session_stop` or `session_fail`: which binding fired.
        reason: StopReason,
        /// The session's result: the binding's mapped value.
        result: String,
    },
    /// The turn is complete (`StopTool`, `StopOnResponse`, or `None` when the side has no turn
    /// stop condition and every step is a turn).
    TurnComplete(Option<StopReason>),
    /// Another step on the same side.
    Continue,
}

/// The value a binding maps: the `messageProperty` argument (a string as is, other JSON as
/// text), else the tool's result text.
fn mapped(property: Option<&str>, call: &CallOutcome<'_>) -> String {
    match property.and_then(|p| call.arguments.get(p)) {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(v) if !v.is_null() => v.to_string(),
        _ => call.content.to_owned(),
    }
}

/// Evaluates the seed's stop order after a step: session bindings (`sessionFail` wins over
/// `sessionStop` when both succeed in one step: a reported failure is never hidden by a
/// success), then `stopTool`, then `stopOnResponse`.
pub(crate) fn after_step(
    side: &PromptSide,
    text: Option<&str>,
    calls: &[CallOutcome<'_>],
) -> AfterStep {
    let succeeded = |name: &str| {
        calls
            .iter()
            .rev()
            .find(|c| c.name == name && c.status == ToolStatus::Success)
    };
    for (binding, reason) in [
        (&side.session_fail, StopReason::SessionFail),
        (&side.session_stop, StopReason::SessionStop),
    ] {
        if let Some(b) = binding
            && let Some(call) = succeeded(&b.name)
        {
            return AfterStep::EndSession {
                reason,
                result: mapped(b.message_property.as_deref(), call),
            };
        }
    }
    if let Some(stop) = &side.stop_tool
        && calls.iter().any(|c| c.name == stop)
    {
        return AfterStep::TurnComplete(Some(StopReason::StopTool));
    }
    let has_text = text.is_some_and(|t| !t.trim().is_empty());
    if side.stop_on_response && has_text && calls.is_empty() {
        return AfterStep::TurnComplete(Some(StopReason::StopOnResponse));
    }
    if !side.stop_on_response && side.stop_tool.is_none() {
        return AfterStep::TurnComplete(None);
    }
    AfterStep::Continue
}

/// The status text a `sessionStatus` call sets, if one was made.
pub(crate) fn status_text(side: &PromptSide, calls: &[CallOutcome<'_>]) -> Option<String> {
    let b = side.session_status.as_ref()?;
    let call = calls.iter().rev().find(|c| c.name == b.name)?;
    Some(mapped(b.message_property.as_deref(), call))
}

/// The text that replaces the model's message when `stopToolResponseProperty` is set and the
/// stop tool was called with that string argument.
pub(crate) fn stop_tool_response(
    side: &PromptSide,
    calls: &[(&str, &serde_json::Value)],
) -> Option<String> {
    let (stop, property) = (
        side.stop_tool.as_deref()?,
        side.stop_tool_response_property.as_deref()?,
    );
    calls
        .iter()
        .find(|(n, _)| *n == stop)
        .and_then(|(_, args)| args.get(property)?.as_str().map(str::to_owned))
}

/// What follows a completed turn of `side` (turn counters already include it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AfterTurn {
    /// The exchange cap is reached: end the session.
    EndSession(StopReason),
    /// The sibling is human: park, with this reason.
    Park(StopReason),
    /// Stop the run (two handlers with nothing to say: `handler_idle`).
    Stop(StopReason),
    /// The sibling takes the next turn.
    Switch(SideId),
}

/// What follows a turn of `side_id` that completed for `reason`: the exchange cap ends the
/// session; a human sibling parks the thread (with `reason`); otherwise the sibling acts.
pub(crate) fn after_turn(
    agent: &AgentDef,
    t: &Thread,
    side_id: SideId,
    reason: StopReason,
) -> AfterTurn {
    if cap_reached(agent, t) {
        return AfterTurn::EndSession(StopReason::MaxSessionTurns);
    }
    let sibling = side_id.sibling();
    if side(agent, sibling).is_human() {
        AfterTurn::Park(reason)
    } else {
        AfterTurn::Switch(sibling)
    }
}

/// What follows a handler turn: as [`after_turn`], except that a turn with no inbound message
/// before a sibling handler stops the run (`handler_idle`) instead of ping-ponging empty turns.
pub(crate) fn after_handler_turn(
    agent: &AgentDef,
    t: &Thread,
    side_id: SideId,
    had_inbound: bool,
) -> AfterTurn {
    match after_turn(agent, t, side_id, StopReason::AwaitingHuman) {
        AfterTurn::Switch(next)
            if !had_inbound && matches!(side(agent, next), Side::Handler(_)) =>
        {
            AfterTurn::Stop(StopReason::HandlerIdle)
        }
        other => other,
    }
}

/// The handoffs a prompt offers on `agent`: exposed agents named in its `tools` that are no tool,
/// no prompt, and no subagent relationship of `agent` (seed §5).
pub(crate) fn handoff_targets<'p>(
    project: &'p duet_spec::Project,
    agent: &AgentDef,
    prompt: &duet_spec::PromptDef,
) -> Vec<(&'p str, &'p AgentDef)> {
    project.handoff_targets(agent, prompt)
}

/// The argument schema of an exposed agent used as a tool: its side A prompt's `requiredSchema`.
pub(crate) fn side_a_schema(project: &duet_spec::Project, agent: &AgentDef) -> serde_json::Value {
    let schema = match &agent.sides.a {
        Side::Prompt(p) => project
            .prompts
            .get(&p.prompt)
            .and_then(|d| d.def.required_schema.clone()),
        _ => None,
    };
    schema.unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}}))
}

/// The queued message for an inbound text: written by the agent's human side (it counts as that
/// side's turn), or, for an agent without one, as `user` (side B's authorship) so side A acts.
pub(crate) fn inbound(agent: &AgentDef, text: &str) -> NewQueued {
    let human = agent.human_side();
    let side = human.unwrap_or(SideId::B);
    NewQueued {
        human: human.is_some(),
        ..NewQueued::new(Role::authored_by(side), side, text)
    }
}

/// The session result when the exchange cap ends it: with terminal session tools and no call to
/// them, there is none (the session did not finish its work); otherwise the newest message.
pub(crate) fn cap_result(agent: &AgentDef, messages: &[Message]) -> Option<String> {
    cap_result_of(agent, messages.iter().rev())
}

/// [`cap_result`] over messages given newest first.
pub(crate) fn cap_result_of<'m>(
    agent: &AgentDef,
    mut newest_first: impl Iterator<Item = &'m Message>,
) -> Option<String> {
    let terminal = |s: &Side| matches!(s, Side::Prompt(p) if p.session_stop.is_some() || p.session_fail.is_some());
    if terminal(&agent.sides.a) || terminal(&agent.sides.b) {
        return None;
    }
    newest_first
        .find(|m| m.role != Role::Tool && !m.silent)
        .and_then(|m| m.content.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use duet_spec::SessionToolBinding;
    use serde_json::json;

    fn prompt_side() -> PromptSide {
        PromptSide {
            prompt: "p".into(),
            label: None,
            subagents: vec![],
            stop_on_response: true,
            stop_tool: None,
            stop_tool_response_property: None,
            max_steps: None,
            session_stop: None,
            session_fail: None,
            session_status: None,
            manual_stop_condition: false,
        }
    }

    fn binding(name: &str, property: &str) -> Option<SessionToolBinding> {
        Some(SessionToolBinding {
            name: name.into(),
            message_property: Some(property.into()),
            attachments_property: None,
        })
    }

    fn call<'a>(name: &'a str, args: &'a serde_json::Value, status: ToolStatus) -> CallOutcome<'a> {
        CallOutcome {
            name,
            arguments: args,
            status,
            content: "tool said",
        }
    }

    #[test]
    fn stop_order_follows_the_seed() {
        let mut side = prompt_side();
        side.session_stop = binding("approve", "summary");
        side.session_fail = binding("fail", "reason");
        side.stop_tool = Some("done".into());
        let a = json!({"summary": "ok", "reason": "bad"});
        // Both bindings in one step: sessionFail wins.
        let both = [
            call("approve", &a, ToolStatus::Success),
            call("fail", &a, ToolStatus::Success),
        ];
        assert_eq!(
            after_step(&side, None, &both),
            AfterStep::EndSession {
                reason: StopReason::SessionFail,
                result: "bad".into()
            }
        );
        // A failed binding call ends nothing; the stop tool still completes the turn.
        let failed = [
            call("approve", &a, ToolStatus::Error),
            call("done", &a, ToolStatus::Error),
        ];
        assert_eq!(
            after_step(&side, None, &failed),
            AfterStep::TurnComplete(Some(StopReason::StopTool))
        );
        // Binding before stop tool.
        let stop_and_done = [
            call("done", &a, ToolStatus::Success),
            call("approve", &a, ToolStatus::Success),
        ];
        assert_eq!(
            after_step(&side, None, &stop_and_done),
            AfterStep::EndSession {
                reason: StopReason::SessionStop,
                result: "ok".into()
            }
        );
        // Text with a tool call does not stop on response.
        let other = [call("lookup", &a, ToolStatus::Success)];
        assert_eq!(after_step(&side, Some("hi"), &other), AfterStep::Continue);
        assert_eq!(
            after_step(&side, Some("hi"), &[]),
            AfterStep::TurnComplete(Some(StopReason::StopOnResponse))
        );
        assert_eq!(after_step(&side, Some("   "), &[]), AfterStep::Continue);
    }

    fn agent(side_a: Side, side_b: Side, cap: Option<u32>) -> AgentDef {
        AgentDef {
            name: "x".into(),
            sides: duet_spec::PerSide::new(side_a, side_b),
            max_session_turns: cap,
            expose_as_tool: false,
            tool_description: None,
            parent_hooks: vec![],
            description: None,
            icon: None,
            title: None,
            env: Default::default(),
            hooks: vec![],
            primary: None,
            package: Default::default(),
        }
    }

    #[test]
    fn next_applies_the_cap_then_the_backing_then_the_safety_limits() {
        let mut limited = prompt_side();
        limited.max_steps = Some(3);
        let a = agent(
            Side::Prompt(limited),
            Side::Human(duet_spec::HumanSide::default()),
            Some(2),
        );
        let mut t = Thread::new(uuid::Uuid::nil(), "k".into(), "x".into(), None, 0);
        assert_eq!(next(&a, &t), Next::Settle, "not running");
        t.status = ThreadStatus::Running;
        t.acting = Some(SideId::A);
        assert_eq!(next(&a, &t), Next::Step(SideId::A));
        t.steps.a = 3;
        assert_eq!(next(&a, &t), Next::Stop(StopReason::MaxSideSteps));
        t.acting = Some(SideId::B);
        assert_eq!(next(&a, &t), Next::Park);
        t.turns.a = 2;
        t.turns.b = 2;
        assert_eq!(
            next(&a, &t),
            Next::EndSession(StopReason::MaxSessionTurns),
            "the cap comes first"
        );
        // The global ceiling: 250 steps a run, raised to the largest maxSteps.
        let pair = agent(
            Side::Prompt(prompt_side()),
            Side::Prompt(prompt_side()),
            None,
        );
        let mut t = Thread::new(uuid::Uuid::nil(), "k".into(), "x".into(), None, 0);
        t.status = ThreadStatus::Running;
        t.acting = Some(SideId::B);
        t.steps_total = MAX_STEPS - 1;
        assert_eq!(next(&pair, &t), Next::Step(SideId::B));
        t.steps_total = MAX_STEPS;
        assert_eq!(next(&pair, &t), Next::Stop(StopReason::MaxTotalSteps));
        let mut big = prompt_side();
        big.max_steps = Some(400);
        assert_eq!(
            step_ceiling(&agent(Side::Prompt(big), Side::Prompt(prompt_side()), None)),
            400
        );
    }

    #[test]
    fn no_turn_condition_means_every_step_is_a_turn() {
        let mut side = prompt_side();
        side.stop_on_response = false;
        assert_eq!(
            after_step(&side, Some("x"), &[]),
            AfterStep::TurnComplete(None)
        );
    }

    #[test]
    fn mapped_values_fall_back_to_the_tool_result() {
        let mut side = prompt_side();
        side.session_status = binding("status", "text");
        let with = json!({"text": "half done"});
        let without = json!({});
        assert_eq!(
            status_text(&side, &[call("status", &with, ToolStatus::Success)]).as_deref(),
            Some("half done")
        );
        assert_eq!(
            status_text(&side, &[call("status", &without, ToolStatus::Success)]).as_deref(),
            Some("tool said")
        );
        side.stop_tool = Some("done".into());
        side.stop_tool_response_property = Some("answer".into());
        let args = json!({"answer": "42"});
        assert_eq!(
            stop_tool_response(&side, &[("done", &args)]).as_deref(),
            Some("42")
        );
    }
}
