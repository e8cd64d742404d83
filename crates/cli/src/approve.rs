//! `duet approve KEY:SESSION:SEQ [--edit JSON | --reject REASON | --respond TEXT]`: a person's
//! decision on a tool call that waits for one (a tool's `approval`), then the thread runs on
//! until it settles. Exit codes: 0 decided, 1 refused (`already_answered`, `stale_definition`,
//! `invalid_decision`, `unknown_approval`) or failed, 2 bad usage. And what `threads show`
//! says of a thread's approvals.

use std::process::ExitCode;

use duet_runtime::approval::{self, Decision, RememberScope};
use duet_runtime::{CancellationToken, DecisionInput, DecisionLanded, EventSink, RunError};
use serde_json::json;

use crate::Place;
use crate::acting::Acting;
use crate::chat::refuse;
use crate::compose::compose;
use crate::out::outln;

#[derive(clap::Args)]
pub(crate) struct Args {
    /// The approval: the thread's key, then `SESSION:SEQ` as `threads show` and `invoke`'s
    /// `completed.data.approvals` give it (`refunds/42:1:7`).
    id: String,
    /// Run the tool with these arguments instead (a JSON object, checked against the tool's
    /// `args`).
    #[arg(long, value_name = "JSON", conflicts_with_all = ["reject", "respond"])]
    edit: Option<String>,
    /// Do not run the tool; the model gets an error result carrying REASON.
    #[arg(long, value_name = "REASON", conflicts_with = "respond")]
    reject: Option<String>,
    /// Do not run the tool; TEXT is its result.
    #[arg(long, value_name = "TEXT")]
    respond: Option<String>,
    /// Approve for the rest of this `session` or `thread` (when the tool offers it).
    #[arg(long, value_name = "SCOPE", conflicts_with_all = ["edit", "reject", "respond"])]
    remember: Option<String>,
    /// Print the decision as one JSON object.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    acting: Acting,
    #[command(flatten)]
    place: Place,
}

/// `KEY:SESSION:SEQ` split at its last two colons.
fn parse_id(id: &str) -> Option<(&str, i64, i64)> {
    let mut parts = id.rsplitn(3, ':');
    let seq = parts.next()?.parse().ok()?;
    let session = parts.next()?.parse().ok()?;
    let key = parts.next().filter(|k| !k.is_empty())?;
    Some((key, session, seq))
}

fn input(args: &Args) -> Result<DecisionInput, String> {
    let remember = match args.remember.as_deref() {
        None => None,
        Some(s) => Some(
            RememberScope::parse(s)
                .ok_or_else(|| format!("--remember is `session` or `thread`, not `{s}`"))?,
        ),
    };
    let mut input = DecisionInput {
        decision: Decision::Approve,
        args: None,
        reason: None,
        text: None,
        remember,
    };
    if let Some(edit) = &args.edit {
        let value: serde_json::Value = serde_json::from_str(edit)
            .map_err(|e| format!("--edit is a JSON object of arguments: {e}"))?;
        if !value.is_object() {
            return Err("--edit is a JSON object of arguments".into());
        }
        input.decision = Decision::Edit;
        input.args = Some(value);
    } else if let Some(reason) = &args.reject {
        input.decision = Decision::Reject;
        input.reason = Some(reason.clone());
    } else if let Some(text) = &args.respond {
        input.decision = Decision::Respond;
        input.text = Some(text.clone());
    }
    Ok(input)
}

