//! The classification as a table: an address inside every block of both IANA special-purpose
//! registries (and of the address-space blocks the table adds), with its decision written out
//! here by hand, and public addresses that must pass. Every block of the data must decide at
//! least one row, so a block added without a row fails. Then the standard library's stable
//! range checks as an oracle: nothing they call special may come out public. No traffic: only
//! decisions.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use duet_net::registry::{self, IPV4, IPV6, Source};
use duet_net::{Verdict, classify};

/// `(address, decision)`: `public`, the refusing block, or `BLOCK via FORM` for an IPv6 form
/// judged as the IPv4 address it stands for.
const ROWS: &[(&str, &str)] = &[
    // IPv4 Special-Purpose Address Registry.
    ("0.1.2.3", "0.0.0.0/8"),
    ("0.0.0.0", "0.0.0.0/32"),
    ("10.0.0.1", "10.0.0.0/8"),
    ("10.255.255.255", "10.0.0.0/8"),
    ("100.64.0.1", "100.64.0.0/10"),
    ("100.127.255.254", "100.64.0.0/10"),
    ("127.0.0.1", "127.0.0.0/8"),
    ("127.255.255.254", "127.0.0.0/8"),
    ("169.254.169.254", "169.254.0.0/16"),
    ("172.16.0.1", "172.16.0.0/12"),
    ("172.31.255.255", "172.16.0.0/12"),
    ("192.0.0.100", "192.0.0.0/24"),
    ("192.0.0.1", "192.0.0.0/29"),
    ("192.0.0.8", "192.0.0.8/32"),
    ("192.0.0.9", "public"),
    ("192.0.0.10", "public"),
    ("192.0.0.170", "192.0.0.170/32"),
    ("192.0.0.171", "192.0.0.171/32"),
    ("192.0.2.1", "192.0.2.0/24"),
    ("192.31.196.1", "public"),
    ("192.52.193.1", "public"),
    ("192.88.99.1", "192.88.99.0/24"),
    ("192.88.99.2", "192.88.99.2/32"),
    ("192.168.1.1", "192.168.0.0/16"),
    ("192.175.48.1", "public"),
    ("198.18.0.1", "198.18.0.0/15"),
    ("198.19.255.255", "198.18.0.0/15"),
    ("198.51.100.1", "198.51.100.0/24"),
    ("203.0.113.1", "203.0.113.0/24"),
    ("240.0.0.1", "240.0.0.0/4"),
    ("254.255.255.255", "240.0.0.0/4"),
    ("255.255.255.255", "255.255.255.255/32"),
    // IPv4 address space: multicast.
    ("224.0.0.1", "224.0.0.0/4"),
    ("239.255.255.255", "224.0.0.0/4"),
    // IPv4 that must pass, the edges of refused blocks among them.
    ("1.1.1.1", "public"),
    ("8.8.8.8", "public"),
    ("93.184.216.34", "public"),
    ("1.0.0.0", "public"),
    ("9.255.255.255", "public"),
    ("11.0.0.0", "public"),
    ("100.63.255.255", "public"),
    ("100.128.0.0", "public"),
    ("126.255.255.255", "public"),
    ("128.0.0.0", "public"),
    ("169.253.255.255", "public"),
    ("172.15.255.255", "public"),
    ("172.32.0.0", "public"),
    ("192.0.1.0", "public"),
    ("192.88.98.255", "public"),
    ("192.167.255.255", "public"),
    ("192.169.0.0", "public"),
    ("198.17.255.255", "public"),
    ("198.20.0.0", "public"),
    ("223.255.255.255", "public"),
    // IPv6 Special-Purpose Address Registry.
    ("::1", "::1/128"),
    ("::", "::/128"),
    ("::ffff:127.0.0.1", "127.0.0.0/8 via ::ffff:0.0.0.0/96"),
    (
        "::ffff:169.254.169.254",
        "169.254.0.0/16 via ::ffff:0.0.0.0/96",
    ),
    ("::ffff:8.8.8.8", "public"),
    ("64:ff9b::7f00:1", "127.0.0.0/8 via 64:ff9b::/96"),
    ("64:ff9b::10.1.2.3", "10.0.0.0/8 via 64:ff9b::/96"),
    ("64:ff9b::192.0.0.1", "192.0.0.0/29 via 64:ff9b::/96"),
    ("64:ff9b::8.8.8.8", "public"),
    ("64:ff9b:1::a00:1", "64:ff9b:1::/48"),
    ("64:ff9b:1:ffff::808:808", "64:ff9b:1::/48"),
    ("100::1", "100::/64"),
    ("100:0:0:1::1", "100:0:0:1::/64"),
    ("2001:100::1", "2001::/23"),
    ("2001:1::4", "2001::/23"),
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "2001::/32"),
    ("2001::1", "2001::/32"),
    ("2001:1::1", "public"),
    ("2001:1::2", "public"),
    ("2001:1::3", "public"),
    ("2001:2::1", "2001:2::/48"),
    ("2001:3::1", "public"),
    ("2001:4:112::1", "public"),
    ("2001:10::1", "2001:10::/28"),
    ("2001:20::1", "public"),
    ("2001:30::1", "public"),
    ("2001:db8::1", "2001:db8::/32"),
    ("2002:7f00:1::1", "2002::/16"),
    ("2002:a00:1::", "2002::/16"),
    ("2002:808:808::1", "2002::/16"),
    ("2620:4f:8000::1", "public"),
    ("3fff::1", "3fff::/20"),
    ("3fff:fff:ffff::1", "3fff::/20"),
    ("5f00::1", "5f00::/16"),
    ("fc00::1", "fc00::/7"),
    ("fd12:3456:789a::1", "fc00::/7"),
    ("fe80::1", "fe80::/10"),
    ("febf:ffff::1", "fe80::/10"),
    // IPv6 address space: everything outside global unicast 2000::/3.
    ("1::1", "::/8"),
    ("::1:2:3:4", "::/8"),
    ("1ff::1", "100::/8"),
    ("200::1", "200::/7"),
    ("3ff::1", "200::/7"),
    ("400::1", "400::/6"),
    ("800::1", "800::/5"),
    ("1000::1", "1000::/4"),
    ("4000::1", "4000::/3"),
    ("6000::1", "6000::/3"),
    ("8000::1", "8000::/3"),
    ("a000::1", "a000::/3"),
    ("c000::1", "c000::/3"),
    ("e000::1", "e000::/4"),
    ("f000::1", "f000::/5"),
    ("f800::1", "f800::/6"),
    ("fe00::1", "fe00::/9"),
    ("fec0::1", "fec0::/10"),
    ("ff02::1", "ff00::/8"),
    ("ff0e::1", "ff00::/8"),
    // Deprecated IPv6 forms of an IPv4 address.
    ("::7f00:1", "::/96"),
    ("::808:808", "::/96"),
    ("::ffff:0:7f00:1", "::ffff:0:0:0/96"),
    ("::ffff:0:808:808", "::ffff:0:0:0/96"),
    // IPv6 that must pass.
    ("2606:4700:4700::1111", "public"),
    ("2001:4860:4860::8888", "public"),
    ("2a00:1450:4001::1", "public"),
    ("2001:200::1", "public"),
    ("2001:db9::1", "public"),
    ("3fff:1000::1", "public"),
    ("2000::1", "public"),
    ("3ffe::1", "public"),
];

