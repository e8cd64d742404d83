//! An email notification as stored in the outbox: a [`View`] rendered into JSON `{to, subject,
//! text, html}`, the plain-text and the HTML part saying the same thing (what is asked, the
//! thread, the deadline, who answered, the links). The HTML is maud's, so every value is
//! escaped; it has inline styles only — no images, no scripts, nothing fetched when opened —
//! and only `http(s)` links.

use maud::{DOCTYPE, Markup, html};
use serde::Deserialize;

use crate::notify::{Event, QuestionKind, View};

/// The stored body of an email delivery, as [`render`] writes it and `send` reads it.
#[derive(Debug, Deserialize)]
pub(crate) struct Email {
    /// The recipient's address.
    pub(crate) to: String,
    /// The subject line.
    pub(crate) subject: String,
    /// The plain-text part.
    pub(crate) text: String,
    /// The HTML part.
    pub(crate) html: String,
}

/// `view` as an email to `to`: the stored body, JSON `{to, subject, text, html}`.
pub(crate) fn render(view: &View, to: &str) -> String {
    let said = Said::of(view);
    let subject = subject(view);
    serde_json::json!({
        "to": to,
        "subject": subject,
        "text": said.text(),
        "html": said.html(&subject).into_string(),
    })
    .to_string()
}

/// The longest a subject's excerpt of a question gets (characters).
const EXCERPT: usize = 60;

/// The subject line: `[duet] Approval needed: deploy (deployer)` — what happened, what it is
/// about, the agent.
fn subject(view: &View) -> String {
    let agent = one_line(&view.thread.agent, EXCERPT);
    let about = match &view.question {
        Some(q) => match &q.call {
            Some(call) => one_line(&call.tool, EXCERPT),
            None => one_line(&q.text, EXCERPT),
        },
        None => one_line(&view.thread.key, EXCERPT),
    };
    let tool_call = view
        .question
        .as_ref()
        .is_some_and(|q| q.kind == QuestionKind::ToolCall);
    let waiting = if tool_call {
        "Approval needed"
    } else {
        "Question waiting"
    };
    let what = match view.event {
        Event::QuestionParked => waiting.to_owned(),
        Event::QuestionReminded => format!("Reminder: {}", waiting.to_lowercase()),
        Event::QuestionEscalated => format!("Escalated: {}", waiting.to_lowercase()),
        Event::QuestionAnswered => "Answered".to_owned(),
        Event::QuestionExpired => "Expired".to_owned(),
        Event::SessionEnded => "Session ended".to_owned(),
        Event::ThreadFailed => "Thread failed".to_owned(),
    };
    let by = match (view.event, &view.answer) {
        (Event::QuestionAnswered, Some(a)) => {
            let decided = a.decision.map(|d| d.as_str().to_owned());
            match (decided, &a.by) {
                (Some(d), Some(by)) => format!(" — {d} by {}", one_line(by, EXCERPT)),
                (None, Some(by)) => format!(" — by {}", one_line(by, EXCERPT)),
                (Some(d), None) => format!(" — {d}"),
                (None, None) => String::new(),
            }
        }
        _ => String::new(),
    };
    format!("[duet] {what}: {about} ({agent}){by}")
}

/// `s` on one line (control characters and runs of white space made one space), at most `max`
/// characters (an ellipsis marks a cut).
fn one_line(s: &str, max: usize) -> String {
    let flat = s
        .split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    if flat.chars().count() <= max {
        return flat;
    }
    let mut cut: String = flat.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// A time (ms since the epoch) in words: `2026-05-01 12:00 UTC`.
fn when(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms).map_or_else(
        || format!("{ms} ms since 1970"),
        |t| t.format("%Y-%m-%d %H:%M UTC").to_string(),
    )
}

