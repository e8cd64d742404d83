//! `/inbox/items/{id}` for a tool call that waits for a decision: the step it belongs to — the
//! tool (name, description), each argument with its schema's description, who asked and the
//! chain of parents, the conversation before — and for each call still open a form per decision
//! it offers (approve, and approve for this session / thread when `remember` offers it; edit,
//! with fields generated from the tool's `args` schema; reject with a reason; respond with a
//! text). Several open calls of one step are decided one by one or all at once. Once decided, a
//! call shows its decision as recorded (who, when, what) and its result, and once the thread ran
//! on, what the model said next and a link to the next item of the queue. Every form is a plain
//! post (`decide.rs`); the page's script sends the same post and puts the page it answers in
//! place.

use duet_runtime::approval::Decided;
use duet_runtime::approval::Decision;
use maud::{Markup, html};
use serde_json::Value;

use super::attachments::{self, Where};
use super::conversation;
use super::form::Form;
use super::layout::{self, Nav};
use super::notified;
use super::schema_form::{self, Source};
use super::viewer::Viewer;
use crate::auth::Caller;
use crate::service::steps::{Call, Step};
use crate::state::AppState;
use crate::views::ApprovalId;

/// What a refused post leaves on the page.
pub(crate) struct Feedback<'a> {
    /// The call the post was for (`None`: all at once).
    pub call: Option<i64>,
    /// What was posted: the fields keep what the person typed.
    pub form: &'a Form,
    /// A refusal shown at an argument field of the edit: (the field's pointer, why).
    pub field: Option<(String, String)>,
    /// A refusal of the whole post, shown at the top.
    pub notice: Option<Markup>,
}

impl Feedback<'_> {
    fn kept(&self, seq: i64, kind: &str, name: &str) -> String {
        let mine = self.call.is_none_or(|c| c == seq);
        if mine && self.form.get("kind") == Some(kind) {
            self.form.get(name).unwrap_or_default().to_owned()
        } else {
            String::new()
        }
    }

    fn editing(&self, seq: i64) -> bool {
        self.call == Some(seq) && self.form.get("kind") == Some("edit")
    }
}

/// Who `author` (a canonical principal) is, for people.
pub(crate) fn who(author: Option<&str>) -> String {
    author
        .map(Caller::author_name)
        .unwrap_or_else(|| "someone".into())
}

/// The past tense of a decision, for people.
pub(crate) fn decided_word(d: &Decided) -> &'static str {
    match d.decision {
        Decision::Approve => "Approved",
        Decision::Edit => "Edited and approved",
        Decision::Reject => "Rejected",
        Decision::Respond => "Answered in place of the tool",
    }
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

/// A decision as recorded: who, when, what (the reason, the response, the edited arguments).
pub(crate) fn decided(d: &Decided, now: i64) -> Markup {
    let by = who(d.author.as_deref());
    html! {
        div.answered.decided role="status" data-decision=(d.decision.as_str()) data-author=(by) {
            p {
                strong { (decided_word(d)) } " by " strong { (by) } ", "
                (layout::ago(d.at, now)) " (" (layout::when(d.at)) ")"
                @if let Some(scope) = d.remember { ", and for the rest of this " (scope.as_str()) }
                @if d.reason.is_some() || d.text.is_some() || d.args.is_some() { ":" } @else { "." }
            }
            @if let Some(reason) = &d.reason { blockquote.reason { (reason) } }
            @if let Some(text) = &d.text { blockquote.response { (text) } }
            @if let Some(args) = &d.args {
                p.note { "The tool ran with these arguments:" }
                pre.edited { code { (pretty(args)) } }
            }
        }
    }
}

/// Each argument of `call`: its value and what the tool's schema says of it.
fn arguments(call: &Call) -> Markup {
    let schema = call.tool.as_ref().and_then(|t| t.args.as_ref());
    let describe = |name: &str| {
        schema
            .and_then(|s| s.get("properties"))
            .and_then(|p| p.get(name))
            .and_then(|p| p.get("description"))
            .and_then(Value::as_str)
    };
    html! {
        @match call.asked.arguments.as_object() {
            Some(args) if !args.is_empty() => {
                dl.args {
                    @for (name, value) in args {
                        dt { code { (name) } }
                        dd {
                            @match value {
                                Value::String(s) => span.value { (s) },
                                Value::Object(_) | Value::Array(_) => pre { code { (pretty(value)) } },
                                other => span.value { (other.to_string()) },
                            }
                            @if let Some(d) = describe(name) { span.hint { (d) } }
                        }
                    }
                }
            }
            Some(_) => p.note { "No arguments." },
            None => pre { code { (pretty(&call.asked.arguments)) } },
        }
    }
}

/// The hidden fields every decision form carries.
fn hidden(viewer: &Viewer, kind: &str, call: Option<&str>) -> Markup {
    html! {
        input type="hidden" name="csrf" value=(viewer.token());
        input type="hidden" name="kind" value=(kind);
        @if let Some(call) = call { input type="hidden" name="call" value=(call); }
        input type="hidden" name="message_id" value=(uuid::Uuid::now_v7().to_string());
    }
}

