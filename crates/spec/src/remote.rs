//! Remote A2A agents (`agents/remotes/`): an agent served elsewhere over A2A 1.0 that this
//! project composes as a subagent, by name, like one of its own. Loading one defines an agent
//! of that name — side A the built-in handler that speaks to the remote agent
//! ([`RemoteAgentDef::handler_name`]), side B a person — so a relationship, the registry and the
//! approvals list treat it as any child: when the remote task asks for input, the child waits for
//! a person (`awaiting_human`) and the answer goes back to the remote task.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::agent::{AgentDef, HandlerSide, HumanSide, Packaging, PerSide, Side};
use crate::decode::Ctx;
use crate::hook::HandlerDef;
use crate::node::Node;

/// A remote A2A agent.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RemoteAgentDef {
    /// `name`: how relationships refer to it; required, snake_case, unique among agents.
    pub name: String,
    /// `url`: where it is served: the base its card is found under
    /// (`{url}/.well-known/agent-card.json`), or the card's own URL (ending in `.json`);
    /// `http://` or `https://`, or starting with `{{env.NAME}}`; required.
    pub url: String,
    /// `description`: what the parent's model is told it does; required (the card is read
    /// only at run time).
    pub description: String,
    /// `apiKeyEnv`: the environment variable holding the bearer token it takes (never the
    /// token); absent, requests carry none.
    pub api_key_env: Option<String>,
    /// `timeoutMs`: how long one call to it may take (a blocking send waits for the remote
    /// task to settle); default [`RemoteAgentDef::DEFAULT_TIMEOUT_MS`].
    pub timeout_ms: u32,
}

impl RemoteAgentDef {
    /// `timeoutMs` when absent: 10 minutes.
    pub const DEFAULT_TIMEOUT_MS: u32 = 600_000;
    /// The largest `timeoutMs`: one day.
    pub const MAX_TIMEOUT_MS: u32 = 86_400_000;

    /// The handler definition (`agents/handlers/`) side A of its agent names.
    pub fn handler_name(&self) -> String {
        format!("a2a_remote__{}", self.name)
    }

    /// The Rust handler a build registers for it (what the handler definition's `builtin` says).
    pub fn builtin(&self) -> String {
        format!("a2a_remote:{}", self.name)
    }

    /// The agent loading it defines.
    pub(crate) fn agent(&self) -> AgentDef {
        AgentDef {
            name: self.name.clone(),
            sides: PerSide {
                a: Side::Handler(HandlerSide {
                    handler: self.handler_name(),
                    label: Some("Remote agent".into()),
                    subagents: Vec::new(),
                }),
                // What a remote agent asks (`input-required`) is asked of whoever operates
                // the agent that composed it: an approval, listed in the approver's queue.
                b: Side::Human(HumanSide {
                    label: Some("Person".into()),
                    approver: true,
                    deadline: None,
                }),
            },
            max_session_turns: None,
            expose_as_tool: true,
            tool_description: Some(self.description.clone()),
            parent_hooks: Vec::new(),
            description: Some(format!("The remote A2A agent at {}.", self.url)),
            icon: None,
            title: None,
            env: BTreeMap::new(),
            hooks: Vec::new(),
            primary: None,
            package: Packaging::default(),
        }
    }

    /// The handler definition loading it defines.
    pub(crate) fn handler(&self) -> HandlerDef {
        HandlerDef {
            name: self.handler_name(),
            description: Some(format!("Speaks A2A to the remote agent `{}`.", self.name)),
            builtin: self.builtin(),
            code: None,
        }
    }
}

const FIELDS: &[&str] = &["name", "url", "description", "apiKeyEnv", "timeoutMs"];

pub(crate) fn decode(ctx: &mut Ctx<'_>, root: &Node) -> (Option<String>, Option<RemoteAgentDef>) {
    let Some(mut o) = ctx.object(root, "") else {
        return (None, None);
    };
    let name = o.required_name(ctx, "name");
    let name_span = o.take("name").map_or(o.span, |n| n.span);
    let url_node = o.take("url");
    let url = o.required_name(ctx, "url");
    let description_node = o.take("description");
    let description = o.string(ctx, "description");
    let api_key_env = o.name(ctx, "apiKeyEnv");
    let timeout_ms = crate::tool::bounded(ctx, &mut o, "timeoutMs", RemoteAgentDef::MAX_TIMEOUT_MS)
        .unwrap_or(RemoteAgentDef::DEFAULT_TIMEOUT_MS);
    if let (Some(u), Some(n)) = (&url, url_node)
        && !(u.starts_with("http://") || u.starts_with("https://") || u.starts_with("{{env."))
    {
        ctx.report(
            crate::issue::Code::InvalidValue,
            format!("`url` must start with http:// or https://, not `{u}`"),
            "url",
            n.span,
        );
    }
    let description = match (description, description_node) {
        (Some(d), _) if !d.trim().is_empty() => Some(d),
        (_, node) => {
            ctx.report(
                crate::issue::Code::MissingField,
                "a remote agent needs a `description`: what the parent's model is told it does",
                "description",
                node.map_or(o.span, |n| n.span),
            );
            None
        }
    };
    o.finish(ctx, FIELDS);
    if let Some(n) = &name {
        crate::agent::check_name(ctx, n, "name", name_span);
    }
    let def = match (name.clone(), url, description) {
        (Some(name), Some(url), Some(description)) => Some(RemoteAgentDef {
            name,
            url,
            description,
            api_key_env,
            timeout_ms,
        }),
        _ => None,
    };
    (name, def)
}
