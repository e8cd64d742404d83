//! The WAL written to disk on a thread of its own, shortly after commits ([`WalFlush`]), so that a
//! checkpoint's own sync of the WAL finds little left to write.
//!
//! With `synchronous=NORMAL` a commit only writes the WAL into the page cache, and the
//! checkpointer's `PASSIVE` checkpoint syncs the WAL before it copies it back (then syncs the
//! database file). Under steady writes that was a burst of a tenth of a second's WAL pages every
//! tenth of a second — ~12–18 ms of I/O on these VMs, every slow park of the engine benchmark
//! falling inside one (`docs/decisions.md`). Syncing the WAL ~10 ms after a commit spreads the
//! same pages into small steady writes. Nothing here changes what is durable when: a commit is
//! as durable as `synchronous=NORMAL` makes it (this only brings the WAL to disk sooner), and
//! SQLite still syncs everything it relies on itself.

use std::fs::File;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

/// How long after a commit the WAL is synced: commits meanwhile share the sync.
const DELAY: Duration = Duration::from_millis(10);

/// The writer's side: [`WalFlush::committed`] after each write that reached the WAL. The
/// background thread ends when this is dropped (with the store's writer).
#[derive(Debug)]
pub(crate) struct WalFlush {
    tx: mpsc::SyncSender<()>,
}

impl WalFlush {
    /// Starts syncing the WAL at `wal` (the database's path with `-wal`) after commits, on a
    /// thread of its own; `None` when it cannot (the store works as before, the checkpoint
    /// syncing it all).
    pub(crate) fn start(wal: &Path) -> Option<Self> {
        // Elsewhere `sync_data` may be a full device flush (macOS's `F_FULLFSYNC`), not a
        // write-back: every 10 ms that would cost more than the checkpoint's sync it spares.
        if !cfg!(target_os = "linux") {
            return None;
        }
        let started = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(wal)
            .and_then(|file| {
                let (tx, rx) = mpsc::sync_channel(1);
                std::thread::Builder::new()
                    .name("duet-wal-sync".into())
                    .stack_size(64 * 1024)
                    .spawn(move || run(&rx, &file, DELAY, || {}))?;
                Ok(WalFlush { tx })
            });
        match started {
            Ok(flush) => Some(flush),
            Err(e) => {
                tracing::warn!(wal = %wal.display(), error = %e, "the WAL is not synced in the background");
                None
            }
        }
    }

    /// Something was committed: the WAL is synced [`DELAY`] from now (once, whatever else is
    /// committed meanwhile). Never waits.
    pub(crate) fn committed(&self) {
        // Full: a sync is already due, and will take this commit too.
        let _ = self.tx.try_send(());
    }
}

/// Until every sender is gone: on each commit, waits `delay`, takes what was committed
/// meanwhile, and syncs `file`'s data (`fdatasync`), then calls `synced`. A failed sync is
/// logged; the checkpoint's own sync, on SQLite's descriptor, meets the error again.
fn run(rx: &mpsc::Receiver<()>, file: &File, delay: Duration, synced: impl Fn()) {
    while rx.recv().is_ok() {
        std::thread::sleep(delay);
        while rx.try_recv().is_ok() {}
        match file.sync_data() {
            Ok(()) => synced(),
            Err(e) => tracing::warn!(error = %e, "the WAL's background sync failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    fn scratch() -> (std::path::PathBuf, File) {
        let path = std::env::temp_dir().join(format!("duet-flush-{}", uuid::Uuid::now_v7()));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(&path)
            .expect("file");
        (path, file)
    }

    /// Commits close together share one sync, a commit after it gets one of its own, and
    /// nothing is synced without a commit; the thread ends with its writer.
    #[test]
    fn commits_are_synced_together_and_the_thread_ends_with_its_writer() {
        let (path, file) = scratch();
        let (tx, rx) = mpsc::sync_channel(1);
        let syncs = Arc::new(AtomicUsize::new(0));
        let (done_tx, done) = mpsc::channel();
        let counted = syncs.clone();
        let thread = std::thread::spawn(move || {
            run(&rx, &file, Duration::from_millis(200), || {
                counted.fetch_add(1, Ordering::SeqCst);
                let _ = done_tx.send(());
            });
        });
        let flush = WalFlush { tx };
        for _ in 0..5 {
            flush.committed();
        }
        let within = Duration::from_secs(10);
        done.recv_timeout(within).expect("a sync in time");
        assert_eq!(
            syncs.load(Ordering::SeqCst),
            1,
            "five commits at once, one sync"
        );
        flush.committed();
        done.recv_timeout(within).expect("a second sync in time");
        assert_eq!(syncs.load(Ordering::SeqCst), 2);
        drop(flush);
        // The thread ends once its writer is gone: its end drops the sender of `done`.
        assert_eq!(
            done.recv_timeout(within),
            Err(mpsc::RecvTimeoutError::Disconnected),
            "the thread ended, with no sync without a commit"
        );
        thread.join().expect("the thread did not panic");
        assert_eq!(syncs.load(Ordering::SeqCst), 2);
        let _ = std::fs::remove_file(path);
    }

    /// A WAL gets a background flusher (on Linux), and a path that cannot be opened gets none
    /// (the store goes on without it).
    #[test]
    fn a_missing_wal_is_no_flusher() {
        let missing = std::env::temp_dir().join(format!("duet-no-wal-{}", uuid::Uuid::now_v7()));
        assert!(WalFlush::start(&missing).is_none());
        let (path, _file) = scratch();
        assert_eq!(WalFlush::start(&path).is_some(), cfg!(target_os = "linux"));
        let _ = std::fs::remove_file(path);
    }
}
