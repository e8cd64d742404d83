//! Code's `fetch` ([`CodeFetcher`], the runtime's [`Fetcher`]): the HTTP client behind the
//! embedded code host's `fetch`, held to the project's policy ([`FetchPolicy`]).
//!
//! - Where: only hosts on the project's allowlist, and of those only public addresses
//!   ([`Allowlist`]: a name is resolved once and the connection pinned to the addresses
//!   checked; an entry that is an IP address with a port grants that address even if private).
//!   No proxy is used.
//! - Redirects are followed by hand, at most [`duet_net::MAX_REDIRECTS`], each one checked as
//!   the first request was; 303 (and 301/302 after a POST) become a GET without body, and a
//!   change of origin drops `Authorization`, `Cookie` and `Proxy-Authorization` (the Fetch
//!   standard's rules). The answer carries the URL it came from.
//! - Limits: the whole exchange (redirects and the body included) within the policy's timeout;
//!   a request body and a response body of at most the policy's caps (the response streamed,
//!   and refused once it passes the cap).
//! - `Idempotency-Key` (the call's key, stable across a redone step) on a method that is not
//!   GET, HEAD or OPTIONS, unless the code set one; the headers that describe a connection
//!   (`Host`, `Connection`, `Content-Length`, `Transfer-Encoding`…) are the client's, the
//!   code's are dropped. Without the code's own, `User-Agent: duet/<version>` and `Accept: */*`
//!   (as Node's `fetch` sends its own: some APIs refuse a request without `User-Agent`).
//! - Messages show a URL without its query, which often holds a key.

use std::time::Duration;

use async_trait::async_trait;
use duet_runtime::{FetchRequest, FetchResponse, Fetcher};
use reqwest::header::LOCATION;
use url::Url;

mod allow;
mod clients;
mod hop;
mod text;

pub use allow::{Allowlist, Route};

use clients::Clients;
use hop::Hop;
use text::{Shown, size};

/// What code's `fetch` may do in a project.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FetchPolicy {
    /// The hosts it may reach: `host` or `host:port`, `*.example.com` for the names under one
    /// ([`Allowlist`]). Empty (the default): none.
    pub allow: Vec<String>,
    /// The whole exchange, redirects and the response body included.
    pub timeout: Duration,
    /// The largest response body, in bytes.
    pub max_response_bytes: u64,
    /// The largest request body, in bytes.
    pub max_request_bytes: u64,
}

impl Default for FetchPolicy {
    fn default() -> Self {
        FetchPolicy {
            allow: Vec::new(),
            timeout: Duration::from_secs(10),
            max_response_bytes: 5 << 20,
            max_request_bytes: 5 << 20,
        }
    }
}

impl FetchPolicy {
    /// Whether every allow entry is one ([`Allowlist::new`]): the first that is not, in words.
    pub fn validate(&self) -> Result<(), String> {
        Allowlist::new(&self.allow).map(|_| ())
    }
}

/// Makes code's `fetch` requests under a [`FetchPolicy`], with connections shared between
/// calls.
pub struct CodeFetcher {
    /// The list, or why the policy's is not one (every fetch is refused saying so).
    allow: Result<Allowlist, String>,
    policy: FetchPolicy,
    clients: Clients,
}

impl CodeFetcher {
    /// A fetcher held to `policy`. One whose allowlist has an entry that is not one refuses
    /// every request, naming it ([`FetchPolicy::validate`] says so earlier).
    pub fn new(policy: FetchPolicy) -> Self {
        CodeFetcher {
            allow: Allowlist::new(&policy.allow),
            policy,
            clients: Clients::new(),
        }
    }

    /// The client that reaches `url` as the policy allows, or why it may not be reached.
    async fn client_for(&self, allow: &Allowlist, url: &Url) -> Result<reqwest::Client, String> {
        match allow.route(url)? {
            Route::Granted | Route::Public => self.clients.shared(),
            Route::Resolve { host, port } => {
                let addrs: Vec<_> = tokio::net::lookup_host((host.as_str(), port))
                    .await
                    .map_err(|e| {
                        format!(
                            "fetch to `{}` failed: cannot resolve `{host}`: {e}",
                            Shown(url)
                        )
                    })?
                    .collect();
                Allowlist::judge(url, &host, &addrs)?;
                self.clients.pinned(&host, &addrs)
            }
        }
    }

