//! One-time answers sent in notifications: a link is a stored row (its approval, action,
//! approver, expiry, and whether it was used or revoked) and a token that names it, signed with
//! the database's shared `links` secret so a token cannot be made or altered without it.
//!
//! Token: `base64url(claims JSON) "." base64url(HMAC-SHA256(secret, claims part))`, the claims
//! `{l: link id, a: approval, d: action, e: expires at}`. Following one ([`follow`]) checks the
//! signature, then the row (unknown, revoked, expired, used), then decides through
//! `service::approvals::decide` as the link's approver (first answer wins there: a question
//! someone else answered is refused, naming them), and only then marks the row used.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use duet_runtime::Principal;
use duet_server_store::Link;

use crate::auth::{Caller, Credential};
use crate::service::{self, ServiceError};
use crate::state::AppState;

/// The stored secret's name.
const SECRET: &str = "links";

/// What a token says (checked against its row too).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Claims {
    /// The link's id.
    #[serde(rename = "l")]
    pub(crate) link: String,
    /// The approval it answers.
    #[serde(rename = "a")]
    pub(crate) approval: String,
    /// `approve`, `reject`.
    #[serde(rename = "d")]
    pub(crate) action: String,
    /// When it stops working (ms).
    #[serde(rename = "e")]
    pub(crate) expires_at: i64,
}

/// Why a link was refused.
#[derive(Debug)]
pub(crate) enum Refused {
    /// The token is not one this server signed (or was altered).
    Tampered,
    /// Signed, but no such link is stored (another database's).
    Unknown,
    /// Past its expiry.
    Expired { at: i64 },
    /// Revoked.
    Revoked { at: i64 },
    /// Used before, by `by` (a principal's name), at `at`.
    Used { at: i64, by: Option<String> },
    /// The person the link was sent to may no longer decide (every key of theirs revoked).
    Withdrawn,
    /// The question was answered already (by someone else, or through another link).
    AlreadyAnswered { by: Option<String> },
    /// The approval or the runtime refused the decision, or the database failed.
    Decision(Box<ServiceError>),
}

impl Refused {
    /// The HTTP status it is answered with.
    pub(crate) fn status(&self) -> axum::http::StatusCode {
        use axum::http::StatusCode;
        match self {
            Refused::Tampered | Refused::Unknown => StatusCode::NOT_FOUND,
            Refused::Expired { .. } | Refused::Revoked { .. } => StatusCode::GONE,
            Refused::Used { .. } | Refused::AlreadyAnswered { .. } => StatusCode::CONFLICT,
            Refused::Withdrawn => StatusCode::FORBIDDEN,
            Refused::Decision(e) => match **e {
                ServiceError::NotFound(_) => StatusCode::NOT_FOUND,
                ServiceError::NotAnApprover { .. } => StatusCode::FORBIDDEN,
                ServiceError::Invalid(_) => StatusCode::BAD_REQUEST,
                ServiceError::Store(_) => StatusCode::SERVICE_UNAVAILABLE,
                _ => StatusCode::CONFLICT,
            },
        }
    }

    /// The refusal in words, for the page, Slack and the API.
    pub(crate) fn sentence(&self) -> String {
        match self {
            Refused::Tampered | Refused::Unknown => "This link is not valid.".into(),
            Refused::Expired { at } => format!("This link expired at {}.", iso(*at)),
            Refused::Revoked { at } => format!("This link was revoked at {}.", iso(*at)),
            Refused::Used { at, by } => match by {
                Some(by) => format!("This link was used already, by {by} at {}.", iso(*at)),
                None => format!("This link was used already, at {}.", iso(*at)),
            },
            Refused::AlreadyAnswered { by: Some(by) } => {
                format!("This question was answered already, by {by}.")
            }
            Refused::AlreadyAnswered { by: None } => "This question was answered already.".into(),
            Refused::Withdrawn => {
                "The person this link was sent to may no longer decide: ask in the inbox.".into()
            }
            Refused::Decision(e) => e.to_string(),
        }
    }
}

/// A link followed: the decision it took.
#[derive(Debug)]
pub(crate) struct Followed {
    /// The approval.
    pub(crate) approval: String,
    /// What was decided.
    pub(crate) action: String,
    /// Who decided (a principal's name).
    pub(crate) by: String,
}

