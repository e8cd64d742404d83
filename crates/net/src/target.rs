//! Where a request may go: a URL parsed as the HTTP client parses it, its host resolved once,
//! refused if any address it resolves to is not public, and the addresses kept so the client
//! connects to exactly those (a second lookup could answer otherwise: DNS rebinding).

use std::net::{IpAddr, SocketAddr};

use url::{Host, Url};

use crate::classify::{Refusal, Verdict, classify};

/// A destination that passed the check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The URL as the HTTP client reads it.
    pub url: Url,
    /// The name and the addresses it resolved to, to pin the connection to (reqwest's
    /// `resolve_to_addrs`); `None` for an IP literal, or when private targets are allowed
    /// (nothing was resolved).
    pub pin: Option<Pin>,
}

/// A host name and the checked addresses a connection to it must use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pin {
    /// The host name as the URL has it.
    pub host: String,
    /// Its addresses, every one public, with the URL's port.
    pub addrs: Vec<SocketAddr>,
}

/// Why a destination may not be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TargetError {
    /// The text is not a URL.
    #[error("not a URL: {0}")]
    NotUrl(String),
    /// The scheme is not http or https.
    #[error("scheme `{0}`: use http or https")]
    Scheme(String),
    /// The URL names no host (or no port).
    #[error("no host")]
    NoHost,
    /// The host name did not resolve.
    #[error("cannot resolve `{host}`: {error}")]
    Unresolved {
        /// The name.
        host: String,
        /// What the resolver said.
        error: String,
    },
    /// The host name resolved to no address.
    #[error("`{0}` resolves to nothing")]
    Nothing(String),
    /// The host is, or resolves to, an address that is not public.
    #[error("`{host}` is not a public address: {refusal}")]
    Refused {
        /// The host as the URL has it.
        host: String,
        /// The first address refused, and why.
        refusal: Refusal,
    },
}

/// [`check`] on `url` parsed as the HTTP client will parse it (a `\` or `@` trick reads the
/// same to both).
pub async fn target_allowed(url: &str, allow_private: bool) -> Result<Target, TargetError> {
    let parsed = Url::parse(url).map_err(|e| TargetError::NotUrl(e.to_string()))?;
    check(parsed, allow_private).await
}

/// Whether `url` may be sent to: an http(s) URL with a host; unless `allow_private`, its host
/// an IP literal that is public or a name whose every address is (resolved once, here), the
/// addresses returned to pin the connection to.
pub async fn check(url: Url, allow_private: bool) -> Result<Target, TargetError> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(TargetError::Scheme(url.scheme().to_owned()));
    }
    let port = url.port_or_known_default().ok_or(TargetError::NoHost)?;
    let host = url.host().ok_or(TargetError::NoHost)?;
    if allow_private {
        return Ok(Target { url, pin: None });
    }
    let (name, addrs) = match host {
        Host::Ipv4(ip) => (None, vec![SocketAddr::new(IpAddr::V4(ip), port)]),
        Host::Ipv6(ip) => (None, vec![SocketAddr::new(IpAddr::V6(ip), port)]),
        Host::Domain(d) => {
            let found: Vec<SocketAddr> = tokio::net::lookup_host((d, port))
                .await
                .map_err(|e| TargetError::Unresolved {
                    host: d.to_owned(),
                    error: e.to_string(),
                })?
                .collect();
            (Some(d.to_owned()), found)
        }
    };
    let shown = name.clone().unwrap_or_else(|| host.to_string());
    judge(&shown, &addrs)?;
    Ok(Target {
        pin: name.map(|host| Pin { host, addrs }),
        url,
    })
}

/// Refuses `addrs` (what `host` resolved to) if it is empty or any one of them is not public:
/// a name with one private address among public ones could be connected to at that one.
pub fn judge(host: &str, addrs: &[SocketAddr]) -> Result<(), TargetError> {
    if addrs.is_empty() {
        return Err(TargetError::Nothing(host.to_owned()));
    }
    for a in addrs {
        if let Verdict::Refused(refusal) = classify(a.ip()) {
            return Err(TargetError::Refused {
                host: host.to_owned(),
                refusal,
            });
        }
    }
    Ok(())
}

/// Whether `a` and `b` have one origin (scheme, host, port): where a redirect may go with the
/// credentials and headers of the request it answers.
pub fn same_origin(a: &Url, b: &Url) -> bool {
    a.origin() == b.origin()
}

/// The most redirects one request follows.
pub const MAX_REDIRECTS: usize = 5;

/// Whether a request whose chain so far is `previous` (its own URL first) may follow a redirect
/// to `next`: only within the origin it was sent to, and at most [`MAX_REDIRECTS`] times, so
/// the credentials and headers it carries stay where its sender meant them to go.
pub fn redirect_allowed(previous: &[Url], next: &Url) -> bool {
    previous.len() <= MAX_REDIRECTS && previous.first().is_some_and(|home| same_origin(home, next))
}
