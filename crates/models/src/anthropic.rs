//! The `anthropic` provider: the Messages API, streamed, with tool use and extended thinking.
//! `POST {baseUrl}/v1/messages`, the key as `x-api-key`, `anthropic-version: 2023-06-01`.

mod request;
mod stream;

use std::sync::Arc;

use duet_runtime::{Model, ModelChunk, ModelError, ModelRequest, Provider};
use futures::stream::BoxStream;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::config::ProviderConfig;
use crate::http::Transport;

/// The API version every request names.
const API_VERSION: &str = "2023-06-01";

/// The `anthropic` provider, for one configuration.
#[derive(Clone, Debug)]
pub struct Anthropic {
    transport: Arc<Transport>,
}

impl Anthropic {
    /// A provider calling the server `config` describes.
    pub fn new(config: ProviderConfig) -> Self {
        let mut auth = HeaderMap::new();
        auth.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(API_VERSION),
        );
        if let Some(key) = &config.api_key
            && let Ok(mut value) = HeaderValue::from_str(key.expose())
        {
            value.set_sensitive(true);
            auth.insert(HeaderName::from_static("x-api-key"), value);
        }
        Anthropic {
            transport: Transport::new(config, auth),
        }
    }
}

impl Provider for Anthropic {
    fn model(&self, definition: &duet_spec::ModelDef) -> Result<Arc<dyn Model>, ModelError> {
        Ok(Arc::new(AnthropicModel {
            transport: Arc::clone(&self.transport),
            settings: request::Settings {
                model: definition.model.clone(),
                max_output_tokens: definition.capabilities.max_output_tokens,
                provider_options: definition.provider_options.clone(),
                images: definition.capabilities.supports_images != Some(false),
                documents: definition.capabilities.supports_documents != Some(false),
            },
        }))
    }
}

/// One model of an [`Anthropic`] provider.
#[derive(Debug)]
struct AnthropicModel {
    transport: Arc<Transport>,
    settings: request::Settings,
}

impl Model for AnthropicModel {
    fn stream(&self, request: ModelRequest) -> BoxStream<'static, Result<ModelChunk, ModelError>> {
        let body = request::body(&self.settings, &request);
        self.transport.stream(
            "/v1/messages",
            &self.settings.model,
            body,
            stream::AnthropicDecoder::new,
        )
    }
}
