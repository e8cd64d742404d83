//! How a delivery is shown — to the API, the CLI and the inbox alike: what it was, where it went
//! and how it stands, never its body, its channel's meta (tokens, credentials, a webhook's
//! secret) or a target's secrets ([`target`]: a URL without its userinfo, query and fragment).

use duet_server_store::{Delivery, DeliveryStatus};
use serde::Serialize;
use utoipa::ToSchema;

/// The channels a delivery can be on.
pub(crate) const CHANNELS: [&str; 4] = ["webhook", "slack", "email", "a2a_push"];

/// Where a delivery goes, as it may be shown: an email address or a Slack channel as it is; a
/// URL (a webhook's, an A2A push config's) as `scheme://host[:port]/path` — its userinfo, query
/// and fragment are where credentials travel, so they are left out; text that is not a URL,
/// on a URL channel, as `(not a URL)`.
pub fn target(channel: &str, target: &str) -> String {
    if !matches!(channel, "webhook" | "a2a_push") {
        return target.to_owned();
    }
    match url::Url::parse(target) {
        // Its origin alone: receivers put secrets in the path as often as in the query or the
        // userinfo (`/services/T…/B…/<secret>`), and whoever owns a thread sees its deliveries.
        Ok(u) if u.has_host() => {
            let origin = u.origin().ascii_serialization();
            if u.path() == "/" && u.query().is_none() {
                format!("{origin}/")
            } else {
                format!("{origin}/…")
            }
        }
        Ok(_) => "(not a URL)".to_owned(),
        Err(_) => "(not a URL)".to_owned(),
    }
}

/// One delivery of a notification: what it was about, where it went and how it stands.
#[derive(Clone, Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryView {
    /// Its id (the `before` of the next page).
    pub id: i64,
    /// `webhook`, `slack`, `email` or `a2a_push`.
    pub channel: String,
    /// The event (`question.parked`, …; A2A push: `task.update`).
    pub event: String,
    /// Where it goes: an email address, a Slack channel, a URL without its userinfo and query.
    pub target: String,
    /// The approval it is about (`THREAD:SESSION:SEQ`), for the `question.*` events.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    /// The thread it is about, by its key as the reader names it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread: Option<String>,
    /// The subscription it came from: a project definition's name or a stored subscription's id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subscription: Option<String>,
    /// The principal it is for, when a principal's subscription made it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recipient: Option<String>,
    /// `pending` (waiting, being sent, or failed and due again), `delivered` or `failed` (given
    /// up on; `POST /notifications/{id}/retry` puts it back).
    pub status: &'static str,
    /// Failed attempts so far.
    pub attempts: i64,
    /// The last failure, as the channel said it (`permanent:` when trying again cannot help).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// When it was made (ms since the Unix epoch).
    pub created_at: i64,
    /// When it was delivered or given up on (ms).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<i64>,
    /// While pending: when it is next tried (ms).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_at: Option<i64>,
}

impl DeliveryView {
    /// `d` as shown, its thread named `thread` (the key as the reader names it).
    pub fn of(d: &Delivery, thread: Option<String>) -> DeliveryView {
        DeliveryView {
            id: d.id,
            channel: d.channel.clone(),
            event: d.event.clone(),
            target: target(&d.channel, &d.target),
            subject: d.subject.clone(),
            thread,
            subscription: d.subscription.clone(),
            recipient: d.recipient.clone(),
            status: d.status.as_str(),
            attempts: d.attempts,
            last_error: d.last_error.clone(),
            created_at: d.created_at,
            finished_at: d.finished_at,
            next_at: (d.status == DeliveryStatus::Pending).then_some(d.next_at),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::target;

    #[test]
    fn a_url_target_is_shown_without_its_secrets() {
        assert_eq!(
            target(
                "webhook",
                "https://user:pw@hooks.example.com:8443/in/x?token=abc#frag"
            ),
            "https://hooks.example.com:8443/…"
        );
        assert_eq!(
            target("a2a_push", "http://127.0.0.1:9/duet?sig=1"),
            "http://127.0.0.1:9/…"
        );
        assert_eq!(
            target("webhook", "https://hooks.slack.com/services/T0/B0/secret"),
            "https://hooks.slack.com/…"
        );
        assert_eq!(
            target("webhook", "https://example.com"),
            "https://example.com/"
        );
        assert_eq!(target("webhook", "not a url"), "(not a URL)");
        assert_eq!(target("email", "ops@example.com"), "ops@example.com");
        assert_eq!(target("slack", "C0OPS"), "C0OPS");
    }
}
