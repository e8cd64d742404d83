//! What an engine threw, read while its context was held, and its stack frames placed in the
//! files as the author wrote them (positions mapped back through the TypeScript strip).

use rquickjs::{CaughtError, Value};

use crate::resolve::Modules;

/// What the engine threw.
pub(crate) struct Thrown {
    pub(crate) message: String,
    pub(crate) stack: String,
    /// The engine could not allocate.
    pub(crate) allocation: bool,
}

impl Thrown {
    pub(crate) fn from(caught: &CaughtError<'_>) -> Thrown {
        let (message, stack) = match caught {
            CaughtError::Exception(e) => (
                e.message().unwrap_or_default(),
                e.stack().unwrap_or_default(),
            ),
            CaughtError::Value(v) => (thrown_value(v), String::new()),
            CaughtError::Error(e) => (e.to_string(), String::new()),
        };
        Thrown {
            message,
            stack,
            allocation: matches!(caught, CaughtError::Error(rquickjs::Error::Allocation)),
        }
    }
}

fn thrown_value(v: &Value<'_>) -> String {
    if let Some(s) = v.as_string().and_then(|s| s.to_string().ok()) {
        return s;
    }
    v.ctx()
        .json_stringify(v.clone())
        .ok()
        .flatten()
        .and_then(|s| s.to_string().ok())
        .unwrap_or_else(|| format!("a {}", v.type_name()))
}

/// The first stack frame in a project file, its position mapped to the file as written.
pub(crate) fn first_project_frame(stack: &str, m: &Modules) -> Option<(String, u32, u32)> {
    stack.lines().find_map(|line| {
        let frame = Frame::parse(line)?;
        // A module's own code stopped from outside (the deadline) is placed at its start, 1:1,
        // which says nothing: the definition's position says more.
        if (frame.line, frame.column) == (1, 1) {
            return None;
        }
        let (line, column) = frame.written(m)?;
        Some((frame.file.to_owned(), line, column))
    })
}

/// `stack` with the frames in the project's files placed where the author wrote them, and only
/// the frames of the project and its packages (not duet's own glue).
pub(crate) fn written_stack(stack: &str, m: &Modules) -> String {
    let mut out = Vec::new();
    for line in stack.lines() {
        let Some(frame) = Frame::parse(line) else {
            continue;
        };
        let own = m.stripped.contains_key(frame.file);
        if !own && !frame.file.starts_with('/') {
            continue;
        }
        let (l, c) = frame.written(m).unwrap_or((frame.line, frame.column));
        let place = format!("{}:{l}:{c}", frame.file);
        out.push(match frame.function {
            Some(f) => format!("    at {f} ({place})"),
            None => format!("    at {place}"),
        });
    }
    out.join("\n")
}

/// One line of a QuickJS stack: `at name (file:line:column)` or `at file:line:column`.
struct Frame<'a> {
    function: Option<&'a str>,
    file: &'a str,
    line: u32,
    column: u32,
}

impl<'a> Frame<'a> {
    fn parse(line: &'a str) -> Option<Frame<'a>> {
        let frame = line.trim().strip_prefix("at ")?;
        let (function, place) = match (frame.rfind(" ("), frame.ends_with(')')) {
            (Some(i), true) => (Some(&frame[..i]), &frame[i + 2..frame.len() - 1]),
            _ => (None, frame),
        };
        let mut parts = place.rsplitn(3, ':');
        let (column, line, file) = (parts.next()?, parts.next()?, parts.next()?);
        Some(Frame {
            function,
            file,
            line: line.parse().ok()?,
            column: column.parse().ok()?,
        })
    }

    /// Where this frame is in the project file as written, when it is in one.
    fn written(&self, m: &Modules) -> Option<(u32, u32)> {
        let stripped = m.stripped.get(self.file)?;
        let written = m.files.get(self.file).map(String::as_str);
        Some(stripped.original_of_engine(self.line, self.column, written))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_read_with_and_without_a_name() {
        let f = Frame::parse("    at execute (agents/tools/x.ts:12:5)").expect("a frame");
        assert_eq!(
            (f.function, f.file, f.line, f.column),
            (Some("execute"), "agents/tools/x.ts", 12, 5)
        );
        let f = Frame::parse("    at agents/tools/x.ts:3:1").expect("a frame");
        assert_eq!((f.function, f.file, f.line), (None, "agents/tools/x.ts", 3));
        assert!(Frame::parse("Error: nope").is_none());
    }

    #[test]
    fn only_the_projects_and_packages_frames_are_kept() {
        let mut m = Modules::default();
        m.stripped.insert(
            "agents/tools/x.ts".into(),
            crate::strip::Stripped::plain("a\nb\nc\n".into()),
        );
        let stack = "    at boom (agents/tools/x.ts:2:1)\n    at run (duet-host:40:3)\n    at parse (/n/zod/v4/x.js:9:9)\n    at <anonymous>\n";
        assert_eq!(
            written_stack(stack, &m),
            "    at boom (agents/tools/x.ts:2:1)\n    at parse (/n/zod/v4/x.js:9:9)"
        );
    }
}
