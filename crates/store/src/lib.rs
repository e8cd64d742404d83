//! Persistence for duet (not built yet).
//!
//! This crate will hold the SQLite (embedded default) and Postgres implementations of the
//! runtime's store trait on sqlx, with the migrations of `migrations/`. It will be the only crate
//! that names sqlx and the only place with SQL.
