//! `POST /inbox/items/{id}` for a tool call: the decision a form sends — on one call (`call`:
//! its approval id) or on every open call of the step at once (`approve_all`, `reject_all`) —
//! taken through the same service as `POST /approvals/{id}` ([`approvals::decide`]): the first
//! decision wins, an edit is checked against the tool's `args`, nothing is written when one is
//! refused. A plain form post, so the page works without script: once stored, the post waits
//! (at most [`SETTLE`]) until the thread ran on with it and sends the person back to the page,
//! which then shows the decision and its outcome; a refused post is answered with the page
//! itself (422 or 409), the refusal beside the field it names or at the top, and what was typed
//! kept. The page's script sends the same post and puts the page it gets in place.

use std::time::Duration;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use duet_runtime::approval::{Decided, Decision, Refusal, RememberScope};
use duet_runtime::{DecisionInput, RunError};
use maud::{Markup, html};

use super::decision::{self, Feedback};
use super::form::Form;
use super::layout;
use super::schema_form;
use super::viewer::Viewer;
use crate::input::{self, Kind};
use crate::problem::Problem;
use crate::service::ServiceError;
use crate::service::approvals;
use crate::service::steps::{self as step, Step};
use crate::state::AppState;

/// How long a post waits for the thread to run on with its decisions before it sends the person
/// to the page anyway (which then shows what is stored so far; the decisions go on).
const SETTLE: Duration = Duration::from_secs(30);

/// One decision to take: the call's approval id, the decision, its message id.
struct Order {
    call: String,
    tool: String,
    seq: i64,
    input: DecisionInput,
    message_id: Option<String>,
}

/// What a post was refused for, before anything was sent.
enum Refused {
    /// At an argument field of the edit: (pointer, why).
    Field(String, String),
    /// The whole post.
    Post(String),
}

/// The decisions `form` asks for on `step`.
fn orders(step: &Step, form: &Form) -> Result<Vec<Order>, Refused> {
    let field = |name| form.get(name).map(str::trim).unwrap_or_default();
    let message_id = form
        .get("message_id")
        .map(str::trim)
        .filter(|m| !m.is_empty());
    let kind = form.get("kind").unwrap_or_default();
    let input =
        |decision, args, reason: Option<&str>, text: Option<&str>, remember| DecisionInput {
            decision,
            args,
            reason: reason.map(str::to_owned),
            text: text.map(str::to_owned),
            remember,
        };
    if kind == "approve_all" || kind == "reject_all" {
        let reject = kind == "reject_all";
        if reject && field("reason").is_empty() {
            return Err(Refused::Post("say why you reject them".into()));
        }
        let open: Vec<_> = step.open().collect();
        if open.is_empty() {
            return Err(Refused::Post("no call of this step waits any more".into()));
        }
        return Ok(open
            .into_iter()
            .map(|c| Order {
                call: c.id.clone(),
                tool: c.asked.tool.clone(),
                seq: c.seq,
                input: if reject {
                    input(Decision::Reject, None, Some(field("reason")), None, None)
                } else {
                    input(Decision::Approve, None, None, None, None)
                },
                message_id: message_id.map(|m| format!("{m}.{}", c.seq)),
            })
            .collect());
    }
    let call = form
        .get("call")
        .and_then(|id| decision::call_of(step, id))
        .ok_or_else(|| Refused::Post("the form names no call of this step".into()))?;
    let decided = match kind {
        "approve" => {
            let remember = match field("remember") {
                "" => None,
                s => Some(RememberScope::parse(s).ok_or_else(|| {
                    Refused::Post(format!("`remember` is session or thread, not `{s}`"))
                })?),
            };
            input(Decision::Approve, None, None, None, remember)
        }
        "edit" => {
            let plan = schema_form::plan(
                call.tool.as_ref().and_then(|t| t.args.as_ref()),
                &call.asked.arguments,
            );
            let args = schema_form::read(&plan, form)
                .map_err(|e| Refused::Field(schema_form::owner(&plan, &e.pointer), e.message))?;
            input(Decision::Edit, Some(args), None, None, None)
        }
        "reject" if field("reason").is_empty() => {
            return Err(Refused::Post("say why you reject it".into()));
        }
        "reject" => input(Decision::Reject, None, Some(field("reason")), None, None),
        "respond" if field("text").is_empty() => {
            return Err(Refused::Post(
                "the answer in place of the tool is empty".into(),
            ));
        }
        "respond" => input(Decision::Respond, None, None, Some(field("text")), None),
        _ => {
            return Err(Refused::Post(
                "the decision is approve, edit, reject or respond".into(),
            ));
        }
    };
    Ok(vec![Order {
        call: call.id.clone(),
        tool: call.asked.tool.clone(),
        seq: call.seq,
        input: decided,
        message_id: message_id.map(str::to_owned),
    }])
}

/// A refusal at the top of the page.
fn alert(text: &str) -> Markup {
    html! { p.error role="alert" { (text) } }
}

