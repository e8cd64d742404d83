//! The data: every entry of IANA's IPv4 and IPv6 Special-Purpose Address Registries (as of
//! their 2025-10 revisions), plus the blocks of IANA's address-space registries that are not
//! unicast on the public internet (IPv4 multicast; every IPv6 block outside `2000::/3`) and
//! two obsolete IPv6 forms of an IPv4 address. One row per block, with its RFC and what duet
//! does with an address in it; the most specific block that holds an address decides.
//!
//! The rule follows the registry's "Globally Reachable" column: `False` (and `N/A`, which
//! Teredo, 6to4 and the deprecated 6to4 relay block have) is refused, `True` inside a refused
//! block is reachable again. The two IPv6 forms that only carry an IPv4 address and are used
//! as such (IPv4-mapped, NAT64's well-known prefix) are classified by the IPv4 address.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};

/// One block of a registry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Special {
    /// The block.
    pub block: IpNet,
    /// Its name in the registry.
    pub name: &'static str,
    /// The RFC (and section) that defines it.
    pub rfc: &'static str,
    /// Which registry lists it.
    pub source: Source,
    /// What duet does with an address in it.
    pub rule: Rule,
}

/// Where a block is listed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// IANA's IPv4 or IPv6 Special-Purpose Address Registry.
    Special,
    /// IANA's IPv4 or IPv6 Address Space registry (multicast; reserved by the IETF).
    AddressSpace,
    /// A deprecated form no registry lists as such (it falls in a reserved block); listed to
    /// name it in a refusal.
    Deprecated,
}

/// What an address in a block comes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// Not reachable on the public internet: refused.
    Refuse,
    /// Globally reachable per the registry (a block inside a refused one): allowed.
    Reachable,
    /// An IPv6 address that stands for the IPv4 address in its last 32 bits: classified as
    /// that address.
    EmbedsIpv4,
}

const fn v4(a: u8, b: u8, c: u8, d: u8, len: u8) -> IpNet {
    IpNet::V4(Ipv4Net::new_assert(Ipv4Addr::new(a, b, c, d), len))
}

const fn v6(s: [u16; 8], len: u8) -> IpNet {
    let [a, b, c, d, e, f, g, h] = s;
    IpNet::V6(Ipv6Net::new_assert(
        Ipv6Addr::new(a, b, c, d, e, f, g, h),
        len,
    ))
}

const fn row(block: IpNet, name: &'static str, rfc: &'static str, rule: Rule) -> Special {
    Special {
        block,
        name,
        rfc,
        source: Source::Special,
        rule,
    }
}

const fn space(block: IpNet, name: &'static str, rfc: &'static str) -> Special {
    Special {
        block,
        name,
        rfc,
        source: Source::AddressSpace,
        rule: Rule::Refuse,
    }
}

const fn deprecated(block: IpNet, name: &'static str, rfc: &'static str) -> Special {
    Special {
        block,
        name,
        rfc,
        source: Source::Deprecated,
        rule: Rule::Refuse,
    }
}

use Rule::{EmbedsIpv4, Reachable, Refuse};

