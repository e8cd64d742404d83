//! A question's deadline as data (a duet extension, issue #30): what a park or a pending tool
//! call schedules ([`timers`]: `Deadline` timers named `remind`, `escalate` and `default`), what
//! each timer carries, the subject that ties them to their question, who answers at the
//! deadline ([`author`]), and who may answer once it escalated ([`escalated`]). No IO: the
//! engine (`engine/deadline.rs`) writes and fires them.

use duet_spec::{Deadline, DeadlineDefault};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub use duet_spec::{Approvers, Escalation};

use crate::record::{Record, RecordBody};
use crate::store::{NewTimer, Timer, TimerKind, TimerStatus};
use crate::types::{Park, SideId, Thread, ThreadStatus};

/// The durable value a handler or hook sets ([`crate::ThreadState::set_question_deadline`]) to
/// give the thread's next question a deadline of its own (in place of its human side's): read
/// and cleared by the commit that parks.
pub const OVERRIDE_KEY: &str = "duet.deadline";

/// How many times a deadline's timer is tried (a busy thread defers it without counting).
pub const MAX_ATTEMPTS: u32 = 5;

/// The action names of deadline timers.
pub mod action {
    /// Remind the person.
    pub const REMIND: &str = "remind";
    /// Let more people answer.
    pub const ESCALATE: &str = "escalate";
    /// Answer by default.
    pub const DEFAULT: &str = "default";
}

/// Who answers when a deadline does (a principal, canonical JSON): the author recorded with a
/// default answer or decision, and named to whoever comes second.
pub fn author() -> String {
    // As `Principal::canonical` writes one.
    serde_json::json!({"type": "duet", "issuer": "duet", "subject": "deadline"}).to_string()
}

/// Whether `author` (canonical JSON) is the deadline's.
pub fn is_deadline(author: Option<&str>) -> bool {
    author.is_some_and(|a| a == self::author())
}

/// What a deadline waits on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Subject {
    /// A parked thread's question: its session, and how many turns both sides had completed
    /// in it when it parked (a reminder's record moves the park's seq; this stays until the
    /// answer's drain counts the person's turn).
    Question {
        /// The session.
        session: i64,
        /// The turns completed in the session before the answer.
        turn: i64,
    },
    /// A pending tool call: its approval id (the seq of its `approval_requested` record).
    Approval(i64),
}

impl std::fmt::Display for Subject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Subject::Question { session, turn } => write!(f, "question:{session}:{turn}"),
            Subject::Approval(seq) => write!(f, "approval:{seq}"),
        }
    }
}

impl std::str::FromStr for Subject {
    type Err = String;

    fn from_str(s: &str) -> Result<Subject, String> {
        let bad = || format!("not a deadline's subject: `{s}`");
        let int = |v: &str| v.parse::<i64>().map_err(|_| bad());
        match s.split(':').collect::<Vec<_>>().as_slice() {
            ["question", session, turn] => Ok(Subject::Question {
                session: int(session)?,
                turn: int(turn)?,
            }),
            ["approval", seq] => Ok(Subject::Approval(int(seq)?)),
            _ => Err(bad()),
        }
    }
}

impl Subject {
    /// The question `t` is parked at, if it is parked.
    pub fn parked(t: &Thread) -> Option<Subject> {
        (t.status == ThreadStatus::AwaitingHuman).then(|| Subject::Question {
            session: t.session,
            turn: t.turns[SideId::A] + t.turns[SideId::B],
        })
    }
}

/// What a deadline timer carries: the action's data.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Args {
    /// `remind`: which reminder (1 for the first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n: Option<u32>,
    /// `escalate`: who may answer from now on, too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<Approvers>,
    /// `default`: the answer given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<DeadlineDefault>,
}

/// `deadline` as it can act on a pending call that offers `decisions`: a default decision the
/// call does not offer (a policy hook narrowed the tool's decisions) is dropped, so the call
/// waits for a person instead of for a default the store would refuse (a `failed` timer, a
/// promise shown and never kept); a deadline left with nothing to do is none.
pub fn fit_to(mut deadline: Deadline, decisions: &[duet_spec::Decision]) -> Option<Deadline> {
    if let Some(DeadlineDefault::Decide { decision, .. }) = &deadline.default
        && !decisions.contains(decision)
    {
        tracing::warn!(
            decision = decision.as_str(),
            "a deadline's default decision is not offered for this call; the call waits for a person"
        );
        deadline.default = None;
    }
    deadline.acts().then_some(deadline)
}

