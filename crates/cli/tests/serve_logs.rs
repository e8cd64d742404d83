//! `duet serve --log-format json`: every log line is one JSON object (level, message, fields),
//! beside the one plain line that says where the server listens; SIGTERM stops it gracefully.
//! And traces out of `duet serve`: over OTLP/HTTP, and over gRPC when the protocol says so.

#[path = "support/otlp.rs"]
mod otlp;
mod support;

#[test]
fn json_logs_are_one_object_a_line_and_sigterm_stops_the_server() {
    let db = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("logs-{}.db", uuid::Uuid::now_v7().simple()));
    let served = otlp::serve(
        &db.display().to_string(),
        &["--log-format", "json"],
        &[("RUST_LOG", "info")],
    );
    let mut logs = served.before.clone();
    logs.extend(served.stop());
    let events: Vec<serde_json::Value> = logs
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let message = |e: &serde_json::Value| {
        e["fields"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    assert!(
        events
            .iter()
            .any(|e| e["level"] == "WARN" && message(e).contains("--no-auth")),
        "the --no-auth warning is logged: {logs:#?}"
    );
    assert!(
        events.iter().any(|e| message(e) == "listening"),
        "{logs:#?}"
    );
    assert!(
        events
            .iter()
            .any(|e| message(e).starts_with("shutting down")),
        "{logs:#?}"
    );
    assert!(events.iter().any(|e| message(e) == "stopped"), "{logs:#?}");
}

#[test]
fn traces_go_to_the_otlp_endpoint_and_the_scrape_counts_the_run() {
    let (receiver, received) = otlp::receiver();
    let db = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("otel-{}.db", uuid::Uuid::now_v7().simple()));
    let endpoint = format!("http://{receiver}");
    let served = otlp::serve(
        &db.display().to_string(),
        &[],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("RUST_LOG", "warn"),
        ],
    );
    let base = served.base.clone();
    let (_, thread) = otlp::http(
        &base,
        "POST",
        "/threads?wait=true",
        &[],
        r#"{"agent": "question_gate", "key": "t-1", "text": "Rotate?"}"#,
    );
    assert!(thread.contains("awaiting_human"), "{thread}");
    let (_, metrics) = otlp::http(&base, "GET", "/metrics", &[], "");
    assert!(
        metrics.contains("duet_steps_total{agent=\"question_gate\",side=\"a\",outcome=\"ok\"} 1"),
        "duet serve feeds /metrics from the runtime's spans: {metrics}"
    );
    assert!(
        metrics.contains("duet_threads{status=\"awaiting_human\"} 1"),
        "{metrics}"
    );
    // A graceful stop flushes the batched spans.
    let after = served.stop();
    let mut bodies = Vec::new();
    while let Ok((head, body)) = received.try_recv() {
        assert!(head.starts_with("POST /v1/traces "), "{head}");
        assert!(
            head.to_ascii_lowercase()
                .contains("content-type: application/x-protobuf"),
            "{head}"
        );
        bodies.extend(body);
    }
    let has = |needle: &str| bodies.windows(needle.len()).any(|w| w == needle.as_bytes());
    for span in [
        "invoke_agent question_gate",
        "chat demo",
        "commit",
        "POST /threads",
    ] {
        assert!(
            has(span),
            "the export holds the span `{span}` ({} bytes; the server said {after:?})",
            bodies.len()
        );
    }
    for attribute in [
        "gen_ai.agent.name",
        "gen_ai.conversation.id",
        "gen_ai.provider.name",
        "gen_ai.usage.output_tokens",
        "http.route",
    ] {
        assert!(
            has(attribute),
            "the export holds the attribute `{attribute}`"
        );
    }
    assert!(has("duet"), "the service name");
    assert!(!has("Rotate?"), "no message content is exported");
}

/// With `OTEL_EXPORTER_OTLP_PROTOCOL=grpc` the same spans go to an OTLP/gRPC receiver.
#[test]
fn traces_go_over_grpc_when_the_protocol_says_so() {
    let (receiver, received) = otlp::grpc_receiver();
    let db = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("otel-grpc-{}.db", uuid::Uuid::now_v7().simple()));
    let endpoint = format!("http://{receiver}");
    let served = otlp::serve(
        &db.display().to_string(),
        &[],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("RUST_LOG", "warn"),
        ],
    );
    let base = served.base.clone();
    let (_, thread) = otlp::http(
        &base,
        "POST",
        "/threads?wait=true",
        &[],
        r#"{"agent": "question_gate", "key": "t-1", "text": "Rotate?"}"#,
    );
    assert!(thread.contains("awaiting_human"), "{thread}");
    let after = served.stop();
    let bodies: Vec<Vec<u8>> = received.try_iter().map(|(_, body)| body).collect();
    let spans = otlp::spans(&bodies);
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    for wanted in ["invoke_agent question_gate", "chat demo", "POST /threads"] {
        assert!(
            names.contains(&wanted),
            "`{wanted}` over gRPC: {names:?} (the server said {after:?})"
        );
    }
    let gate = spans
        .iter()
        .find(|s| s.name == "invoke_agent question_gate")
        .expect("the step");
    let request = spans
        .iter()
        .find(|s| s.name == "POST /threads")
        .expect("the request");
    assert_eq!(gate.trace, request.trace, "the run is the request's");
}