/// The page again with `feedback` (what was posted, and why it was refused), with `status`.
async fn again(
    state: &AppState,
    viewer: &Viewer,
    id: &str,
    status: StatusCode,
    feedback: Feedback<'_>,
) -> Response {
    match step::load(state, &viewer.caller, id).await {
        Ok(Some(step)) => {
            let next = decision::next(state, &viewer.caller, &step).await;
            let page = decision::render(
                state,
                &step,
                id,
                viewer,
                state.runtime().now_ms(),
                next.as_ref(),
                Some(&feedback),
            );
            (status, page).into_response()
        }
        Ok(None) => layout::error_page(StatusCode::NOT_FOUND, "this approval is not a tool call"),
        Err(e) => {
            let p: Problem = e.into();
            layout::error_page(p.status, &p.detail)
        }
    }
}

/// Takes the decision(s) `form` asks for on `step` (opened at approval `id`) as `viewer`.
pub(crate) async fn post(
    state: &AppState,
    viewer: &Viewer,
    id: &str,
    step: &Step,
    form: &Form,
) -> Response {
    // What the form sends is checked as every door checks it, before anything is read.
    let checked = ["reason", "text"]
        .into_iter()
        .try_for_each(|name| input::text(name, form.get(name).unwrap_or_default()))
        .and_then(|()| match form.get("message_id").map(str::trim) {
            Some(m) if !m.is_empty() => input::id(Kind::MessageId, "message_id", m),
            _ => Ok(()),
        });
    if let Err(fault) = checked {
        let p: Problem = fault.into();
        return layout::error_page(p.status, &p.detail);
    }
    let one = form
        .get("call")
        .and_then(|c| decision::call_of(step, c))
        .map(|c| c.seq);
    let feedback = |field, notice| Feedback {
        call: one,
        form,
        field,
        notice,
    };
    let orders = match orders(step, form) {
        Ok(o) => o,
        Err(refused) => {
            let status = StatusCode::UNPROCESSABLE_ENTITY;
            let feedback = match refused {
                Refused::Field(at, why) => feedback(Some((at, why)), None),
                Refused::Post(why) => feedback(None, Some(alert(&why))),
            };
            return again(state, viewer, id, status, feedback).await;
        }
    };
    // Taken in a task of their own, so a post that stops waiting (or a person who leaves)
    // never cuts a decision short; each is followed until the thread settled with it, so the
    // next one finds the thread free and the last one's run is the model's next message.
    let task = {
        let (state, caller) = (state.clone(), viewer.caller.clone());
        tokio::spawn(async move {
            let mut outcomes = Vec::new();
            for order in orders {
                let outcome = approvals::decide(
                    &state,
                    &caller,
                    &order.call,
                    order.input,
                    order.message_id.as_deref(),
                    true,
                )
                .await
                .map(|_| ());
                outcomes.push((order.tool, order.seq, outcome));
            }
            outcomes
        })
    };
    let outcomes = tokio::select! {
        done = task => done.unwrap_or_default(),
        () = tokio::time::sleep(SETTLE) => Vec::new(),
        () = state.closing().cancelled() => Vec::new(),
    };
    let mut taken = 0;
    let mut late: Vec<(String, Box<Decided>)> = Vec::new();
    let mut refused: Vec<String> = Vec::new();
    let mut field = None;
    for (tool, seq, outcome) in outcomes {
        match outcome {
            Ok(()) => taken += 1,
            Err(ServiceError::Run {
                error: RunError::DecisionTaken { first, .. },
                ..
            }) => late.push((tool, first)),
            Err(ServiceError::Run {
                error: RunError::DecisionRefused { why, .. },
                ..
            }) => match why {
                Refusal::InvalidArgs(at) if one == Some(seq) => {
                    let (pointer, message) = at.split_once(": ").unwrap_or(("", at.as_str()));
                    let plan = step.calls.iter().find(|c| c.seq == seq).map(|c| {
                        schema_form::plan(
                            c.tool.as_ref().and_then(|t| t.args.as_ref()),
                            &c.asked.arguments,
                        )
                    });
                    let owner = plan.map_or_else(String::new, |p| schema_form::owner(&p, pointer));
                    field = Some((owner, format!("{pointer}: {message}")));
                }
                why => refused.push(format!("{tool}: {why}")),
            },
            Err(e) => {
                let p: Problem = e.into();
                refused.push(format!("{tool}: {}", p.detail));
            }
        }
    }
    if field.is_none() && late.is_empty() && refused.is_empty() {
        return Redirect::to(&format!("/inbox/items/{id}")).into_response();
    }
    let now = state.runtime().now_ms();
    let notice = html! {
        @if !late.is_empty() || !refused.is_empty() {
            div.answered.refused role="alert" {
                @for (tool, first) in &late {
                    p {
                        strong { "Your decision on " code { (tool) } " was NOT sent." }
                        " " strong { (decision::who(first.author.as_deref())) } " had decided first, "
                        (layout::ago(first.at, now)) ": " (decision::decided_word(first)) "."
                    }
                    @if let Some(reason) = &first.reason { blockquote { (reason) } }
                }
                @for why in &refused { p { strong { "Not sent: " } (why) } }
                @if taken > 0 { p { "The other decisions were sent." } }
            }
        }
    };
    let status = if field.is_some() || !refused.is_empty() {
        StatusCode::UNPROCESSABLE_ENTITY
    } else {
        StatusCode::CONFLICT
    };
    again(state, viewer, id, status, feedback(field, Some(notice))).await
}
