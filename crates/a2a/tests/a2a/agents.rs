//! The agents the golden exchanges talk to: the echo example, the TCK's agent
//! (`examples/a2a-conformance/`), a strict card (a required
//! extension, an extended card promised but not configured, push on but unimplemented), and a
//! rule breaker whose replies break the protocol on purpose.

use duet_a2a::*;

#[path = "../../../../examples/a2a_echo.rs"]
#[allow(dead_code, unreachable_pub)]
mod echo;

#[path = "../../../../examples/a2a-conformance/main.rs"]
#[allow(dead_code, unreachable_pub)]
mod conformance;

/// The URI the strict agent requires.
const REQUIRED: &str = "urn:duet:test:required";

pub(crate) fn by_name(name: &str) -> A2aService {
    match name {
        "echo" => echo::service(),
        "conformance" => {
            A2aServer::new(conformance::card()).agent(conformance::Conformance::default())
        }
        "strict" => strict(),
        "breaker" => breaker(),
        other => panic!("no test agent `{other}`"),
    }
}

fn strict() -> A2aService {
    let mut card = AgentCard::new("strict", "requires an extension").with_bearer_auth();
    card.capabilities.extended_agent_card = true;
    card.capabilities.push_notifications = true;
    card.capabilities.extensions = vec![AgentExtension {
        uri: REQUIRED.into(),
        description: Some("a test extension every client must name".into()),
        required: true,
        params: None,
    }];
    struct Strict;
    impl A2aAgent for Strict {}
    A2aServer::new(card).agent(Strict)
}

fn breaker() -> A2aService {
    let mut card = AgentCard::new("breaker", "breaks the protocol on purpose");
    card.capabilities.streaming = true;
    A2aServer::new(card).agent(AgentFn(|op: Operation, cx: Context| async move {
        let text = cx.message.clone().unwrap_or_default();
        match op {
            Operation::SendMessage(_) if text == "wrong reply" => Ok(Reply::Deleted),
            Operation::SendMessage(_) if text == "panic" => panic!("the breaker panics"),
            Operation::SendMessage(_) if text == "custom" => Err(A2aError::custom(
                -32050,
                429,
                "SLOW_DOWN",
                "too many messages",
            )),
            Operation::SendStreamingMessage(_) if text == "status first" => Ok(Reply::from(
                cx.stream.open("t-1", "c-1", |mut s| async move {
                    s.status(TaskStatus::now(TaskState::Working)).await
                }),
            )),
            Operation::SendStreamingMessage(_) if text == "fail midway" => Ok(Reply::from(
                cx.stream.open("t-2", "c-2", |mut s| async move {
                    s.task(Task {
                        id: "t-2".into(),
                        context_id: "c-2".into(),
                        status: TaskStatus {
                            state: TaskState::Working,
                            message: None,
                            timestamp: None,
                        },
                        artifacts: vec![],
                        history: vec![],
                        metadata: None,
                    })
                    .await?;
                    Err(A2aError::task_not_found("t-2"))
                }),
            )),
            Operation::GetTask(_) => Ok(Reply::Tasks(ListTasksResponse {
                tasks: vec![],
                next_page_token: String::new(),
                page_size: 0,
                total_size: 0,
            })),
            op => Err(op.unsupported()),
        }
    }))
}
