//! The webhook channel, as Standard Webhooks (<https://www.standardwebhooks.com/>) has it: a
//! JSON `POST` with `webhook-id` (the delivery's idempotency key, the same on every attempt),
//! `webhook-timestamp` (the attempt's Unix seconds) and `webhook-signature` (`v1,` + base64 of
//! HMAC-SHA256 over `{id}.{timestamp}.{body}`), plus `Idempotency-Key`. [`sign`] makes the
//! signature, [`verify`] checks one the way a receiver does (a 5-minute window each way).
//!
//! The body ([`render`]) is the [`View`] with the two top-level fields Standard Webhooks
//! recommends beside it: `type` (the event's name) and `timestamp` (when it happened, RFC 3339).
//! It carries no id of its own: the `webhook-id` header is the message's id.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use serde::Deserialize;
use sha2::Sha256;

use super::View;

/// How far a receiver lets a timestamp stray from its clock, either way (seconds).
pub const TOLERANCE_S: i64 = 300;

/// The prefix of a secret given as base64 (`whsec_` + base64 of the key's bytes); any other
/// secret is used as its own bytes.
const PREFIX: &str = "whsec_";

/// Why a webhook does not verify (or a secret cannot sign).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WebhookError {
    /// A header is missing (`webhook-id`, `webhook-timestamp`, `webhook-signature`).
    Missing(&'static str),
    /// A header, or the secret, is not what it should be (a timestamp that is not an integer, a
    /// header that is not text, a `whsec_` secret that is not base64).
    Malformed(&'static str),
    /// The timestamp is older than the tolerance allows (a replay, or a very late retry).
    TooOld,
    /// The timestamp is further in the future than the tolerance allows.
    TooNew,
    /// No `v1` signature in the header matches the body.
    BadSignature,
}

impl std::fmt::Display for WebhookError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WebhookError::Missing(what) => write!(f, "the {what} header is missing"),
            WebhookError::Malformed(what) => write!(f, "malformed {what}"),
            WebhookError::TooOld => f.write_str("the webhook-timestamp is too old"),
            WebhookError::TooNew => f.write_str("the webhook-timestamp is too far in the future"),
            WebhookError::BadSignature => f.write_str("no webhook-signature matches the body"),
        }
    }
}

impl std::error::Error for WebhookError {}

/// A received webhook's three signing headers, as text.
#[derive(Clone, Copy, Debug)]
pub struct Signed<'a> {
    /// `webhook-id`.
    pub id: &'a str,
    /// `webhook-timestamp`.
    pub timestamp: &'a str,
    /// `webhook-signature`: one or more space-separated `version,signature` pairs.
    pub signature: &'a str,
}

impl<'a> Signed<'a> {
    /// The three headers of `headers`, or which is missing or not text.
    pub fn from_headers(headers: &'a axum::http::HeaderMap) -> Result<Self, WebhookError> {
        let get = |name: &'static str| {
            headers
                .get(name)
                .ok_or(WebhookError::Missing(name))?
                .to_str()
                .map_err(|_| WebhookError::Malformed(name))
        };
        Ok(Signed {
            id: get("webhook-id")?,
            timestamp: get("webhook-timestamp")?,
            signature: get("webhook-signature")?,
        })
    }
}

/// The HMAC key of `secret`: the bytes base64 after `whsec_`, else the secret's own bytes.
fn key(secret: &str) -> Result<Vec<u8>, WebhookError> {
    match secret.strip_prefix(PREFIX) {
        Some(b64) => STANDARD
            .decode(b64)
            .map_err(|_| WebhookError::Malformed("secret (whsec_ must be followed by base64)")),
        None => Ok(secret.as_bytes().to_vec()),
    }
}

