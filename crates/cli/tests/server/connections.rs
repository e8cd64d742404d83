//! The server's connections: a socket that sends nothing, or dribbles its request head, is
//! closed; so is a keep-alive connection left idle; an event stream is never idle, however long
//! it waits between events; past the cap the connection idle the longest makes room, and with
//! none to spare a new connection gets a `503` with `Retry-After` while `/healthz` and
//! `/readyz` still answer; a shutdown closes idle and silent connections. Waits are on the
//! sockets' ends, each under a generous guard that only keeps a broken build from hanging.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::harness::{self, Server, Sse};
use crate::support;

/// How long a test waits for something it is sure of before calling it a hang.
const GUARD: Duration = Duration::from_secs(30);

async fn connect(server: &Server) -> TcpStream {
    let addr = server.base.trim_start_matches("http://");
    TcpStream::connect(addr).await.expect("connect")
}

/// Reads until the server closes `stream` (EOF, or a reset if it left bytes unread): what it
/// sent before.
async fn closed(what: &str, stream: &mut TcpStream) -> Vec<u8> {
    let mut got = Vec::new();
    let read = tokio::time::timeout(GUARD, async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(read.is_ok(), "{what}: the server kept the connection open");
    got
}

/// One request on `stream` (kept alive): the response's status line and body.
async fn exchange(stream: &mut TcpStream, path: &str) -> (String, String) {
    let request = format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .expect("write request");
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let response = tokio::time::timeout(GUARD, async {
        loop {
            if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&got[..end]).into_owned();
                let length: usize = head
                    .lines()
                    .find_map(|l| {
                        let (name, value) = l.split_once(':')?;
                        name.eq_ignore_ascii_case("content-length")
                            .then(|| value.trim().parse().ok())?
                    })
                    .expect("a Content-Length");
                if got.len() >= end + 4 + length {
                    let body = String::from_utf8_lossy(&got[end + 4..end + 4 + length]);
                    let status = head.lines().next().unwrap_or_default().to_owned();
                    return (status, body.into_owned());
                }
            }
            let n = stream.read(&mut buf).await.expect("read response");
            assert!(n > 0, "the connection closed mid-response: {got:?}");
            got.extend_from_slice(&buf[..n]);
        }
    })
    .await;
    response.expect("a response in time")
}

#[tokio::test]
async fn silent_dribbling_and_idle_connections_are_closed() {
    // Nothing here touches the store but the admin key: one backend is enough.
    let backend = support::backends().await.remove(0);
    let mut options = harness::options();
    options.header_read_timeout = Duration::from_secs(1);
    options.idle_timeout = Duration::from_secs(1);
    let server = Server::start_with(&backend, &support::repo(), options).await;

    let mut silent = connect(&server).await;
    let mut dribbling = connect(&server).await;
    dribbling
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: te")
        .await
        .expect("half a head");
    let mut idle = connect(&server).await;
    let (status, body) = exchange(&mut idle, "/healthz").await;
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");

    assert_eq!(closed("a silent socket", &mut silent).await, b"");
    assert_eq!(closed("half a head", &mut dribbling).await, b"");
    assert_eq!(closed("an idle keep-alive", &mut idle).await, b"");

    let admin = server.key("ops", true).await;
    let resp = server
        .req(reqwest::Method::GET, "/metrics", &admin)
        .send()
        .await
        .expect("metrics");
    let text = resp.text().await.expect("text");
    let count = |series: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
            .unwrap_or(0.0)
    };
    assert!(
        count("duet_connections_closed_total{reason=\"header_timeout\"}") >= 2.0,
        "{text}"
    );
    assert!(
        count("duet_connections_closed_total{reason=\"idle_timeout\"}") >= 1.0,
        "{text}"
    );
    assert!(count("duet_connections_max") >= 16.0, "{text}");
    server.stop().await;
}

/// `POST path` on a connection of its own, closed after the answer: kept in no client's pool,
/// so the tests count the connections they mean to, and none is reused just as the server
/// closes it for being idle.
async fn post_once(server: &Server, path: &str, token: &str, body: Value) -> (u16, Value) {
    harness::send(
        server
            .req(reqwest::Method::POST, path, token)
            .header("connection", "close")
            .json(&body),
    )
    .await
}

