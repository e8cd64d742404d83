//! Decoding a notification file (`agents/notifications/NAME.yaml|ts`): its name (the file's),
//! `description`, `events`, `agents` (checked against the agents in `validate.rs`), `roles`,
//! `linkTtl`, and exactly one channel — `webhook`, `slack` or `email` — each checked here.

use super::{NotificationChannel, NotificationDef};
use crate::decode::{Ctx, Obj, nearest};
use crate::issue::{Code, Issue};
use crate::node::{Node, Value};

const FIELDS: &[&str] = &[
    "description",
    "events",
    "agents",
    "roles",
    "linkTtl",
    "webhook",
    "slack",
    "email",
];
const CHANNELS: [&str; 3] = ["webhook", "slack", "email"];
const WEBHOOK_FIELDS: &[&str] = &["url", "secretEnv"];
const SLACK_FIELDS: &[&str] = &["channel"];
const EMAIL_FIELDS: &[&str] = &["to"];

pub(crate) fn decode(ctx: &mut Ctx<'_>, root: &Node, name: &str) -> Option<NotificationDef> {
    check_file_name(ctx, name);
    let mut o = ctx.object(root, "")?;
    if o.has("name") {
        ctx.push(
            Issue::new(
                Code::UnknownField,
                "a notification is named by its file, not by a `name` field",
            )
            .at(ctx.file, "name", Some(o.key_span("name")))
            .hint(format!(
                "remove `name`; this notification is `{name}` because of its file name"
            )),
        );
        o.take("name");
    }
    let description = o.string(ctx, "description");
    let events = events(ctx, &mut o);
    let agents = agents(ctx, &mut o);
    let roles = roles(ctx, &mut o);
    let link_ttl_ms = link_ttl(ctx, &mut o);
    let channel = channel(ctx, &mut o);
    o.finish(ctx, FIELDS);
    Some(NotificationDef {
        name: name.to_owned(),
        description,
        events,
        agents,
        roles,
        link_ttl_ms: link_ttl_ms?,
        channel: channel?,
    })
}

/// A notification speaks as the principal `notification:NAME`, so its name follows the
/// principals' rule (1–64 letters, digits, `.`, `_`, `-`).
fn check_file_name(ctx: &mut Ctx<'_>, name: &str) {
    if !is_role(name) {
        ctx.push(
            Issue::new(
                Code::InvalidValue,
                format!(
                    "notifications are named by their file, and `{name}` is not 1–64 letters, digits, `.`, `_` or `-`"
                ),
            )
            .at(ctx.file, "", None)
            .hint("rename the file (`ops-webhook.yaml`)"),
        );
    }
}

/// What a key's role may be, as the server's `auth::check_role` says: 1–64 of `A-Z a-z 0-9 . _ -`.
pub(crate) fn is_role(role: &str) -> bool {
    !role.is_empty()
        && role.len() <= 64
        && role
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

fn dedup(mut items: Vec<String>) -> Vec<String> {
    let mut seen = std::collections::BTreeSet::new();
    items.retain(|i| seen.insert(i.clone()));
    items
}

/// The list at `key` with each item's path, or nothing (a wrong type reported).
fn items<'n>(ctx: &mut Ctx<'_>, o: &mut Obj<'n>, key: &str) -> Vec<(String, &'n Node)> {
    let path = o.path(key);
    let Some(node) = o.take(key) else {
        return Vec::new();
    };
    ctx.array(node, &path)
        .iter()
        .enumerate()
        .map(|(i, n)| (format!("{path}[{i}]"), n))
        .collect()
}

fn events(ctx: &mut Ctx<'_>, o: &mut Obj<'_>) -> Vec<String> {
    let mut out = Vec::new();
    for (path, n) in items(ctx, o, "events") {
        let Some(event) = ctx.name(n, &path) else {
            continue;
        };
        if !NotificationDef::EVENTS.contains(&event.as_str()) {
            let hint = match nearest(&event, NotificationDef::EVENTS) {
                Some(near) => format!("did you mean `{near}`?"),
                None => format!("events: {}", NotificationDef::EVENTS.join(", ")),
            };
            ctx.push(
                Issue::new(Code::UnknownEvent, format!("duet has no event `{event}`"))
                    .at(ctx.file, &path, Some(n.span))
                    .hint(hint),
            );
            continue;
        }
        out.push(event);
    }
    dedup(out)
}

/// `agents`, each name kept with its index as written (for `validate.rs`'s locations).
fn agents(ctx: &mut Ctx<'_>, o: &mut Obj<'_>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut written = Vec::new();
    for (i, (path, n)) in items(ctx, o, "agents").into_iter().enumerate() {
        if let Some(agent) = ctx.name(n, &path)
            && !out.contains(&agent)
        {
            out.push(agent);
            written.push(i);
        }
    }
    ctx.written.insert("agents".to_owned(), written);
    out
}

