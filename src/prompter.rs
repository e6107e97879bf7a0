//! Permission prompts on the terminal.

use crate::typeahead::{self, TypeAhead};
use ahelper_agents::permissions::{PromptAnswer, PromptRequest, Prompter};
use ahelper_agents::text::for_terminal;
use crossterm::style::Stylize;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Lines of a diff preview shown at most; the rest is counted.
const MAX_PREVIEW_LINES: usize = 40;

/// Asks on stderr and reads the answer from stdin, one prompt at a time. Edits and writes
/// show a diff preview of the change (files read relative to `root`). Keys typed during the
/// turn before the question go to the [`TypeAhead`], never into the answer; Ctrl-C at the
/// question cancels it (answered "no" — the REPL's Ctrl-C watcher cancels the turn).
pub struct TerminalPrompter {
    lock: tokio::sync::Mutex<()>,
    root: PathBuf,
    typeahead: TypeAhead,
}

impl TerminalPrompter {
    /// A prompter for the workspace at `root`, collecting early keys into `typeahead`.
    pub fn new(root: PathBuf, typeahead: TypeAhead) -> Self {
        TerminalPrompter {
            lock: tokio::sync::Mutex::new(()),
            root,
            typeahead,
        }
    }
}

/// Parses an answer: `y`/`yes`, `n`/`no`, `a`/`always`, `d`/`never`/`deny`.
pub fn parse_answer(line: &str) -> Option<PromptAnswer> {
    match line.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => Some(PromptAnswer::AllowOnce),
        "n" | "no" => Some(PromptAnswer::Deny),
        "a" | "always" => Some(PromptAnswer::AllowAlways),
        "d" | "never" | "deny" => Some(PromptAnswer::DenyAlways),
        _ => None,
    }
}

/// The text of a permission question.
pub fn format_prompt(request: &PromptRequest, always_target: &str) -> String {
    let who = request
        .requester
        .as_deref()
        .map(|r| format!("[{r}] "))
        .unwrap_or_default();
    let what = match &request.subject {
        Some(s) => format!("{} {}", request.tool, s),
        None => format!("{} {}", request.tool, request.input),
    };
    format!(
        "{who}Allow {what}?\n  ({})\n  y = yes once · n = no · a = always ({} → {always_target}) · d = never: ",
        request.reason, request.suggested_rule
    )
}

/// A unified diff (the `similar` crate) of what an `edit_file` or `write_file` call would do
/// to the file under `root` (the call's working directory): the whole file before and after,
/// so hunk headers name the real lines and context is the file's own; at most
/// [`MAX_PREVIEW_LINES`] lines. `None` for other tools, unreadable input, or an edit whose
/// `old_string` is not in the file (the call will fail and change nothing).
pub fn diff_preview(request: &PromptRequest, root: &Path) -> Option<String> {
    let input = &request.input;
    let path = input.get("path")?.as_str()?;
    let current = || std::fs::read_to_string(root.join(path));
    let (old, new) = match request.tool.as_str() {
        "write_file" => (
            current().unwrap_or_default(),
            input.get("content")?.as_str()?.to_string(),
        ),
        "edit_file" => {
            let text = current().ok()?;
            let from = input.get("old_string")?.as_str()?;
            let to = input.get("new_string")?.as_str()?;
            if from.is_empty() || !text.contains(from) {
                return None;
            }
            let all = input.get("replace_all").and_then(|v| v.as_bool()) == Some(true);
            let edited = if all {
                text.replace(from, to)
            } else {
                text.replacen(from, to, 1)
            };
            (text, edited)
        }
        _ => return None,
    };
    let diff = similar::TextDiff::from_lines(&old, &new);
    let text = diff
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{path}"), &format!("b/{path}"))
        .to_string();
    let lines: Vec<&str> = text.lines().collect();
    let mut preview: Vec<String> = lines
        .iter()
        .take(MAX_PREVIEW_LINES)
        .map(|l| format!("  {l}"))
        .collect();
    if lines.len() > MAX_PREVIEW_LINES {
        preview.push(format!(
            "  … {} more lines",
            lines.len() - MAX_PREVIEW_LINES
        ));
    }
    Some(preview.join("\n"))
}

/// Reads one key (byte) from stdin, giving up when `stop` is set (checked every 100 ms).
/// `None`: stopped; `Some(None)`: end of input.
fn read_key_until(stop: &AtomicBool) -> Option<Option<u8>> {
    loop {
        if stop.load(Ordering::SeqCst) {
            return None;
        }
        if !typeahead::stdin_readable(100) {
            continue;
        }
        let mut byte = [0u8; 1];
        // SAFETY: reads one byte into a local buffer.
        let n = unsafe { libc::read(0, byte.as_mut_ptr().cast(), 1) };
        return Some((n > 0).then_some(byte[0]));
    }
}

