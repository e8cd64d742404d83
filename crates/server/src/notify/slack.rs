//! The Slack channel: a question posted with `chat.postMessage` as Block Kit (what is asked,
//! about which thread and agent, the proposed call, the deadline, and the decision buttons whose
//! `value` is the one-time link's token), the message updated with `chat.update` once someone
//! answered (no buttons), and a refusal told to the one who clicked with `chat.postEphemeral`.
//! [`send`] calls the Web API with the bot token; what comes in from Slack (its signature, a
//! click) is `inbound.rs`.
//!
//! A delivery's `meta` is `{"method": "chat.postMessage" | "chat.update" |
//! "chat.postEphemeral"}` (no meta: `chat.postMessage`); a posted message's delivery keeps
//! `{"channel", "ts"}` as its `response`, what [`render_update`] needs later.

pub(crate) mod inbound;

pub use inbound::{SlackAuthError, verify_signature};

use serde::Deserialize;
use serde_json::{Value, json};

use super::{Answer, Event, QuestionKind, View};

/// Block Kit's limits (Slack's block reference): a section's or a context element's text, a
/// header's text, a button's text, `value` and `url`.
const TEXT_MAX: usize = 3000;
const HEADER_MAX: usize = 150;
const VALUE_MAX: usize = 2000;
const URL_MAX: usize = 3000;

/// The Web API methods a delivery may call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Method {
    PostMessage,
    Update,
    PostEphemeral,
}

impl Method {
    fn as_str(self) -> &'static str {
        match self {
            Method::PostMessage => "chat.postMessage",
            Method::Update => "chat.update",
            Method::PostEphemeral => "chat.postEphemeral",
        }
    }
}

/// A Slack delivery's `meta` for `method`.
pub(crate) fn meta(method: &str) -> String {
    json!({ "method": method }).to_string()
}

/// The `chat.postMessage` body for `view` in `channel`.
pub(crate) fn render_post(view: &View, channel: &str) -> String {
    let title = title(view);
    let mut blocks = body_blocks(view, &title);
    if let Some(outcome) = outcome(view) {
        blocks.push(section(&outcome));
    }
    blocks.extend(context(view));
    blocks.extend(actions(view));
    json!({
        "channel": channel,
        "text": fallback(view, &title),
        "blocks": blocks,
    })
    .to_string()
}

/// The `chat.update` body for message `ts` in `channel` once `view`'s question was answered:
/// the question as posted and who decided what, no buttons.
pub(crate) fn render_update(view: &View, channel: &str, ts: &str) -> String {
    let title = title(view);
    let mut blocks = body_blocks(view, &title);
    if let Some(outcome) = outcome(view) {
        blocks.push(section(&outcome));
    }
    json!({
        "channel": channel,
        "ts": ts,
        "text": fallback(view, &title),
        "blocks": blocks,
    })
    .to_string()
}

/// The `chat.postEphemeral` body telling `user` in `channel` `text` (a refused click).
pub(crate) fn render_ephemeral(channel: &str, user: &str, text: &str) -> String {
    json!({ "channel": channel, "user": user, "text": escape(text) }).to_string()
}

/// What a message about `view` is headed with: who asks what (plain text).
fn title(view: &View) -> String {
    let agent = &view.thread.agent;
    let asked = match &view.question {
        Some(q) => match (&q.kind, &q.call) {
            (QuestionKind::ToolCall, Some(call)) => format!("{agent} wants to run {}", call.tool),
            (QuestionKind::ToolCall, None) => format!("{agent} wants to run a tool"),
            (QuestionKind::Question, _) => format!("{agent} asks a question"),
        },
        None => match view.event {
            Event::ThreadFailed => format!("{agent}: thread {} failed", view.thread.key),
            _ => format!("{agent}: a session of thread {} ended", view.thread.key),
        },
    };
    match view.event {
        Event::QuestionReminded => match view.reminder {
            Some(n) => format!("Reminder {n}: {asked}"),
            None => format!("Reminder: {asked}"),
        },
        Event::QuestionEscalated => format!("Escalated: {asked}"),
        _ => asked,
    }
}

/// The line a notification shows (`text`: the fallback, and what a phone's notice says), as
/// mrkdwn.
fn fallback(view: &View, title: &str) -> String {
    match answered(view) {
        Some(outcome) => format!("{}: {outcome}", escape(title)),
        None => format!("{} (thread {})", escape(title), escape(&view.thread.key)),
    }
}

