//! The host functions the glue calls: `bridge`, which asks the caller's [`Bridge`] through the
//! call's events and waits for the answer within the call's deadline, and `log`, which makes
//! `console` a `tracing` event (target `duet::code`) naming the thread and the call.
//!
//! [`Bridge`]: duet_runtime::Bridge

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Instant;

use duet_runtime::CodeCall;
use rquickjs::{Ctx, Exception, Function};
use tokio::sync::mpsc::UnboundedSender;

use super::job::Event;
use crate::sandbox::{Stop, Watch};

/// A console message longer than this is cut (a log line is not a data channel).
const MAX_LOG_BYTES: usize = 16 << 10;

/// The call an engine runs now, as its host functions see it.
pub(crate) struct Link {
    /// Names the call: a `state` made for another is refused.
    pub(crate) token: f64,
    pub(crate) events: UnboundedSender<Event>,
    pub(crate) thread: String,
    pub(crate) call: String,
    /// The member the call was waiting on when its deadline passed.
    pub(crate) waited_for: Option<String>,
}

impl Link {
    pub(crate) fn new(token: f64, events: UnboundedSender<Event>, call: &CodeCall) -> Link {
        Link {
            token,
            events,
            thread: call.thread.clone(),
            call: call.call.clone(),
            waited_for: None,
        }
    }
}

/// The call running now, if any.
pub(crate) type Current = Rc<RefCell<Option<Link>>>;

/// Told when the call starts (`true`) and stops (`false`) waiting on the bridge.
pub(crate) type OnWait = Rc<dyn Fn(bool)>;

/// `bridge(token, member, paramsJson) -> answerJson` and `log(level, message)`.
pub(crate) fn functions<'js>(
    ctx: &Ctx<'js>,
    current: &Current,
    watch: &Rc<Watch>,
    on_wait: &OnWait,
) -> rquickjs::Result<(Function<'js>, Function<'js>)> {
    let (link, w, on_wait) = (current.clone(), watch.clone(), on_wait.clone());
    let bridge = Function::new(
        ctx.clone(),
        move |ctx: Ctx<'js>, token: f64, member: String, params: String| {
            on_wait(true);
            let answer = ask(&link, &w, token, &member, &params);
            on_wait(false);
            answer.map_err(|m| Exception::throw_message(&ctx, &m))
        },
    )?;
    let link = current.clone();
    let log = Function::new(ctx.clone(), move |level: String, message: String| {
        log(&link, &level, &message);
    })?;
    Ok((bridge, log))
}

/// Sends `member` with `params` to the caller of the call `token` names and waits for the
/// answer (JSON text), at most until the call's deadline; `Err` is thrown in the code.
fn ask(
    current: &Current,
    watch: &Watch,
    token: f64,
    member: &str,
    params: &str,
) -> Result<String, String> {
    let events = match current.borrow().as_ref() {
        Some(link) if link.token == token => link.events.clone(),
        _ => {
            return Err(format!(
                "`{member}`: this `state` belongs to a call that has ended (keep `state` within the call it was given to)"
            ));
        }
    };
    let params = serde_json::from_str(params).map_err(|e| format!("`{member}`: {e}"))?;
    let (reply, answer) = mpsc::sync_channel(1);
    let asked = Event::Bridge {
        method: member.to_owned(),
        params,
        reply,
    };
    if events.send(asked).is_err() {
        watch.stop(Stop::Cancelled);
        return Err("the call was cancelled".into());
    }
    let left = watch.deadline().saturating_duration_since(Instant::now());
    match answer.recv_timeout(left) {
        Ok(Ok(value)) => Ok(value.to_string()),
        Ok(Err(message)) => Err(message),
        Err(RecvTimeoutError::Timeout) => {
            watch.stop(Stop::Deadline);
            if let Some(link) = current.borrow_mut().as_mut() {
                link.waited_for = Some(member.to_owned());
            }
            Err(format!(
                "`{member}` had not answered by the call's deadline"
            ))
        }
        Err(RecvTimeoutError::Disconnected) => {
            watch.stop(Stop::Cancelled);
            Err("the call was cancelled".into())
        }
    }
}

fn log(current: &Current, level: &str, message: &str) {
    let link = current.borrow();
    let (thread, call) = link
        .as_ref()
        .map_or(("", ""), |l| (l.thread.as_str(), l.call.as_str()));
    let message = cut(message, MAX_LOG_BYTES);
    match level {
        "error" => tracing::error!(target: "duet::code", thread, call, "{message}"),
        "warn" => tracing::warn!(target: "duet::code", thread, call, "{message}"),
        "debug" => tracing::debug!(target: "duet::code", thread, call, "{message}"),
        _ => tracing::info!(target: "duet::code", thread, call, "{message}"),
    }
}

/// `text` up to `max` bytes (on a character boundary), marked when cut.
fn cut(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if text.len() <= max {
        return text.into();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes more)", &text[..end], text.len() - end).into()
}

#[cfg(test)]
mod tests {
    use super::cut;

    #[test]
    fn long_messages_are_cut_on_a_character() {
        assert_eq!(cut("héllo", 10), "héllo");
        assert_eq!(cut("héllo", 2), "h… (5 bytes more)");
    }
}
