//! The transport every API provider shares: one HTTP client per provider, a request sent and
//! its server-sent events handed to a wire-format [`Decoder`], transient failures retried.
//!
//! A failure is retried (after a [`ModelChunk::Retrying`], then the wait) when it is transient —
//! a connection error, a timeout, a 408/409/429/5xx, a retryable error event inside a 200
//! stream — attempts remain, and this attempt has emitted no text, thinking or tool call.
//! Otherwise the stream ends with the error. Dropping the stream drops the response, which
//! closes the connection at once. Decoders hold back usage and provider data until the answer
//! is complete, so a retried attempt leaves nothing behind.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use duet_runtime::{ModelChunk, ModelError};
use eventsource_stream::{Event, Eventsource};
use futures::StreamExt;
use futures::stream::BoxStream;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::config::ProviderConfig;
use crate::retry::{retry_after, retryable_status};

/// Why an attempt failed, for people, and whether to try again.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Failure {
    pub(crate) message: String,
    pub(crate) retryable: bool,
    pub(crate) retry_after: Option<Duration>,
}

impl Failure {
    pub(crate) fn new(message: impl Into<String>, retryable: bool) -> Self {
        Failure {
            message: message.into(),
            retryable,
            retry_after: None,
        }
    }
}

/// A wire format's reading of a 200 response's events.
pub(crate) trait Decoder: Send + 'static {
    /// The chunks one event gives, or the failure it reports.
    fn event(&mut self, event: &Event) -> Result<Vec<ModelChunk>, Failure>;
    /// Whether the answer is complete (nothing more needs reading).
    fn done(&self) -> bool;
    /// What is left once the events end (assembled calls, provider data, usage), or why the
    /// answer is incomplete.
    fn finish(&mut self) -> Result<Vec<ModelChunk>, Failure>;
}

/// One provider's HTTP client and configuration. The client is built on first use.
#[derive(Debug)]
pub(crate) struct Transport {
    pub(crate) config: ProviderConfig,
    auth: HeaderMap,
    client: OnceLock<Result<reqwest::Client, String>>,
}

impl Transport {
    /// A transport for `config`, sending `auth` (the provider's key headers) with every request.
    pub(crate) fn new(config: ProviderConfig, auth: HeaderMap) -> Arc<Self> {
        Arc::new(Transport {
            config,
            auth,
            client: OnceLock::new(),
        })
    }

    fn client(&self) -> Result<reqwest::Client, Failure> {
        let built = self.client.get_or_init(|| {
            let mut headers = self.auth.clone();
            for (k, v) in &self.config.headers {
                match (
                    HeaderName::try_from(k.as_str()),
                    HeaderValue::try_from(v.as_str()),
                ) {
                    (Ok(k), Ok(v)) => {
                        headers.insert(k, v);
                    }
                    _ => return Err(format!("header `{k}` is not a valid HTTP header")),
                }
            }
            reqwest::Client::builder()
                .default_headers(headers)
                .timeout(self.config.timeout)
                .connect_timeout(self.config.connect_timeout)
                .build()
                .map_err(|e| format!("cannot build an HTTP client: {}", chain(&e)))
        });
        built.clone().map_err(|m| Failure::new(m, false))
    }