/// The forms deciding `call`, one per decision it offers.
fn forms(call: &Call, action: &str, viewer: &Viewer, feedback: Option<&Feedback>) -> Markup {
    let seq = call.seq;
    let offers = |d: Decision| call.asked.decisions.contains(&d);
    let kept = |kind: &str, name: &str| feedback.map_or(String::new(), |f| f.kept(seq, kind, name));
    let editing = feedback.is_some_and(|f| f.editing(seq));
    html! {
        div.decide aria-label=(format!("Decide {}", call.asked.tool)) {
            @if offers(Decision::Approve) {
                form.decide-form.inline method="post" action=(action) data-kind="approve" {
                    (hidden(viewer, "approve", Some(&call.id)))
                    button.primary id=(format!("approve-{seq}")) type="submit" { "Approve" }
                    @for scope in &call.asked.remember {
                        " "
                        button id=(format!("approve-{seq}-{}", scope.as_str())) type="submit" name="remember" value=(scope.as_str()) {
                            "Approve for this " (scope.as_str())
                        }
                    }
                }
            }
            @if offers(Decision::Edit) {
                @let plan = schema_form::plan(call.tool.as_ref().and_then(|t| t.args.as_ref()), &call.asked.arguments);
                @let posted = feedback.filter(|_| editing).map(|f| f.form);
                @let source = posted.map_or(Source::Args(&call.asked.arguments), Source::Posted);
                @let at = feedback.filter(|_| editing).and_then(|f| f.field.as_ref());
                @let error = at.map(|(at, message)| schema_form::Error { at, message });
                details.edit open[editing] {
                    summary { "Edit the arguments" }
                    form.decide-form.stack.edit-form method="post" action=(action) data-kind="edit" novalidate {
                        (hidden(viewer, "edit", Some(&call.id)))
                        (schema_form::render(&plan, &format!("f{seq}"), &source, error.as_ref()))
                        div { button.primary id=(format!("edit-{seq}")) type="submit" { "Run with these arguments" } }
                    }
                }
            }
            @if offers(Decision::Reject) {
                form.decide-form.stack method="post" action=(action) data-kind="reject" {
                    (hidden(viewer, "reject", Some(&call.id)))
                    label for=(format!("reason-{seq}")) { "Reason for rejecting (the model sees it)" }
                    textarea id=(format!("reason-{seq}")) name="reason" rows="2" required { (kept("reject", "reason")) }
                    div { button.danger id=(format!("reject-{seq}")) type="submit" { "Reject" } }
                }
            }
            @if offers(Decision::Respond) {
                form.decide-form.stack method="post" action=(action) data-kind="respond" {
                    (hidden(viewer, "respond", Some(&call.id)))
                    label for=(format!("respond-text-{seq}")) { "Or answer in place of the tool (its result)" }
                    textarea id=(format!("respond-text-{seq}")) name="text" rows="2" required { (kept("respond", "text")) }
                    div { button id=(format!("respond-{seq}")) type="submit" { "Send as the result" } }
                }
            }
        }
    }
}

/// One call of the step: the tool, its arguments, then its decision and result, or the forms.
fn call_section(
    call: &Call,
    action: &str,
    viewer: &Viewer,
    now: i64,
    feedback: Option<&Feedback>,
) -> Markup {
    let title = format!("call-{}-title", call.seq);
    html! {
        section.call id=(format!("call-{}", call.seq)) data-id=(call.id) data-tool=(call.asked.tool)
            data-open=(call.open()) aria-labelledby=(title) {
            h2 id=(title) { "Call " code { (call.asked.tool) } }
            @if let Some(tool) = &call.tool { div.tool-description { (layout::markdown(&tool.description)) } }
            h3 { "Arguments" }
            (arguments(call))
            @if let Some(d) = &call.decided { (decided(d, now)) }
            @match &call.result {
                Some(r) => {
                    div.result data-status=(r.tool_status.map_or("ok", |s| s.as_str())) {
                        h3 { "Result" }
                        blockquote { (r.content.as_deref().unwrap_or("(no content)")) }
                    }
                }
                None if call.decided.is_some() => p.note.running { "The tool runs…" },
                None => (forms(call, action, viewer, feedback)),
            }
        }
    }
}

/// Deciding every open call at once, when there are two or more and they all offer it.
fn batch(step: &Step, action: &str, viewer: &Viewer, feedback: Option<&Feedback>) -> Markup {
    let open: Vec<&Call> = step.open().collect();
    let all = |d: Decision| open.iter().all(|c| c.asked.decisions.contains(&d));
    let kept = feedback
        .filter(|f| f.call.is_none())
        .map_or(String::new(), |f| f.kept(0, "reject_all", "reason"));
    html! {
        @if open.len() > 1 && (all(Decision::Approve) || all(Decision::Reject)) {
            section.batch #batch aria-labelledby="batch-title" {
                h2 #batch-title { "All " (open.len()) " at once" }
                @if all(Decision::Approve) {
                    form.decide-form.inline method="post" action=(action) data-kind="approve_all" {
                        (hidden(viewer, "approve_all", None))
                        button.primary #approve-all type="submit" { "Approve all " (open.len()) }
                    }
                }
                @if all(Decision::Reject) {
                    form.decide-form.stack method="post" action=(action) data-kind="reject_all" {
                        (hidden(viewer, "reject_all", None))
                        label for="reason-all" { "Reason for rejecting them all" }
                        textarea #reason-all name="reason" rows="2" required { (kept) }
                        div { button.danger #reject-all type="submit" { "Reject all " (open.len()) } }
                    }
                }
            }
        }
    }
}