/// The header, what is asked (or how the session ended), and the proposed call.
fn body_blocks(view: &View, title: &str) -> Vec<Value> {
    let mut blocks = vec![json!({
        "type": "header",
        "text": { "type": "plain_text", "text": clip(title, HEADER_MAX), "emoji": true },
    })];
    let about = format!(
        "*Agent:* `{}` · *Thread:* `{}`",
        escape(&view.thread.agent),
        escape(&view.thread.key)
    );
    let said = match (&view.question, &view.session) {
        (Some(q), _) => Some(q.text.as_str()),
        (None, Some(s)) => Some(s.result.as_deref().unwrap_or(s.stop_reason.as_str())),
        (None, None) => None,
    };
    let text = match said {
        Some(said) if !said.is_empty() => format!("{about}\n{}", escape(said)),
        _ => about,
    };
    blocks.push(section(&text));
    if let Some(call) = view.question.as_ref().and_then(|q| q.call.as_ref()) {
        let head = format!("*Proposed call:* `{}`\n", escape(&call.tool));
        let args = serde_json::to_string_pretty(&call.args).unwrap_or_default();
        // The code block's fences and newlines take 8 characters of the section's 3000.
        let room = TEXT_MAX.saturating_sub(head.chars().count() + 8);
        blocks.push(section(&format!(
            "{head}```\n{}\n```",
            clip(&escape(&args), room)
        )));
    }
    blocks
}

/// The line saying who answered what, with an emoji, for an answer or an expiry (mrkdwn).
fn outcome(view: &View) -> Option<String> {
    let what = answered(view)?;
    let icon = match (view.event, view.answer.as_ref().and_then(|a| a.decision)) {
        (Event::QuestionExpired, _) => ":hourglass:",
        (_, Some(duet_spec::Decision::Reject)) => ":x:",
        (_, Some(duet_spec::Decision::Approve | duet_spec::Decision::Edit)) => ":white_check_mark:",
        _ => ":speech_balloon:",
    };
    Some(format!("{icon} {what}"))
}

/// Who answered what (mrkdwn): `Approved by X`, `Rejected by X: reason`, `Answered by X:
/// text`, `Expired: …`. `None` when `view` is not an answer.
fn answered(view: &View) -> Option<String> {
    if !matches!(view.event, Event::QuestionAnswered | Event::QuestionExpired) {
        return None;
    }
    let answer = view.answer.as_ref();
    let who = who(answer);
    let text = answer
        .and_then(|a| a.text.as_deref())
        .filter(|t| !t.is_empty());
    let with = |s: String| match text {
        Some(t) => format!("{s}: {}", escape(t)),
        None => s,
    };
    let decision = answer.and_then(|a| a.decision);
    Some(match (view.event, decision) {
        (Event::QuestionExpired, d) => with(format!(
            "Expired: nobody answered in time; the deadline answered{}",
            d.map(|d| format!(" with {}", d.as_str()))
                .unwrap_or_default()
        )),
        (_, Some(duet_spec::Decision::Approve)) => with(format!("Approved by {who}")),
        (_, Some(duet_spec::Decision::Edit)) => {
            with(format!("Approved with edited arguments by {who}"))
        }
        (_, Some(duet_spec::Decision::Reject)) => with(format!("Rejected by {who}")),
        (_, Some(duet_spec::Decision::Respond) | None) => with(format!("Answered by {who}")),
    })
}

/// Who answered (mrkdwn): a Slack user (`slack:U…`) as a mention, the deadline in words,
/// anyone else by name, escaped.
fn who(answer: Option<&Answer>) -> String {
    match answer.and_then(|a| a.by.as_deref()) {
        None => "someone".to_owned(),
        Some("deadline") => "the deadline".to_owned(),
        Some(by) => match by.strip_prefix("slack:") {
            Some(user) if !user.is_empty() && user.chars().all(|c| c.is_ascii_alphanumeric()) => {
                format!("<@{user}>")
            }
            _ => escape(by),
        },
    }
}

