//! The model port: a model turns a context into a stream of text, thinking and tool-call chunks.
//! Providers (`duet-models`) build a [`Model`] from a model definition.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::stream::BoxStream;

use crate::types::{Role, ThreadId, ToolCall};

/// One message of a model's context, from the acting side's perspective.
#[derive(Clone, Debug, PartialEq)]
pub struct ChatMessage {
    pub role: Role,
    pub content: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    pub tool_call_id: Option<String>,
    pub name: Option<String>,
}

/// A tool offered to the model.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON Schema of the argument object.
    pub parameters: serde_json::Value,
}

/// One model call.
#[derive(Clone, Debug)]
pub struct ModelRequest {
    pub thread: ThreadId,
    /// How many calls of this model the thread has committed before this one. The scripted
    /// provider plays `script[call_index]`, so its position follows the committed history and
    /// survives restarts.
    pub call_index: usize,
    pub system: String,
    pub messages: Vec<ChatMessage>,
    pub tools: Vec<ToolSpec>,
    pub tool_choice: duet_spec::ToolChoice,
    pub parallel_tool_calls: Option<bool>,
}

/// A piece of a model's answer.
#[derive(Clone, Debug, PartialEq)]
pub enum ModelChunk {
    Text(String),
    Thinking(String),
    /// A complete tool call (providers assemble streamed argument pieces).
    ToolCall {
        id: Option<String>,
        name: String,
        arguments: serde_json::Value,
    },
    Usage {
        input_tokens: u64,
        output_tokens: u64,
    },
}

/// A model failure.
#[derive(Clone, Debug, thiserror::Error)]
#[error("{message}")]
pub struct ModelError {
    pub message: String,
    /// Whether trying again may succeed.
    pub retryable: bool,
}

impl ModelError {
    pub fn new(message: impl Into<String>, retryable: bool) -> Self {
        ModelError {
            message: message.into(),
            retryable,
        }
    }
}

/// A model ready to call.
pub trait Model: Send + Sync + 'static {
    fn stream(&self, request: ModelRequest) -> BoxStream<'static, Result<ModelChunk, ModelError>>;
}

/// Builds models of one provider from their definitions.
pub trait Provider: Send + Sync + 'static {
    fn model(&self, definition: &duet_spec::ModelDef) -> Result<Arc<dyn Model>, ModelError>;
}

/// Providers by name (`scripted`, `openai`, ...).
#[derive(Clone, Default)]
pub struct Providers(BTreeMap<String, Arc<dyn Provider>>);

impl Providers {
    pub fn new() -> Self {
        Providers::default()
    }

    pub fn with(mut self, name: &str, provider: impl Provider) -> Self {
        self.0.insert(name.to_owned(), Arc::new(provider));
        self
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn Provider>> {
        self.0.get(name)
    }
}
