//! A webhook receiver on 127.0.0.1 for the notification tests (A2A push, webhooks): it takes a
//! `POST` on any path, answers `503` while it is down and `200` once it is up, and reports every
//! request — its path, headers, raw body and the status it was answered — on a channel the test
//! awaits (never a sleep).

#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::http::{HeaderMap, StatusCode, Uri};
use serde_json::Value;
use tokio::sync::mpsc;

/// One request the receiver got.
#[derive(Clone, Debug)]
pub struct Hit {
    /// The request's path (`/ops`).
    pub path: String,
    pub headers: HeaderMap,
    /// The body as sent (what a signature covers).
    pub raw: String,
    /// The body as JSON (the text as a JSON string when it is not JSON).
    pub body: Value,
    /// What the receiver answered.
    pub status: u16,
}

impl Hit {
    /// Header `name` as text ("" when absent).
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    /// Its `webhook-id`.
    pub fn id(&self) -> &str {
        self.header("webhook-id")
    }

    /// The event its body names (`question.parked`, …).
    pub fn event(&self) -> &str {
        self.body["type"].as_str().unwrap_or("")
    }
}

/// The receiver: `url` is its `/hook` path; [`Hook::at`] names any other.
pub struct Hook {
    pub base: String,
    pub url: String,
    pub up: Arc<AtomicBool>,
    hits: mpsc::UnboundedReceiver<Hit>,
}

impl Hook {
    /// A receiver that is down (`503`) until `up` is set.
    pub async fn start() -> Hook {
        let (tx, hits) = mpsc::unbounded_channel();
        let up = Arc::new(AtomicBool::new(false));
        let flag = up.clone();
        let app = axum::Router::new().fallback(axum::routing::post(
            move |uri: Uri, headers: HeaderMap, raw: String| {
                let (tx, flag) = (tx.clone(), flag.clone());
                async move {
                    let status = if flag.load(Ordering::SeqCst) {
                        StatusCode::OK
                    } else {
                        StatusCode::SERVICE_UNAVAILABLE
                    };
                    let body =
                        serde_json::from_str(&raw).unwrap_or_else(|_| Value::String(raw.clone()));
                    let _ = tx.send(Hit {
                        path: uri.path().to_owned(),
                        headers,
                        raw,
                        body,
                        status: status.as_u16(),
                    });
                    status
                }
            },
        ));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        tokio::spawn(async move { axum::serve(listener, app).await });
        Hook {
            url: format!("{base}/hook"),
            base,
            up,
            hits,
        }
    }

    /// A receiver that is up from the start.
    pub async fn up() -> Hook {
        let hook = Hook::start().await;
        hook.set_up(true);
        hook
    }

    /// Answers `200` (`true`) or `503` from the next request on.
    pub fn set_up(&self, up: bool) {
        self.up.store(up, Ordering::SeqCst);
    }

    /// The URL of `path` on this receiver (`/ops`).
    pub fn at(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The next request it gets (a minute at most: a hung test, not a timed assertion).
    pub async fn next(&mut self) -> Hit {
        tokio::time::timeout(Duration::from_secs(60), self.hits.recv())
            .await
            .expect("a request within a minute")
            .expect("the receiver runs")
    }

    /// Every request until one satisfies `done` (included).
    pub async fn until(&mut self, done: impl Fn(&Hit) -> bool) -> Vec<Hit> {
        let mut seen = Vec::new();
        loop {
            let hit = self.next().await;
            let stop = done(&hit);
            seen.push(hit);
            if stop {
                return seen;
            }
        }
    }

    /// The requests that arrived and were not read yet, without waiting.
    pub fn drain(&mut self) -> Vec<Hit> {
        let mut seen = Vec::new();
        while let Ok(hit) = self.hits.try_recv() {
            seen.push(hit);
        }
        seen
    }
}
