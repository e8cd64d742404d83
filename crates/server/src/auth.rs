//! Who is calling: an API key (`Authorization: Bearer duet_…`) maps to a principal. Keys are
//! 256-bit random secrets stored as their SHA-256 (a key this long needs no slow hash: it cannot
//! be guessed, only stolen, and the database holds no key). Each principal sees only its own
//! threads, addressed in a key space of its own; an admin key sees all.

pub(crate) mod cache;
pub(crate) mod credential;

pub(crate) mod loopback;

pub(crate) use credential::Credential;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{StatusCode, header};
use duet_runtime::{Principal, Thread};
use duet_server_store::ApiKey;
use sha2::{Digest, Sha256};

use crate::problem::Problem;
use crate::state::AppState;

/// The issuer of every principal an API key stands for.
pub const ISSUER: &str = "duet:api-key";

/// A new API key: the secret (shown once) and what is stored of it.
pub struct NewKey {
    /// The bearer token: `duet_{id}_{secret}`. Shown once; never stored.
    pub token: String,
    /// Its stored facts.
    pub key: ApiKey,
    /// The hash it is found by.
    pub hash: String,
}

/// Whether `name` may name a principal or a role: 1–64 of `A-Z a-z 0-9 . _ -`.
fn is_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// Whether `principal` may name a principal: 1–64 of `A-Z a-z 0-9 . _ -`.
pub fn check_principal(principal: &str) -> Result<(), String> {
    if is_name(principal) {
        Ok(())
    } else {
        Err(format!(
            "principal {principal:?}: use 1–64 letters, digits, `.`, `_` or `-`"
        ))
    }
}

/// Whether `role` may name a key's role: 1–64 of `A-Z a-z 0-9 . _ -`, as a principal.
pub fn check_role(role: &str) -> Result<(), String> {
    if is_name(role) {
        Ok(())
    } else {
        Err(format!(
            "role {role:?}: use 1–64 letters, digits, `.`, `_` or `-`"
        ))
    }
}

/// Makes (but does not store) a key for `principal`.
pub fn new_key(
    principal: &str,
    admin: bool,
    label: Option<String>,
    now: i64,
) -> Result<NewKey, String> {
    check_principal(principal)?;
    let mut bytes = [0u8; 38];
    getrandom::fill(&mut bytes).map_err(|e| format!("no randomness for a key: {e}"))?;
    let (id, secret) = bytes.split_at(6);
    let id = hex(id);
    let token = format!("duet_{id}_{}", hex(secret));
    Ok(NewKey {
        hash: hash(&token),
        token,
        key: ApiKey {
            id,
            principal: principal.to_owned(),
            admin,
            roles: Vec::new(),
            label,
            created_at: now,
            revoked_at: None,
        },
    })
}

impl NewKey {
    /// The key holding `roles` too (each checked by [`check_role`]; one given twice is held
    /// once, in the order first given).
    pub fn with_roles(mut self, roles: &[String]) -> Result<NewKey, String> {
        for role in roles {
            check_role(role)?;
            if !self.key.roles.contains(role) {
                self.key.roles.push(role.clone());
            }
        }
        Ok(self)
    }
}

