//! The outbox's sender, in every server process: claims what is due (a stream's oldest
//! undelivered row only, so each stream arrives in order), sends each by its channel — A2A
//! push, a signed webhook, a Slack message, an email — and records how it went: delivered
//! (with what the target answered, when the channel needs it later), or failed and due again
//! after a backoff, or given up on after its last attempt (or at once, for a permanent refusal)
//! and kept `failed` with its last error until `retry`.

use std::time::Duration;

use duet_server_store::Delivery;

use super::email::Smtp;
use crate::service;
use crate::state::AppState;

/// How long a claimed delivery is ours before another sender may take it.
const CLAIM_MS: i64 = 30_000;
/// Deliveries sent per claim.
const BATCH: usize = 16;
/// Failures before a delivery is given up on.
pub(crate) const MAX_ATTEMPTS: i64 = 10;

/// What every send needs, built once.
struct Senders {
    http: reqwest::Client,
    smtp: Result<Option<Smtp>, String>,
}

/// Sends what is due whenever something was queued here (and every recovery period, for
/// retries and other processes' rows), until the server closes.
pub(crate) async fn run(state: AppState) {
    let every = state.options().recover_every.max(Duration::from_millis(50));
    let closing = state.closing().clone();
    let http = match super::http::client() {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "notification sender: no HTTP client; nothing is sent");
            return;
        }
    };
    let env = state.options().env.clone();
    let senders = Senders {
        http,
        smtp: Smtp::from_vars(|name| env.var(name)),
    };
    if let Err(e) = &senders.smtp {
        tracing::error!(error = %e, "notification sender: DUET_SMTP_URL is unusable; emails fail until it is fixed");
    }
    loop {
        loop {
            let now = state.runtime().now_ms();
            let due = match service::notify::claim(&state, now, CLAIM_MS, BATCH).await {
                Ok(d) => d,
                Err(e) => {
                    tracing::warn!(error = %e, "notification sender: cannot read the outbox");
                    break;
                }
            };
            if due.is_empty() {
                break;
            }
            // At once: one slow target holds up no other, and the batch ends well inside its
            // claim (every send is bounded by TIMEOUT).
            futures::future::join_all(due.into_iter().map(|d| deliver(&state, &senders, d))).await;
        }
        tokio::select! {
            () = closing.cancelled() => return,
            () = state.push_woken() => {}
            () = tokio::time::sleep(every) => {}
        }
    }
}

/// Sends delivery `d` by its channel.
async fn send(state: &AppState, s: &Senders, d: &Delivery) -> Result<Option<String>, String> {
    let allow_private = state.options().allow_private_push;
    match d.channel.as_str() {
        "a2a_push" => crate::a2a_agents::notify::send_push(&s.http, allow_private, d)
            .await
            .map(|()| None),
        "webhook" => {
            let now_s = state.runtime().now_ms() / 1_000;
            super::webhook::send(&s.http, allow_private, &state.options().env, d, now_s).await
        }
        "slack" => {
            let slack = &state.options().slack;
            let resolved;
            let d = match super::slack::awaits_post(d) {
                Some(post) => {
                    let found = service::notify::stored_delivery(state, post)
                        .await
                        .map_err(|e| e.to_string())?;
                    resolved = super::slack::with_posted_ts(d, post, found.as_ref())?;
                    &resolved
                }
                None => d,
            };
            super::slack::send(&s.http, &slack.api_url, slack.bot_token.as_deref(), d).await
        }
        "email" => match &s.smtp {
            Ok(Some(smtp)) => super::email::send(smtp, d).await,
            Ok(None) => Err(super::email::UNCONFIGURED.to_owned()),
            Err(e) => Err(format!("DUET_SMTP_URL: {e}")),
        },
        other => Err(format!("permanent: no sender for channel `{other}`")),
    }
}

/// Sends one delivery and records how it went.
async fn deliver(state: &AppState, s: &Senders, d: Delivery) {
    let outcome = send(state, s, &d).await;
    let recorded = match outcome {
        Ok(response) => {
            let metrics = &state.options().metrics;
            metrics.add(
                "duet_notifications_sent_total",
                &[("channel", &d.channel), ("outcome", "delivered")],
                1.0,
            );
            // Milliseconds to seconds: exact far past any real wait.
            #[allow(clippy::cast_precision_loss)]
            let late = (state.runtime().now_ms() - d.created_at).max(0) as f64 / 1000.0;
            metrics.observe(
                "duet_notification_latency_seconds",
                &[("channel", &d.channel)],
                late,
            );
            service::notify::delivered(state, d.id, response.as_deref()).await
        }
        Err(error) => {
            let attempts = d.attempts + 1;
            let permanent = error.starts_with("permanent:");
            let now = state.runtime().now_ms();
            let next = (!permanent && attempts < MAX_ATTEMPTS).then(|| now + backoff_ms(attempts));
            if next.is_none() {
                count(state, &d, "failed");
                tracing::warn!(delivery = d.id, channel = %d.channel, target = %super::shown::target(&d.channel, &d.target), error = %error, attempts, "notification given up on");
            } else {
                count(state, &d, "retry");
                tracing::info!(delivery = d.id, channel = %d.channel, target = %super::shown::target(&d.channel, &d.target), error = %error, attempts, "notification failed; retrying");
            }
            service::notify::failed(state, d.id, next, &error).await
        }
    };
    if let Err(e) = recorded {
        tracing::warn!(error = %e, "notification sender: cannot record a delivery (it will be sent again)");
    }
}

fn count(state: &AppState, d: &Delivery, outcome: &str) {
    state.options().metrics.add(
        "duet_notifications_sent_total",
        &[("channel", &d.channel), ("outcome", outcome)],
        1.0,
    );
}

/// The wait before attempt `n + 1`: 1 s, doubling, at most 5 min.
pub(crate) fn backoff_ms(n: i64) -> i64 {
    let exp = u32::try_from(n.saturating_sub(1).clamp(0, 20)).unwrap_or(20);
    (1_000i64 << exp).min(300_000)
}

#[cfg(test)]
mod tests {
    #[test]
    fn backoff_doubles_to_a_ceiling() {
        let waits: Vec<i64> = (1..=11).map(super::backoff_ms).collect();
        assert_eq!(&waits[..4], [1_000, 2_000, 4_000, 8_000]);
        assert_eq!(waits[10], 300_000);
    }
}
