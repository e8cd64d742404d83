//! What admitted a caller, kept with it so a long stream it opened can end when that is
//! revoked or signed out (`service::keys::while_admitted`).

/// What admitted a caller: checked again while a stream it opened stays open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Credential {
    /// Nothing (`--no-auth`, or a caller made up for a thread's owner): it never ends.
    None,
    /// The API key whose secret hashes to this.
    Key(String),
    /// The inbox sign-in whose cookie secret hashes to this.
    SignIn(String),
}