/// The timers `deadline` schedules for `subject`, asked at `asked_at` (ms).
pub fn timers(deadline: &Deadline, subject: Subject, asked_at: i64) -> Vec<NewTimer> {
    let at = |ms: u64| asked_at.saturating_add(i64::try_from(ms).unwrap_or(i64::MAX));
    let timer = |name: &str, due_at: i64, args: Args| NewTimer {
        id: Uuid::now_v7(),
        kind: TimerKind::Deadline,
        name: name.to_owned(),
        args: serde_json::to_value(args).unwrap_or_default(),
        subject: Some(subject.to_string()),
        due_at,
        max_attempts: MAX_ATTEMPTS,
    };
    let mut out = Vec::new();
    for (i, ms) in deadline.remind.iter().enumerate() {
        let n = u32::try_from(i + 1).unwrap_or(u32::MAX);
        out.push(timer(
            action::REMIND,
            at(*ms),
            Args {
                n: Some(n),
                ..Args::default()
            },
        ));
    }
    if let Some(e) = &deadline.escalate {
        out.push(timer(
            action::ESCALATE,
            at(e.after),
            Args {
                to: Some(e.to.clone()),
                ..Args::default()
            },
        ));
    }
    if let (Some(after), Some(default)) = (deadline.after, &deadline.default) {
        out.push(timer(
            action::DEFAULT,
            at(after),
            Args {
                default: Some(default.clone()),
                ..Args::default()
            },
        ));
    }
    out
}

/// Who may answer `subject` besides those it named at first: everyone its escalations named
/// (the `question_escalated` records), merged.
pub fn escalated(records: &[Record], subject: Subject) -> Approvers {
    let key = subject.to_string();
    let mut out = Approvers::default();
    for r in records {
        if let RecordBody::QuestionEscalated { subject: s, to, .. } = &r.body
            && *s == key
        {
            add_approvers(&mut out, to);
        }
    }
    out
}

/// A question's (or a pending call's) deadline as its timers stand — what the declaration or
/// code scheduled, each action with its timer's status — and who it escalated to so far: what
/// `threads show`, `GET /approvals`, the inbox and A2A say of it.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Standing {
    /// What it is on (`question:SESSION:TURNS`, `approval:SEQ`).
    pub subject: String,
    /// When the default answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<i64>,
    /// `default` when it answers by default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<&'static str>,
    /// The answer (or decision) it gives, in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    /// The default's timer's status (`pending`, `processing`, `completed`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<&'static str>,
    /// Its reminders in order: when, and whether each was sent.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reminders: Vec<Step>,
    /// Its escalation: when, to whom, and whether it happened.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub escalate: Option<EscalateStep>,
    /// Who its escalation added (from the `question_escalated` records), once it did.
    #[serde(skip_serializing_if = "nobody")]
    pub escalated: Approvers,
}

/// Whether `a` names nobody.
fn nobody(a: &Approvers) -> bool {
    a.roles.is_empty() && a.principals.is_empty()
}

impl Standing {
    /// In words as of `now` (ms), for people: `expires in 3 h, then the answer is "reject: no
    /// answer within 48 h"; 1 of 2 reminders sent; escalates to role managers in 20 min`.
    pub fn sentence(&self, now: i64) -> String {
        let done = |status: &str| status == TimerStatus::Completed.as_str();
        let mut parts = Vec::new();
        if let (Some(at), Some(status)) = (self.at, self.status) {
            let default = self.default.as_deref().unwrap_or_default();
            parts.push(if done(status) {
                format!("expired: answered \"{default}\" by default")
            } else if at > now {
                format!(
                    "expires in {}, then the answer is \"{default}\"",
                    in_words(at - now)
                )
            } else {
                format!("expired: the answer \"{default}\" is being given")
            });
        }
        if !self.reminders.is_empty() {
            let sent = self.reminders.iter().filter(|r| done(r.status)).count();
            let n = self.reminders.len();
            parts.push(format!(
                "{sent} of {n} reminder{} sent",
                if n == 1 { "" } else { "s" }
            ));
        }
        if let Some(e) = &self.escalate {
            let who = who(&e.to);
            parts.push(if done(e.status) {
                format!("escalated to {who}")
            } else if e.at > now {
                format!("escalates to {who} in {}", in_words(e.at - now))
            } else {
                format!("escalating to {who}")
            });
        }
        parts.join("; ")
    }
}

