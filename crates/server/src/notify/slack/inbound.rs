//! What Slack sends duet: a request signed with the app's signing secret ([`verify_signature`],
//! Slack's v0 scheme) carrying an interaction, of which duet reads a button click
//! ([`parse_click`]: a `block_actions` payload in the form field `payload`).

use hmac::{Hmac, Mac};
use serde::Deserialize;
use sha2::Sha256;

/// How far a request's timestamp may stray from the clock, either way (seconds): Slack's own
/// advice, against replays.
const TOLERANCE_S: i64 = 300;

/// Why a request does not come from Slack, as far as duet can tell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SlackAuthError {
    /// `X-Slack-Request-Timestamp` or `X-Slack-Signature` is missing or empty.
    Missing(&'static str),
    /// A header is not what Slack sends (a timestamp that is not an integer, a signature that is
    /// not `v0=` and hex).
    Malformed(&'static str),
    /// The timestamp is more than 5 minutes from now (a replay, or a clock far off).
    Stale,
    /// The signature is not the signing secret's over this timestamp and body.
    BadSignature,
}

impl std::fmt::Display for SlackAuthError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SlackAuthError::Missing(what) => write!(f, "the {what} header is missing"),
            SlackAuthError::Malformed(what) => write!(f, "malformed {what}"),
            SlackAuthError::Stale => f.write_str(
                "the X-Slack-Request-Timestamp is more than 5 minutes from the server's clock",
            ),
            SlackAuthError::BadSignature => {
                f.write_str("the X-Slack-Signature does not match the request")
            }
        }
    }
}

impl std::error::Error for SlackAuthError {}

/// Checks a request as Slack signs them: `signature_header` is `v0=` + hex of
/// HMAC-SHA256(`signing_secret`, `v0:{timestamp}:{raw body}`) (compared in constant time), and
/// `timestamp_header` is within 5 minutes of `now_s`.
pub fn verify_signature(
    signing_secret: &str,
    timestamp_header: &str,
    raw_body: &[u8],
    signature_header: &str,
    now_s: i64,
) -> Result<(), SlackAuthError> {
    if timestamp_header.is_empty() {
        return Err(SlackAuthError::Missing("X-Slack-Request-Timestamp"));
    }
    if signature_header.is_empty() {
        return Err(SlackAuthError::Missing("X-Slack-Signature"));
    }
    let ts: i64 = timestamp_header
        .parse()
        .map_err(|_| SlackAuthError::Malformed("X-Slack-Request-Timestamp"))?;
    if now_s.abs_diff(ts) > TOLERANCE_S.unsigned_abs() {
        return Err(SlackAuthError::Stale);
    }
    let given = signature_header
        .strip_prefix("v0=")
        .and_then(unhex)
        .ok_or(SlackAuthError::Malformed("X-Slack-Signature"))?;
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(signing_secret.as_bytes())
        .unwrap_or_else(|_| unreachable!("HMAC accepts every key length"));
    mac.update(b"v0:");
    mac.update(timestamp_header.as_bytes());
    mac.update(b":");
    mac.update(raw_body);
    mac.verify_slice(&given)
        .map_err(|_| SlackAuthError::BadSignature)
}

/// The bytes of hex text `s` (either case), `None` if it is not hex.
fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    s.as_bytes()
        .chunks(2)
        .map(|pair| {
            let hi = char::from(pair[0]).to_digit(16)?;
            let lo = char::from(pair[1]).to_digit(16)?;
            u8::try_from(hi * 16 + lo).ok()
        })
        .collect()
}

/// A button click, as duet reads a `block_actions` payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Click {
    /// Who clicked (`user.id`).
    pub(crate) user_id: String,
    /// Their handle (`user.username`, else `user.name`), when Slack says.
    pub(crate) username: Option<String>,
    /// Which button (`actions[0].action_id`): `approve`, `reject`, `open`, or another app's.
    pub(crate) action_id: String,
    /// The button's `value` (a one-time link's token), when it has one.
    pub(crate) value: Option<String>,
    /// The channel of the message (`channel.id`, else `container.channel_id`).
    pub(crate) channel: Option<String>,
    /// The message's `ts` (`message.ts`, else `container.message_ts`).
    pub(crate) message_ts: Option<String>,
}

#[derive(Deserialize)]
struct Payload {
    #[serde(rename = "type")]
    kind: String,
    user: Option<User>,
    #[serde(default)]
    actions: Vec<Action>,
    channel: Option<Channel>,
    container: Option<Container>,
    message: Option<Message>,
}

#[derive(Deserialize)]
struct User {
    id: String,
    username: Option<String>,
    name: Option<String>,
}

#[derive(Deserialize)]
struct Action {
    action_id: String,
    value: Option<String>,
}

#[derive(Deserialize)]
struct Channel {
    id: String,
}

#[derive(Deserialize)]
struct Container {
    channel_id: Option<String>,
    message_ts: Option<String>,
}

#[derive(Deserialize)]
struct Message {
    ts: Option<String>,
}

/// The click in an interaction request's form body (`payload=<JSON>`), or what is wrong with it.
pub(crate) fn parse_click(form_body: &[u8]) -> Result<Click, String> {
    let payload = form_urlencoded::parse(form_body)
        .find(|(k, _)| k == "payload")
        .map(|(_, v)| v.into_owned())
        .ok_or("no `payload` form field")?;
    let p: Payload = serde_json::from_str(&payload)
        .map_err(|e| format!("the payload is not an interaction: {e}"))?;
    if p.kind != "block_actions" {
        return Err(format!(
            "a `{}` interaction: only button clicks (`block_actions`) are taken here",
            p.kind
        ));
    }
    let user = p.user.ok_or("the payload names no `user`")?;
    let action = p
        .actions
        .into_iter()
        .next()
        .ok_or("the payload has no `actions`")?;
    Ok(Click {
        user_id: user.id,
        username: user.username.or(user.name),
        action_id: action.action_id,
        value: action.value,
        channel: p
            .channel
            .map(|c| c.id)
            .or_else(|| p.container.as_ref().and_then(|c| c.channel_id.clone())),
        message_ts: p
            .message
            .and_then(|m| m.ts)
            .or_else(|| p.container.and_then(|c| c.message_ts)),
    })
}
