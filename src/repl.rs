//! The interactive REPL: reedline line editing and history, streamed answers, tool calls shown
//! as they run, slash commands. Ctrl-C cancels the running turn and keeps the session; Ctrl-C
//! twice at an empty prompt, or Ctrl-D, exits.

use crate::render::EventPrinter;
use ahelper_agents::agent::AgentEvent;
use ahelper_agents::config::Config;
use ahelper_agents::permissions::PermissionMode;
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
  /mcp                  list the MCP servers, their status and tools
  /model [NAME]         show the model, or switch to another model of the same provider
  /permissions [MODE]   show the permission mode and rules, or set the mode
                        (default, accept-edits, plan, bypass)
Anything else is sent to the model. Ctrl-C while it works cancels the turn.";

/// Runs the REPL until the user exits, starting with `first_prompt` when given
/// (`ahelper "<prompt>"`).
pub fn run(
    rt: &tokio::runtime::Runtime,
    config: &Config,
    mut session: Session,
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
    println!(
        "ahelper {} — {} in {}\nType /help for commands. Session {}",
        env!("CARGO_PKG_VERSION"),
        session.agent.client().describe(),
        session.agent.tool_context().workspace_root.display(),
        session.id
    );
    if let Some(prompt) = first_prompt {
        println!("> {}", for_terminal(&prompt));
        rt.block_on(run_prompt(&mut session, &prompt, color));
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
        if line.starts_with('/') {
            match slash_command(line, config, &mut session) {
                SlashOutcome::Continue => continue,
                SlashOutcome::Exit => return 0,
            }
        }
        rt.block_on(run_prompt(&mut session, line, color));
    }
}

async fn run_prompt(session: &mut Session, prompt: &str, color: bool) {
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
                let usage = format!(
                    "[{} · {} turns · {} in / {} out tokens]",
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
    session.agent.run(prompt, &cancel).await;
    session.agent.unsubscribe();
    watcher.abort();
    let _ = printer.await;
}

/// Executes a slash command.
pub fn slash_command(line: &str, config: &Config, session: &mut Session) -> SlashOutcome {
    let mut words = line.split_whitespace();
    let command = words.next().unwrap_or("");
    let arg = words.next();
    match command {
        "/exit" | "/quit" => return SlashOutcome::Exit,
        "/help" => println!("{HELP}"),
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
        "/mcp" => print!("{}", crate::mcp_setup::describe_servers(&session.mcp)),
        other => println!("Unknown command {other}. Type /help for the list."),
    }
    SlashOutcome::Continue
}
