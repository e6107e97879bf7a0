//! Rendering agent events on a terminal (REPL and `-p -v`).

use ahelper_agents::agent::AgentEvent;
use ahelper_agents::text::{first_line_clipped, for_terminal};
use ahelper_agents::tools::describe_call;
use crossterm::style::Stylize;
use std::io::Write;

/// Characters of a tool call's main argument shown after `●`.
const CALL_CHARS: usize = 100;
/// Characters of a one-line tool result shown after `⎿`.
const RESULT_CHARS: usize = 160;

/// Writes events to a terminal (or plain text when `color` is false).
pub struct EventPrinter {
    color: bool,
    /// Whether assistant text is printed (REPL) or only tool activity (`-p -v`, on stderr).
    show_text: bool,
    at_line_start: bool,
}

impl EventPrinter {
    /// A printer; `color` enables ANSI styling.
    pub fn new(color: bool, show_text: bool) -> Self {
        EventPrinter {
            color,
            show_text,
            at_line_start: true,
        }
    }

    /// Renders one event to `out`.
    pub fn print(&mut self, out: &mut dyn Write, event: &AgentEvent) {
        match event {
            AgentEvent::TextDelta { text } if self.show_text => {
                let _ = write!(out, "{}", for_terminal(text));
                self.at_line_start = text.ends_with('\n');
            }
            AgentEvent::Retry { .. } => {
                self.newline(out);
                let line = format!(
                    "⟳ {}",
                    for_terminal(&event.retry_message().unwrap_or_default())
                );
                let _ = writeln!(out, "{}", self.dim(&line));
            }
            AgentEvent::Compacted {
                summarised_messages,
                kept_messages,
            } => {
                self.newline(out);
                let line = format!(
                    "⋯ compacted {summarised_messages} earlier messages into a summary ({kept_messages} kept)"
                );
                let _ = writeln!(out, "{}", self.dim(&line));
            }
            AgentEvent::HookMessage {
                event: hook_event,
                command,
                message,
            } => {
                self.newline(out);
                let line = format!(
                    "! {hook_event} hook `{}`: {}",
                    for_terminal(command),
                    for_terminal(message)
                );
                let _ = writeln!(out, "{}", self.dim(&line));
            }
            AgentEvent::ToolCallStarted { name, input, .. } => {
                self.newline(out);
                let line = format!(
                    "● {}",
                    for_terminal(&describe_call(name, input, CALL_CHARS))
                );
                let _ = writeln!(
                    out,
                    "{}",
                    if self.color {
                        line.cyan().to_string()
                    } else {
                        line
                    }
                );
            }
            AgentEvent::ToolCallFinished {
                content,
                is_error,
                name,
                ..
            } => {
                let lines = content.lines().count();
                let summary = if *is_error || name == "run_command" || lines <= 1 {
                    format!(
                        "  ⎿  {}",
                        for_terminal(&first_line_clipped(content, RESULT_CHARS))
                    )
                } else {
                    format!("  ⎿  {lines} lines")
                };
                let styled = if !self.color {
                    summary
                } else if *is_error {
                    summary.red().to_string()
                } else {
                    summary.dark_grey().to_string()
                };
                let _ = writeln!(out, "{styled}");
                self.at_line_start = true;
            }
            _ => {}
        }
        let _ = out.flush();
    }

    /// Ends the current line if text was printed without a newline.
    pub fn newline(&mut self, out: &mut dyn Write) {
        if !self.at_line_start {
            let _ = writeln!(out);
            self.at_line_start = true;
        }
    }

    fn dim(&self, s: &str) -> String {
        if self.color {
            s.dark_grey().to_string()
        } else {
            s.to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// What the REPL shows for `events`, as text.
    fn shown(events: &[AgentEvent]) -> String {
        let mut printer = EventPrinter::new(false, true);
        let mut out = Vec::new();
        for e in events {
            printer.print(&mut out, e);
        }
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn streamed_text_calls_and_results_show_escapes_visibly() {
        let out = shown(&[
            AgentEvent::TextDelta {
                text: "a\x1b]52;c;aGk=".into(),
            },
            AgentEvent::TextDelta {
                text: "\x07b \u{202e}x\n".into(),
            },
            AgentEvent::ToolCallStarted {
                id: "t1".into(),
                name: "run_command".into(),
                input: json!({"command": "echo \x1b[2J"}),
            },
            AgentEvent::ToolCallFinished {
                id: "t1".into(),
                name: "run_command".into(),
                content: "\x1b[2J\u{9b}1m".into(),
                is_error: false,
                duration_ms: 1,
            },
        ]);
        assert!(out.contains(r"a\x1b]52;c;aGk=\x07b \u{202e}x"), "{out}");
        assert!(out.contains(r"echo \x1b[2J"), "{out}");
        assert!(out.contains(r"\x1b[2J\u{9b}1m"), "{out}");
        assert!(!out.contains('\x1b') && !out.contains('\u{9b}') && !out.contains('\u{202e}'));
    }
}
