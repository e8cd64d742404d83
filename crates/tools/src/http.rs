//! `http` tools: one request per call, made from the definition's templates.
//!
//! - The URL's `{{arg}}` values are percent-encoded (a value is one path segment or query
//!   value), and a path that would hold a `.` or `..` segment is refused (the URL parser would
//!   resolve it away); `{{env.NAME}}` values go in as they are (a base URL, a key already
//!   encoded).
//! - Where the request goes: a host the definition fixes (literally or through `{{env.NAME}}`)
//!   is trusted as written. When an argument reaches the scheme or authority, the host must be
//!   public by `duet_net`'s classification (resolved once, the connection pinned to the
//!   addresses checked) unless the operator allows private targets
//!   ([`HttpClient::allow_private_targets`]). Redirects are never followed: a 3xx answer is an
//!   error result naming its `Location`, so no header goes anywhere the definition did not say.
//! - Headers take values as they are; a body template escapes them for its `Content-Type`
//!   (JSON when there is none or it says json, so `{"q": "{{q}}"}` stays JSON; form-encoded
//!   for `application/x-www-form-urlencoded`; XML-escaped for XML; as they are otherwise).
//! - Without a `body`, POST, PUT and PATCH send the arguments as JSON; GET and DELETE send none.
//! - Every request but a GET carries `Idempotency-Key` (the call's key: a redone step sends
//!   the same one), unless the definition sets it.
//! - A 2xx answer is the result: JSON re-serialised compactly, other text as it is. A non-2xx
//!   answer, a timeout (`timeoutMs`, the whole exchange), a body over `maxResponseBytes` and
//!   a connection failure are error results. Every text is redacted ([`Secrets`]).

use std::time::Duration;

use async_trait::async_trait;
use duet_runtime::{HttpTools, ToolContext, ToolResult};
use duet_spec::{HttpCall, HttpMethod};
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, LOCATION};

use crate::secrets::Secrets;

mod template;

use template::{Escape, fill, fill_url};

/// How many characters of a failed answer's body its error result quotes.
const EXCERPT_CHARS: usize = 300;

/// Runs the project's `http` tools ([`HttpTools`]) with one shared connection pool.
#[derive(Clone)]
pub struct HttpClient {
    client: Result<reqwest::Client, String>,
    allow_private: bool,
}

impl Default for HttpClient {
    fn default() -> Self {
        Self::new()
    }
}

impl HttpClient {
    /// A client with rustls; one that cannot be built (no TLS) makes every call an error
    /// result saying why.
    pub fn new() -> Self {
        HttpClient {
            client: client(None),
            allow_private: false,
        }
    }

    /// Lets a host an argument chooses be private, loopback or link-local (refused by
    /// default). For development and tests on one machine.
    pub fn allow_private_targets(mut self, allow: bool) -> Self {
        self.allow_private = allow;
        self
    }

    /// The client for `req`: the shared one, or — when an argument chose the host and private
    /// targets are not allowed — one pinned to the host's addresses, checked public.
    async fn client_for(&self, req: &Request) -> Result<reqwest::Client, Failure> {
        let shared = self.client.clone()?;
        if !req.host_from_args || self.allow_private {
            return Ok(shared);
        }
        match duet_net::check(req.url.clone(), false).await {
            Err(why) => Err(format!(
                "its URL's host comes from an argument, and {why} (private targets are allowed \
                 only when the operator says so)"
            )),
            Ok(duet_net::Target { pin: None, .. }) => Ok(shared),
            Ok(duet_net::Target { pin: Some(pin), .. }) => client(Some(&pin)),
        }
    }
}

/// A client that follows no redirect; with `pin`, one that connects to `pin`'s host only at
/// its checked addresses.
fn client(pin: Option<&duet_net::Pin>) -> Result<reqwest::Client, String> {
    let mut builder = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none());
    if let Some(pin) = pin {
        builder = builder.resolve_to_addrs(&pin.host, &pin.addrs);
    }
    builder
        .build()
        .map_err(|e| format!("the HTTP client cannot start: {e}"))
}

fn method(m: HttpMethod) -> reqwest::Method {
    match m {
        HttpMethod::Get => reqwest::Method::GET,
        HttpMethod::Post => reqwest::Method::POST,
        HttpMethod::Put => reqwest::Method::PUT,
        HttpMethod::Patch => reqwest::Method::PATCH,
        HttpMethod::Delete => reqwest::Method::DELETE,
    }
}

/// Why a call failed, before redaction.
type Failure = String;

/// The request of one call, built from its templates.
struct Request {
    method: reqwest::Method,
    url: reqwest::Url,
    /// Whether an argument reached the URL's scheme or authority (so its host is checked).
    host_from_args: bool,
    headers: HeaderMap,
    body: Option<String>,
}

