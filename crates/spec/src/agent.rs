//! Agent definitions (`agents/agents/`): two sides, each backed by a human, a prompt or a
//! handler (seed `001`, digest §2).

use std::collections::BTreeMap;

use serde::Serialize;

mod decode;
mod side;

pub(crate) use decode::{check_name, decode};

/// The lifecycle tools the runtime injects into prompt sides; no definition may take their names.
/// `send_to_agent` is the legacy alias of `subagent_message`.
pub const RESERVED_TOOL_NAMES: &[&str] = &[
    "subagent_create",
    "subagent_message",
    "subagents",
    "send_to_agent",
];

/// An agent: the top-level conversation orchestrator.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentDef {
    /// `name`: how prompts, relationships and runs refer to the agent; required, unique,
    /// snake_case.
    pub name: String,
    /// `sideA` and `sideB`: the two sides, each with exactly one backing; both required.
    pub sides: PerSide<Side>,
    /// `maxSessionTurns`: the exchange cap: the session ends when both sides completed this many
    /// turns; absent, no cap.
    pub max_session_turns: Option<u32>,
    /// `exposeAsTool`: whether prompts may hand off to the agent and relationships compose it;
    /// default `false`.
    pub expose_as_tool: bool,
    /// `toolDescription`: what a model is told the agent does when it is offered as a tool or a
    /// child; absent on an exposed agent, a warning.
    pub tool_description: Option<String>,
    /// `parentHooks`: thread hooks every direct parent that composes the agent must run; legal
    /// only with `exposeAsTool: true`, default none.
    pub parent_hooks: Vec<ParentHookRequirement>,
    /// `description`: what the agent is for, for people; optional.
    pub description: Option<String>,
    /// `icon`: a URL, or an absolute path (`/...`), of the agent's icon; optional.
    pub icon: Option<String>,
    /// `title`: deprecated by the spec (a warning); kept for display.
    pub title: Option<String>,
    /// `env`: agent-level env defaults (`tenvs`, the deprecated alias, is merged in); default
    /// empty.
    pub env: BTreeMap<String, String>,
    /// `hooks`: fallback hook ids, used when the active prompt declares none; default none.
    pub hooks: Vec<String>,
    /// `primary`: builder-only UI listing hint; unset when absent.
    pub primary: Option<bool>,
    /// `packageName`, `version`, `author`, `license`: packaging metadata; each optional.
    pub package: Packaging,
}

impl AgentDef {
    /// The names of the subagent relationships on both sides, side A's first.
    pub(crate) fn relationship_names(&self) -> Vec<&str> {
        self.sides
            .a
            .subagents()
            .iter()
            .chain(self.sides.b.subagents())
            .map(SubagentRelationship::name)
            .collect()
    }

    /// The configuration of side `id`.
    pub fn side(&self, id: SideId) -> &Side {
        &self.sides[id]
    }

    /// The side a person takes, B looked at first: the side an inbound message is written
    /// as (and, without one, side B's authorship is used).
    pub fn human_side(&self) -> Option<SideId> {
        [SideId::B, SideId::A]
            .into_iter()
            .find(|s| self.side(*s).is_human())
    }

    /// Whether the agent's human side is declared an approver (`approver: true`): its parks
    /// wait for a person's decision, not for an end user's next message.
    pub fn approver(&self) -> bool {
        self.human_side()
            .is_some_and(|s| matches!(self.side(s), Side::Human(h) if h.approver))
    }
}

/// One value per side of an agent: `a` and `b`, also indexed by [`SideId`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
pub struct PerSide<T> {
    /// Side A's value.
    pub a: T,
    /// Side B's value.
    pub b: T,
}

impl<T> PerSide<T> {
    /// A pair from its two values.
    pub fn new(a: T, b: T) -> Self {
        PerSide { a, b }
    }

    /// Both values with their side, side A first.
    pub fn iter(&self) -> impl Iterator<Item = (SideId, &T)> {
        [(SideId::A, &self.a), (SideId::B, &self.b)].into_iter()
    }
}

impl<T> std::ops::Index<SideId> for PerSide<T> {
    type Output = T;
    fn index(&self, id: SideId) -> &T {
        match id {
            SideId::A => &self.a,
            SideId::B => &self.b,
        }
    }
}

impl<T> std::ops::IndexMut<SideId> for PerSide<T> {
    fn index_mut(&mut self, id: SideId) -> &mut T {
        match id {
            SideId::A => &mut self.a,
            SideId::B => &mut self.b,
        }
    }
}

