//! Permission prompts on the terminal.

use ahelper_agents::permissions::{PromptAnswer, PromptRequest, Prompter};
use ahelper_agents::text::for_terminal;
use crossterm::style::Stylize;
use std::io::{BufRead, Write};

/// Asks on stderr and reads the answer from stdin, one prompt at a time.
#[derive(Default)]
pub struct TerminalPrompter {
    lock: tokio::sync::Mutex<()>,
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

#[async_trait::async_trait]
impl Prompter for TerminalPrompter {
    async fn ask(&self, request: &PromptRequest) -> PromptAnswer {
        let _guard = self.lock.lock().await;
        let text = for_terminal(&format_prompt(request, ".ahelper/config.toml")).into_owned();
        tokio::task::spawn_blocking(move || {
            // Keys typed while the model was working must not answer this question.
            // SAFETY: tcflush on fd 0 only discards pending terminal input.
            unsafe {
                libc::tcflush(0, libc::TCIFLUSH);
            }
            let stdin = std::io::stdin();
            for _ in 0..5 {
                eprint!("\n{}", text.clone().yellow());
                let _ = std::io::stderr().flush();
                let mut line = String::new();
                match stdin.lock().read_line(&mut line) {
                    Ok(0) | Err(_) => return PromptAnswer::Deny,
                    Ok(_) => {}
                }
                if let Some(a) = parse_answer(&line) {
                    return a;
                }
                eprintln!("Please answer y, n, a or d.");
            }
            PromptAnswer::Deny
        })
        .await
        .unwrap_or(PromptAnswer::Deny)
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
}
