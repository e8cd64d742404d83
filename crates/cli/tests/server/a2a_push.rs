//! A2A push notifications through `duet serve`, on both backends: a notification its endpoint
//! refused is retried, survives a restart of the server, and arrives with the config's
//! `Authorization` and token; a private target is refused unless the server allows it; a config
//! outlives its task's end.

use serde_json::{Value, json};

use crate::harness::{Server, options};
use crate::hook::{Hit, Hook};
use crate::support;

async fn rpc(server: &Server, token: &str, method: &str, params: Value) -> Value {
    crate::harness::a2a(server, "question_gate", token, method, params).await
}

fn state_of(hit: &Hit) -> &str {
    hit.body["statusUpdate"]["status"]["state"]
        .as_str()
        .unwrap_or("")
}

/// A new task for `token`: a message (id `message_id`) the approval gate parks on; its id.
async fn new_task(server: &Server, token: &str, message_id: &str, text: &str) -> String {
    let sent = rpc(
        server,
        token,
        "SendMessage",
        json!({"message": {"messageId": message_id,
        "role": "ROLE_USER", "parts": [{"text": text}]}}),
    )
    .await;
    sent["result"]["task"]["id"]
        .as_str()
        .expect("a task")
        .to_owned()
}

/// The push configs stored for task `id`.
async fn configs(server: &Server, token: &str, id: &str) -> Value {
    let listed = rpc(
        server,
        token,
        "ListTaskPushNotificationConfigs",
        json!({"taskId": id}),
    )
    .await;
    listed["result"]["configs"].clone()
}

