//! The person looking at the inbox: what their key lets them see and the token their forms
//! carry. `signin.rs` makes one from a request's session cookie; `layout.rs` and the pages
//! show it.

use crate::auth::Caller;

/// The person looking at the inbox.
#[derive(Clone, Debug)]
pub(crate) struct Viewer {
    /// What they may see and do, as the API would let their key.
    pub caller: Caller,
    /// The CSRF token their forms carry (none with auth off: there is no session to forge).
    pub csrf: Option<String>,
}

impl Viewer {
    /// Who they are, for the page's header (`None` with auth off).
    pub(crate) fn name(&self) -> Option<String> {
        self.caller.principal.as_ref().map(|p| p.subject.clone())
    }

    /// The CSRF token, or the empty string when none is needed.
    pub(crate) fn token(&self) -> &str {
        self.csrf.as_deref().unwrap_or_default()
    }
}
