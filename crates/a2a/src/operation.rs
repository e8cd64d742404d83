//! The operations an A2A handler answers, each carrying its validated request, and what a
//! handler may answer. [`Operation::parse`] is triage's validation: a request that reaches a
//! handler has passed it.

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::card::AgentCard;
use super::env::Params;
use super::error::A2aError;
use super::requests::*;
use super::stream::Stream;
use super::types::{Message, Role, SendMessageResponse, Task, TaskState};

/// The operations of A2A 1.0, by their JSON-RPC (and gRPC) names.
pub const OPERATIONS: [&str; 11] = [
    "SendMessage",
    "SendStreamingMessage",
    "GetTask",
    "ListTasks",
    "CancelTask",
    "SubscribeToTask",
    "CreateTaskPushNotificationConfig",
    "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfigs",
    "DeleteTaskPushNotificationConfig",
    "GetExtendedAgentCard",
];

/// One validated A2A request: `match` on it as the seed's `case env["a2a.operation"] in …`.
#[derive(Debug, Clone, PartialEq)]
pub enum Operation {
    SendMessage(SendMessageRequest),
    SendStreamingMessage(SendMessageRequest),
    GetTask(GetTaskRequest),
    ListTasks(ListTasksRequest),
    CancelTask(CancelTaskRequest),
    SubscribeToTask(SubscribeToTaskRequest),
    CreateTaskPushNotificationConfig(TaskPushNotificationConfig),
    GetTaskPushNotificationConfig(TaskPushNotificationConfigRef),
    ListTaskPushNotificationConfigs(ListTaskPushNotificationConfigsRequest),
    DeleteTaskPushNotificationConfig(TaskPushNotificationConfigRef),
    GetExtendedAgentCard(GetExtendedAgentCardRequest),
}

