//! The interactive REPL: reedline line editing and history, streamed answers, tool calls shown
//! as they run, slash commands. Ctrl-C cancels the running turn and keeps the session; Ctrl-C
//! twice at an empty prompt, or Ctrl-D, exits.

use crate::render::EventPrinter;
use crate::typeahead::{self, TypeAhead};
use ahelper_agents::agent::AgentEvent;
use ahelper_agents::config::Config;
use ahelper_agents::model::{ContentBlock, Message, Role, Usage};
use ahelper_agents::permissions::{PermissionMode, Prompter};
use ahelper_agents::pricing::{Price, format_usd};
use ahelper_agents::session::{Session, SessionError, SessionOptions};
use ahelper_agents::swarm::state::RunRecord;
use ahelper_agents::text::for_terminal;
use crossterm::style::Stylize;
use reedline::{
    DefaultPrompt, DefaultPromptSegment, EditCommand, FileBackedHistory, Reedline, Signal,
};
use std::collections::BTreeSet;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio_util::sync::CancellationToken;

/// What the REPL needs besides the first session: how to start another one (`/clear`,
/// `/resume`) and where keys typed during a turn are kept.
pub struct ReplSetup {
    /// The permission prompter of every session of this REPL.
    pub prompter: Arc<dyn Prompter>,
    /// `--append-system-prompt`, for every session of this REPL.
    pub append_system_prompt: Option<String>,
    /// Keys typed during a turn (shared with the prompter).
    pub typeahead: TypeAhead,
    /// Whether the first session was resumed (`--continue`, `--resume`): its last exchange is
    /// shown.
    pub resumed: bool,
}

/// The REPL's state: the current session and what it needs to replace it.
struct Repl<'a> {
    config: &'a Config,
    setup: ReplSetup,
    session: Session,
    /// Paths passed to `write_file`/`edit_file` in this session, for `/diff`.
    written: BTreeSet<String>,
    /// Tokens and cost of the prompts of this REPL.
    meter: CostMeter,
    /// Set while a `/swarm` runs: its own handlers answer `SIGTERM` and `SIGHUP` then.
    swarm_running: Arc<AtomicBool>,
    /// Whether [`restore_stop_signals`] runs (after the first `/swarm`).
    stop_signals_restored: bool,
}

