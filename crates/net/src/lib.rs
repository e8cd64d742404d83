//! Where duet may send a request it makes to a URL that someone other than the operator can
//! influence (an A2A push config's client, an `http` tool's argument, a remote agent's card):
//! one classification of IP addresses for every such request, and one resolve-check-pin step.
//!
//! - [`classify`] judges an [`IpAddr`](std::net::IpAddr) against IANA's IPv4 and IPv6
//!   Special-Purpose Address Registries ([`registry`], one row per block with its RFC): public,
//!   or [`Verdict::Refused`] with the block that refuses it. IPv6 forms of an IPv4 address are
//!   judged as that address (IPv4-mapped, NAT64's well-known prefix) or refused (IPv4-compatible,
//!   IPv4-translated, 6to4, Teredo, local-use NAT64).
//! - [`check`] / [`target_allowed`] take a URL, resolve its host once, refuse it if any address
//!   is not public, and return the addresses so the caller's HTTP client connects to exactly
//!   those ([`Pin`]).
//! - [`same_origin`] and [`redirect_allowed`] say where a redirect may go with a request's
//!   credentials.
//! - [`authority_host`] and [`is_loopback`] read who a request was addressed to (its `Host`),
//!   for a server that serves loopback names only, or builds URLs from them.
//!
//! No duet crate, no HTTP client: a port (`duet-a2a`) and the crates that make requests
//! (`duet-tools`, `duet-server`) all use it.
//!
//! ```
//! use duet_net::{classify, Verdict};
//! let nat64 = "64:ff9b::a00:1".parse().expect("an address");
//! let Verdict::Refused(why) = classify(nat64) else { panic!("refused") };
//! assert_eq!(why.block.rfc, "RFC 1918");
//! assert!(classify("2606:4700:4700::1111".parse().expect("an address")).is_public());
//! ```

#![warn(missing_docs)]

mod classify;
mod host;
pub mod registry;
mod target;

pub use classify::{Refusal, Verdict, classify};
pub use host::{authority_host, is_loopback, is_loopback_authority};
pub use target::{
    MAX_REDIRECTS, Pin, Target, TargetError, check, judge, redirect_allowed, same_origin,
    target_allowed,
};
