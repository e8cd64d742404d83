//! A2A 1.0 data objects as they travel in JSON (ProtoJSON of `lf.a2a.v1`): camelCase members,
//! enums as their SCREAMING names, default values left out, the member name as the type of a
//! `oneof` (`{"text": …}`, `{"statusUpdate": …}`). Unknown members are ignored on input.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A JSON object (`google.protobuf.Struct`), for `metadata`.
pub type Metadata = Map<String, Value>;

/// Where a task is in its life (`TaskState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TaskState {
    #[serde(rename = "TASK_STATE_UNSPECIFIED")]
    Unspecified,
    #[serde(rename = "TASK_STATE_SUBMITTED")]
    Submitted,
    #[serde(rename = "TASK_STATE_WORKING")]
    Working,
    #[serde(rename = "TASK_STATE_COMPLETED")]
    Completed,
    #[serde(rename = "TASK_STATE_FAILED")]
    Failed,
    #[serde(rename = "TASK_STATE_CANCELED")]
    Canceled,
    #[serde(rename = "TASK_STATE_INPUT_REQUIRED")]
    InputRequired,
    #[serde(rename = "TASK_STATE_REJECTED")]
    Rejected,
    #[serde(rename = "TASK_STATE_AUTH_REQUIRED")]
    AuthRequired,
}

impl TaskState {
    /// Completed, failed, canceled or rejected: nothing more happens to the task.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Self::Completed | Self::Failed | Self::Canceled | Self::Rejected
        )
    }

    /// Input or auth required: the task waits for the client.
    pub fn is_interrupted(self) -> bool {
        matches!(self, Self::InputRequired | Self::AuthRequired)
    }

    /// The wire name, e.g. `TASK_STATE_WORKING`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unspecified => "TASK_STATE_UNSPECIFIED",
            Self::Submitted => "TASK_STATE_SUBMITTED",
            Self::Working => "TASK_STATE_WORKING",
            Self::Completed => "TASK_STATE_COMPLETED",
            Self::Failed => "TASK_STATE_FAILED",
            Self::Canceled => "TASK_STATE_CANCELED",
            Self::InputRequired => "TASK_STATE_INPUT_REQUIRED",
            Self::Rejected => "TASK_STATE_REJECTED",
            Self::AuthRequired => "TASK_STATE_AUTH_REQUIRED",
        }
    }
}

/// Who sent a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Role {
    #[serde(rename = "ROLE_UNSPECIFIED")]
    Unspecified,
    #[serde(rename = "ROLE_USER")]
    User,
    #[serde(rename = "ROLE_AGENT")]
    Agent,
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    #[serde(alias = "message_id")]
    pub message_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(alias = "context_id")]
    pub context_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(alias = "task_id")]
    pub task_id: Option<String>,
    pub role: Role,
    pub parts: Vec<Part>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[serde(alias = "reference_task_ids")]
    pub reference_task_ids: Vec<String>,
}

impl Message {
    /// An agent message of one text part.
    pub fn agent_text(message_id: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            message_id: message_id.into(),
            context_id: None,
            task_id: None,
            role: Role::Agent,
            parts: vec![Part::text(text)],
            metadata: None,
            extensions: Vec::new(),
            reference_task_ids: Vec::new(),
        }
    }

    /// The text parts, joined by newlines (what the seed's `env["a2a.message"]` holds).
    pub fn text(&self) -> String {
        let texts: Vec<&str> = self
            .parts
            .iter()
            .filter_map(|p| match &p.content {
                PartContent::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect();
        texts.join("\n")
    }
}

/// One piece of content: text, raw bytes (base64), a URL or JSON data.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Part {
    #[serde(flatten)]
    pub content: PartContent,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filename: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[serde(alias = "media_type")]
    pub media_type: Option<String>,
}

/// The `oneof content` of a [`Part`].
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum PartContent {
    Text(String),
    /// Bytes, base64 in JSON.
    Raw(String),
    Url(String),
    Data(Value),
}

impl Part {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        Self::of(PartContent::Text(text.into()))
    }

    /// A structured-data part.
    pub fn data(data: Value) -> Self {
        Self::of(PartContent::Data(data))
    }

    /// A part of raw bytes, given in base64.
    pub fn of_raw(base64: impl Into<String>) -> Self {
        Self::of(PartContent::Raw(base64.into()))
    }

    /// A part that points at a URL.
    pub fn of_url(url: impl Into<String>) -> Self {
        Self::of(PartContent::Url(url.into()))
    }

    fn of(content: PartContent) -> Self {
        Self {
            content,
            metadata: None,
            filename: None,
            media_type: None,
        }
    }
}

