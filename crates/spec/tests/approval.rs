//! A tool's `approval` extension as loaded: the fields read from YAML and TS, and which calls
//! its `when` makes wait.

use std::path::Path;

use duet_spec::{ApprovalWhen, Decision, RememberScope};
use serde_json::json;

fn tools() -> duet_spec::Loaded {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/definitions/tool_approval");
    duet_spec::load(&dir).expect("the corpus case loads")
}

#[test]
fn every_field_is_read_from_yaml_and_ts() {
    let loaded = tools();
    let tools = &loaded.project.tools;
    let refund = tools["refund"]
        .def
        .approval
        .as_ref()
        .expect("refund needs approval");
    assert!(matches!(refund.when, ApprovalWhen::Matches(_)));
    assert_eq!(refund.decisions, Decision::ALL.to_vec());
    assert_eq!(
        refund.remember,
        vec![RememberScope::Session, RememberScope::Thread]
    );
    assert_eq!(refund.approvers.roles, vec!["refunds"]);
    assert_eq!(refund.approvers.principals, vec!["bob"]);
    let always = tools["always"].def.approval.as_ref().expect("always");
    assert_eq!(always.when, ApprovalWhen::Always);
    assert_eq!(always.decisions, Decision::ALL.to_vec());
    assert!(always.remember.is_empty());
    let pay = tools["pay"].def.approval.as_ref().expect("the TS tool");
    assert_eq!(pay.decisions, vec![Decision::Approve, Decision::Reject]);
    assert!(
        tools["pay"]
            .def
            .approval
            .as_ref()
            .is_some_and(|a| !a.offers(Decision::Edit))
    );
    // A `when` that cannot be read fails closed: every call waits.
    let broken = tools["schema"].def.approval.as_ref().expect("schema");
    assert_eq!(broken.when, ApprovalWhen::Always);
}

#[test]
fn when_decides_which_calls_wait() {
    let loaded = tools();
    let refund = loaded.project.tools["refund"]
        .def
        .approval
        .clone()
        .expect("refund");
    let always = loaded.project.tools["always"]
        .def
        .approval
        .clone()
        .expect("always");
    let cases = [
        (&refund, json!({"order": "A1", "amount": 250}), true),
        (&refund, json!({"order": "A1", "amount": 100}), false),
        (&refund, json!({"order": "A1", "amount": 5}), false),
        // JSON Schema: a property that is absent matches `properties` (add `required` to not).
        (&refund, json!({"order": "A1"}), true),
        (&always, json!({}), true),
    ];
    for (approval, args, waits) in cases {
        assert_eq!(approval.applies(&args), waits, "{args}");
    }
}
