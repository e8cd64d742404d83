//! Hook definitions (`agents/hooks/`, identified by `id`) and handler definitions
//! (`agents/handlers/`, named by their file). Both run Rust code registered under a name: the
//! `builtin` field, or by default the hook's id or the handler's file name.

use serde::Serialize;

use crate::decode::Ctx;
use crate::issue::{Code, Issue};
use crate::node::{Dynamic, Node, Value};

/// Thread-scoped hook kinds (digest §6.1).
pub const THREAD_HOOKS: &[&str] = &[
    "after_thread_created",
    "after_subagent_created",
    "after_system_message",
    "filter_messages",
    "prefilter_llm_history",
    "before_create_message",
    "after_create_message",
    "before_update_message",
    "after_update_message",
    "before_store_tool_result",
    "after_tool_call_success",
    "after_tool_call_failure",
    "tool_call_started",
    "tool_call_done",
    "tool_call_policy",
    "question_reminder",
];

/// Hook kinds that are duet extensions (not in the digest's §6.1): `tool_call_policy`, which
/// decides per tool call whether it runs, is denied, or waits for a person; and
/// `question_reminder`, which fires when a deadline reminds a person of a question or a
/// pending tool call (where notifications plug in).
pub const EXTENSION_HOOKS: &[&str] = &["tool_call_policy", "question_reminder"];
/// User-scoped hook kinds: never thread hooks, never requirable as parent hooks.
pub const USER_HOOKS: &[&str] = &[
    "user_client_attached",
    "user_client_detached",
    "user_value_changed",
];

/// Hook kinds duet accepts but never fires: messages are never updated (the journal is
/// append-only), and there are no user clients.
pub const NEVER_FIRED: &[&str] = &[
    "before_update_message",
    "after_update_message",
    "user_client_attached",
    "user_client_detached",
    "user_value_changed",
];

/// A hook: code that decorates turns, run only where referenced.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HookDef {
    /// `id`: how `hooks` and `parentHooks` refer to the hook; required, unique, snake_case.
    pub id: String,
    /// `hook`: the hook kind (`filter_messages`...), one of [`THREAD_HOOKS`] or [`USER_HOOKS`];
    /// required.
    pub hook: String,
    /// `description`: what the hook does, for people; optional.
    pub description: Option<String>,
    /// `builtin`: the name of the Rust hook that implements it; default the hook's `id`.
    pub builtin: String,
}

impl HookDef {
    /// Whether the kind is thread-scoped (and so may be a parent hook).
    pub(crate) fn is_thread_scoped(&self) -> bool {
        THREAD_HOOKS.contains(&self.hook.as_str())
    }
}

/// A handler: code that takes a side's turns.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HandlerDef {
    /// The file name without extension.
    pub name: String,
    /// `description`: what the handler does, for people; optional.
    pub description: Option<String>,
    /// `builtin`: the name of the Rust handler that implements it; default the file name.
    pub builtin: String,
}

fn execute_function(
    ctx: &mut Ctx<'_>,
    node: Option<&Node>,
    what: &str,
    builtin: &str,
    explicit: bool,
) {
    let Some(n) = node else { return };
    if matches!(n.value, Value::Dynamic(Dynamic::Function)) {
        if !explicit {
            ctx.push(
                Issue::new(Code::TsFunctionNotRun, format!("{what} has an `execute` function; duet does not run a definition's functions yet and runs the Rust code registered as `{builtin}` instead"))
                    .at(ctx.file, "execute", Some(n.span))
                    .hint(format!("say so with `builtin: {builtin}` (or another registered name) and drop `execute`")),
            );
        }
    } else {
        ctx.report(
            Code::WrongType,
            format!("`execute` is a TypeScript function, not {}", n.kind()),
            "execute",
            n.span,
        );
    }
}

pub(crate) fn decode_hook(ctx: &mut Ctx<'_>, root: &Node) -> (Option<String>, Option<HookDef>) {
    let Some(mut o) = ctx.object(root, "") else {
        return (None, None);
    };
    let id = o.required_name(ctx, "id");
    let id_span = o.take("id").map_or(o.span, |n| n.span);
    let kind_node = o.take("hook");
    let kind = o.required_name(ctx, "hook");
    if let (Some(k), Some(n)) = (&kind, kind_node)
        && !THREAD_HOOKS.contains(&k.as_str())
        && !USER_HOOKS.contains(&k.as_str())
    {
        ctx.push(
            Issue::new(Code::InvalidValue, format!("`{k}` is not a hook kind"))
                .at(ctx.file, "hook", Some(n.span))
                .hint(format!(
                    "thread hooks: {}; user hooks: {}",
                    THREAD_HOOKS.join(", "),
                    USER_HOOKS.join(", ")
                )),
        );
    }
    if let (Some(k), Some(n)) = (&kind, kind_node)
        && NEVER_FIRED.contains(&k.as_str())
    {
        ctx.push(
            Issue::new(
                Code::HookNeverRuns,
                format!("duet never fires `{k}` hooks, so this one never runs"),
            )
            .at(ctx.file, "hook", Some(n.span))
            .hint(if k.contains("update_message") {
                "duet's journal is append-only: messages are never updated; `before_create_message` sees each one before it is written"
            } else {
                "duet has no user clients or user values yet"
            }),
        );
    }
    let description = o.string(ctx, "description");
    let builtin = o.name(ctx, "builtin");
    let explicit = builtin.is_some();
    let builtin = builtin.or_else(|| id.clone()).unwrap_or_default();
    execute_function(ctx, o.take("execute"), "this hook", &builtin, explicit);
    o.finish(ctx, &["hook", "id", "description", "builtin", "execute"]);
    if let Some(id) = &id {
        crate::agent::check_name(ctx, id, "id", id_span);
    }
    let hook = match (id.clone(), kind) {
        (Some(id), Some(hook)) => Some(HookDef {
            id,
            hook,
            description,
            builtin,
        }),
        _ => None,
    };
    (id, hook)
}

pub(crate) fn decode_handler(ctx: &mut Ctx<'_>, root: &Node, name: &str) -> Option<HandlerDef> {
    let mut o = ctx.object(root, "")?;
    if o.has("name") {
        ctx.push(
            Issue::new(
                Code::UnknownField,
                "a handler is named by its file, not by a `name` field",
            )
            .at(ctx.file, "name", Some(o.key_span("name")))
            .hint(format!(
                "remove `name`; this handler is `{name}` because of its file name"
            )),
        );
        o.take("name");
    }
    let description = o.string(ctx, "description");
    let builtin = o.name(ctx, "builtin");
    let explicit = builtin.is_some();
    let builtin = builtin.unwrap_or_else(|| name.to_owned());
    execute_function(ctx, o.take("execute"), "this handler", &builtin, explicit);
    o.finish(ctx, &["description", "builtin", "execute"]);
    Some(HandlerDef {
        name: name.to_owned(),
        description,
        builtin,
    })
}