fn roles(ctx: &mut Ctx<'_>, o: &mut Obj<'_>) -> Vec<String> {
    let mut out = Vec::new();
    for (path, n) in items(ctx, o, "roles") {
        let Some(role) = ctx.name(n, &path) else {
            continue;
        };
        if !is_role(&role) {
            ctx.push(
                Issue::new(
                    Code::InvalidValue,
                    format!(
                        "`{role}` cannot be a key's role: use 1–64 letters, digits, `.`, `_` or `-`"
                    ),
                )
                .at(ctx.file, &path, Some(n.span))
                .hint("name a role keys hold (`duet keys create --role ops`)"),
            );
            continue;
        }
        out.push(role);
    }
    dedup(out)
}

/// `linkTtl`: a duration as a deadline's (`90s`, `48h`, `3d`, or whole ms), over zero and at
/// most [`NotificationDef::MAX_LINK_TTL_MS`]. `None` when it is written wrong.
fn link_ttl(ctx: &mut Ctx<'_>, o: &mut Obj<'_>) -> Option<u64> {
    let Some(node) = o.take("linkTtl") else {
        return Some(NotificationDef::DEFAULT_LINK_TTL_MS);
    };
    let parsed = match &node.value {
        Value::Number(n) => n.as_u64().filter(|ms| *ms > 0),
        Value::String(s) => crate::parse_duration(s),
        _ => None,
    };
    let ms = parsed.filter(|ms| *ms <= NotificationDef::MAX_LINK_TTL_MS);
    if ms.is_none() {
        let what = match &node.value {
            Value::String(s) => format!("`{s}`"),
            _ => node.kind().to_owned(),
        };
        ctx.push(
            Issue::new(
                Code::LinkTtl,
                format!(
                    "`linkTtl` is how long answer links work: a duration over zero and at most 90 days (`90s`, `48h`, `3d`, or whole milliseconds), not {what}"
                ),
            )
            .at(ctx.file, "linkTtl", Some(node.span))
            .hint("write e.g. `linkTtl: 3d`"),
        );
    }
    ms
}

/// Exactly one of `webhook`, `slack`, `email`, each decoded (its issues reported) even when
/// there are several.
fn channel(ctx: &mut Ctx<'_>, o: &mut Obj<'_>) -> Option<NotificationChannel> {
    let mut found = Vec::new();
    for key in CHANNELS {
        let Some(node) = o.take(key) else { continue };
        let decoded = match key {
            "webhook" => webhook(ctx, node),
            "slack" => slack(ctx, node),
            _ => email(ctx, node),
        };
        found.push((key, o.key_span(key), decoded));
    }
    match found.as_slice() {
        [] => {
            ctx.push(
                Issue::new(
                    Code::NotificationChannel,
                    "a notification needs a channel: one of `webhook`, `slack` or `email`",
                )
                .at(ctx.file, "", Some(o.span))
                .hint("add `webhook: { url: https://… }`, `slack: { channel: C0123 }` or `email: { to: [ops@example.com] }`"),
            );
            None
        }
        [(_, _, decoded)] => decoded.clone(),
        [(first, _, _), rest @ ..] => {
            for (key, span, _) in rest {
                ctx.push(
                    Issue::new(
                        Code::NotificationChannel,
                        format!(
                            "a notification has one channel, and this one has `{first}` and `{key}`"
                        ),
                    )
                    .at(ctx.file, key, Some(*span))
                    .hint("define one notification per channel, each in its own file"),
                );
            }
            None
        }
    }
}

fn webhook(ctx: &mut Ctx<'_>, node: &Node) -> Option<NotificationChannel> {
    let mut o = ctx.object(node, "webhook")?;
    let url_node = o.take("url");
    let url = match url_node {
        Some(n) => ctx.name(n, "webhook.url"),
        None => {
            ctx.report(
                Code::MissingField,
                "`webhook` needs `url`: where the events are POSTed",
                "webhook.url",
                o.span,
            );
            None
        }
    };
    let url = match (url, url_node) {
        (Some(u), Some(n)) => check_url(ctx, u, n),
        _ => None,
    };
    let secret_node = o.take("secretEnv");
    let secret_env = secret_node.and_then(|n| ctx.name(n, "webhook.secretEnv"));
    let secret_ok = match (&secret_env, secret_node) {
        (Some(env), Some(n)) if !is_env_name(env) || env.starts_with("whsec_") => {
            // The value may be a secret pasted by mistake: it is never repeated.
            ctx.push(
                Issue::new(
                    Code::InvalidValue,
                    "`webhook.secretEnv` is not the name of an environment variable",
                )
                .at(ctx.file, "webhook.secretEnv", Some(n.span))
                .hint("`secretEnv` names the variable holding the signing secret (`OPS_HOOK_SECRET`), never the secret itself"),
            );
            false
        }
        (None, Some(_)) => false,
        _ => true,
    };
    o.finish(ctx, WEBHOOK_FIELDS);
    let url = url?;
    secret_ok.then_some(NotificationChannel::Webhook { url, secret_env })
}

