//! duet as an A2A client: a relationship names a remote agent (`agents/remotes/`), and an
//! orchestrator on one server composes the approval gate of another, over A2A, as a blocking
//! child: the remote task's `input-required` is the child waiting for a person here, the answer
//! given here reaches the remote task, and its result is the child's, on both backends.

use serde_json::json;

use crate::harness::{Server, options, until};
use crate::support;

/// A project whose `boss` composes `remote_gate`, the approval gate served at `remote`.
fn project(remote: &str) -> support::Scratch {
    let p = support::Scratch::new("a2a-remote");
    p.write(
        "agents/remotes/remote_gate.yaml",
        &format!("name: remote_gate\nurl: {remote}/a2a/question_gate\ndescription: Ask the remote approver.\n"),
    );
    p.write(
        "agents/agents/boss.yaml",
        "name: boss\nmaxSessionTurns: 10\nsideA:\n  prompt: boss\n  subagents:\n    - agent: remote_gate\n      as: approval\n      blocking: true\nsideB: { human: true }\n",
    );
    p.write(
        "agents/prompts/boss.yaml",
        "name: boss\ntoolDescription: plans\nmodel: boss_demo\nprompt: Plan, and get approval first.\n",
    );
    p.write(
        "agents/models/boss_demo.yaml",
        "name: boss_demo\nprovider: scripted\nmodel: demo\nscript:\n  - tool_calls:\n      - name: subagent_create\n        arguments: { agent: approval, name: deploy, message: \"Approve deploying v2 tonight?\", attachments: [] }\n  - text: \"The remote approver decided; going ahead.\"\n",
    );
    p
}

#[tokio::test]
async fn an_orchestrator_composes_a_remote_a2a_agent_as_a_child() {
    let there = support::backends().await;
    let here = support::backends().await;
    for (b1, b2) in there.iter().zip(&here) {
        // The remote: the example project, its A2A open (no key).
        let remote = Server::start_with(
            b1,
            &support::repo(),
            duet_server::Options {
                auth: false,
                ..options()
            },
        )
        .await;
        let p = project(&remote.base);
        let local = Server::start_with(b2, p.root(), options()).await;
        let alice = local.key("alice", false).await;

        let (status, body) = local
            .post(
                "/threads",
                &alice,
                json!({"agent": "boss", "key": "plan-1", "text": "Deploy v2 tonight."}),
            )
            .await;
        assert!(status == 201 || status == 202, "{body}");
        until(&local, &alice, "plan-1", "waiting").await;
        let (_, parent) = local.get("/threads/plan-1", &alice).await;
        let child = parent["children"][0]["key"]
            .as_str()
            .expect("the child")
            .to_owned();
        until(&local, &alice, &child, "awaiting_human").await;

        // The remote task's question waits here, as the child's.
        let (_, approvals) = local.get("/approvals", &alice).await;
        let item = &approvals["items"][0];
        assert_eq!(item["agent"], "remote_gate", "{approvals}");
        assert!(
            item["question"]
                .as_str()
                .unwrap_or_default()
                .contains("Do you approve?"),
            "{approvals}"
        );
        // ... and there, it is an A2A task waiting for input.
        let (_, tasks) = crate::harness::send(
            reqwest::Client::new()
                .post(format!("{}/a2a/question_gate", remote.base))
                .header("A2A-Version", "1.0")
                .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}})),
        )
        .await;
        let listed = &tasks["result"]["tasks"];
        assert_eq!(listed.as_array().map(Vec::len), Some(1), "{tasks}");
        assert_eq!(
            listed[0]["status"]["state"], "TASK_STATE_INPUT_REQUIRED",
            "{tasks}"
        );

        let approval = item["id"].as_str().expect("an id").to_owned();
        let (status, answered) = local
            .post(
                &format!("/approvals/{approval}?wait=true"),
                &alice,
                json!({"text": "approved"}),
            )
            .await;
        assert_eq!(status, 200, "{answered}");
        assert_eq!(
            answered["result"], "approved",
            "the remote gate's decision is the child's result: {answered}"
        );
        until(&local, &alice, "plan-1", "awaiting_human").await;
        let (_, messages) = local.get("/threads/plan-1/messages", &alice).await;
        let said: Vec<&str> = messages["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| e["data"]["content"].as_str())
            .collect();
        assert!(
            said.iter().any(|s| s.starts_with("approved")),
            "the tool result: {said:?}"
        );
        assert_eq!(
            said.last(),
            Some(&"The remote approver decided; going ahead."),
            "{said:?}"
        );
        let (_, tasks) = crate::harness::send(
            reqwest::Client::new()
                .post(format!("{}/a2a/question_gate", remote.base))
                .header("A2A-Version", "1.0")
                .json(&json!({"jsonrpc": "2.0", "id": 2, "method": "ListTasks", "params": {}})),
        )
        .await;
        assert_eq!(
            tasks["result"]["tasks"][0]["status"]["state"], "TASK_STATE_COMPLETED",
            "{tasks}"
        );
        local.stop().await;
        remote.stop().await;
    }
}
