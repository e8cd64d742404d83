//! Model providers (not built yet).
//!
//! This crate will hold the implementations of the runtime's model port: the deterministic
//! `scripted` provider, OpenAI-compatible chat completions and the Anthropic Messages API.