    /// Streams the answer to a `POST` of `body` to `path`, read by decoders `decoder` makes
    /// (one per attempt). `model` names the model in error messages.
    pub(crate) fn stream<D: Decoder>(
        self: &Arc<Self>,
        path: &str,
        model: &str,
        body: serde_json::Value,
        decoder: fn() -> D,
    ) -> BoxStream<'static, Result<ModelChunk, ModelError>> {
        let this = Arc::clone(self);
        let url = self.config.url(path);
        let what = format!("provider `{}` (model `{model}`)", self.config.name);
        async_stream::stream! {
            let config = &this.config;
            if let Some(why) = config.missing_key() {
                yield Err(ModelError::new(why, false));
                return;
            }
            let policy = &config.retry;
            let max_attempts = policy.max_attempts.max(1);
            let mut attempt = 1;
            loop {
                let mut emitted = false;
                let failure: Failure = 'attempt: {
                    let client = match this.client() {
                        Ok(c) => c,
                        Err(f) => break 'attempt f,
                    };
                    let sent = client
                        .post(&url)
                        .header(reqwest::header::ACCEPT, "text/event-stream")
                        .json(&body)
                        .send()
                        .await;
                    let response = match sent {
                        Ok(r) => r,
                        Err(e) => break 'attempt transport_failure(&e, config, &url),
                    };
                    if !response.status().is_success() {
                        break 'attempt status_failure(response).await;
                    }
                    let mut events = response.bytes_stream().eventsource();
                    let mut decoder = decoder();
                    while !decoder.done() {
                        match events.next().await {
                            Some(Ok(event)) => match decoder.event(&event) {
                                Ok(chunks) => {
                                    for chunk in chunks {
                                        emitted |= visible(&chunk);
                                        yield Ok(chunk);
                                    }
                                }
                                Err(f) => break 'attempt f,
                            },
                            Some(Err(eventsource_stream::EventStreamError::Transport(e))) => {
                                break 'attempt transport_failure(&e, config, &url);
                            }
                            Some(Err(e)) => {
                                let why = format!("the response is not a readable event stream: {e}");
                                break 'attempt Failure::new(why, true);
                            }
                            None => break,
                        }
                    }
                    drop(events);
                    match decoder.finish() {
                        Ok(chunks) => {
                            for chunk in chunks {
                                yield Ok(chunk);
                            }
                            return;
                        }
                        Err(f) => break 'attempt f,
                    }
                };
                let reason = config.redact(&failure.message);
                if failure.retryable && !emitted && attempt < max_attempts {
                    let delay = policy.delay(attempt, failure.retry_after);
                    let delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
                    tracing::info!(
                        provider = %config.name, attempt, max_attempts, delay_ms, %reason,
                        "model call failed; retrying"
                    );
                    yield Ok(ModelChunk::Retrying {
                        attempt: attempt + 1,
                        max_attempts,
                        delay_ms,
                        reason,
                    });
                    tokio::time::sleep(delay).await;
                    attempt += 1;
                    continue;
                }
                let tries = if attempt > 1 {
                    format!(" (after {attempt} attempts)")
                } else {
                    String::new()
                };
                let message = format!("{what}: {reason}{tries}");
                yield Err(ModelError::new(message, failure.retryable));
                return;
            }
        }
        .boxed()
    }
}

/// Whether a chunk is part of the answer a caller sees (after one, no retry).
fn visible(chunk: &ModelChunk) -> bool {
    matches!(
        chunk,
        ModelChunk::Text(_) | ModelChunk::Thinking(_) | ModelChunk::ToolCall { .. }
    )
}

/// An error and its causes, one sentence (the URL left out).
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

/// `url` as an error may show it: no user name, password, query or fragment (where a
/// credential could be).
fn shown(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.set_query(None);
            u.set_fragment(None);
            u.to_string()
        }
        Err(_) => "the provider's URL (unreadable)".to_owned(),
    }
}

/// A failed exchange with `url`, said with the URL where the connection itself failed (the
/// one a person must check: the base URL, the port, a server not started).
fn transport_failure(e: &reqwest::Error, config: &ProviderConfig, url: &str) -> Failure {
    if e.is_timeout() {
        return Failure::new(
            format!(
                "no complete answer within {} ms",
                config.timeout.as_millis()
            ),
            true,
        );
    }
    let plain = format!("{}", ErrorText(e));
    let what = if e.is_connect() {
        format!("cannot connect to {}", shown(url))
    } else if e.is_body() || e.is_decode() {
        "the connection broke while the answer streamed".to_owned()
    } else {
        format!("the request to {} failed", shown(url))
    };
    Failure::new(format!("{what}: {plain}"), true)
}

/// A reqwest error's causes without its URL.
struct ErrorText<'a>(&'a reqwest::Error);

