//! `duet serve` over real HTTP on 127.0.0.1, on SQLite and (with `DATABASE_URL`) Postgres:
//! the approval walkthrough, events with reconnects, the double answer, hostile input, principal
//! isolation, the OpenAPI document and graceful shutdown.

#[path = "../support/mod.rs"]
mod support;

mod harness;

mod approvals;
mod hostile;
mod isolation;
mod lifecycle;