fn mac(key: &[u8], msg_id: &str, timestamp_s: i64, body: &[u8]) -> Hmac<Sha256> {
    // HMAC takes a key of any length.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key)
        .unwrap_or_else(|_| unreachable!("HMAC accepts every key length"));
    mac.update(msg_id.as_bytes());
    mac.update(b".");
    mac.update(timestamp_s.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac
}

/// The `webhook-signature` value for message `msg_id` sent at `timestamp_s` with `body`:
/// `v1,` + base64(HMAC-SHA256(key, "{msg_id}.{timestamp_s}.{body}")).
pub fn sign(
    secret: &str,
    msg_id: &str,
    timestamp_s: i64,
    body: &[u8],
) -> Result<String, WebhookError> {
    let tag = mac(&key(secret)?, msg_id, timestamp_s, body)
        .finalize()
        .into_bytes();
    Ok(format!("v1,{}", STANDARD.encode(tag)))
}

/// Checks a received webhook as a receiver should: the timestamp within `tolerance_s` of
/// `now_s` either way, and one of the header's `v1` signatures made with `secret` over this
/// id, timestamp and body (compared in constant time; other versions are skipped).
pub fn verify(
    secret: &str,
    headers: Signed<'_>,
    body: &[u8],
    now_s: i64,
    tolerance_s: i64,
) -> Result<(), WebhookError> {
    let key = key(secret)?;
    let ts: i64 = headers
        .timestamp
        .trim()
        .parse()
        .map_err(|_| WebhookError::Malformed("webhook-timestamp"))?;
    if now_s.saturating_sub(ts) > tolerance_s {
        return Err(WebhookError::TooOld);
    }
    if ts.saturating_sub(now_s) > tolerance_s {
        return Err(WebhookError::TooNew);
    }
    let expected = mac(&key, headers.id, ts, body);
    let matched = headers
        .signature
        .split(' ')
        .filter_map(|s| s.split_once(','))
        .filter(|(version, _)| *version == "v1")
        .filter_map(|(_, sig)| STANDARD.decode(sig).ok())
        .any(|sig| expected.clone().verify_slice(&sig).is_ok());
    if matched {
        Ok(())
    } else {
        Err(WebhookError::BadSignature)
    }
}

/// The body of a webhook about `view`: its fields, with `type` (the event's name) and
/// `timestamp` (RFC 3339, from `view.at`) first.
pub(crate) fn render(view: &View) -> String {
    let mut body = serde_json::Map::new();
    body.insert("type".into(), view.event.as_str().into());
    if let Some(at) = chrono::DateTime::from_timestamp_millis(view.at) {
        body.insert(
            "timestamp".into(),
            at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
                .into(),
        );
    }
    if let Ok(serde_json::Value::Object(fields)) = serde_json::to_value(view) {
        body.extend(fields);
    }
    serde_json::Value::Object(body).to_string()
}

/// A webhook delivery's `meta`: where its signing secret is.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Meta {
    /// The secret itself (a principal's subscription stores it).
    secret: Option<String>,
    /// The environment variable holding it (a project's definition names one).
    secret_env: Option<String>,
}

/// The secret `meta` names: given, or read from its variable now. A variable named but not set
/// is an error (retried: the operator may set it), never an unsigned send: a receiver that
/// checks signatures would drop it, one that does not would take a forgery as readily.
fn secret(meta: &Meta, env: &crate::state::Env) -> Result<Option<String>, String> {
    if let Some(s) = &meta.secret {
        return Ok(Some(s.clone()));
    }
    let Some(name) = meta.secret_env.as_deref() else {
        return Ok(None);
    };
    match env.var(name) {
        Some(s) if !s.is_empty() => Ok(Some(s)),
        _ => Err(format!(
            "the signing secret's variable `{name}` is not set where duet serve runs: not sent unsigned"
        )),
    }
}

