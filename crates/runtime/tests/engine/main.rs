//! The engine's behaviour, end to end: one test binary (each costs a link), one module per
//! subject. Every test runs on the in-memory store, on SQLite, and on Postgres when
//! `DATABASE_URL` is set (`scripts/test` sets it); the scripted model and the built-in handlers
//! take the turns.
//!
//! - `scenarios`: the `tests/scenarios/` folders — script in, transcript out — on every backend
//!   and over the OpenAI wire (`wire`).
//! - `deadlines` (a question's and a pending call's deadline: reminders, escalation, the default, races),
//!   `hooks`, `policy` (a `tool_call_policy` hook deciding per call), `subagents`, `awaits` (durable waits on blocking children), `follow_ups`,
//!   `streaming`, `durability` (racing runners, a run killed mid-step), `control_plane`,
//!   `effects` (scheduled effects with a test clock), `endpoints` (thread endpoints, with a code
//!   host played by the test),
//!   `timers` (the timer loop on a manual clock: due, re-armed, taken over, retried), `reported`
//!   (a run asked for its session reports the entries its settling write read).

mod support;
mod wire;

mod approvals;
mod attachments;
mod awaits;
mod code;
mod code_files;
mod control_plane;
mod deadline_code;
mod deadlines;
mod durability;
mod effects;
mod endpoints;
mod files;
mod follow_ups;
mod hooks;
mod invoke_decisions;
mod policy;
mod reported;
mod returned;
mod scenarios;
mod streaming;
mod subagents;
mod timers;
