//! `http` tools: one request per call, made from the definition's templates.
//!
//! - The URL's `{{arg}}` values are percent-encoded (a value is one path segment or query
//!   value); `{{env.NAME}}` values go in as they are (a base URL, a key already encoded).
//! - Headers take values as they are; a body template JSON-escapes them when the body is JSON
//!   (no `Content-Type` header, or one that says `json`), so `{"q": "{{q}}"}` stays JSON.
//! - Without a `body`, POST, PUT and PATCH send the arguments as JSON; GET and DELETE send none.
//! - Every request but a GET carries `Idempotency-Key` (the call's key: a redone step sends
//!   the same one), unless the definition sets it.
//! - A 2xx answer is the result: JSON re-serialised compactly, other text as it is. A non-2xx
//!   answer, a timeout (`timeoutMs`, the whole exchange), a body over `maxResponseBytes` and
//!   a connection failure are error results. Every text is redacted ([`Secrets`]).

use std::time::Duration;

use async_trait::async_trait;
use duet_runtime::{HttpTools, Placeholder, ToolContext, ToolResult};
use duet_spec::{HttpCall, HttpMethod};
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};

use crate::secrets::{Secrets, percent_encode};

/// How many characters of a failed answer's body its error result quotes.
const EXCERPT_CHARS: usize = 300;

/// Runs the project's `http` tools ([`HttpTools`]) with one shared connection pool.
#[derive(Clone)]
pub struct HttpClient {
    client: Result<reqwest::Client, String>,
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
            client: reqwest::Client::builder()
                .build()
                .map_err(|e| format!("the HTTP client cannot start: {e}")),
        }
    }
}

/// How a template's values are written into it.
#[derive(Clone, Copy, PartialEq)]
enum Escape {
    /// As they are.
    Raw,
    /// Arguments percent-encoded (env values as they are).
    Url,
    /// Strings JSON-escaped (without quotes), other values as JSON.
    Json,
}

/// `template` with `{{arg}}` and `{{env.NAME}}` filled in as `escape` says; unknown
/// placeholders become empty (as [`duet_runtime::render`]).
fn fill(
    template: &str,
    args: &serde_json::Value,
    env: &(dyn Fn(&str) -> Option<String> + Sync),
    escape: Escape,
) -> String {
    let json_escaped = |s: &str| {
        let quoted = serde_json::to_string(s).unwrap_or_default();
        let inner = quoted.strip_prefix('"').and_then(|q| q.strip_suffix('"'));
        inner.unwrap_or_default().to_owned()
    };
    duet_runtime::render_with(template, args, env, &|filled| match (filled, escape) {
        (Placeholder::Env(value), Escape::Json) => json_escaped(&value),
        (Placeholder::Env(value), Escape::Raw | Escape::Url) => value,
        (Placeholder::Arg(serde_json::Value::String(s)), Escape::Json) => json_escaped(s),
        (Placeholder::Arg(serde_json::Value::String(s)), Escape::Url) => percent_encode(s),
        (Placeholder::Arg(serde_json::Value::String(s)), Escape::Raw) => s.clone(),
        (Placeholder::Arg(other), Escape::Url) => percent_encode(&other.to_string()),
        (Placeholder::Arg(other), Escape::Raw | Escape::Json) => other.to_string(),
    })
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
    headers: HeaderMap,
    body: Option<String>,
}

fn build(
    ctx: &ToolContext,
    call: &HttpCall,
    args: &serde_json::Value,
    env: &(dyn Fn(&str) -> Option<String> + Sync),
) -> Result<Request, Failure> {
    let url = fill(&call.url, args, env, Escape::Url);
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
    let json = headers
        .get(CONTENT_TYPE)
        .is_none_or(|v| v.to_str().is_ok_and(|v| v.contains("json")));
    let method = method(call.method);
    let body = match &call.body {
        Some(template) => Some(fill(
            template,
            args,
            env,
            if json { Escape::Json } else { Escape::Raw },
        )),
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
    let body = read_limited(response, call.max_response_bytes).await?;
    Ok(if status.is_success() {
        ToolResult::ok(success_text(status, &body))
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
        let client = match &self.client {
            Ok(c) => c,
            Err(e) => return fail(e),
        };
        let req = match build(&ctx, call, args, env) {
            Ok(r) => r,
            Err(why) => return fail(&why),
        };
        let target = format!("{} {}", req.method, req.url);
        let timeout = Duration::from_millis(u64::from(call.timeout_ms));
        let result = match tokio::time::timeout(timeout, exchange(client, req, call)).await {
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
            status: result.status,
            content: secrets.redact(&result.content),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn templates_escape_for_their_place() {
        let env = |k: &str| (k == "BASE").then(|| "http://h:1/a b".to_owned());
        let args = json!({"q": "a/b c\"", "n": 3, "o": {"k": [1]}});
        assert_eq!(
            fill("{{env.BASE}}/s/{{q}}?n={{n}}", &args, &env, Escape::Url),
            "http://h:1/a b/s/a%2Fb%20c%22?n=3"
        );
        assert_eq!(
            fill(
                r#"{"q": "{{q}}", "o": {{o}}, "b": "{{env.BASE}}"}"#,
                &args,
                &env,
                Escape::Json
            ),
            r#"{"q": "a/b c\"", "o": {"k":[1]}, "b": "http://h:1/a b"}"#
        );
        assert_eq!(
            fill("{{q}}{{missing}} {{ open", &args, &env, Escape::Raw),
            "a/b c\" {{ open"
        );
    }

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
