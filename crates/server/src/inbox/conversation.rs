//! A conversation's messages as the inbox's pages show them: who wrote each (a side's label, the
//! agent, a tool) and the message itself (Markdown, inert, with the calls it made and the files
//! it attaches).

use duet_runtime::{Message, Role, SideId};
use duet_spec::Side;
use maud::{Markup, html};

use super::attachments::{self, Where};
use super::layout;
use crate::state::AppState;

/// Who wrote `m` in a thread of `agent`, for people: its side's label, else `person` for a
/// human side and the agent's name for the others; a tool result names its tool.
pub(crate) fn author(state: &AppState, m: &Message, agent: &str) -> String {
    let side = |id: SideId| {
        let def = state
            .runtime()
            .project()
            .agents
            .get(agent)
            .map(|a| &a.def)?;
        let side = match id {
            SideId::A => &def.sides.a,
            SideId::B => &def.sides.b,
        };
        Some(match side {
            Side::Human(h) => h.label.clone().unwrap_or_else(|| "person".into()),
            Side::Prompt(p) => p.label.clone().unwrap_or_else(|| agent.to_owned()),
            Side::Handler(h) => h.label.clone().unwrap_or_else(|| agent.to_owned()),
        })
    };
    match (m.role, m.side) {
        (Role::Tool, _) => format!("tool {}", m.tool_name.as_deref().unwrap_or_default()),
        (Role::System, _) => "note".into(),
        (_, Some(id)) => side(id).unwrap_or_else(|| agent.to_owned()),
        (_, None) => agent.to_owned(),
    }
}

/// One message of a conversation, of the thread `at` names; `by` names its author.
pub(crate) fn message(m: &Message, by: &str, at: Where<'_>) -> Markup {
    html! {
        li.msg data-seq=(m.seq) data-role=(m.role.as_str()) {
            span.author { (by) }
            @if let Some(text) = &m.content {
                (layout::markdown(text))
            }
            (attachments::list(&m.attachments, at))
            @for call in &m.tool_calls {
                div.call { "calls " code { (call.name) } }
            }
        }
    }
}
