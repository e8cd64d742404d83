//! A project's own code (#33) through real `duet` processes: the docs-shaped TypeScript example
//! over `duet serve` on SQLite and Postgres and on both code hosts (`example.rs`), the embedded
//! sandbox's refusals and limits, each followed by a call that works in the same process
//! (`sandbox.rs`), and a process killed mid-`fetch` whose step is redone with the same
//! `Idempotency-Key` (`crash.rs`), and a `host: node` project importing a package and a `node:`
//! builtin at the top of a tool's file (`node_packages.rs`). The shop the code fetches from is a loopback origin this
//! process runs (`origin.rs`).

mod support;

#[path = "project_code/crash.rs"]
mod crash;
#[path = "project_code/example.rs"]
mod example;
#[path = "project_code/node_packages.rs"]
mod node_packages;
#[path = "project_code/origin.rs"]
mod origin;
#[path = "project_code/process.rs"]
mod process;
#[path = "project_code/sandbox.rs"]
mod sandbox;