fn build(
    ctx: &ToolContext,
    call: &HttpCall,
    args: &serde_json::Value,
    env: &(dyn Fn(&str) -> Option<String> + Sync),
) -> Result<Request, Failure> {
    let filled = fill_url(&call.url, args, env)?;
    let url = filled.text;
    let parsed =
        reqwest::Url::parse(&url).map_err(|e| format!("its URL `{url}` is not valid: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("its URL `{url}` is not http:// or https://"));
    }
    let mut headers = HeaderMap::new();
    for (name, value) in &call.headers {
        let value = fill(value, args, env, Escape::Raw);
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("`{name}` is not a valid header name"))?;
        let value = HeaderValue::from_str(&value)
            .map_err(|_| format!("the value of header `{name}` is not a valid header value"))?;
        headers.insert(name, value);
    }
    let escape = Escape::for_body(
        headers
            .get(CONTENT_TYPE)
            .map(|v| v.to_str().unwrap_or("application/octet-stream")),
    );
    let method = method(call.method);
    let body = match &call.body {
        Some(template) => Some(fill(template, args, env, escape)),
        None if matches!(
            call.method,
            HttpMethod::Post | HttpMethod::Put | HttpMethod::Patch
        ) =>
        {
            Some(match args {
                serde_json::Value::Null => "{}".to_owned(),
                a => a.to_string(),
            })
        }
        None => None,
    };
    if body.is_some() && !headers.contains_key(CONTENT_TYPE) {
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    }
    let key = HeaderName::from_static("idempotency-key");
    if method != reqwest::Method::GET
        && !headers.contains_key(&key)
        && let Ok(v) = HeaderValue::from_str(&ctx.idempotency_key)
    {
        headers.insert(key, v);
    }
    Ok(Request {
        method,
        url: parsed,
        host_from_args: filled.host_from_args,
        headers,
        body,
    })
}

/// Reads at most `max` bytes of `response`'s body; more is a failure.
async fn read_limited(mut response: reqwest::Response, max: u32) -> Result<Vec<u8>, Failure> {
    let max = usize::try_from(max).unwrap_or(usize::MAX);
    let too_large = || format!("its answer is larger than {max} bytes (`maxResponseBytes`)");
    if response
        .content_length()
        .is_some_and(|n| usize::try_from(n).unwrap_or(usize::MAX) > max)
    {
        return Err(too_large());
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| format!("its answer broke off: {}", e.without_url()))?
    {
        if body.len() + chunk.len() > max {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The first [`EXCERPT_CHARS`] characters of `body`, on one line.
fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut cut: String = line.chars().take(EXCERPT_CHARS).collect();
    if cut.len() < line.len() {
        cut.push('…');
    }
    cut
}

/// What a successful answer says.
fn success_text(status: reqwest::StatusCode, body: &[u8]) -> String {
    if body.iter().all(u8::is_ascii_whitespace) {
        return format!("HTTP {status}, no body.");
    }
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(value) => value.to_string(),
        Err(_) => String::from_utf8_lossy(body).into_owned(),
    }
}

async fn exchange(
    client: &reqwest::Client,
    req: Request,
    call: &HttpCall,
) -> Result<ToolResult, Failure> {
    let mut builder = client.request(req.method, req.url).headers(req.headers);
    if let Some(body) = req.body {
        builder = builder.body(body);
    }
    let response = builder.send().await.map_err(|e| {
        let e = e.without_url();
        if e.is_connect() {
            format!("it could not connect: {e}")
        } else {
            format!("the request failed: {e}")
        }
    })?;
    let status = response.status();
    let location = response
        .headers()
        .get(LOCATION)
        .map(|l| String::from_utf8_lossy(l.as_bytes()).into_owned());
    let body = read_limited(response, call.max_response_bytes).await?;
    Ok(if status.is_success() {
        ToolResult::ok(success_text(status, &body))
    } else if let (true, Some(to)) = (status.is_redirection(), location) {
        ToolResult::error(format!(
            "HTTP {status}: redirects are not followed (Location: {to})"
        ))
    } else {
        let quoted = excerpt(&body);
        ToolResult::error(if quoted.is_empty() {
            format!("HTTP {status}")
        } else {
            format!("HTTP {status}: {quoted}")
        })
    })
}

#[async_trait]
impl HttpTools for HttpClient {
    async fn call(
        &self,
        ctx: ToolContext,
        name: &str,
        call: &HttpCall,
        args: &serde_json::Value,
        env: &(dyn for<'a> Fn(&'a str) -> Option<String> + Sync),
    ) -> ToolResult {
        let mut secrets = Secrets::default();
        secrets.add_env_of(&call.url, env);
        for v in call.headers.values() {
            secrets.add_env_of(v, env);
        }
        if let Some(body) = &call.body {
            secrets.add_env_of(body, env);
        }
        let fail = |why: &str| {
            let text = secrets.redact(&format!("Tool `{name}` failed: {why}"));
            tracing::warn!(tool = name, thread = %ctx.thread, "{text}");
            ToolResult::error(text)
        };
        let req = match build(&ctx, call, args, env) {
            Ok(r) => r,
            Err(why) => return fail(&why),
        };
        let client = match self.client_for(&req).await {
            Ok(c) => c,
            Err(why) => return fail(&why),
        };
        let target = format!("{} {}", req.method, req.url);
        let timeout = Duration::from_millis(u64::from(call.timeout_ms));
        let result = match tokio::time::timeout(timeout, exchange(&client, req, call)).await {
            Ok(Ok(result)) => result,
            Ok(Err(why)) => return fail(&why),
            Err(_) => {
                return fail(&format!(
                    "no answer within {} ms (`timeoutMs`)",
                    call.timeout_ms
                ));
            }
        };
        tracing::debug!(tool = name, request = %secrets.redact(&target), ok = result.is_ok(), "http tool");
        ToolResult {
            attachments: Vec::new(),
            status: result.status,
            content: secrets.redact(&result.content),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_read_as_text() {
        assert_eq!(
            success_text(reqwest::StatusCode::OK, b"{ \"a\" : 1 }"),
            r#"{"a":1}"#
        );
        assert_eq!(
            success_text(reqwest::StatusCode::OK, b"plain \xff"),
            "plain \u{fffd}"
        );
        assert_eq!(
            success_text(reqwest::StatusCode::NO_CONTENT, b""),
            "HTTP 204 No Content, no body."
        );
        let long = "x ".repeat(400);
        assert!(excerpt(long.as_bytes()).ends_with('…'));
    }
}
