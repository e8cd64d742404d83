//! Test fixtures the channels' unit tests share: views of a parked tool call and of its
//! answer, and a stored delivery.

use duet_server_store::{Delivery, DeliveryStatus};

use super::{Answer, Event, Links, ProposedCall, Question, QuestionKind, ThreadRef, View};

/// The one-time link URL for `token`, as the router makes them.
pub(crate) fn link(token: &str) -> String {
    format!("https://duet.example.com/links/{token}")
}

/// A tool call of agent `deployer` waiting for a decision by role `ops`, with approve, reject
/// and open links.
pub(crate) fn parked() -> View {
    View {
        event: Event::QuestionParked,
        at: 1_700_000_000_123,
        thread: ThreadRef {
            id: "0190a0b0-0000-7000-8000-000000000001".to_owned(),
            key: "deploy-42".to_owned(),
            agent: "deployer".to_owned(),
            owner: Some("alice".to_owned()),
        },
        question: Some(Question {
            approval: "0190a0b0-0000-7000-8000-000000000001:1:7".to_owned(),
            kind: QuestionKind::ToolCall,
            text: "deployer wants to run `deploy` on <prod> & friends".to_owned(),
            call: Some(ProposedCall {
                id: "call_1".to_owned(),
                tool: "deploy".to_owned(),
                args: serde_json::json!({"service": "api", "version": "1.4.2"}),
            }),
            decisions: vec![duet_spec::Decision::Approve, duet_spec::Decision::Reject],
            approvers: duet_spec::Approvers {
                roles: vec!["ops".to_owned()],
                principals: vec![],
            },
            deadline: Some("answered with \"reject\" at 2023-11-14 22:13 UTC".to_owned()),
        }),
        answer: None,
        escalated_to: None,
        reminder: None,
        session: None,
        links: Some(Links {
            approve: Some(link("eyJsIjoiYXBwcm92ZSJ9.c2ln")),
            reject: Some(link("eyJsIjoicmVqZWN0In0.c2ln")),
            open: Some(
                "https://duet.example.com/inbox/items/0190a0b0-0000-7000-8000-000000000001:1:7"
                    .to_owned(),
            ),
            expires_at: Some(1_700_259_200_000),
        }),
    }
}

/// The same question, decided `decision` by `by` with `text`, links gone.
pub(crate) fn answered(by: &str, decision: duet_spec::Decision, text: Option<&str>) -> View {
    let mut v = parked();
    v.event = Event::QuestionAnswered;
    v.links = None;
    v.answer = Some(Answer {
        by: Some(by.to_owned()),
        decision: Some(decision),
        text: text.map(str::to_owned),
    });
    v
}

/// A pending delivery on `channel` to `target` with `body` and `meta`.
pub(crate) fn delivery(channel: &str, target: &str, body: &str, meta: Option<&str>) -> Delivery {
    Delivery {
        id: 1,
        channel: channel.to_owned(),
        stream: format!("{channel}:test:{target}"),
        target: target.to_owned(),
        notice: Some(1),
        thread: None,
        event: "question.parked".to_owned(),
        subject: Some("0190a0b0-0000-7000-8000-000000000001:1:7".to_owned()),
        subscription: Some("agents/notifications/ops".to_owned()),
        recipient: None,
        body: body.to_owned(),
        meta: meta.map(str::to_owned),
        idempotency_key: "n1-0".to_owned(),
        attempts: 0,
        status: DeliveryStatus::Pending,
        next_at: 0,
        last_error: None,
        response: None,
        created_at: 0,
        finished_at: None,
    }
}