/// Packaging metadata, only consumed when an agent is packed.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Packaging {
    /// `packageName`: the package the agent is packed into; optional.
    pub package_name: Option<String>,
    /// `version`: the package's semver version; optional.
    pub version: Option<String>,
    /// `author`: who wrote the package; optional.
    pub author: Option<String>,
    /// `license`: the package's SPDX licence expression; optional.
    pub license: Option<String>,
}

/// Which side of an agent.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum SideId {
    /// Side A: `sideA` in definitions, `a` in storage and events.
    A,
    /// Side B: `sideB` in definitions, `b` in storage and events.
    B,
}

impl SideId {
    /// The field name in definition files.
    pub(crate) fn field(self) -> &'static str {
        match self {
            SideId::A => "sideA",
            SideId::B => "sideB",
        }
    }

    /// The other side.
    pub fn sibling(self) -> SideId {
        match self {
            SideId::A => SideId::B,
            SideId::B => SideId::A,
        }
    }
}

/// A side's configuration: exactly one backing.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase", tag = "backing")]
pub enum Side {
    /// `human: true`: a person takes the side's turns; the session parks until they answer.
    Human(HumanSide),
    /// `prompt: NAME`: a model takes the side's turns, driven by that prompt.
    Prompt(PromptSide),
    /// `handler: NAME`: Rust code registered for that handler takes the side's turns.
    Handler(HandlerSide),
}

impl Side {
    /// Whether a person backs the side.
    pub fn is_human(&self) -> bool {
        matches!(self, Side::Human(_))
    }

    /// The side's `label`, whatever its backing.
    pub fn label(&self) -> Option<&str> {
        match self {
            Side::Human(s) => s.label.as_deref(),
            Side::Prompt(s) => s.label.as_deref(),
            Side::Handler(s) => s.label.as_deref(),
        }
    }

    /// The relationships this side owns (none for a human side).
    pub fn subagents(&self) -> &[SubagentRelationship] {
        match self {
            Side::Human(_) => &[],
            Side::Prompt(s) => &s.subagents,
            Side::Handler(s) => &s.subagents,
        }
    }
}

/// A side a person takes: `{ human: true }`, with no field but `label` and `approver`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct HumanSide {
    /// `label`: the side's display name; optional.
    pub label: Option<String>,
    /// `approver` (a duet extension): the person on this side decides — the agent's parks are
    /// approvals, listed in `GET /approvals` and the inbox's queue. Default `false`: the side is
    /// an end user whose next message the thread waits for (listed only on request).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub approver: bool,
    /// `deadline` (a duet extension): the side's questions do not wait forever — a default
    /// answer after a duration, reminders, escalation. Code may set another per question.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline: Option<crate::deadline::Deadline>,
}

/// A side a model takes: `{ prompt: NAME, ... }`, the only backing with stop and session
/// bindings.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptSide {
    /// `prompt`: the prompt (`agents/prompts/`) the side runs; required.
    pub prompt: String,
    /// `label`: the side's display name; optional.
    pub label: Option<String>,
    /// `subagents`: the relationships this side owns, in declaration order; default none.
    pub subagents: Vec<SubagentRelationship>,
    /// `stopOnResponse`: whether a text answer without tool calls ends the turn; default `true`.
    pub stop_on_response: bool,
    /// `stopTool`: a tool whose call, successful or not, ends the turn; optional.
    pub stop_tool: Option<String>,
    /// `stopToolResponseProperty`: the `stopTool` argument whose string value replaces the turn's
    /// message text; optional.
    pub stop_tool_response_property: Option<String>,
    /// `maxSteps`: the side's cap on model steps (`max_side_steps`); absent, only the run's
    /// global ceiling applies.
    pub max_steps: Option<u32>,
    /// `sessionStop`: the tool whose successful call ends the session as a success; optional.
    pub session_stop: Option<SessionToolBinding>,
    /// `sessionFail`: the tool whose successful call ends the session as a failure; optional.
    pub session_fail: Option<SessionToolBinding>,
    /// `sessionStatus`: the tool whose call sets the child's status on its parent, ending
    /// nothing; optional.
    pub session_status: Option<SessionToolBinding>,
    /// `manualStopCondition`: builder-only extension; default `false`.
    pub manual_stop_condition: bool,
}

impl PromptSide {
    /// The bindings and stop tool of this side with their field names, in evaluation order.
    pub(crate) fn bound_tools(&self) -> Vec<(&'static str, &str)> {
        let mut out = Vec::new();
        for (field, binding) in [
            ("sessionStop", &self.session_stop),
            ("sessionFail", &self.session_fail),
            ("sessionStatus", &self.session_status),
        ] {
            if let Some(b) = binding {
                out.push((field, b.name.as_str()));
            }
        }
        if let Some(t) = &self.stop_tool {
            out.push(("stopTool", t.as_str()));
        }
        out
    }
}

