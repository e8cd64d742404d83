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
    if let Some(host) = plain(authority) {
        return Some(host);
    }
    parsed(authority)
}

/// [`authority_host`] as the URL parser reads it.
fn parsed(authority: &str) -> Option<Host> {
    let url = Url::parse(&format!("http://{authority}/")).ok()?;
    url.host().map(|h| h.to_owned())
}

/// The host of an authority in the shapes nearly every request's `Host` has — a dotted quad
/// or a name of ASCII letters, digits and hyphens, with or without a port — read without the
/// URL parser, which costs a request more than the rest of its header checks together; `None`
/// for any other shape (left to the parser). Each shape taken here reads as the parser reads
/// it (a test holds the two to the same answers).
fn plain(authority: &str) -> Option<Host> {
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (authority, None),
    };
    if let Some(port) = port
        && (port.is_empty()
            || port.len() > 5
            || !port.bytes().all(|b| b.is_ascii_digit())
            || port.parse::<u32>().map_or(true, |p| p > 65_535))
    {
        return None;
    }
    // The standard library's parser takes only four decimal parts without leading zeros: the
    // other spellings the URL parser reads as an address (`127.1`, `0x7f.1`, `010.0.0.1`) fall
    // through to it.
    if let Ok(ip) = host.parse::<std::net::Ipv4Addr>() {
        return Some(Host::Ipv4(ip));
    }
    let labels: Vec<&str> = host.split('.').collect();
    let last = labels.last()?;
    let plain_labels = labels.iter().all(|l| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            // Punycode is the parser's to check.
            && !l.get(..4).is_some_and(|p| p.eq_ignore_ascii_case("xn--"))
    });
    // A last part that is a number makes the whole an address to the parser.
    let hex =
        last.len() > 1 && last.as_bytes()[0] == b'0' && matches!(last.as_bytes()[1], b'x' | b'X');
    let numeric = last.bytes().all(|b| b.is_ascii_digit()) || hex;
    (host.len() <= 253 && plain_labels && !numeric).then(|| Host::Domain(host.to_ascii_lowercase()))
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

    /// Every shape the quick reading takes reads as the URL parser reads it, and every other
    /// shape is left to the parser.
    #[test]
    fn the_quick_reading_agrees_with_the_url_parser() {
        let hosts = [
            "localhost",
            "LocalHost",
            "127.0.0.1",
            "10.0.0.5",
            "255.255.255.255",
            "256.1.1.1",
            "127.1",
            "0x7f.0.0.1",
            "010.0.0.1",
            "1.2.3.4.5",
            "1.2.3",
            "agents.example.com",
            "Agents.Example.COM",
            "a-b.c-d",
            "-a.example",
            "a-.example",
            "xn--nxasmq6b.example",
            "XN--a.example",
            "example.123",
            "example.0x1f",
            "example.0x",
            "example.0xg",
            "a..b",
            ".example",
            "example.",
            "a_b.example",
            "exa mple",
            "ex%41mple.com",
            "münchen.de",
            "[::1]",
            "[::ffff:127.0.0.1]",
            "",
            "0",
            "12345",
            "0x7f",
        ];
        let ports = [
            "", ":", ":0", ":80", ":8787", ":65535", ":65536", ":099999", ":8a", ":-1",
        ];
        let long = format!("{}.example", "a".repeat(63));
        let too_long = format!("{}.example", "a".repeat(64));
        let very_long = ["abcdefghi"; 30].join(".");
        let extra = [long.as_str(), too_long.as_str(), very_long.as_str()];
        for host in hosts.iter().chain(extra.iter()) {
            for port in ports {
                let authority = format!("{host}{port}");
                if let Some(quick) = plain(&authority) {
                    assert_eq!(Some(quick), parsed(&authority), "{authority}");
                }
                assert_eq!(
                    authority_host(&authority),
                    parsed(&authority).filter(|_| {
                        !authority.is_empty()
                            && !authority.contains(char::is_whitespace)
                            && !authority.chars().any(|c| "/?#@\\".contains(c))
                    }),
                    "{authority}"
                );
            }
        }
        // The common shapes are the quick reading's own.
        for common in ["127.0.0.1:8787", "localhost:3000", "agents.example.com"] {
            assert!(plain(common).is_some(), "{common}");
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