/// The context line: who may answer, the deadline, until when the buttons work.
fn context(view: &View) -> Option<Value> {
    let mut elements = Vec::new();
    let mut add =
        |text: String| elements.push(json!({ "type": "mrkdwn", "text": clip(&text, TEXT_MAX) }));
    if let Some(q) = &view.question {
        let mut who: Vec<String> = q
            .approvers
            .roles
            .iter()
            .map(|r| format!("role `{}`", escape(r)))
            .collect();
        who.extend(
            q.approvers
                .principals
                .iter()
                .map(|p| format!("`{}`", escape(p))),
        );
        if !who.is_empty() {
            add(format!("*Who may answer:* {}", who.join(", ")));
        }
        if let Some(deadline) = &q.deadline {
            add(format!("*Deadline:* {}", escape(deadline)));
        }
    }
    if let Some(added) = &view.escalated_to {
        let mut to: Vec<String> = added
            .roles
            .iter()
            .map(|r| format!("role `{}`", escape(r)))
            .collect();
        to.extend(added.principals.iter().map(|p| format!("`{}`", escape(p))));
        if !to.is_empty() {
            add(format!("*Escalated to:* {}", to.join(", ")));
        }
    }
    if let Some(ms) = view.links.as_ref().and_then(|l| l.expires_at)
        && (view
            .links
            .as_ref()
            .is_some_and(|l| l.approve.is_some() || l.reject.is_some()))
    {
        let s = ms.div_euclid(1000);
        let shown = chrono::DateTime::from_timestamp(s, 0)
            .map(|t| t.format("%Y-%m-%d %H:%M UTC").to_string())
            .unwrap_or_default();
        // Slack shows the date in the reader's own time zone; the fallback is UTC.
        add(format!(
            "The buttons work until <!date^{s}^{{date_short_pretty}} {{time}}|{shown}>"
        ));
    }
    (!elements.is_empty()).then(|| json!({ "type": "context", "elements": elements }))
}

/// The buttons `view`'s links allow: approve and reject (their `value` the one-time token),
/// and the inbox.
fn actions(view: &View) -> Option<Value> {
    let links = view.links.as_ref()?;
    let mut elements = Vec::new();
    for (action, label, style, link) in [
        ("approve", "Approve", "primary", &links.approve),
        ("reject", "Reject", "danger", &links.reject),
    ] {
        let Some(url) = link else { continue };
        let token = url.rsplit('/').next().unwrap_or(url);
        if token.is_empty() || token.chars().count() > VALUE_MAX {
            tracing::warn!(
                action,
                "slack: a link's token does not fit a button's value; the button is left out"
            );
            continue;
        }
        elements.push(json!({
            "type": "button",
            "action_id": action,
            "text": { "type": "plain_text", "text": label, "emoji": true },
            "style": style,
            "value": token,
        }));
    }
    if let Some(url) = links.open.as_ref().filter(|u| u.chars().count() <= URL_MAX) {
        elements.push(json!({
            "type": "button",
            "action_id": "open",
            "text": { "type": "plain_text", "text": "Open in inbox", "emoji": true },
            "url": url,
        }));
    }
    (!elements.is_empty())
        .then(|| json!({ "type": "actions", "block_id": "duet_answer", "elements": elements }))
}

fn section(mrkdwn: &str) -> Value {
    json!({ "type": "section", "text": { "type": "mrkdwn", "text": clip(mrkdwn, TEXT_MAX) } })
}

/// `s` with the three characters Slack's text formatting reserves escaped (so an agent's text
/// cannot mention `<!channel>` or make a link).
fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// `s` cut to at most `max` characters, ending in `…` when cut (and never inside an escape).
fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let mut cut: String = s.chars().take(max.saturating_sub(1)).collect();
    if let Some(amp) = cut.rfind('&')
        && !cut[amp..].contains(';')
    {
        cut.truncate(amp);
    }
    cut.push('…');
    cut
}

/// The Web API's errors that the same call cannot get past by trying again (Slack's method
/// references): the message, the channel or the token is wrong. Any other (`ratelimited`,
/// `internal_error`, `fatal_error`, `service_unavailable`, `request_timeout`, …) is retried.
const PERMANENT: [&str; 20] = [
    "invalid_blocks",
    "invalid_blocks_format",
    "invalid_arguments",
    "invalid_json",
    "json_not_object",
    "no_text",
    "msg_too_long",
    "channel_not_found",
    "not_in_channel",
    "is_archived",
    "user_not_in_channel",
    "message_not_found",
    "cant_update_message",
    "edit_window_closed",
    "not_authed",
    "invalid_auth",
    "account_inactive",
    "token_revoked",
    "no_permission",
    "missing_scope",
];

/// What the Web API answers (the fields read here).
#[derive(Deserialize)]
struct ApiAnswer {
    ok: bool,
    error: Option<String>,
    channel: Option<String>,
    ts: Option<String>,
}

/// A Slack delivery's `meta`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Meta {
    method: String,
    /// A `chat.update` routed before the message it updates was posted: the delivery that
    /// posts it, whose kept `ts` the update takes when it is sent ([`with_posted_ts`]).
    #[serde(default)]
    post: Option<i64>,
}