impl Operation {
    /// The operation's name, e.g. `"SendMessage"` (the seed's `env["a2a.operation"]`).
    pub fn name(&self) -> &'static str {
        match self {
            Self::SendMessage(_) => "SendMessage",
            Self::SendStreamingMessage(_) => "SendStreamingMessage",
            Self::GetTask(_) => "GetTask",
            Self::ListTasks(_) => "ListTasks",
            Self::CancelTask(_) => "CancelTask",
            Self::SubscribeToTask(_) => "SubscribeToTask",
            Self::CreateTaskPushNotificationConfig(_) => "CreateTaskPushNotificationConfig",
            Self::GetTaskPushNotificationConfig(_) => "GetTaskPushNotificationConfig",
            Self::ListTaskPushNotificationConfigs(_) => "ListTaskPushNotificationConfigs",
            Self::DeleteTaskPushNotificationConfig(_) => "DeleteTaskPushNotificationConfig",
            Self::GetExtendedAgentCard(_) => "GetExtendedAgentCard",
        }
    }

    /// The message the request carries, if it carries one.
    pub fn message(&self) -> Option<&Message> {
        match self {
            Self::SendMessage(r) | Self::SendStreamingMessage(r) => Some(&r.message),
            _ => None,
        }
    }

    /// The `historyLength` the client asked for, if any.
    pub(crate) fn requested_history(&self) -> Option<i32> {
        match self {
            Self::SendMessage(r) | Self::SendStreamingMessage(r) => {
                r.configuration.as_ref().and_then(|c| c.history_length)
            }
            Self::GetTask(r) => r.history_length,
            Self::ListTasks(r) => r.history_length,
            _ => None,
        }
    }

    /// The `pageSize` the client asked for, if the operation pages.
    pub(crate) fn requested_page_size(&self) -> Option<i32> {
        match self {
            Self::ListTasks(r) => r.page_size,
            Self::ListTaskPushNotificationConfigs(r) => r.page_size,
            _ => None,
        }
    }

    /// Whether the operation answers with a stream.
    pub fn is_streaming(&self) -> bool {
        matches!(
            self,
            Self::SendStreamingMessage(_) | Self::SubscribeToTask(_)
        )
    }

    /// Whether the operation is one of the four push-notification-config ones.
    pub fn is_push_config(&self) -> bool {
        matches!(
            self,
            Self::CreateTaskPushNotificationConfig(_)
                | Self::GetTaskPushNotificationConfig(_)
                | Self::ListTaskPushNotificationConfigs(_)
                | Self::DeleteTaskPushNotificationConfig(_)
        )
    }

    /// The error for an operation this handler does not answer (`-32004`).
    pub fn unsupported(&self) -> A2aError {
        A2aError::unsupported_operation(format!("{} is not supported by this agent", self.name()))
    }

    /// Resolves `method` and validates `params` into an operation.
    pub fn parse(method: &str, params: Value) -> Result<Self, A2aError> {
        Self::read_from(method, params)?.validated()
    }

    /// [`Operation::parse`] of the params a binding read. Their text (which the binding found
    /// plain: a typed reading checks it as a tree would) is read straight into the request;
    /// text that reading refuses is read as a JSON tree, which says why (the same error either
    /// way).
    pub(crate) fn parse_params(method: &str, params: Params) -> Result<Self, A2aError> {
        match params {
            Params::Tree(tree) => Self::parse(method, tree),
            Params::Text(text) => match Self::read_from(method, Typed(&text)) {
                Ok(op) => op.validated(),
                Err(_) => match serde_json::from_str(&text) {
                    Ok(tree) => Self::parse(method, tree),
                    // The binding read this text once: it is JSON.
                    Err(e) => Err(A2aError::internal(format!(
                        "params read as text did not read as JSON: {e}"
                    ))),
                },
            },
        }
    }

    /// The operation `method` names, its request read from `params` (not yet validated).
    fn read_from(method: &str, params: impl Source) -> Result<Self, A2aError> {
        Ok(match method {
            "SendMessage" => Self::SendMessage(params.read()?),
            "SendStreamingMessage" => Self::SendStreamingMessage(params.read()?),
            "GetTask" => Self::GetTask(params.read()?),
            "ListTasks" => Self::ListTasks(params.read()?),
            "CancelTask" => Self::CancelTask(params.read()?),
            "SubscribeToTask" => Self::SubscribeToTask(params.read()?),
            "CreateTaskPushNotificationConfig" => {
                Self::CreateTaskPushNotificationConfig(params.read()?)
            }
            "GetTaskPushNotificationConfig" => Self::GetTaskPushNotificationConfig(params.read()?),
            "ListTaskPushNotificationConfigs" => {
                Self::ListTaskPushNotificationConfigs(params.read()?)
            }
            "DeleteTaskPushNotificationConfig" => {
                Self::DeleteTaskPushNotificationConfig(params.read()?)
            }
            "GetExtendedAgentCard" => Self::GetExtendedAgentCard(params.read()?),
            other => return Err(A2aError::method_not_found(other)),
        })
    }

    /// The checks serde cannot make: ids present, lengths not negative, a message that says
    /// who sent it and has parts, a push URL that is one.
    fn validated(mut self) -> Result<Self, A2aError> {
        let mut bad = Vec::new();
        match &mut self {
            Self::SendMessage(r) | Self::SendStreamingMessage(r) => {
                check_message(&mut r.message, "message", &mut bad);
                if let Some(c) = &r.configuration {
                    non_negative(c.history_length, "configuration.historyLength", &mut bad);
                    if let Some(p) = &c.task_push_notification_config {
                        check_url(
                            &p.url,
                            "configuration.taskPushNotificationConfig.url",
                            &mut bad,
                        );
                    }
                }
            }
            Self::GetTask(r) => {
                required(&r.id, "id", &mut bad);
                non_negative(r.history_length, "historyLength", &mut bad);
            }
            Self::ListTasks(r) => {
                non_negative(r.history_length, "historyLength", &mut bad);
                if r.status == Some(TaskState::Unspecified) {
                    r.status = None;
                }
                empty_is_none(&mut r.context_id);
                empty_is_none(&mut r.page_token);
                if r.status_timestamp_after.is_some() && r.status_after().is_none() {
                    bad.push(field("statusTimestampAfter", "not an ISO-8601 timestamp"));
                }
            }
            Self::CancelTask(r) => required(&r.id, "id", &mut bad),
            Self::SubscribeToTask(r) => required(&r.id, "id", &mut bad),
            Self::CreateTaskPushNotificationConfig(r) => {
                required(&r.task_id, "taskId", &mut bad);
                check_url(&r.url, "url", &mut bad);
                empty_is_none(&mut r.id);
            }
            Self::GetTaskPushNotificationConfig(r) | Self::DeleteTaskPushNotificationConfig(r) => {
                required(&r.task_id, "taskId", &mut bad);
                required(&r.id, "id", &mut bad);
            }
            Self::ListTaskPushNotificationConfigs(r) => {
                required(&r.task_id, "taskId", &mut bad);
                empty_is_none(&mut r.page_token);
            }
            Self::GetExtendedAgentCard(_) => {}
        }
        if bad.is_empty() {
            Ok(self)
        } else {
            let summary = bad
                .iter()
                .map(|(f, why)| format!("{f}: {why}"))
                .collect::<Vec<_>>()
                .join("; ");
            Err(A2aError::invalid_params(
                format!("Invalid params: {summary}"),
                bad,
            ))
        }
    }
}

