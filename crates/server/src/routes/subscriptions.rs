//! `/notifications/subscriptions`: a principal's own subscriptions — a webhook, a Slack channel
//! or an email address that hears of the events on its threads and of the questions it may
//! decide (`notify/recipients.rs`) — made, listed and deleted over the API. A webhook's signing
//! secret is shown once, when it is made. (The project's own subscriptions are definitions
//! under `agents/notifications/`, not these.)

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use duet_server_store::Subscription;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::auth::Caller;
use crate::body::{Json, Path, Query};
use crate::notify::Event;
use crate::notify::shown;
use crate::problem::Problem;
use crate::service::notify;
use crate::state::AppState;

/// The longest target taken, in bytes.
const MAX_TARGET: usize = 2048;

/// A new subscription.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NewSubscription {
    /// `webhook`, `slack` or `email`.
    pub channel: String,
    /// A webhook's http(s) URL, a Slack channel's id (or name), an email address.
    pub target: String,
    /// The events it hears of (`question.parked`, …); none or absent: every event.
    #[serde(default)]
    pub events: Vec<String>,
    /// Only the threads of these agents; none or absent: every agent's.
    #[serde(default)]
    pub agents: Vec<String>,
}

/// A principal's subscription.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SubscriptionView {
    /// Its id.
    pub id: String,
    /// Whose it is (the principal's subject).
    pub principal: String,
    /// `webhook`, `slack` or `email`.
    pub channel: String,
    /// Where it goes (a URL without its userinfo and query).
    pub target: String,
    /// The events it hears of (empty: every event).
    pub events: Vec<String>,
    /// The agents whose threads it hears of (empty: every agent's).
    pub agents: Vec<String>,
    /// When it was made (ms since the Unix epoch).
    pub created_at: i64,
    /// A webhook's signing secret (`whsec_…`, Standard Webhooks): in the answer that made it,
    /// and never again.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}

impl SubscriptionView {
    fn of(s: &Subscription, secret: Option<String>) -> SubscriptionView {
        let list = |json: &str| serde_json::from_str::<Vec<String>>(json).unwrap_or_default();
        SubscriptionView {
            id: s.id.clone(),
            principal: s.principal.clone(),
            channel: s.channel.clone(),
            target: shown::target(&s.channel, &s.target),
            events: list(&s.events),
            agents: list(&s.agents),
            created_at: s.created_at,
            secret,
        }
    }
}

/// Subscriptions.
#[derive(Serialize, ToSchema)]
pub(crate) struct SubscriptionList {
    /// Oldest first.
    pub items: Vec<SubscriptionView>,
}

/// Whose subscriptions to list.
#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListQuery {
    /// `true`: every principal's (an admin's only).
    #[serde(default)]
    pub all: bool,
}

fn refused(code: &'static str, detail: impl Into<String>) -> Problem {
    Problem::unprocessable(code, detail)
}

/// The caller's principal, or why it has none to subscribe as.
fn principal(caller: &Caller) -> Result<String, Problem> {
    caller
        .principal
        .as_ref()
        .map(|p| p.subject.clone())
        .ok_or_else(|| {
            refused(
                "no_principal",
                "a subscription is a principal's, and this caller is none (the server runs \
             without auth): define the project's subscriptions under agents/notifications/",
            )
        })
}

/// Whether `c` is a Slack channel's id or name: letters, digits, `-`, `_` and `.`, 1–80 of them
/// (a leading `#` allowed).
fn slack_channel(c: &str) -> bool {
    let name = c.strip_prefix('#').unwrap_or(c);
    (1..=80).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// Checks `target` for `channel` as the sender will use it.
async fn check_target(state: &AppState, channel: &str, target: &str) -> Result<(), Problem> {
    if target.trim().is_empty() || target.len() > MAX_TARGET {
        return Err(refused(
            "invalid_target",
            format!("`target` is 1–{MAX_TARGET} bytes"),
        ));
    }
    crate::input::text("target", target)?;
    match channel {
        "webhook" => {
            let allow = state.options().allow_private_push;
            match duet_net::target_allowed(target, allow).await {
                Ok(_) => Ok(()),
                Err(e @ duet_net::TargetError::Refused { .. }) => Err(refused(
                    "private_target",
                    format!(
                        "`target` cannot be sent to: {e} (the server allows private targets \
                         only with --allow-private-push)"
                    ),
                )),
                Err(e) => Err(refused(
                    "invalid_target",
                    format!("`target` is not a webhook URL this server can send to: {e}"),
                )),
            }
        }
        "email" => target.parse::<lettre::Address>().map(|_| ()).map_err(|e| {
            refused(
                "invalid_target",
                format!("`target` is not an email address ({e}): `{target}`"),
            )
        }),
        _ => match slack_channel(target) {
            true => Ok(()),
            false => Err(refused(
                "invalid_target",
                format!("`target` is a Slack channel's id (`C0123ABCD`) or name, not `{target}`"),
            )),
        },
    }
}

/// `events` checked and without repeats.
fn events(names: &[String]) -> Result<Vec<String>, Problem> {
    let mut out: Vec<String> = Vec::new();
    for name in names {
        if Event::parse(name).is_none() {
            let known: Vec<&str> = Event::ALL.iter().map(|e| e.as_str()).collect();
            return Err(refused(
                "unknown_event",
                format!("no event `{name}`: events are {}", known.join(", ")),
            )
            .with("field", "events".into()));
        }
        if !out.contains(name) {
            out.push(name.clone());
        }
    }
    Ok(out)
}

/// `agents` checked against the project and without repeats.
fn agents(state: &AppState, names: &[String]) -> Result<Vec<String>, Problem> {
    let project = state.runtime().project();
    let mut out: Vec<String> = Vec::new();
    for name in names {
        if !project.agents.contains_key(name) {
            return Err(
                refused("unknown_agent", crate::problem::no_agent(project, name))
                    .with("field", "agents".into()),
            );
        }
        if !out.contains(name) {
            out.push(name.clone());
        }
    }
    Ok(out)
}

/// A webhook's new signing secret: `whsec_` and 32 random bytes in base64.
fn new_secret() -> Result<String, Problem> {
    let mut key = [0u8; 32];
    getrandom::fill(&mut key).map_err(|e| Problem::internal(&e))?;
    Ok(format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode(key)
    ))
}

