//! What a call came to, in the contract's terms: the function's result as JSON, or a
//! [`CodeError`] of the right kind whose message says what happened in the author's terms.

use std::time::Duration;

use duet_runtime::{CodeError, CodeErrorKind, CodeLimits};

use crate::resolve::Modules;
use crate::sandbox::Stop;
use crate::thrown::{Thrown, first_project_frame, written_stack};

/// How far a call got, as the engine saw it.
pub(crate) enum Raw {
    /// Its file (or a module it imports) did not load.
    Import(Thrown),
    /// The glue could not start it (the engine was stopped or out of memory).
    Broke(Thrown),
    /// The function ran.
    Ran(Ran),
}

/// What the glue's box held when the call's work was done (nothing set: the function's promise
/// never settled).
#[derive(Default)]
pub(crate) struct Ran {
    pub(crate) ok: Option<String>,
    pub(crate) thrown: Option<(String, String)>,
    /// A thrown object's own properties, as JSON text.
    pub(crate) details: Option<String>,
    pub(crate) load: Option<String>,
}

impl Raw {
    /// What the engine reported as the failure, if it failed: its message and whether an
    /// allocation failed. QuickJS throws `null` when it cannot even make the "out of memory"
    /// error (the heap is full), so a bare `null` thrown counts as an allocation that failed
    /// (code that throws `null` itself is rare).
    pub(crate) fn failure(&self) -> Option<(&str, bool)> {
        let bare_null = |message: &str, stack: &str| message == "null" && stack.is_empty();
        match self {
            Raw::Import(t) | Raw::Broke(t) => {
                Some((&t.message, t.allocation || bare_null(&t.message, &t.stack)))
            }
            Raw::Ran(Ran {
                thrown: Some((message, stack)),
                ..
            }) => Some((message, bare_null(message, stack))),
            Raw::Ran(Ran { ok: Some(_), .. } | Ran { load: Some(_), .. }) => None,
            Raw::Ran(_) => Some(("", false)),
        }
    }
}

/// What else is known about a call once it is over.
pub(crate) struct Facts<'a> {
    pub(crate) file: &'a str,
    pub(crate) limits: CodeLimits,
    /// What loading the file was given.
    pub(crate) load_deadline: Duration,
    pub(crate) stop: Option<Stop>,
    /// The member it was waiting on when its deadline passed.
    pub(crate) waited_for: Option<String>,
    /// Its failure was the memory ceiling.
    pub(crate) out_of_memory: bool,
    /// The reason of a promise rejected and never handled.
    pub(crate) unhandled: Option<String>,
}

