//! The SQL fragments and binds that both backends and every half of `store_impl!` (`sql.rs`)
//! share: the thread columns, the condition that a queued row is runnable, and the binds of a
//! new thread, a queued message (its attachments as JSON text) and `enqueue`'s parameters. A leaf: the modules that build
//! statements name it, it names none of them.

/// Binds a new thread's columns to `$query` as every insert of a thread numbers them: `$1` id,
/// `$2` key, `$3` agent (and origin), `$4` parent, `$5` principal, `$6` source, `$7` now.
macro_rules! bind_new_thread {
    ($query:expr, $key:expr, $new:expr) => {
        $query
            .bind($new.id.to_string())
            .bind($key)
            .bind($new.agent)
            .bind($new.parent.map(|p| p.to_string()))
            .bind($new.principal)
            .bind($new.source)
            .bind($new.now)
    };
}
pub(crate) use bind_new_thread;

/// A queued message's attachments as `queue.attachments` keeps them: JSON, `NULL` for none.
pub(crate) fn attachments_json(attachments: &[duet_runtime::AttachmentRef]) -> Option<String> {
    (!attachments.is_empty()).then(|| serde_json::json!(attachments).to_string())
}

/// Binds queued message `$message`'s columns (a reference) to `$query` in `queue`'s order, role
/// through trace with `created_at` apart, then its attachments: the next twelve placeholders.
macro_rules! bind_message {
    ($query:expr, $message:expr) => {
        $query
            .bind($message.role.as_str())
            .bind(duet_runtime::side_str($message.side))
            // No NUL is stored (`duet_runtime::nul`): a message the engine queued from a
            // model's or code's text may carry one.
            .bind(duet_runtime::nul::cleaned(&$message.content))
            .bind($message.human)
            .bind($message.silent)
            .bind($message.follow_up)
            .bind(
                $message
                    .tool
                    .as_ref()
                    .map(|r| duet_runtime::nul::cleaned(&r.call_id)),
            )
            .bind(
                $message
                    .tool
                    .as_ref()
                    .map(|r| duet_runtime::nul::cleaned(&r.name)),
            )
            .bind($message.tool.as_ref().map(|r| r.status.as_str()))
            .bind(if $message.images.is_empty() {
                None
            } else {
                Some(serde_json::json!($message.images).to_string())
            })
            .bind($message.trace.as_deref())
            .bind(crate::fragments::attachments_json(&$message.attachments))
    };
}
pub(crate) use bind_message;

/// Binds `enqueue`'s parameters as both backends' texts number them: `$1` thread id, `$2`
/// message id, `$3` now, `$4`–`$15` the message, `$16`–`$18` the claim (owner, until, now;
/// all NULL without one).
macro_rules! bind_enqueue {
    ($query:expr, $id:expr, $message:expr, $claim:expr, $now:expr) => {
        crate::fragments::bind_message!(
            $query
                .bind($id.to_string())
                .bind($message.message_id.as_deref())
                .bind($now),
            $message
        )
        .bind($claim.as_ref().map(|l| l.owner.to_string()))
        .bind($claim.as_ref().map(|l| l.until))
        .bind($claim.as_ref().map(|l| l.now))
    };
}
pub(crate) use bind_enqueue;

/// The thread columns, in `thread_from_row` order.
macro_rules! thread_cols {
    () => {
        "num, id, key, agent, origin, parent, principal, source, status, status_text, session, session_open, stop_reason, result, \
         turns_a, turns_b, steps_a, steps_b, steps_total, acting, watermark_a, watermark_b, next_seq, \
         lease_owner, lease_expires, created_at, updated_at"
    };
}
pub(crate) use thread_cols;

/// The SQL condition that a queue row `q` is runnable for a thread whose status and stop reason
/// are the SQL expressions `$status` and `$stop` (its columns, or in a commit the values being
/// written): the thread was not aborted (its queue then waits for the next delivery), and,
/// while the thread waits for a blocking child, the row is a late tool result.
macro_rules! runnable {
    ($status:literal, $stop:literal) => {
        concat!(
            "(",
            $stop,
            " IS NULL OR ",
            $stop,
            " <> 'aborted') AND (",
            $status,
            " <> 'waiting' OR q.tool_call_id IS NOT NULL)"
        )
    };
}
pub(crate) use runnable;