/// The page of `step` (opened at approval `id`); `next`: the next item of the queue, once the
/// step takes no more decisions.
pub(crate) fn render(
    state: &AppState,
    step: &Step,
    id: &str,
    viewer: &Viewer,
    now: i64,
    next: Option<&Next>,
    feedback: Option<&Feedback>,
) -> Markup {
    let t = &step.thread;
    let action = format!("/inbox/items/{id}");
    let open = step.open().count();
    let at = Where {
        item: id,
        thread: t.id,
    };
    let asker = step.message.as_ref().map_or_else(
        || t.agent.clone(),
        |m| conversation::author(state, m, &t.agent),
    );
    let body = html! {
        p.crumbs { a href="/inbox" { "← Waiting" } }
        h1 { (layout::chain(step.parents.iter().map(|p| p.agent.as_str()), &t.agent)) }
        p.meta {
            "Thread " code { (viewer.caller.visible_key(&t.key)) }
            @for p in &step.parents { " · in " code { (viewer.caller.visible_key(&p.key)) } }
            @if open > 0 { span #waiting { " · waiting " (layout::waited(step.asked_at, now)) } }
        }
        div #notice {
            @if let Some(n) = feedback.and_then(|f| f.notice.as_ref()) { (n) }
        }
        section.asked aria-labelledby="asked" {
            h2 #asked { (asker) " asks to call " (step.calls.len()) @if step.calls.len() == 1 { " tool" } @else { " tools" } }
            @if let Some(text) = step.message.as_ref().and_then(|m| m.content.as_deref()) {
                (layout::markdown(text))
            }
            @if let Some(m) = &step.message { (attachments::list(&m.attachments, at)) }
            p.count {
                @match open {
                    0 => "Every call of this step is decided.",
                    1 => "1 call waits for your decision.",
                    n => (format!("{n} calls wait for your decision.")),
                }
            }
        }
        (batch(step, &action, viewer, feedback))
        @for call in &step.calls { (call_section(call, &action, viewer, now, feedback)) }
        (notified::section(&step.notified, now))
        @if step.done() {
            section.outcome #outcome aria-labelledby="outcome-title" {
                h2 #outcome-title { "What happened next" }
                @if step.after.is_empty() {
                    p.note { (t.agent) " has said nothing more yet." }
                } @else {
                    ol.conversation {
                        @for m in &step.after { (conversation::message(m, &conversation::author(state, m, &t.agent), at)) }
                    }
                }
            }
        }
        @if open == 0 { (next_link(next)) }
        section.live #live aria-live="polite" data-follow=(format!("/inbox/items/{id}/follow")) data-step="true" {
            p.state #state {}
        }
        @if !step.before.is_empty() {
            section.tail aria-labelledby="before" {
                h2 #before { "Before the calls" }
                ol.conversation {
                    @for m in &step.before {
                        @let by = match step.parents.first() {
                            Some(p) if step.first_seq == Some(m.seq) => p.agent.clone(),
                            _ => conversation::author(state, m, &t.agent),
                        };
                        (conversation::message(m, &by, at))
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

/// The next item of the queue.
pub(crate) struct Next {
    pub id: String,
    pub agent: String,
    pub what: String,
}

fn next_link(next: Option<&Next>) -> Markup {
    html! {
        nav.next aria-label="Next" {
            @match next {
                Some(n) => { a #next href=(format!("/inbox/items/{}", n.id)) rel="next" { "Next question → " strong { (n.agent) } ": " (n.what) } }
                None => { p #next-none { "Nothing else waits for you. " a href="/inbox" { "Back to the inbox" } } }
            }
        }
    }
}

/// The first item of `caller`'s queue outside `step`.
pub(crate) async fn next(state: &AppState, caller: &Caller, step: &Step) -> Option<Next> {
    let queue = super::queue::load(state, caller, &super::queue::Filters::default())
        .await
        .ok()?;
    let ours: Vec<&str> = step.calls.iter().map(|c| c.id.as_str()).collect();
    queue
        .items
        .into_iter()
        .find(|i| !ours.contains(&i.id.as_str()))
        .map(|i| Next {
            what: super::queue::summary(&i),
            id: i.id,
            agent: i.agent,
        })
}

/// Whether `id` names a call of `step`.
pub(crate) fn call_of<'a>(step: &'a Step, id: &str) -> Option<&'a Call> {
    let wanted: ApprovalId = id.parse().ok()?;
    step.calls.iter().find(|c| c.seq == wanted.park.seq)
}
