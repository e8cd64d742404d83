//! Code's `fetch`, as the bridge answers it: the request read from the code's JSON, sent
//! through the runtime's [`Fetcher`] with an `Idempotency-Key` derived from the call (the same
//! when a step is redone), the response given back as JSON.

use std::sync::Arc;

use base64::Engine as _;
use serde_json::{Value, json};

use crate::code::{FetchRequest, Fetcher};

/// The `fetch`es of one call.
pub(crate) struct Fetches {
    fetcher: Option<Arc<dyn Fetcher>>,
    /// `thread:call`: what each request's idempotency key starts with.
    key: String,
    /// How many requests that are not reads the call has sent.
    sent: u32,
}

impl Fetches {
    /// The fetches of call `call` on `thread` (ids stable across a redone step).
    pub(crate) fn new(fetcher: Option<Arc<dyn Fetcher>>, thread: &str, call: &str) -> Fetches {
        Fetches {
            fetcher,
            key: format!("duet:{thread}:{call}"),
            sent: 0,
        }
    }

    /// Sends the request `params` describes (`{url, method, headers, body | bodyBase64}`).
    pub(crate) async fn fetch(&mut self, params: &Value) -> Result<Value, String> {
        let Some(fetcher) = &self.fetcher else {
            return Err("fetch is not available: this runtime has no HTTP client for code".into());
        };
        let url = params
            .get("url")
            .and_then(Value::as_str)
            .ok_or("fetch needs a URL")?
            .to_owned();
        let method = params
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or("GET")
            .to_ascii_uppercase();
        let headers = params
            .get("headers")
            .and_then(Value::as_array)
            .map(|pairs| {
                pairs
                    .iter()
                    .filter_map(|p| {
                        Some((
                            p.get(0)?.as_str()?.to_owned(),
                            p.get(1)?.as_str()?.to_owned(),
                        ))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let body = match (params.get("body"), params.get("bodyBase64")) {
            (Some(Value::String(text)), _) => Some(text.clone().into_bytes()),
            (_, Some(Value::String(b64))) => Some(
                base64::engine::general_purpose::STANDARD
                    .decode(b64)
                    .map_err(|e| format!("fetch body: {e}"))?,
            ),
            _ => None,
        };
        let read = matches!(method.as_str(), "GET" | "HEAD" | "OPTIONS");
        let idempotency_key = if read {
            String::new()
        } else {
            self.sent += 1;
            format!("{}:{}", self.key, self.sent)
        };
        let response = fetcher
            .fetch(FetchRequest {
                method,
                url,
                headers,
                body,
                idempotency_key,
            })
            .await?;
        let headers: Vec<Value> = response
            .headers
            .iter()
            .map(|(k, v)| json!([k, v]))
            .collect();
        let mut out = json!({
            "status": response.status,
            "headers": headers,
            "url": response.url,
        });
        match String::from_utf8(response.body) {
            Ok(text) => out["body"] = Value::String(text),
            Err(bytes) => {
                out["bodyBase64"] = Value::String(
                    base64::engine::general_purpose::STANDARD.encode(bytes.into_bytes()),
                );
            }
        }
        Ok(out)
    }
}
