//! How `duet run` and `duet send` print a thread's events: one JSON event a line, or a
//! conversation — text deltas as they come, a message ended by one newline, thinking apart
//! (dimmed on a terminal, `<thinking>…</thinking>` otherwise), tool calls and outcomes on lines
//! of their own. Nobody reading any more (a closed pipe) stops the printing, never the run.

use std::io::{IsTerminal, Write};

use duet_runtime::{AgentEvent, StopReason};

/// What a line in progress is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Open {
    /// Nothing: the next output starts a line.
    Nothing,
    /// A message's text.
    Text,
    /// A message's thinking.
    Thinking,
}

/// How thinking is set apart from the answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Style {
    /// Dimmed (a terminal that takes colour: `NO_COLOR` unset).
    Dim,
    /// Between `<thinking>` and `</thinking>`.
    Tags,
}

impl Style {
    fn open(self) -> &'static str {
        match self {
            Style::Dim => "\x1b[2m",
            Style::Tags => "<thinking>",
        }
    }

    fn close(self) -> &'static str {
        match self {
            Style::Dim => "\x1b[0m\n",
            Style::Tags => "</thinking>\n",
        }
    }
}

/// Prints events to a writer (standard output), keeping track of the line in progress.
pub(crate) struct Printer<W: Write = std::io::Stdout> {
    out: W,
    json: bool,
    style: Style,
    open: Open,
    /// The reader went away: nothing more is written.
    closed: bool,
}

impl Printer {
    /// A printer to standard output: JSON events, or a conversation styled for where it goes.
    pub(crate) fn stdout(json: bool) -> Self {
        let colour = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
        Printer::new(
            std::io::stdout(),
            json,
            if colour { Style::Dim } else { Style::Tags },
        )
    }
}

impl<W: Write> Printer<W> {
    pub(crate) fn new(out: W, json: bool, style: Style) -> Self {
        Printer {
            out,
            json,
            style,
            open: Open::Nothing,
            closed: false,
        }
    }

    /// Whether it prints JSON events.
    pub(crate) fn json(&self) -> bool {
        self.json
    }

    /// Writes `s` as it is, flushed (a delta shows at once).
    fn write(&mut self, s: &str) {
        if self.closed || s.is_empty() {
            return;
        }
        if self
            .out
            .write_all(s.as_bytes())
            .and_then(|()| self.out.flush())
            .is_err()
        {
            self.closed = true;
        }
    }

    /// Ends the text or thinking in progress, so what follows starts a line.
    pub(crate) fn finish(&mut self) {
        match self.open {
            Open::Nothing => {}
            Open::Text => self.write("\n"),
            Open::Thinking => self.write(self.style.close()),
        }
        self.open = Open::Nothing;
    }

    /// Prints `text` as a line of its own.
    pub(crate) fn line(&mut self, text: &str) {
        self.finish();
        self.write(text);
        self.write("\n");
    }