/// Sessions `/resume` lists.
const RECENT_SESSIONS: usize = 10;

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
  /clear                start a new session (new transcript; the old one stays resumable)
  /resume [N|ID]        list recent sessions, or switch to one by number or id prefix
  /status               model, provider, permission mode, workspace, session, tokens
  /diff                 this session's changes: files written, and `git diff` of the workspace
  /tools                list the tools the model can call
  /mcp                  list the MCP servers, their status and tools
  /model [NAME]         show the model, or switch to another model of the same provider
  /permissions [MODE]   show the permission mode and rules, or set the mode
                        (default, accept-edits, plan, bypass)
  /compact [TEXT]       replace the older turns by a summary (TEXT: what it should focus on)
  /cost                 tokens and cost of this session (cost when the model's price is known)
  /swarm TASK           run a swarm on TASK (as `ahelper swarm`: plan, confirm, live table);
                        its outcome is added to this conversation
  /runs                 list the swarm runs of this repository (as `ahelper swarm ls`)
Anything else is sent to the model. Ctrl-C while it works (or at a permission question)
cancels the turn; what you type while it works is kept for the next prompt.";

/// Runs the REPL until the user exits, starting with `first_prompt` when given
/// (`ahelper "<prompt>"`).
pub fn run(
    rt: &tokio::runtime::Runtime,
    config: &Config,
    session: Session,
    first_prompt: Option<String>,
    setup: ReplSetup,
) -> i32 {
    let mut editor = line_editor();
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
    if setup.resumed {
        show_last_exchange(session.agent.history());
    }
    let mut repl = Repl {
        config,
        setup,
        session,
        written: BTreeSet::new(),
        meter: CostMeter::default(),
        swarm_running: Arc::new(AtomicBool::new(false)),
        stop_signals_restored: false,
    };
    let code = read_eval_loop(rt, &mut repl, first_prompt, color, &mut editor, &prompt);
    rt.block_on(repl.session.agent.end_session("prompt_input_exit"));
    code
}

/// Exit status when the terminal hung up at the prompt: 128 + `SIGHUP`, as the signal's
/// default action reports it.
const EXIT_HANGUP: i32 = 129;

/// Starts a thread that ends the process when standard input, the REPL's terminal, hangs up
/// (its window closed) while the REPL waits at its prompt: the line editor (reedline on
/// crossterm) would read end-of-file from it forever, spinning a core, once a turn has
/// installed ahelper's `SIGHUP` handler. A turn running at that moment is left to that
/// handler ([`crate::interrupts`]), which cancels it; the prompt that follows ends the REPL.
/// Returns the flag the loop sets while it waits at the prompt.
fn watch_for_hangup() -> Arc<AtomicBool> {
    let at_prompt = Arc::new(AtomicBool::new(false));
    let flag = at_prompt.clone();
    let _ = std::thread::Builder::new()
        .name("hangup-watch".into())
        .spawn(move || {
            while !terminal_hung_up(1_000) {}
            while !flag.load(Ordering::SeqCst) {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            std::process::exit(EXIT_HANGUP);
        });
    at_prompt
}

/// Gives `SIGTERM` and `SIGHUP` back their default action (end the process) outside `/swarm`.
/// A swarm's live view installs ahelper's handlers for them, and tokio never removes a handler,
/// so after the first `/swarm` they would be swallowed at the prompt and during ordinary turns.
/// This task listens for both: while `swarm_running` is set the swarm's own handler answers;
/// otherwise the terminal leaves raw mode and the signal's default action is restored and the
/// signal raised again, so the process ends as it would have before the `/swarm` (status
/// 128 + the signal; the commands' watchdog ends their processes).
async fn restore_stop_signals(swarm_running: Arc<AtomicBool>) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) else {
        return;
    };
    loop {
        let signo = tokio::select! {
            _ = term.recv() => libc::SIGTERM,
            _ = hup.recv() => libc::SIGHUP,
        };
        if swarm_running.load(Ordering::SeqCst) {
            continue;
        }
        let _ = crossterm::terminal::disable_raw_mode();
        // SAFETY: resetting a disposition to SIG_DFL and raising the signal in this process.
        unsafe {
            libc::signal(signo, libc::SIG_DFL);
            libc::raise(signo);
        }
    }
}

/// Whether standard input, a terminal, hung up within `wait_ms` milliseconds (`poll(2)` with
/// no events asked reports only `POLLHUP`/`POLLERR`/`POLLNVAL`, so keys waiting to be read do
/// not wake it). Never true when standard input is not a terminal.
fn terminal_hung_up(wait_ms: i32) -> bool {
    // SAFETY: isatty only inspects the descriptor.
    if unsafe { libc::isatty(libc::STDIN_FILENO) } != 1 {
        std::thread::sleep(std::time::Duration::from_millis(wait_ms as u64));
        return false;
    }
    let mut fd = libc::pollfd {
        fd: libc::STDIN_FILENO,
        events: 0,
        revents: 0,
    };
    // SAFETY: one valid `pollfd` for the duration of the call.
    let n = unsafe { libc::poll(&mut fd, 1, wait_ms) };
    n > 0 && fd.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0
}

