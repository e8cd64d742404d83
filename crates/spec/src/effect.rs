//! Effect definitions (`agents/effects/`, named by their file): code that runs later, outside
//! any turn, when a scheduled effect falls due. duet never runs TypeScript, so the body is Rust
//! code registered by id (`builtin`, by default the file name); the definition gives what is
//! checked before it runs: the arguments' schema, and how many times it may be tried.

use serde::Serialize;

use crate::decode::Ctx;
use crate::issue::{Code, Issue};
use crate::node::{Dynamic, Node, Value};
use crate::schema;

/// An effect: code scheduled on a thread (`scheduleEffect`) that runs when its time comes.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EffectDef {
    /// The file name without extension.
    pub name: String,
    /// `description`: what the effect does, for people; required.
    pub description: String,
    /// `args`: a JSON Schema for the arguments object, checked when the effect is scheduled
    /// and again when it runs; absent (`None`), any object.
    pub args: Option<serde_json::Value>,
    /// `builtin`: the id of the Rust effect that runs it; default the file name.
    pub builtin: String,
    /// `handler`: the effect's own function (a `.ts`/`.js` effect), run by the code host in
    /// place of a Rust effect.
    pub code: Option<crate::code::CodeRef>,
    /// `maxAttempts` (a duet extension): how many times a run that fails is tried before the
    /// effect is `failed`; default [`EffectDef::DEFAULT_MAX_ATTEMPTS`], at least 1.
    pub max_attempts: u32,
}

impl EffectDef {
    /// `maxAttempts` when absent.
    pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;
    /// The largest `maxAttempts`.
    pub const MAX_ATTEMPTS_LIMIT: u32 = 100;
}

const EFFECT_FIELDS: &[&str] = &[
    "description",
    "args",
    "builtin",
    "maxAttempts",
    "handler",
    "timeoutMs",
    "memoryMb",
];

/// The object a positional `defineEffect(description, argsSchema?, handler)` stands for:
/// `{ description, args, handler }`. `None` when `args` are not that shape (the caller reports).
pub(crate) fn positional(args: Vec<Node>) -> Option<Node> {
    let span = args.first()?.span;
    let is_function = |n: &Node| matches!(n.value, Value::Dynamic(Dynamic::Function));
    let mut it = args.into_iter();
    let description = it.next()?;
    if !matches!(description.value, Value::String(_)) {
        return None;
    }
    let rest: Vec<Node> = it.collect();
    let (schema, handler) = match rest.as_slice() {
        [] => (None, None),
        [h] if is_function(h) => (None, Some(h.clone())),
        [s] => (Some(s.clone()), None),
        [s, h] => (Some(s.clone()), Some(h.clone())),
        _ => return None,
    };
    let entry = |key: &str, value: Node| crate::node::Entry {
        key: key.to_owned(),
        key_span: value.span,
        value,
    };
    let mut entries = vec![entry("description", description)];
    entries.extend(schema.map(|s| entry("args", s)));
    entries.extend(handler.map(|h| entry("handler", h)));
    Some(Node::new(Value::Object(entries), span))
}

pub(crate) fn decode(ctx: &mut Ctx<'_>, root: &Node, name: &str) -> Option<EffectDef> {
    let mut o = ctx.object(root, "")?;
    if o.has("name") {
        ctx.push(
            Issue::new(
                Code::UnknownField,
                "an effect is named by its file, not by a `name` field",
            )
            .at(ctx.file, "name", Some(o.key_span("name")))
            .hint(format!(
                "remove `name`; this effect is `{name}` because of its file name"
            )),
        );
        o.take("name");
    }
    let description = o.required_name(ctx, "description");
    let args = o
        .take("args")
        .and_then(|n| schema::object_schema(ctx, n, "args"));
    let explicit = o.name(ctx, "builtin");
    let max_attempts =
        crate::tool::bounded(ctx, &mut o, "maxAttempts", EffectDef::MAX_ATTEMPTS_LIMIT)
            .unwrap_or(EffectDef::DEFAULT_MAX_ATTEMPTS);
    let has_code = crate::hook::execute_function(
        ctx,
        o.take("handler"),
        "handler",
        &format!("effect `{name}`"),
        explicit.as_deref(),
    );
    let code = crate::code::code_ref(ctx, &mut o, &["handler"], has_code);
    let builtin = explicit.unwrap_or_else(|| name.to_owned());
    o.finish(ctx, EFFECT_FIELDS);
    Some(EffectDef {
        name: name.to_owned(),
        description: description?,
        args,
        builtin,
        code,
        max_attempts,
    })
}
