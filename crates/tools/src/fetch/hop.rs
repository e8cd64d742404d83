//! One request of a `fetch` as it goes out: the code's request checked and cleaned (method,
//! headers, body cap, `Idempotency-Key`), and the request a redirect makes of it (the Fetch
//! standard's rules: 303, and 301/302 after a POST, become a GET without body; a change of
//! origin drops the credentials).

use reqwest::Method;
use reqwest::header::{
    AUTHORIZATION, COOKIE, HeaderMap, HeaderName, HeaderValue, PROXY_AUTHORIZATION,
};
use url::Url;

use super::text::{Shown, size};

/// Headers that describe one connection, not the request (RFC 9110 §7.6.1), and the ones the
/// client sets itself: the code's values are dropped.
const HOP_BY_HOP: [&str; 10] = [
    "host",
    "connection",
    "content-length",
    "transfer-encoding",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "upgrade",
    "expect",
];

/// Headers that describe a body: dropped with it when a redirect turns the request into a GET.
const BODY_HEADERS: [&str; 4] = [
    "content-type",
    "content-encoding",
    "content-language",
    "content-location",
];

/// The header that makes a retried request safe to repeat.
const IDEMPOTENCY_KEY: &str = "idempotency-key";

/// One request to send.
#[derive(Clone, Debug)]
pub(super) struct Hop {
    pub(super) method: Method,
    pub(super) url: Url,
    pub(super) headers: HeaderMap,
    pub(super) body: Option<Vec<u8>>,
    /// The runtime's key, sent on a method that is not safe unless the code set its own.
    key: Option<HeaderValue>,
    /// Whether the code set `Idempotency-Key` itself.
    own_key: bool,
}