#[tokio::test]
async fn a_refused_notification_is_retried_across_a_restart() {
    for backend in support::backends().await {
        let mut hook = Hook::start().await;
        let server = Server::start(&backend).await;
        let alice = server.key("alice", false).await;
        let id = new_task(&server, &alice, "p-1", "Reboot the cluster?").await;
        let config = rpc(
            &server,
            &alice,
            "CreateTaskPushNotificationConfig",
            json!({"taskId": id,
            "url": hook.url, "token": "tok-9",
            "authentication": {"scheme": "Basic", "credentials": "dXNlcjpwdw=="}}),
        )
        .await;
        assert_eq!(config["result"]["taskId"], json!(id), "{config}");
        let answered = rpc(
            &server,
            &alice,
            "SendMessage",
            json!({"message": {"messageId": "p-2",
            "role": "ROLE_USER", "taskId": id, "parts": [{"text": "approved"}]}}),
        )
        .await;
        assert_eq!(
            answered["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{answered}"
        );
        // The endpoint is down: the first attempt is refused, and the server goes away.
        let refused = hook.next().await;
        assert_eq!(refused.status, 503);
        server.stop().await;

        hook.set_up(true);
        let server = Server::start(&backend).await;
        let completed = loop {
            let hit = hook.next().await;
            if hit.status == 200 && state_of(&hit) == "TASK_STATE_COMPLETED" {
                break hit;
            }
        };
        assert_eq!(completed.body["statusUpdate"]["taskId"], json!(id));
        let header = |name: &str| {
            completed
                .headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned()
        };
        assert_eq!(header("authorization"), "Basic dXNlcjpwdw==");
        assert_eq!(header("x-a2a-notification-token"), "tok-9");
        assert_eq!(header("content-type"), "application/a2a+json");
        server.stop().await;
    }
}

#[tokio::test]
async fn a_private_target_is_refused_unless_the_server_allows_it() {
    for backend in support::backends().await {
        let strict = duet_server::Options {
            allow_private_push: false,
            ..options()
        };
        let server = Server::start_with(&backend, &support::repo(), strict).await;
        let alice = server.key("alice", false).await;
        let id = new_task(&server, &alice, "p-1", "Reboot?").await;
        for url in [
            "http://127.0.0.1:9/hook",
            "http://169.254.169.254/latest",
            "http://localhost/x",
        ] {
            let refused = rpc(
                &server,
                &alice,
                "CreateTaskPushNotificationConfig",
                json!({"taskId": id, "url": url}),
            )
            .await;
            assert_eq!(refused["error"]["code"], -32602, "{url}: {refused}");
        }
        let stored = configs(&server, &alice, &id).await;
        assert_eq!(stored, json!([]), "nothing stored: {stored}");
        server.stop().await;
    }
}

/// A token, scheme or credentials no header can carry (a CR/LF would end it) is refused at
/// create, with nothing stored: accepted, it would fail every send.
#[tokio::test]
async fn push_credentials_a_header_cannot_carry_are_refused() {
    let backend = support::backends().await.remove(0);
    let server = Server::start(&backend).await;
    let alice = server.key("alice", false).await;
    let id = new_task(&server, &alice, "c-1", "Reboot?").await;
    let url = "http://127.0.0.1:9/hook";
    for bad in [
        json!({"token": "t\r\nX-Evil: 1"}),
        json!({"authentication": {"scheme": "Bearer", "credentials": "s\r\nX-Evil: 1"}}),
        json!({"authentication": {"scheme": "Bear er", "credentials": "s"}}),
        json!({"authentication": {"scheme": "Bearer\n", "credentials": "s"}}),
    ] {
        let mut params = json!({"taskId": id, "url": url});
        if let (Some(p), Some(b)) = (params.as_object_mut(), bad.as_object()) {
            p.extend(b.clone());
        }
        let refused = rpc(&server, &alice, "CreateTaskPushNotificationConfig", params).await;
        assert_eq!(refused["error"]["code"], -32602, "{bad}: {refused}");
    }
    let stored = configs(&server, &alice, &id).await;
    assert_eq!(stored, json!([]), "nothing stored: {stored}");
    let good = rpc(
        &server,
        &alice,
        "CreateTaskPushNotificationConfig",
        json!({"taskId": id, "url": url, "token": "abc",
            "authentication": {"scheme": "Bearer", "credentials": "s3cret"}}),
    )
    .await;
    assert!(good.get("result").is_some(), "{good}");
    server.stop().await;
}

/// A config made on a task that already finished is told the task's end, and stays: `Get` and
/// `List` find it as long as the task can be read (it was deleted once its last update was
/// queued, so `Get` right after `Create` answered "task not found").
#[tokio::test]
async fn a_config_on_a_finished_task_outlives_its_last_notification() {
    for backend in support::backends().await {
        let mut hook = Hook::start().await;
        hook.set_up(true);
        let server = Server::start(&backend).await;
        let alice = server.key("alice", false).await;
        let id = new_task(&server, &alice, "f-1", "Reboot the cluster?").await;
        let answered = rpc(
            &server,
            &alice,
            "SendMessage",
            json!({"message": {"messageId": "f-2",
            "role": "ROLE_USER", "taskId": id, "parts": [{"text": "approved"}]}}),
        )
        .await;
        assert_eq!(
            answered["result"]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
            "{answered}"
        );
        let created = rpc(
            &server,
            &alice,
            "CreateTaskPushNotificationConfig",
            json!({"taskId": id, "id": "after-end", "url": hook.url}),
        )
        .await;
        assert_eq!(created["result"]["id"], "after-end", "{created}");
        // Its last update is sent: by then the notifier has finished with it.
        loop {
            let hit = hook.next().await;
            if state_of(&hit) == "TASK_STATE_COMPLETED" {
                break;
            }
        }
        let got = rpc(
            &server,
            &alice,
            "GetTaskPushNotificationConfig",
            json!({"taskId": id, "id": "after-end"}),
        )
        .await;
        assert_eq!(
            (got["result"]["id"].clone(), got["result"]["url"].clone()),
            (json!("after-end"), json!(hook.url)),
            "{got}"
        );
        let listed = configs(&server, &alice, &id).await;
        assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
        // Deleted when the client says so, and only then.
        let deleted = rpc(
            &server,
            &alice,
            "DeleteTaskPushNotificationConfig",
            json!({"taskId": id, "id": "after-end"}),
        )
        .await;
        assert!(deleted.get("error").is_none(), "{deleted}");
        assert_eq!(configs(&server, &alice, &id).await, json!([]));
        server.stop().await;
    }
}
