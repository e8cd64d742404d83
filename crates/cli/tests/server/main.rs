//! `duet serve` over real HTTP on 127.0.0.1, on SQLite and (with `DATABASE_URL`) Postgres:
//! the approval walkthrough, who may decide (`approvers.rs`), events with reconnects, the double answer (every pair of doors,
//! `doors.rs`), streams that end with their key (`revoked.rs`), hostile input (`hostile.rs`, and
//! the same values refused at every door: `values.rs`), principal isolation, the OpenAPI
//! document and graceful shutdown; connections (timeouts, the cap); readiness (`ready.rs`); who a
//! request is addressed to — the agent card's URLs, `--no-auth`'s hosts and origins
//! (`addressed.rs`); changed definitions (`stale.rs`); the session control plane and the Agent
//! Handler conformance over HTTP; behind PgBouncer (`pooler.rs`); the email channel against a
//! real SMTP server (`email.rs`, `support/smtp.rs`); Slack (`slack.rs`, against the
//! loopback stand-in `support/slack.rs`); webhook signatures as Standard Webhooks' Python
//! library reads them (`standard_webhooks.rs`); notifications end to end — webhooks once, signed,
//! retried in order, routed by role, private targets refused (`notify_webhooks.rs`), the one-time
//! links they carry (`notify_links.rs`), received by the loopback `support/hook.rs`; Slack's
//! buttons (`notify_slack.rs`) and an email's links (`notify_email.rs`); a failed step told, an
//! offboarded approver's links refused (`notify_offboarded.rs`); notifications seen —
//! listed, retried, revoked, subscribed to — over the API (`notifications_api.rs`).

#[path = "../support/mod.rs"]
mod support;

mod browser;
#[path = "../support/slack.rs"]
mod fake_slack;
mod harness;
#[path = "../support/hook.rs"]
mod hook;
#[path = "../support/smtp.rs"]
mod smtp;

mod a2a;
mod a2a_decisions;
mod a2a_files;
mod a2a_ids;
mod a2a_push;
mod a2a_remote;
mod a2a_states;
mod addressed;
mod approvals;
mod approvers;
mod connections;
mod control;
mod deadlines;
mod doors;
mod effects;
mod email;
mod fastagent_wire;
mod hostile;
mod inbox;
mod inbox_files;
mod inbox_late;
mod inbox_live;
mod inbox_tools;
mod isolation;
mod lifecycle;
mod notifications_api;
mod notify_email;
mod notify_links;
mod notify_offboarded;
mod notify_slack;
mod notify_support;
mod notify_webhooks;
mod pooler;
mod ready;
mod revoked;
mod slack;
mod stale;
mod standard_webhooks;
mod tool_approvals;
mod values;
