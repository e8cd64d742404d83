//! A2A errors: the ten classes of the seed's table, JSON-RPC's own four, and a custom error;
//! each knows its JSON-RPC code, HTTP status, gRPC status name and `ErrorInfo.reason`, and is
//! written as a JSON-RPC `error` (with `data[]`) or a `google.rpc.Status` body (with `details[]`).

use std::fmt;

use axum::http::StatusCode;
use serde_json::{Map, Value, json};

/// The `domain` of every `google.rpc.ErrorInfo` duet writes.
pub const ERROR_DOMAIN: &str = "a2a-protocol.org";

/// What kind of error, which fixes its codes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorKind {
    TaskNotFound,
    TaskNotCancelable,
    PushNotificationNotSupported,
    UnsupportedOperation,
    ContentTypeNotSupported,
    InvalidAgentResponse,
    ExtendedAgentCardNotConfigured,
    ExtensionSupportRequired,
    VersionNotSupported,
    InvalidParams,
    /// JSON-RPC: the body is not JSON (`-32700`).
    ParseError,
    /// JSON-RPC: not a valid request object (`-32600`).
    InvalidRequest,
    /// JSON-RPC: no such method; REST: no such route (`-32601`).
    MethodNotFound,
    /// Anything else (`-32603`, HTTP 500); the detail stays in the log.
    Internal,
    /// An error of the agent's own (`-32000`..`-32099` outside A2A's, say).
    Custom {
        code: i64,
        status: u16,
        reason: String,
    },
}

/// An A2A error, ready to be written on either binding.
#[derive(Debug, Clone, PartialEq)]
pub struct A2aError(Box<Inner>);

#[derive(Debug, Clone, PartialEq)]
struct Inner {
    kind: ErrorKind,
    message: String,
    metadata: Map<String, Value>,
    fields: Vec<(String, String)>,
    /// An HTTP status other than the table's, for where HTTP itself names the problem.
    status: Option<StatusCode>,
}

