//! A thread endpoint's request and answer as the runtime sees them
//! ([`crate::Runtime::call_endpoint`]): plain data a server fills from an HTTP request and
//! turns back into a response, and how each reads as the code host's JSON (`$request`,
//! `$response`). The runtime speaks no HTTP: hop-by-hop headers, `Allow` and the problem shapes
//! are the server's.

use base64::Engine as _;
use serde_json::{Map, Value, json};

use crate::error::RunError;

/// A request to a thread endpoint (`/threads/{key}/api/…`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EndpointRequest {
    /// The method, as sent (matched in any case).
    pub method: String,
    /// The path under the thread's `/api`, as sent (percent-encoded): `/orders/42`, `/` or
    /// empty for the root.
    pub path: String,
    /// The query string, without its `?`.
    pub query: Option<String>,
    /// The whole URL, absolute, as the code's `req.url` reads it.
    pub url: String,
    /// The headers, in order.
    pub headers: Vec<(String, String)>,
    /// The body (empty for none).
    pub body: Vec<u8>,
}

/// What a thread endpoint answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EndpointResponse {
    /// The status, 200–599.
    pub status: u16,
    /// The headers, in order, as the code set them.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

/// Why a thread endpoint did not answer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EndpointError {
    /// No such thread, or no endpoint's route matches the path.
    #[error("{0}")]
    NotFound(String),
    /// Endpoints match the path, under these methods only (upper case, sorted).
    #[error("this path answers {}", .0.join(", "))]
    MethodNotAllowed(Vec<String>),
    /// The code failed (a throw, its deadline, its memory ceiling, no code host, a return
    /// value that is no response): nothing it wrote was kept.
    #[error("{0}")]
    Failed(String),
    /// The thread is running, and the endpoint wrote to it (a value, a message…): an endpoint
    /// only reads a running thread. Nothing was kept; it may be retried once the run settles.
    #[error(
        "thread `{0}` is running: an endpoint that writes to it waits until it settles; nothing was written"
    )]
    Busy(String),
    /// The thread is terminated, and the endpoint wrote to it: a terminated thread's endpoints
    /// only read. Nothing was kept.
    #[error("thread `{0}` is terminated: its endpoints only read; nothing was written")]
    Terminated(String),
    /// The runtime could not serve it: the store failed, or it is shutting down.
    #[error(transparent)]
    Run(#[from] RunError),
}

impl From<crate::store::StoreError> for EndpointError {
    fn from(e: crate::store::StoreError) -> Self {
        EndpointError::Run(e.into())
    }
}

impl EndpointRequest {
    /// The request as the code host's `$request` (the body as text when it is UTF-8, else
    /// base64 under `bodyBase64`; none when empty).
    pub(crate) fn to_json(&self) -> Value {
        let mut request = Map::new();
        request.insert("method".into(), json!(self.method.to_ascii_uppercase()));
        request.insert("url".into(), json!(self.url));
        request.insert(
            "headers".into(),
            Value::Array(
                self.headers
                    .iter()
                    .map(|(k, v)| json!([k.to_ascii_lowercase(), v]))
                    .collect(),
            ),
        );
        if !self.body.is_empty() {
            match std::str::from_utf8(&self.body) {
                Ok(text) => request.insert("body".into(), json!(text)),
                Err(_) => request.insert(
                    "bodyBase64".into(),
                    json!(base64::engine::general_purpose::STANDARD.encode(&self.body)),
                ),
            };
        }
        json!({ "$request": request })
    }

