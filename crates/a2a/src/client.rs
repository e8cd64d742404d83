//! An A2A 1.0 client, for duet to reach agents served elsewhere: it reads the agent's card,
//! takes its JSON-RPC interface, and sends messages and reads tasks with the bearer token it was
//! given. What a remote agent answers that is not A2A is an error, never a panic.
//!
//! Where it goes: the URL it is given is trusted as written (the operator's). A JSON-RPC URL the
//! card names on another origin is the remote's choice, so it must be a public address
//! (`duet_net`), checked before every call and the connection pinned to the addresses checked;
//! the token never goes there. Redirects are followed only within the origin they answer for.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::card::{AgentCard, JSONRPC, PROTOCOL_VERSION};
use super::layers::WELL_KNOWN;
use super::types::{Message, SendMessageResponse, Task};

/// Why a call to a remote agent failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// It could not be reached, or it answered with an HTTP error.
    #[error("the remote agent could not be reached: {0}")]
    Transport(String),
    /// It answered something that is not A2A 1.0.
    #[error("the remote agent's answer is not A2A 1.0: {0}")]
    Protocol(String),
    /// The JSON-RPC URL its card names cannot be used (another origin that is not public).
    #[error("the remote agent's JSON-RPC URL cannot be used: {0}")]
    Target(String),
    /// It answered with an A2A error.
    #[error("the remote agent refused: {message} ({code})")]
    Refused {
        /// The JSON-RPC error code.
        code: i64,
        /// Its message.
        message: String,
    },
}

/// `scheme://host:port` of `url`, lowercased (`None` if it is not a URL).
fn origin(url: &str) -> Option<String> {
    let u = reqwest::Url::parse(url).ok()?;
    Some(format!(
        "{}://{}:{}",
        u.scheme(),
        u.host_str()?.to_ascii_lowercase(),
        u.port_or_known_default()?
    ))
}

/// A client with `timeout` that follows a redirect only within the origin of the request
/// (at most 5), connecting to `pin`'s host only at its checked addresses.
fn http_client(
    timeout: Duration,
    pin: Option<&duet_net::Pin>,
) -> Result<reqwest::Client, ClientError> {
    let redirects = reqwest::redirect::Policy::custom(|attempt| {
        if duet_net::redirect_allowed(attempt.previous(), attempt.url()) {
            attempt.follow()
        } else {
            attempt.stop()
        }
    });
    let mut builder = reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(Duration::from_secs(10))
        .redirect(redirects);
    if let Some(pin) = pin {
        builder = builder.resolve_to_addrs(&pin.host, &pin.addrs);
    }
    builder
        .build()
        .map_err(|e| ClientError::Transport(e.to_string()))
}

/// A connection to one remote agent's JSON-RPC interface.
#[derive(Debug)]
pub struct A2aClient {
    http: reqwest::Client,
    endpoint: String,
    /// Whether the endpoint is on another origin than the card: then it is checked (public)
    /// and pinned before every call.
    elsewhere: bool,
    timeout: Duration,
    token: Option<String>,
    card: AgentCard,
    ids: AtomicU64,
}

