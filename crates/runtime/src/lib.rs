//! The duet session engine (not built yet).
//!
//! This crate will own turn alternation, stop evaluation, parking and resumption, and the
//! ports the engine needs: `Store`, `Model`, `Tool`, `Handler`, `Hook` and `Clock`. It will know
//! no SQL, no HTTP and no provider wire format. See `ARCHITECTURE.md`.