/// Where a request is read from: a JSON tree, or JSON text.
trait Source {
    fn read<T: DeserializeOwned>(self) -> Result<T, A2aError>;
}

impl Source for Value {
    fn read<T: DeserializeOwned>(self) -> Result<T, A2aError> {
        read(self)
    }
}

/// JSON text read straight into a request. Its errors say nothing of where: a refused text is
/// read again as a tree ([`Operation::parse_params`]), whose error is the one answered.
struct Typed<'a>(&'a str);

impl Source for Typed<'_> {
    fn read<T: DeserializeOwned>(self) -> Result<T, A2aError> {
        serde_json::from_str(self.0).map_err(|e| A2aError::invalid_params(e.to_string(), vec![]))
    }
}

fn read<T: DeserializeOwned>(params: Value) -> Result<T, A2aError> {
    serde_path_to_error::deserialize(params).map_err(|e| {
        let path = e.path().to_string();
        let why = e.inner().to_string();
        let at = if path == "." { String::new() } else { path };
        A2aError::invalid_params(
            if at.is_empty() {
                format!("Invalid params: {why}")
            } else {
                format!("Invalid params: {at}: {why}")
            },
            vec![(at, why)],
        )
    })
}

fn field(name: &str, why: &str) -> (String, String) {
    (name.to_owned(), why.to_owned())
}

fn required(value: &str, name: &str, bad: &mut Vec<(String, String)>) {
    if value.trim().is_empty() {
        bad.push(field(name, "required, and may not be empty"));
    }
}

fn non_negative(value: Option<i32>, name: &str, bad: &mut Vec<(String, String)>) {
    if value.is_some_and(|v| v < 0) {
        bad.push(field(name, "may not be negative"));
    }
}

fn empty_is_none(value: &mut Option<String>) {
    if value.as_deref().is_some_and(str::is_empty) {
        *value = None;
    }
}

fn check_message(m: &mut Message, at: &str, bad: &mut Vec<(String, String)>) {
    required(&m.message_id, &format!("{at}.messageId"), bad);
    if m.role == Role::Unspecified {
        bad.push(field(&format!("{at}.role"), "ROLE_USER or ROLE_AGENT"));
    }
    if m.parts.is_empty() {
        bad.push(field(&format!("{at}.parts"), "at least one part"));
    }
    empty_is_none(&mut m.task_id);
    empty_is_none(&mut m.context_id);
}

