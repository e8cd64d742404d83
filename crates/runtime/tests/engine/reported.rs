//! A run asked for its session (`Claim::reporting_session`, what a blocking A2A send asks)
//! reports the session's entries as its settling write left them — on SQLite read by that very
//! write, on a store that does not read with a commit not at all (`None`: the caller reads) —
//! and a run not asked reports nothing. On every backend.

use crate::support;

use duet_runtime::{Accepted, CancellationToken, Delivery, EventSink, Settled};

/// A model that asks and, answered, ends the session; a person on the other side.
fn project() -> std::sync::Arc<duet_spec::Project> {
    let dir = support::Scratch::new("reported");
    let write = |path: &str, text: &str| dir.write(path, text);
    write(
        "agents/agents/gate.yaml",
        "name: gate\nsideA:\n  prompt: gate\n  sessionStop: { name: decide, messageProperty: decision }\nsideB: { human: true }\n",
    );
    write(
        "agents/prompts/gate.yaml",
        "name: gate\ntoolDescription: d\nmodel: gate_model\nincludeChat: true\nprompt: Ask.\ntools: [decide]\n",
    );
    write(
        "agents/tools/decide.yaml",
        "description: Record it.\nargs: { type: object, properties: { decision: { type: string } }, required: [decision] }\nresult: ok\n",
    );
    write(
        "agents/models/gate_model.yaml",
        "name: gate_model\nprovider: scripted\nmodel: demo\nscript:\n  - text: Approve the change?\n  - tool_calls: [{ name: decide, arguments: { decision: approved } }]\n",
    );
    dir.project()
}

/// Runs what `accepted` claimed, reporting its session when `report` says so.
async fn run(rt: &duet_runtime::Runtime, accepted: Accepted, report: bool) -> Settled {
    let Accepted::Claimed(claim) = accepted else {
        panic!("not claimed: {accepted:?}");
    };
    let claim = if report {
        claim.reporting_session()
    } else {
        claim
    };
    rt.run_claimed(claim, &EventSink::discard(), &CancellationToken::new())
        .await
        .expect("run")
}

#[tokio::test]
async fn a_run_asked_for_its_session_reports_it_as_its_settling_write_left_it() {
    let project = project();
    for backend in support::backends().await {
        let name = backend.name();
        let rt = support::runtime(project.clone(), backend.open().await).build();
        let store = rt.store();
        let reads = name == "sqlite";
        for (key, report) in [("asked", true), ("not-asked", false)] {
            let delivery = Delivery {
                agent: Some("gate"),
                ..Delivery::new(key, "Change the firewall?")
            };
            let parked = run(&rt, rt.accept(delivery).await.expect("accept"), report).await;
            assert_eq!(parked.status.as_str(), "awaiting_human", "{name} {key}");
            let delivery = Delivery {
                answers: parked.park,
                ..Delivery::new(key, "yes")
            };
            let ended = run(&rt, rt.accept(delivery).await.expect("answer"), report).await;
            assert_eq!(ended.result.as_deref(), Some("approved"), "{name} {key}");
            for settled in [&parked, &ended] {
                let after = store
                    .session_entries(settled.thread, settled.session, settled.last.next_seq)
                    .await
                    .expect("read");
                match &settled.session_entries {
                    Some(entries) => {
                        assert!(report && reads, "{name} {key}: reported unasked");
                        assert_eq!(entries, &after, "{name} {key}: as read after");
                    }
                    None => assert!(!(report && reads), "{name} {key}: not reported"),
                }
            }
            // The park's entries end at its question; the end's run to the session's end.
            if let Some(entries) = &ended.session_entries {
                assert!(
                    entries.len() > parked.session_entries.as_ref().map_or(0, Vec::len),
                    "{name}"
                );
            }
        }
    }
}
