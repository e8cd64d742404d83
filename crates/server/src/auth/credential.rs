//! What admitted a caller, as data: the services that check it again (`service::keys`) name
//! this leaf, not `auth.rs`, which calls them.

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
