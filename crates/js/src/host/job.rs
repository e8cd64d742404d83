//! What passes between a caller and an engine thread: a call to run, and what the thread tells
//! the caller while it runs it.

use std::sync::mpsc::SyncSender;

use duet_runtime::{CodeCall, CodeError};
use tokio::sync::mpsc::UnboundedSender;

/// One call for an engine thread, and where it reports.
pub(crate) struct Job {
    pub(crate) call: CodeCall,
    pub(crate) events: UnboundedSender<Event>,
}

/// What an engine thread tells the caller during a call.
pub(crate) enum Event {
    /// The code asks `method` of the bridge; the thread waits for the answer on `reply`.
    Bridge {
        method: String,
        params: serde_json::Value,
        reply: SyncSender<Result<serde_json::Value, String>>,
    },
    /// The call is over.
    Done(Result<serde_json::Value, CodeError>),
}