/// The links secret's bytes: the stored one, made by the first process that needed it, read
/// once per process (a link's page costs no write, whatever token it is asked with).
pub(crate) async fn secret(state: &AppState) -> Result<Vec<u8>, ServiceError> {
    state
        .links_secret()
        .get_or_try_init(|| async {
            let mut fresh = [0u8; 32];
            getrandom::fill(&mut fresh).map_err(|e| {
                ServiceError::Store(duet_runtime::StoreError::backend(std::io::Error::other(
                    e.to_string(),
                )))
            })?;
            let stored =
                service::notify::secret(state, SECRET, &URL_SAFE_NO_PAD.encode(fresh)).await?;
            URL_SAFE_NO_PAD.decode(stored.as_bytes()).map_err(|e| {
                ServiceError::Store(duet_runtime::StoreError::Corrupt(format!(
                    "the links secret: {e}"
                )))
            })
        })
        .await
        .cloned()
}

/// A new link's random id.
pub(crate) fn new_id() -> String {
    let mut id = [0u8; 16];
    // No randomness is no link; the caller's notification still goes, with no answers in it.
    if getrandom::fill(&mut id).is_err() {
        return String::new();
    }
    URL_SAFE_NO_PAD.encode(id)
}

fn mac(secret: &[u8], payload: &str) -> Option<Hmac<Sha256>> {
    let mut m = <Hmac<Sha256> as Mac>::new_from_slice(secret).ok()?;
    m.update(payload.as_bytes());
    Some(m)
}

/// The token of `link`, signed with `secret`.
pub(crate) fn token(secret: &[u8], link: &Link) -> String {
    let claims = Claims {
        link: link.id.clone(),
        approval: link.approval.clone(),
        action: link.action.clone(),
        expires_at: link.expires_at,
    };
    let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&claims).unwrap_or_default());
    let sig = mac(secret, &payload)
        .map(|m| URL_SAFE_NO_PAD.encode(m.finalize().into_bytes()))
        .unwrap_or_default();
    format!("{payload}.{sig}")
}

/// What `token` says, if `secret` signed it.
pub(crate) fn verify(secret: &[u8], token: &str) -> Result<Claims, Refused> {
    let (payload, sig) = token.split_once('.').ok_or(Refused::Tampered)?;
    let sig = URL_SAFE_NO_PAD
        .decode(sig.as_bytes())
        .map_err(|_| Refused::Tampered)?;
    mac(secret, payload)
        .ok_or(Refused::Tampered)?
        .verify_slice(&sig)
        .map_err(|_| Refused::Tampered)?;
    let json = URL_SAFE_NO_PAD
        .decode(payload.as_bytes())
        .map_err(|_| Refused::Tampered)?;
    serde_json::from_slice(&json).map_err(|_| Refused::Tampered)
}

/// The link `token` names, checked: signed by this database's secret, stored with the same
/// fields, live (not used, revoked or expired) at `now`.
pub(crate) async fn inspect(state: &AppState, token: &str) -> Result<Link, Refused> {
    let secret = secret(state)
        .await
        .map_err(|e| Refused::Decision(Box::new(e)))?;
    let claims = verify(&secret, token)?;
    let link = service::notify::link(state, &claims.link)
        .await
        .map_err(|e| Refused::Decision(Box::new(e)))?
        .ok_or(Refused::Unknown)?;
    if link.approval != claims.approval
        || link.action != claims.action
        || link.expires_at != claims.expires_at
    {
        return Err(Refused::Tampered);
    }
    standing(&link, state.runtime().now_ms())?;
    Ok(link)
}

/// Whether `link` may still be followed at `now`.
fn standing(link: &Link, now: i64) -> Result<(), Refused> {
    if let Some(at) = link.revoked_at {
        return Err(Refused::Revoked { at });
    }
    if let Some(at) = link.used_at {
        return Err(Refused::Used {
            at,
            by: link.used_by.as_deref().map(Caller::author_name),
        });
    }
    if now >= link.expires_at {
        return Err(Refused::Expired {
            at: link.expires_at,
        });
    }
    Ok(())
}

