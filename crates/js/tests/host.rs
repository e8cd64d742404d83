//! The embedded code host ([`duet_js::EmbeddedHost`]): the contract of `duet_runtime::CodeHost`
//! as a project's code meets it.

#[path = "host/failures.rs"]
mod failures;
#[path = "host/pool.rs"]
mod pool;
#[path = "host/state.rs"]
mod state;
#[path = "host/support.rs"]
mod support;
#[path = "host/web.rs"]
mod web;