    /// Prints one event.
    pub(crate) fn event(&mut self, event: &AgentEvent) {
        if self.json {
            if let Ok(line) = serde_json::to_string(event) {
                self.line(&line);
            }
            return;
        }
        match event {
            AgentEvent::Text { delta } => {
                let delta = if self.open == Open::Text {
                    delta.as_str()
                } else {
                    // The blank line the sink puts between two messages' text is for text
                    // that follows text; after another line it would only add space.
                    self.finish();
                    delta.trim_start_matches('\n')
                };
                if !delta.is_empty() {
                    self.open = Open::Text;
                    self.write(delta);
                }
            }
            AgentEvent::Thinking { delta } => {
                if self.open != Open::Thinking {
                    self.finish();
                    self.open = Open::Thinking;
                    self.write(self.style.open());
                }
                self.write(delta);
            }
            AgentEvent::ToolStarted { name, args, .. } => self.line(&format!("  → {name} {args}")),
            AgentEvent::ToolEnded {
                is_error, content, ..
            } => {
                let text = content
                    .as_str()
                    .map_or_else(|| content.to_string(), str::to_owned);
                self.line(&format!("  {} {text}", if *is_error { "✗" } else { "←" }));
            }
            AgentEvent::Retrying {
                attempt,
                max_attempts,
                reason,
                ..
            } => self.line(&format!("  (retrying {attempt}/{max_attempts}: {reason})")),
            AgentEvent::Completed { data } => {
                let field = |k: &str| {
                    data.as_ref()
                        .and_then(|d| d.get(k))
                        .and_then(|v| v.as_str())
                        .map(str::to_owned)
                };
                let status = field("status").unwrap_or_default();
                let reason = field("stopReason").unwrap_or_default();
                let said = match (status.as_str(), field("result")) {
                    ("awaiting_human", _) => "[waiting for you]".to_owned(),
                    // Calls that wait for a person's decision (`approvals`): `duet approve KEY:ID`.
                    ("waiting", _) => {
                        let ids: Vec<&str> = data
                            .as_ref()
                            .and_then(|d| d.get("approvals"))
                            .and_then(|a| a.as_array())
                            .into_iter()
                            .flatten()
                            .filter_map(|c| c["id"].as_str())
                            .collect();
                        if ids.is_empty() {
                            "[waiting for a subagent; it runs on when that answers]".to_owned()
                        } else {
                            format!(
                                "[waiting for a person's decision on {}: `duet approve KEY:ID`]",
                                ids.join(", ")
                            )
                        }
                    }
                    (_, Some(result)) if reason != StopReason::Aborted.as_str() => {
                        format!("[session ended: {reason}] {result}")
                    }
                    _ => format!("[{status}: {reason}]"),
                };
                self.line(&said);
            }
            // An event this build does not know: a conversation view has nothing to show for it.
            AgentEvent::Other(_) => {}
            AgentEvent::Failed { details, code, .. } => {
                let code = code.as_ref().map(|c| format!(" ({c})")).unwrap_or_default();
                self.line(&format!("[failed{code}] {details}"));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn printed(style: Style, events: &[AgentEvent]) -> String {
        let mut p = Printer::new(Vec::new(), false, style);
        for e in events {
            p.event(e);
        }
        p.finish();
        String::from_utf8(p.out).expect("utf-8")
    }

    fn text(d: &str) -> AgentEvent {
        AgentEvent::Text { delta: d.into() }
    }

    fn thinking(d: &str) -> AgentEvent {
        AgentEvent::Thinking { delta: d.into() }
    }

    #[test]
    fn deltas_join_into_lines_and_thinking_stands_apart() {
        let tool = AgentEvent::ToolStarted {
            id: "c1".into(),
            name: "look".into(),
            args: serde_json::json!({}),
        };
        let cases: &[(Style, Vec<AgentEvent>, &str)] = &[
            (
                Style::Tags,
                vec![text("Hel"), text("lo, "), text("world")],
                "Hello, world\n",
            ),
            (
                Style::Tags,
                vec![thinking("hm"), thinking("m"), text("Yes"), text(".")],
                "<thinking>hmm</thinking>\nYes.\n",
            ),
            (
                Style::Dim,
                vec![thinking("a"), thinking("b"), text("ok")],
                "\x1b[2mab\x1b[0m\nok\n",
            ),
            // Two messages' text, one after the other: the sink's blank line between them.
            (
                Style::Tags,
                vec![text("one"), text("\n\ntwo")],
                "one\n\ntwo\n",
            ),
            // After a tool line, the next message starts on the next line.
            (
                Style::Tags,
                vec![text("a"), tool, text("\n\nb")],
                "a\n  → look {}\nb\n",
            ),
        ];
        for (style, events, want) in cases {
            assert_eq!(&printed(*style, events), want, "{events:?}");
        }
    }

    /// A writer whose reader went away.
    struct Closed;

    impl Write for Closed {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_closed_reader_stops_the_printing_quietly() {
        let mut p = Printer::new(Closed, false, Style::Tags);
        p.event(&text("x"));
        p.line("y");
        assert!(p.closed);
    }
}
