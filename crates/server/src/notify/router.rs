//! The router, in every server process: each notice the database wrote is read as an event
//! (`facts.rs`), the question it is about read from its thread, its recipients found
//! (`recipients.rs`), and one delivery per recipient and target rendered (with the one-time
//! links of a recipient that may answer), all stored with the notice marked routed in one
//! transaction — so a notice is routed once, by whichever process gets there first, and a
//! crash before that leaves it for the next pass.

use std::collections::BTreeMap;
use std::time::Duration;

use duet_runtime::approval::Approvers;
use duet_runtime::deadline::{self, Subject};
use duet_runtime::{FeedEvent, Park, RecordBody, Role, Thread};
use duet_server_store::{DeliveryQuery, DeliveryStatus, Link, NewDelivery, Notice};
use futures::{FutureExt, StreamExt};

use super::facts::{self, Asking, Fact};
use super::recipients::{self, Channel, Context, Recipient, Secret};
use super::{Links, ProposedCall, Question, QuestionKind, ThreadRef, View, links};
use crate::service::events::Feed;
use crate::service::{self, ServiceError};
use crate::state::AppState;

/// Notices read per pass.
const BATCH: usize = 64;

/// How long a change waits for those right behind it before the pass it wakes: a run writes
/// a notice in one of several commits, each announced, and under load a pass per commit was a
/// third of an answer's database calls. A person never notices the wait.
const GATHER: Duration = Duration::from_millis(10);

/// How long a router with nobody to tell holds off the database's copies of facts into
/// notices (renewed each recovery period while it still finds nobody): past it, they start
/// again by themselves (a router gone, an older build's).
const HOLD: Duration = Duration::from_secs(60);

/// Routes notices whenever a commit lands (the change feed), and every recovery period for
/// what another process wrote, until the server closes.
pub(crate) async fn run(state: AppState) {
    let every = state.options().recover_every.max(Duration::from_millis(50));
    let closing = state.closing().clone();
    hold_or_release(&state, every).await;
    let mut held_at = tokio::time::Instant::now();
    // Fused: once the feed ends it stays ended, and the periodic pass is what is left.
    let mut changes = Feed::of(&state).changes().fuse();
    loop {
        // Renewed once a period, however busy the feed keeps the loop.
        if held_at.elapsed() >= every {
            hold_or_release(&state, every).await;
            held_at = tokio::time::Instant::now();
        }
        loop {
            match pass(&state).await {
                Ok(n) if n == BATCH => continue,
                Ok(_) => break,
                Err(e) => {
                    tracing::warn!(error = %e, "notification router: a pass failed; trying again");
                    break;
                }
            }
        }
        tokio::select! {
            () = closing.cancelled() => return,
            event = changes.next() => {
                if event.is_none() {
                    // The feed is gone: the periodic pass is what is left.
                    tokio::select! {
                        () = closing.cancelled() => return,
                        () = tokio::time::sleep(every) => {}
                    }
                    continue;
                }
                tokio::select! {
                    () = closing.cancelled() => return,
                    () = tokio::time::sleep(GATHER) => {}
                }
                // Every change waiting counts as one: the pass reads every notice anyway.
                let mut next = changes.next().now_or_never().flatten();
                while let Some(FeedEvent::Changed(_) | FeedEvent::Resync) = next {
                    next = changes.next().now_or_never().flatten();
                }
            }
            () = tokio::time::sleep(every) => {}
        }
    }
}

/// With notification definitions, ends any hold of the copies of facts into notices and keeps
/// one off for the hold's length (renewed each period, so a router of the same database
/// without them cannot silence this one's); with nobody to tell (no subscription either),
/// holds the copies off (a subscription made meanwhile is copied to whatever the hold: the
/// database's triggers check). A store that fails is only logged: the copies go on, routed to
/// nobody, or the hold ends by itself.
async fn hold_or_release(state: &AppState, every: Duration) {
    let ahead = HOLD.max(every * 4);
    if !state.runtime().project().notifications.is_empty() {
        if let Err(e) = service::notify::need_notices(state, ahead).await {
            tracing::warn!(error = %e, "notification router: the notices' hold not ended");
        }
        return;
    }
    match service::notify::subscriptions(state, None).await {
        Ok(subs) if subs.is_empty() => {
            if let Err(e) = service::notify::hold_notices(state, ahead).await {
                tracing::warn!(error = %e, "notification router: the notices' hold not written");
            }
        }
        // Copied whatever the hold while subscriptions exist.
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "notification router: subscriptions not read"),
    }
}

