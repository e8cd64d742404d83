//! Every error the server answers, in one shape: RFC 9457 `application/problem+json` with
//! `type`, `title`, `status`, `detail`, a machine-readable `code`, and extension members where a
//! problem has more to say (the answer that won a park).

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use duet_runtime::{RunError, StoreError};
use serde_json::{Map, Value, json};
use utoipa::ToSchema;

/// The media type of every error body.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// One problem: an HTTP status and what went wrong.
#[derive(Clone, Debug)]
pub struct Problem {
    /// The HTTP status.
    pub status: StatusCode,
    /// A stable, machine-readable name (`already_answered`, `malformed_json`, ...).
    pub code: &'static str,
    /// What went wrong, for people.
    pub detail: String,
    /// Extension members (merged into the body).
    pub extra: Map<String, Value>,
}

/// The problem body as the OpenAPI document describes it.
#[derive(ToSchema)]
#[allow(dead_code)]
pub(crate) struct ProblemBody {
    /// `urn:duet:problem:{code}`.
    r#type: String,
    /// A short summary of the problem's kind.
    title: String,
    /// The HTTP status.
    status: u16,
    /// What went wrong in this case.
    detail: String,
    /// The problem's stable name.
    code: String,
}

impl Problem {
    /// A problem with `status`, named `code`, saying `detail`.
    pub fn new(status: StatusCode, code: &'static str, detail: impl Into<String>) -> Self {
        Problem {
            status,
            code,
            detail: detail.into(),
            extra: Map::new(),
        }
    }

    /// Adds the extension member `name`.
    pub fn with(mut self, name: &str, value: Value) -> Self {
        self.extra.insert(name.to_owned(), value);
        self
    }

    /// 400: the request is malformed.
    pub fn bad_request(code: &'static str, detail: impl Into<String>) -> Self {
        Problem::new(StatusCode::BAD_REQUEST, code, detail)
    }

    /// 404: nothing the caller may see is there (another principal's thread is also 404).
    pub fn not_found(detail: impl Into<String>) -> Self {
        Problem::new(StatusCode::NOT_FOUND, "not_found", detail)
    }

    /// 422: well-formed, but not something that can be done.
    pub fn unprocessable(code: &'static str, detail: impl Into<String>) -> Self {
        Problem::new(StatusCode::UNPROCESSABLE_ENTITY, code, detail)
    }

    /// 500: the server failed (logged; the body says no more than that).
    pub fn internal(e: &dyn std::fmt::Display) -> Self {
        tracing::error!(error = %e, "request failed");
        Problem::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "the server failed; the request may be retried",
        )
    }

    /// 503: the database cannot be reached, or the server is shutting down.
    pub fn unavailable(code: &'static str, detail: impl Into<String>) -> Self {
        Problem::new(StatusCode::SERVICE_UNAVAILABLE, code, detail)
    }

    fn title(&self) -> &'static str {
        self.status.canonical_reason().unwrap_or("Error")
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let mut body = json!({
            "type": format!("urn:duet:problem:{}", self.code),
            "title": self.title(),
            "status": self.status.as_u16(),
            "detail": self.detail,
            "code": self.code,
        });
        if let Value::Object(members) = &mut body {
            members.extend(self.extra);
        }
        let mut response = (self.status, body.to_string()).into_response();
        response
            .headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        response
    }
}

impl From<StoreError> for Problem {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound(what) => Problem::not_found(format!("no thread {what}")),
            StoreError::Backend { .. } => {
                tracing::error!(error = %e, "the database failed");
                Problem::unavailable("database", "the database failed; retry shortly")
            }
            other => Problem::internal(&other),
        }
    }
}

/// "no agent named `name`", with the project's hint: the nearest name (or the agents there
/// are), worded as the CLI words it ([`duet_spec::Project::agent_hint`]).
pub(crate) fn no_agent(project: &duet_spec::Project, name: &str) -> String {
    format!("no agent named `{name}`: {}", project.agent_hint(name))
}

/// How a delivery's failure reads over HTTP. Another principal's thread reads as absent.
pub(crate) fn run_error(e: RunError, key: &str) -> Problem {
    match e {
        RunError::UnknownAgent(name) => {
            Problem::unprocessable("unknown_agent", format!("no agent named `{name}`"))
        }
        RunError::UnknownThread(_) | RunError::Forbidden(_) => {
            Problem::not_found(format!("no thread `{key}`"))
        }
        RunError::Terminated(_) => Problem::new(
            StatusCode::CONFLICT,
            "terminated",
            format!("thread `{key}` is terminated: nothing more runs on it"),
        ),
        RunError::Busy(_) => Problem::new(
            StatusCode::CONFLICT,
            "session_busy",
            format!("a run is already in flight for `{key}`"),
        ),
        RunError::ShuttingDown => {
            Problem::unavailable("shutting_down", "the server is shutting down; retry")
        }
        RunError::Attachment { path, why, .. } => Problem::unprocessable(
            "invalid_attachment",
            format!("attachment `{path}` is not a file of the thread: {why}"),
        )
        .with("path", path.into()),
        e @ RunError::Stale { .. } => Problem::unprocessable("stale_definition", e.to_string()),
        e @ RunError::UnknownApproval { .. } => Problem::not_found(e.to_string()),
        RunError::DecisionTaken { approval, first, .. } => Problem::new(
            StatusCode::CONFLICT,
            "already_answered",
            format!(
                "approval {approval} of `{key}` was already decided: {} by {} at {}; nothing was written",
                first.decision.as_str(),
                first.author.as_deref().unwrap_or("an unnamed caller"),
                first.at
            ),
        )
        .with("decision", serde_json::json!(first)),
        RunError::DecisionRefused { why, .. } => {
            let code = match &why {
                duet_runtime::approval::Refusal::Stale(_) => "stale_definition",
                _ => "invalid_decision",
            };
            let field = match &why {
                duet_runtime::approval::Refusal::InvalidArgs(at) => {
                    at.split_once(": ").map(|(path, _)| path.to_owned())
                }
                _ => None,
            };
            let problem = Problem::unprocessable(code, why.to_string());
            match field {
                Some(path) => problem.with("field", serde_json::json!(path)),
                None => problem,
            }
        }
        RunError::Store(StoreError::AgentMismatch { agent, .. }) => Problem::new(
            StatusCode::CONFLICT,
            "agent_mismatch",
            format!("thread `{key}` belongs to agent `{agent}`"),
        ),
        RunError::Store(e) => e.into(),
        other => Problem::internal(&other),
    }
}

/// A refusal of the thread filesystem, by its code: `invalid_path` and `invalid_pattern` 400,
/// `not_found` 404, `wrong_kind` and `not_empty` 409, `too_large` and `too_many` 413.
pub(crate) fn file_error(e: duet_runtime::files::FileError) -> Problem {
    use duet_runtime::files::FileError;
    if let FileError::Store(store) = e {
        return store.into();
    }
    let status = match &e {
        FileError::InvalidPath { .. } | FileError::Pattern(_) => StatusCode::BAD_REQUEST,
        FileError::NotFound(_) => StatusCode::NOT_FOUND,
        FileError::WrongKind { .. } | FileError::NotEmpty(_) => StatusCode::CONFLICT,
        FileError::TooLarge { .. } | FileError::TooMany { .. } => StatusCode::PAYLOAD_TOO_LARGE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    Problem::new(status, e.code(), e.to_string())
}