/// The stored hash of a bearer token.
pub fn hash(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The principal an API key acts as.
pub fn principal(subject: &str) -> Principal {
    Principal {
        kind: "user".into(),
        issuer: ISSUER.into(),
        subject: subject.into(),
    }
}

/// The caller of a request, as its key says.
#[derive(Clone, Debug)]
pub struct Caller {
    /// The principal (none when the server runs `--no-auth`).
    pub principal: Option<Principal>,
    /// Its canonical JSON, as threads store it.
    pub canonical: Option<String>,
    /// Whether it sees every principal's threads.
    pub admin: bool,
    /// The roles its key holds: it may decide the tool calls whose `approval.approvers` name
    /// one of them ([`Caller::may_decide`]).
    pub roles: Vec<String>,
    /// What admitted it, so a long stream can end when that is revoked or signed out.
    pub(crate) credential: Credential,
}

impl Caller {
    /// A caller with no key, on a server with auth off: it sees every thread.
    pub fn anonymous() -> Self {
        Caller {
            principal: None,
            canonical: None,
            admin: true,
            roles: Vec::new(),
            credential: Credential::None,
        }
    }

    /// The caller principal `subject` is, acting without a key — the CLI's `--principal`: whoever
    /// can open the database may act as anyone, so this is no authentication, only addressing
    /// (the principal's key space and its threads).
    pub fn acting_as(subject: &str) -> Result<Self, String> {
        check_principal(subject)?;
        Ok(Caller::owner(Some(&principal(subject).canonical())))
    }

    /// The caller a thread's owner (canonical JSON; `None`: an admin or no auth) would be, to
    /// name its threads as it does.
    pub(crate) fn owner(canonical: Option<&str>) -> Self {
        match canonical {
            Some(c) => Caller {
                principal: Some(principal(&Caller::author_name(c))),
                canonical: Some(c.to_owned()),
                admin: false,
                roles: Vec::new(),
                credential: Credential::None,
            },
            None => Caller::anonymous(),
        }
    }

    /// The caller `key` admits, by `credential` (the key's own hash, or a sign-in's).
    pub(crate) fn of(key: &ApiKey, credential: Credential) -> Self {
        let p = principal(&key.principal);
        Caller {
            canonical: Some(p.canonical()),
            principal: Some(p),
            admin: key.admin,
            roles: key.roles.clone(),
            credential,
        }
    }

    /// The key space prefix of a non-admin principal.
    fn prefix(&self) -> Option<String> {
        match (&self.principal, self.admin) {
            (Some(p), false) => Some(format!("{}/", p.subject)),
            _ => None,
        }
    }

    /// The stored key of the thread this caller calls `key`.
    pub fn stored_key(&self, key: &str) -> String {
        match self.prefix() {
            Some(prefix) => format!("{prefix}{key}"),
            None => key.to_owned(),
        }
    }

    /// The key this caller calls the thread stored as `stored`.
    pub fn visible_key(&self, stored: &str) -> String {
        match self.prefix() {
            Some(prefix) => stored.strip_prefix(&prefix).unwrap_or(stored).to_owned(),
            None => stored.to_owned(),
        }
    }

    /// Whether this caller may see and act on `thread`.
    pub fn may_see(&self, thread: &Thread) -> bool {
        self.admin || (thread.principal.is_some() && thread.principal == self.canonical)
    }

    /// Whether this caller may decide a tool call of `thread` whose approval names `approvers`
    /// (the policy of issue #29). Nobody named: the thread's owner (or an admin), as for
    /// everything of the thread. Someone named: an admin, a caller whose principal is listed
    /// and a key holding a listed role — and not the owner as such (separation of duties: who
    /// asked does not approve, unless the policy names them).
    pub fn may_decide(
        &self,
        thread: &Thread,
        approvers: &duet_runtime::approval::Approvers,
    ) -> bool {
        if approvers.roles.is_empty() && approvers.principals.is_empty() {
            return self.may_see(thread);
        }
        self.admin || self.named_by(approvers)
    }

    /// Whether `approvers` names this caller: its principal, or a role its key holds.
    pub fn named_by(&self, approvers: &duet_runtime::approval::Approvers) -> bool {
        self.principal
            .as_ref()
            .is_some_and(|p| approvers.principals.contains(&p.subject))
            || self.roles.iter().any(|r| approvers.roles.contains(r))
    }

    /// The principal filter for listings: none for an admin.
    pub fn owner_filter(&self) -> Option<&str> {
        if self.admin {
            None
        } else {
            self.canonical.as_deref()
        }
    }

    /// The principal a delivery to `thread` is made as: the thread's own owner when an admin
    /// acts on another principal's thread (the answer is still recorded as the admin's).
    pub fn acting_for<'a>(&'a self, thread: Option<&'a Thread>) -> Option<&'a str> {
        match thread {
            Some(t) if self.admin => t.principal.as_deref(),
            _ => self.canonical.as_deref(),
        }
    }

    /// A principal's stored canonical JSON shown as its subject (`alice`).
    pub fn author_name(canonical: &str) -> String {
        serde_json::from_str::<Principal>(canonical)
            .map(|p| p.subject)
            .unwrap_or_else(|_| canonical.to_owned())
    }
}

fn unauthorized(detail: &str) -> Problem {
    Problem::new(StatusCode::UNAUTHORIZED, "unauthorized", detail)
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Problem> {
        if !state.options().auth {
            return Ok(Caller::anonymous());
        }
        let token = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(bearer_token)
            .ok_or_else(|| unauthorized("send an API key: `Authorization: Bearer duet_…`"))?;
        let hashed = hash(token);
        let key = crate::service::keys::by_hash(state, &hashed).await?;
        match key {
            Some(key) if key.revoked_at.is_none() => Ok(Caller::of(&key, Credential::Key(hashed))),
            Some(_) => Err(unauthorized("this API key was revoked")),
            None => Err(unauthorized("this API key is not known")),
        }
    }
}

/// The token of an `Authorization` value in the bearer scheme, whose name is case-insensitive
/// (RFC 9110 §11.1): `Bearer T`, `bearer T`, `BEARER T`; one or more spaces, then the token.
fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

#[cfg(test)]
mod bearer_tests {
    #[test]
    fn the_bearer_scheme_is_read_whatever_its_case() {
        for (value, token) in [
            ("Bearer duet_a_b", Some("duet_a_b")),
            ("bearer duet_a_b", Some("duet_a_b")),
            ("BEARER duet_a_b", Some("duet_a_b")),
            ("bEaReR   duet_a_b  ", Some("duet_a_b")),
            ("Basic duet_a_b", None),
            ("Bearer", None),
            ("Bearer   ", None),
            ("Bearerduet_a_b", None),
        ] {
            assert_eq!(super::bearer_token(value), token, "{value:?}");
        }
    }
}

#[cfg(test)]
mod policy_tests {
    use super::{Caller, Credential, principal};
    use duet_runtime::approval::Approvers;

    /// A key of `subject` holding `roles` (an admin if `admin`).
    fn key(subject: &str, roles: &[&str], admin: bool) -> Caller {
        let p = principal(subject);
        Caller {
            canonical: Some(p.canonical()),
            principal: Some(p),
            admin,
            roles: roles.iter().map(|r| (*r).to_owned()).collect(),
            credential: Credential::None,
        }
    }

    #[test]
    fn who_may_decide_a_call_by_its_approvers() {
        let mut thread = duet_runtime::Thread::new(
            uuid::Uuid::now_v7(),
            "alice/r1".into(),
            "desk".into(),
            None,
            0,
        );
        thread.principal = Some(principal("alice").canonical());
        let nobody = Approvers::default();
        let refunds = Approvers {
            roles: vec!["refunds".into()],
            principals: vec!["erin".into()],
        };
        let with_owner = Approvers {
            principals: vec!["alice".into()],
            ..refunds.clone()
        };
        let cases = [
            // (caller, approvers, may decide)
            (key("alice", &[], false), &nobody, true),
            (key("bob", &["refunds"], false), &nobody, false),
            (key("ops", &[], true), &nobody, true),
            (Caller::anonymous(), &nobody, true),
            (key("alice", &[], false), &refunds, false),
            (key("alice", &["refunds"], false), &refunds, true),
            (key("alice", &[], false), &with_owner, true),
            (key("bob", &["refunds"], false), &refunds, true),
            (key("bob", &["ops", "refunds"], false), &refunds, true),
            (key("bob", &["Refunds"], false), &refunds, false),
            (key("carol", &[], false), &refunds, false),
            (key("erin", &[], false), &refunds, true),
            (key("ops", &[], true), &refunds, true),
        ];
        for (i, (caller, approvers, may)) in cases.iter().enumerate() {
            assert_eq!(
                caller.may_decide(&thread, approvers),
                *may,
                "case {i}: {:?} {:?} on {approvers:?}",
                caller.principal.as_ref().map(|p| &p.subject),
                caller.roles
            );
        }
    }
}