/// Routes what notices wait; how many there were.
pub(crate) async fn pass(state: &AppState) -> Result<usize, ServiceError> {
    let notices = service::notify::notices(state, BATCH).await?;
    if notices.is_empty() {
        return Ok(0);
    }
    // Who subscribed, and each principal's roles: read once for the pass's notices.
    let subs = service::notify::subscriptions(state, None).await?;
    if subs.is_empty() && state.runtime().project().notifications.is_empty() {
        // Nobody to tell of anything: each notice would find no recipient, so none is read
        // (its thread, its records) before it is routed to nobody.
        let ids: Vec<i64> = notices.iter().map(|n| n.id).collect();
        service::notify::route_to_nobody(state, &ids).await?;
        return Ok(notices.len());
    }
    let roles = if subs.is_empty() {
        BTreeMap::new()
    } else {
        roles_of(state).await?
    };
    let stored = Stored {
        subs: &subs,
        roles: &roles,
    };
    let mut queued = false;
    for n in &notices {
        queued |= route(state, &stored, n).await?;
    }
    if queued {
        state.notify_wake();
    }
    Ok(notices.len())
}

/// The principals' subscriptions and their roles, as a pass read them.
struct Stored<'a> {
    subs: &'a [duet_server_store::Subscription],
    roles: &'a BTreeMap<String, Vec<String>>,
}

/// Routes notice `n`; whether it put deliveries in the outbox.
async fn route(state: &AppState, stored: &Stored<'_>, n: &Notice) -> Result<bool, ServiceError> {
    let (deliveries, links) = match plan(state, stored, n).await {
        Ok(planned) => planned,
        // The database failed (a connection, a timeout): the notice stays, for the next pass.
        // What it said wrongly (a corrupt row) would say so again: that notice goes to nobody
        // below rather than hold back every one after it.
        Err(e @ ServiceError::Store(duet_runtime::StoreError::Backend { .. })) => return Err(e),
        Err(e) => {
            // A notice that cannot be read (its thread gone, its record unknown to this build)
            // is routed to nobody rather than retried forever.
            tracing::warn!(notice = n.id, error = %e, "notification router: a notice was routed to nobody");
            (Vec::new(), Vec::new())
        }
    };
    let routed = service::notify::route(state, n.id, &deliveries, &links).await?;
    Ok(routed && !deliveries.is_empty())
}

type Planned = (Vec<NewDelivery>, Vec<(Link, Option<usize>)>);