impl A2aClient {
    /// Reads the card at `url` (the agent's base, its card found at
    /// `{url}/.well-known/agent-card.json`, or the card's own URL ending in `.json`) and
    /// connects to its JSON-RPC 1.0 interface. Every call may take `timeout`.
    pub async fn connect(
        url: &str,
        token: Option<String>,
        timeout: Duration,
    ) -> Result<Self, ClientError> {
        let http = http_client(timeout, None)?;
        let card_url = if url.ends_with(".json") {
            url.to_owned()
        } else {
            format!("{}{WELL_KNOWN}", url.trim_end_matches('/'))
        };
        let mut req = http.get(&card_url);
        if let Some(t) = &token {
            req = req.bearer_auth(t);
        }
        let resp = req
            .send()
            .await
            .map_err(|e| ClientError::Transport(e.to_string()))?;
        if !resp.status().is_success() {
            return Err(ClientError::Transport(format!(
                "{card_url}: HTTP {}",
                resp.status().as_u16()
            )));
        }
        let card: AgentCard = resp
            .json()
            .await
            .map_err(|e| ClientError::Protocol(format!("the card at {card_url}: {e}")))?;
        let endpoint = card
            .supported_interfaces
            .iter()
            .find(|i| {
                i.protocol_binding == JSONRPC && i.protocol_version.starts_with(PROTOCOL_VERSION)
            })
            .map(|i| i.url.clone())
            .ok_or_else(|| {
                ClientError::Protocol(format!(
                    "the card at {card_url} offers no JSON-RPC {PROTOCOL_VERSION} interface"
                ))
            })?;
        // The token goes only where the card came from.
        let elsewhere = origin(&endpoint) != origin(&card_url);
        if token.is_some() && elsewhere {
            return Err(ClientError::Protocol(format!(
                "the card at {card_url} names a JSON-RPC URL on another origin ({endpoint}); the token is not sent there"
            )));
        }
        let client = Self {
            http,
            endpoint,
            elsewhere,
            timeout,
            token,
            card,
            ids: AtomicU64::new(1),
        };
        if elsewhere {
            client.endpoint_client().await?;
        }
        Ok(client)
    }

    /// The client for the JSON-RPC URL: the card's when it is on the card's origin; otherwise
    /// one pinned to its addresses, checked public now (a name may resolve elsewhere by now).
    async fn endpoint_client(&self) -> Result<reqwest::Client, ClientError> {
        if !self.elsewhere {
            return Ok(self.http.clone());
        }
        let target = duet_net::target_allowed(&self.endpoint, false)
            .await
            .map_err(|e| ClientError::Target(format!("{}: {e}", self.endpoint)))?;
        match &target.pin {
            None => Ok(self.http.clone()),
            Some(pin) => http_client(self.timeout, Some(pin)),
        }
    }

    /// The remote agent's card.
    pub fn card(&self) -> &AgentCard {
        &self.card
    }

    /// `SendMessage`, blocking (the remote answers when the task settles) unless
    /// `return_immediately`.
    pub async fn send_message(
        &self,
        message: Message,
        return_immediately: bool,
    ) -> Result<SendMessageResponse, ClientError> {
        let mut params = json!({"message": message});
        if return_immediately {
            params["configuration"] = json!({"returnImmediately": true});
        }
        self.call("SendMessage", params).await
    }

    /// `GetTask`.
    pub async fn get_task(&self, id: &str) -> Result<Task, ClientError> {
        self.call("GetTask", json!({"id": id})).await
    }

    async fn call<T: DeserializeOwned>(
        &self,
        method: &str,
        params: Value,
    ) -> Result<T, ClientError> {
        let id = self.ids.fetch_add(1, Ordering::Relaxed);
        let http = self.endpoint_client().await?;
        let mut req = http
            .post(&self.endpoint)
            .header("A2A-Version", PROTOCOL_VERSION)
            .json(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        let resp = req
            .send()
            .await
            .map_err(|e| ClientError::Transport(e.to_string()))?;
        let status = resp.status();
        let body: Value = resp
            .json()
            .await
            .map_err(|e| ClientError::Transport(format!("HTTP {}: {e}", status.as_u16())))?;
        if let Some(e) = body.get("error") {
            return Err(ClientError::Refused {
                code: e["code"].as_i64().unwrap_or(0),
                message: e["message"].as_str().unwrap_or("").to_owned(),
            });
        }
        if !status.is_success() {
            return Err(ClientError::Transport(format!("HTTP {}", status.as_u16())));
        }
        let result = body
            .get("result")
            .cloned()
            .ok_or_else(|| ClientError::Protocol("no `result`".into()))?;
        serde_json::from_value(result).map_err(|e| ClientError::Protocol(format!("{method}: {e}")))
    }
}