impl<'de> Deserialize<'de> for Part {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Wire {
            text: Option<String>,
            raw: Option<String>,
            url: Option<String>,
            #[serde(default, deserialize_with = "present")]
            data: Option<Value>,
            metadata: Option<Metadata>,
            filename: Option<String>,
            #[serde(alias = "media_type")]
            media_type: Option<String>,
        }
        let w = Wire::deserialize(deserializer)?;
        let mut contents = [
            w.text.map(PartContent::Text),
            w.raw.map(PartContent::Raw),
            w.url.map(PartContent::Url),
            w.data.map(PartContent::Data),
        ]
        .into_iter()
        .flatten();
        let Some(content) = contents.next() else {
            return Err(serde::de::Error::custom(
                "a part needs one of `text`, `raw`, `url` or `data`",
            ));
        };
        if contents.next().is_some() {
            return Err(serde::de::Error::custom(
                "a part has exactly one of `text`, `raw`, `url` or `data`",
            ));
        }
        Ok(Self {
            content,
            metadata: w.metadata,
            filename: w.filename,
            media_type: w.media_type,
        })
    }
}

/// Reads a member that is present as `Some`, even when its value is `null`.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// An output of a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Artifact {
    #[serde(alias = "artifact_id")]
    pub artifact_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub parts: Vec<Part>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<String>,
}

/// A task's state, the message that goes with it and when it was set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatus {
    pub state: TaskState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<Message>,
    /// ISO-8601 UTC, `…Z` (see [`timestamp`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
}

impl TaskStatus {
    /// A status in `state` set now, without a message.
    pub fn now(state: TaskState) -> Self {
        Self {
            state,
            message: None,
            timestamp: Some(timestamp(chrono::Utc::now())),
        }
    }
}

/// The unit of work an agent does for a client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    pub id: String,
    #[serde(alias = "context_id")]
    pub context_id: String,
    pub status: TaskStatus,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<Artifact>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<Message>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

impl Task {
    /// Keeps at most the `n` most recent messages of the history (`historyLength`).
    pub fn trim_history(&mut self, n: usize) {
        let extra = self.history.len().saturating_sub(n);
        self.history.drain(..extra);
    }
}

/// A task's status changed (a stream event and a push payload).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskStatusUpdateEvent {
    #[serde(alias = "task_id")]
    pub task_id: String,
    #[serde(alias = "context_id")]
    pub context_id: String,
    pub status: TaskStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

/// An artifact was created or extended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskArtifactUpdateEvent {
    #[serde(alias = "task_id")]
    pub task_id: String,
    #[serde(alias = "context_id")]
    pub context_id: String,
    pub artifact: Artifact,
    #[serde(default, skip_serializing_if = "is_false")]
    pub append: bool,
    #[serde(default, skip_serializing_if = "is_false")]
    #[serde(alias = "last_chunk")]
    pub last_chunk: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

pub(crate) fn is_false(b: &bool) -> bool {
    !*b
}

/// One event of a stream, and the body of a push notification.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StreamResponse {
    Task(Task),
    Message(Message),
    StatusUpdate(TaskStatusUpdateEvent),
    ArtifactUpdate(TaskArtifactUpdateEvent),
}

impl StreamResponse {
    /// The state this event leaves the task in, if it says.
    pub fn state(&self) -> Option<TaskState> {
        match self {
            Self::Task(t) => Some(t.status.state),
            Self::StatusUpdate(u) => Some(u.status.state),
            Self::Message(_) | Self::ArtifactUpdate(_) => None,
        }
    }
}

/// What `SendMessage` answers: a task, or a direct message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SendMessageResponse {
    Task(Task),
    Message(Message),
}

/// ISO-8601 UTC with milliseconds and `Z`, as A2A's timestamps are written.
pub fn timestamp(at: chrono::DateTime<chrono::Utc>) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_part_is_exactly_one_content() {
        let p: Part = serde_json::from_value(json!({"text": "hi", "mediaType": "text/plain"}))
            .expect("a text part");
        assert_eq!(p.content, PartContent::Text("hi".into()));
        assert_eq!(
            serde_json::to_value(&p).expect("serializes"),
            json!({"text": "hi", "mediaType": "text/plain"})
        );
        let null: Part = serde_json::from_value(json!({"data": null})).expect("null data");
        assert_eq!(null.content, PartContent::Data(Value::Null));
        for bad in [
            json!({}),
            json!({"text": "a", "url": "b"}),
            json!({"metadata": {}}),
        ] {
            assert!(
                serde_json::from_value::<Part>(bad.clone()).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn stream_events_are_named_by_their_member() {
        let e = StreamResponse::StatusUpdate(TaskStatusUpdateEvent {
            task_id: "t".into(),
            context_id: "c".into(),
            status: TaskStatus {
                state: TaskState::Working,
                message: None,
                timestamp: None,
            },
            metadata: None,
        });
        assert_eq!(
            serde_json::to_value(&e).expect("serializes"),
            json!({"statusUpdate": {"taskId": "t", "contextId": "c",
                "status": {"state": "TASK_STATE_WORKING"}}})
        );
    }

    #[test]
    fn history_keeps_the_most_recent() {
        let mut t = Task {
            id: "t".into(),
            context_id: "c".into(),
            status: TaskStatus::now(TaskState::Working),
            artifacts: vec![],
            history: (0..5)
                .map(|i| Message::agent_text(i.to_string(), "x"))
                .collect(),
            metadata: None,
        };
        t.trim_history(2);
        let ids: Vec<_> = t.history.iter().map(|m| m.message_id.as_str()).collect();
        assert_eq!(ids, ["3", "4"]);
        assert!(timestamp(chrono::Utc::now()).ends_with('Z'));
    }
}