/// IPv4: the special-purpose registry, then multicast from the address-space registry.
#[rustfmt::skip]
pub const IPV4: &[Special] = &[
    row(v4(0, 0, 0, 0, 8), "\"This network\"", "RFC 791, section 3.2", Refuse),
    row(v4(0, 0, 0, 0, 32), "\"This host on this network\"", "RFC 1122, section 3.2.1.3", Refuse),
    row(v4(10, 0, 0, 0, 8), "Private-Use", "RFC 1918", Refuse),
    row(v4(100, 64, 0, 0, 10), "Shared Address Space", "RFC 6598", Refuse),
    row(v4(127, 0, 0, 0, 8), "Loopback", "RFC 1122, section 3.2.1.3", Refuse),
    row(v4(169, 254, 0, 0, 16), "Link Local", "RFC 3927", Refuse),
    row(v4(172, 16, 0, 0, 12), "Private-Use", "RFC 1918", Refuse),
    row(v4(192, 0, 0, 0, 24), "IETF Protocol Assignments", "RFC 6890, section 2.1", Refuse),
    row(v4(192, 0, 0, 0, 29), "IPv4 Service Continuity Prefix", "RFC 7335", Refuse),
    row(v4(192, 0, 0, 8, 32), "IPv4 dummy address", "RFC 7600", Refuse),
    row(v4(192, 0, 0, 9, 32), "Port Control Protocol Anycast", "RFC 7723", Reachable),
    row(v4(192, 0, 0, 10, 32), "Traversal Using Relays around NAT Anycast", "RFC 8155", Reachable),
    row(v4(192, 0, 0, 170, 32), "NAT64/DNS64 Discovery", "RFC 8880, RFC 7050 section 2.2", Refuse),
    row(v4(192, 0, 0, 171, 32), "NAT64/DNS64 Discovery", "RFC 8880, RFC 7050 section 2.2", Refuse),
    row(v4(192, 0, 2, 0, 24), "Documentation (TEST-NET-1)", "RFC 5737", Refuse),
    row(v4(192, 31, 196, 0, 24), "AS112-v4", "RFC 7535", Reachable),
    row(v4(192, 52, 193, 0, 24), "AMT", "RFC 7450", Reachable),
    row(v4(192, 88, 99, 0, 24), "Deprecated (6to4 Relay Anycast)", "RFC 7526", Refuse),
    row(v4(192, 88, 99, 2, 32), "6a44-relay anycast address", "RFC 6751", Refuse),
    row(v4(192, 168, 0, 0, 16), "Private-Use", "RFC 1918", Refuse),
    row(v4(192, 175, 48, 0, 24), "Direct Delegation AS112 Service", "RFC 7534", Reachable),
    row(v4(198, 18, 0, 0, 15), "Benchmarking", "RFC 2544", Refuse),
    row(v4(198, 51, 100, 0, 24), "Documentation (TEST-NET-2)", "RFC 5737", Refuse),
    row(v4(203, 0, 113, 0, 24), "Documentation (TEST-NET-3)", "RFC 5737", Refuse),
    row(v4(240, 0, 0, 0, 4), "Reserved", "RFC 1112, section 4", Refuse),
    row(v4(255, 255, 255, 255, 32), "Limited Broadcast", "RFC 8190, RFC 919 section 7", Refuse),
    space(v4(224, 0, 0, 0, 4), "Multicast", "RFC 5771"),
];

