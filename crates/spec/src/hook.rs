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
    /// `execute`: the hook's own function (a `.ts`/`.js` hook), run by the code host in place of
    /// a Rust hook.
    pub code: Option<crate::code::CodeRef>,
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
    /// `execute`: the handler's own function (a `.ts`/`.js` handler), run by the code host in
    /// place of a Rust handler.
    pub code: Option<crate::code::CodeRef>,
}

/// Whether `node` (a definition's `execute`) is a function; anything else is reported. A
/// function beside an explicit `builtin` is reported too: the definition runs one way.
pub(crate) fn execute_function(
    ctx: &mut Ctx<'_>,
    node: Option<&Node>,
    field: &str,
    what: &str,
    builtin: Option<&str>,
) -> bool {
    let Some(n) = node else { return false };
    if !matches!(n.value, Value::Dynamic(Dynamic::Function)) {
        ctx.report(
            Code::WrongType,
            format!("`{field}` is a TypeScript function, not {}", n.kind()),
            field,
            n.span,
        );
        return false;
    }
    if let Some(builtin) = builtin {
        ctx.push(
            Issue::new(
                Code::CodeAndBuiltin,
                format!("{what} has its own `{field}` function and names the Rust code `{builtin}` too"),
            )
            .at(ctx.file, field, Some(n.span))
            .hint(format!("keep `{field}` (duet runs it) or `builtin: {builtin}` (a Rust implementation registered under that name), not both")),
        );
        return false;
    }
    true
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
    let explicit = o.name(ctx, "builtin");
    let has_code = execute_function(
        ctx,
        o.take("execute"),
        "execute",
        "this hook",
        explicit.as_deref(),
    );
    let code = crate::code::code_ref(ctx, &mut o, &["execute"], has_code);
    let builtin = explicit.or_else(|| id.clone()).unwrap_or_default();
    o.finish(
        ctx,
        &[
            "hook",
            "id",
            "description",
            "builtin",
            "execute",
            "timeoutMs",
            "memoryMb",
        ],
    );
    if let Some(id) = &id {
        crate::agent::check_name(ctx, id, "id", id_span);
    }
    let hook = match (id.clone(), kind) {
        (Some(id), Some(hook)) => Some(HookDef {
            id,
            hook,
            description,
            builtin,
            code,
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
    let explicit = o.name(ctx, "builtin");
    let has_code = execute_function(
        ctx,
        o.take("execute"),
        "execute",
        "this handler",
        explicit.as_deref(),
    );
    let code = crate::code::code_ref(ctx, &mut o, &["execute"], has_code);
    let builtin = explicit.unwrap_or_else(|| name.to_owned());
    o.finish(
        ctx,
        &["description", "builtin", "execute", "timeoutMs", "memoryMb"],
    );
    Some(HandlerDef {
        name: name.to_owned(),
        description,
        builtin,
        code,
    })
}