/// Sends webhook delivery `d` at `now_s` (the attempt's `webhook-timestamp`): its target
/// checked (private addresses only when `allow_private`) and connected to at the checked
/// addresses, redirects not followed. Delivered on a `2xx`; the error says why not, starting
/// `permanent:` when trying again cannot help (a bad meta or secret, a `410 Gone`).
pub(crate) async fn send(
    http: &reqwest::Client,
    allow_private: bool,
    env: &crate::state::Env,
    d: &duet_server_store::Delivery,
    now_s: i64,
) -> Result<Option<String>, String> {
    let meta: Meta = match d.meta.as_deref() {
        None => Meta::default(),
        Some(m) => {
            serde_json::from_str(m).map_err(|e| format!("permanent: bad webhook meta: {e}"))?
        }
    };
    let signature = match secret(&meta, env)? {
        Some(s) => Some(
            sign(&s, &d.idempotency_key, now_s, d.body.as_bytes())
                .map_err(|e| format!("permanent: cannot sign: {e}"))?,
        ),
        None => None,
    };
    let target = duet_net::target_allowed(&d.target, allow_private)
        .await
        .map_err(|e| format!("target refused: {e}"))?;
    let mut req = super::http::pinned(http, &target)?
        .post(target.url.clone())
        .header("content-type", "application/json")
        .header("webhook-id", &d.idempotency_key)
        .header("webhook-timestamp", now_s.to_string())
        .header("idempotency-key", &d.idempotency_key)
        .body(d.body.clone());
    if let Some(sig) = signature {
        req = req.header("webhook-signature", sig);
    }
    match req.send().await {
        Ok(resp) if resp.status().is_success() => Ok(None),
        // Standard Webhooks: `410 Gone` is the receiver saying it wants no more.
        Ok(resp) if resp.status().as_u16() == 410 => {
            Err("permanent: HTTP 410 (the receiver wants no more)".to_owned())
        }
        Ok(resp) => Err(format!("HTTP {}", resp.status().as_u16())),
        Err(e) => Err(e.without_url().to_string()),
    }
}

#[cfg(test)]
mod tests {
    use axum::http::{HeaderMap, StatusCode};
    use tokio::sync::mpsc;

    use super::{Signed, TOLERANCE_S, WebhookError, render, send, sign, verify};
    use crate::notify::fixtures;

    /// The Standard Webhooks libraries' published vectors (the Go library's `TestWebhookSign`,
    /// the Rust library's `test_sign`): secret, id, timestamp, body, signature.
    const VECTORS: [(&str, &str, i64, &str, &str); 2] = [
        (
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1_614_265_330,
            r#"{"test": 2432232314}"#,
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
        ),
        (
            "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD",
            "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk",
            1_649_367_553,
            r#"{"email":"test@example.com","username":"test_user"}"#,
            "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw=",
        ),
    ];