/// `to` in words: `roles managers, ops and principal erin`.
fn who(to: &Approvers) -> String {
    let mut parts = Vec::new();
    if !to.roles.is_empty() {
        let s = if to.roles.len() == 1 { "" } else { "s" };
        parts.push(format!("role{s} {}", to.roles.join(", ")));
    }
    if !to.principals.is_empty() {
        let s = if to.principals.len() == 1 { "" } else { "s" };
        parts.push(format!("principal{s} {}", to.principals.join(", ")));
    }
    parts.join(" and ")
}

/// A duration (ms) in words, rounded to its largest unit (each unit rounded from the one
/// below, so 59.9 min is `1 h`): `45 s`, `20 min`, `3 h`, `2 d`.
pub fn in_words(ms: i64) -> String {
    let round = |n: i64, by: i64| (n + by / 2) / by;
    let s = round(ms.max(0), 1_000);
    if s == 0 {
        return "under 1 s".to_owned();
    }
    if s < 60 {
        return format!("{s} s");
    }
    let min = round(s, 60);
    if min < 60 {
        return format!("{min} min");
    }
    let h = round(min, 60);
    if h < 24 {
        return format!("{h} h");
    }
    format!("{} d", round(h, 24))
}

/// A reminder of a [`Standing`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Step {
    /// When it is (was) due.
    pub at: i64,
    /// Its timer's status.
    pub status: &'static str,
}

/// The escalation of a [`Standing`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EscalateStep {
    /// When it is (was) due.
    pub at: i64,
    /// Its timer's status.
    pub status: &'static str,
    /// Who it adds.
    #[serde(flatten)]
    pub to: Approvers,
}

/// Which deadline timers of thread `thread` to read for a question (or call) asked at
/// `asked_at`: each of its timers is due at or after it. Filter by subject ([`standing`]).
pub fn timer_query(
    thread: crate::types::ThreadId,
    asked_at: i64,
) -> crate::store::TimerQuery<'static> {
    crate::store::TimerQuery {
        thread: Some(thread),
        kind: Some(TimerKind::Deadline),
        after: Some((asked_at.saturating_sub(1), Uuid::max())),
        limit: 256,
        ..crate::store::TimerQuery::default()
    }
}

/// The deadline of `subject` as `timers` (its thread's, any status) and `records` have it;
/// `None` when it has no timer (no deadline). A cancelled timer (the question was answered)
/// is left out.
pub fn standing(timers: &[Timer], records: &[Record], subject: Subject) -> Option<Standing> {
    let key = subject.to_string();
    let mut mine: Vec<&Timer> = timers
        .iter()
        .filter(|t| {
            t.kind == TimerKind::Deadline
                && t.subject.as_deref() == Some(key.as_str())
                && t.status != TimerStatus::Cancelled
        })
        .collect();
    if mine.is_empty() {
        return None;
    }
    mine.sort_by_key(|t| (t.due_at, t.id));
    let mut out = Standing {
        subject: key,
        escalated: escalated(records, subject),
        ..Standing::default()
    };
    for t in mine {
        let args: Args = serde_json::from_value(t.args.clone()).unwrap_or_default();
        let status = t.status.as_str();
        match t.name.as_str() {
            action::REMIND => out.reminders.push(Step {
                at: t.due_at,
                status,
            }),
            action::ESCALATE => {
                out.escalate = Some(EscalateStep {
                    at: t.due_at,
                    status,
                    to: args.to.unwrap_or_default(),
                });
            }
            action::DEFAULT => {
                out.at = Some(t.due_at);
                out.action = Some(action::DEFAULT);
                out.default = args.default.map(|d| d.describe());
                out.status = Some(status);
            }
            _ => {}
        }
    }
    Some(out)
}

/// The park ids that name one question: a reminder's or an escalation's record, written while
/// the thread is parked, moves its park (the id's seq) by one, so a question asked at seq
/// `first` is answered at `last` (or parks there now), and every seq between names it too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParkSpan {
    /// The session.
    pub session: i64,
    /// Where it parked.
    pub first: i64,
    /// Where it parks now, or was answered: past its last deadline record.
    pub last: i64,
}

impl ParkSpan {
    /// Whether `park` names this question.
    pub fn names(&self, park: Park) -> bool {
        park.session == self.session && (self.first..=self.last).contains(&park.seq)
    }

