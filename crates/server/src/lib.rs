//! The duet server: the REST + SSE API for threads, messages, approvals and events, the Agent
//! Handler protocol over HTTP (`/invoke`), API-key auth with one key space per principal, and
//! graceful shutdown and periodic recovery for running several processes on one Postgres.
//! The approval inbox's web pages (`/inbox`) are served from the same state. It is the only
//! crate that knows HTTP; [`serve`] is what `duet serve` runs.
//!
//! Every error is `application/problem+json` ([`Problem`]); the OpenAPI 3.1 document is served
//! at `/openapi.json`, generated from the handlers ([`openapi`]).

mod a2a_agents;
pub mod auth;
mod body;
mod conn;
mod inbox;
mod input;
pub mod metrics;
mod notify;
#[doc(hidden)]
pub mod notify_testing;
mod problem;
mod router;
mod routes;
mod serve;
mod service;
mod state;
mod views;

pub use a2a_agents::remote_agents;
pub use conn::default_max_connections;
/// The A2A library (the `duet-a2a` crate), still reachable as `duet_server::a2a`:
///
/// ```
/// use duet_server::a2a::{A2aServer, AgentCard};
///
/// let _server = A2aServer::new(AgentCard::new("echo", "says it back"));
/// ```
pub use duet_a2a as a2a;
pub use notify::shown::{DeliveryView, target as notification_target};
pub use problem::{PROBLEM_JSON, Problem};
pub use router::{openapi, router};
pub use serve::{Background, serve, shutdown_signal};
pub use service::health::check_writable;
pub use state::{AppState, Env, Options, SlackOptions};
pub use views::ApprovalId;

/// Checking what duet's notifications carry, as their receivers do: a webhook's Standard
/// Webhooks signature ([`signatures::verify`]), and a Slack request's signature
/// ([`signatures::verify_slack`], what `POST /slack/interactions` checks).
pub mod signatures {
    pub use crate::notify::slack::{SlackAuthError, verify_signature as verify_slack};
    pub use crate::notify::webhook::{Signed, TOLERANCE_S, WebhookError, sign, verify};
}
