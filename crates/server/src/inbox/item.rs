//! `/inbox/items/{id}`: one question — what it asks (Markdown, inert), what is proposed (the
//! child's spawn arguments, the parent's tool call that led here), the conversation before it,
//! the chain of parents, how long it has waited — and the answer to it: approve, reject with a
//! reason, or a reply, each an inbound message to that park. The first answer wins; a later one
//! is told who answered, what and when, and nothing of it is written.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use duet_runtime::{Child, FirstAnswer, Message, Thread, ToolCall};
use maud::{Markup, html};

use super::attachments::{self, Where};
use super::conversation::{author, message};
use super::form::Form;
use super::layout::{self, Nav};
use super::signin;
use super::upload;
use super::viewer::Viewer;
use super::{decide, decision, notified};
use crate::auth::Caller;
use crate::body::Path;
use crate::input::{self, Kind};
use crate::problem::Problem;
use crate::service::ServiceError;
use crate::service::approvals;
use crate::service::notify;
use crate::service::steps as step;
use crate::state::AppState;

/// How many messages before the question the page shows.
const TAIL: usize = 12;
/// The most notifications the page lists.
const NOTIFIED: usize = 50;

/// Everything the item page shows.
struct Item {
    id: String,
    thread: Thread,
    /// Its parents, nearest first.
    parents: Vec<Thread>,
    /// The question: the message the thread parked on.
    question: Option<Message>,
    tail: Vec<Message>,
    /// The seq of the thread's first message.
    first_seq: Option<i64>,
    child: Option<Child>,
    call: Option<ToolCall>,
    /// Whether the park still waits.
    waiting: bool,
    /// The answer it got, once it has one.
    answer: Option<FirstAnswer>,
    /// Its deadline, while it waits.
    deadline: Option<duet_runtime::deadline::Standing>,
    /// The notifications sent about it that the viewer may see, newest first.
    notified: Vec<duet_server_store::Delivery>,
}

/// Reads item `id` as `caller` may see it.
async fn load(state: &AppState, caller: &Caller, id: &str) -> Result<Item, Problem> {
    let c = approvals::conversation(state, caller, id).await?;
    let before = c.before;
    let question = before.last().cloned();
    let first_seq = before.first().map(|m| m.seq);
    let tail_from = before.len().saturating_sub(TAIL + 1);
    let tail = before[tail_from..before.len().saturating_sub(1)].to_vec();
    let deadline = match c.waiting {
        true => approvals::question_deadline(state, &c.thread).await?,
        false => None,
    };
    let notified = notify::about(state, caller, id, NOTIFIED).await?;
    Ok(Item {
        notified,
        deadline,
        id: id.to_owned(),
        thread: c.thread,
        parents: c.parents,
        question,
        tail,
        first_seq,
        child: c.child,
        call: c.call,
        waiting: c.waiting,
        answer: c.answer,
    })
}

/// The notice of the answer a park got.
pub(crate) fn answered(first: &FirstAnswer, now: i64) -> Markup {
    let who = first
        .author
        .as_deref()
        .map(Caller::author_name)
        .unwrap_or_else(|| "someone".into());
    html! {
        div.answered role="status" data-author=(who) {
            p { "Answered by " strong { (who) } ", " (layout::ago(first.at, now)) " (" (layout::when(first.at)) "):" }
            blockquote { (first.content) }
        }
    }
}

/// What a person typed in an answer that was not sent (another came first), kept on the page.
struct Unsent {
    /// The form it came from: `approve`, `reject` or `reply`.
    kind: String,
    /// The reason or the reply typed (empty for an approval).
    text: String,
}

impl Unsent {
    fn of(form: &Form) -> Unsent {
        let kind = form.get("kind").unwrap_or_default().to_owned();
        let field = if kind == "reject" { "reason" } else { "text" };
        Unsent {
            text: form.get(field).unwrap_or_default().to_owned(),
            kind,
        }
    }

