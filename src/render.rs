//! Rendering agent events on a terminal (REPL and `-p -v`).

use ahelper_agents::agent::AgentEvent;
use crossterm::style::Stylize;
use serde_json::Value;
use std::io::Write;

/// One-line summary of a tool call: the tool and its main argument.
pub fn describe_call(name: &str, input: &Value) -> String {
    let main = ["command", "path", "pattern", "file_path"]
        .iter()
        .find_map(|k| input.get(*k).and_then(Value::as_str))
        .map(|s| s.to_string())
        .unwrap_or_else(|| {
            let s = input.to_string();
            if s == "{}" { String::new() } else { s }
        });
    let main = first_line_clipped(&main, 100);
    if main.is_empty() {
        name.to_string()
    } else {
        format!("{name} {main}")
    }
}

/// The first line of `text`, cut to `max` characters with `…`.
pub fn first_line_clipped(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or("");
    let more_lines = text.lines().nth(1).is_some();
    let mut out: String = line.chars().take(max).collect();
    if line.chars().count() > max || more_lines {
        out.push('…');
    }
    out
}

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
                let _ = write!(out, "{text}");
                self.at_line_start = text.ends_with('\n');
            }
            AgentEvent::Retry {
                attempt,
                max_attempts,
                delay_ms,
                reason,
            } => {
                self.newline(out);
                let secs = (*delay_ms as f64 / 1000.0).ceil() as u64;
                let line =
                    format!("⟳ {reason}; retrying in {secs} s (attempt {attempt}/{max_attempts})");
                let _ = writeln!(out, "{}", self.dim(&line));
            }
            AgentEvent::ToolCallStarted { name, input, .. } => {
                self.newline(out);
                let line = format!("● {}", describe_call(name, input));
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
                    format!("  ⎿  {}", first_line_clipped(content, 160))
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

    #[test]
    fn call_description_uses_main_argument() {
        assert_eq!(
            describe_call("read_file", &json!({"path": "src/lib.rs"})),
            "read_file src/lib.rs"
        );
        assert_eq!(
            describe_call("run_command", &json!({"command": "ls\nrm x"})),
            "run_command ls…"
        );
        assert_eq!(describe_call("list_dir", &json!({})), "list_dir");
    }
}