/// Who an approvers list names, in words.
fn approvers(a: &duet_spec::Approvers) -> Option<String> {
    let mut parts = Vec::new();
    if !a.roles.is_empty() {
        parts.push(format!("roles {}", a.roles.join(", ")));
    }
    if !a.principals.is_empty() {
        parts.push(a.principals.join(", "));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// Whether `url` may be a link in an email: `https:` or `http:` only.
fn linkable(url: &str) -> bool {
    let lower = url.trim_start().to_ascii_lowercase();
    lower.starts_with("https://") || lower.starts_with("http://")
}

/// What an email says, once, for both parts.
struct Said {
    /// The first sentence.
    headline: String,
    /// The thread, with its agent.
    thread: String,
    /// What is asked, as text.
    question: Option<String>,
    /// A tool call: the tool, and its arguments as pretty JSON.
    call: Option<(String, String)>,
    /// Label → value lines (who may answer, the deadline, who answered, …).
    facts: Vec<(&'static str, String)>,
    /// Label → URL: Approve, Reject, Open in inbox.
    links: Vec<(&'static str, String)>,
    /// What to know about the links (they work once, until when).
    links_note: Option<String>,
}

impl Said {
    fn of(view: &View) -> Said {
        let agent = &view.thread.agent;
        let q = view.question.as_ref();
        let asks = match q {
            Some(q) if q.kind == QuestionKind::ToolCall => match &q.call {
                Some(call) => format!("{agent} asks for approval to call {}.", call.tool),
                None => format!("{agent} asks for approval of a tool call."),
            },
            _ => format!("{agent} is waiting for an answer."),
        };
        let headline = match view.event {
            Event::QuestionParked => asks,
            Event::QuestionReminded => match view.reminder {
                Some(n) => format!("Reminder {n}: {asks}"),
                None => format!("Reminder: {asks}"),
            },
            Event::QuestionEscalated => format!("Escalated: {asks}"),
            Event::QuestionAnswered => "The question was answered.".to_owned(),
            Event::QuestionExpired => {
                "Nobody answered in time: the deadline answered the question.".to_owned()
            }
            Event::SessionEnded => format!("A session of {agent} ended."),
            Event::ThreadFailed => format!("A thread of {agent} failed."),
        };
        let mut facts = Vec::new();
        if let Some(q) = q {
            if view.event.asks() {
                let who = approvers(&q.approvers).unwrap_or_else(|| "the thread's owner".into());
                facts.push(("Who may answer", who));
            }
            if let Some(to) = view.escalated_to.as_ref().and_then(approvers) {
                facts.push(("Escalated to", to));
            }
            let pending = view.event.asks() || view.event == Event::QuestionExpired;
            if let Some(deadline) = q.deadline.as_ref().filter(|_| pending) {
                facts.push(("Deadline", deadline.clone()));
            }
            if !q.decisions.is_empty() && view.event.asks() {
                let names: Vec<&str> = q.decisions.iter().map(|d| d.as_str()).collect();
                facts.push(("Decisions", names.join(", ")));
            }
        }
        if let Some(a) = &view.answer {
            facts.push((
                "Answered by",
                a.by.clone().unwrap_or_else(|| "someone".into()),
            ));
            if let Some(d) = a.decision {
                facts.push(("Decision", d.as_str().to_owned()));
            }
            if let Some(text) = &a.text {
                let label = if a.decision.is_some() {
                    "Reason"
                } else {
                    "Answer"
                };
                facts.push((label, text.clone()));
            }
        }
        if let Some(s) = &view.session {
            facts.push(("Session", s.session.to_string()));
            facts.push(("Stopped", s.stop_reason.clone()));
            if let Some(result) = &s.result {
                facts.push(("Result", result.clone()));
            }
        }
        facts.push(("When", when(view.at)));

        let mut links = Vec::new();
        let mut links_note = None;
        if let Some(l) = &view.links {
            let named = [
                ("Approve", &l.approve),
                ("Reject", &l.reject),
                ("Open in inbox", &l.open),
            ];
            for (label, url) in named {
                if let Some(url) = url.as_ref().filter(|u| linkable(u)) {
                    links.push((label, url.clone()));
                }
            }
            let one_time = links.iter().any(|(label, _)| *label != "Open in inbox");
            if one_time {
                let until = l
                    .expires_at
                    .map(|at| format!(", until {}", when(at)))
                    .unwrap_or_default();
                let inbox = if links.iter().any(|(label, _)| *label == "Open in inbox") {
                    "; the inbox has every other choice"
                } else {
                    ""
                };
                links_note = Some(format!("Approve and Reject each work once{until}{inbox}."));
            }
        }
        Said {
            headline,
            thread: format!("{} (agent {agent})", view.thread.key),
            question: q.map(|q| q.text.clone()).filter(|t| !t.trim().is_empty()),
            call: q.and_then(|q| q.call.as_ref()).map(|c| {
                let args =
                    serde_json::to_string_pretty(&c.args).unwrap_or_else(|_| c.args.to_string());
                (c.tool.clone(), args)
            }),
            facts,
            links,
            links_note,
        }
    }

    /// The plain-text part.
    fn text(&self) -> String {
        let mut out = format!("{}\n\nThread: {}\n", self.headline, self.thread);
        if let Some(q) = &self.question {
            out.push_str(&format!("\n{q}\n"));
        }
        if let Some((tool, args)) = &self.call {
            out.push_str(&format!("\nTool: {tool}\nArguments:\n{args}\n"));
        }
        out.push('\n');
        for (label, value) in &self.facts {
            out.push_str(&format!("{label}: {value}\n"));
        }
        if !self.links.is_empty() {
            out.push('\n');
            for (label, url) in &self.links {
                out.push_str(&format!("{label}: {url}\n"));
            }
        }
        if let Some(note) = &self.links_note {
            out.push_str(&format!("\n{note}\n"));
        }
        out.push_str("\n-- \nSent by duet.\n");
        out
    }

    /// The HTML part.
    fn html(&self, subject: &str) -> Markup {
        let cell = "padding:2px 12px 2px 0;text-align:left;vertical-align:top";
        let button = "display:inline-block;margin:0 8px 8px 0;padding:8px 16px;border-radius:4px;\
                      background:#1f6feb;color:#ffffff;text-decoration:none;font-weight:bold";
        html! {
            (DOCTYPE)
            html {
                head {
                    meta charset="utf-8";
                    title { (subject) }
                }
                body style="font-family:sans-serif;line-height:1.4;color:#1f2328" {
                    p { strong { (self.headline) } }
                    p { "Thread: " (self.thread) }
                    @if let Some(q) = &self.question {
                        p style="white-space:pre-wrap" { (q) }
                    }
                    @if let Some((tool, args)) = &self.call {
                        p { "Tool: " code { (tool) } }
                        pre style="background:#f6f8fa;padding:8px;white-space:pre-wrap" {
                            code { (args) }
                        }
                    }
                    table style="border-collapse:collapse" {
                        @for (label, value) in &self.facts {
                            tr {
                                th style=(cell) { (label) }
                                td style=(cell) { (value) }
                            }
                        }
                    }
                    @if !self.links.is_empty() {
                        p {
                            @for (label, url) in &self.links {
                                a href=(url) style=(button) { (label) }
                                " "
                            }
                        }
                    }
                    @if let Some(note) = &self.links_note {
                        p style="font-size:small;color:#59636e" { (note) }
                    }
                    p style="font-size:small;color:#59636e" { "Sent by duet." }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::{one_line, render};
    use crate::notify::{
        Answer, Event, Links, ProposedCall, Question, QuestionKind, ThreadRef, View,
    };

    fn parked() -> View {
        View {
            event: Event::QuestionParked,
            at: 1_777_636_800_000,
            thread: ThreadRef {
                id: "t1".into(),
                key: "ops-42".into(),
                agent: "deployer".into(),
                owner: None,
            },
            question: Some(Question {
                approval: "t1:1:7".into(),
                kind: QuestionKind::ToolCall,
                text: "Deploy <b>web</b> & \"api\"?".into(),
                call: Some(ProposedCall {
                    id: "c1".into(),
                    tool: "deploy".into(),
                    args: json!({"env": "prod", "note": "<script>alert(1)</script>"}),
                }),
                decisions: vec![duet_spec::Decision::Approve, duet_spec::Decision::Reject],
                approvers: duet_spec::Approvers {
                    roles: vec!["ops".into()],
                    principals: vec![],
                },
                deadline: Some("answered with \"reject\" at 2026-05-02 12:00 UTC".into()),
            }),
            answer: None,
            escalated_to: None,
            reminder: None,
            session: None,
            links: Some(Links {
                approve: Some("https://duet.example/links/a.b?x=1&y=2".into()),
                reject: Some("https://duet.example/links/r.s".into()),
                open: Some("javascript:alert(1)".into()),
                expires_at: Some(1_777_896_000_000),
            }),
        }
    }

    fn rendered(view: &View) -> Value {
        serde_json::from_str(&render(view, "ops@example.com")).expect("JSON")
    }

    #[test]
    fn a_parked_call_says_what_is_asked_with_its_links() {
        let e = rendered(&parked());
        assert_eq!(e["to"], "ops@example.com");
        assert_eq!(e["subject"], "[duet] Approval needed: deploy (deployer)");
        let text = e["text"].as_str().expect("text");
        assert!(
            text.starts_with("deployer asks for approval to call deploy.\n"),
            "{text}"
        );
        for line in [
            "Thread: ops-42 (agent deployer)",
            "Deploy <b>web</b> & \"api\"?",
            "Tool: deploy",
            "  \"env\": \"prod\",",
            "Who may answer: roles ops",
            "Deadline: answered with \"reject\" at 2026-05-02 12:00 UTC",
            "Decisions: approve, reject",
            "When: 2026-05-01 12:00 UTC",
            "Approve: https://duet.example/links/a.b?x=1&y=2",
            "Reject: https://duet.example/links/r.s",
            // No inbox link (it was not http): the note does not point there.
            "Approve and Reject each work once, until 2026-05-04 12:00 UTC.",
        ] {
            assert!(text.lines().any(|l| l == line), "{line:?} in\n{text}");
        }
        // Only http(s) links: the `javascript:` one is left out of both parts.
        assert!(!text.contains("javascript"), "{text}");
        let html = e["html"].as_str().expect("html");
        assert!(!html.contains("javascript"), "{html}");
        assert!(!html.to_lowercase().contains("<script"), "{html}");
        assert!(!html.contains("<img"), "{html}");
        assert!(
            html.contains("Deploy &lt;b&gt;web&lt;/b&gt; &amp; &quot;api&quot;?"),
            "{html}"
        );
        assert!(
            html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{html}"
        );
        assert!(
            html.contains(r#"href="https://duet.example/links/a.b?x=1&amp;y=2""#),
            "{html}"
        );
        assert!(html.contains("<th style"), "{html}");
    }

    #[test]
    fn an_answer_says_who_decided_and_carries_no_links() {
        let mut view = parked();
        view.event = Event::QuestionAnswered;
        view.links = None;
        view.answer = Some(Answer {
            by: Some("alice".into()),
            decision: Some(duet_spec::Decision::Reject),
            text: Some("not on a Friday".into()),
        });
        let e = rendered(&view);
        assert_eq!(
            e["subject"],
            "[duet] Answered: deploy (deployer) — reject by alice"
        );
        let text = e["text"].as_str().expect("text");
        for line in [
            "Answered by: alice",
            "Decision: reject",
            "Reason: not on a Friday",
        ] {
            assert!(text.lines().any(|l| l == line), "{line:?} in\n{text}");
        }
        assert!(!text.contains("Who may answer"), "{text}");
        assert!(!text.contains("Deadline"), "{text}");
        assert!(!text.contains("http"), "{text}");
    }

    #[test]
    fn a_question_subject_is_one_short_line() {
        let mut view = parked();
        let q = view.question.as_mut().expect("question");
        q.kind = QuestionKind::Question;
        q.call = None;
        q.text = "Which\r\nregion?\u{7}  Bcc: x@example.com ".repeat(5);
        let e = rendered(&view);
        let subject = e["subject"].as_str().expect("subject");
        assert!(
            subject.starts_with("[duet] Question waiting: Which region? Bcc:"),
            "{subject}"
        );
        assert!(subject.ends_with("… (deployer)"), "{subject}");
        assert!(!subject.contains(['\r', '\n', '\u{7}']), "{subject}");
        assert_eq!(one_line("a\n\tb", 10), "a b");
        assert_eq!(one_line("abcdef", 4), "abc…");
    }
}
