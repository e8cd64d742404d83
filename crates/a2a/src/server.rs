//! The server options of the seed (`agent_card`, `history_length`, `page_size`) and the stack
//! they build, in the seed's order:
//!
//! ```text
//! Env → WellKnown → Bindings::Grpc → Bindings::Rest → Bindings::JsonRpc → SSEStream
//!     → Triage → ExtractMessage → LimitHistoryLength → LimitPaginationSize → Agent
//! ```

use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::Request;
use axum::middleware::{from_fn, from_fn_with_state};
use axum::response::Response;
use tower::ServiceBuilder;
use tower::util::BoxCloneSyncService;

use super::agent::{A2aAgent, AgentService};
use super::bindings::{jsonrpc, rest};
use super::card::AgentCard;
use super::config::{Limits, Site};
use super::layers;

/// The server cap of `historyLength` and page sizes when none is configured.
pub const DEFAULT_CAP: usize = 100;
/// The largest request body read (1 MiB).
pub const DEFAULT_BODY_LIMIT: usize = 1 << 20;

/// An A2A server for one agent: `A2aServer::new(card).history_length(50).agent(MyAgent)`.
#[derive(Debug, Clone)]
pub struct A2aServer {
    card: AgentCard,
    limits: Limits,
    public_url: Option<Arc<str>>,
    trust_forwarded: bool,
    listener: Option<Arc<str>>,
}

impl A2aServer {
    /// A server for the agent `card` describes, with the default caps.
    pub fn new(card: AgentCard) -> Self {
        Self {
            card,
            limits: Limits {
                history_length: DEFAULT_CAP,
                page_size: DEFAULT_CAP,
                body: DEFAULT_BODY_LIMIT,
            },
            public_url: None,
            trust_forwarded: false,
            listener: None,
        }
    }

    /// The server cap of `historyLength`.
    pub fn history_length(mut self, cap: usize) -> Self {
        self.limits.history_length = cap;
        self
    }

    /// The server cap of page sizes (at least 1).
    pub fn page_size(mut self, cap: usize) -> Self {
        self.limits.page_size = cap.max(1);
        self
    }

    /// The largest request body, in bytes.
    pub fn body_limit(mut self, bytes: usize) -> Self {
        self.limits.body = bytes;
        self
    }

    /// The URL clients reach this server at (`https://agents.example.com`), for the card's
    /// interface URLs: the same card for every request, cacheable by anyone. Without it they
    /// come from the request's `Host` when it names a loopback host, else from
    /// [`Self::listener`] (or the forwarded headers, when [`Self::trust_forwarded`]).
    pub fn public_url(mut self, url: impl Into<String>) -> Self {
        self.public_url = Some(Arc::from(url.into()));
        self
    }

    /// Whether `X-Forwarded-Proto` and `X-Forwarded-Host` name the origin the client reached
    /// (set only behind a proxy that sets them, and strips a client's own): off by default,
    /// since any client can send them.
    pub fn trust_forwarded(mut self, trust: bool) -> Self {
        self.trust_forwarded = trust;
        self
    }

    /// The server's own origin (`http://10.0.0.5:8787`, its listener): the card's root when
    /// no public URL is configured and the request's `Host` is not a loopback name.
    pub fn listener(mut self, origin: impl Into<String>) -> Self {
        self.listener = Some(Arc::from(origin.into()));
        self
    }

    /// The whole stack around `agent`, as one service to mount (`Router::nest_service`) or
    /// serve.
    pub fn agent<A: A2aAgent>(self, agent: A) -> A2aService {
        self.agent_arc(Arc::new(agent))
    }

    /// [`Self::agent`] for an agent already shared.
    pub fn agent_arc<A: A2aAgent>(self, agent: Arc<A>) -> A2aService {
        let site = Site {
            card: Arc::new(self.card),
            public_url: self.public_url,
            trust_forwarded: self.trust_forwarded,
            listener: self.listener,
            since: chrono::Utc::now(),
            last: Arc::default(),
        };
        let limits = self.limits;
        let stack = ServiceBuilder::new()
            .layer(from_fn_with_state(site, layers::inject_card))
            .layer(from_fn(layers::well_known))
            .layer(from_fn(layers::grpc))
            .layer(from_fn_with_state(limits, rest::binding))
            .layer(from_fn_with_state(limits, jsonrpc::binding))
            .layer(from_fn(layers::offer_stream))
            .layer(from_fn(layers::triage))
            .layer(from_fn(layers::extract_message))
            .layer(from_fn_with_state(limits, layers::limit_history))
            .layer(from_fn_with_state(limits, layers::limit_page))
            .service(AgentService::new(agent));
        A2aService(BoxCloneSyncService::new(stack))
    }
}

/// The stack as one cloneable service of HTTP requests.
#[derive(Clone)]
pub struct A2aService(BoxCloneSyncService<Request, Response, Infallible>);

impl tower::Service<Request> for A2aService {
    type Response = Response;
    type Error = Infallible;
    type Future =
        <BoxCloneSyncService<Request, Response, Infallible> as tower::Service<Request>>::Future;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Infallible>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        self.0.call(req)
    }
}

impl A2aService {
    /// The service as a router (for `axum::serve`, or to merge).
    pub fn into_router(self) -> axum::Router {
        axum::Router::new().fallback_service(self)
    }
}