    /// The text kept in the textarea `field` of the form of `kind`.
    fn kept(&self, kind: &str) -> &str {
        if self.kind == kind { &self.text } else { "" }
    }
}

/// The warning that a person's answer was not sent: who answered first, when, and what (when
/// the store still has it).
fn refused(first: Option<&FirstAnswer>, now: i64) -> Markup {
    let who = first
        .and_then(|f| f.author.as_deref())
        .map(Caller::author_name)
        .unwrap_or_else(|| "someone".into());
    html! {
        div.answered.refused role="alert" data-author=(who) {
            p {
                strong { "Your answer was NOT sent." }
                @if let Some(first) = first {
                    " " strong { (who) } " had answered first, " (layout::ago(first.at, now)) " (" (layout::when(first.at)) "):"
                } @else {
                    " Another answer came first."
                }
            }
            @if let Some(first) = first { blockquote { (first.content) } }
        }
    }
}

fn proposed(item: &Item) -> Markup {
    let parent = item.parents.first().map_or("", |p| p.agent.as_str());
    html! {
        @if item.call.is_some() || item.child.as_ref().is_some_and(|c| c.arguments.as_object().is_some_and(|o| !o.is_empty())) {
            section.proposed aria-labelledby="proposed" {
                h2 #proposed { "Proposed" }
                @if let Some(call) = &item.call {
                    p { (parent) " called " code { (call.name) } " with:" }
                    pre { code { (serde_json::to_string_pretty(&call.arguments).unwrap_or_default()) } }
                }
                @if let Some(args) = item.child.as_ref().and_then(|c| c.arguments.as_object()).filter(|o| !o.is_empty()) {
                    p { "Spawn arguments:" }
                    dl.args {
                        @for (name, value) in args {
                            dt { (name) }
                            dd { (value.as_str().map_or_else(|| value.to_string(), str::to_owned)) }
                        }
                    }
                }
            }
        }
    }
}