/// The call's outcome.
pub(crate) fn settle(
    raw: Raw,
    facts: Facts<'_>,
    modules: &Modules,
) -> Result<serde_json::Value, CodeError> {
    let whose = whose(facts.file);
    if let (Raw::Import(_), Some(Stop::Deadline)) = (&raw, facts.stop) {
        return Err(CodeError::new(
            CodeErrorKind::Load,
            format!(
                "loading {} took longer than {} ms and was stopped: a module's top-level code must finish",
                facts.file,
                facts.load_deadline.as_millis()
            ),
        ));
    }
    match facts.stop {
        Some(Stop::Deadline) => {
            let waiting = facts
                .waited_for
                .map(|m| format!(" (it was waiting for `{m}`)"))
                .unwrap_or_default();
            return Err(CodeError::new(
                CodeErrorKind::Deadline,
                format!(
                    "{whose} code ran longer than {} ms{waiting} and was stopped",
                    facts.limits.deadline.as_millis()
                ),
            ));
        }
        Some(Stop::Cancelled) => {
            return Err(CodeError::new(
                CodeErrorKind::Crashed,
                "the call was cancelled",
            ));
        }
        None => {}
    }
    if facts.out_of_memory {
        return Err(CodeError::new(
            CodeErrorKind::Memory,
            format!(
                "{whose} code needed more than {} and was stopped",
                size(facts.limits.memory)
            ),
        ));
    }
    let ran = match raw {
        Raw::Import(thrown) => return Err(load_failure(facts.file, &thrown, modules)),
        Raw::Broke(thrown) => {
            return Err(CodeError::new(
                CodeErrorKind::Crashed,
                format!("the code could not be started: {}", thrown.message),
            ));
        }
        Raw::Ran(ran) => ran,
    };
    if let Some(message) = ran.load {
        return Err(CodeError::new(CodeErrorKind::Load, message));
    }
    if let Some((message, stack)) = ran.thrown {
        let stack = written_stack(&stack, modules);
        return Err(CodeError {
            kind: CodeErrorKind::Thrown,
            message,
            stack: (!stack.is_empty()).then_some(stack),
            details: ran
                .details
                .and_then(|d| serde_json::from_str(&d).ok())
                .map(Box::new),
        });
    }
    let Some(ok) = ran.ok else {
        return Err(CodeError::new(
            CodeErrorKind::Thrown,
            "the function's promise never settled: once the call's own work is done nothing can settle it (there are no timers)",
        ));
    };
    if let Some(reason) = facts.unhandled {
        return Err(CodeError::new(
            CodeErrorKind::Thrown,
            format!("a promise was rejected and never handled: {reason}"),
        ));
    }
    serde_json::from_str(&ok).map_err(|e| {
        CodeError::new(
            CodeErrorKind::Thrown,
            format!("the function's result could not be read as JSON: {e}"),
        )
    })
}

/// A file that did not load: the import refused at its line, or what loading it threw.
fn load_failure(file: &str, thrown: &Thrown, modules: &Modules) -> CodeError {
    let refused = modules.failures.iter().find(|f| {
        thrown.message.contains("Error loading module")
            || (thrown.message.contains("Error resolving module")
                && thrown.message.contains(&format!("'{}'", f.specifier)))
    });
    if let Some(f) = refused {
        let e = crate::engine::import_failure(file, f, modules);
        let place = match (e.file, e.at) {
            (Some(other), Some((l, c))) => format!("{other}:{l}:{c}: "),
            (Some(other), None) => format!("{other}: "),
            (None, Some((l, c))) => format!("{file}:{l}:{c}: "),
            (None, None) => format!("{file}: "),
        };
        return CodeError::new(CodeErrorKind::Load, format!("{place}{}", e.message));
    }
    if thrown.message.contains("dead lock") {
        return CodeError::new(
            CodeErrorKind::Load,
            format!("{file} awaits a promise that never settles while it loads"),
        );
    }
    let place = first_project_frame(&thrown.stack, modules)
        .map(|(f, l, c)| format!(" (at {f}:{l}:{c})"))
        .unwrap_or_default();
    CodeError::new(
        CodeErrorKind::Load,
        format!("{file} could not be loaded: {}{place}", thrown.message),
    )
}

/// "the tool's", "the hook's"…, by the folder the file is in.
fn whose(file: &str) -> &'static str {
    let folder = file
        .strip_prefix("agents/")
        .and_then(|rest| rest.split('/').next())
        .unwrap_or("");
    match folder {
        "tools" => "the tool's",
        "hooks" => "the hook's",
        "handlers" => "the handler's",
        "effects" => "the effect's",
        "api" => "the endpoint's",
        _ => "the",
    }
}

/// `64 MiB`, or bytes when not a whole number of MiB.
fn size(bytes: usize) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{bytes} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_kind_of_definition() {
        assert_eq!(whose("agents/tools/x.ts"), "the tool's");
        assert_eq!(whose("agents/api/summary.get.ts"), "the endpoint's");
        assert_eq!(whose("lib/x.ts"), "the");
        assert_eq!(size(64 << 20), "64 MiB");
        assert_eq!(size(1000), "1000 bytes");
    }
}