/// The delivery whose message `d` updates, when `d` was routed before that message was posted
/// (its meta's `post`).
pub(crate) fn awaits_post(d: &duet_server_store::Delivery) -> Option<i64> {
    let meta: Meta = serde_json::from_str(d.meta.as_deref()?).ok()?;
    meta.post
}

/// Update `d` with the `ts` of the message delivery `post` posted (`post_id`), or why it cannot
/// be sent: the post not sent yet (tried again), or never to be (`permanent:`).
pub(crate) fn with_posted_ts(
    d: &duet_server_store::Delivery,
    post_id: i64,
    post: Option<&duet_server_store::Delivery>,
) -> Result<duet_server_store::Delivery, String> {
    use duet_server_store::DeliveryStatus;
    let post = post.ok_or_else(|| {
        format!("permanent: delivery {post_id}, the message this updates, is gone")
    })?;
    match post.status {
        DeliveryStatus::Pending => {
            return Err(format!(
                "delivery {post_id}, the message this updates, is not posted yet"
            ));
        }
        DeliveryStatus::Failed => {
            return Err(format!(
                "permanent: delivery {post_id}, the message this updates, was never posted"
            ));
        }
        DeliveryStatus::Delivered => {}
    }
    let ts = post
        .response
        .as_deref()
        .and_then(|r| serde_json::from_str::<Value>(r).ok())
        .and_then(|r| r.get("ts").and_then(Value::as_str).map(str::to_owned))
        .ok_or_else(|| {
            format!("permanent: delivery {post_id} kept no `ts` of the message this updates")
        })?;
    let mut body: Value = serde_json::from_str(&d.body)
        .map_err(|e| format!("permanent: a slack body that is not JSON: {e}"))?;
    let Some(fields) = body.as_object_mut() else {
        return Err("permanent: a slack body that is not a JSON object".to_owned());
    };
    fields.insert("ts".to_owned(), Value::String(ts));
    let mut out = d.clone();
    out.body = body.to_string();
    Ok(out)
}

/// Calls the Web API at `api_base` for delivery `d` with bot token `token`: the method its
/// meta names, its body as JSON. Delivered when Slack says `ok`; a posted or updated message's
/// `{"channel", "ts"}` comes back to be kept. A `429` (rate limited), any other non-`2xx`,
/// and `{"ok": false, "error": …}` are failures that say so (`permanent:` first when trying
/// again cannot help: a bad meta, an error in [`PERMANENT`]).
pub(crate) async fn send(
    http: &reqwest::Client,
    api_base: &str,
    token: Option<&str>,
    d: &duet_server_store::Delivery,
) -> Result<Option<String>, String> {
    let method = match d.meta.as_deref() {
        None => Method::PostMessage,
        Some(m) => {
            let meta: Meta =
                serde_json::from_str(m).map_err(|e| format!("permanent: bad slack meta: {e}"))?;
            match meta.method.as_str() {
                "chat.postMessage" => Method::PostMessage,
                "chat.update" => Method::Update,
                "chat.postEphemeral" => Method::PostEphemeral,
                other => {
                    return Err(format!(
                        "permanent: bad slack meta: no method `{other}` here"
                    ));
                }
            }
        }
    };
    let token = token
        .filter(|t| !t.is_empty())
        .ok_or("SLACK_BOT_TOKEN is not set: Slack notifications cannot be sent")?;
    let url = format!("{}/{}", api_base.trim_end_matches('/'), method.as_str());
    let resp = http
        .post(url)
        .bearer_auth(token)
        .header("content-type", "application/json; charset=utf-8")
        .body(d.body.clone())
        .send()
        .await
        .map_err(|e| e.without_url().to_string())?;
    let status = resp.status();
    if status.as_u16() == 429 {
        let after = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("?")
            .to_owned();
        return Err(format!("HTTP 429: rate limited (Retry-After: {after} s)"));
    }
    if !status.is_success() {
        return Err(format!("HTTP {}", status.as_u16()));
    }
    let answer: ApiAnswer = resp
        .json()
        .await
        .map_err(|e| format!("Slack's answer is not its JSON: {e}"))?;
    if !answer.ok {
        let error = answer.error.as_deref().unwrap_or("not ok");
        let permanent = if PERMANENT.contains(&error) {
            "permanent: "
        } else {
            ""
        };
        return Err(format!("{permanent}slack {}: {error}", method.as_str()));
    }
    Ok(match (method, answer.channel, answer.ts) {
        (Method::PostMessage | Method::Update, Some(channel), Some(ts)) => {
            Some(json!({ "channel": channel, "ts": ts }).to_string())
        }
        _ => None,
    })
}

#[cfg(test)]
mod tests;