impl A2aError {
    fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self(Box::new(Inner {
            kind,
            message: message.into(),
            metadata: Map::new(),
            fields: Vec::new(),
            status: None,
        }))
    }

    /// Adds a string to `ErrorInfo.metadata`.
    pub fn with(mut self, key: &str, value: impl Into<String>) -> Self {
        self.0
            .metadata
            .insert(key.to_owned(), Value::String(value.into()));
        self
    }

    /// What kind of error.
    pub fn kind(&self) -> &ErrorKind {
        &self.0.kind
    }

    /// The human-readable message.
    pub fn message(&self) -> &str {
        &self.0.message
    }

    /// `ErrorInfo.metadata`: strings only, as the proto says.
    pub fn metadata(&self) -> &Map<String, Value> {
        &self.0.metadata
    }

    /// For invalid params: which field and why (a `google.rpc.BadRequest` detail).
    pub fn fields(&self) -> &[(String, String)] {
        &self.0.fields
    }

    pub fn task_not_found(task_id: &str) -> Self {
        Self::new(ErrorKind::TaskNotFound, "Task not found").with("taskId", task_id)
    }

    pub fn task_not_cancelable(task_id: &str, state: crate::types::TaskState) -> Self {
        Self::new(
            ErrorKind::TaskNotCancelable,
            format!("Task cannot be canceled: it is {}", state.as_str()),
        )
        .with("taskId", task_id)
        .with("state", state.as_str())
    }

    pub fn push_notification_not_supported() -> Self {
        Self::new(
            ErrorKind::PushNotificationNotSupported,
            "Push notifications are not supported by this agent",
        )
    }

    pub fn unsupported_operation(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::UnsupportedOperation, message)
    }

    pub fn content_type_not_supported(content_type: &str) -> Self {
        Self::new(
            ErrorKind::ContentTypeNotSupported,
            format!("Content type `{content_type}` is not supported"),
        )
        .with("contentType", content_type)
    }

    pub fn invalid_agent_response(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidAgentResponse, message)
    }

    pub fn extended_agent_card_not_configured() -> Self {
        Self::new(
            ErrorKind::ExtendedAgentCardNotConfigured,
            "This agent has no extended agent card",
        )
    }

    pub fn extension_support_required(extension: &str) -> Self {
        Self::new(
            ErrorKind::ExtensionSupportRequired,
            format!("The extension `{extension}` is required: name it in A2A-Extensions"),
        )
        .with("extension", extension)
    }

    pub fn version_not_supported(version: &str) -> Self {
        Self::new(
            ErrorKind::VersionNotSupported,
            format!(
                "A2A version '{version}' is not supported; this server speaks '{}'",
                crate::card::PROTOCOL_VERSION
            ),
        )
        .with("version", version)
        .with("supported", crate::card::PROTOCOL_VERSION)
    }

    /// Invalid params; `fields` names each bad field (`message.parts[0]`) and why.
    pub fn invalid_params(message: impl Into<String>, fields: Vec<(String, String)>) -> Self {
        let mut e = Self::new(ErrorKind::InvalidParams, message);
        e.0.fields = fields;
        e
    }

    pub fn parse_error(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::ParseError, message)
    }

    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidRequest, message)
    }

    pub fn method_not_found(method: &str) -> Self {
        Self::new(ErrorKind::MethodNotFound, "Method not found").with("method", method)
    }

    /// An internal error: `detail` is logged here, the client reads only "Internal error".
    pub fn internal(detail: impl fmt::Display) -> Self {
        tracing::error!(error = %detail, "a2a: internal error");
        Self::new(ErrorKind::Internal, "Internal error")
    }

    /// An error of the agent's own, with its code, HTTP status and reason.
    pub fn custom(code: i64, status: u16, reason: &str, message: impl Into<String>) -> Self {
        Self::new(
            ErrorKind::Custom {
                code,
                status,
                reason: reason.to_owned(),
            },
            message,
        )
    }

    /// The JSON-RPC error code.
    pub fn code(&self) -> i64 {
        match &self.0.kind {
            ErrorKind::TaskNotFound => -32001,
            ErrorKind::TaskNotCancelable => -32002,
            ErrorKind::PushNotificationNotSupported => -32003,
            ErrorKind::UnsupportedOperation => -32004,
            ErrorKind::ContentTypeNotSupported => -32005,
            ErrorKind::InvalidAgentResponse => -32006,
            ErrorKind::ExtendedAgentCardNotConfigured => -32007,
            ErrorKind::ExtensionSupportRequired => -32008,
            ErrorKind::VersionNotSupported => -32009,
            ErrorKind::InvalidParams => -32602,
            ErrorKind::ParseError => -32700,
            ErrorKind::InvalidRequest => -32600,
            ErrorKind::MethodNotFound => -32601,
            ErrorKind::Internal => -32603,
            ErrorKind::Custom { code, .. } => *code,
        }
    }

    /// The same error answered with HTTP `status` on the REST binding (the binding answers a
    /// request body that is not JSON with `415 Unsupported Media Type`, as HTTP has it).
    pub fn with_http_status(mut self, status: StatusCode) -> Self {
        self.0.status = Some(status);
        self
    }

    /// The HTTP status on the REST binding.
    pub fn http_status(&self) -> StatusCode {
        if let Some(status) = self.0.status {
            return status;
        }
        match &self.0.kind {
            ErrorKind::TaskNotFound | ErrorKind::MethodNotFound => StatusCode::NOT_FOUND,
            ErrorKind::InvalidAgentResponse | ErrorKind::Internal => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
            ErrorKind::Custom { status, .. } => {
                StatusCode::from_u16(*status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
            }
            _ => StatusCode::BAD_REQUEST,
        }
    }

    /// The `google.rpc.Code` name (`status` of a REST error body).
    pub fn grpc_status(&self) -> &'static str {
        match &self.0.kind {
            ErrorKind::TaskNotFound | ErrorKind::MethodNotFound => "NOT_FOUND",
            ErrorKind::ContentTypeNotSupported
            | ErrorKind::InvalidParams
            | ErrorKind::ParseError
            | ErrorKind::InvalidRequest => "INVALID_ARGUMENT",
            ErrorKind::InvalidAgentResponse | ErrorKind::Internal => "INTERNAL",
            ErrorKind::Custom { status, .. } => match status {
                404 => "NOT_FOUND",
                409 => "ABORTED",
                429 => "RESOURCE_EXHAUSTED",
                400..=499 => "FAILED_PRECONDITION",
                _ => "INTERNAL",
            },
            _ => "FAILED_PRECONDITION",
        }
    }

    /// `ErrorInfo.reason`: the error's name in UPPER_SNAKE_CASE without "Error".
    pub fn reason(&self) -> &str {
        match &self.0.kind {
            ErrorKind::TaskNotFound => "TASK_NOT_FOUND",
            ErrorKind::TaskNotCancelable => "TASK_NOT_CANCELABLE",
            ErrorKind::PushNotificationNotSupported => "PUSH_NOTIFICATION_NOT_SUPPORTED",
            ErrorKind::UnsupportedOperation => "UNSUPPORTED_OPERATION",
            ErrorKind::ContentTypeNotSupported => "CONTENT_TYPE_NOT_SUPPORTED",
            ErrorKind::InvalidAgentResponse => "INVALID_AGENT_RESPONSE",
            ErrorKind::ExtendedAgentCardNotConfigured => "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
            ErrorKind::ExtensionSupportRequired => "EXTENSION_SUPPORT_REQUIRED",
            ErrorKind::VersionNotSupported => "VERSION_NOT_SUPPORTED",
            ErrorKind::InvalidParams => "INVALID_PARAMS",
            ErrorKind::ParseError => "PARSE_ERROR",
            ErrorKind::InvalidRequest => "INVALID_REQUEST",
            ErrorKind::MethodNotFound => "METHOD_NOT_FOUND",
            ErrorKind::Internal => "INTERNAL_ERROR",
            ErrorKind::Custom { reason, .. } => reason,
        }
    }

    /// The `data[]` / `details[]` array: the `ErrorInfo`, and a `BadRequest` for bad fields.
    fn details(&self) -> Value {
        let mut details = vec![json!({
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": self.reason(),
            "domain": ERROR_DOMAIN,
            "metadata": self.0.metadata,
        })];
        if !self.0.fields.is_empty() {
            let violations: Vec<Value> = self
                .0
                .fields
                .iter()
                .map(|(field, why)| json!({"field": field, "description": why}))
                .collect();
            details.push(json!({
                "@type": "type.googleapis.com/google.rpc.BadRequest",
                "fieldViolations": violations,
            }));
        }
        Value::Array(details)
    }

    /// The JSON-RPC `error` member.
    pub fn to_jsonrpc(&self) -> Value {
        json!({"code": self.code(), "message": self.0.message, "data": self.details()})
    }

    /// The REST body: `{"error": google.rpc.Status}`.
    pub fn to_rest(&self) -> Value {
        json!({"error": {
            "code": self.http_status().as_u16(),
            "status": self.grpc_status(),
            "message": self.0.message,
            "details": self.details(),
        }})
    }
}