/// Subscribes the caller's principal: the events on its threads, and on the questions it may
/// decide (with one-time links where it may), reach `target` on `channel`. A webhook's target
/// is checked as the sender checks it (a private address refused unless the server allows
/// them); its signing secret is in this answer only.
#[utoipa::path(post, path = "/notifications/subscriptions", tag = "notifications",
    request_body = NewSubscription,
    responses((status = 201, description = "Made; a webhook's `secret` shown this once", body = SubscriptionView),
        (status = 400, description = "A body that is not a subscription", body = crate::problem::ProblemBody),
        (status = 422, description = "`invalid_channel`, `invalid_target`, `private_target`, `unknown_event`, `unknown_agent`, or `no_principal` (a server without auth)", body = crate::problem::ProblemBody)))]
pub(crate) async fn create(
    State(state): State<AppState>,
    caller: Caller,
    Json(body): Json<NewSubscription>,
) -> Result<Response, Problem> {
    let principal = principal(&caller)?;
    let channel = body.channel.as_str();
    if !matches!(channel, "webhook" | "slack" | "email") {
        return Err(refused(
            "invalid_channel",
            format!("channel `{channel}`: use `webhook`, `slack` or `email`"),
        )
        .with("field", "channel".into()));
    }
    check_target(&state, channel, &body.target)
        .await
        .map_err(|p| p.with("field", "target".into()))?;
    let events = events(&body.events)?;
    let agents = agents(&state, &body.agents)?;
    let secret = match channel {
        "webhook" => Some(new_secret()?),
        _ => None,
    };
    let s = Subscription {
        id: uuid::Uuid::now_v7().to_string(),
        principal,
        channel: body.channel.clone(),
        target: body.target,
        events: serde_json::Value::from(events).to_string(),
        agents: serde_json::Value::from(agents).to_string(),
        secret: secret.clone(),
        created_at: state.runtime().now_ms(),
    };
    notify::subscribe(&state, &s).await?;
    Ok((
        StatusCode::CREATED,
        axum::Json(SubscriptionView::of(&s, secret)),
    )
        .into_response())
}

/// The caller's subscriptions (`?all=true`, an admin: every principal's), oldest first.
#[utoipa::path(get, path = "/notifications/subscriptions", tag = "notifications",
    params(ListQuery),
    responses((status = 200, description = "Subscriptions", body = SubscriptionList),
        (status = 403, description = "`all` asked by a caller that is not an admin", body = crate::problem::ProblemBody),
        (status = 422, description = "`no_principal`: a server without auth has none of its own (ask `all`)", body = crate::problem::ProblemBody)))]
pub(crate) async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Query(q): Query<ListQuery>,
) -> Result<axum::Json<SubscriptionList>, Problem> {
    let whose = match (q.all, caller.admin) {
        (true, true) => None,
        (true, false) => {
            return Err(Problem::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                "every principal's subscriptions are an admin's to list",
            ));
        }
        (false, _) => Some(principal(&caller)?),
    };
    let items = notify::subscriptions(&state, whose.as_deref())
        .await?
        .iter()
        .map(|s| SubscriptionView::of(s, None))
        .collect();
    Ok(axum::Json(SubscriptionList { items }))
}

/// Deletes one of the caller's subscriptions (an admin: anyone's). Deliveries it made stay.
#[utoipa::path(delete, path = "/notifications/subscriptions/{id}", tag = "notifications",
    params(("id" = String, Path, description = "The subscription's id")),
    responses((status = 204, description = "Deleted"),
        (status = 404, description = "No such subscription of the caller's", body = crate::problem::ProblemBody)))]
pub(crate) async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    let whose = match caller.admin {
        true => None,
        false => Some(principal(&caller)?),
    };
    match notify::unsubscribe(&state, whose.as_deref(), &id).await? {
        true => Ok(StatusCode::NO_CONTENT.into_response()),
        false => Err(Problem::not_found(format!("no subscription `{id}`"))),
    }
}
