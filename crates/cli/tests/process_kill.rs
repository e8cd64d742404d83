//! A real `duet` process, killed with SIGKILL in the middle of a step, leaves a thread that the
//! next process (`duet recover`) finishes exactly as an uninterrupted run does: the same
//! messages, none duplicated or lost, the same outcome.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn scratch() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("kill-{}", uuid::Uuid::now_v7().simple()));
    std::fs::create_dir_all(&dir).expect("scratch");
    dir
}

/// Two models talking for two exchanges; side A's second answer takes 1.5 s, which is where the
/// first process dies.
fn project(dir: &Path) {
    let write = |path: &str, text: &str| {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, text).expect("write");
    };
    write(
        "agents/agents/pair.yaml",
        "name: pair\nmaxSessionTurns: 2\nsideA: { prompt: a }\nsideB: { prompt: b }\n",
    );
    for side in ["a", "b"] {
        write(
            &format!("agents/prompts/{side}.yaml"),
            &format!(
                "name: {side}\ntoolDescription: d\nmodel: {side}_model\nincludeChat: true\nprompt: p\n"
            ),
        );
    }
    write(
        "agents/models/a_model.yaml",
        "name: a_model\nprovider: scripted\nmodel: demo\nscript:\n  - text: a1\n  - { text: a2, delayMs: 1500 }\n",
    );
    write(
        "agents/models/b_model.yaml",
        "name: b_model\nprovider: scripted\nmodel: demo\nscript:\n  - text: b1\n  - text: b2\n",
    );
}

fn duet(project: &Path, db: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_duet"));
    cmd.args(args)
        .arg("--project")
        .arg(project)
        .arg("--db")
        .arg(db);
    cmd.env("DUET_LEASE_MS", "600")
        .env_remove("DUET_DATABASE_URL")
        .stdin(Stdio::null());
    cmd
}

fn show(project: &Path, db: &Path) -> Option<serde_json::Value> {
    let out = duet(project, db, &["threads", "show", "k", "--json"])
        .output()
        .ok()?;
    serde_json::from_slice(&out.stdout).ok()
}

/// Messages as (role, side, content), and the outcome.
fn summary(doc: &serde_json::Value) -> (Vec<(String, String, String)>, String, String) {
    let messages = doc["messages"]
        .as_array()
        .map(|ms| {
            ms.iter()
                .map(|m| {
                    let s = |k: &str| m[k].as_str().unwrap_or("").to_owned();
                    (s("role"), s("side"), s("content"))
                })
                .collect()
        })
        .unwrap_or_default();
    (
        messages,
        doc["status"].as_str().unwrap_or("").into(),
        doc["stopReason"].as_str().unwrap_or("").into(),
    )
}

/// Tries `check` (each try is a whole `duet` process) until it holds, for at most `limit`.
fn until(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if check() {
            return true;
        }
        // tidy:allow-sleep: what is awaited is a lease's expiry in another process's database
        // row, and time is the condition itself.
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

#[test]
fn a_killed_process_is_finished_by_the_next_one() {
    let dir = scratch();
    project(&dir);

    // The reference: an uninterrupted run.
    let reference_db = dir.join("reference.db");
    let status = duet(
        &dir,
        &reference_db,
        &["run", "pair", "--session", "k", "-m", "go", "--json"],
    )
    .output()
    .expect("runs");
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let reference = summary(&show(&dir, &reference_db).expect("reference thread"));
    assert_eq!(reference.2, "max_session_turns");

    // The victim: killed while side A's second answer is on its way.
    let db = dir.join("victim.db");
    let mut victim = duet(
        &dir,
        &db,
        &["run", "pair", "--session", "k", "-m", "go", "--json"],
    )
    .stdout(Stdio::piped())
    .spawn()
    .expect("spawns");
    // Text streams before its step commits; the step's `usage` event follows the commit. Once
    // `b1`'s step is committed, side A's slow second answer is on its way.
    let stdout = victim.stdout.take().expect("piped");
    let mut seen_b1 = false;
    let mid_step = std::io::BufRead::lines(std::io::BufReader::new(stdout))
        .map_while(Result::ok)
        .any(|line| {
            // (After `a1`'s text, `b1`'s opens with a blank line: `"\n\nb1"`.)
            seen_b1 |= line.contains(r#""type":"text""#) && line.contains(r#"b1""#);
            seen_b1 && line.contains(r#""type":"usage""#)
        });
    assert!(mid_step, "the victim never reached its second step");
    victim.kill().expect("SIGKILL");
    let _ = victim.wait();
    let stuck = show(&dir, &db).expect("thread");
    assert_eq!(stuck["status"], "running", "killed mid-run: {stuck}");
    assert_eq!(summary(&stuck).0.len(), 3, "a2 was never committed");

    // The next process continues it once the dead run's lease has expired.
    let continued = until(Duration::from_secs(20), || {
        let out = duet(&dir, &db, &["recover"])
            .output()
            .expect("recover runs");
        String::from_utf8_lossy(&out.stdout).contains("continued 1 thread")
    });
    assert!(continued, "no process continued the thread");
    let finished = summary(&show(&dir, &db).expect("thread"));
    assert_eq!(finished, reference, "same messages, same outcome");
}