/// IPv6: the special-purpose registry, the address-space registry's blocks outside global
/// unicast (`2000::/3`, RFC 4291 section 2.4), and the obsolete IPv4 forms.
#[rustfmt::skip]
pub const IPV6: &[Special] = &[
    row(v6([0, 0, 0, 0, 0, 0, 0, 1], 128), "Loopback Address", "RFC 4291", Refuse),
    row(v6([0, 0, 0, 0, 0, 0, 0, 0], 128), "Unspecified Address", "RFC 4291", Refuse),
    row(v6([0, 0, 0, 0, 0, 0xffff, 0, 0], 96), "IPv4-mapped Address", "RFC 4291", EmbedsIpv4),
    row(v6([0x64, 0xff9b, 0, 0, 0, 0, 0, 0], 96), "IPv4-IPv6 Translation", "RFC 6052", EmbedsIpv4),
    row(v6([0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48), "IPv4-IPv6 Translation (local use)", "RFC 8215", Refuse),
    row(v6([0x100, 0, 0, 0, 0, 0, 0, 0], 64), "Discard-Only Address Block", "RFC 6666", Refuse),
    row(v6([0x100, 0, 0, 1, 0, 0, 0, 0], 64), "Dummy IPv6 Prefix", "RFC 9780", Refuse),
    row(v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 23), "IETF Protocol Assignments", "RFC 2928", Refuse),
    row(v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 32), "TEREDO", "RFC 4380, RFC 8190", Refuse),
    row(v6([0x2001, 1, 0, 0, 0, 0, 0, 1], 128), "Port Control Protocol Anycast", "RFC 7723", Reachable),
    row(v6([0x2001, 1, 0, 0, 0, 0, 0, 2], 128), "Traversal Using Relays around NAT Anycast", "RFC 8155", Reachable),
    row(v6([0x2001, 1, 0, 0, 0, 0, 0, 3], 128), "DNS-SD Service Registration Protocol Anycast", "RFC 9665", Reachable),
    row(v6([0x2001, 2, 0, 0, 0, 0, 0, 0], 48), "Benchmarking", "RFC 5180, RFC Errata 1752", Refuse),
    row(v6([0x2001, 3, 0, 0, 0, 0, 0, 0], 32), "AMT", "RFC 7450", Reachable),
    row(v6([0x2001, 4, 0x112, 0, 0, 0, 0, 0], 48), "AS112-v6", "RFC 7535", Reachable),
    row(v6([0x2001, 0x10, 0, 0, 0, 0, 0, 0], 28), "Deprecated (previously ORCHID)", "RFC 4843", Refuse),
    row(v6([0x2001, 0x20, 0, 0, 0, 0, 0, 0], 28), "ORCHIDv2", "RFC 7343", Reachable),
    row(v6([0x2001, 0x30, 0, 0, 0, 0, 0, 0], 28), "Drone Remote ID Protocol Entity Tags (DETs) Prefix", "RFC 9374", Reachable),
    row(v6([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32), "Documentation", "RFC 3849", Refuse),
    row(v6([0x2002, 0, 0, 0, 0, 0, 0, 0], 16), "6to4", "RFC 3056", Refuse),
    row(v6([0x2620, 0x4f, 0x8000, 0, 0, 0, 0, 0], 48), "Direct Delegation AS112 Service", "RFC 7534", Reachable),
    row(v6([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20), "Documentation", "RFC 9637", Refuse),
    row(v6([0x5f00, 0, 0, 0, 0, 0, 0, 0], 16), "Segment Routing (SRv6) SIDs", "RFC 9602", Refuse),
    row(v6([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7), "Unique-Local", "RFC 4193, RFC 8190", Refuse),
    row(v6([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10), "Link-Local Unicast", "RFC 4291", Refuse),
    space(v6([0, 0, 0, 0, 0, 0, 0, 0], 8), "Reserved by IETF", "RFC 4291"),
    space(v6([0x100, 0, 0, 0, 0, 0, 0, 0], 8), "Reserved by IETF", "RFC 4291"),
    space(v6([0x200, 0, 0, 0, 0, 0, 0, 0], 7), "Reserved by IETF", "RFC 4048"),
    space(v6([0x400, 0, 0, 0, 0, 0, 0, 0], 6), "Reserved by IETF", "RFC 4291"),
    space(v6([0x800, 0, 0, 0, 0, 0, 0, 0], 5), "Reserved by IETF", "RFC 4291"),
    space(v6([0x1000, 0, 0, 0, 0, 0, 0, 0], 4), "Reserved by IETF", "RFC 4291"),
    space(v6([0x4000, 0, 0, 0, 0, 0, 0, 0], 3), "Reserved by IETF", "RFC 4291"),
    space(v6([0x6000, 0, 0, 0, 0, 0, 0, 0], 3), "Reserved by IETF", "RFC 4291"),
    space(v6([0x8000, 0, 0, 0, 0, 0, 0, 0], 3), "Reserved by IETF", "RFC 4291"),
    space(v6([0xa000, 0, 0, 0, 0, 0, 0, 0], 3), "Reserved by IETF", "RFC 4291"),
    space(v6([0xc000, 0, 0, 0, 0, 0, 0, 0], 3), "Reserved by IETF", "RFC 4291"),
    space(v6([0xe000, 0, 0, 0, 0, 0, 0, 0], 4), "Reserved by IETF", "RFC 4291"),
    space(v6([0xf000, 0, 0, 0, 0, 0, 0, 0], 5), "Reserved by IETF", "RFC 4291"),
    space(v6([0xf800, 0, 0, 0, 0, 0, 0, 0], 6), "Reserved by IETF", "RFC 4291"),
    space(v6([0xfe00, 0, 0, 0, 0, 0, 0, 0], 9), "Reserved by IETF", "RFC 4291"),
    space(v6([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10), "Site-Local (deprecated; reserved by IETF)", "RFC 3879"),
    space(v6([0xff00, 0, 0, 0, 0, 0, 0, 0], 8), "Multicast", "RFC 4291, section 2.7"),
    deprecated(v6([0, 0, 0, 0, 0, 0, 0, 0], 96), "IPv4-compatible Address (deprecated)", "RFC 4291, section 2.5.5.1"),
    deprecated(v6([0, 0, 0, 0, 0xffff, 0, 0, 0], 96), "IPv4-translated Address (obsolete SIIT form)", "RFC 2765, section 2.1"),
];

/// The most specific block of the registries that holds `ip`, if any.
pub fn lookup(ip: IpAddr) -> Option<&'static Special> {
    let table = match ip {
        IpAddr::V4(_) => IPV4,
        IpAddr::V6(_) => IPV6,
    };
    table
        .iter()
        .filter(|s| s.block.contains(&ip))
        .max_by_key(|s| s.block.prefix_len())
}
