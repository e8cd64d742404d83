//! One composed approval across two `duet serve` processes, as an OTLP collector sees it, on
//! every backend: the orchestrator's request asks, the gate parks, the server stops; a second
//! server gets the answer with the client's `traceparent`. The answer's request continues the
//! client's trace, the resumed gate's step is in it and links to the step that asked (exported
//! by the first server), and the orchestrator's continuation follows in the same trace.

#[path = "support/otlp.rs"]
mod otlp;
mod support;

/// `duet serve` of `project` on `db`, exporting traces to `receiver`.
fn serve(project: &std::path::Path, db: &str, receiver: &str) -> otlp::Served {
    let endpoint = format!("http://{receiver}");
    otlp::serve_project(
        project,
        db,
        &[],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("RUST_LOG", "warn"),
        ],
    )
}

/// Reads `path` until `done` says so (bounded): the server's state, not a sleep.
fn until(base: &str, path: &str, done: impl Fn(&serde_json::Value) -> bool) -> serde_json::Value {
    let mut last = serde_json::Value::Null;
    for _ in 0..5_000 {
        let (status, body) = otlp::http(base, "GET", path, &[], "");
        if status == 200 {
            last = serde_json::from_str(&body).unwrap_or_default();
            if done(&last) {
                return last;
            }
        }
        std::thread::yield_now();
    }
    panic!("{path} never got there: {last}");
}

#[tokio::test]
async fn an_approval_answered_on_another_server_continues_the_clients_trace() {
    // The orchestrator composes question_gate: its person answers in words (a park), the
    // answer whose trace this follows. (A decision on approval_gate's proposal does not carry
    // its request's trace yet.)
    let project = support::asking_orchestrator();
    for backend in support::backends().await {
        let name = backend.name();
        let db = match &backend {
            support::Backend::Sqlite(path) => path.display().to_string(),
            support::Backend::Postgres(url) => url.clone(),
            support::Backend::Memory(..) => continue,
        };
        let (receiver, received) = otlp::receiver();

        let first = serve(project.root(), &db, &receiver);
        let base = first.base.clone();
        let (status, body) = otlp::http(
            &base,
            "POST",
            "/threads",
            &[],
            r#"{"agent": "orchestrator", "key": "ops-1", "text": "Rotate the production keys tonight, please."}"#,
        );
        assert!(status < 300, "{name}: {status} {body}");
        let approvals = until(&base, "/approvals", |v| {
            v["items"].as_array().is_some_and(|i| i.len() == 1)
        });
        let approval = approvals["items"][0]["id"]
            .as_str()
            .expect("an approval id")
            .to_owned();
        first.stop();

        let second = serve(project.root(), &db, &receiver);
        let base = second.base.clone();
        let client_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
        let client_span = "00f067aa0ba902b7";
        let traceparent = format!("00-{client_trace}-{client_span}-01");
        let (status, body) = otlp::http(
            &base,
            "POST",
            &format!("/approvals/{approval}"),
            &[("traceparent", &traceparent)],
            r#"{"text": "approve"}"#,
        );
        assert!(status < 300, "{name}: {status} {body}");
        until(&base, "/threads/ops-1", |v| {
            v["status"] != "running" && v["status"] != "waiting"
        });
        second.stop();

        let bodies: Vec<Vec<u8>> = received.try_iter().map(|(_, body)| body).collect();
        let spans = otlp::spans(&bodies);
        let named = |n: &str| spans.iter().filter(|s| s.name == n).collect::<Vec<_>>();
        let answer = named("POST /approvals/{id}");
        assert_eq!(answer.len(), 1, "{name}: {spans:#?}");
        assert_eq!(answer[0].trace, client_trace, "{name}: the client's trace");
        assert_eq!(
            answer[0].parent, client_span,
            "{name}: under the client's span"
        );
        let gate = named("invoke_agent question_gate");
        assert_eq!(gate.len(), 2, "{name}: asked, then resumed: {spans:#?}");
        let (asked, resumed) = if gate[0].trace == client_trace {
            (gate[1], gate[0])
        } else {
            (gate[0], gate[1])
        };
        assert_eq!(
            resumed.trace, client_trace,
            "{name}: the resumed step is the answer's"
        );
        assert_eq!(
            resumed.links,
            [(asked.trace.clone(), asked.id.clone())],
            "{name}: linked to the step that asked, on the other server"
        );
        let orchestrator = named("invoke_agent orchestrator");
        assert_eq!(orchestrator.len(), 2, "{name}: {spans:#?}");
        assert!(
            orchestrator.iter().any(|o| o.trace == asked.trace),
            "{name}: the question is in the orchestrator's first trace"
        );
        assert!(
            orchestrator.iter().any(|o| o.trace == client_trace),
            "{name}: the orchestrator's continuation follows the answer"
        );
    }
}