    /// The park where the question stands (or was answered).
    pub fn now(&self) -> Park {
        Park {
            session: self.session,
            seq: self.last,
        }
    }
}

/// The seqs of `records`' deadline records written at a parked question (not at a pending
/// call), with what each escalated to, and of the effects' records (which a parked thread gets
/// too).
fn question_notes(records: &[Record]) -> std::collections::BTreeMap<i64, Option<&Approvers>> {
    let question = |s: &str| s.starts_with("question:");
    records
        .iter()
        .filter_map(|r| match &r.body {
            RecordBody::QuestionReminded { subject, .. } if question(subject) => {
                Some((r.seq, None))
            }
            RecordBody::QuestionEscalated { subject, to } if question(subject) => {
                Some((r.seq, Some(to)))
            }
            // An effect that ran (or failed) while the thread was parked moves the park's seq
            // as a reminder does, and answers nothing.
            RecordBody::EffectRan { .. } | RecordBody::EffectFailed { .. } => Some((r.seq, None)),
            _ => None,
        })
        .collect()
}

/// The question park id `park` names, as far as `records` (a thread's) tell: from where it
/// parked to where it stands or was answered.
pub fn park_span(records: &[Record], park: Park) -> ParkSpan {
    span_of(&question_notes(records), park)
}

fn span_of(notes: &std::collections::BTreeMap<i64, Option<&Approvers>>, park: Park) -> ParkSpan {
    let (mut first, mut last) = (park.seq, park.seq);
    while notes.contains_key(&(first - 1)) {
        first -= 1;
    }
    while notes.contains_key(&last) {
        last += 1;
    }
    ParkSpan {
        session: park.session,
        first,
        last,
    }
}

/// Who may answer the question park id `park` names besides its thread's owner: everyone its
/// deadline's escalations named so far (none when it never escalated).
pub fn escalated_at(records: &[Record], park: Park) -> Approvers {
    let notes = question_notes(records);
    let span = span_of(&notes, park);
    let mut out = Approvers::default();
    for to in notes.range(span.first..span.last).filter_map(|(_, to)| *to) {
        add_approvers(&mut out, to);
    }
    out
}

/// Adds to `out` the roles and principals of `to` it does not name yet, in their order.
fn add_approvers(out: &mut Approvers, to: &Approvers) {
    for role in &to.roles {
        if !out.roles.contains(role) {
            out.roles.push(role.clone());
        }
    }
    for p in &to.principals {
        if !out.principals.contains(p) {
            out.principals.push(p.clone());
        }
    }
}