impl Hop {
    /// The code's request, checked: a method `fetch` can send, headers that are valid, a body
    /// of at most `max_body` bytes and none on a GET or HEAD.
    pub(super) fn first(
        request: &duet_runtime::FetchRequest,
        max_body: u64,
    ) -> Result<Hop, String> {
        let url = Url::parse(&request.url).map_err(|e| {
            // Shown up to its query, which often holds a key.
            let shown = request.url.split(['?', '#']).next().unwrap_or_default();
            format!("fetch is refused: `{shown}` is not a URL: {e}")
        })?;
        let refused = |why: String| format!("fetch to `{}` is refused: {why}", Shown(&url));
        let method = Method::from_bytes(request.method.as_bytes())
            .map_err(|_| refused(format!("`{}` is not an HTTP method", request.method)))?;
        if matches!(method.as_str(), "CONNECT" | "TRACE" | "TRACK") {
            return Err(refused(format!("fetch cannot send a {method} request")));
        }
        if let Some(body) = &request.body {
            if method == Method::GET || method == Method::HEAD {
                return Err(refused(format!("a {method} request cannot have a body")));
            }
            if u64::try_from(body.len()).unwrap_or(u64::MAX) > max_body {
                return Err(refused(format!(
                    "its body is larger than {} (the project's fetch request cap)",
                    size(max_body)
                )));
            }
        }
        let mut headers = HeaderMap::new();
        for (name, value) in &request.headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| refused(format!("`{name}` is not a valid header name")))?;
            if HOP_BY_HOP.contains(&name.as_str()) {
                continue;
            }
            let value = HeaderValue::from_bytes(value.as_bytes())
                .map_err(|_| refused(format!("the value of header `{name}` is not valid")))?;
            headers.append(name, value);
        }
        let own_key = headers.contains_key(IDEMPOTENCY_KEY);
        let key = HeaderValue::from_str(&request.idempotency_key)
            .ok()
            .filter(|k| !k.is_empty());
        // A read sends no key (the runtime hands it an empty one): nothing to warn about.
        if key.is_none() && !request.idempotency_key.is_empty() {
            tracing::warn!(
                target: "duet::code",
                "the call's idempotency key is empty or cannot be a header value; fetch sends none"
            );
        }
        let mut hop = Hop {
            method,
            url,
            headers,
            body: request.body.clone(),
            key,
            own_key,
        };
        hop.set_key();
        Ok(hop)
    }

    /// The request a redirect answered with `status` sends to `to`.
    pub(super) fn redirected(mut self, status: u16, to: Url) -> Hop {
        let post_to_get = matches!(status, 301 | 302) && self.method == Method::POST;
        let see_other = status == 303 && self.method != Method::GET && self.method != Method::HEAD;
        if post_to_get || see_other {
            self.method = Method::GET;
            self.body = None;
            for name in BODY_HEADERS {
                self.headers.remove(name);
            }
        }
        if self.url.origin() != to.origin() {
            for name in [AUTHORIZATION, COOKIE, PROXY_AUTHORIZATION] {
                self.headers.remove(name);
            }
        }
        self.url = to;
        self.set_key();
        self
    }

    /// `Idempotency-Key` on a method that is not safe (not GET, HEAD or OPTIONS), unless the
    /// code set its own.
    fn set_key(&mut self) {
        if self.own_key {
            return;
        }
        let safe = matches!(self.method.as_str(), "GET" | "HEAD" | "OPTIONS");
        match (&self.key, safe) {
            (Some(key), false) => {
                self.headers.insert(IDEMPOTENCY_KEY, key.clone());
            }
            _ => {
                self.headers.remove(IDEMPOTENCY_KEY);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(
        method: &str,
        headers: &[(&str, &str)],
        body: Option<&str>,
    ) -> duet_runtime::FetchRequest {
        duet_runtime::FetchRequest {
            method: method.to_owned(),
            url: "https://api.example.com/v1/items?key=secret".to_owned(),
            headers: headers
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            body: body.map(|b| b.as_bytes().to_vec()),
            idempotency_key: "thread:call_1".to_owned(),
        }
    }

    fn header<'a>(hop: &'a Hop, name: &str) -> Option<&'a str> {
        hop.headers.get(name).and_then(|v| v.to_str().ok())
    }

    #[test]
    fn hop_by_hop_headers_are_dropped_and_the_rest_kept_in_order() {
        let hop = Hop::first(
            &request(
                "POST",
                &[
                    ("Host", "evil.example"),
                    ("Connection", "close"),
                    ("Content-Length", "1"),
                    ("Transfer-Encoding", "chunked"),
                    ("X-Tag", "a"),
                    ("x-tag", "b"),
                ],
                Some("{}"),
            ),
            100,
        )
        .expect("a request");
        for name in ["host", "connection", "content-length", "transfer-encoding"] {
            assert!(hop.headers.get(name).is_none(), "{name}");
        }
        let tags: Vec<_> = hop.headers.get_all("x-tag").iter().collect();
        assert_eq!(tags, ["a", "b"]);
    }

    #[test]
    fn the_key_goes_on_unsafe_methods_unless_the_code_set_one() {
        for (method, sent) in [
            ("POST", true),
            ("DELETE", true),
            ("GET", false),
            ("OPTIONS", false),
            ("HEAD", false),
        ] {
            let hop = Hop::first(&request(method, &[], None), 100).expect("a request");
            assert_eq!(header(&hop, "idempotency-key").is_some(), sent, "{method}");
        }
        let own = Hop::first(&request("PUT", &[("IDEMPOTENCY-KEY", "mine")], None), 100)
            .expect("a request");
        assert_eq!(header(&own, "idempotency-key"), Some("mine"));
    }

    #[test]
    fn what_fetch_cannot_send_is_refused_without_the_query() {
        for (req, says) in [
            (
                request("GET", &[], Some("x")),
                "a GET request cannot have a body",
            ),
            (request("TRACE", &[], None), "cannot send a TRACE request"),
            (request("PO ST", &[], None), "is not an HTTP method"),
            (
                request("POST", &[("bad name", "x")], None),
                "is not a valid header name",
            ),
            (request("POST", &[("x", "a\nb")], None), "is not valid"),
            (
                request("POST", &[], Some(&"x".repeat(101))),
                "larger than 100 bytes",
            ),
        ] {
            let err = Hop::first(&req, 100).expect_err(says);
            assert!(err.contains(says), "{err}");
            assert!(
                err.contains("`https://api.example.com/v1/items?…`"),
                "{err}"
            );
        }
    }

    #[test]
    fn a_redirect_follows_the_fetch_standard() {
        let post = Hop::first(
            &request(
                "POST",
                &[
                    ("Content-Type", "application/json"),
                    ("Authorization", "Bearer t"),
                    ("X-Api", "k"),
                ],
                Some("{}"),
            ),
            100,
        )
        .expect("a request");
        let same = Url::parse("https://api.example.com/v2").expect("a URL");
        let other = Url::parse("https://cdn.example.com/v2").expect("a URL");
        // 307 and 308 keep the method and the body.
        let kept = post.clone().redirected(307, same.clone());
        assert_eq!(kept.method, Method::POST);
        assert_eq!(kept.body.as_deref(), Some(&b"{}"[..]));
        assert_eq!(header(&kept, "idempotency-key"), Some("thread:call_1"));
        assert_eq!(header(&kept, "authorization"), Some("Bearer t"));
        // 302 after a POST is a GET without body, body headers or key.
        let get = post.clone().redirected(302, same);
        assert_eq!(get.method, Method::GET);
        assert!(get.body.is_none());
        assert!(header(&get, "content-type").is_none());
        assert!(header(&get, "idempotency-key").is_none());
        // Another origin gets no credentials; other headers go along.
        let away = post.redirected(308, other);
        assert!(header(&away, "authorization").is_none());
        assert_eq!(header(&away, "x-api"), Some("k"));
    }
}
