//! One address's verdict: public, or refused with the block (and RFC) that refuses it. An
//! IPv6 address that stands for an IPv4 one (IPv4-mapped, NAT64's well-known prefix) is judged
//! as that IPv4 address; every other IPv6 form of an IPv4 address is refused by its own block.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::registry::{self, Rule, Special};

/// Whether a request may go to an address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// On the public internet: allowed.
    Public,
    /// In a block that is not: refused, saying which.
    Refused(Refusal),
}

impl Verdict {
    /// Whether the address is public.
    pub fn is_public(&self) -> bool {
        matches!(self, Verdict::Public)
    }
}

/// Why an address is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The address asked about.
    pub addr: IpAddr,
    /// The block that refuses it (for an IPv6 form of an IPv4 address, the IPv4 address's).
    pub block: &'static Special,
    /// For an IPv6 address judged as an IPv4 one: its own block and that IPv4 address.
    pub via: Option<(&'static Special, Ipv4Addr)>,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let named = |s: &Special| format!("{} ({}, {})", s.block, s.name, s.rfc);
        match self.via {
            None => write!(f, "{} is in {}", self.addr, named(self.block)),
            Some((form, v4)) => write!(
                f,
                "{} stands for {v4} ({}, {}, {}), which is in {}",
                self.addr,
                form.block,
                form.name,
                form.rfc,
                named(self.block)
            ),
        }
    }
}

/// The verdict on `ip`: refused when the most specific registry block holding it is not
/// globally reachable, public otherwise.
pub fn classify(ip: IpAddr) -> Verdict {
    let Some(special) = registry::lookup(ip) else {
        return Verdict::Public;
    };
    match special.rule {
        Rule::Reachable => Verdict::Public,
        Rule::Refuse => Verdict::Refused(Refusal {
            addr: ip,
            block: special,
            via: None,
        }),
        Rule::EmbedsIpv4 => {
            let IpAddr::V6(v6) = ip else {
                // Only IPv6 blocks embed an IPv4 address; an IPv4 row saying so is refused.
                return Verdict::Refused(Refusal {
                    addr: ip,
                    block: special,
                    via: None,
                });
            };
            let v4 = low_32(v6);
            match classify(IpAddr::V4(v4)) {
                Verdict::Public => Verdict::Public,
                Verdict::Refused(inner) => Verdict::Refused(Refusal {
                    addr: ip,
                    block: inner.block,
                    via: Some((special, v4)),
                }),
            }
        }
    }
}

/// The IPv4 address in the last 32 bits of `v6` (RFC 4291 section 2.5.5.2, RFC 6052 section
/// 2.2 for a /96 prefix).
fn low_32(v6: Ipv6Addr) -> Ipv4Addr {
    let [.., a, b, c, d] = v6.octets();
    Ipv4Addr::new(a, b, c, d)
}
