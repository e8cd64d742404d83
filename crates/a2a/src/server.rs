//! The server options of the seed (`agent_card`, `history_length`, `page_size`) and the stack
//! they build, in the seed's order:
//!
//! ```text
//! Env → WellKnown → Bindings::Grpc → Bindings::Rest → Bindings::JsonRpc → SSEStream
//!     → Triage → ExtractMessage → LimitHistoryLength → LimitPaginationSize → Agent
//! ```

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;

use axum::extract::Request;
use axum::response::Response;
use futures::future::BoxFuture;
use tower::util::BoxCloneSyncService;

use super::agent::{self, A2aAgent};
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
        let stack = Stack {
            site: Arc::new(site),
            limits: self.limits,
            agent,
        };
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

/// The stack as one service: each request runs the layers in the seed's order, each handing the
/// request to the next by a plain call (not a tower layer apiece, which also cloned the services
/// below it at every layer of every request).
struct Stack<A> {
    site: Arc<Site>,
    limits: Limits,
    agent: Arc<A>,
}

impl<A> Clone for Stack<A> {
    fn clone(&self) -> Self {
        Stack {
            site: self.site.clone(),
            limits: self.limits,
            agent: self.agent.clone(),
        }
    }
}

impl<A: A2aAgent> Stack<A> {
    /// The layers in the seed's order. Each layer's call of the next is boxed: a layer's
    /// future holds the one below it, so unboxed the stack's future was the sum of all of
    /// theirs (~10 KB), copied whole at each layer as it was built.
    async fn run(self, req: Request) -> Response {
        let Stack {
            site,
            limits,
            agent,
        } = self;
        layers::inject_card(&site, req, |req| {
            boxed(layers::well_known(req, |req| {
                boxed(layers::grpc(req, |req| {
                    boxed(rest::binding(limits, req, |req| {
                        boxed(jsonrpc::binding(limits, req, |req| {
                            boxed(layers::offer_stream(req, |req| {
                                boxed(layers::triage(req, |req| {
                                    boxed(layers::extract_message(req, |req| {
                                        boxed(layers::limit_history(limits, req, |req| {
                                            boxed(layers::limit_page(limits, req, |req| {
                                                boxed(agent::answer(agent, req))
                                            }))
                                        }))
                                    }))
                                }))
                            }))
                        }))
                    }))
                }))
            }))
        })
        .await
    }
}

/// A layer's future, boxed and its type erased (see [`Stack::run`]).
fn boxed<'a>(f: impl Future<Output = Response> + Send + 'a) -> BoxFuture<'a, Response> {
    Box::pin(f)
}

impl<A: A2aAgent> tower::Service<Request> for Stack<A> {
    type Response = Response;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response, Infallible>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Infallible>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request) -> Self::Future {
        let stack = self.clone();
        Box::pin(async move { Ok(stack.run(req).await) })
    }
}

impl A2aService {
    /// The service as a router (for `axum::serve`, or to merge).
    pub fn into_router(self) -> axum::Router {
        axum::Router::new().fallback_service(self)
    }
}
