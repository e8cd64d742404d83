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
    /// Whether `X-Forwarded-Proto` and `X-Forwarded-Host` are a proxy's word (configured).
    pub trust_forwarded: bool,
    /// The server's own origin (its listener, `http://10.0.0.5:8787`): the card's root for a
    /// request whose `Host` is not a loopback name, when nothing better is configured.
    pub listener: Option<Arc<str>>,
    /// When the card was made (its `Last-Modified`).
    pub since: chrono::DateTime<chrono::Utc>,
    /// The card last resolved, with the URLs it was resolved at: the requests of one client
    /// (one `Host`) share it rather than each copying the card.
    pub last: Arc<std::sync::Mutex<Option<Resolved>>>,
}

/// A card resolved at a mount URL and a root.
#[derive(Debug)]
pub(crate) struct Resolved {
    base: String,
    root: String,
    card: Arc<AgentCard>,
}

/// What a card's URLs were built from, so its response says what it varies with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Depends {
    /// The configured public URL: the same card for every request.
    Nothing,
    /// The request's `Host`.
    Host,
    /// The `X-Forwarded-*` headers (trusted), else the `Host`.
    Forwarded,
}

impl Depends {
    /// The `Vary` header of a card built this way.
    pub(crate) fn vary(self) -> Option<&'static str> {
        match self {
            Depends::Nothing => None,
            Depends::Host => Some("Host"),
            Depends::Forwarded => Some("Host, X-Forwarded-Host, X-Forwarded-Proto"),
        }
    }
}

impl Site {
    /// The card with its URLs made absolute at `base` and `root` ([`AgentCard::resolved`]),
    /// the last one again when those are the same.
    pub(crate) fn resolved(&self, base: &str, root: &str) -> Arc<AgentCard> {
        let mut last = self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(r) = last.as_ref()
            && r.base == base
            && r.root == root
        {
            return r.card.clone();
        }
        let card = Arc::new(self.card.resolved(base, root));
        *last = Some(Resolved {
            base: base.to_owned(),
            root: root.to_owned(),
            card: card.clone(),
        });
        card
    }

    /// The server's root as the client reaches it, the URL the agent is mounted at (the root,
    /// then the path the service is nested under), and what the root was built from. The root
    /// is the public URL if one is configured; else, with forwarded headers trusted, the scheme
    /// and host a proxy forwarded (or the `Host`); else the `Host` when it names a loopback
    /// host, and the listener's own origin when it does not — never a name only the request
    /// says, which a shared cache would hand to everyone.
    pub(crate) fn urls(&self, req: &Request) -> (String, String, Depends) {
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
        let header = |name: &str| {
            req.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.split(',').next())
                .map(|v| v.trim().to_owned())
        };
        // Only a bare authority: a header that adds a path or user info is none.
        let host = |name: &str| header(name).filter(|h| duet_net::authority_host(h).is_some());
        let request_host = host("host")
            .or_else(|| req.uri().authority().map(ToString::to_string))
            .filter(|h| duet_net::authority_host(h).is_some());
        let (origin, depends) = match &self.public_url {
            Some(url) => (url.trim_end_matches('/').to_owned(), Depends::Nothing),
            None if self.trust_forwarded => {
                let scheme = header("x-forwarded-proto")
                    .map(|p| p.to_ascii_lowercase())
                    .filter(|p| p == "http" || p == "https")
                    .unwrap_or_else(|| "http".into());
                let host = host("x-forwarded-host")
                    .or(request_host)
                    .unwrap_or_else(|| "localhost".into());
                (format!("{scheme}://{host}"), Depends::Forwarded)
            }
            None => {
                let origin = match (request_host, &self.listener) {
                    (Some(h), _) if duet_net::is_loopback_authority(&h) => format!("http://{h}"),
                    (_, Some(listener)) => listener.trim_end_matches('/').to_owned(),
                    (_, None) => "http://localhost".to_owned(),
                };
                (origin, Depends::Host)
            }
        };
        let base = format!("{origin}{mount}");
        (origin, base, depends)
    }
}
