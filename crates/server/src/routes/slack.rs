//! `POST /slack/interactions`: Slack's interactivity endpoint. A click on a notification's
//! Approve or Reject button answers the question as following the one-time link its `value`
//! carries would (`notify::links::follow`), on behalf of `slack:{user id}`. No API key: Slack's
//! request signature (`SLACK_SIGNING_SECRET`) is the request's authentication, checked on the
//! raw body before anything is read from it (`401` when it fails or is over 5 minutes old,
//! `400` for a body that is no click). Slack is answered `200` with an empty body, whatever the
//! click came to: a refused one (clicked twice, answered by someone else, expired) is told to the
//! one who clicked in an ephemeral message, sent through the outbox; the original message is
//! updated by the router when it routes the answer.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use duet_server_store::NewDelivery;

use crate::notify::links;
use crate::notify::slack::inbound::{Click, parse_click};
use crate::notify::slack::{self, SlackAuthError};
use crate::problem::Problem;
use crate::state::AppState;

/// The endpoint.
pub(crate) async fn interactions(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(secret) = state.options().slack.signing_secret.as_deref() else {
        return Problem::not_found(
            "Slack interactivity is not set up on this server (SLACK_SIGNING_SECRET is not set)",
        )
        .into_response();
    };
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    };
    let now_s = state.runtime().now_ms().div_euclid(1000);
    if let Err(why) = slack::verify_signature(
        secret,
        header("x-slack-request-timestamp"),
        &body,
        header("x-slack-signature"),
        now_s,
    ) {
        let code = match why {
            SlackAuthError::Stale => "stale_request",
            SlackAuthError::Missing(_) => "missing_signature",
            SlackAuthError::Malformed(_) | SlackAuthError::BadSignature => "bad_signature",
        };
        return Problem::new(StatusCode::UNAUTHORIZED, code, why.to_string()).into_response();
    }
    let click = match parse_click(&body) {
        Ok(click) => click,
        Err(why) => return Problem::bad_request("bad_payload", why).into_response(),
    };
    apply(&state, &click).await;
    StatusCode::OK.into_response()
}

/// Applies a click on Approve or Reject (any other button, the inbox's link among them, has
/// nothing to apply), and tells the one who clicked when it was refused.
async fn apply(state: &AppState, click: &Click) {
    let handle = click.username.as_deref().unwrap_or(&click.user_id);
    let reason = match click.action_id.as_str() {
        "approve" => None,
        "reject" => Some(format!("rejected in Slack by @{handle}")),
        _ => return,
    };
    let Some(token) = click.value.as_deref().filter(|t| !t.is_empty()) else {
        tell(state, click, "This button carries no answer.").await;
        return;
    };
    let by = format!("slack:{}", click.user_id);
    if let Err(refused) = links::follow(state, token, &by, reason.as_deref()).await {
        tell(state, click, &refused.sentence()).await;
    }
}

/// Tells the one who clicked `text`, in the click's channel, seen by them only
/// (`chat.postEphemeral`, through the outbox).
async fn tell(state: &AppState, click: &Click, text: &str) {
    let Some(channel) = click.channel.as_deref() else {
        tracing::info!(user = %click.user_id, why = text, "slack: a click was refused, and there is no channel to say so in");
        return;
    };
    let now = state.runtime().now_ms();
    let delivery = NewDelivery {
        channel: "slack".to_owned(),
        stream: format!("slack:ephemeral:{channel}"),
        target: channel.to_owned(),
        event: "slack.ephemeral".to_owned(),
        recipient: Some(format!("slack:{}", click.user_id)),
        body: slack::render_ephemeral(channel, &click.user_id, text),
        meta: Some(slack::meta("chat.postEphemeral")),
        idempotency_key: format!("slack-ephemeral-{}", uuid::Uuid::now_v7()),
        due_at: now,
        ..NewDelivery::default()
    };
    match crate::service::notify::enqueue(state, &[delivery]).await {
        Ok(_) => state.notify_wake(),
        Err(e) => {
            tracing::warn!(error = %e, user = %click.user_id, "slack: cannot queue the message saying why a click was refused");
        }
    }
}