/// Follows `token`: decides its approval as its approver, with `reason` for a reject. `by`
/// names who followed it when that is not the approver the link was sent to (`slack:U123`: a
/// Slack user acting through the channel's link); empty, the approver.
pub(crate) async fn follow(
    state: &AppState,
    token: &str,
    by: &str,
    reason: Option<&str>,
) -> Result<Followed, Refused> {
    let link = inspect(state, token).await?;
    let decision = duet_spec::Decision::parse(&link.action).ok_or(Refused::Tampered)?;
    let mut caller = approver(&link);
    // A principal decides with what its keys hold now: none left, no decision; a role taken
    // away since the link was sent, not that role.
    if !link.approver.starts_with("notification:") {
        let keys = service::notify::live_keys(state)
            .await
            .map_err(|e| Refused::Decision(Box::new(e)))?;
        let held: Vec<&duet_server_store::ApiKey> = keys
            .iter()
            .filter(|k| k.principal == link.approver)
            .collect();
        if held.is_empty() {
            return Err(Refused::Withdrawn);
        }
        caller
            .roles
            .retain(|r| held.iter().any(|k| k.roles.contains(r)));
    }
    let author = match by.split_once(':') {
        Some((issuer, subject)) if !subject.is_empty() => Principal {
            kind: "user".into(),
            issuer: issuer.into(),
            subject: subject.into(),
        }
        .canonical(),
        _ => caller.canonical.clone().unwrap_or_default(),
    };
    let input = duet_runtime::DecisionInput {
        decision,
        args: None,
        reason: reason.map(str::to_owned).filter(|r| !r.trim().is_empty()),
        text: None,
        remember: None,
    };
    let decided =
        service::approvals::decide_as(state, &caller, Some(author.clone()), &link.approval, input)
            .await;
    let now = state.runtime().now_ms();
    match decided {
        Ok(()) => {}
        Err(ServiceError::AlreadyAnswered { first, .. }) => {
            return Err(Refused::AlreadyAnswered {
                by: first
                    .and_then(|f| f.author)
                    .as_deref()
                    .map(Caller::author_name),
            });
        }
        Err(ServiceError::Run {
            error: duet_runtime::RunError::DecisionTaken { first, .. },
            ..
        }) => {
            return Err(Refused::AlreadyAnswered {
                by: first.author.as_deref().map(Caller::author_name),
            });
        }
        Err(e) => return Err(Refused::Decision(Box::new(e))),
    }
    // Decided: the row records it (a racing follower of the same link lost at the decision).
    if let Err(e) = service::notify::use_link(state, &link.id, &author, now).await {
        tracing::warn!(error = %e, link = %link.id, "a followed link's use was not recorded (its decision was)");
    }
    Ok(Followed {
        approval: link.approval,
        action: link.action,
        by: Caller::author_name(&author),
    })
}

/// The caller a link's approver is: its principal, with the roles the link was sent with.
fn approver(link: &Link) -> Caller {
    let roles: Vec<String> = serde_json::from_str(&link.roles).unwrap_or_default();
    let principal = match link.approver.split_once(':') {
        Some(("notification", name)) => Principal {
            kind: "channel".into(),
            issuer: "duet:notification".into(),
            subject: name.into(),
        },
        _ => crate::auth::principal(&link.approver),
    };
    Caller {
        canonical: Some(principal.canonical()),
        principal: Some(principal),
        admin: false,
        roles,
        credential: Credential::None,
    }
}

fn iso(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms).map_or_else(
        || ms.to_string(),
        |t| t.format("%Y-%m-%d %H:%M UTC").to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link() -> Link {
        Link {
            id: "abc".into(),
            approval: "t:1:4".into(),
            action: "approve".into(),
            approver: "alice".into(),
            roles: "[]".into(),
            delivery: None,
            expires_at: 1_000,
            used_at: None,
            used_by: None,
            revoked_at: None,
            created_at: 0,
        }
    }

    #[test]
    fn a_token_verifies_with_its_secret_only() {
        let t = token(b"secret", &link());
        let claims = verify(b"secret", &t).expect("verifies");
        assert_eq!(claims.link, "abc");
        assert_eq!(claims.approval, "t:1:4");
        assert!(matches!(verify(b"other", &t), Err(Refused::Tampered)));
    }

    #[test]
    fn an_altered_token_is_refused() {
        let t = token(b"secret", &link());
        let (payload, sig) = t.split_once('.').expect("two parts");
        let forged =
            URL_SAFE_NO_PAD.encode(br#"{"l":"abc","a":"t:1:4","d":"approve","e":99999999999}"#);
        assert!(matches!(
            verify(b"secret", &format!("{forged}.{sig}")),
            Err(Refused::Tampered)
        ));
        assert!(matches!(verify(b"secret", payload), Err(Refused::Tampered)));
        assert!(matches!(
            verify(b"secret", &format!("{payload}.x{sig}")),
            Err(Refused::Tampered)
        ));
    }

    #[test]
    fn standing_orders_revoked_used_expired() {
        let mut l = link();
        assert!(standing(&l, 999).is_ok());
        assert!(matches!(
            standing(&l, 1_000),
            Err(Refused::Expired { at: 1_000 })
        ));
        l.used_at = Some(5);
        assert!(matches!(standing(&l, 10), Err(Refused::Used { at: 5, .. })));
        l.revoked_at = Some(7);
        assert!(matches!(standing(&l, 10), Err(Refused::Revoked { at: 7 })));
    }
}
