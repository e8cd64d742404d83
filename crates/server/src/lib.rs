//! The duet server (not built yet).
//!
//! This crate will serve REST + SSE for threads, messages and events, the A2A 1.0 bindings for
//! exposed agents, and the approval inbox page. It will be the only crate that knows HTTP.