/// A park's id as the park it names stands now: the question `subject` of a thread parked at
/// `park` (the ids move when a reminder's record is written; the subject does not).
pub fn park_subject(t: &Thread, park: Park) -> Option<Subject> {
    (t.park() == Some(park))
        .then(|| Subject::parked(t))
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_default_decision_the_call_does_not_offer_is_dropped() {
        use duet_spec::Decision;
        let reject = DeadlineDefault::Decide {
            decision: Decision::Reject,
            reason: Some("late".into()),
        };
        let with = |remind: Vec<u64>| Deadline {
            after: Some(60_000),
            default: Some(reject.clone()),
            remind,
            escalate: None,
        };
        let offered = [Decision::Approve, Decision::Reject];
        assert_eq!(fit_to(with(vec![]), &offered), Some(with(vec![])));
        let narrowed = [Decision::Approve, Decision::Edit];
        assert_eq!(fit_to(with(vec![]), &narrowed), None, "nothing left to do");
        let kept = fit_to(with(vec![30_000]), &narrowed).expect("the reminder stays");
        assert_eq!((kept.default, kept.remind), (None, vec![30_000]));
    }

    #[test]
    fn subjects_read_back() {
        for s in [
            Subject::Question {
                session: 2,
                turn: 3,
            },
            Subject::Approval(17),
        ] {
            assert_eq!(s.to_string().parse::<Subject>(), Ok(s));
        }
        assert!("park:1".parse::<Subject>().is_err());
    }

    #[test]
    fn a_question_keeps_its_park_ids_across_its_deadline_records() {
        let note = |seq, body| Record::new(seq, body, 0);
        let ops = Approvers {
            roles: vec!["ops".into()],
            principals: vec![],
        };
        let records = vec![
            // A pending call's escalation is not the question's.
            note(
                3,
                RecordBody::QuestionEscalated {
                    subject: "approval:2".into(),
                    to: ops.clone(),
                },
            ),
            note(
                5,
                RecordBody::QuestionReminded {
                    subject: "question:1:2".into(),
                    n: 1,
                },
            ),
            note(
                6,
                RecordBody::QuestionEscalated {
                    subject: "question:1:2".into(),
                    to: ops.clone(),
                },
            ),
        ];
        let park = |seq| Park { session: 1, seq };
        for seq in [5, 6, 7] {
            let span = park_span(&records, park(seq));
            assert_eq!((span.first, span.last), (5, 7), "{seq}");
            assert_eq!(span.now(), park(7));
            assert!(span.names(park(5)) && !span.names(park(8)));
            assert!(!span.names(Park { session: 2, seq: 6 }));
            assert_eq!(escalated_at(&records, park(seq)), ops, "{seq}");
        }
        let other = park_span(&records, park(3));
        assert_eq!((other.first, other.last), (3, 3));
        assert!(escalated_at(&records, park(3)).roles.is_empty());
        assert!(escalated_at(&records, park(9)).roles.is_empty());
    }

    #[test]
    fn a_deadline_reads_from_its_timers_and_says_itself_in_words() {
        let d = Deadline {
            after: Some(3_600_000),
            default: Some(DeadlineDefault::Answer("no".into())),
            remind: vec![600_000, 1_200_000],
            escalate: Some(Escalation {
                after: 1_800_000,
                to: Approvers {
                    roles: vec!["ops".into()],
                    principals: vec!["erin".into()],
                },
            }),
        };
        let subject = Subject::Question {
            session: 1,
            turn: 2,
        };
        let thread = Uuid::now_v7();
        let stored = |n: NewTimer, status: TimerStatus| Timer {
            id: n.id,
            thread,
            kind: n.kind,
            name: n.name,
            args: n.args,
            subject: n.subject,
            due_at: n.due_at,
            created_at: 0,
            status,
            attempts: 0,
            max_attempts: n.max_attempts,
            last_error: None,
            updated_at: 0,
            claimed_by: None,
            claimed_until: None,
        };
        let mut all: Vec<Timer> = timers(&d, subject, 0)
            .into_iter()
            .map(|n| stored(n, TimerStatus::Pending))
            .collect();
        // Another question's, answered: not this one's.
        all.extend(
            timers(&d, Subject::Approval(9), 0)
                .into_iter()
                .map(|n| stored(n, TimerStatus::Cancelled)),
        );
        all[0].status = TimerStatus::Completed;
        let s = standing(&all, &[], subject).expect("a deadline");
        assert_eq!(s.at, Some(3_600_000));
        assert_eq!(s.default.as_deref(), Some("no"));
        assert_eq!(s.reminders.len(), 2);
        assert_eq!(
            s.sentence(600_000),
            "expires in 50 min, then the answer is \"no\"; 1 of 2 reminders sent; \
             escalates to role ops and principal erin in 20 min"
        );
        let v = serde_json::to_value(&s).expect("json");
        assert_eq!(
            v["reminders"][0],
            serde_json::json!({"at": 600_000, "status": "completed"})
        );
        assert_eq!(v["escalate"]["roles"], serde_json::json!(["ops"]));
        assert!(v.get("escalated").is_none());
        assert_eq!(standing(&all, &[], Subject::Approval(9)), None);
        assert_eq!(in_words(90_000), "2 min");
        assert_eq!(in_words(3 * 86_400_000), "3 d");
        assert_eq!(in_words(10), "under 1 s");
        assert_eq!(in_words(3_599_000), "1 h");
        assert_eq!(in_words(45_000), "45 s");
    }

    #[test]
    fn a_deadline_schedules_each_action_once() {
        let d = Deadline {
            after: Some(1_000),
            default: Some(DeadlineDefault::Answer("no".into())),
            remind: vec![100, 200],
            escalate: Some(Escalation {
                after: 500,
                to: Approvers {
                    roles: vec!["ops".into()],
                    principals: vec![],
                },
            }),
        };
        let t = timers(&d, Subject::Approval(4), 10);
        let names: Vec<(&str, i64)> = t.iter().map(|t| (t.name.as_str(), t.due_at)).collect();
        assert_eq!(
            names,
            [
                ("remind", 110),
                ("remind", 210),
                ("escalate", 510),
                ("default", 1_010)
            ]
        );
        assert!(t.iter().all(|t| t.subject.as_deref() == Some("approval:4")));
    }
}
