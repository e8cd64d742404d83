//! The write probe: one row the server rewrites to learn whether the database takes writes now
//! (`/readyz`, and `duet serve` before it starts), since a database that answers reads may still
//! refuse every write (a read-only file, a full disk, a standby).

use async_trait::async_trait;

use duet_runtime::StoreError;

/// Writing the heartbeat row.
#[async_trait]
pub trait HealthStore: Send + Sync {
    /// Writes the one heartbeat row (`at`: now, ms since the Unix epoch) in a transaction of
    /// its own and commits it: `Ok` only once the database has taken the write.
    async fn heartbeat(&self, at: i64) -> Result<(), StoreError>;
}
