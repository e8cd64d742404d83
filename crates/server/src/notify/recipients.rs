//! Who hears of an event (pure): the project's subscriptions (`agents/notifications/`) and the
//! principals' own (stored), each matched by its events and agents, and routed by the
//! question's approvers — a role's channel hears of the questions its roles may answer (an
//! escalation: only of the roles it adds), a principal of its own threads and of the questions
//! it may decide. Whoever may decide gets an [`Authority`]: the one-time answers its
//! notification carries decide as it.

use std::collections::BTreeMap;

use duet_server_store::Subscription;
use duet_spec::{Approvers, NotificationChannel, NotificationDef};

use super::{Event, QuestionKind};

/// Where a notification goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Channel {
    /// A signed POST.
    Webhook {
        /// The URL.
        url: String,
        /// How it is signed.
        secret: Secret,
    },
    /// A Slack message.
    Slack {
        /// The channel.
        channel: String,
    },
    /// An email to each address.
    Email {
        /// The addresses.
        to: Vec<String>,
    },
}

impl Channel {
    /// The outbox's name for it.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Channel::Webhook { .. } => "webhook",
            Channel::Slack { .. } => "slack",
            Channel::Email { .. } => "email",
        }
    }
}

/// A webhook's signing secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Secret {
    /// Not signed.
    None,
    /// Read from this environment variable when sent.
    Env(String),
    /// This value (a stored subscription's).
    Value(String),
}

/// Who a notification's answers decide as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Authority {
    /// A principal's subject, or `notification:NAME` for a role's channel.
    pub(crate) approver: String,
    /// The roles it decides with.
    pub(crate) roles: Vec<String>,
}

/// One recipient of one event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Recipient {
    /// The subscription: `agents/notifications/NAME`'s name, or a stored one's id.
    pub(crate) subscription: String,
    /// Where.
    pub(crate) channel: Channel,
    /// The principal it is for, when a stored subscription's.
    pub(crate) principal: Option<String>,
    /// Whose answers its links are, when it may answer.
    pub(crate) authority: Option<Authority>,
    /// How long its links work (ms).
    pub(crate) link_ttl_ms: u64,
}

/// What the routing looks at.
#[derive(Clone, Debug)]
pub(crate) struct Context<'a> {
    /// The event.
    pub(crate) event: Event,
    /// The thread's agent.
    pub(crate) agent: &'a str,
    /// The thread's owner (a principal's subject), if anyone's.
    pub(crate) owner: Option<&'a str>,
    /// What the question is, for the `question.*` events.
    pub(crate) kind: Option<QuestionKind>,
    /// Who may answer it now: its approvers with every escalation so far.
    pub(crate) approvers: &'a Approvers,
    /// For `question.escalated`: who it added.
    pub(crate) added: Option<&'a Approvers>,
}

impl Context<'_> {
    /// Who this event reaches among approvers: an escalation's additions, else all.
    fn reaching(&self) -> &Approvers {
        self.added.unwrap_or(self.approvers)
    }

    /// Whether the event is about a question.
    fn about_question(&self) -> bool {
        self.kind.is_some()
    }

    /// Whether the notification may carry answers (a tool call still asking).
    fn answers(&self) -> bool {
        self.event.asks() && self.kind == Some(QuestionKind::ToolCall)
    }
}

fn wants(events: &[String], agents: &[String], ctx: &Context<'_>) -> bool {
    (events.is_empty() || events.iter().any(|e| e == ctx.event.as_str()))
        && (agents.is_empty() || agents.iter().any(|a| a == ctx.agent))
}

fn both(a: &[String], b: &[String]) -> Vec<String> {
    a.iter().filter(|r| b.contains(r)).cloned().collect()
}

/// The project's subscriptions that hear of the event.
pub(crate) fn of_project<'d>(
    ctx: &Context<'_>,
    defs: impl IntoIterator<Item = &'d NotificationDef>,
) -> Vec<Recipient> {
    let mut out = Vec::new();
    for d in defs {
        if !wants(&d.events, &d.agents, ctx) {
            continue;
        }
        let mut authority = None;
        if !d.roles.is_empty() && ctx.about_question() {
            let roles = both(&d.roles, &ctx.reaching().roles);
            if roles.is_empty() {
                continue;
            }
            authority = ctx.answers().then(|| Authority {
                approver: format!("notification:{}", d.name),
                roles,
            });
        }
        let channel = match &d.channel {
            NotificationChannel::Webhook { url, secret_env } => Channel::Webhook {
                url: url.clone(),
                secret: secret_env.clone().map_or(Secret::None, Secret::Env),
            },
            NotificationChannel::Slack { channel } => Channel::Slack {
                channel: channel.clone(),
            },
            NotificationChannel::Email { to } => Channel::Email { to: to.clone() },
        };
        out.push(Recipient {
            subscription: d.name.clone(),
            channel,
            principal: None,
            authority,
            link_ttl_ms: d.link_ttl_ms,
        });
    }
    out
}

/// Whether principal `p` (holding `roles`) may decide: named, a role named, or — nobody named —
/// the owner.
fn may_decide(ctx: &Context<'_>, approvers: &Approvers, p: &str, roles: &[String]) -> bool {
    if ctx.approvers.roles.is_empty() && ctx.approvers.principals.is_empty() {
        return ctx.owner == Some(p);
    }
    approvers.principals.iter().any(|x| x == p) || roles.iter().any(|r| approvers.roles.contains(r))
}