/// Drops the bytes already waiting on stdin (the rest of an escape sequence or of a word).
fn drain_pending_keys() {
    while typeahead::stdin_readable(0) {
        let mut byte = [0u8; 1];
        // SAFETY: reads one byte into a local buffer.
        if unsafe { libc::read(0, byte.as_mut_ptr().cast(), 1) } <= 0 {
            break;
        }
    }
}

/// The question on the terminal, answered by one key as in Claude Code and Codex: `y`, `n`,
/// `a` or `d` without Enter (Enter alone or the end of input is "no"). What was typed before
/// the question goes to the type-ahead; up to five tries for a valid key.
fn ask_on_terminal(text: String, typeahead: TypeAhead, stop: Arc<AtomicBool>) -> PromptAnswer {
    typeahead.collect_pending();
    let saved = typeahead::quiet_terminal();
    let mut answer = PromptAnswer::Deny;
    for _ in 0..5 {
        eprint!("\n{}", text.clone().yellow());
        let _ = std::io::stderr().flush();
        let Some(key) = read_key_until(&stop) else {
            break;
        };
        let Some(key) = key.filter(|k| !matches!(k, b'\n' | b'\r')) else {
            eprintln!();
            break;
        };
        if let Some(a) = parse_answer(&char::from(key).to_string()) {
            eprintln!("{}", char::from(key));
            answer = a;
            break;
        }
        drain_pending_keys();
        eprintln!("\nPlease press y, n, a or d (Ctrl-C cancels the turn).");
    }
    if let Some(saved) = saved {
        typeahead::set_terminal(&saved);
    }
    answer
}

#[async_trait::async_trait]
impl Prompter for TerminalPrompter {
    async fn ask(&self, request: &PromptRequest) -> PromptAnswer {
        let _guard = self.lock.lock().await;
        let mut text = format_prompt(request, ".ahelper/config.toml");
        if let Some(diff) = diff_preview(request, &self.root) {
            text = format!("{diff}\n{text}");
        }
        let text = for_terminal(&text).into_owned();
        let stop = Arc::new(AtomicBool::new(false));
        let (typeahead, reader_stop) = (self.typeahead.clone(), stop.clone());
        let mut reader =
            tokio::task::spawn_blocking(move || ask_on_terminal(text, typeahead, reader_stop));
        tokio::select! {
            answer = &mut reader => answer.unwrap_or(PromptAnswer::Deny),
            _ = tokio::signal::ctrl_c() => {
                stop.store(true, Ordering::SeqCst);
                // Wait for the reader to give the terminal back.
                let _ = reader.await;
                eprintln!("\n(permission prompt cancelled)");
                PromptAnswer::Deny
            }
        }
    }

    fn is_interactive(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers() {
        assert_eq!(parse_answer("Y\n"), Some(PromptAnswer::AllowOnce));
        assert_eq!(parse_answer("a"), Some(PromptAnswer::AllowAlways));
        assert_eq!(parse_answer("d"), Some(PromptAnswer::DenyAlways));
        assert_eq!(parse_answer("no"), Some(PromptAnswer::Deny));
        assert_eq!(parse_answer("maybe"), None);
    }

    fn request(tool: &str, input: serde_json::Value) -> PromptRequest {
        PromptRequest {
            requester: None,
            tool: tool.into(),
            subject: None,
            input,
            reason: String::new(),
            suggested_rule: String::new(),
        }
    }

    #[test]
    fn edit_and_write_questions_preview_the_change() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "one\ntwo\n").unwrap();
        let edit = request(
            "edit_file",
            serde_json::json!({"path": "a.txt", "old_string": "two\n", "new_string": "2\n"}),
        );
        let preview = diff_preview(&edit, dir.path()).unwrap();
        assert!(
            preview.contains("-two") && preview.contains("+2"),
            "{preview}"
        );
        let write = request(
            "write_file",
            serde_json::json!({"path": "a.txt", "content": "one\nthree\n"}),
        );
        let preview = diff_preview(&write, dir.path()).unwrap();
        assert!(
            preview.contains(" one") && preview.contains("+three"),
            "{preview}"
        );
        let long = "x\n".repeat(100);
        let new_file = request(
            "write_file",
            serde_json::json!({"path": "new.txt", "content": long}),
        );
        let preview = diff_preview(&new_file, dir.path()).unwrap();
        assert!(preview.contains("more lines"), "{preview}");
        assert!(diff_preview(&request("run_command", serde_json::json!({})), dir.path()).is_none());
    }
}