/// The answer forms; with `unsent`, as they were when that answer was refused: what was typed
/// kept (to copy), nothing to send.
fn forms(item: &Item, viewer: &Viewer, unsent: Option<&Unsent>) -> Markup {
    let kept = |kind: &str| unsent.map_or("", |u| u.kept(kind)).to_owned();
    let off = unsent.is_some();
    let action = format!("/inbox/items/{}", item.id);
    // Each form may attach one file, stored in the thread with the answer.
    let attach = |kind: &str| {
        let id = format!("file-{kind}");
        html! {
            div.attach {
                label for=(id) { "Attach a file (optional)" }
                input #(id) type="file" name="file" disabled[off];
            }
        }
    };
    let hidden = |kind: &str| {
        html! {
            input type="hidden" name="csrf" value=(viewer.token());
            input type="hidden" name="kind" value=(kind);
            input type="hidden" name="message_id" value=(uuid::Uuid::now_v7().to_string());
        }
    };
    html! {
        section.answer #answer aria-labelledby="answer-title" {
            @if off {
                h2 #answer-title { "Your answer (not sent)" }
                p.note { "Your text is kept below to copy; this question takes no more answers." }
            } @else {
                h2 #answer-title { "Your answer" }
            }
            form.answer-form method="post" action=(action) enctype="multipart/form-data" data-kind="approve" {
                (hidden("approve"))
                (attach("approve"))
                button.primary #approve type="submit" disabled[off] { "Approve" } " " kbd { "a" }
            }
            form.answer-form.stack method="post" action=(action) enctype="multipart/form-data" data-kind="reject" {
                (hidden("reject"))
                label for="reason" { "Reason for rejecting" }
                textarea #reason name="reason" rows="2" required readonly[off] { (kept("reject")) }
                (attach("reject"))
                div { button.danger #reject type="submit" disabled[off] { "Reject" } " " kbd { "r" } }
            }
            form.answer-form.stack method="post" action=(action) enctype="multipart/form-data" data-kind="reply" {
                (hidden("reply"))
                label for="reply" { "Or reply" }
                textarea #reply name="text" rows="3" required readonly[off] { (kept("reply")) }
                (attach("reply"))
                div { button #send type="submit" disabled[off] { "Send reply" } }
            }
        }
    }
}

fn render(
    state: &AppState,
    item: &Item,
    viewer: &Viewer,
    now: i64,
    refused_by: Option<(Option<&FirstAnswer>, &Unsent)>,
) -> Markup {
    let t = &item.thread;
    let visible = viewer.caller.visible_key(&t.key);
    let at = Where {
        item: &item.id,
        thread: t.id,
    };
    let body = html! {
        p.crumbs { a href="/inbox" { "← Waiting" } }
        h1 { (layout::chain(item.parents.iter().map(|p| p.agent.as_str()), &t.agent)) }
        p.meta {
            "Thread " code { (visible) }
            @for p in &item.parents { " · in " code { (viewer.caller.visible_key(&p.key)) } }
            @if item.waiting { span #waiting { " · waiting " (layout::waited(t.updated_at, now)) } }
        }
        @if let Some(d) = &item.deadline { p { (layout::deadline(d, now)) } }
        div #notice data-mine=[refused_by.map(|_| "true")] {
            @if let Some((first, _)) = refused_by {
                (refused(first, now))
            } @else if let Some(first) = &item.answer {
                (answered(first, now))
            } @else if !item.waiting {
                p.answered role="status" { "This question no longer waits (the thread is " (t.status.as_str()) ")." }
            }
        }
        section.question aria-labelledby="question" {
            h2 #question { "Question" }
            (layout::markdown(item.question.as_ref().and_then(|m| m.content.as_deref()).unwrap_or("(no message)")))
            @if let Some(m) = &item.question { (attachments::list(&m.attachments, at)) }
        }
        (proposed(item))
        (notified::section(&item.notified, now))
        @if let Some((_, unsent)) = refused_by {
            (forms(item, viewer, Some(unsent)))
        } @else if item.waiting {
            (forms(item, viewer, None))
        }
        section.live #live aria-live="polite" data-follow=(format!("/inbox/items/{}/follow", item.id)) {
            h2 { "What happened next" }
            ol.conversation #after {}
            p.state #state {}
        }
        @if !item.tail.is_empty() {
            section.tail aria-labelledby="before" {
                h2 #before { "Before the question" }
                ol.conversation {
                    @for m in &item.tail {
                        // A child's first message is its parent's (what it was spawned with).
                        @let by = match item.parents.first() {
                            Some(p) if item.first_seq == Some(m.seq) => p.agent.clone(),
                            _ => author(state, m, &t.agent),
                        };
                        (message(m, &by, at))
                    }
                }
            }
        }
    };
    layout::page(
        &format!("{} waits", t.agent),
        Some(viewer),
        Nav::Other,
        body,
    )
}

/// `GET /inbox/items/{id}`: the question page, or a tool call's (its step's: `decision.rs`).
pub(crate) async fn page(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(id): Path<String>,
) -> Response {
    match step::load(&state, &viewer.caller, &id).await {
        Ok(Some(step)) => {
            let next = decision::next(&state, &viewer.caller, &step).await;
            let now = state.runtime().now_ms();
            return decision::render(&state, &step, &id, &viewer, now, next.as_ref(), None)
                .into_response();
        }
        Ok(None) => {}
        Err(e) => {
            let p: Problem = e.into();
            return layout::error_page(p.status, &p.detail);
        }
    }
    match load(&state, &viewer.caller, &id).await {
        Ok(item) => render(&state, &item, &viewer, state.runtime().now_ms(), None).into_response(),
        Err(p) => layout::error_page(p.status, &p.detail),
    }
}

