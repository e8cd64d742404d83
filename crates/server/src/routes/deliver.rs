//! One inbound message over HTTP, whichever route brings it (a new thread, a message, an
//! approval's answer): written durably before the response, then run in a task of its own —
//! answered at once (202, with where to follow) or when the thread settles (`?wait=true`).

use axum::Json;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use duet_runtime::{
    Accepted, Delivery, ImageRef, Origin, Park, RunError, Thread, ThreadId, ThreadStatus, WhenBusy,
};
use futures::StreamExt;
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};

use crate::auth::Caller;
use crate::body::MAX_KEY_BYTES;
use crate::problem::{Problem, run_error};
use crate::state::AppState;
use crate::views::{AcceptedView, ThreadView, first_answer, segment};

/// Whether to answer at once or when the thread settles.
#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub(crate) struct Wait {
    /// `true`: answer when the thread settles (parked, waiting for a child, or its session
    /// ended), with the thread. Default: answer `202` once the message is stored.
    #[serde(default)]
    pub wait: bool,
}

/// An image attached to a message: kept with it, and sent to models that take images.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Image {
    /// Its media type, `image/…`.
    pub mime_type: String,
    /// Base64.
    pub data: String,
}

/// Checks what every inbound message must be: non-empty text, images that are images.
pub(crate) fn check_text(text: &str, images: &[Image]) -> Result<(), Problem> {
    if text.trim().is_empty() {
        return Err(Problem::unprocessable("empty_text", "`text` is empty"));
    }
    check_images(images.iter().map(|i| i.mime_type.as_str()))
}

/// Checks that every image's media type (`mime_types`) is an image's.
pub(crate) fn check_images<'a>(
    mut mime_types: impl Iterator<Item = &'a str>,
) -> Result<(), Problem> {
    match mime_types.find(|m| !m.starts_with("image/")) {
        Some(bad) => Err(Problem::unprocessable(
            "invalid_image",
            format!("an image's mimeType must be image/…, not `{bad}`"),
        )),
        None => Ok(()),
    }
}

/// The `Idempotency-Key` header: the message id.
pub(crate) fn message_id(headers: &HeaderMap) -> Result<Option<String>, Problem> {
    let Some(value) = headers.get("idempotency-key") else {
        return Ok(None);
    };
    let id = value
        .to_str()
        .map_err(|_| {
            Problem::bad_request("invalid_idempotency_key", "Idempotency-Key is not text")
        })?
        .trim();
    if id.is_empty() || id.len() > MAX_KEY_BYTES {
        return Err(Problem::bad_request(
            "invalid_idempotency_key",
            "Idempotency-Key must be 1–512 bytes",
        ));
    }
    Ok(Some(id.to_owned()))
}

/// One inbound message, as a route read it.
pub(crate) struct Inbound<'a> {
    /// The stored key of the thread.
    pub key: &'a str,
    /// The agent, for a thread that may be created.
    pub agent: Option<&'a str>,
    /// The thread as read before (none for a new one).
    pub thread: Option<&'a Thread>,
    pub text: &'a str,
    pub images: &'a [Image],
    pub answers: Option<Park>,
    pub message_id: Option<&'a str>,
    pub wait: bool,
}

/// Delivers `inbound` for `caller`; `created`: the response status when the thread is new.
pub(crate) async fn deliver(
    state: &AppState,
    caller: &Caller,
    inbound: Inbound<'_>,
) -> Result<Response, Problem> {
    let visible = caller.visible_key(inbound.key);
    let images: Vec<ImageRef> = inbound
        .images
        .iter()
        .map(|i| ImageRef {
            mime_type: i.mime_type.clone(),
            data: i.data.clone(),
        })
        .collect();
    let delivery = Delivery {
        key: inbound.key,
        agent: inbound.agent,
        text: inbound.text,
        images: &images,
        origin: Origin {
            principal: caller.acting_for(inbound.thread),
            author: caller.canonical.as_deref(),
            source: Some("http"),
            ..Origin::default()
        },
        when_busy: WhenBusy::Queue,
        answers: inbound.answers,
        message_id: inbound.message_id,
        trace: None,
    };
    let since = inbound.thread.map_or(0, |t| t.next_seq - 1);
    let accepted = state
        .runtime()
        .accept(delivery)
        .await
        .map_err(|e| delivery_error(e, &visible))?;
    // The message is stored: from here on, whatever happens to the run, the answer says where
    // to follow it (a `202`) rather than an error a client might retry into a second message.
    let mut waited = inbound.wait;
    let (thread, how) = match accepted {
        Accepted::Claimed(claim) => {
            let thread = claim.thread();
            let outcome = state.spawn_run(claim);
            if inbound.wait {
                match outcome.await {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => {
                        tracing::info!(error = %e, "a waited-for run did not settle here");
                        waited = false;
                    }
                    Err(_) => waited = false,
                }
            }
            (thread, "accepted")
        }
        Accepted::Queued { thread } => {
            if inbound.wait {
                waited = settled(state, thread).await?;
            }
            (thread, "queued")
        }
        Accepted::Duplicate(settled) => (settled.thread, "duplicate"),
    };
    let location = format!("/threads/{}", segment(&visible));
    let mut response = if waited || how == "duplicate" {
        let t = state
            .runtime()
            .store()
            .thread_by_id(thread)
            .await?
            .ok_or_else(|| Problem::not_found(format!("no thread `{visible}`")))?;
        let parent = match t.parent {
            Some(p) => state.runtime().store().thread_by_id(p).await?,
            None => None,
        };
        (
            StatusCode::OK,
            Json(ThreadView::of(&t, caller, parent.as_ref())),
        )
            .into_response()
    } else {
        let view = AcceptedView {
            thread: visible.clone(),
            delivery: how,
            events: format!("{location}/events?after={since}"),
        };
        (StatusCode::ACCEPTED, Json(view)).into_response()
    };
    if let Ok(value) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    if how == "duplicate" {
        response
            .headers_mut()
            .insert("idempotent-replayed", HeaderValue::from_static("true"));
    }
    Ok(response)
}

/// A refused delivery: `already_answered` is a 409 naming the answer that won.
pub(crate) fn delivery_error(e: RunError, key: &str) -> Problem {
    match e {
        RunError::AlreadyAnswered { park, first, .. } => {
            let mut problem = Problem::new(
                StatusCode::CONFLICT,
                "already_answered",
                format!("`{key}` is no longer waiting at {park}: another answer came first"),
            );
            if let Some(first) = &first {
                problem = problem.with("answer", first_answer(first));
            }
            problem
        }
        other => run_error(other, key),
    }
}

/// Waits until thread `id` is not running (a run elsewhere took the message and settled):
/// whether it did (`false` when the server began shutting down first).
pub(crate) async fn settled(state: &AppState, id: ThreadId) -> Result<bool, Problem> {
    let store = state.runtime().store();
    // Subscribed before the first read, so a settle after it is announced.
    let mut changes = store.changes();
    loop {
        let t = store
            .thread_by_id(id)
            .await?
            .ok_or_else(|| Problem::not_found("the thread is gone"))?;
        if t.status != ThreadStatus::Running {
            return Ok(true);
        }
        loop {
            let event = tokio::select! {
                () = state.closing().cancelled() => return Ok(false),
                event = changes.next() => event,
            };
            match event {
                Some(event) if event.concerns(id) => break,
                Some(_) => {}
                None => return Ok(false),
            }
        }
    }
}
