//! The one way an [`EvalError`] is made.

use duet_spec::{EvalError, EvalErrorKind};

/// An error of `kind` saying `message`, not yet located.
pub(crate) fn error(kind: EvalErrorKind, message: String) -> EvalError {
    EvalError {
        kind,
        message,
        file: None,
        at: None,
        path: None,
        hint: None,
    }
}
