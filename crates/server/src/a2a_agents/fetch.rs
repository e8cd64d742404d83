//! Fetching a message's `url` file part under the guard A2A push notifications go out with: an
//! http(s) URL whose every address is public (`duet_net`'s resolve-check), unless the server
//! allows private targets (`--allow-private-push`, which tests use for loopback); connected to
//! the checked addresses only (pinned: no second lookup), no redirect followed, one timeout for
//! the whole fetch, and at most the per-file limit read.

use std::time::Duration;

/// How long a fetch may take, from the request to its last byte.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(10);

/// The bytes at `url` and the type it was served as, or why not (in words for the client).
pub(crate) async fn get(
    url: &str,
    allow_private: bool,
    max: u64,
) -> Result<(Vec<u8>, Option<String>), String> {
    let target = duet_net::target_allowed(url, allow_private)
        .await
        .map_err(|e| match e {
            duet_net::TargetError::Refused { .. } => format!(
                "not fetched: {e} (the server fetches from private addresses only with --allow-private-push)"
            ),
            other => format!("not fetched: {other}"),
        })?;
    let base = crate::notify::http::client().map_err(|e| e.to_string())?;
    let http = crate::notify::http::pinned(&base, &target)?;
    let fetch = async {
        let mut resp = http
            .get(target.url.clone())
            .send()
            .await
            .map_err(|e| format!("the fetch failed: {}", e.without_url()))?;
        if !resp.status().is_success() {
            return Err(format!(
                "the URL answered HTTP {} (redirects are not followed)",
                resp.status().as_u16()
            ));
        }
        let too_large = |size: u64| {
            format!("the file is over the limit of {max} bytes per file (at least {size} bytes)")
        };
        if let Some(len) = resp.content_length().filter(|l| *l > max) {
            return Err(too_large(len));
        }
        let served = resp
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.split(';').next().unwrap_or_default().trim().to_owned())
            .filter(|v| !v.is_empty() && v.len() <= 127);
        let mut bytes = Vec::new();
        while let Some(chunk) = resp
            .chunk()
            .await
            .map_err(|e| format!("the fetch broke off: {}", e.without_url()))?
        {
            if bytes.len() as u64 + chunk.len() as u64 > max {
                return Err(too_large(bytes.len() as u64 + chunk.len() as u64));
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok((bytes, served))
    };
    tokio::time::timeout(TIMEOUT, fetch)
        .await
        .map_err(|_| format!("the fetch took longer than {} s", TIMEOUT.as_secs()))?
}
