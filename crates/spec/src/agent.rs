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
    pub name: String,
    /// Side A and side B.
    pub sides: PerSide<Side>,
    /// Exchange cap: the session ends when both sides completed this many turns.
    pub max_session_turns: Option<u32>,
    pub expose_as_tool: bool,
    pub tool_description: Option<String>,
    pub parent_hooks: Vec<ParentHookRequirement>,
    pub description: Option<String>,
    pub icon: Option<String>,
    /// Deprecated by the spec; kept for display.
    pub title: Option<String>,
    /// Agent-level env defaults (`tenvs`, the deprecated alias, is merged in).
    pub env: BTreeMap<String, String>,
    /// Fallback hook ids, used when the active prompt declares none.
    pub hooks: Vec<String>,
    /// Builder-only UI listing hint.
    pub primary: Option<bool>,
    pub package: Packaging,
}

impl AgentDef {
    /// The names of the subagent relationships on both sides, side A's first.
    pub fn relationship_names(&self) -> Vec<&str> {
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
}

/// One value per side of an agent: `a` and `b`, also indexed by [`SideId`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
pub struct PerSide<T> {
    pub a: T,
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
    pub package_name: Option<String>,
    pub version: Option<String>,
    pub author: Option<String>,
    pub license: Option<String>,
}

/// Which side of an agent.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum SideId {
    A,
    B,
}

impl SideId {
    /// The field name in definition files.
    pub fn field(self) -> &'static str {
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
#[expect(
    clippy::large_enum_variant,
    reason = "two per agent, built once at load: boxing buys nothing"
)]
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase", tag = "backing")]
pub enum Side {
    Human(HumanSide),
    Prompt(PromptSide),
    Handler(HandlerSide),
}

impl Side {
    pub fn is_human(&self) -> bool {
        matches!(self, Side::Human(_))
    }

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

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct HumanSide {
    pub label: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptSide {
    pub prompt: String,
    pub label: Option<String>,
    pub subagents: Vec<SubagentRelationship>,
    /// Default `true`: a text answer without tool calls ends the turn.
    pub stop_on_response: bool,
    pub stop_tool: Option<String>,
    pub stop_tool_response_property: Option<String>,
    pub max_steps: Option<u32>,
    pub session_stop: Option<SessionToolBinding>,
    pub session_fail: Option<SessionToolBinding>,
    pub session_status: Option<SessionToolBinding>,
    /// Builder-only extension.
    pub manual_stop_condition: bool,
}

impl PromptSide {
    /// The bindings and stop tool of this side with their field names, in evaluation order.
    pub fn bound_tools(&self) -> Vec<(&'static str, &str)> {
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

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HandlerSide {
    pub handler: String,
    pub label: Option<String>,
    pub subagents: Vec<SubagentRelationship>,
}

/// A session lifecycle binding (object form only in 0.2.0).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionToolBinding {
    pub name: String,
    pub message_property: Option<String>,
    pub attachments_property: Option<String>,
}

/// How a child reports to its parent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ParentCommunication {
    #[default]
    Implicit,
    Explicit,
}

/// `immediate: true`, or its object form.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Immediate {
    pub name_env: Option<String>,
    pub description_env: Option<String>,
    pub scoped_env: Vec<String>,
}

/// A composition: this side may spawn children of `agent`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SubagentRelationship {
    pub agent: String,
    /// The relationship name; [`SubagentRelationship::name`] falls back to `agent`.
    #[serde(rename = "as")]
    pub alias: Option<String>,
    pub description: Option<String>,
    /// Default `false` in 0.2.0.
    pub blocking: bool,
    pub max_instances: Option<u32>,
    pub parent_communication: ParentCommunication,
    pub immediate: Option<Immediate>,
    pub scoped_env: Vec<String>,
    /// An env flag name: the relationship is enabled only when it resolves to true, 1 or yes.
    pub optional: Option<String>,
    pub hidden: bool,
    pub init_user_message_property: Option<String>,
    pub init_attachments_property: Option<String>,
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
    BeforeParent,
    #[default]
    AfterParent,
}

/// A thread hook an exposed agent requires on every direct parent that composes it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ParentHookRequirement {
    pub hook: String,
    pub reason: String,
    pub stage: HookStage,
}