    /// The value of header `name` (any case), the first if it is given more than once.
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

impl EndpointResponse {
    /// What the code returned, as a response: a `Response` (`{"$response": {status, headers,
    /// body | bodyBase64}}`) as it is, any other JSON as `200 application/json`. `Err` says why
    /// a `$response` is not one.
    pub(crate) fn of(value: Value) -> Result<EndpointResponse, String> {
        let response = match value {
            Value::Object(mut o) if o.contains_key("$response") => {
                o.remove("$response").unwrap_or(Value::Null)
            }
            other => {
                return Ok(EndpointResponse {
                    status: 200,
                    headers: vec![("content-type".into(), "application/json".into())],
                    body: other.to_string().into_bytes(),
                });
            }
        };
        let status = response
            .get("status")
            .and_then(Value::as_u64)
            .and_then(|s| u16::try_from(s).ok())
            .filter(|s| (200..=599).contains(s))
            .ok_or_else(|| {
                format!(
                    "the endpoint's Response has status {}: a status is 200–599",
                    response.get("status").unwrap_or(&Value::Null)
                )
            })?;
        let headers = match response.get("headers") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(pairs)) => pairs
                .iter()
                .map(|p| match (p.get(0), p.get(1), p.get(2)) {
                    (Some(Value::String(k)), Some(Value::String(v)), None) => {
                        Ok((k.clone(), v.clone()))
                    }
                    _ => Err(format!(
                        "the endpoint's Response has a header that is not a [name, value] pair of strings: {p}"
                    )),
                })
                .collect::<Result<_, _>>()?,
            Some(other) => {
                return Err(format!(
                    "the endpoint's Response has headers {other}: they are [name, value] pairs"
                ));
            }
        };
        let body = match (response.get("body"), response.get("bodyBase64")) {
            (Some(Value::String(text)), _) => text.clone().into_bytes(),
            (_, Some(Value::String(b64))) => base64::engine::general_purpose::STANDARD
                .decode(b64)
                .map_err(|e| format!("the endpoint's Response body is not base64: {e}"))?,
            (None | Some(Value::Null), None | Some(Value::Null)) => Vec::new(),
            _ => return Err("the endpoint's Response body is not text".to_owned()),
        };
        Ok(EndpointResponse {
            status,
            headers,
            body,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_the_hosts_request_object() {
        let req = EndpointRequest {
            method: "post".into(),
            path: "/orders".into(),
            query: Some("a=1".into()),
            url: "http://127.0.0.1:1/threads/t/api/orders?a=1".into(),
            headers: vec![("Content-Type".into(), "application/json".into())],
            body: b"{\"n\":1}".to_vec(),
        };
        assert_eq!(
            req.to_json(),
            json!({"$request": {
                "method": "POST",
                "url": "http://127.0.0.1:1/threads/t/api/orders?a=1",
                "headers": [["content-type", "application/json"]],
                "body": "{\"n\":1}",
            }})
        );
        assert_eq!(req.header("content-TYPE"), Some("application/json"));
        let binary = EndpointRequest {
            body: vec![0xff, 0x00],
            ..req.clone()
        };
        assert_eq!(binary.to_json()["$request"]["bodyBase64"], json!("/wA="));
        let empty = EndpointRequest {
            body: Vec::new(),
            ..req
        };
        assert!(empty.to_json()["$request"].get("body").is_none());
    }

    #[test]
    fn a_response_passes_through_and_other_json_is_200_json() {
        let r = EndpointResponse::of(json!({"$response": {
            "status": 201,
            "headers": [["x-a", "1"], ["content-type", "text/plain"]],
            "body": "made",
        }}))
        .expect("a response");
        assert_eq!(r.status, 201);
        assert_eq!(
            r.headers,
            vec![
                ("x-a".to_owned(), "1".to_owned()),
                ("content-type".to_owned(), "text/plain".to_owned())
            ]
        );
        assert_eq!(r.body, b"made");
        let r = EndpointResponse::of(
            json!({"$response": {"status": 200, "headers": [], "bodyBase64": "/wA="}}),
        )
        .expect("a response");
        assert_eq!(r.body, vec![0xff, 0x00]);
        let r = EndpointResponse::of(json!({"$response": {"status": 204}})).expect("a response");
        assert!(r.body.is_empty() && r.headers.is_empty());
        let r = EndpointResponse::of(json!({"ok": true})).expect("a response");
        assert_eq!((r.status, r.body), (200, b"{\"ok\":true}".to_vec()));
        assert_eq!(
            r.headers,
            vec![("content-type".to_owned(), "application/json".to_owned())]
        );
        let r = EndpointResponse::of(Value::Null).expect("a response");
        assert_eq!(r.body, b"null");
    }

    #[test]
    fn a_response_that_is_none_says_why() {
        for (bad, why) in [
            (json!({"$response": {"status": 99}}), "status 99"),
            (json!({"$response": {"status": 600}}), "status 600"),
            (json!({"$response": {}}), "status null"),
            (
                json!({"$response": {"status": 200, "headers": {"a": "b"}}}),
                "[name, value] pairs",
            ),
            (
                json!({"$response": {"status": 200, "headers": [["a", 1]]}}),
                "not a [name, value]",
            ),
            (
                json!({"$response": {"status": 200, "bodyBase64": "!!"}}),
                "not base64",
            ),
            (json!({"$response": {"status": 200, "body": 7}}), "not text"),
        ] {
            let e = EndpointResponse::of(bad.clone()).expect_err("refused");
            assert!(e.contains(why), "{bad}: {e}");
        }
    }
}