/// Runs `first_prompt`, then reads and runs lines until the user exits; returns the exit code.
fn read_eval_loop(
    rt: &tokio::runtime::Runtime,
    repl: &mut Repl<'_>,
    first_prompt: Option<String>,
    color: bool,
    editor: &mut Reedline,
    prompt: &DefaultPrompt,
) -> i32 {
    if let Some(prompt) = first_prompt {
        println!("> {}", for_terminal(&prompt));
        rt.block_on(repl.run_prompt(&prompt, color));
    }
    let mut ctrl_c_once = false;
    let at_prompt = watch_for_hangup();
    loop {
        let typed = repl.setup.typeahead.take_text();
        if !typed.is_empty() {
            editor.run_edit_commands(&[EditCommand::InsertString(typed)]);
        }
        at_prompt.store(true, Ordering::SeqCst);
        let read = editor.read_line(prompt);
        at_prompt.store(false, Ordering::SeqCst);
        let line = match read {
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
            let price = repl.price();
            if let Some(usage) = rt.block_on(compact(&mut repl.session, rest.trim())) {
                repl.meter.add(usage, price);
            }
            continue;
        }
        if line == "/cost" {
            println!("{}", repl.meter.describe(repl.session.agent.model()));
            continue;
        }
        if let Some(rest) = line.strip_prefix("/swarm")
            && (rest.is_empty() || rest.starts_with(' '))
        {
            rt.block_on(repl.swarm(rest.trim()));
            continue;
        }
        if line == "/runs" {
            crate::swarm_cmd::ls(repl.config, false);
            continue;
        }
        if line.starts_with('/') {
            match repl.command(line) {
                SlashOutcome::Continue => continue,
                SlashOutcome::Exit => return 0,
            }
        }
        rt.block_on(repl.run_prompt(line, color));
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

/// What the model is told about a `/swarm` run: the task, the run, how it ended and the run's
/// final summary (workers, merges, the integration branch).
fn swarm_context(task: &str, record: &RunRecord, code: i32) -> String {
    format!(
        "[The user ran `/swarm {task}` from this session: run {} ({}, exit status {code}), \
         integration branch {}.\n{}]",
        record.run_id,
        record.state_label(),
        record.integration_branch,
        ahelper_agents::swarm::final_summary(record).trim_end()
    )
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

/// Reedline with the file-backed history in the state directory.
fn line_editor() -> Reedline {
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
    editor
}

impl Repl<'_> {
    /// One prompt: the terminal is quiet while the turn runs (keys typed meanwhile are kept
    /// for the next prompt), events are printed as they come, Ctrl-C cancels.
    async fn run_prompt(&mut self, prompt: &str, color: bool) {
        let rx = self.session.agent.subscribe();
        let cancel = CancellationToken::new();
        let saved = typeahead::quiet_terminal();
        let watcher = spawn_turn_watcher(cancel.clone(), saved);
        let restore = typeahead::TerminalRestore(saved);
        let price = self.price();
        let printer = tokio::spawn(print_events(rx, color, price));
        let outcome = self.session.agent.run(prompt, &cancel).await;
        self.meter.add(outcome.usage, price);
        self.session.agent.unsubscribe();
        watcher.abort();
        if let Ok(written) = printer.await {
            self.written.extend(written);
        }
        self.setup.typeahead.collect_pending();
        drop(restore);
    }

    /// The session's permission policy as it is now (with the rules `a` answers added).
    fn policy(&self) -> ahelper_agents::permissions::PermissionPolicy {
        self.session
            .agent
            .gate()
            .policy
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// `/swarm <task>`: a swarm run as `ahelper swarm` makes it (plan, confirmation, live table,
    /// the session's permission policy and MCP servers), then its outcome goes into the next
    /// prompt of the conversation.
    async fn swarm(&mut self, task: &str) {
        if task.is_empty() {
            println!("Give the task: /swarm <task>");
            return;
        }
        let root = &self.config.workspace_root;
        let newest = |root: &std::path::Path| RunRecord::list(root).pop().map(|r| r.run_id);
        let before = newest(root);
        let mut config = self.config.clone();
        config.permissions = self.policy();
        // The model chosen with `/model` plans and works the run, as it answers the prompts.
        config.set_model(self.session.agent.model());
        let run_args = crate::cli::SwarmRunArgs::default();
        let servers = self.session.mcp.specs();
        self.swarm_running.store(true, Ordering::SeqCst);
        let code = crate::swarm_cmd::start(&config, task, &run_args, &servers, None).await;
        self.swarm_running.store(false, Ordering::SeqCst);
        if !self.stop_signals_restored {
            self.stop_signals_restored = true;
            tokio::spawn(restore_stop_signals(self.swarm_running.clone()));
        }
        let record = RunRecord::list(root)
            .pop()
            .filter(|r| Some(&r.run_id) != before.as_ref());
        let Some(record) = record else {
            println!("(No swarm run was started; nothing was added to the conversation.)");
            return;
        };
        self.session
            .agent
            .add_context(swarm_context(task, &record, code));
        println!(
            "(The outcome of run {} goes to the model with your next prompt.)",
            record.run_id
        );
    }

    /// The price of the session's current model, when known.
    fn price(&self) -> Option<Price> {
        self.config.pricing.price(self.session.agent.model())
    }

    /// The REPL's own commands (`/clear`, `/resume`, `/status`, `/diff`), then the others.
    fn command(&mut self, line: &str) -> SlashOutcome {
        let mut words = line.split_whitespace();
        let command = words.next().unwrap_or("");
        let arg = words.next();
        match command {
            "/clear" => self.clear(),
            "/resume" => self.resume(arg),
            "/status" => self.status(),
            "/diff" => self.diff(),
            _ => return slash_command(line, self.config, &mut self.session),
        }
        SlashOutcome::Continue
    }

    /// A new session with the same model and permission policy.
    fn start_session(&mut self, resume: Option<String>) -> Result<(), SessionError> {
        let mut next = Session::start(
            self.config,
            SessionOptions {
                prompter: self.setup.prompter.clone(),
                resume,
                continue_latest: false,
                client_override: None,
                append_system_prompt: self.setup.append_system_prompt.clone(),
                mcp: self.session.mcp.clone(),
            },
        )?;
        next.agent.set_model(self.session.agent.model().to_string());
        let policy = self.policy();
        *next
            .agent
            .gate()
            .policy
            .write()
            .unwrap_or_else(|e| e.into_inner()) = policy;
        self.session = next;
        self.written.clear();
        // `/cost` is the session's, like `/status`: a new session starts at zero
        self.meter = CostMeter::default();
        Ok(())
    }

    /// `/clear`: a new session and transcript; the old one can be resumed.
    fn clear(&mut self) {
        let old = self.session.id.clone();
        match self.start_session(None) {
            Ok(()) => println!(
                "New session {} (transcript {}). The previous session {old} is kept: /resume {}",
                self.session.id,
                self.session.transcript_path.display(),
                &old[..old.len().min(13)]
            ),
            Err(e) => println!("ahelper: could not start a new session: {e}"),
        }
    }

    /// `/resume`: lists recent sessions; `/resume N` or `/resume ID-PREFIX` switches to one.
    fn resume(&mut self, arg: Option<&str>) {
        let root = self.session.agent.tool_context().workspace_root.clone();
        let mut sessions = ahelper_agents::transcript::list_sessions(&root);
        sessions.reverse();
        sessions.truncate(RECENT_SESSIONS);
        let Some(choice) = arg else {
            list_sessions(&sessions, &self.session.id);
            return;
        };
        let id = match choice.parse::<usize>() {
            Ok(n) if (1..=sessions.len()).contains(&n) => session_id(&sessions[n - 1]),
            Ok(_) if choice.len() < 4 => {
                println!("No session number {choice}; /resume lists them.");
                return;
            }
            _ => choice.to_string(),
        };
        match self.start_session(Some(id)) {
            Ok(()) => {
                println!("Resumed session {}.", self.session.id);
                show_last_exchange(self.session.agent.history());
            }
            Err(e) => println!("{e}"),
        }
    }

    /// `/status`.
    fn status(&self) {
        let agent = &self.session.agent;
        let mode = agent
            .gate()
            .policy
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .mode;
        let usage = agent.total_usage();
        println!("Model:      {}", agent.model());
        println!("Provider:   {}", provider_name(&agent.client().describe()));
        println!("Mode:       {mode}");
        println!(
            "Workspace:  {}",
            agent.tool_context().workspace_root.display()
        );
        for dir in &agent.tool_context().added_dirs {
            println!("Added dir:  {} (--add-dir)", dir.display());
        }
        println!(
            "Session:    {} ({})",
            self.session.id,
            self.session.transcript_path.display()
        );
        println!(
            "Tokens:     {} in / {} out",
            usage.input_tokens, usage.output_tokens
        );
    }

    /// `/diff`: the files written in this session, then `git diff` of the workspace against
    /// `HEAD` and its untracked files.
    fn diff(&self) {
        let root = self.session.agent.tool_context().workspace_root.clone();
        if self.written.is_empty() {
            println!("No file written in this session.");
        } else {
            println!("Files written in this session:");
            for path in &self.written {
                println!("  {}", for_terminal(path));
            }
        }
        if ahelper_worktrees::RepoInfo::discover(&root).is_err() {
            println!(
                "({} is not a git repository: no diff to show.)",
                root.display()
            );
            return;
        }
        let status = git_output(&root, &["status", "--short", "--untracked-files=all"]);
        let diff = git_output(&root, &["diff", "HEAD"])
            .filter(|d| !d.is_empty())
            .or_else(|| git_output(&root, &["diff"]));
        match (status, diff) {
            (Some(status), _) if status.trim().is_empty() => {
                println!("The workspace has no changes (git status is clean).")
            }
            (Some(status), diff) => {
                println!("git status:\n{}", for_terminal(status.trim_end()));
                if let Some(diff) = diff.filter(|d| !d.is_empty()) {
                    println!("{}", for_terminal(diff.trim_end()));
                }
            }
            (None, _) => println!("git could not be run in {}.", root.display()),
        }
    }
}

/// Ctrl-C during a turn: the first cancels it, the second gives the terminal its settings
/// back (`saved`, from before the turn made it quiet) and exits with 130.
fn spawn_turn_watcher(
    cancel: CancellationToken,
    saved: Option<libc::termios>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            cancel.cancel();
            eprintln!("\n(cancelling… press Ctrl-C again to quit)");
            if tokio::signal::ctrl_c().await.is_ok() {
                if let Some(saved) = saved {
                    typeahead::set_terminal(&saved);
                }
                std::process::exit(130);
            }
        }
    })
}

