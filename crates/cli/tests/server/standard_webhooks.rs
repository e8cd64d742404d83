//! duet's webhook signatures as Standard Webhooks' own Python library (`standardwebhooks`,
//! installed pinned by `scripts/test-servers`) reads them: what duet signs verifies there, what
//! the library signs verifies here, and a tampered body verifies nowhere — for a `whsec_` secret
//! and for one used as its own bytes.

use serde_json::{Value, json};

use crate::support;

/// The library's verdict and signature for each case, or `None` when it is not installed.
async fn library(cases: &Value) -> Option<Vec<Value>> {
    use tokio::io::AsyncWriteExt;
    let probe = tokio::process::Command::new("python3")
        .args(["-c", "import standardwebhooks"])
        .status()
        .await;
    if !probe.is_ok_and(|s| s.success()) {
        assert!(
            std::env::var("DUET_REQUIRE_STANDARDWEBHOOKS").map_or(true, |v| v != "1"),
            "DUET_REQUIRE_STANDARDWEBHOOKS=1 but Python's standardwebhooks is missing: run scripts/test-servers"
        );
        eprintln!(
            "SKIPPED: checking webhook signatures needs Python's standardwebhooks (scripts/test-servers installs it)"
        );
        return None;
    }
    let script = support::repo().join("crates/cli/tests/clients/standard_webhooks.py");
    let mut child = tokio::process::Command::new("python3")
        .arg(script)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("python3");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(cases.to_string().as_bytes())
        .await
        .expect("write");
    drop(stdin);
    let out = child.wait_with_output().await.expect("the library's check");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(serde_json::from_slice(&out.stdout).expect("JSON"))
}

#[tokio::test]
async fn duets_signatures_verify_with_the_standard_webhooks_library() {
    use duet_server::signatures::{Signed, TOLERANCE_S, WebhookError, sign, verify};
    // The library checks the timestamp against its own clock: sign at the current time.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs();
    let now = i64::try_from(now).expect("a time");
    let body = json!({ "type": "question.parked", "question": { "text": "déployer « api » ?" } })
        .to_string();
    let mut cases = Vec::new();
    for (secret, raw) in [
        ("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", false),
        ("a shared secret, used as its bytes", true),
    ] {
        let signature = sign(secret, "n7-0", now, body.as_bytes()).expect("signs");
        cases.push(
            json!({ "secret": secret, "raw": raw, "id": "n7-0", "timestamp": now,
            "body": body, "signature": signature }),
        );
        cases.push(
            json!({ "secret": secret, "raw": raw, "id": "n7-0", "timestamp": now,
            "body": body.replace("api", "db"), "signature": signature }),
        );
    }
    let Some(verdicts) = library(&Value::Array(cases.clone())).await else {
        return;
    };
    for (case, verdict) in cases.iter().zip(&verdicts) {
        let tampered = case["body"] != json!(body);
        assert_eq!(verdict["verified"], json!(!tampered), "{case} → {verdict}");
        // What the library signs, duet verifies (the same signature, the same scheme).
        let theirs = verdict["signature"]
            .as_str()
            .expect("the library's signature");
        let ts = now.to_string();
        let headers = Signed {
            id: "n7-0",
            timestamp: &ts,
            signature: theirs,
        };
        let secret = case["secret"].as_str().expect("secret");
        let checked = verify(
            secret,
            headers,
            case["body"].as_str().expect("body").as_bytes(),
            now,
            TOLERANCE_S,
        );
        assert_eq!(checked, Ok(()));
        if tampered {
            let ours = case["signature"].as_str().expect("ours");
            let headers = Signed {
                id: "n7-0",
                timestamp: &ts,
                signature: ours,
            };
            assert_eq!(
                verify(
                    secret,
                    headers,
                    case["body"].as_str().expect("body").as_bytes(),
                    now,
                    TOLERANCE_S
                ),
                Err(WebhookError::BadSignature)
            );
        } else {
            assert_eq!(Some(theirs), case["signature"].as_str());
        }
    }
}
