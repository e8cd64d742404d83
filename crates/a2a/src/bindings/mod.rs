//! The two bindings A2A 1.0 is served on here: HTTP+JSON ([`rest`]) and JSON-RPC 2.0
//! ([`jsonrpc`]). Each reads its wire into a call and writes the outcome back in its own shape.

pub(crate) mod jsonrpc;
pub(crate) mod rest;