impl std::fmt::Display for ErrorText<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        let mut source = std::error::Error::source(self.0);
        while let Some(s) = source {
            let text = s.to_string();
            if !parts.contains(&text) {
                parts.push(text);
            }
            source = s.source();
        }
        if parts.is_empty() {
            parts.push(self.0.to_string());
        }
        f.write_str(&parts.join(": "))
    }
}

/// The most of an error body read.
const ERROR_BODY_LIMIT: usize = 64 << 10;

async fn status_failure(response: reqwest::Response) -> Failure {
    let status = response.status();
    let headers = response.headers().clone();
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(Ok(bytes)) = stream.next().await {
        body.extend_from_slice(&bytes);
        if body.len() >= ERROR_BODY_LIMIT {
            body.truncate(ERROR_BODY_LIMIT);
            break;
        }
    }
    let mut retryable = retryable_status(status.as_u16());
    match headers.get("x-should-retry").and_then(|v| v.to_str().ok()) {
        Some("true") => retryable = true,
        Some("false") => retryable = false,
        _ => {}
    }
    let mut message = format!("HTTP {status}");
    if let Some(detail) = error_detail(&body) {
        message.push_str(": ");
        message.push_str(&detail);
    }
    Failure {
        message,
        retryable,
        retry_after: retry_after(&headers, SystemTime::now()),
    }
}

/// What an error body says: the `message` of OpenAI's, Anthropic's, Ollama's, llama.cpp's and
/// vLLM's error objects, with its type or code; else the text, shortened.
pub(crate) fn error_detail(body: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    if let Ok(json) = serde_json::from_str::<serde_json::Value>(text)
        && let Some(detail) = json_detail(&json)
    {
        return Some(detail);
    }
    Some(shorten(text, 300))
}

/// The message of an error object, wherever the server put it.
pub(crate) fn json_detail(json: &serde_json::Value) -> Option<String> {
    let error = json.get("error").unwrap_or(json);
    let str_of = |v: &serde_json::Value, key: &str| match v.get(key)? {
        serde_json::Value::String(s) if !s.is_empty() => Some(s.clone()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    };
    let message = match error {
        serde_json::Value::String(s) => Some(s.clone()),
        e => str_of(e, "message").or_else(|| match e.get("detail")? {
            serde_json::Value::String(s) => Some(s.clone()),
            other => Some(shorten(&other.to_string(), 300)),
        }),
    }?;
    let kind = str_of(error, "code").or_else(|| str_of(error, "type"));
    Some(match kind {
        Some(k) if !message.contains(&k) => format!("{} ({k})", shorten(&message, 500)),
        _ => shorten(&message, 500),
    })
}

fn shorten(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn error_bodies_of_every_server() {
        let openai = br#"{"error":{"message":"Incorrect API key provided: sk-abc***xyz.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#;
        assert_eq!(
            error_detail(openai).as_deref(),
            Some("Incorrect API key provided: sk-abc***xyz. (invalid_api_key)")
        );
        let anthropic = br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_1"}"#;
        assert_eq!(
            error_detail(anthropic).as_deref(),
            Some("Overloaded (overloaded_error)")
        );
        let ollama = br#"{"error":"model \"llama9\" not found, try pulling it first"}"#;
        assert_eq!(
            error_detail(ollama).as_deref(),
            Some("model \"llama9\" not found, try pulling it first")
        );
        let vllm = br#"{"object":"error","message":"The model `x` does not exist.","type":"NotFoundError","param":null,"code":404}"#;
        assert_eq!(
            error_detail(vllm).as_deref(),
            Some("The model `x` does not exist. (404)")
        );
        let fastapi = br#"{"detail":[{"loc":["body","messages"],"msg":"field required"}]}"#;
        assert!(error_detail(fastapi).is_some_and(|d| d.contains("field required")));
        assert_eq!(
            error_detail(b"<html>Bad Gateway</html>").as_deref(),
            Some("<html>Bad Gateway</html>")
        );
        assert_eq!(error_detail(b"  "), None);
        assert_eq!(json_detail(&json!({"other": 1})), None);
        let long = "x".repeat(1000);
        assert_eq!(
            error_detail(long.as_bytes()).map(|d| d.chars().count()),
            Some(301)
        );
    }
}