/// The text an answer form sends: `approve`, `reject: REASON`, or the reply.
fn answer_text(form: &Form) -> Result<String, &'static str> {
    let field = |name| form.get(name).map(str::trim).unwrap_or_default();
    match form.get("kind") {
        Some("approve") => Ok("approve".into()),
        Some("reject") if field("reason").is_empty() => Err("say why you reject it"),
        Some("reject") => Ok(format!("reject: {}", field("reason"))),
        Some("reply") if field("text").is_empty() => Err("the reply is empty"),
        Some("reply") => Ok(field("text").to_owned()),
        _ => Err("the answer's kind is approve, reject or reply"),
    }
}

/// The checks an answer's fields pass before the file it attaches is stored: the text as every
/// door checks it, and an answer that is one.
fn checked(form: &Form) -> Result<(), Problem> {
    ["reason", "text"]
        .into_iter()
        .try_for_each(|name| input::text(name, form.get(name).unwrap_or_default()))
        .map_err(Problem::from)?;
    answer_text(form).map_err(|why| Problem::unprocessable("invalid_answer", why))?;
    Ok(())
}

/// `POST /inbox/items/{id}`: answers the question. A script (`Accept: application/json`) gets
/// the API's answer — `202`, or `409` naming the answer that won; a plain form post is sent back
/// to the question page, which then shows the answer — or, with `409`, says plainly that this
/// one was not sent, who answered first, and keeps what was typed in the form.
pub(crate) async fn answer(
    State(state): State<AppState>,
    viewer: Viewer,
    Path(id): Path<String>,
    headers: HeaderMap,
    request: Request,
) -> Response {
    let script = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("application/json"));
    let fail = |p: Problem| {
        if script {
            p.into_response()
        } else {
            layout::error_page(p.status, &p.detail)
        }
    };
    let posted = match upload::read(&state, &viewer, &id, &headers, request, checked).await {
        Ok(p) => p,
        Err(p) => return fail(p),
    };
    let form = posted.form;
    if let Err(refused) = signin::check_post(&state, &headers, Some(&viewer), &form) {
        return refused.into_response();
    }
    // What the form sends is checked as every door checks it, before anything is read.
    let fields = ["reason", "text"]
        .into_iter()
        .try_for_each(|name| input::text(name, form.get(name).unwrap_or_default()));
    let message_id = form
        .get("message_id")
        .map(str::trim)
        .filter(|m| !m.is_empty());
    let fields = fields
        .and_then(|()| message_id.map_or(Ok(()), |m| input::id(Kind::MessageId, "message_id", m)));
    if let Err(fault) = fields {
        return fail(fault.into());
    }
    // A tool call's step takes decisions (their fields were checked above, as the answer's are).
    match step::load(&state, &viewer.caller, &id).await {
        Ok(Some(step)) => return decide::post(&state, &viewer, &id, &step, &form).await,
        Ok(None) => {}
        Err(e) => return fail(e.into()),
    }
    let text = match answer_text(&form) {
        Ok(t) => t,
        Err(why) => return fail(Problem::unprocessable("invalid_answer", why)),
    };
    let attachments: Vec<String> = posted.file.iter().map(|f| f.path.clone()).collect();
    let answer = approvals::Answer {
        text: &text,
        images: &[],
        attachments: &attachments,
        message_id,
        wait: false,
    };
    match approvals::answer(&state, &viewer.caller, &id, answer).await {
        Ok(delivered) if script => {
            crate::routes::approvals::answered_response(&viewer.caller, &id, delivered)
        }
        Ok(_) => Redirect::to(&format!("/inbox/items/{id}")).into_response(),
        Err(ServiceError::AlreadyAnswered { first, .. }) if !script => {
            match load(&state, &viewer.caller, &id).await {
                Ok(item) => {
                    let first = item.answer.clone().or(first);
                    let unsent = Unsent::of(&form);
                    let page = render(
                        &state,
                        &item,
                        &viewer,
                        state.runtime().now_ms(),
                        Some((first.as_ref(), &unsent)),
                    );
                    (StatusCode::CONFLICT, page).into_response()
                }
                Err(e) => fail(e),
            }
        }
        Err(e) => fail(e.into()),
    }
}
