//! The model port: a model turns a context into a stream of text, thinking and tool-call chunks.
//! Providers (`duet-models`) build a [`Model`] from a model definition.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::stream::BoxStream;

use crate::types::{ImageRef, Role, ThreadId, ToolCall};

// The tokens a call used: data (`types.rs`), named here too as the model port's vocabulary
// (`ModelChunk::Usage`).
pub(crate) use crate::types::Usage;

/// One message of a model's context, from the acting side's perspective.
#[derive(Clone, Debug, PartialEq)]
pub struct ChatMessage {
    /// Its role for the acting side: its own messages are `assistant`, its sibling's `user`.
    pub role: Role,
    /// Its text, if it has any.
    pub content: Option<String>,
    /// The tool calls it made (only the acting side's own are kept).
    pub tool_calls: Vec<ToolCall>,
    /// For a `tool` message: the id of the call it answers.
    pub tool_call_id: Option<String>,
    /// For a `tool` message: the name of the tool that answered.
    pub name: Option<String>,
    /// For a `tool` message: whether the call failed.
    pub is_error: bool,
    /// For the acting side's own `assistant` message: the reasoning it streamed.
    pub thinking: Option<String>,
    /// For the acting side's own `assistant` message: what its provider asked to keep with it
    /// ([`ModelChunk::ProviderData`], e.g. thinking signatures), given back to that provider.
    pub provider_data: Option<serde_json::Value>,
    /// Images that came with the message (an inbound prompt's, or image attachments the step
    /// loaded), for models that take images.
    pub images: Vec<ImageRef>,
    /// Documents that came with the message (PDF attachments the step loaded), for models that
    /// take documents.
    pub documents: Vec<DocumentRef>,
    /// Thread files the stored message names. The step turns them into `images`, `documents`
    /// or a line of `content` before the model is called ([`crate::model_files`]); providers do not
    /// read them.
    pub attachments: Vec<crate::files::AttachmentRef>,
}

/// A document sent to a model with a message: a thread file's bytes (a PDF).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DocumentRef {
    /// The file's path in the thread (its last segment is the filename a provider is given).
    pub path: String,
    /// Its type, e.g. `application/pdf`.
    pub mime_type: String,
    /// Its size in bytes.
    pub size: i64,
    /// Base64.
    pub data: String,
}

impl DocumentRef {
    /// The filename a provider is given: the path's last segment.
    pub fn filename(&self) -> &str {
        crate::files::path::name(&self.path)
    }

    /// The line a model that takes no documents is sent instead ([`attachment_line`]).
    pub fn line(&self) -> String {
        attachment_line(&self.path, &self.mime_type, self.size)
    }
}

/// The line a model is sent for a thread file it is not sent the bytes of, so it knows the file
/// is there and can read it with a tool: `[attachment /attachments/x.csv, text/csv, 12 KB]`.
pub fn attachment_line(path: &str, mime_type: &str, size: i64) -> String {
    format!("[attachment {path}, {mime_type}, {}]", human_size(size))
}

/// `size` bytes for a person: `512 bytes`, `12 KB`, `3.4 MB` (1 KB = 1,024 bytes).
fn human_size(size: i64) -> String {
    const KB: i64 = 1024;
    const MB: i64 = 1024 * KB;
    if size < KB {
        format!("{} bytes", size.max(0))
    } else if size < MB {
        format!("{} KB", (size + KB - 1) / KB)
    } else {
        format!("{:.1} MB", size as f64 / MB as f64)
    }
}

/// A tool offered to the model.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolSpec {
    /// The name the model calls it by.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of the argument object.
    pub parameters: serde_json::Value,
}

/// One model call.
#[derive(Clone, Debug)]
pub struct ModelRequest {
    /// The thread the call is made for.
    pub thread: ThreadId,
    /// How many calls of this model the thread has committed before this one. The scripted
    /// provider plays the entry that answers call `call_index` (entries count `repeat` calls
    /// each), so its position follows the committed history and survives restarts.
    pub call_index: usize,
    /// The system prompt text, includes and variables filled.
    pub system: String,
    /// The context, from the acting side's perspective.
    pub messages: Vec<ChatMessage>,
    /// The tools the model may call.
    pub tools: Vec<ToolSpec>,
    /// Whether the model may, must or must not call a tool (the prompt's `toolChoice`).
    pub tool_choice: duet_spec::ToolChoice,
    /// Whether the model may call several tools in one answer (the prompt's
    /// `parallelToolCalls`); `None` leaves it to the provider.
    pub parallel_tool_calls: Option<bool>,
    /// The prompt's `reasoning` (effort, token budget, whether to include it).
    pub reasoning: Option<duet_spec::Reasoning>,
    /// The prompt's `providerOptions`. The provider merges its own model definition's
    /// `providerOptions` under them (the prompt wins) into the request body: it knows its
    /// fields, and a fallback model brings its own.
    pub provider_options: serde_json::Map<String, serde_json::Value>,
}