/// The deliveries and links of notice `n`.
async fn plan(state: &AppState, stored: &Stored<'_>, n: &Notice) -> Result<Planned, ServiceError> {
    let Some(fact) = facts::interpret(n) else {
        return Ok((Vec::new(), Vec::new()));
    };
    let Some(t) = service::notify::thread(state, n.thread).await? else {
        return Ok((Vec::new(), Vec::new()));
    };
    let (question, approvers) = match fact.asking {
        Some(asking) => {
            // A question no longer waiting is not announced as waiting (a park the same run
            // went on from, a reminder written as it was answered); its answer is told.
            let records = service::notify::records(state, t.id).await?;
            if fact.event.asks() && !waiting(&t, &records, asking) {
                return Ok((Vec::new(), Vec::new()));
            }
            let (q, a) = question(state, &t, &records, asking).await?;
            (Some(q), a)
        }
        None => (None, Approvers::default()),
    };
    let owner = t.principal.as_deref().map(crate::auth::Caller::author_name);
    let ctx = Context {
        event: fact.event,
        agent: &t.agent,
        owner: owner.as_deref(),
        kind: question.as_ref().map(|q| q.kind),
        approvers: &approvers,
        added: fact.escalated_to.as_ref(),
    };
    let project = state.runtime().project();
    let mut found = recipients::of_project(&ctx, project.notifications.values().map(|d| &d.def));
    found.extend(recipients::of_principals(&ctx, stored.subs, stored.roles));
    if found.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    let base = View {
        event: fact.event,
        at: n.created_at,
        thread: ThreadRef {
            id: t.id.to_string(),
            key: crate::auth::Caller::owner(t.principal.as_deref()).visible_key(&t.key),
            agent: t.agent.clone(),
            owner,
        },
        question,
        answer: fact.answer.clone(),
        escalated_to: fact.escalated_to.clone(),
        reminder: fact.reminder,
        session: fact.session_end.clone(),
        links: None,
    };
    let mut out: Planned = (Vec::new(), Vec::new());
    let secret = if found.iter().any(|r| r.authority.is_some()) {
        Some(links::secret(state).await?)
    } else {
        None
    };
    for r in &found {
        deliveries_for(state, n, &fact, &base, r, secret.as_deref(), &mut out).await?;
    }
    Ok(out)
}

/// The question `asking` of `t`: what it asks, and who may answer it now.
async fn question(
    state: &AppState,
    t: &Thread,
    records: &[duet_runtime::Record],
    asking: Asking,
) -> Result<(Question, Approvers), ServiceError> {
    let approval = crate::views::ApprovalId {
        thread: t.id,
        park: asking.park(),
    }
    .to_string();
    match asking {
        Asking::Call { seq, .. } => {
            let Some((asked, at)) = service::approvers::asked(records, seq) else {
                return Err(ServiceError::NotFound(format!("no approval `{approval}`")));
            };
            let mut approvers = asked.approvers.clone();
            merge(
                &mut approvers,
                deadline::escalated(records, Subject::Approval(seq)),
            );
            let words = service::notify::call_deadline(state, t.id, records, seq, at).await;
            let args = serde_json::to_string_pretty(&asked.arguments).unwrap_or_default();
            Ok((
                Question {
                    approval,
                    kind: QuestionKind::ToolCall,
                    text: format!("Run `{}` with {args}?", asked.tool),
                    call: Some(ProposedCall {
                        id: asked.call.clone(),
                        tool: asked.tool.clone(),
                        args: asked.arguments.clone(),
                    }),
                    decisions: asked.decisions.clone(),
                    approvers: approvers.clone(),
                    deadline: words,
                },
                approvers,
            ))
        }
        Asking::Park(park) => {
            // One id for the question whatever moved its park since (a reminder, an
            // escalation): where it first parked, which every door still answers.
            let span = deadline::park_span(records, park);
            let approval = crate::views::ApprovalId {
                thread: t.id,
                park: Park {
                    session: span.session,
                    seq: span.first,
                },
            }
            .to_string();
            let messages = service::notify::messages(state, t.id).await?;
            let text = messages
                .iter()
                .rev()
                .filter(|m| m.seq < span.first && m.role == Role::Assistant && !m.silent)
                .find_map(|m| m.content.clone().filter(|c| !c.trim().is_empty()))
                .unwrap_or_default();
            let approvers = deadline::escalated_at(records, park);
            Ok((
                Question {
                    approval,
                    kind: QuestionKind::Question,
                    text,
                    call: None,
                    decisions: Vec::new(),
                    approvers: approvers.clone(),
                    deadline: None,
                },
                approvers,
            ))
        }
    }
}

/// Whether `asking` of `t` still waits: the thread parked within the question's span, or the
/// call not decided yet.
fn waiting(t: &Thread, records: &[duet_runtime::Record], asking: Asking) -> bool {
    match asking {
        Asking::Park(park) => t
            .park()
            .is_some_and(|now| deadline::park_span(records, park).names(now)),
        Asking::Call { seq, .. } => !records
            .iter()
            .any(|r| matches!(&r.body, RecordBody::ApprovalDecided(d) if d.approval == seq)),
    }
}

