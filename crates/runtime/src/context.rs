//! What a model sees: the thread's messages from the acting side's perspective.
//!
//! Stored roles record authorship (side A wrote `assistant`, side B wrote `user`). The acting side
//! sees its own messages as `assistant` and its sibling's as `user`, and only its own tool calls
//! and results. `includeChat: false` narrows the context to the sibling's latest messages and the
//! acting side's current turn; `includePastTools: false` drops tool traffic of earlier turns.

use std::collections::BTreeMap;

use duet_spec::{Project, PromptContent, PromptDef, PromptPart};

use crate::model::ChatMessage;
use crate::types::{Message, Role, SideId};

/// A side's env value `name`: its own (prompt, agent, scoped), else the process environment.
pub(crate) fn env_value(env: &BTreeMap<String, String>, name: &str) -> Option<String> {
    env.get(name).cloned().or_else(|| std::env::var(name).ok())
}

/// The role a stored message has for `acting`.
fn perspective(role: Role, acting: SideId) -> Role {
    match (role, acting) {
        (Role::User, SideId::B) => Role::Assistant,
        (Role::Assistant, SideId::B) => Role::User,
        (r, _) => r,
    }
}

/// Index of the first message of the acting side's current turn: everything after the last
/// message its sibling wrote.
fn current_turn_start(messages: &[Message], acting: SideId) -> usize {
    messages
        .iter()
        .rposition(|m| m.side == Some(acting.sibling()) && m.role != Role::Tool)
        .map_or(0, |i| i + 1)
}

/// Index of the first message `includeChat: false` keeps: the sibling's latest block.
fn inbound_start(messages: &[Message], acting: SideId) -> usize {
    let turn = current_turn_start(messages, acting);
    let mut i = turn;
    while i > 0 {
        let m = &messages[i - 1];
        if m.side == Some(acting) {
            break;
        }
        i -= 1;
    }
    i
}

/// The chat context for `acting` under `prompt`'s flags.
pub(crate) fn messages(
    messages: &[Message],
    acting: SideId,
    prompt: &PromptDef,
) -> Vec<ChatMessage> {
    let start = if prompt.include_chat {
        0
    } else {
        inbound_start(messages, acting)
    };
    let turn = current_turn_start(messages, acting);
    let mut out = Vec::new();
    for (i, m) in messages.iter().enumerate().skip(start) {
        let in_turn = i >= turn;
        let keep_tools = prompt.include_past_tools || in_turn;
        if m.role == Role::Tool {
            if m.side == Some(acting) && keep_tools {
                out.push(ChatMessage {
                    role: Role::Tool,
                    content: m.content.clone(),
                    tool_calls: Vec::new(),
                    tool_call_id: m.tool_call_id.clone(),
                    name: m.tool_name.clone(),
                    is_error: m.tool_status == Some(crate::types::ToolStatus::Error),
                    thinking: None,
                    provider_data: None,
                    images: Vec::new(),
                    documents: Vec::new(),
                    attachments: Vec::new(),
                });
            }
            continue;
        }
        let own = m.side == Some(acting);
        let tool_calls = if own && keep_tools {
            m.tool_calls.clone()
        } else {
            Vec::new()
        };
        if m.content.as_deref().is_none_or(str::is_empty)
            && tool_calls.is_empty()
            && m.images.is_empty()
            && m.attachments.is_empty()
        {
            continue;
        }
        out.push(ChatMessage {
            role: perspective(m.role, acting),
            content: m.content.clone(),
            tool_calls,
            tool_call_id: None,
            name: None,
            is_error: false,
            // A model's own reasoning goes back to it (providers that require it, with its
            // signature); another side's never does.
            thinking: if own { m.thinking.clone() } else { None },
            provider_data: if own { m.provider_data.clone() } else { None },
            images: m.images.clone(),
            documents: Vec::new(),
            attachments: m.attachments.clone(),
        });
    }
    out
}

/// The system prompt text: parts joined, includes resolved (cycles cut), env parts filled, and
/// `{{name}}` variables in its text filled from `arguments` (a child's spawn arguments).
pub(crate) fn system_prompt(
    project: &Project,
    prompt: &PromptDef,
    env: &BTreeMap<String, String>,
    arguments: &serde_json::Value,
) -> String {
    let mut out = String::new();
    let scope = Scope { env, arguments };
    render(project, prompt, &scope, &mut out, &mut Vec::new());
    out
}

struct Scope<'a> {
    env: &'a BTreeMap<String, String>,
    arguments: &'a serde_json::Value,
}

/// `text` with each `{{name}}` (spaces allowed inside the braces; `a.b` reaches into objects)
/// replaced by that argument: a string as it is, any other value as JSON. A name with no argument
/// is left as written, so a missing value shows rather than vanishing.
pub(crate) fn interpolate(text: &str, arguments: &serde_json::Value) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find("{{") {
        let (before, after) = rest.split_at(open);
        out.push_str(before);
        let Some(close) = after[2..].find("}}") else {
            out.push_str(after);
            return out;
        };
        let inner = &after[2..2 + close];
        let name = inner.trim();
        let valid = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
        let value = valid
            .then(|| name.split('.').try_fold(arguments, |v, key| v.get(key)))
            .flatten();
        match value {
            Some(serde_json::Value::String(s)) => out.push_str(s),
            Some(v) => out.push_str(&v.to_string()),
            None => out.push_str(&after[..close + 4]),
        }
        rest = &after[close + 4..];
    }
    out.push_str(rest);
    out
}

