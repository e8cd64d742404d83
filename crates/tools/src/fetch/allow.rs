//! Where code's `fetch` may go: the project's allowlist (`agents/code.yaml` `fetch.allow`) and
//! the private-address guard, decided without touching the network.
//!
//! - An entry is `host` or `host:port`: a name (`api.example.com`, any case, IDNA as a URL
//!   reads it), `*.name` (every name under it, not the name itself), an IPv4 address or a
//!   bracketed IPv6 one (`[::1]`). Without a port an entry admits every port.
//! - A host on the list must still be public ([`duet_net::classify`]): a name every address of
//!   which is public (resolved once by the caller, who pins the connection to those addresses),
//!   an IP literal that is public. The one exception is an entry that is an IP literal *with a
//!   port* (`127.0.0.1:8080`, `[::1]:9000`): it grants exactly that address and port, private
//!   or not — how a project reaches a service on its own machine. A name is never such a grant,
//!   `localhost` included: what it resolves to can change under it (DNS rebinding).

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use url::{Host, Url};

use super::text::Shown;

/// Where the project's configuration says the list lives, for messages.
const WHERE: &str = "agents/code.yaml `fetch.allow`";

/// How many entries a refusal lists before saying how many more there are.
const LISTED: usize = 8;

/// The host part of an entry.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Pattern {
    /// Exactly this name (lower case, IDNA, no trailing dot).
    Name(String),
    /// Every name ending in `.` + this one.
    Under(String),
    /// This address.
    Ip(IpAddr),
}

/// One entry of the list.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    pattern: Pattern,
    port: Option<u16>,
    /// As written, for messages.
    text: String,
}

impl Entry {
    fn parse(text: &str) -> Result<Entry, String> {
        let bad = |why: &str| format!("{WHERE} entry `{text}` is not `host` or `host:port`: {why}");
        let t = text.trim();
        if t.is_empty() {
            return Err(bad("it is empty"));
        }
        if t.contains("://")
            || t.contains(['/', '@', '?', '#', '\\'])
            || t.contains(char::is_whitespace)
        {
            return Err(bad(
                "write the host alone, without scheme, path or credentials",
            ));
        }
        let (host, port) = split_port(t).map_err(|why| bad(&why))?;
        let (wild, host) = match host.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, host),
        };
        if host.contains('*') {
            return Err(bad(
                "`*` stands only for the names under a domain, as in `*.example.com`",
            ));
        }
        let parsed = Host::parse(host).map_err(|e| bad(&e.to_string()))?;
        let pattern = match (parsed, wild) {
            (Host::Domain(d), false) => Pattern::Name(trim_dot(&d).to_owned()),
            (Host::Domain(d), true) => Pattern::Under(trim_dot(&d).to_owned()),
            (Host::Ipv4(ip), false) => Pattern::Ip(IpAddr::V4(ip)),
            (Host::Ipv6(ip), false) => Pattern::Ip(IpAddr::V6(ip)),
            (_, true) => return Err(bad("`*.` goes before a name, not an address")),
        };
        Ok(Entry {
            pattern,
            port,
            text: t.to_owned(),
        })
    }

    /// Whether this entry admits `host` on `port`.
    fn admits(&self, host: &Host<&str>, port: u16) -> bool {
        if self.port.is_some_and(|p| p != port) {
            return false;
        }
        match (&self.pattern, host) {
            (Pattern::Name(name), Host::Domain(d)) => trim_dot(d) == name,
            (Pattern::Under(parent), Host::Domain(d)) => trim_dot(d)
                .strip_suffix(parent.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
            (Pattern::Ip(ip), Host::Ipv4(v4)) => *ip == IpAddr::V4(*v4),
            (Pattern::Ip(ip), Host::Ipv6(v6)) => *ip == IpAddr::V6(*v6),
            _ => false,
        }
    }

    /// Whether this entry grants its exact address whatever its class.
    fn grants(&self, host: &Host<&str>, port: u16) -> bool {
        matches!(self.pattern, Pattern::Ip(_)) && self.port.is_some() && self.admits(host, port)
    }
}

/// `host` and its port from `host[:port]` or `[v6][:port]`.
fn split_port(t: &str) -> Result<(&str, Option<u16>), String> {
    if !t.starts_with('[') && t.matches(':').count() > 1 {
        return Err("write an IPv6 address in brackets, as in `[::1]:9000`".to_owned());
    }
    let (host, port) = if t.starts_with('[') {
        let end = t.find(']').ok_or("an IPv6 address's `[` is not closed")?;
        let (host, rest) = t.split_at(end + 1);
        match rest.strip_prefix(':') {
            Some(port) => (host, Some(port)),
            None if rest.is_empty() => (host, None),
            None => return Err(format!("`{rest}` after the address")),
        }
    } else {
        match t.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (t, None),
        }
    };
    let port = match port {
        None => None,
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n > 0 => Some(n),
            _ => return Err(format!("`{p}` is not a port (1 to 65535)")),
        },
    };
    Ok((host, port))
}