/// Prints the agent's events until the turn ends; returns the paths it wrote to.
async fn print_events(
    mut rx: tokio::sync::mpsc::UnboundedReceiver<AgentEvent>,
    color: bool,
    price: Option<Price>,
) -> BTreeSet<String> {
    let mut written = BTreeSet::new();
    let mut printer = EventPrinter::new(color, true);
    let mut out = std::io::stdout();
    while let Some(event) = rx.recv().await {
        printer.print(&mut out, &event);
        match &event {
            AgentEvent::ToolCallStarted { name, input, .. }
                if name == "write_file" || name == "edit_file" =>
            {
                if let Some(path) = input.get("path").and_then(|p| p.as_str()) {
                    written.insert(path.to_string());
                }
            }
            AgentEvent::Finished { outcome } => {
                printer.newline(&mut out);
                print_outcome(&mut out, outcome, color, price);
            }
            _ => {}
        }
    }
    written
}

/// The line after an answer: stop reason, turns, tokens, and the error if any.
fn print_outcome(
    out: &mut impl Write,
    outcome: &ahelper_agents::agent::AgentOutcome,
    color: bool,
    price: Option<Price>,
) {
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

/// `git <args>` in `root`; its stdout, or `None` when it could not run or failed.
fn git_output(root: &std::path::Path, args: &[&str]) -> Option<String> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(root)
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The id of a session transcript: its file stem.
fn session_id(path: &std::path::Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// `/resume` without an argument: numbered recent sessions, newest first, with their first
/// prompt.
fn list_sessions(sessions: &[PathBuf], current: &str) {
    if sessions.is_empty() {
        println!("No sessions in .ahelper/sessions/ yet.");
        return;
    }
    println!("Recent sessions (newest first); /resume N or /resume ID-PREFIX:");
    for (i, path) in sessions.iter().enumerate() {
        let id = session_id(path);
        let first = ahelper_agents::transcript::read_transcript(path)
            .map(|lines| ahelper_agents::transcript::history_from_transcript(&lines))
            .ok()
            .and_then(|history| history.iter().find_map(user_text))
            .unwrap_or_default();
        let marker = if id == current { " (current)" } else { "" };
        println!(
            "  {:>2}. {id}{marker}  {}",
            i + 1,
            for_terminal(&one_line(&first, 60))
        );
    }
}

/// The text the user typed in `message` (not a tool result), if any.
fn user_text(message: &Message) -> Option<String> {
    text_of(message, Role::User, |_| true)
}

/// The model's text in `message`, if any.
fn assistant_text(message: &Message) -> Option<String> {
    text_of(message, Role::Assistant, |text| !text.trim().is_empty())
}

/// The text blocks of `message` that `keep` accepts, one per line, when `message` is from
/// `role` and has any.
fn text_of(message: &Message, role: Role, keep: impl Fn(&str) -> bool) -> Option<String> {
    if message.role != role {
        return None;
    }
    let text: Vec<&str> = message
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text } if keep(text) => Some(text.as_str()),
            _ => None,
        })
        .collect();
    (!text.is_empty()).then(|| text.join("\n"))
}