/// A webhook's `url`: an absolute `http://` or `https://` URL with a host.
fn check_url(ctx: &mut Ctx<'_>, text: String, node: &Node) -> Option<String> {
    let problem = match url::Url::parse(&text) {
        Err(e) => Some(format!("`webhook.url` is not a URL ({e})")),
        Ok(u) if !matches!(u.scheme(), "http" | "https") => Some(format!(
            "`webhook.url` must be an `http://` or `https://` URL, not `{}:`",
            u.scheme()
        )),
        Ok(u) if u.host_str().is_none_or(str::is_empty) => {
            Some("`webhook.url` has no host".to_owned())
        }
        Ok(_) => None,
    };
    match problem {
        Some(message) => {
            ctx.push(
                Issue::new(Code::InvalidValue, message)
                    .at(ctx.file, "webhook.url", Some(node.span))
                    .hint("for example `https://hooks.example.com/duet`"),
            );
            None
        }
        None => Some(text),
    }
}

/// Whether `name` can be an environment variable's name (`[A-Za-z_][A-Za-z0-9_]*`).
fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn slack(ctx: &mut Ctx<'_>, node: &Node) -> Option<NotificationChannel> {
    let mut o = ctx.object(node, "slack")?;
    let channel_node = o.take("channel");
    let channel = match channel_node {
        Some(n) => ctx.name(n, "slack.channel"),
        None => {
            ctx.report(
                Code::MissingField,
                "`slack` needs `channel`: the Slack channel the questions are posted in",
                "slack.channel",
                o.span,
            );
            None
        }
    };
    let channel = match (channel, channel_node) {
        (Some(c), Some(n)) if c.chars().any(char::is_whitespace) => {
            ctx.push(
                Issue::new(
                    Code::InvalidValue,
                    format!("`slack.channel` is a channel id or name, without spaces: not `{c}`"),
                )
                .at(ctx.file, "slack.channel", Some(n.span))
                .hint("write the channel's id (`C0123ABCD`) or its name (`ops-approvals`)"),
            );
            None
        }
        (c, _) => c,
    };
    o.finish(ctx, SLACK_FIELDS);
    Some(NotificationChannel::Slack { channel: channel? })
}

fn email(ctx: &mut Ctx<'_>, node: &Node) -> Option<NotificationChannel> {
    let mut o = ctx.object(node, "email")?;
    let Some(to_node) = o.take("to") else {
        ctx.report(
            Code::MissingField,
            "`email` needs `to`: the addresses the questions are mailed to",
            "email.to",
            o.span,
        );
        o.finish(ctx, EMAIL_FIELDS);
        return None;
    };
    // One address alone is a list of one.
    let listed: Vec<(String, &Node)> = match &to_node.value {
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, n)| (format!("email.to[{i}]"), n))
            .collect(),
        Value::String(_) => vec![("email.to".to_owned(), to_node)],
        _ => {
            ctx.report(
                Code::WrongType,
                format!(
                    "`email.to` must be an array of addresses, not {}",
                    to_node.kind()
                ),
                "email.to",
                to_node.span,
            );
            o.finish(ctx, EMAIL_FIELDS);
            return None;
        }
    };
    let mut to = Vec::new();
    let mut bad = false;
    for (path, n) in &listed {
        let Some(address) = ctx.string(n, path) else {
            bad = true;
            continue;
        };
        if !is_address(&address) {
            bad = true;
            ctx.push(
                Issue::new(
                    Code::InvalidAddress,
                    format!("`{}` is not an email address", address.escape_debug()),
                )
                .at(ctx.file, path, Some(n.span))
                .hint("write `name@example.com`: one `@`, something on each side, no spaces"),
            );
            continue;
        }
        to.push(address);
    }
    if listed.is_empty() {
        ctx.report(
            Code::InvalidValue,
            "`email.to` is empty: nobody would be mailed",
            "email.to",
            to_node.span,
        );
        bad = true;
    }
    o.finish(ctx, EMAIL_FIELDS);
    (!bad).then(|| NotificationChannel::Email { to: dedup(to) })
}

/// An address: one `@`, something on each side, no whitespace or control characters.
pub(crate) fn is_address(address: &str) -> bool {
    let Some((local, domain)) = address.split_once('@') else {
        return false;
    };
    !local.is_empty()
        && !domain.is_empty()
        && !domain.contains('@')
        && !address.chars().any(|c| c.is_whitespace() || c.is_control())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        for good in ["ops@example.com", "a@b", "first.last+tag@mail.example.org"] {
            assert!(is_address(good), "{good}");
        }
        for bad in [
            "",
            "ops",
            "@example.com",
            "ops@",
            "a@b@c",
            "ops @example.com",
            "ops@exa\tmple.com",
            "ops@example.com\n",
            "o\u{7}ps@example.com",
        ] {
            assert!(!is_address(bad), "{bad:?}");
        }
    }

    #[test]
    fn roles_follow_the_key_rule() {
        assert!(is_role("ops"));
        assert!(is_role("on-call.eu_1"));
        assert!(is_role(&"r".repeat(64)));
        for bad in ["", "on call", "ops!", "é", &"r".repeat(65)] {
            assert!(!is_role(bad), "{bad:?}");
        }
    }
}
