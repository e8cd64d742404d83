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
use crate::store::{NewTimer, TimerKind};
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
    }
    out
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
/// call), with what each escalated to.
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
    out
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