/// A side code takes: `{ handler: NAME, ... }`; no prompt-only field is legal on it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HandlerSide {
    /// `handler`: the handler (`agents/handlers/`, named by its file) that takes the turns;
    /// required.
    pub handler: String,
    /// `label`: the side's display name; optional.
    pub label: Option<String>,
    /// `subagents`: the relationships this side owns, reached by the handler's own code; default
    /// none.
    pub subagents: Vec<SubagentRelationship>,
}

/// A session lifecycle binding (object form only in 0.2.0).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionToolBinding {
    /// `name`: the tool whose call triggers the binding; required.
    pub name: String,
    /// `messageProperty`: the tool argument whose value becomes the lifecycle message text;
    /// absent, the tool's result text.
    pub message_property: Option<String>,
    /// `attachmentsProperty`: the tool argument holding the attachment path(s) that go with it;
    /// optional.
    pub attachments_property: Option<String>,
}

/// How a child reports to its parent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ParentCommunication {
    /// `implicit`, the default: the child's session result is queued to the parent when the
    /// session ends.
    #[default]
    Implicit,
    /// `explicit`: nothing is sent by itself; the child calls `notifyParent`.
    Explicit,
}

/// `immediate: true`, or its object form.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Immediate {
    /// `nameEnv`: the env value that names the started instance; absent, the relationship name.
    pub name_env: Option<String>,
    /// `descriptionEnv`: the env value that describes the started instance to it; optional.
    pub description_env: Option<String>,
    /// `scopedEnv`: env names copied into the started child only, never shown to a model;
    /// default none.
    pub scoped_env: Vec<String>,
}

/// A composition: this side may spawn children of `agent`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SubagentRelationship {
    /// `agent`: the agent each child runs, which must have `exposeAsTool: true`; required.
    pub agent: String,
    /// `as`: the relationship name; [`SubagentRelationship::name`] falls back to `agent`.
    #[serde(rename = "as")]
    pub alias: Option<String>,
    /// `description`: what the parent's model is told the child does; absent, the agent's
    /// `toolDescription`.
    pub description: Option<String>,
    /// `blocking`: whether the spawning call waits for the child's session to end; default
    /// `false` in 0.2.0.
    pub blocking: bool,
    /// `maxInstances`: the cap on live (not terminated) children of this relationship; absent,
    /// no cap.
    pub max_instances: Option<u32>,
    /// `parentCommunication`: how the child reports back; default `implicit`.
    pub parent_communication: ParentCommunication,
    /// `immediate`: start a child when the owning side activates; absent or `false`, never.
    pub immediate: Option<Immediate>,
    /// `scopedEnv`: parent env names copied into every child spawned; default none.
    pub scoped_env: Vec<String>,
    /// `optional`: an env flag name: the relationship is enabled only when it resolves to true,
    /// 1 or yes; absent, always enabled.
    pub optional: Option<String>,
    /// `hidden`: an infrastructure child, neither offered to the model nor listed by
    /// `subagents`; default `false`.
    pub hidden: bool,
    /// `initUserMessageProperty`: for spawns issued by code, the argument that becomes the
    /// child's first message; absent, the arguments as JSON.
    pub init_user_message_property: Option<String>,
    /// `initAttachmentsProperty`: for spawns issued by code, the argument holding attachment
    /// path(s) copied to the child; optional.
    pub init_attachments_property: Option<String>,
    /// `initAgentNameProperty`: for spawns issued by code, the argument that names the
    /// instance; optional.
    pub init_agent_name_property: Option<String>,
}

impl SubagentRelationship {
    /// The relationship name: `as`, or the agent name.
    pub fn name(&self) -> &str {
        self.alias.as_deref().unwrap_or(&self.agent)
    }
}

/// When a required parent hook runs relative to the parent's own hooks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HookStage {
    /// `before_parent`: before the parent's own hooks of that kind.
    BeforeParent,
    /// `after_parent`, the default: after the parent's own hooks of that kind.
    #[default]
    AfterParent,
}

/// A thread hook an exposed agent requires on every direct parent that composes it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ParentHookRequirement {
    /// `hook`: the id of the thread-scoped hook, in the child's package namespace; required.
    pub hook: String,
    /// `reason`: why the parent needs it, disclosed by composition UIs; required, non-empty.
    pub reason: String,
    /// `stage`: when it runs against the parent's hooks; default `after_parent`.
    pub stage: HookStage,
}
