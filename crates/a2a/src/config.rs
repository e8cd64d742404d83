//! What the stack's layers and bindings are built with: the caps ([`Limits`]) and where the
//! agent is ([`Site`]). `A2aServer` (`server.rs`) makes them; the layers and the bindings read
//! them. They import this module and it imports none of theirs, so no circle.

use std::sync::Arc;

use axum::extract::{OriginalUri, Request};

use super::card::AgentCard;

/// The caps the limit layers and the bindings apply.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub history_length: usize,
    pub page_size: usize,
    pub body: usize,
}

/// The card, and where the agent is reached from outside.
#[derive(Debug, Clone)]
pub(crate) struct Site {
    pub card: Arc<AgentCard>,
    pub public_url: Option<Arc<str>>,
    /// When the card was made (its `Last-Modified`).
    pub since: chrono::DateTime<chrono::Utc>,
}

impl Site {
    /// The server's root as the client reaches it — the public URL if one is configured, else
    /// the scheme and host of the request (`X-Forwarded-*` honoured) — and the URL the agent is
    /// mounted at (the root, then the path the service is nested under).
    pub(crate) fn urls(&self, req: &Request) -> (String, String) {
        let inner = req.uri().path();
        let outer = req
            .extensions()
            .get::<OriginalUri>()
            .map_or(inner, |o| o.0.path());
        let mount = if inner == "/" {
            outer.trim_end_matches('/')
        } else {
            outer.strip_suffix(inner).unwrap_or("")
        };
        let origin = match &self.public_url {
            Some(url) => url.trim_end_matches('/').to_owned(),
            None => {
                let header = |name: &str| {
                    req.headers()
                        .get(name)
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.split(',').next())
                        .map(|v| v.trim().to_owned())
                };
                let scheme = header("x-forwarded-proto").unwrap_or_else(|| "http".into());
                let host = header("x-forwarded-host")
                    .or_else(|| header("host"))
                    .or_else(|| req.uri().authority().map(ToString::to_string))
                    .unwrap_or_else(|| "localhost".into());
                format!("{scheme}://{host}")
            }
        };
        let base = format!("{origin}{mount}");
        (origin, base)
    }
}