pub(crate) async fn run(args: Args) -> ExitCode {
    let Some((key, _session, seq)) = parse_id(&args.id) else {
        eprintln!(
            "duet: `{}` is not an approval id: KEY:SESSION:SEQ, as `duet threads show KEY` lists them",
            args.id
        );
        return ExitCode::from(2);
    };
    if let Err(code) = crate::run::check_key(key) {
        return code;
    }
    let input = match input(&args) {
        Ok(i) => i,
        Err(why) => {
            eprintln!("duet: {why}");
            return ExitCode::from(2);
        }
    };
    let who = match args.acting.who() {
        Ok(w) => w,
        Err(code) => return code,
    };
    let (rt, tables) = match compose(&args.place).await {
        Ok(composed) => composed,
        Err(code) => return code,
    };
    if let Err(e) = rt.recover(&CancellationToken::new()).await {
        eprintln!("duet: recovery failed: {e}");
    }
    let stored = who.stored(key);
    match rt.store().thread(&stored).await {
        Ok(Some(t)) if who.owns(&t) => {}
        Ok(Some(t)) => {
            eprintln!("duet: {}", who.not_yours(key, &t));
            return ExitCode::from(2);
        }
        Ok(None) => {
            eprintln!(
                "duet: {}",
                who.not_found(rt.store().as_ref(), tables.as_ref(), key)
                    .await
            );
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("duet: {e}");
            return ExitCode::from(1);
        }
    }
    let author = who.principal().map(str::to_owned);
    let accepted = match rt.accept_decision(&stored, seq, input, author, None).await {
        Ok(a) => a,
        Err(e @ RunError::Store(_)) => {
            eprintln!("duet: {e}");
            return ExitCode::from(1);
        }
        Err(e) => return refuse(args.json, e.kind(), &e.to_string()),
    };
    crash_point("after_decision");
    if let DecisionLanded::Claimed(claim) = accepted.landed {
        let (sink, cancel) = (EventSink::discard(), CancellationToken::new());
        if let Err(e) = rt.run_claimed(claim, &sink, &cancel).await {
            eprintln!("duet: the run after the decision failed: {e}");
        }
    }
    let decided = accepted.decided;
    rt.quiesce().await;
    let after = rt.store().thread(&stored).await.ok().flatten();
    let status = after.as_ref().map_or("-", |t| t.status.as_str());
    if args.json {
        outln!(
            "{}",
            json!({"decided": decided, "thread": key, "status": status})
        );
    } else {
        outln!(
            "{} {} ({}) of `{key}`; `{key}` is now {status}",
            past(decided.decision),
            decided.tool,
            decided.call
        );
        if let Some(t) = after {
            let last = rt
                .store()
                .last_message(t.id)
                .await
                .ok()
                .flatten()
                .and_then(|m| m.content);
            if let Some(text) = last {
                outln!("{text}");
            }
        }
    }
    ExitCode::SUCCESS
}

/// A crash point for the tests that kill a real process at a known place (debug builds only):
/// with `DUET_CRASH_AT=NAME` the process aborts here, as a crash would. `after_decision`: the
/// decision is stored (and the thread's lease taken), the tool has not run.
fn crash_point(name: &str) {
    #[cfg(debug_assertions)]
    if std::env::var("DUET_CRASH_AT").is_ok_and(|v| v == name) {
        std::process::abort();
    }
    #[cfg(not(debug_assertions))]
    let _ = name;
}

fn past(d: Decision) -> &'static str {
    match d {
        Decision::Approve => "approved",
        Decision::Edit => "edited and ran",
        Decision::Reject => "rejected",
        Decision::Respond => "answered in place of",
    }
}

/// A thread's approvals for `threads show`: the calls waiting for a decision (ids as
/// `approve` takes them) and every decision recorded, its author by name.
pub(crate) fn shown(
    key: &str,
    records: &[duet_runtime::Record],
    messages: &[duet_runtime::Message],
) -> (serde_json::Value, serde_json::Value) {
    let pending: Vec<serde_json::Value> = approval::pending(records, messages)
        .into_iter()
        .map(|p| {
            let mut v = json!(p);
            v["id"] = json!(format!("{key}:{}", p.id));
            v
        })
        .collect();
    let decisions: Vec<serde_json::Value> = records
        .iter()
        .filter_map(|r| match &r.body {
            duet_runtime::RecordBody::ApprovalDecided(d) => {
                let mut v = json!(d);
                // Its author by name (`bob`), as the API shows it.
                if let Some(author) = d.author.as_deref() {
                    v["author"] = json!(duet_server::auth::Caller::author_name(author));
                }
                Some(v)
            }
            _ => None,
        })
        .collect();
    (json!(pending), json!(decisions))
}

#[cfg(test)]
mod tests {
    use super::parse_id;

    #[test]
    fn ids_split_at_their_last_two_colons() {
        let cases = [
            ("k:1:7", Some(("k", 1, 7))),
            ("a:b/c:2:12", Some(("a:b/c", 2, 12))),
            (":1:7", None),
            ("k:1", None),
            ("k:x:7", None),
            ("k:1:", None),
        ];
        for (id, want) in cases {
            assert_eq!(parse_id(id), want, "{id}");
        }
    }
}