fn decision(v: Verdict) -> String {
    match v {
        Verdict::Public => "public".to_owned(),
        Verdict::Refused(r) => match r.via {
            None => r.block.block.to_string(),
            Some((form, _)) => format!("{} via {}", r.block.block, form.block),
        },
    }
}

fn ip(text: &str) -> IpAddr {
    text.parse()
        .unwrap_or_else(|e| panic!("{text} is not an address: {e}"))
}

#[test]
fn every_row_gets_its_decision() {
    let wrong: Vec<String> = ROWS
        .iter()
        .filter_map(|(addr, want)| {
            let got = decision(classify(ip(addr)));
            (got != *want).then(|| format!("{addr}: want {want}, got {got}"))
        })
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn every_block_of_the_data_decides_a_row() {
    let decided: BTreeSet<String> = ROWS
        .iter()
        .filter_map(|(addr, _)| registry::lookup(ip(addr)))
        .map(|s| s.block.to_string())
        .collect();
    let missing: Vec<String> = IPV4
        .iter()
        .chain(IPV6)
        .map(|s| s.block.to_string())
        .filter(|b| !decided.contains(b))
        .collect();
    assert!(missing.is_empty(), "blocks with no row: {missing:?}");
}

#[test]
fn every_block_is_listed_once_with_a_name_and_an_rfc() {
    let mut seen = BTreeSet::new();
    for s in IPV4.iter().chain(IPV6) {
        assert!(seen.insert(s.block), "{} twice", s.block);
        assert!(!s.name.is_empty() && s.rfc.starts_with("RFC "), "{s:?}");
        // The block is written as its network address (no host bits set).
        assert_eq!(s.block, s.block.trunc(), "{s:?}");
    }
    let special =
        |t: &[registry::Special]| t.iter().filter(|s| s.source == Source::Special).count();
    // IANA's registries as of 2025-10: 26 IPv4 blocks, 25 IPv6 blocks.
    assert_eq!(special(IPV4), 26);
    assert_eq!(special(IPV6), 25);
}

#[test]
fn refusals_name_the_block_and_its_rfc() {
    let Verdict::Refused(r) = classify(ip("64:ff9b::a00:1")) else {
        panic!("refused");
    };
    assert_eq!(
        r.to_string(),
        "64:ff9b::a00:1 stands for 10.0.0.1 (64:ff9b::/96, IPv4-IPv6 Translation, RFC 6052), \
         which is in 10.0.0.0/8 (Private-Use, RFC 1918)"
    );
    let Verdict::Refused(r) = classify(ip("fec0::1")) else {
        panic!("refused");
    };
    assert!(r.to_string().contains("RFC 3879"), "{r}");
}

/// What the standard library's stable checks call special (not public).
fn std_special(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            v4.is_unspecified()
                || v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_multicast()
                || v4.is_broadcast()
                || v4.is_documentation()
        }
        IpAddr::V6(v6) => {
            v6.is_unspecified()
                || v6.is_loopback()
                || v6.is_multicast()
                || v6.is_unique_local()
                || v6.is_unicast_link_local()
                || v6
                    .to_ipv4_mapped()
                    .is_some_and(|v4| std_special(IpAddr::V4(v4)))
        }
    }
}