fn trim_dot(name: &str) -> &str {
    name.strip_suffix('.').unwrap_or(name)
}

/// How a request that the list admits reaches its host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// An entry grants this address and port: connect, whatever its class.
    Granted,
    /// A public IP literal: connect.
    Public,
    /// A name: resolve it once, [`Allowlist::judge`] what it resolved to, and connect only to
    /// those addresses.
    Resolve {
        /// The name as the URL has it (what the HTTP client looks up).
        host: String,
        /// The URL's port.
        port: u16,
    },
}

/// The project's list of hosts code may `fetch` from, with the private-address guard.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Allowlist {
    entries: Vec<Entry>,
}

impl Allowlist {
    /// The list of `entries`; the first that is not `host` or `host:port` is the error.
    pub fn new<S: AsRef<str>>(entries: &[S]) -> Result<Allowlist, String> {
        Ok(Allowlist {
            entries: entries
                .iter()
                .map(|e| Entry::parse(e.as_ref()))
                .collect::<Result<_, _>>()?,
        })
    }

    /// Whether `url` may be fetched, and how to reach it — all but the check of the addresses
    /// a name resolves to ([`Allowlist::judge`]). Nothing is resolved or sent.
    pub fn route(&self, url: &Url) -> Result<Route, String> {
        let target = Shown(url);
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!(
                "fetch to `{target}` is refused: only http:// and https:// URLs can be fetched"
            ));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(format!(
                "fetch to `{target}` is refused: a URL with credentials cannot be fetched (send \
                 them in a header)"
            ));
        }
        let (Some(host), Some(port)) = (url.host(), url.port_or_known_default()) else {
            return Err(format!(
                "fetch to `{target}` is refused: the URL names no host"
            ));
        };
        let authority = Authority(&host, url.port());
        if !self.entries.iter().any(|e| e.admits(&host, port)) {
            return Err(format!(
                "fetch to `{authority}` is refused: the project allows {} ({WHERE})",
                self.listed()
            ));
        }
        if self.entries.iter().any(|e| e.grants(&host, port)) {
            return Ok(Route::Granted);
        }
        let ip = match host {
            Host::Domain(d) => {
                return Ok(Route::Resolve {
                    host: d.to_owned(),
                    port,
                });
            }
            Host::Ipv4(v4) => IpAddr::V4(v4),
            Host::Ipv6(v6) => IpAddr::V6(v6),
        };
        guard(&authority, &ip.to_string(), &[SocketAddr::new(ip, port)])?;
        Ok(Route::Public)
    }

    /// Whether a name `url` routes to ([`Route::Resolve`]) may be reached at `resolved`, what
    /// it resolved to: every one public, or refused (a name is never an explicit grant).
    pub fn judge(url: &Url, host: &str, resolved: &[SocketAddr]) -> Result<(), String> {
        let shown = url.host().map(|h| Authority(&h, url.port()).to_string());
        guard(&shown.as_deref().unwrap_or(host), host, resolved)
    }

    /// [`Allowlist::route`], then for a name [`Allowlist::judge`] on `resolved` (standing for
    /// what it would resolve to): the whole decision, for a caller that knows the addresses.
    pub fn decide(&self, url: &Url, resolved: &[SocketAddr]) -> Result<(), String> {
        match self.route(url)? {
            Route::Granted | Route::Public => Ok(()),
            Route::Resolve { host, .. } => Allowlist::judge(url, &host, resolved),
        }
    }

    /// The entries, for a refusal: `api.example.com, *.cdn.example` or `no host`.
    fn listed(&self) -> String {
        if self.entries.is_empty() {
            return "no host".to_owned();
        }
        let mut text = self
            .entries
            .iter()
            .take(LISTED)
            .map(|e| e.text.as_str())
            .collect::<Vec<_>>()
            .join(", ");
        if self.entries.len() > LISTED {
            text.push_str(&format!(" and {} more", self.entries.len() - LISTED));
        }
        format!("only {text}")
    }
}

/// The guard: `addrs` (what `host` is or resolved to) all public, or the refusal.
fn guard(target: &dyn fmt::Display, host: &str, addrs: &[SocketAddr]) -> Result<(), String> {
    duet_net::judge(host, addrs).map_err(|why| match why {
        duet_net::TargetError::Refused { .. } => format!(
            "fetch to `{target}` is refused: {why}; only an allow entry that is an IP address \
             with a port, such as `127.0.0.1:8080`, reaches a private address"
        ),
        _ => format!("fetch to `{target}` failed: {why}"),
    })
}

/// A host and the port the URL gives, if it gives one.
struct Authority<'a>(&'a Host<&'a str>, Option<u16>);

impl fmt::Display for Authority<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.1 {
            Some(port) => write!(f, "{}:{port}", self.0),
            None => write!(f, "{}", self.0),
        }
    }
}