    fn signed<'a>(id: &'a str, ts: &'a str, sig: &'a str) -> Signed<'a> {
        Signed {
            id,
            timestamp: ts,
            signature: sig,
        }
    }

    #[test]
    fn signs_as_the_published_vectors_say() {
        for (secret, id, ts, body, expected) in VECTORS {
            assert_eq!(
                sign(secret, id, ts, body.as_bytes()).as_deref(),
                Ok(expected)
            );
            let ts_text = ts.to_string();
            assert_eq!(
                verify(
                    secret,
                    signed(id, &ts_text, expected),
                    body.as_bytes(),
                    ts + 30,
                    TOLERANCE_S
                ),
                Ok(())
            );
        }
    }

    #[test]
    fn a_signature_verifies_only_for_its_own_id_timestamp_and_body() {
        for secret in [
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            "a plain shared secret",
        ] {
            let body = br#"{"type":"question.parked"}"#;
            let sig = sign(secret, "n1-0", 1_700_000_000, body).expect("signs");
            let ok = |id, ts, body: &[u8]| {
                verify(
                    secret,
                    signed(id, ts, &sig),
                    body,
                    1_700_000_000,
                    TOLERANCE_S,
                )
            };
            assert_eq!(ok("n1-0", "1700000000", body), Ok(()));
            assert_eq!(
                ok("n1-0", "1700000000", br#"{"type":"question.answered"}"#),
                Err(WebhookError::BadSignature),
                "a tampered body"
            );
            assert_eq!(
                ok("n1-1", "1700000000", body),
                Err(WebhookError::BadSignature)
            );
            assert_eq!(
                ok("n1-0", "1700000001", body),
                Err(WebhookError::BadSignature)
            );
            assert_eq!(
                verify(
                    "another secret",
                    signed("n1-0", "1700000000", &sig),
                    body,
                    1_700_000_000,
                    TOLERANCE_S
                ),
                Err(WebhookError::BadSignature)
            );
        }
    }

    #[test]
    fn the_timestamp_must_be_within_the_tolerance_either_way() {
        let body = b"{}";
        let sig = sign(
            "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            "n1-0",
            1_000_000,
            body,
        )
        .expect("signs");
        let at = |now| {
            verify(
                "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
                signed("n1-0", "1000000", &sig),
                body,
                now,
                TOLERANCE_S,
            )
        };
        assert_eq!(at(1_000_000 + 300), Ok(()));
        assert_eq!(at(1_000_000 + 301), Err(WebhookError::TooOld));
        assert_eq!(at(1_000_000 - 300), Ok(()));
        assert_eq!(at(1_000_000 - 301), Err(WebhookError::TooNew));
    }

    #[test]
    fn any_one_of_several_v1_signatures_may_match() {
        let (secret, id, ts, body, good) = VECTORS[0];
        let other = "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=";
        let good_b64 = good.trim_start_matches("v1,");
        let check = |header: &str| {
            verify(
                secret,
                signed(id, &ts.to_string(), header),
                body.as_bytes(),
                ts,
                TOLERANCE_S,
            )
        };
        assert_eq!(
            check(&format!("{other} v1a,xyz {good} v1,not-base64!")),
            Ok(())
        );
        assert_eq!(
            check(&format!("{other} {other}")),
            Err(WebhookError::BadSignature)
        );
        assert_eq!(
            check(&format!("v2,{good_b64}")),
            Err(WebhookError::BadSignature),
            "only v1 is HMAC-SHA256"
        );
        assert_eq!(check(""), Err(WebhookError::BadSignature));
    }

    #[test]
    fn malformed_input_says_what_is_wrong() {
        let (secret, id, _, body, good) = VECTORS[0];
        assert_eq!(
            verify(
                secret,
                signed(id, "soon", good),
                body.as_bytes(),
                0,
                TOLERANCE_S
            ),
            Err(WebhookError::Malformed("webhook-timestamp"))
        );
        assert!(matches!(
            sign("whsec_not base64!", id, 0, b"{}"),
            Err(WebhookError::Malformed(_))
        ));
        let mut headers = HeaderMap::new();
        headers.insert("webhook-id", id.parse().expect("a value"));
        headers.insert("webhook-timestamp", "1".parse().expect("a value"));
        assert_eq!(
            Signed::from_headers(&headers).err(),
            Some(WebhookError::Missing("webhook-signature"))
        );
        headers.insert("webhook-signature", good.parse().expect("a value"));
        let s = Signed::from_headers(&headers).expect("all three");
        assert_eq!((s.id, s.timestamp, s.signature), (id, "1", good));
    }

    #[test]
    fn the_body_is_the_view_with_type_and_timestamp() {
        let body: serde_json::Value =
            serde_json::from_str(&render(&fixtures::parked())).expect("JSON");
        assert_eq!(body["type"], "question.parked");
        assert_eq!(body["timestamp"], "2023-11-14T22:13:20.123Z");
        assert_eq!(body["event"], "question.parked");
        assert_eq!(body["at"], 1_700_000_000_123_i64);
        assert_eq!(body["thread"]["key"], "deploy-42");
        assert_eq!(body["question"]["call"]["tool"], "deploy");
        assert_eq!(body["question"]["approvers"]["roles"][0], "ops");
        assert!(
            body["links"]["approve"]
                .as_str()
                .is_some_and(|l| l.contains("/links/"))
        );
        let keys: Vec<&String> = body.as_object().expect("an object").keys().collect();
        assert_eq!(keys[..2], ["type", "timestamp"]);
    }

    /// A loopback receiver answering `status`: its URL, and each request's headers and body.
    async fn receiver(
        status: StatusCode,
    ) -> (String, mpsc::UnboundedReceiver<(HeaderMap, String)>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let app = axum::Router::new().route(
            "/hook",
            axum::routing::post(move |headers: HeaderMap, body: String| {
                let tx = tx.clone();
                async move {
                    let _ = tx.send((headers, body));
                    let mut r = axum::response::Response::new(axum::body::Body::empty());
                    *r.status_mut() = status;
                    if status.is_redirection() {
                        r.headers_mut().insert(
                            "location",
                            axum::http::HeaderValue::from_static("http://127.0.0.1:9/elsewhere"),
                        );
                    }
                    r
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        (url, rx)
    }

    #[tokio::test]
    async fn sends_a_signed_webhook_a_receiver_verifies() {
        let (url, mut got) = receiver(StatusCode::NO_CONTENT).await;
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let body = render(&fixtures::parked());
        let meta = serde_json::json!({ "secret": secret }).to_string();
        let d = fixtures::delivery("webhook", &url, &body, Some(&meta));
        let http = crate::notify::http::client().expect("a client");
        assert_eq!(
            send(
                &http,
                true,
                &crate::state::Env::default(),
                &d,
                1_700_000_005
            )
            .await,
            Ok(None)
        );
        let (headers, received) = got.recv().await.expect("one request");
        assert_eq!(received, body);
        assert_eq!(headers["content-type"], "application/json");
        assert_eq!(headers["webhook-id"], "n1-0");
        assert_eq!(headers["idempotency-key"], "n1-0");
        assert_eq!(headers["webhook-timestamp"], "1700000005");
        let signed = Signed::from_headers(&headers).expect("signed");
        assert_eq!(
            verify(
                secret,
                signed,
                received.as_bytes(),
                1_700_000_010,
                TOLERANCE_S
            ),
            Ok(())
        );
    }

    #[tokio::test]
    async fn a_failed_attempt_says_why() {
        let http = crate::notify::http::client().expect("a client");
        for (status, error) in [
            (StatusCode::SERVICE_UNAVAILABLE, "HTTP 503"),
            (StatusCode::TEMPORARY_REDIRECT, "HTTP 307"),
            (
                StatusCode::GONE,
                "permanent: HTTP 410 (the receiver wants no more)",
            ),
        ] {
            let (url, mut got) = receiver(status).await;
            let d = fixtures::delivery("webhook", &url, "{}", None);
            assert_eq!(
                send(&http, true, &crate::state::Env::default(), &d, 0).await,
                Err(error.to_owned())
            );
            let (headers, _) = got.recv().await.expect("tried once");
            assert!(
                headers.get("webhook-signature").is_none(),
                "no secret: unsigned"
            );
        }
        let (url, _got) = receiver(StatusCode::OK).await;
        let d = fixtures::delivery("webhook", &url, "{}", None);
        let refused = send(&http, false, &crate::state::Env::default(), &d, 0)
            .await
            .expect_err("loopback refused");
        assert!(refused.starts_with("target refused: "), "{refused}");
        let bad = fixtures::delivery("webhook", &url, "{}", Some(r#"{"secrt":"x"}"#));
        let why = send(&http, true, &crate::state::Env::default(), &bad, 0)
            .await
            .expect_err("bad meta");
        assert!(why.starts_with("permanent: bad webhook meta"), "{why}");
    }

    #[tokio::test]
    async fn a_secret_in_an_unset_variable_is_not_sent_unsigned() {
        let (url, mut got) = receiver(StatusCode::OK).await;
        let meta = r#"{"secretEnv":"DUET_TEST_WEBHOOK_SECRET"}"#;
        let d = fixtures::delivery("webhook", &url, "{}", Some(meta));
        let http = crate::notify::http::client().expect("a client");
        let unset = crate::state::Env::from_map(Default::default());
        let why = send(&http, true, &unset, &d, 0).await.expect_err("refused");
        assert!(why.contains("DUET_TEST_WEBHOOK_SECRET"), "{why}");
        assert!(!why.starts_with("permanent:"), "retried: {why}");
        // Set, the same delivery goes, signed.
        let set = crate::state::Env::from_map(
            [(
                "DUET_TEST_WEBHOOK_SECRET".to_owned(),
                "s3cret-value".to_owned(),
            )]
            .into(),
        );
        assert_eq!(send(&http, true, &set, &d, 0).await, Ok(None));
        let (headers, _) = got.recv().await.expect("sent");
        assert!(headers.get("webhook-signature").is_some());
        assert_eq!(headers["webhook-id"], "n1-0");
    }
}