/// A few addresses of every block: its first, its last, and some between.
fn samples() -> Vec<IpAddr> {
    let mut out: Vec<IpAddr> = ROWS.iter().map(|(a, _)| ip(a)).collect();
    let mut x: u128 = 0x9e37_79b9_7f4a_7c15;
    for s in IPV4.iter().chain(IPV6) {
        out.push(s.block.network());
        out.push(s.block.broadcast());
        for _ in 0..64 {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let host_bits = u32::from(s.block.max_prefix_len() - s.block.prefix_len());
            let mask = u128::MAX.checked_shr(128 - host_bits).unwrap_or(0);
            let addr = match s.block.network() {
                IpAddr::V4(n) => {
                    let bits = u32::from(n) | (x & mask) as u32;
                    IpAddr::V4(Ipv4Addr::from(bits))
                }
                IpAddr::V6(n) => IpAddr::V6(Ipv6Addr::from(u128::from(n) | (x & mask))),
            };
            out.push(addr);
        }
    }
    out
}

#[test]
fn nothing_the_standard_library_calls_special_is_public() {
    let mut leaks: Vec<String> = samples()
        .into_iter()
        .filter(|a| std_special(*a) && classify(*a).is_public())
        .map(|a| a.to_string())
        .collect();
    // And across the whole IPv4 space, a million addresses apart by a prime stride.
    let mut v4: u32 = 0;
    for _ in 0..1_000_000 {
        v4 = v4.wrapping_add(4_294_967_291 / 1_000_000 * 2 + 1);
        let a = IpAddr::V4(Ipv4Addr::from(v4));
        if std_special(a) && classify(a).is_public() {
            leaks.push(a.to_string());
        }
    }
    assert!(
        leaks.is_empty(),
        "public to duet, special to std: {leaks:?}"
    );
}
