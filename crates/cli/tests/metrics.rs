//! `GET /metrics` after a scripted run, parsed by the official Prometheus client's parser
//! (`prometheus-client` from PyPI, installed by `scripts/test-servers`): the runtime's steps,
//! model and tool calls, commits and turns (from its spans), HTTP requests by route, and the
//! threads by status read from the store. Without Python's parser the test says so and passes,
//! unless `DUET_REQUIRE_PROMETHEUS=1` (CI).
//!
//! A test binary of its own, with the metrics layer as the process's global subscriber: a
//! thread-local one beside other tests that run the engine without any is at the mercy of
//! `tracing`'s callsite-interest cache (seen in CI: every engine span missed).

#[path = "support/mod.rs"]
mod support;

#[path = "server/harness.rs"]
mod harness;

use serde_json::{Value, json};
use tracing_subscriber::layer::SubscriberExt;

use harness::{Server, send};

/// `text` parsed by Python's `prometheus_client`, or `None` when it is not installed.
async fn parse(text: &str) -> Option<Value> {
    use tokio::io::AsyncWriteExt;
    let script = support::repo().join("crates/cli/tests/clients/parse_metrics.py");
    let probe = tokio::process::Command::new("python3")
        .args(["-c", "import prometheus_client"])
        .status()
        .await;
    if !probe.is_ok_and(|s| s.success()) {
        assert!(
            std::env::var("DUET_REQUIRE_PROMETHEUS").map_or(true, |v| v != "1"),
            "DUET_REQUIRE_PROMETHEUS=1 but Python's prometheus_client is missing: run scripts/test-servers"
        );
        eprintln!(
            "SKIPPED: parsing /metrics needs Python's prometheus_client (scripts/test-servers installs it)"
        );
        return None;
    }
    let mut child = tokio::process::Command::new("python3")
        .arg(script)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(text.as_bytes()).await.expect("write");
    drop(stdin);
    let out = child.wait_with_output().await.expect("parser");
    assert!(
        out.status.success(),
        "the parser refused the exposition: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(serde_json::from_slice(&out.stdout).expect("json"))
}

/// The value of the sample `name` whose labels include `labels`, summed over the rest.
fn sample(parsed: &Value, name: &str, labels: &Value) -> f64 {
    let wanted = labels.as_object().expect("labels");
    parsed
        .as_object()
        .expect("families")
        .values()
        .flat_map(|f| f["samples"].as_array().cloned().unwrap_or_default())
        .filter(|s| s[0] == name && wanted.iter().all(|(k, v)| s[1][k] == *v))
        .map(|s| s[2].as_f64().unwrap_or_default())
        .sum()
}

/// The process's metrics, fed by its global subscriber (one test here: nothing else counts).
fn metrics() -> duet_server::metrics::Metrics {
    static METRICS: std::sync::OnceLock<duet_server::metrics::Metrics> = std::sync::OnceLock::new();
    METRICS
        .get_or_init(|| {
            let metrics = duet_server::metrics::Metrics::default();
            tracing::subscriber::set_global_default(
                tracing_subscriber::registry().with(metrics.layer()),
            )
            .expect("the only subscriber");
            metrics
        })
        .clone()
}

#[tokio::test]
async fn metrics_after_a_scripted_run_parse_and_count_what_ran() {
    for backend in support::backends().await {
        // One set of metrics for the process: each backend's run is counted as what it added.
        let metrics = metrics();
        let options = duet_server::Options {
            metrics: metrics.clone(),
            ..harness::options()
        };
        let server = Server::start_with(&backend, &support::repo(), options).await;
        let alice = server.key("alice", false).await;
        let ops = server.key("ops", true).await;
        let scrape = async || {
            let resp = server
                .req(reqwest::Method::GET, "/metrics", &ops)
                .send()
                .await
                .expect("scrape");
            assert_eq!(resp.status(), 200);
            assert_eq!(
                resp.headers()["content-type"],
                "text/plain; version=0.0.4; charset=utf-8"
            );
            let text = resp.text().await.expect("text");
            (parse(&text).await, text)
        };
        let (Some(before), _) = scrape().await else {
            server.stop().await;
            return;
        };
        let (status, body) = server
            .post(
                "/threads?wait=true",
                &alice,
                json!({"agent": "question_gate", "key": "m-1", "text": "Rotate?"}),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        let approval = body["approval"].as_str().expect("parked").to_owned();
        let (status, body) = server
            .post(
                &format!("/approvals/{approval}?wait=true"),
                &alice,
                json!({"text": "approve"}),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        let (status, _) = server.get("/threads/nope", &alice).await;
        assert_eq!(status, 404);
        // An SSE follower counts while it is connected, and not after.
        let follower = server.events("/threads/m-1/events", &alice, None).await;
        let (open, text) = scrape().await;
        let open = open.expect("parsed before");
        assert_eq!(
            sample(&open, "duet_sse_streams", &json!({}))
                - sample(&before, "duet_sse_streams", &json!({})),
            1.0,
            "{text}"
        );
        drop(follower);
        // The server sees the close at its next write (a heartbeat): scraped until then.
        let mut closed = false;
        for _ in 0..10_000 {
            let (now, _) = scrape().await;
            let now = now.expect("parsed before");
            if sample(&now, "duet_sse_streams", &json!({}))
                == sample(&before, "duet_sse_streams", &json!({}))
            {
                closed = true;
                break;
            }
            tokio::task::yield_now().await;
        }
        assert!(closed, "a closed stream stops counting");
        // Only an admin reads them.
        let (status, _) = server.get("/metrics", &alice).await;
        assert_eq!(status, 403);

        let (after, text) = scrape().await;
        let after = after.expect("parsed before");
        let added = |name: &str, labels: Value| {
            sample(&after, name, &labels) - sample(&before, name, &labels)
        };
        // The gate's side A stepped twice (asked; recorded the decision after the answer).
        assert_eq!(
            added(
                "duet_steps_total",
                json!({"agent": "question_gate", "side": "a", "outcome": "ok"})
            ),
            2.0,
            "{text}"
        );
        assert_eq!(
            added(
                "duet_step_duration_seconds_count",
                json!({"agent": "question_gate"})
            ),
            2.0
        );
        assert_eq!(
            added(
                "duet_model_calls_total",
                json!({"model": "approval_demo", "provider": "scripted", "outcome": "ok"})
            ),
            2.0
        );
        assert_eq!(
            added(
                "duet_model_time_to_first_token_seconds_count",
                json!({"model": "approval_demo"})
            ),
            2.0
        );
        assert!(
            added(
                "duet_model_tokens_total",
                json!({"model": "approval_demo", "type": "output"})
            ) > 0.0
        );
        assert_eq!(
            added(
                "duet_tool_calls_total",
                json!({"tool": "record_decision", "outcome": "success"})
            ),
            1.0
        );
        // At least the park's step and the answer's (each with the drain of the message it
        // answers: the scripted model never waits).
        assert!(added("duet_commits_total", json!({"outcome": "committed"})) >= 2.0);
        assert!(added("duet_turns_total", json!({})) >= 3.0, "{text}");
        assert_eq!(added("duet_lease_conflicts_total", json!({})), 0.0);
        // HTTP by route pattern and status.
        assert_eq!(
            added(
                "duet_http_requests_total",
                json!({"route": "/approvals/{id}", "method": "POST", "status": "200"})
            ),
            1.0
        );
        assert_eq!(
            added(
                "duet_http_requests_total",
                json!({"route": "/threads/{key}", "method": "GET", "status": "404"})
            ),
            1.0
        );
        assert_eq!(
            added(
                "duet_http_requests_total",
                json!({"route": "/metrics", "method": "GET", "status": "403"})
            ),
            1.0
        );
        // Read from the store at the scrape: the gate's thread is idle, nothing waits.
        assert_eq!(
            sample(&after, "duet_threads", &json!({"status": "idle"})),
            1.0
        );
        assert_eq!(
            sample(&after, "duet_oldest_question_age_seconds", &json!({})),
            0.0
        );
        // The timers by state, read at the scrape: none here.
        for state in ["pending", "due", "processing", "failed"] {
            assert!(
                text.contains(&format!("duet_timers{{state=\"{state}\"}} 0")),
                "{text}"
            );
        }
        assert!(
            text.contains("# TYPE duet_timer_lateness_seconds histogram"),
            "{text}"
        );
        // The outbox by channel and status, read at the scrape: every series, none sent here.
        assert!(text.contains("# TYPE duet_notifications gauge"), "{text}");
        for channel in ["webhook", "slack", "email", "a2a_push"] {
            for status in ["pending", "delivered", "failed"] {
                let line =
                    format!("duet_notifications{{channel=\"{channel}\",status=\"{status}\"}} 0");
                assert!(text.contains(&line), "{text}");
            }
        }
        // A histogram's buckets are cumulative up to +Inf = its count.
        assert_eq!(
            sample(
                &after,
                "duet_commit_duration_seconds_bucket",
                &json!({"le": "+Inf"})
            ),
            sample(&after, "duet_commit_duration_seconds_count", &json!({}))
        );

        // A question waiting shows in the gauges.
        let (status, _) = send(
            server
                .req(reqwest::Method::POST, "/threads?wait=true", &alice)
                .json(&json!({"agent": "question_gate", "key": "m-2", "text": "Again?"})),
        )
        .await;
        assert_eq!(status, 200);
        let (waiting, text) = scrape().await;
        let waiting = waiting.expect("parsed before");
        assert_eq!(
            sample(
                &waiting,
                "duet_threads",
                &json!({"status": "awaiting_human"})
            ),
            1.0,
            "{text}"
        );
        // Exported, and the question has waited only as long as this test has run.
        assert!(
            text.contains("\nduet_oldest_question_age_seconds "),
            "{text}"
        );
        let age = sample(&waiting, "duet_oldest_question_age_seconds", &json!({}));
        assert!((0.0..60.0).contains(&age), "{age}");
        server.stop().await;
    }
}