impl fmt::Display for A2aError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}): {}", self.reason(), self.code(), self.0.message)
    }
}

impl std::error::Error for A2aError {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::TaskState;

    #[test]
    fn the_seed_table() {
        let table = [
            (A2aError::task_not_found("t"), -32001, 404),
            (
                A2aError::task_not_cancelable("t", TaskState::Completed),
                -32002,
                400,
            ),
            (A2aError::push_notification_not_supported(), -32003, 400),
            (A2aError::unsupported_operation("no"), -32004, 400),
            (
                A2aError::content_type_not_supported("text/plain"),
                -32005,
                400,
            ),
            (A2aError::invalid_agent_response("bad"), -32006, 500),
            (A2aError::extended_agent_card_not_configured(), -32007, 400),
            (A2aError::extension_support_required("urn:x"), -32008, 400),
            (A2aError::version_not_supported("0.3"), -32009, 400),
            (A2aError::invalid_params("bad", vec![]), -32602, 400),
        ];
        for (e, code, status) in table {
            assert_eq!((e.code(), e.http_status().as_u16()), (code, status), "{e}");
            let rest = e.to_rest();
            assert_eq!(rest["error"]["code"], status);
            assert_eq!(rest["error"]["details"][0]["reason"], e.reason());
            assert_eq!(
                e.to_jsonrpc()["data"][0]["@type"],
                rest["error"]["details"][0]["@type"]
            );
        }
    }
}
