//! One inbound message over HTTP, whichever route brings it (a new thread, a message, an
//! approval's answer): what every such request must carry (text, images, `Idempotency-Key`),
//! and the API's answer to what `service::deliveries` did — at once (202, with where to
//! follow) or when the thread settles (`?wait=true`).

use axum::Json;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use duet_runtime::ImageRef;
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};

use crate::auth::Caller;
use crate::input::{self, Kind};
use crate::problem::Problem;
pub(crate) use crate::service::deliveries::Inbound;
use crate::service::deliveries::{self, Delivered, Landed};
use crate::state::AppState;
use crate::views::{AcceptedView, ThreadView, segment};

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

/// Checks what every inbound message must be ([`input`]): text that is not empty and that the
/// database can hold, images that are images.
pub(crate) fn check_text(text: &str, images: &[Image]) -> Result<(), Problem> {
    input::message_text("text", text)?;
    for (i, im) in images.iter().enumerate() {
        let (mime, data) = (format!("images[{i}].mimeType"), format!("images[{i}].data"));
        input::image((&mime, &data), &im.mime_type, &im.data)?;
    }
    Ok(())
}

/// The `Idempotency-Key` header: the message id (trimmed; 1–512 bytes, no control characters).
pub(crate) fn message_id(headers: &HeaderMap) -> Result<Option<String>, Problem> {
    let Some(value) = headers.get("idempotency-key") else {
        return Ok(None);
    };
    let id = value
        .to_str()
        .map_err(|_| {
            Problem::bad_request("invalid_idempotency_key", "Idempotency-Key is not text")
                .with("field", "Idempotency-Key".into())
        })?
        .trim();
    input::id(Kind::IdempotencyKey, "Idempotency-Key", id)?;
    Ok(Some(id.to_owned()))
}

/// The images of a request body, as the runtime keeps them.
pub(crate) fn images(images: &[Image]) -> Vec<ImageRef> {
    images
        .iter()
        .map(|i| ImageRef {
            mime_type: i.mime_type.clone(),
            data: i.data.clone(),
        })
        .collect()
}

/// Delivers `inbound` for `caller` and answers as the API does.
pub(crate) async fn deliver(
    state: &AppState,
    caller: &Caller,
    inbound: Inbound<'_>,
) -> Result<Response, Problem> {
    let delivered = deliveries::deliver(state, caller, inbound).await?;
    Ok(respond(caller, delivered))
}

/// The API's answer to a stored delivery: `200` with the thread when the caller waited for it
/// to settle (or replayed a message id), else `202` with where to follow it.
pub(crate) fn respond(caller: &Caller, delivered: Delivered) -> Response {
    let Delivered {
        landed,
        visible,
        since,
        now,
        ..
    } = delivered;
    let location = format!("/threads/{}", segment(&visible));
    let mut response = match &now {
        Some((t, parent)) => (
            StatusCode::OK,
            Json(ThreadView::of(t, caller, parent.as_ref())),
        )
            .into_response(),
        None => {
            let view = AcceptedView {
                thread: visible.clone(),
                delivery: landed.as_str(),
                events: format!("{location}/events?after={since}"),
            };
            (StatusCode::ACCEPTED, Json(view)).into_response()
        }
    };
    if let Ok(value) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    if landed == Landed::Duplicate {
        response
            .headers_mut()
            .insert("idempotent-replayed", HeaderValue::from_static("true"));
    }
    response
}