fn merge(into: &mut Approvers, more: Approvers) {
    for r in more.roles {
        if !into.roles.contains(&r) {
            into.roles.push(r);
        }
    }
    for p in more.principals {
        if !into.principals.contains(&p) {
            into.principals.push(p);
        }
    }
}

/// Each principal's roles, from its live keys.
async fn roles_of(state: &AppState) -> Result<BTreeMap<String, Vec<String>>, ServiceError> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for key in service::notify::live_keys(state).await? {
        let roles = out.entry(key.principal).or_default();
        for r in key.roles {
            if !roles.contains(&r) {
                roles.push(r);
            }
        }
    }
    Ok(out)
}

/// The server's own address, for links: its public URL, else its listener (`localhost` for
/// every address, as the A2A cards say it; `duet serve` warns that only `--public-url` names
/// the server as others reach it).
fn base_url(state: &AppState) -> String {
    let o = state.options();
    let url = match (&o.public_url, o.listener) {
        (Some(u), _) => u.clone(),
        (None, Some(addr)) if addr.ip().is_unspecified() => {
            format!("http://localhost:{}", addr.port())
        }
        (None, Some(addr)) => format!("http://{addr}"),
        (None, None) => "http://localhost".to_owned(),
    };
    url.trim_end_matches('/').to_owned()
}

/// The deliveries (and links) recipient `r` gets for notice `n`, appended to `out`.
async fn deliveries_for(
    state: &AppState,
    n: &Notice,
    fact: &Fact,
    base: &View,
    r: &Recipient,
    secret: Option<&[u8]>,
    out: &mut Planned,
) -> Result<(), ServiceError> {
    let mut view = base.clone();
    let mut made: Vec<Link> = Vec::new();
    if let Some(q) = &base.question {
        let root = base_url(state);
        let mut l = Links {
            open: Some(format!(
                "{root}/inbox/items/{}",
                crate::views::segment(&q.approval)
            )),
            ..Links::default()
        };
        if let (Some(who), Some(secret)) = (&r.authority, secret) {
            let now = state.runtime().now_ms();
            let expires_at = now.saturating_add(i64::try_from(r.link_ttl_ms).unwrap_or(i64::MAX));
            for d in [duet_spec::Decision::Approve, duet_spec::Decision::Reject] {
                if !q.decisions.contains(&d) {
                    continue;
                }
                let link = Link {
                    id: links::new_id(),
                    approval: q.approval.clone(),
                    action: d.as_str().to_owned(),
                    approver: who.approver.clone(),
                    roles: serde_json::to_string(&who.roles).unwrap_or_else(|_| "[]".into()),
                    delivery: None,
                    expires_at,
                    used_at: None,
                    used_by: None,
                    revoked_at: None,
                    created_at: now,
                };
                if link.id.is_empty() {
                    continue;
                }
                let url = format!("{root}/links/{}", links::token(secret, &link));
                match d {
                    duet_spec::Decision::Approve => l.approve = Some(url),
                    _ => l.reject = Some(url),
                }
                l.expires_at = Some(expires_at);
                made.push(link);
            }
        }
        view.links = Some(l);
    }
    let subject = base.question.as_ref().map(|q| q.approval.clone());
    let mut rendered: Vec<(String, String, Option<serde_json::Value>)> = Vec::new();
    match &r.channel {
        Channel::Webhook { url, secret } => {
            let meta = match secret {
                Secret::None => None,
                Secret::Env(name) => Some(serde_json::json!({"secretEnv": name})),
                Secret::Value(v) => Some(serde_json::json!({"secret": v})),
            };
            rendered.push((url.clone(), super::webhook::render(&view), meta));
        }
        Channel::Slack { channel } => {
            let mut updated = false;
            if matches!(
                fact.event,
                super::Event::QuestionAnswered | super::Event::QuestionExpired
            ) && let Some(approval) = &subject
            {
                for message in posted(state, approval, &r.subscription, channel).await? {
                    let (ts, meta) = match message {
                        Posted::At(ts) => (ts, serde_json::json!({"method": "chat.update"})),
                        // Not sent yet (Slack down, or a click faster than the sender's record
                        // of it): the same stream sends it first, and the sender reads its
                        // `ts` then.
                        Posted::Pending(post) => (
                            String::new(),
                            serde_json::json!({"method": "chat.update", "post": post}),
                        ),
                    };
                    rendered.push((
                        channel.clone(),
                        super::slack::render_update(&view, channel, &ts),
                        Some(meta),
                    ));
                    updated = true;
                }
            }
            if !updated {
                rendered.push((
                    channel.clone(),
                    super::slack::render_post(&view, channel),
                    Some(serde_json::json!({"method": "chat.postMessage"})),
                ));
            }
        }
        Channel::Email { to } => {
            for addr in to {
                rendered.push((addr.clone(), super::email::render(&view, addr), None));
            }
        }
    }
    for (target, body, meta) in rendered {
        let index = out.0.len();
        out.0.push(NewDelivery {
            channel: r.channel.name().to_owned(),
            stream: format!("{}:{}:{target}", r.channel.name(), r.subscription),
            target,
            notice: Some(n.id),
            thread: Some(n.thread),
            event: fact.event.as_str().to_owned(),
            subject: subject.clone(),
            subscription: Some(r.subscription.clone()),
            recipient: r.principal.clone(),
            body,
            meta: meta.map(|m| m.to_string()),
            idempotency_key: format!("duet-n{}-{index}", n.id),
            due_at: n.created_at,
        });
        // A recipient's links ride on its first delivery (they are the same for each).
        for link in made.drain(..) {
            out.1.push((link, Some(index)));
        }
    }
    Ok(())
}

