//! `duet threads --stale`: the threads the definitions as they are now no longer fit — parked,
//! waiting or running threads whose agent, human side or acting prompt is gone, which a resume
//! would fail (`duet_runtime::stale`). Each with the revision it parked under, when its park
//! recorded one.

use std::io::Write;
use std::process::ExitCode;

use duet_runtime::{JournalEntry, RecordBody, Store, Thread, ThreadStatus};
use serde_json::json;

use crate::Place;

/// The revision `t` last parked under, from its park's `stopped` record.
async fn parked_under(store: &dyn Store, t: &Thread) -> Option<String> {
    let entries = store.journal_since(t.id, 0).await.ok()?;
    entries.into_iter().rev().find_map(|e| match e {
        JournalEntry::Record(r) => match r.body {
            RecordBody::Stopped { revision, .. } => revision,
            _ => None,
        },
        JournalEntry::Message(_) => None,
    })
}

pub(crate) async fn list(place: &Place, json: bool) -> ExitCode {
    let loaded = match duet_js::load(&place.project, &duet_js::node_path_from_env()) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("duet: {e}");
            return ExitCode::from(2);
        }
    };
    let project = loaded.project;
    let store = match crate::compose::store(place).await {
        Ok(s) => s,
        Err(code) => return code,
    };
    let mut stale = Vec::new();
    for status in [
        ThreadStatus::AwaitingHuman,
        ThreadStatus::Waiting,
        ThreadStatus::Running,
    ] {
        let threads = match store.threads(Some(status)).await {
            Ok(t) => t,
            Err(e) => {
                eprintln!("duet: {e}");
                return ExitCode::from(1);
            }
        };
        for t in threads {
            if let Some(why) = duet_runtime::stale::missing(&project, &t) {
                let revision = parked_under(store.as_ref(), &t).await;
                stale.push((t, revision, why));
            }
        }
    }
    let mut out = std::io::stdout().lock();
    if json {
        let list: Vec<_> = stale
            .iter()
            .map(|(t, revision, why)| {
                json!({"key": t.key, "agent": t.agent, "status": t.status.as_str(), "parkedUnder": revision, "missing": why})
            })
            .collect();
        let _ = writeln!(
            out,
            "{}",
            json!({"revision": project.revision, "threads": list})
        );
    } else {
        let _ = writeln!(
            out,
            "definitions at revision {}: {} thread(s) they no longer fit",
            project.revision,
            stale.len()
        );
        if !stale.is_empty() {
            let _ = writeln!(out, "KEY\tAGENT\tSTATUS\tPARKED UNDER\tMISSING");
        }
        for (t, revision, why) in &stale {
            let _ = writeln!(
                out,
                "{}\t{}\t{}\t{}\t{why}",
                t.key,
                t.agent,
                t.status.as_str(),
                revision.as_deref().unwrap_or("-")
            );
        }
    }
    ExitCode::SUCCESS
}