/// An approval-gate thread `key`, parked.
async fn parked(server: &Server, token: &str, key: &str) {
    let (status, body) = post_once(
        server,
        "/threads?wait=true",
        token,
        json!({"agent": "question_gate", "key": key, "text": "Rotate the keys?"}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "awaiting_human", "{body}");
}

#[tokio::test]
async fn an_event_stream_outlives_the_idle_timeout_on_http1_and_http2() {
    for backend in support::backends().await {
        let mut options = harness::options();
        options.idle_timeout = Duration::from_millis(200);
        let server = Server::start_with(&backend, &support::repo(), options).await;
        let token = server.key("ops", false).await;
        let h2 = reqwest::Client::builder()
            .http2_prior_knowledge()
            .build()
            .expect("client");
        for (n, client) in [reqwest::Client::new(), h2].into_iter().enumerate() {
            let key = format!("k{n}");
            parked(&server, &token, &key).await;
            let resp = client
                .get(format!("{}/threads/{key}/events", server.base))
                .bearer_auth(&token)
                .send()
                .await
                .expect("events");
            let version = resp.version();
            assert_eq!(resp.status(), 200);
            let mut events = Sse::new(resp);
            events
                .until(|e| e.event == "status" && e.data["status"] == "awaiting_human")
                .await;
            // Three heartbeats apart (the test's are 500 ms): far longer than the idle timeout.
            for _ in 0..3 {
                events.heartbeat().await;
            }
            let (status, body) = post_once(
                &server,
                &format!("/threads/{key}/terminate"),
                &token,
                json!({}),
            )
            .await;
            assert!(status < 300, "{status} {body}");
            events
                .until(|e| e.event == "status" && e.data["status"] == "terminated")
                .await;
            assert_eq!(
                version,
                if n == 0 {
                    reqwest::Version::HTTP_11
                } else {
                    reqwest::Version::HTTP_2
                }
            );
        }
        server.stop().await;
    }
}

#[tokio::test]
async fn past_the_cap_the_idle_make_room_then_a_new_connection_gets_503_and_health_answers() {
    for backend in support::backends().await {
        let mut options = harness::options();
        options.max_connections = 4;
        // Long enough that only an eviction closes the idle connection.
        options.idle_timeout = Duration::from_secs(120);
        let server = Server::start_with(&backend, &support::repo(), options).await;
        let token = server.key("ops", false).await;
        // Idle the longest: it makes room for the third stream or the next request. (A
        // connection still waiting for its first request is evicted only after a second.)
        let mut idle = connect(&server).await;
        let (status, _) = exchange(&mut idle, "/healthz").await;
        assert_eq!(status, "HTTP/1.1 200 OK");
        parked(&server, &token, "k").await;
        let mut streams: Vec<Sse> = Vec::new();
        for _ in 0..3 {
            streams.push(server.events("/threads/k/events", &token, None).await);
        }
        // Another client's request is served, its connection then idle in its pool…
        let other = reqwest::Client::new();
        let (status, body) = harness::send(
            other
                .get(format!("{}/threads/k", server.base))
                .bearer_auth(&token),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(closed("the idle connection", &mut idle).await, b"");
        // …until a fourth stream takes its slot.
        streams.push(server.events("/threads/k/events", &token, None).await);
        for events in &mut streams {
            events.until(|e| e.event == "status").await;
        }

        // Every slot has a request in flight: a new connection is refused, health answered.
        let fresh = || reqwest::Client::new();
        let resp = fresh()
            .get(format!("{}/threads", server.base))
            .bearer_auth(&token)
            .send()
            .await
            .expect("refused request");
        assert_eq!(resp.status(), 503);
        assert_eq!(resp.headers()["retry-after"], "1");
        assert_eq!(
            resp.headers()["content-type"],
            duet_server::PROBLEM_JSON,
            "a problem"
        );
        let problem: Value = resp.json().await.expect("problem body");
        assert_eq!(problem["code"], "too_many_connections", "{problem}");
        assert_eq!(problem["status"], 503, "{problem}");
        for path in ["/healthz", "/readyz"] {
            let (status, body) = harness::send(fresh().get(format!("{}{path}", server.base))).await;
            assert_eq!(status, 200, "{path} under the cap: {body}");
        }
        // The streams were never cut.
        let (status, body) = harness::send(
            fresh()
                .post(format!("{}/threads/k/terminate", server.base))
                .bearer_auth(&token),
        )
        .await;
        assert_eq!(status, 503, "still at the cap: {body}");
        for events in &mut streams {
            events.heartbeat().await;
        }
        server.stop().await;
    }
}

#[tokio::test]
async fn a_shutdown_closes_silent_and_idle_connections() {
    let backend = support::backends().await.remove(0);
    let server = Server::start(&backend).await;
    let mut silent = connect(&server).await;
    let mut idle = connect(&server).await;
    let (status, _) = exchange(&mut idle, "/healthz").await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    server.stop().await;
    assert_eq!(closed("a silent socket", &mut silent).await, b"");
    assert_eq!(closed("an idle keep-alive", &mut idle).await, b"");
}