/// A Slack message about a question, as the router finds it when the question is answered.
enum Posted {
    /// Posted: its `ts`.
    At(String),
    /// Still in the outbox: the delivery that posts it.
    Pending(i64),
}

/// The Slack messages subscription `sub` posted (or is about to post) to `channel` about
/// `approval`.
async fn posted(
    state: &AppState,
    approval: &str,
    sub: &str,
    channel: &str,
) -> Result<Vec<Posted>, ServiceError> {
    let query = DeliveryQuery {
        status: vec![DeliveryStatus::Delivered, DeliveryStatus::Pending],
        subject: Some(approval.to_owned()),
        channel: Some("slack".to_owned()),
        limit: 100,
        ..DeliveryQuery::default()
    };
    let found = service::notify::all_deliveries(state, &query).await?;
    let mut out: Vec<Posted> = found
        .into_iter()
        .filter(|d| d.subscription.as_deref() == Some(sub) && d.target == channel)
        .filter(|d| d.event != "question.answered" && d.event != "question.expired")
        .filter_map(|d| match d.status {
            DeliveryStatus::Pending => Some(Posted::Pending(d.id)),
            _ => {
                let r: serde_json::Value = serde_json::from_str(d.response.as_deref()?).ok()?;
                r.get("ts")?.as_str().map(|ts| Posted::At(ts.to_owned()))
            }
        })
        .collect();
    // Oldest first, as they were posted (the listing is newest first).
    out.reverse();
    Ok(out)
}

/// What approval `id` asks (for a link's page), if it names a question of a thread.
pub(crate) async fn describe(state: &AppState, id: &str) -> Option<Question> {
    let (approval, t) = service::approvers::locate(state, id).await.ok()?;
    let records = service::notify::records(state, t.id).await.ok()?;
    let asking = if service::approvers::asked(&records, approval.park.seq).is_some() {
        Asking::Call {
            session: approval.park.session,
            seq: approval.park.seq,
        }
    } else {
        Asking::Park(approval.park)
    };
    question(state, &t, &records, asking)
        .await
        .ok()
        .map(|(q, _)| q)
}
