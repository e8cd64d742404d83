//! Built-in code handlers (not built yet).
//!
//! This crate will hold the Rust handlers that back `handler:` sides, registered by name
//! (an echo handler and a keyword router or auto-approver to start).
