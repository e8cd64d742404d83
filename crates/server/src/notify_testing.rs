//! Not API: what the end-to-end tests of `crates/cli` reach of the notification channels, which
//! are the crate's own (`notify/`). Hidden from the docs; nothing outside tests calls it.

pub use crate::notify::{
    Answer, Event, Links, ProposedCall, Question, QuestionKind, SessionEnd, ThreadRef, View,
};

/// The email channel's SMTP transport (`notify/email.rs`).
#[derive(Debug)]
pub struct Smtp(crate::notify::email::Smtp);

impl Smtp {
    /// The channel the variables configure (`DUET_SMTP_URL`, `DUET_SMTP_FROM`,
    /// `DUET_SMTP_CA_FILE`), read through `var`: `None` without a URL.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Option<Smtp>, String> {
        crate::notify::email::Smtp::from_vars(var).map(|s| s.map(Smtp))
    }
}

/// `view` rendered as the stored body of an email delivery to `to`.
pub fn render_email(view: &View, to: &str) -> String {
    crate::notify::email::render(view, to)
}

/// Sends email delivery `d` through `smtp`, as the sender does.
pub async fn send_email(
    smtp: &Smtp,
    d: &duet_server_store::Delivery,
) -> Result<Option<String>, String> {
    crate::notify::email::send(&smtp.0, d).await
}
