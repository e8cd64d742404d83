//! Test support: the fake provider server and the cassettes it replays.

#![allow(dead_code, unreachable_pub)]

pub mod cassette;
pub mod server;