/// `text` on one line, cut to `max` characters.
fn one_line(text: &str, max: usize) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > max {
        let kept: String = flat.chars().take(max.saturating_sub(1)).collect();
        format!("{kept}…")
    } else {
        flat
    }
}

/// The first sentence of `text`: up to the first `. ` that does not end an abbreviation such as
/// `e.g.` or `i.e.`.
fn first_sentence(text: &str) -> &str {
    let mut from = 0;
    while let Some(i) = text[from..].find(". ").map(|i| from + i) {
        let word = text[..i].rsplit([' ', '(']).next().unwrap_or("");
        if !matches!(word, "e.g" | "i.e" | "etc" | "vs") {
            return &text[..i];
        }
        from = i + 2;
    }
    text
}

/// For a resumed session: the last prompt and the model's last answer to it.
fn show_last_exchange(history: &[Message]) {
    let Some(last_user) = history.iter().rposition(|m| user_text(m).is_some()) else {
        return;
    };
    let prompt = user_text(&history[last_user]).unwrap_or_default();
    let answer = history[last_user..]
        .iter()
        .rev()
        .find_map(assistant_text)
        .unwrap_or_else(|| "(no answer)".into());
    println!("Last exchange:\n> {}", for_terminal(&prompt));
    println!("{}", for_terminal(&answer));
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
        "/tools" => {
            // one line per tool, fitted to the terminal (15 columns go to the name)
            let width = crossterm::terminal::size().map_or(100, |(w, _)| usize::from(w));
            let room = width.saturating_sub(16).clamp(20, 90);
            for spec in session.agent.tools().specs() {
                let first = first_sentence(&spec.description);
                println!("  {:<12} {}", spec.name, one_line(first, room));
            }
        }
        "/model" => match arg {
            Some(name) => {
                session.agent.set_model(name);
                println!("Model set to {name} for this session.");
            }
            None => println!(
                "Model: {} (provider {})",
                session.agent.model(),
                provider_name(&session.agent.client().describe())
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
                println!("Mode: {}", policy.mode);
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

/// The provider of a client's description (`anthropic claude-sonnet-4-5` → `anthropic`): the
/// model in the description is the configured one, which `/model` may have changed since.
fn provider_name(description: &str) -> &str {
    description.split_whitespace().next().unwrap_or(description)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_sentence_skips_abbreviations() {
        for (text, first) in [
            (
                "Find files by name pattern (e.g. `**/*.rs`). Sorted.",
                "Find files by name pattern (e.g. `**/*.rs`)",
            ),
            ("One. Two.", "One"),
            ("No stop", "No stop"),
        ] {
            assert_eq!(first_sentence(text), first, "{text:?}");
        }
        assert_eq!(one_line("abcdef", 4), "abc…");
    }

    #[test]
    fn cost_meter_never_invents_a_price() {
        let usage = Usage {
            input_tokens: 1_000_000,
            output_tokens: 100_000,
            ..Default::default()
        };
        let mut meter = CostMeter::default();
        meter.add(
            usage,
            Some(Price {
                input_per_mtok: 3.0,
                output_per_mtok: 15.0,
                cache_read_per_mtok: None,
                cache_write_per_mtok: None,
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