fn render<'p>(
    project: &'p Project,
    prompt: &'p PromptDef,
    scope: &Scope<'_>,
    out: &mut String,
    stack: &mut Vec<&'p str>,
) {
    if stack.contains(&prompt.name.as_str()) || stack.len() > 16 {
        return;
    }
    stack.push(&prompt.name);
    match &prompt.prompt {
        PromptContent::Text(t) => out.push_str(&interpolate(t, scope.arguments)),
        PromptContent::Parts(parts) => {
            for part in parts {
                if !out.is_empty() && !out.ends_with('\n') {
                    out.push('\n');
                }
                match part {
                    PromptPart::Text { content } => {
                        out.push_str(&interpolate(content, scope.arguments));
                    }
                    PromptPart::Include { prompt } => {
                        if let Some(p) = project.prompts.get(prompt) {
                            render(project, &p.def, scope, out, stack);
                        }
                    }
                    PromptPart::Env { property } => {
                        if let Some(v) = scope.env.get(property) {
                            out.push_str(v);
                        }
                    }
                }
            }
        }
    }
    stack.pop();
}

/// How many calls of model `name` the thread has committed.
pub(crate) fn call_index(messages: &[Message], name: &str) -> usize {
    messages
        .iter()
        .filter(|m| m.model.as_deref() == Some(name))
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{ToolCall, ToolStatus};

    fn msg(seq: i64, role: Role, side: SideId, content: &str) -> Message {
        Message::text(seq, 1, role, Some(side), content.into(), 0)
    }

    fn prompt(include_chat: bool, include_past_tools: bool) -> PromptDef {
        PromptDef {
            name: "p".into(),
            tool_description: "d".into(),
            prompt: PromptContent::Text("sys".into()),
            model: "m".into(),
            include_chat,
            include_past_tools,
            parallel_tool_calls: None,
            tool_choice: duet_spec::ToolChoice::Auto,
            required_schema: None,
            tools: vec![],
            variables: vec![],
            env: BTreeMap::new(),
            reasoning: None,
            recent_image_threshold: None,
            provider_options: serde_json::Map::new(),
            hooks: vec![],
        }
    }

    fn history() -> Vec<Message> {
        let mut with_call = msg(2, Role::Assistant, SideId::A, "");
        with_call.content = None;
        with_call.tool_calls = vec![ToolCall {
            id: "c1".into(),
            name: "look".into(),
            arguments: serde_json::json!({}),
        }];
        let mut result = msg(3, Role::Tool, SideId::A, "found");
        result.tool_call_id = Some("c1".into());
        result.tool_status = Some(ToolStatus::Success);
        vec![
            msg(1, Role::User, SideId::B, "brief"),
            with_call,
            result,
            msg(4, Role::Assistant, SideId::A, "draft"),
            msg(5, Role::User, SideId::B, "change it"),
        ]
    }

    fn roles(ctx: &[ChatMessage]) -> Vec<(Role, Option<&str>)> {
        ctx.iter().map(|m| (m.role, m.content.as_deref())).collect()
    }

    #[test]
    fn each_side_sees_itself_as_assistant() {
        let h = history();
        let a = messages(&h, SideId::A, &prompt(true, true));
        assert_eq!(
            roles(&a),
            vec![
                (Role::User, Some("brief")),
                (Role::Assistant, None),
                (Role::Tool, Some("found")),
                (Role::Assistant, Some("draft")),
                (Role::User, Some("change it")),
            ]
        );
        // Side B sees roles swapped and none of A's tool traffic.
        let b = messages(&h, SideId::B, &prompt(true, true));
        assert_eq!(
            roles(&b),
            vec![
                (Role::Assistant, Some("brief")),
                (Role::User, Some("draft")),
                (Role::Assistant, Some("change it")),
            ]
        );
    }

    #[test]
    fn variables_are_filled_from_the_arguments() {
        let args = serde_json::json!({"repo": "duet", "n": 3, "deep": {"k": "v"}});
        assert_eq!(
            interpolate("Review {{repo}} ({{ n }} files, {{deep.k}}).", &args),
            "Review duet (3 files, v)."
        );
        // Unknown names, bad names and an unclosed brace stay as written.
        assert_eq!(
            interpolate("{{missing}} {{a b}} {{repo", &args),
            "{{missing}} {{a b}} {{repo"
        );
        assert_eq!(interpolate("{{}}{{repo}}", &args), "{{}}duet");
    }

    proptest::proptest! {
        /// Any text: no panic; text without `{{` comes back unchanged; a known name is filled
        /// whatever text follows it.
        #[test]
        fn interpolation_never_panics(text in "\\PC*", key in "[a-z_]{1,8}", value in "[^{}]*") {
            let expected = format!("<{value}>");
            let args = serde_json::json!({ key.clone(): value });
            let once = interpolate(&text, &args);
            if !text.contains("{{") {
                proptest::prop_assert_eq!(&once, &text);
            }
            let filled = interpolate(&format!("<{{{{{key}}}}}>{text}"), &args);
            proptest::prop_assert!(filled.starts_with(&expected));
        }
    }

    #[test]
    fn past_tools_and_chat_are_dropped_unless_asked_for() {
        let h = history();
        let a = messages(&h, SideId::A, &prompt(true, false));
        assert_eq!(
            roles(&a),
            vec![
                (Role::User, Some("brief")),
                (Role::Assistant, Some("draft")),
                (Role::User, Some("change it")),
            ]
        );
        let latest = messages(&h, SideId::A, &prompt(false, false));
        assert_eq!(roles(&latest), vec![(Role::User, Some("change it"))]);
    }
}
