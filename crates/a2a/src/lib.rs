//! A2A 1.0 as a library: write an A2A agent the way the seed's `A2A.agent` describes. The
//! [`A2aServer`] takes the seed's options (the agent card, the `historyLength` and page-size
//! caps) and wraps an [`A2aAgent`] in the seed's middleware stack (one tower service, each layer
//! a function handing the request to the next): the card,
//! the well-known route, a reserved gRPC path, the HTTP+JSON binding under `/rest`, JSON-RPC
//! everywhere else, the stream offer, triage, message extraction and the two limits. So a
//! handler sees only validated requests, and every error is written per binding with its
//! `google.rpc.ErrorInfo`.
//!
//! ```no_run
//! use duet_a2a::*;
//!
//! struct Echo;
//! impl A2aAgent for Echo {
//!     async fn send_message(&self, req: SendMessageRequest, cx: Context) -> Handled<SendMessageResponse> {
//!         let text = cx.message.unwrap_or_default();
//!         Ok(SendMessageResponse::Message(Message::agent_text(format!("{}-echo", req.message.message_id), text)))
//!     }
//! }
//! let service = A2aServer::new(AgentCard::new("echo", "says it back")).agent(Echo);
//! # let _ = service;
//! ```
//!
//! The crate's `README.md` has a whole echo agent, served with axum, and the error table; its
//! snippet is compiled as a doctest (the private `readme` module below).

mod agent;
mod bindings;
mod card;
mod client;
mod config;
mod env;
mod error;
mod layers;
mod operation;
mod requests;
mod server;
mod stream;
mod types;

/// The README's snippet, compiled with the doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
mod readme {}

/// The guide's snippet (`docs/a2a.md`), compiled with the doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/a2a.md")]
mod guide {}

pub use agent::{A2aAgent, AgentFn, Context, Handled};
pub use card::{
    AgentCapabilities, AgentCard, AgentExtension, AgentInterface, AgentProvider, AgentSkill,
    HTTP_JSON, JSONRPC, PROTOCOL_VERSION,
};
pub use client::{A2aClient, ClientError};
pub use error::{A2aError, ERROR_DOMAIN, ErrorKind};
pub use layers::WELL_KNOWN;
pub use operation::{OPERATIONS, Operation, Reply};
pub use requests::*;
pub use server::{A2aServer, A2aService, DEFAULT_BODY_LIMIT, DEFAULT_CAP};
pub use stream::{Stream, StreamBuilder, StreamSink};
pub use types::*;
