//! Notification definitions (`agents/notifications/`, named by their file; a duet extension,
//! issue #31): who hears of what happens on the project's threads, through which channel. A
//! definition with `roles` is that role's channel: it hears of the questions those roles may
//! answer, and the answers it carries (links, Slack buttons) decide with those roles.

use serde::Serialize;

mod decode;

pub(crate) use decode::decode;

/// One subscription of the project's.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NotificationDef {
    /// The file name without extension.
    pub name: String,
    /// `description`: for people.
    pub description: Option<String>,
    /// `events`: the events it hears of (`question.parked`, …); empty: every event.
    pub events: Vec<String>,
    /// `agents`: only threads of these agents; empty: every agent's.
    pub agents: Vec<String>,
    /// `roles`: the roles it speaks for. Non-empty: it hears of a question only when the
    /// question's approvers (or an escalation's) name one of them, and answers through it
    /// decide with them.
    pub roles: Vec<String>,
    /// `linkTtl` (ms): how long the answer links it carries work; default 7 days.
    pub link_ttl_ms: u64,
    /// Where it goes: exactly one of `webhook`, `slack`, `email`.
    pub channel: NotificationChannel,
}

impl NotificationDef {
    /// `linkTtl` when absent: 7 days.
    pub const DEFAULT_LINK_TTL_MS: u64 = 7 * 24 * 3_600_000;
    /// The longest `linkTtl`: 90 days.
    pub const MAX_LINK_TTL_MS: u64 = 90 * 24 * 3_600_000;
    /// The events `events` may name (what the server's router emits).
    pub const EVENTS: &'static [&'static str] = &[
        "question.parked",
        "question.answered",
        "question.expired",
        "question.escalated",
        "question.reminded",
        "session.ended",
        "thread.failed",
    ];
}

/// A notification's channel.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum NotificationChannel {
    /// `webhook: { url, secretEnv }`: a signed POST of the event's JSON.
    #[serde(rename_all = "camelCase")]
    Webhook {
        /// `url`: http(s).
        url: String,
        /// `secretEnv`: the environment variable holding the signing secret (`whsec_…` base64,
        /// or any text); absent, deliveries are sent unsigned; named but unset where the server
        /// runs, they fail (retried) until it is set — never sent unsigned (loading never reads
        /// the environment, so it does not warn).
        secret_env: Option<String>,
    },
    /// `slack: { channel }`: a Block Kit message with decision buttons, through the server's
    /// Slack app (`SLACK_BOT_TOKEN`, `SLACK_SIGNING_SECRET`).
    Slack {
        /// `channel`: a Slack channel id (`C…`) or name.
        channel: String,
    },
    /// `email: { to }`: a plain-text and HTML message through the server's SMTP
    /// (`DUET_SMTP_URL`).
    Email {
        /// `to`: the addresses.
        to: Vec<String>,
    },
}