    /// Sends `hop` and the requests its redirects make; the last answer, read.
    async fn exchange(&self, allow: &Allowlist, mut hop: Hop) -> Result<FetchResponse, String> {
        let first = hop.url.clone();
        let mut redirects = 0;
        loop {
            let client = self.client_for(allow, &hop.url).await.map_err(|why| {
                if redirects == 0 {
                    why
                } else {
                    format!("{why} (redirected from `{}`)", Shown(&first))
                }
            })?;
            let mut builder = client
                .request(hop.method.clone(), hop.url.clone())
                .headers(hop.headers.clone());
            if let Some(body) = &hop.body {
                builder = builder.body(body.clone());
            }
            let response = builder
                .send()
                .await
                .map_err(|e| format!("fetch to `{}` failed: {}", Shown(&hop.url), describe(e)))?;
            let status = response.status().as_u16();
            let location = response
                .headers()
                .get(LOCATION)
                .map(|l| l.as_bytes().to_vec());
            if let (301 | 302 | 303 | 307 | 308, Some(location)) = (status, location) {
                if redirects == duet_net::MAX_REDIRECTS {
                    return Err(format!(
                        "fetch to `{}` was redirected more than {} times",
                        Shown(&first),
                        duet_net::MAX_REDIRECTS
                    ));
                }
                let to = std::str::from_utf8(&location)
                    .ok()
                    .and_then(|l| hop.url.join(l).ok())
                    .ok_or_else(|| {
                        format!(
                            "fetch to `{}` was redirected to a Location that is not a URL",
                            Shown(&hop.url)
                        )
                    })?;
                redirects += 1;
                hop = hop.redirected(status, to);
                continue;
            }
            let headers = response
                .headers()
                .iter()
                .map(|(k, v)| {
                    (
                        k.as_str().to_owned(),
                        String::from_utf8_lossy(v.as_bytes()).into_owned(),
                    )
                })
                .collect();
            let body = read_capped(response, self.policy.max_response_bytes, &hop.url).await?;
            // A response's URL has no fragment (the Fetch standard's `Response.url`).
            hop.url.set_fragment(None);
            return Ok(FetchResponse {
                status,
                headers,
                body,
                url: hop.url.into(),
            });
        }
    }
}

#[async_trait]
impl Fetcher for CodeFetcher {
    async fn fetch(&self, request: FetchRequest) -> Result<FetchResponse, String> {
        let allow = self
            .allow
            .as_ref()
            .map_err(|why| format!("fetch is refused: {why}"))?;
        let hop = Hop::first(&request, self.policy.max_request_bytes)?;
        let shown = Shown(&hop.url).to_string();
        let method = hop.method.clone();
        let result = tokio::time::timeout(self.policy.timeout, self.exchange(allow, hop))
            .await
            .unwrap_or_else(|_| {
                Err(format!(
                    "fetch to `{shown}` got no answer within {} ms (the project's fetch timeout)",
                    self.policy.timeout.as_millis()
                ))
            });
        match &result {
            Ok(r) => {
                tracing::debug!(target: "duet::code", %method, url = %shown, status = r.status, "fetch")
            }
            Err(why) => {
                tracing::debug!(target: "duet::code", %method, url = %shown, "fetch failed: {why}")
            }
        }
        result
    }
}

/// `response`'s body, refused once it passes `max` bytes (announced or streamed).
async fn read_capped(
    mut response: reqwest::Response,
    max: u64,
    url: &Url,
) -> Result<Vec<u8>, String> {
    let too_large = || {
        format!(
            "the response of `{}` is larger than {}",
            Shown(url),
            size(max)
        )
    };
    if response.content_length().is_some_and(|n| n > max) {
        return Err(too_large());
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| {
        format!(
            "the response of `{}` broke off: {}",
            Shown(url),
            describe(e)
        )
    })? {
        if u64::try_from(body.len() + chunk.len()).unwrap_or(u64::MAX) > max {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A client error and its causes, without the URL (messages show theirs).
fn describe(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut text = e.to_string();
    let mut cause = std::error::Error::source(&e);
    while let Some(c) = cause {
        let said = c.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        cause = c.source();
    }
    text
}
