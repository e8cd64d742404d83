//! The `openai` provider: the Chat Completions wire format, streamed, for OpenAI and every
//! server compatible with it (vLLM, Ollama, llama.cpp, LM Studio, LiteLLM, OpenRouter).
//! `POST {baseUrl}/chat/completions`, the key as `Authorization: Bearer`.

mod request;
mod stream;

use std::sync::Arc;

use duet_runtime::{Model, ModelChunk, ModelError, ModelRequest, Provider};
use futures::stream::BoxStream;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};

use crate::config::ProviderConfig;
use crate::http::Transport;

/// OpenAI's own service, where the output cap is `max_completion_tokens`.
const OPENAI_HOST: &str = "https://api.openai.com/";

/// The `openai` provider, for one configuration.
#[derive(Clone, Debug)]
pub struct OpenAi {
    transport: Arc<Transport>,
}

impl OpenAi {
    /// A provider calling the server `config` describes.
    pub fn new(config: ProviderConfig) -> Self {
        let mut auth = HeaderMap::new();
        if let Some(key) = &config.api_key
            && let Ok(mut value) = HeaderValue::from_str(&format!("Bearer {}", key.expose()))
        {
            value.set_sensitive(true);
            auth.insert(AUTHORIZATION, value);
        }
        OpenAi {
            transport: Transport::new(config, auth),
        }
    }
}

impl Provider for OpenAi {
    fn model(&self, definition: &duet_spec::ModelDef) -> Result<Arc<dyn Model>, ModelError> {
        let official = format!("{}/", self.transport.config.base_url).starts_with(OPENAI_HOST);
        Ok(Arc::new(OpenAiModel {
            transport: Arc::clone(&self.transport),
            settings: request::Settings {
                model: definition.model.clone(),
                max_output_tokens: definition.capabilities.max_output_tokens,
                max_completion_tokens: official,
                provider_options: definition.provider_options.clone(),
                images: definition.capabilities.supports_images != Some(false),
                documents: definition.capabilities.supports_documents != Some(false),
            },
        }))
    }
}

/// One model of an [`OpenAi`] provider.
#[derive(Debug)]
struct OpenAiModel {
    transport: Arc<Transport>,
    settings: request::Settings,
}

impl Model for OpenAiModel {
    fn stream(&self, request: ModelRequest) -> BoxStream<'static, Result<ModelChunk, ModelError>> {
        let body = request::body(&self.settings, &request);
        self.transport.stream(
            "/chat/completions",
            &self.settings.model,
            body,
            stream::OpenAiDecoder::new,
        )
    }
}