/// The stored subscriptions that hear of the event: its owner's, and those of whoever it asks
/// (`roles_of`: each principal with a live key, and the roles its keys hold).
pub(crate) fn of_principals(
    ctx: &Context<'_>,
    subs: &[Subscription],
    roles_of: &BTreeMap<String, Vec<String>>,
) -> Vec<Recipient> {
    let mut out = Vec::new();
    for s in subs {
        let events: Vec<String> = serde_json::from_str(&s.events).unwrap_or_default();
        let agents: Vec<String> = serde_json::from_str(&s.agents).unwrap_or_default();
        if !wants(&events, &agents, ctx) {
            continue;
        }
        // A principal with no live key (offboarded) hears nothing more.
        let Some(roles) = roles_of.get(&s.principal) else {
            continue;
        };
        let owns = ctx.owner == Some(s.principal.as_str());
        let asked = ctx.about_question() && may_decide(ctx, ctx.reaching(), &s.principal, roles);
        if !owns && !asked {
            continue;
        }
        let decides = ctx.answers() && may_decide(ctx, ctx.approvers, &s.principal, roles);
        let channel = match s.channel.as_str() {
            "webhook" => Channel::Webhook {
                url: s.target.clone(),
                secret: s.secret.clone().map_or(Secret::None, Secret::Value),
            },
            "slack" => Channel::Slack {
                channel: s.target.clone(),
            },
            "email" => Channel::Email {
                to: vec![s.target.clone()],
            },
            _ => continue,
        };
        out.push(Recipient {
            subscription: s.id.clone(),
            channel,
            principal: Some(s.principal.clone()),
            authority: decides.then(|| Authority {
                approver: s.principal.clone(),
                roles: both(roles, &ctx.approvers.roles),
            }),
            link_ttl_ms: NotificationDef::DEFAULT_LINK_TTL_MS,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(name: &str, roles: &[&str], events: &[&str]) -> NotificationDef {
        NotificationDef {
            name: name.into(),
            description: None,
            events: events.iter().map(|s| (*s).to_owned()).collect(),
            agents: Vec::new(),
            roles: roles.iter().map(|s| (*s).to_owned()).collect(),
            link_ttl_ms: 1_000,
            channel: NotificationChannel::Slack {
                channel: format!("C{name}"),
            },
        }
    }

    fn approvers(roles: &[&str]) -> Approvers {
        Approvers {
            roles: roles.iter().map(|s| (*s).to_owned()).collect(),
            principals: Vec::new(),
        }
    }

    #[test]
    fn a_role_channel_hears_of_its_roles_questions_and_answers_for_them() {
        let defs = [
            def("all", &[], &["question.parked"]),
            def("ops", &["ops"], &[]),
            def("sec", &["security"], &[]),
        ];
        let asked = approvers(&["ops"]);
        let ctx = Context {
            event: Event::QuestionParked,
            agent: "deployer",
            owner: Some("alice"),
            kind: Some(QuestionKind::ToolCall),
            approvers: &asked,
            added: None,
        };
        let got = of_project(&ctx, &defs);
        let names: Vec<_> = got.iter().map(|r| r.subscription.as_str()).collect();
        assert_eq!(names, ["all", "ops"]);
        assert_eq!(got[0].authority, None);
        assert_eq!(
            got[1].authority,
            Some(Authority {
                approver: "notification:ops".into(),
                roles: vec!["ops".into()],
            })
        );
    }

    #[test]
    fn an_escalation_reaches_only_the_roles_it_adds() {
        let defs = [def("leads", &["leads"], &[]), def("ops", &["ops"], &[])];
        let now = approvers(&["ops", "leads"]);
        let added = approvers(&["leads"]);
        let ctx = Context {
            event: Event::QuestionEscalated,
            agent: "deployer",
            owner: None,
            kind: Some(QuestionKind::ToolCall),
            approvers: &now,
            added: Some(&added),
        };
        let got = of_project(&ctx, &defs);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].subscription, "leads");
    }

    #[test]
    fn a_principal_hears_of_its_threads_and_what_it_may_decide() {
        let sub = |id: &str, p: &str| Subscription {
            id: id.into(),
            principal: p.into(),
            channel: "email".into(),
            target: format!("{p}@example.com"),
            events: "[]".into(),
            agents: "[]".into(),
            secret: None,
            created_at: 0,
        };
        let subs = [sub("1", "alice"), sub("2", "bob"), sub("3", "carol")];
        let roles: BTreeMap<String, Vec<String>> = [
            ("alice".to_owned(), Vec::new()),
            ("bob".to_owned(), vec!["ops".to_owned()]),
            ("carol".to_owned(), Vec::new()),
        ]
        .into();
        let asked = approvers(&["ops"]);
        let ctx = Context {
            event: Event::QuestionParked,
            agent: "deployer",
            owner: Some("alice"),
            kind: Some(QuestionKind::ToolCall),
            approvers: &asked,
            added: None,
        };
        let got = of_principals(&ctx, &subs, &roles);
        let who: Vec<_> = got.iter().map(|r| r.principal.as_deref()).collect();
        assert_eq!(who, [Some("alice"), Some("bob")]);
        // The owner hears of it but does not decide (approvers are named); bob does.
        assert_eq!(got[0].authority, None);
        assert_eq!(
            got[1].authority.as_ref().map(|a| a.approver.as_str()),
            Some("bob")
        );
        // Bob's keys revoked: he hears nothing more, though the call names his role.
        let mut gone = roles.clone();
        gone.remove("bob");
        let got = of_principals(&ctx, &subs, &gone);
        let who: Vec<_> = got.iter().map(|r| r.principal.as_deref()).collect();
        assert_eq!(who, [Some("alice")]);
    }
}
