//! Who a request was addressed to: the host of an HTTP `Host` header (or `:authority`), read as
//! browsers and reqwest read hosts (WHATWG, through `url`: `127.1` is `127.0.0.1`, names are
//! lowercased), and whether it is this machine's loopback. A server without keys serves only
//! loopback names, so a page whose name was rebound to 127.0.0.1 is refused; an agent card is
//! built from a loopback name only (any other `Host` is the client's say, and a cache's).

use std::net::IpAddr;

use url::{Host, Url};

/// The host `authority` names (`host`, `host:port`, `[v6]:port`), or `None` when it is not an
/// authority and nothing else: user info, a path, a query or a bad port make it `None`.
pub fn authority_host(authority: &str) -> Option<Host> {
    if authority.is_empty()
        || authority
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || "/?#@\\".contains(c))
    {
        return None;
    }
    let url = Url::parse(&format!("http://{authority}/")).ok()?;
    url.host().map(|h| h.to_owned())
}

/// Whether `host` is this machine's loopback: `localhost`, an address in `127.0.0.0/8`, `::1`,
/// or `::ffff:127.x.y.z`. (A name under `.localhost` is not: a resolver may send it to DNS.)
pub fn is_loopback(host: &Host) -> bool {
    let ip = match host {
        Host::Domain(name) => return name.eq_ignore_ascii_case("localhost"),
        Host::Ipv4(a) => IpAddr::V4(*a),
        Host::Ipv6(a) => a.to_ipv4_mapped().map_or(IpAddr::V6(*a), IpAddr::V4),
    };
    ip.is_loopback()
}

/// Whether `authority` names a loopback host ([`authority_host`], then [`is_loopback`]).
pub fn is_loopback_authority(authority: &str) -> bool {
    authority_host(authority).is_some_and(|h| is_loopback(&h))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_names_and_addresses_are_loopback_and_nothing_else_is() {
        for yes in [
            "localhost",
            "LOCALHOST:8787",
            "127.0.0.1",
            "127.0.0.1:80",
            "127.255.0.9:1",
            "127.1",
            "0x7f.1:8787",
            "[::1]",
            "[::1]:8787",
            "[::ffff:127.0.0.1]:9",
        ] {
            assert!(is_loopback_authority(yes), "{yes}");
        }
        for no in [
            "",
            "evil.example",
            "localhost.evil.example",
            "evil.localhost",
            "127.0.0.1.nip.io",
            "10.0.0.1",
            "0.0.0.0:8787",
            "[::]:1",
            "[::ffff:10.0.0.1]",
            "evil.example@127.0.0.1",
            "127.0.0.1/x",
            "127.0.0.1:80 evil",
            "127.0.0.1:99999",
            "127.0.0.1?x",
        ] {
            assert!(!is_loopback_authority(no), "{no}");
        }
    }

    #[test]
    fn an_authority_reads_as_its_host() {
        assert_eq!(
            authority_host("Agents.Example.com:443"),
            Some(Host::Domain("agents.example.com".into()))
        );
        assert_eq!(authority_host("a b"), None);
    }
}