/// A piece of a model's answer.
#[derive(Clone, Debug, PartialEq)]
pub enum ModelChunk {
    /// A piece of the answer's text.
    Text(String),
    /// A piece of the model's reasoning.
    Thinking(String),
    /// A complete tool call (providers assemble streamed argument pieces).
    ToolCall {
        /// The provider's id for the call; without one the runtime makes one up.
        id: Option<String>,
        /// The tool to call.
        name: String,
        /// The call's arguments: an object. Arguments that did not parse are given as the raw
        /// text (a JSON string): the call then fails with an error result the model sees.
        arguments: serde_json::Value,
    },
    /// Data the provider needs back with this message on the next call (Anthropic's thinking
    /// blocks and their signatures): merged into the message's `provider_data` (objects merge
    /// key by key; arrays under the same key are appended).
    ProviderData(serde_json::Value),
    /// What the call cost, in tokens, as the provider counts them (several chunks add up).
    Usage(Usage),
    /// Why the model stopped, in the provider's words (`stop`, `length`, `tool_calls`,
    /// `end_turn`, `max_tokens`, ...): the `chat` span's `gen_ai.response.finish_reasons`.
    /// Without one the runtime says `tool_calls` when the answer calls tools, else `stop`.
    Finish(String),
    /// The call failed and is tried again after `delay_ms` (announced before the wait).
    Retrying {
        /// The attempt about to be made (2 for the first retry).
        attempt: u32,
        /// The most attempts that will be made.
        max_attempts: u32,
        /// How long until it.
        delay_ms: u64,
        /// Why (the failure, for people).
        reason: String,
    },
}

/// A model failure, after the provider's own retries.
#[derive(Clone, Debug, thiserror::Error)]
#[error("{message}")]
pub struct ModelError {
    /// What went wrong, for people: a failed step's error text. Never holds a key.
    pub message: String,
    /// Whether trying again may succeed (a 429, a 5xx, a dropped connection, a timeout).
    pub retryable: bool,
}

impl ModelError {
    /// A failure described by `message`; `retryable` if trying again may succeed.
    pub fn new(message: impl Into<String>, retryable: bool) -> Self {
        ModelError {
            message: message.into(),
            retryable,
        }
    }
}

/// A model ready to call.
pub trait Model: Send + Sync + 'static {
    /// Calls the model on `request`, streaming its answer as the provider produces it. An
    /// error item ends the call: providers retry transient failures themselves first (each
    /// retry a [`ModelChunk::Retrying`]), but only while nothing of the answer was streamed;
    /// the runtime then tries the model's `fallbacks`. Dropping the stream must close the
    /// request at once.
    fn stream(&self, request: ModelRequest) -> BoxStream<'static, Result<ModelChunk, ModelError>>;
}

/// Builds models of one provider from their definitions.
pub trait Provider: Send + Sync + 'static {
    /// The model `definition` describes (a runtime builds each model once, then reuses it).
    fn model(&self, definition: &duet_spec::ModelDef) -> Result<Arc<dyn Model>, ModelError>;
}

/// Providers by name (`scripted`, `openai`, ...).
#[derive(Clone, Default)]
pub struct Providers(BTreeMap<String, Arc<dyn Provider>>);

impl Providers {
    /// No providers.
    pub fn new() -> Self {
        Providers::default()
    }

    /// These providers and `provider`, registered as `name`: the `provider` a model
    /// definition names.
    pub fn with(mut self, name: &str, provider: impl Provider) -> Self {
        self.0.insert(name.to_owned(), Arc::new(provider));
        self
    }

    /// The provider registered as `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Provider>> {
        self.0.get(name)
    }
}