fn check_url(url: &str, name: &str, bad: &mut Vec<(String, String)>) {
    let ok = ["http://", "https://"].iter().any(|s| {
        url.len() > s.len()
            && url
                .get(..s.len())
                .is_some_and(|p| p.eq_ignore_ascii_case(s))
    });
    if !ok {
        bad.push(field(name, "an absolute http(s) URL"));
    }
}

/// What a handler answers. The boundary checks it fits the operation: a mismatch is an
/// `InvalidAgentResponseError` (-32006), never a malformed response.
#[derive(Debug)]
pub enum Reply {
    /// `SendMessage`: a task or a direct message.
    SendMessage(SendMessageResponse),
    /// `GetTask`, `CancelTask`; also accepted for `SendMessage` (as `{"task": …}`).
    Task(Task),
    /// `ListTasks`.
    Tasks(ListTasksResponse),
    /// `Create`/`GetTaskPushNotificationConfig`.
    PushConfig(TaskPushNotificationConfig),
    /// `ListTaskPushNotificationConfigs`.
    PushConfigs(ListTaskPushNotificationConfigsResponse),
    /// `DeleteTaskPushNotificationConfig`.
    Deleted,
    /// `GetExtendedAgentCard`.
    AgentCard(Box<AgentCard>),
    /// `SendStreamingMessage`, `SubscribeToTask`: what [`StreamBuilder::open`](crate::stream::StreamBuilder::open) returns.
    Stream(Stream),
}

impl Reply {
    /// The response body for `operation`, as JSON text (written straight from the reply, not
    /// through a JSON tree), or the error saying this reply does not answer it.
    pub(crate) fn into_json(self, operation: &str) -> Result<String, A2aError> {
        let text = match (operation, self) {
            ("SendMessage", Self::SendMessage(r)) => serde_json::to_string(&r),
            ("SendMessage", Self::Task(t)) => serde_json::to_string(&SendMessageResponse::Task(t)),
            ("GetTask" | "CancelTask", Self::Task(t)) => serde_json::to_string(&t),
            ("ListTasks", Self::Tasks(r)) => serde_json::to_string(&r),
            (
                "CreateTaskPushNotificationConfig" | "GetTaskPushNotificationConfig",
                Self::PushConfig(c),
            ) => serde_json::to_string(&c),
            ("ListTaskPushNotificationConfigs", Self::PushConfigs(r)) => serde_json::to_string(&r),
            ("DeleteTaskPushNotificationConfig", Self::Deleted) => Ok("{}".to_owned()),
            ("GetExtendedAgentCard", Self::AgentCard(c)) => serde_json::to_string(&c),
            (op, other) => {
                return Err(A2aError::invalid_agent_response(format!(
                    "the agent answered {op} with {}",
                    other.kind()
                )));
            }
        };
        text.map_err(A2aError::internal)
    }

    fn kind(&self) -> &'static str {
        match self {
            Self::SendMessage(_) => "a SendMessageResponse",
            Self::Task(_) => "a Task",
            Self::Tasks(_) => "a ListTasksResponse",
            Self::PushConfig(_) => "a TaskPushNotificationConfig",
            Self::PushConfigs(_) => "a ListTaskPushNotificationConfigsResponse",
            Self::Deleted => "an empty response",
            Self::AgentCard(_) => "an AgentCard",
            Self::Stream(_) => "a stream",
        }
    }
}

impl From<Task> for Reply {
    fn from(t: Task) -> Self {
        Self::Task(t)
    }
}

impl From<Message> for Reply {
    fn from(m: Message) -> Self {
        Self::SendMessage(SendMessageResponse::Message(m))
    }
}

impl From<SendMessageResponse> for Reply {
    fn from(r: SendMessageResponse) -> Self {
        Self::SendMessage(r)
    }
}

