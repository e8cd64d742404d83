//! When to try a failed model call again, and how long to wait first: exponential backoff with
//! jitter, a server's `Retry-After` honoured (capped), a bounded number of attempts. Pure.

use std::time::{Duration, SystemTime};

/// How a provider retries transient failures (429, 5xx, dropped connections, timeouts).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// The most attempts made, the first included (at least 1).
    pub max_attempts: u32,
    /// The wait before the first retry; each later one doubles it.
    pub base_delay: Duration,
    /// The longest computed wait.
    pub max_delay: Duration,
    /// The longest wait a server's `Retry-After` may ask for; a longer one is cut to this.
    pub max_retry_after: Duration,
    /// Whether computed waits are randomised (half fixed, half random), so many clients that
    /// failed together do not retry together. Off in tests, for exact delays.
    pub jitter: bool,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 3,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(60),
            jitter: true,
        }
    }
}

impl RetryPolicy {
    /// The wait after attempt `failed` (1 for the first) failed, given the server's
    /// `Retry-After` if it sent one.
    pub fn delay(&self, failed: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(wait) = retry_after {
            return wait.min(self.max_retry_after);
        }
        let doublings = failed.saturating_sub(1).min(30);
        let exp = self
            .base_delay
            .saturating_mul(1 << doublings)
            .min(self.max_delay);
        if !self.jitter {
            return exp;
        }
        let half = exp / 2;
        let spread = u64::try_from(half.as_millis()).unwrap_or(u64::MAX);
        half + Duration::from_millis(fastrand::u64(0..=spread))
    }
}

/// Whether an HTTP status means trying again may succeed: 408, 409 (a conflict the provider
/// resolves), 429 and every 5xx (Anthropic's 529 "overloaded" included).
pub(crate) fn retryable_status(status: u16) -> bool {
    matches!(status, 408 | 409 | 429 | 500..=599)
}

/// The wait a response asks for: `retry-after-ms` (milliseconds, OpenAI), else `retry-after`
/// (seconds, or an HTTP date measured from `now`).
pub(crate) fn retry_after(
    headers: &reqwest::header::HeaderMap,
    now: SystemTime,
) -> Option<Duration> {
    let get = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = get("retry-after-ms").and_then(|v| v.parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    let value = get("retry-after")?;
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::{HeaderMap, HeaderValue};

    fn fixed() -> RetryPolicy {
        RetryPolicy {
            jitter: false,
            ..RetryPolicy::default()
        }
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let p = fixed();
        let waits: Vec<u128> = (1..=6).map(|n| p.delay(n, None).as_millis()).collect();
        assert_eq!(waits, [500, 1000, 2000, 4000, 8000, 8000]);
        assert_eq!(p.delay(u32::MAX, None), p.max_delay);
    }

    #[test]
    fn jitter_stays_between_half_and_the_whole() {
        let p = RetryPolicy::default();
        for _ in 0..200 {
            let d = p.delay(2, None).as_millis();
            assert!((500..=1000).contains(&d), "{d}");
        }
    }

    #[test]
    fn retry_after_wins_and_is_capped() {
        let p = fixed();
        assert_eq!(
            p.delay(1, Some(Duration::from_secs(3))),
            Duration::from_secs(3)
        );
        assert_eq!(
            p.delay(1, Some(Duration::from_secs(3600))),
            p.max_retry_after
        );
    }

    #[test]
    fn retry_after_headers_in_every_form() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let headers = |pairs: &[(&'static str, &str)]| {
            let mut h = HeaderMap::new();
            for (k, v) in pairs {
                h.insert(*k, HeaderValue::from_str(v).expect("header"));
            }
            h
        };
        let ms = headers(&[("retry-after-ms", "250"), ("retry-after", "9")]);
        assert_eq!(retry_after(&ms, now), Some(Duration::from_millis(250)));
        let secs = headers(&[("retry-after", "2")]);
        assert_eq!(retry_after(&secs, now), Some(Duration::from_secs(2)));
        let date = httpdate::fmt_http_date(now + Duration::from_secs(7));
        let dated = headers(&[("retry-after", &date)]);
        assert_eq!(retry_after(&dated, now), Some(Duration::from_secs(7)));
        let past = httpdate::fmt_http_date(now - Duration::from_secs(7));
        assert_eq!(
            retry_after(&headers(&[("retry-after", &past)]), now),
            Some(Duration::ZERO)
        );
        for junk in ["soon", "-1", "NaN"] {
            assert_eq!(retry_after(&headers(&[("retry-after", junk)]), now), None);
        }
        assert_eq!(retry_after(&HeaderMap::new(), now), None);
    }

    #[test]
    fn which_statuses_are_transient() {
        for s in [408, 409, 429, 500, 502, 503, 529] {
            assert!(retryable_status(s), "{s}");
        }
        for s in [400, 401, 403, 404, 413, 422] {
            assert!(!retryable_status(s), "{s}");
        }
    }
}
