//! An item's form post as `POST /inbox/items/{id}` reads it: `application/x-www-form-urlencoded`
//! (every form without a file), or `multipart/form-data` from a question's answer form, whose
//! `file` part is the file the approver attaches. That part is streamed into the question's
//! thread under `/attachments/` (`service::files::attach`, within the file limits: over them is
//! a 413 and no file) once the fields before it passed the form's checks — the session's token,
//! a question (a decision takes no file), an answer that is one — so a forged or empty post
//! stores nothing. The route takes no body limit for it; the fields are held to the server's
//! body limit here.

use axum::extract::{FromRequest, Multipart, Request};
use axum::http::{HeaderMap, StatusCode, header};
use duet_runtime::files::FileRecord;

use super::form::Form;
use super::signin;
use super::viewer::Viewer;
use crate::problem::Problem;
use crate::service::{approvals, files, steps};
use crate::state::AppState;

/// A post: its fields, and the file it attached (stored).
pub(crate) struct Posted {
    pub form: Form,
    pub file: Option<FileRecord>,
}

/// What a post to item `id` sends: its fields and, from an answer form, its file (stored
/// before this returns; checks that need the fields run before it is).
pub(crate) async fn read(
    state: &AppState,
    viewer: &Viewer,
    id: &str,
    headers: &HeaderMap,
    request: Request,
    check: fn(&Form) -> Result<(), Problem>,
) -> Result<Posted, Problem> {
    let limit = state.options().body_limit;
    let kind = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|t| t.trim().to_ascii_lowercase())
        .unwrap_or_default();
    if kind == "application/x-www-form-urlencoded" {
        let bytes = axum::body::to_bytes(request.into_body(), limit)
            .await
            .map_err(|_| too_large(limit))?;
        let fields = form_urlencoded::parse(&bytes)
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        return Ok(Posted {
            form: Form(fields),
            file: None,
        });
    }
    if kind != "multipart/form-data" {
        return Err(Problem::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "send the form as application/x-www-form-urlencoded or multipart/form-data",
        ));
    }
    let bad = |e: axum::extract::multipart::MultipartError| {
        Problem::bad_request("invalid_multipart", e.body_text())
    };
    let mut multipart = Multipart::from_request(request, state)
        .await
        .map_err(|e| Problem::bad_request("invalid_multipart", e.body_text()))?;
    let mut fields = Vec::new();
    let mut held = 0usize;
    let mut file = None;
    while let Some(mut field) = multipart.next_field().await.map_err(bad)? {
        let name = field.name().unwrap_or_default().to_owned();
        let file_name = field.file_name().map(str::to_owned);
        if name != "file" || file_name.is_none() {
            let mut value = Vec::new();
            while let Some(piece) = field.chunk().await.map_err(bad)? {
                held += piece.len();
                if held > limit {
                    return Err(too_large(limit));
                }
                value.extend_from_slice(&piece);
            }
            let value = String::from_utf8(value).map_err(|_| {
                Problem::bad_request("invalid_multipart", format!("field `{name}` is not UTF-8"))
            })?;
            fields.push((name, value));
            continue;
        }
        // A file input with nothing chosen sends a part with an empty name and no bytes.
        let file_name = file_name.unwrap_or_default();
        if file_name.is_empty() {
            if field
                .chunk()
                .await
                .map_err(bad)?
                .is_some_and(|c| !c.is_empty())
            {
                return Err(Problem::bad_request(
                    "missing_file_name",
                    "the attached file has no name",
                ));
            }
            continue;
        }
        let form = Form(std::mem::take(&mut fields));
        if let Err(refused) = signin::check_post(state, headers, Some(viewer), &form) {
            return Err(Problem::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                refused.reason(),
            ));
        }
        if file.is_some() {
            return Err(Problem::unprocessable(
                "invalid_answer",
                "an answer attaches one file",
            ));
        }
        if steps::load(state, &viewer.caller, id).await?.is_some() {
            return Err(Problem::unprocessable(
                "invalid_answer",
                "a decision on a tool call takes no file",
            ));
        }
        check(&form)?;
        let (_, thread) = approvals::find(state, &viewer.caller, id).await?;
        let declared = field.content_type().map(str::to_owned);
        let stored = files::attach(
            state,
            &thread,
            &file_name,
            Box::pin(field),
            declared.as_deref(),
        )
        .await
        .map_err(|e| crate::routes::files::refused(e, |e| e.body_text()))?;
        file = Some(stored);
        fields = form.0;
    }
    Ok(Posted {
        form: Form(fields),
        file,
    })
}

fn too_large(limit: usize) -> Problem {
    Problem::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "too_large",
        format!("the form's fields are over {limit} bytes"),
    )
}