impl From<Stream> for Reply {
    fn from(s: Stream) -> Self {
        Self::Stream(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use serde_json::json;

    #[test]
    fn triage_names_every_bad_field() {
        let e = Operation::parse(
            "SendMessage",
            json!({"message": {"messageId": "", "role": "ROLE_UNSPECIFIED", "parts": []}}),
        )
        .expect_err("invalid");
        assert_eq!(e.kind(), &ErrorKind::InvalidParams);
        let fields: Vec<_> = e.fields().iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(
            fields,
            ["message.messageId", "message.role", "message.parts"]
        );

        let e = Operation::parse("GetTask", json!({"id": 7})).expect_err("id is a string");
        assert_eq!(e.fields()[0].0, "id");
        let e = Operation::parse("message/send", json!({})).expect_err("0.3 name");
        assert_eq!(e.kind(), &ErrorKind::MethodNotFound);
    }

    #[test]
    fn a_valid_request_is_normalised() {
        let op = Operation::parse(
            "SendMessage",
            json!({"message": {"messageId": "m", "role": "ROLE_USER", "taskId": "",
                "parts": [{"text": "hi"}]}, "unknownField": 1}),
        )
        .expect("valid");
        assert_eq!(op.message().map(|m| m.task_id.clone()), Some(None));
        assert_eq!(op.message().map(Message::text).as_deref(), Some("hi"));
    }

    #[test]
    fn a_reply_must_answer_its_operation() {
        let e = Reply::Deleted.into_json("GetTask").expect_err("mismatch");
        assert_eq!(e.code(), -32006);
        assert_eq!(
            Reply::Deleted
                .into_json("DeleteTaskPushNotificationConfig")
                .expect("fits"),
            "{}"
        );
    }

    /// A reply's text is, byte for byte, its JSON tree's (what was written before the text was
    /// written straight): the same members in the same order, the same escapes and numbers.
    #[test]
    fn a_reply_is_written_as_its_json_tree_would_be() {
        use crate::types::{Artifact, Part, TaskStatus};
        let mut status = TaskStatus::now(TaskState::InputRequired);
        status.message = Some(Message::agent_text("m.1", "Approve \"it\"?\n\u{7f} é"));
        let task = Task {
            id: "t.1".into(),
            context_id: "c".into(),
            status,
            artifacts: vec![Artifact {
                artifact_id: "t.1.result".into(),
                name: Some("result".into()),
                description: None,
                parts: vec![
                    Part::data(json!({"z": 1, "a": [1.5, null, "x"]})),
                    Part::text("ok"),
                ],
                metadata: json!({"k": {"b": 2, "a": 1}}).as_object().cloned(),
                extensions: vec![],
            }],
            history: vec![Message::agent_text("m.0", "hi")],
            metadata: None,
        };
        let cases = [
            (
                "SendMessage",
                Reply::Task(task.clone()),
                serde_json::to_value(SendMessageResponse::Task(task.clone())),
            ),
            (
                "GetTask",
                Reply::Task(task.clone()),
                serde_json::to_value(&task),
            ),
            (
                "SendMessage",
                Reply::SendMessage(SendMessageResponse::Message(Message::agent_text("m", "ok"))),
                serde_json::to_value(SendMessageResponse::Message(Message::agent_text("m", "ok"))),
            ),
            (
                "ListTasks",
                Reply::Tasks(ListTasksResponse {
                    tasks: vec![task.clone(), task.clone()],
                    next_page_token: "p\"2".into(),
                    page_size: 2,
                    total_size: 7,
                }),
                serde_json::to_value(ListTasksResponse {
                    tasks: vec![task.clone(), task.clone()],
                    next_page_token: "p\"2".into(),
                    page_size: 2,
                    total_size: 7,
                }),
            ),
        ];
        for (op, reply, tree) in cases {
            let tree = tree.expect("serializes").to_string();
            assert_eq!(reply.into_json(op).expect("fits"), tree, "{op}");
        }
    }
}
