//! The interactive REPL: reedline line editing and history, streamed answers, tool calls shown
//! as they run, slash commands. Ctrl-C cancels the running turn and keeps the session; Ctrl-C
//! twice at an empty prompt, or Ctrl-D, exits.

use crate::render::EventPrinter;
use ahelper_agents::agent::AgentEvent;
use ahelper_agents::config::Config;
use ahelper_agents::model::Usage;
use ahelper_agents::permissions::PermissionMode;
use ahelper_agents::pricing::{Price, format_usd};
use ahelper_agents::session::Session;
use ahelper_agents::text::for_terminal;
use crossterm::style::Stylize;
use reedline::{DefaultPrompt, DefaultPromptSegment, FileBackedHistory, Reedline, Signal};
use std::io::{IsTerminal, Write};
use tokio_util::sync::CancellationToken;

/// What a slash command asks the REPL to do.
#[derive(Debug, PartialEq, Eq)]
pub enum SlashOutcome {
    /// Keep reading.
    Continue,
    /// Leave the REPL.
    Exit,
}

/// Help text of the slash commands.
pub const HELP: &str = "\
Slash commands:
  /help                 this help
  /exit, /quit          leave ahelper (also Ctrl-D, or Ctrl-C twice at an empty prompt)
  /clear                start a new conversation (new session transcript)
  /tools                list the tools the model can call
  /model [NAME]         show the model, or switch to another model of the same provider
  /permissions [MODE]   show the permission mode and rules, or set the mode
                        (default, accept-edits, plan, bypass)
  /compact [TEXT]       replace the older turns by a summary (TEXT: what it should focus on)
  /cost                 tokens and cost of this session (cost when the model's price is known)
Anything else is sent to the model. Ctrl-C while it works cancels the turn.";

/// Runs the REPL until the user exits, starting with `first_prompt` when given
/// (`ahelper "<prompt>"`).
pub fn run(
    rt: &tokio::runtime::Runtime,
    config: &Config,
    mut session: Session,
    first_prompt: Option<String>,
) -> i32 {
    let code = read_eval_loop(rt, config, &mut session, first_prompt);
    rt.block_on(session.agent.end_session("prompt_input_exit"));
    code
}

/// Reads and runs lines until the user exits; returns the exit code.
fn read_eval_loop(
    rt: &tokio::runtime::Runtime,
    config: &Config,
    session: &mut Session,
    first_prompt: Option<String>,
) -> i32 {
    let history_path = ahelper_agents::config::EnvSnapshot::capture()
        .state_dir()
        .map(|d| d.join("history.txt"));
    let mut editor = Reedline::create();
    if let Some(path) = history_path {
        let _ = std::fs::create_dir_all(path.parent().unwrap_or(&path));
        if let Ok(h) = FileBackedHistory::with_file(1_000, path) {
            editor = editor.with_history(Box::new(h));
        }
    }
    let prompt = DefaultPrompt::new(
        DefaultPromptSegment::Basic("ahelper".into()),
        DefaultPromptSegment::Empty,
    );
    let color = std::io::stdout().is_terminal();
    let mut meter = CostMeter::default();
    println!(
        "ahelper {} — {} in {}\nType /help for commands. Session {}",
        env!("CARGO_PKG_VERSION"),
        session.agent.client().describe(),
        session.agent.tool_context().workspace_root.display(),
        session.id
    );
    if let Some(prompt) = first_prompt {
        println!("> {}", for_terminal(&prompt));
        let price = config.pricing.price(session.agent.model());
        let usage = rt.block_on(run_prompt(session, &prompt, color, price));
        meter.add(usage, price);
    }
    let mut ctrl_c_once = false;
    loop {
        let line = match editor.read_line(&prompt) {
            Ok(Signal::Success(line)) => {
                ctrl_c_once = false;
                line
            }
            Ok(Signal::CtrlC) => {
                if ctrl_c_once {
                    return 0;
                }
                ctrl_c_once = true;
                println!("(Ctrl-C again to exit, or Ctrl-D)");
                continue;
            }
            Ok(Signal::CtrlD) => return 0,
            Err(e) => {
                eprintln!("ahelper: terminal error: {e}");
                return 1;
            }
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("/compact")
            && (rest.is_empty() || rest.starts_with(' '))
        {
            let price = config.pricing.price(session.agent.model());
            if let Some(usage) = rt.block_on(compact(session, rest.trim())) {
                meter.add(usage, price);
            }
            continue;
        }
        if line == "/cost" {
            println!("{}", meter.describe(session.agent.model()));
            continue;
        }
        if line.starts_with('/') {
            match slash_command(line, config, session) {
                SlashOutcome::Continue => continue,
                SlashOutcome::Exit => return 0,
            }
        }
        let price = config.pricing.price(session.agent.model());
        let usage = rt.block_on(run_prompt(session, line, color, price));
        meter.add(usage, price);
    }
}

/// Tokens and cost of the prompts of this REPL session (each priced with the model it used).
#[derive(Debug, Default)]
pub struct CostMeter {
    usage: Usage,
    cost_usd: f64,
    unpriced: Usage,
}

impl CostMeter {
    /// Counts `usage`, at `price` when known.
    pub fn add(&mut self, usage: Usage, price: Option<Price>) {
        self.usage.add(usage);
        match price {
            Some(p) => self.cost_usd += p.cost_usd(usage),
            None => self.unpriced.add(usage),
        }
    }

    /// The `/cost` text: tokens, and the cost when every token had a known price.
    pub fn describe(&self, model: &str) -> String {
        let tokens = format!(
            "{} in / {} out tokens",
            self.usage.input_tokens, self.usage.output_tokens
        );
        let unpriced = self.unpriced.input_tokens + self.unpriced.output_tokens;
        if unpriced == 0 {
            return format!("Session cost: {} ({tokens}).", format_usd(self.cost_usd));
        }
        let known = if self.cost_usd > 0.0 {
            format!("at least {}; ", format_usd(self.cost_usd))
        } else {
            String::new()
        };
        format!(
            "Session cost: {known}unknown for {unpriced} tokens ({tokens}): no price for model \
             {model}. Set one with [pricing.\"{model}\"] input_per_mtok = …, output_per_mtok = … in \
             the config."
        )
    }
}

async fn run_prompt(
    session: &mut Session,
    prompt: &str,
    color: bool,
    price: Option<Price>,
) -> Usage {
    let mut rx = session.agent.subscribe();
    let cancel = CancellationToken::new();
    let watcher = crate::spawn_ctrl_c_watcher(cancel.clone());
    let printer = tokio::spawn(async move {
        let mut printer = EventPrinter::new(color, true);
        let mut out = std::io::stdout();
        while let Some(event) = rx.recv().await {
            printer.print(&mut out, &event);
            if let AgentEvent::Finished { outcome } = &event {
                printer.newline(&mut out);
                let cost = price
                    .map(|p| format!(" · {}", format_usd(p.cost_usd(outcome.usage))))
                    .unwrap_or_default();
                let usage = format!(
                    "[{} · {} turns · {} in / {} out tokens{cost}]",
                    outcome.stop_reason.as_str(),
                    outcome.turns,
                    outcome.usage.input_tokens,
                    outcome.usage.output_tokens
                );
                let _ = writeln!(
                    out,
                    "{}",
                    if color {
                        usage.dark_grey().to_string()
                    } else {
                        usage
                    }
                );
                if let Some(e) = &outcome.error {
                    let _ = writeln!(
                        out,
                        "{}",
                        if color {
                            for_terminal(e).red().to_string()
                        } else {
                            for_terminal(e).into_owned()
                        }
                    );
                }
            }
        }
    });
    let outcome = session.agent.run(prompt, &cancel).await;
    session.agent.unsubscribe();
    watcher.abort();
    let _ = printer.await;
    outcome.usage
}

/// `/compact [instructions]`: summarises the older turns now; Ctrl-C cancels. Returns the
/// tokens of the summary request when it ran.
async fn compact(session: &mut Session, instructions: &str) -> Option<Usage> {
    let cancel = CancellationToken::new();
    let watcher = crate::spawn_ctrl_c_watcher(cancel.clone());
    let instructions = (!instructions.is_empty()).then_some(instructions);
    let result = session.agent.compact(instructions, &cancel).await;
    watcher.abort();
    match result {
        Ok(report) => {
            println!(
                "Compacted {} earlier messages into a summary of {} characters ({} in / {} out tokens).",
                report.summarised_messages,
                report.summary.chars().count(),
                report.usage.input_tokens,
                report.usage.output_tokens
            );
            Some(report.usage)
        }
        Err(e) => {
            println!("{e}");
            None
        }
    }
}

/// Says which project instructions file the system prompt includes (`AGENTS.md`, else
/// `CLAUDE.md`, at the workspace root only).
pub fn instructions_line(workspace_root: &std::path::Path) -> String {
    match ahelper_agents::agent::prompt::find_project_instructions(workspace_root) {
        Some(found) => format!(
            "Project instructions: {} loaded from the workspace root.",
            found.file_name
        ),
        None => "Project instructions: none (add AGENTS.md or CLAUDE.md at the workspace root)."
            .to_string(),
    }
}

/// Executes a slash command.
pub fn slash_command(line: &str, config: &Config, session: &mut Session) -> SlashOutcome {
    let mut words = line.split_whitespace();
    let command = words.next().unwrap_or("");
    let arg = words.next();
    match command {
        "/exit" | "/quit" => return SlashOutcome::Exit,
        "/help" => {
            println!("{HELP}");
            println!(
                "{}",
                instructions_line(&session.agent.tool_context().workspace_root)
            );
        }
        "/clear" => {
            session.agent.clear_history();
            println!(
                "Conversation cleared (the transcript {} is kept).",
                session.transcript_path.display()
            );
        }
        "/tools" => {
            for spec in session.agent.tools().specs() {
                let first = spec.description.lines().next().unwrap_or("");
                println!("  {:<12} {first}", spec.name);
            }
        }
        "/model" => match arg {
            Some(name) => {
                session.agent.set_model(name);
                println!("Model set to {name} for this session.");
            }
            None => println!(
                "Model: {} ({})",
                session.agent.model(),
                session.agent.client().describe()
            ),
        },
        "/permissions" => {
            let mut policy = session
                .agent
                .gate()
                .policy
                .write()
                .unwrap_or_else(|e| e.into_inner());
            if let Some(mode) = arg {
                match mode.parse::<PermissionMode>() {
                    Ok(m) => {
                        policy.mode = m;
                        println!("Permission mode set to {mode}.");
                    }
                    Err(e) => println!("{e}"),
                }
            } else {
                println!("Mode: {:?}", policy.mode);
                for (name, list) in [
                    ("allow", &policy.rules.allow),
                    ("ask", &policy.rules.ask),
                    ("deny", &policy.rules.deny),
                ] {
                    for rule in list.iter() {
                        println!("  {name:<5} {rule}");
                    }
                }
                println!(
                    "Rules come from {}; answers `a`/`d` are added to .ahelper/config.toml.",
                    if config.files_read.is_empty() {
                        "no config file".to_string()
                    } else {
                        config
                            .files_read
                            .iter()
                            .map(|p| p.display().to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    }
                );
            }
        }
        other => println!("Unknown command {other}. Type /help for the list."),
    }
    SlashOutcome::Continue
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_meter_never_invents_a_price() {
        let usage = Usage {
            input_tokens: 1_000_000,
            output_tokens: 100_000,
        };
        let mut meter = CostMeter::default();
        meter.add(
            usage,
            Some(Price {
                input_per_mtok: 3.0,
                output_per_mtok: 15.0,
            }),
        );
        assert_eq!(
            meter.describe("m"),
            "Session cost: $4.50 (1000000 in / 100000 out tokens)."
        );
        meter.add(usage, None);
        let text = meter.describe("local-model");
        assert!(text.contains("at least $4.50"), "{text}");
        assert!(text.contains("[pricing.\"local-model\"]"), "{text}");
    }

    #[test]
    fn help_names_the_instructions_file_loaded() {
        let ws = tempfile::tempdir().unwrap();
        assert!(instructions_line(ws.path()).contains("none"));
        std::fs::write(ws.path().join("CLAUDE.md"), "x").unwrap();
        assert!(instructions_line(ws.path()).contains("CLAUDE.md loaded"));
        std::fs::write(ws.path().join("AGENTS.md"), "x").unwrap();
        assert!(instructions_line(ws.path()).contains("AGENTS.md loaded"));
    }
}
