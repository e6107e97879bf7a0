//! The `ahelper` binary: CLI, REPL, one-shot mode, swarm commands and their terminal output.
//! The agent logic lives in `ahelper-agents`; this crate only wires it to the terminal.

/// `println!` for the whole binary (it shadows `std::println!` in every module below): writes to
/// stdout and, when that fails — stdout closed by `| head`, a full disk — stops printing instead
/// of panicking as `std::println!` does. The work goes on; transcripts and run records are
/// written elsewhere.
macro_rules! println {
    () => {
        $crate::write_stdout(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::write_stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` without the panic of `std::print!`; see [`println!`].
macro_rules! print {
    ($($arg:tt)*) => {
        $crate::write_stdout(format_args!($($arg)*))
    };
}

mod cli;
mod interrupts;
mod mcp_setup;
mod oneshot;
mod prompter;
mod refusals;
mod render;
mod repl;
mod status_table;
mod swarm_cmd;
mod swarm_ui;
mod teardown;
mod trust_cmd;
mod typeahead;
mod worker_cmd;

use ahelper_agents::config::{CliOverrides, Config, ConfigError, EnvSnapshot};
use ahelper_agents::hardening::{self, HardeningReport};
use ahelper_agents::permissions::{DenyPrompter, Prompter};
use ahelper_agents::redact::{RedactingWriter, Redactor};
use ahelper_agents::session::{Session, SessionError, SessionOptions};
use clap::Parser;
use cli::{Cli, CommonArgs};
use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Exit code for usage and configuration errors (clap uses 2 for bad flags too).
const EXIT_USAGE: i32 = 2;

/// Exit code of a command (`-p`, `swarm`) that did its work but whose output could not be
/// written to stdout (`EX_IOERR` of sysexits.h), e.g. stdout is a file on a full disk. A
/// closed stdout (`| head`) is not such a failure ([`write_stdout`]).
const EXIT_OUTPUT_LOST: i32 = 74;

fn main() {
    // First, while this is the only thread: non-dumpable, no core files, no LD_*, dangerous
    // capabilities dropped (docs: `ahelper_agents::hardening`).
    // SAFETY: no other thread exists yet; the call checks it.
    let hardening = match unsafe { hardening::harden_process() } {
        Ok(report) => report,
        Err(e) => {
            eprintln!("ahelper: {e}");
            std::process::exit(1);
        }
    };
    let cli = Cli::parse_from(cli::gather_rule_values(std::env::args_os()));
    start_orphan_watchdog();
    std::process::exit(run(cli, hardening));
}

fn run(cli: Cli, hardening: HardeningReport) -> i32 {
    let env = EnvSnapshot::capture();
    let trust_command = matches!(cli.command, Some(cli::Command::Trust));
    if cli.common.trust_project || trust_command {
        match workspace_dir(&cli.common).and_then(|w| trust_cmd::record(&w, &env)) {
            Ok(message) => eprintln!("ahelper: {message}"),
            Err(message) => {
                eprintln!("ahelper: {message}");
                return 1;
            }
        }
        if trust_command {
            return 0;
        }
    }
    let config = match load_config(&cli, &env).and_then(|c| trust_cmd::settle(c, &cli, &env)) {
        Ok(c) => c,
        Err(message) => {
            eprintln!("ahelper: {message}");
            return EXIT_USAGE;
        }
    };
    if let Err(e) = scrub_then_log(&config, &env, cli.common.verbose, hardening) {
        eprintln!("ahelper: {e}");
        return 1;
    }
    let one_shot =
        cli.command.is_none() && (cli.prompt.is_some() || !std::io::stdin().is_terminal());
    if one_shot {
        // Before the runtime's threads and signal handlers: whoever waits for ahelper is told
        // of its exit before its memory is freed.
        teardown::start_memory_holder();
    }
    let rt = match build_runtime(one_shot) {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("ahelper: cannot start the async runtime: {e}");
            return 1;
        }
    };
    if cli.command.is_some()
        && let Some(flag) = session_only_flag(&cli)
    {
        eprintln!(
            "ahelper: {flag} belongs to `ahelper -p` and the REPL, not to `ahelper swarm` (see `ahelper swarm --help`)"
        );
        return EXIT_USAGE;
    }
    // `swarm "<task>"` and `swarm resume` return once the run's record, transcripts and
    // removals are written and done.
    let swarm_run = matches!(&cli.command, Some(cli::Command::Swarm(args))
        if matches!(args.command, None | Some(cli::SwarmCommand::Resume { .. })));
    let code = match cli.command {
        Some(cli::Command::Swarm(args)) => {
            let mode_given = cli.common.permission_mode.is_some()
                || cli.common.dangerously_skip_permissions
                || env.get("AHELPER_PERMISSION_MODE").is_some();
            let asking = if std::io::stdin().is_terminal() && std::io::stderr().is_terminal() {
                mcp_setup::Asking::Interactive
            } else {
                mcp_setup::Asking::Headless
            };
            let starts_workers =
                matches!(args.command, None | Some(cli::SwarmCommand::Resume { .. }));
            let mcp_servers = if starts_workers {
                match mcp_setup::for_swarm(&config, &env, &cli.mcp_config, asking) {
                    Ok(servers) => servers,
                    Err(e) => {
                        eprintln!("ahelper: {e}");
                        return EXIT_USAGE;
                    }
                }
            } else {
                Vec::new()
            };
            swarm_cmd::run(&rt, args, config, &env, mode_given, mcp_servers)
        }
        Some(cli::Command::Trust) => 0,
        Some(cli::Command::Worker(args)) => worker_cmd::run(&rt, args, config, &env),
        None => run_session(&rt, cli, &config, &env),
    };
    if one_shot || swarm_run {
        // A swarm run: `run.json` saved, every removal done, the MCP servers shut down; a
        // one-shot run that ends here did not start (a finished one ends in `end_one_shot`):
        // nothing is left running.
        // Waiting for the runtime's idle threads to wake and join would only delay the exit
        // (issue 11: exit within 2 ms of the final event).
        rt.shutdown_background();
    }
    code
}

/// The async runtime. A one-shot run (`-p`, or a prompt with no terminal) gets a
/// single-threaded runtime: the model's response stream, the agent loop and the tools' tasks
/// then run on the main thread, so no event crosses threads (an `eventfd` write and a futex
/// wake each) and no worker thread is left to tear down at exit (issue 11: exit within 2 ms of
/// the final event). Parallel tool calls and sub-agents still overlap: they are polled
/// together on that thread and do their blocking work on tokio's blocking pool. The REPL and
/// the swarm keep the multi-threaded runtime (their terminal UI and many workers).
///
/// # Errors
/// The I/O error of creating the runtime's driver (epoll, eventfd, signal pipe) or threads.
fn build_runtime(one_shot: bool) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = if one_shot {
        tokio::runtime::Builder::new_current_thread()
    } else {
        tokio::runtime::Builder::new_multi_thread()
    };
    builder.enable_all().build()
}

/// The layered configuration with the session rules of `--allowed-tools`/`--disallowed-tools`.
pub(crate) fn load_config(cli: &Cli, env: &EnvSnapshot) -> Result<Config, String> {
    let workspace = workspace_dir(&cli.common)?;
    let mut config =
        Config::load(&workspace, env, &overrides(&cli.common)).map_err(|e| e.to_string())?;
    for warning in &config.warnings {
        eprintln!("ahelper: warning: {warning}");
    }
    let allow = cli::permission_rules(&cli.common.allowed_tools)?;
    let deny = cli::permission_rules(&cli.common.disallowed_tools)?;
    let text = |rules: &[ahelper_agents::permissions::PermissionRule]| {
        rules.iter().map(ToString::to_string).collect::<Vec<_>>()
    };
    config.session_rules = ahelper_agents::swarm::state::SessionRules {
        allow: text(&allow),
        deny: text(&deny),
    };
    config.permissions.rules.allow.extend(allow);
    config.permissions.rules.deny.extend(deny);
    Ok(config)
}

/// The first flag given with `swarm` that only `-p` and the REPL use.
fn session_only_flag(cli: &Cli) -> Option<&'static str> {
    [
        (cli.prompt.is_some(), "-p/--print"),
        (
            cli.output_format.is_some(),
            "--output-format (give it after `swarm`)",
        ),
        (cli.resume.is_some(), "--resume"),
        (cli.continue_latest, "--continue"),
        (cli.append_system_prompt.is_some(), "--append-system-prompt"),
    ]
    .into_iter()
    .find_map(|(given, flag)| given.then_some(flag))
}

/// `-p`, `ahelper "<prompt>"` or the REPL.
fn run_session(rt: &tokio::runtime::Runtime, cli: Cli, config: &Config, env: &EnvSnapshot) -> i32 {
    let interactive = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    let typeahead = typeahead::TypeAhead::default();
    let prompter: Arc<dyn Prompter> = if interactive {
        Arc::new(prompter::TerminalPrompter::new(
            config.workspace_root.clone(),
            typeahead.clone(),
        ))
    } else {
        Arc::new(DenyPrompter)
    };
    let asking = if interactive && cli.prompt.is_none() {
        mcp_setup::Asking::Interactive
    } else {
        mcp_setup::Asking::Headless
    };
    let mcp = match mcp_setup::start(rt, config, env, &cli.mcp_config, asking) {
        Ok(hub) => hub,
        Err(e) => {
            eprintln!("ahelper: {e}");
            return EXIT_USAGE;
        }
    };
    let code = run_session_with(rt, cli, config, mcp.clone(), prompter, typeahead);
    rt.block_on(mcp.shutdown());
    code
}

/// `run_session` once the MCP servers are up.
fn run_session_with(
    rt: &tokio::runtime::Runtime,
    cli: Cli,
    config: &Config,
    mcp: Arc<ahelper_agents::mcp::McpHub>,
    prompter: Arc<dyn Prompter>,
    typeahead: typeahead::TypeAhead,
) -> i32 {
    let session = match Session::start(
        config,
        SessionOptions {
            prompter: prompter.clone(),
            resume: cli.resume.clone(),
            continue_latest: cli.continue_latest,
            client_override: None,
            append_system_prompt: cli.append_system_prompt.clone(),
            mcp,
        },
    ) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("ahelper: {e}");
            return match e {
                SessionError::Config(ConfigError::NoModel { .. }) => EXIT_USAGE,
                SessionError::Transcript(_) => EXIT_USAGE,
                _ => 1,
            };
        }
    };
    let format = cli.output_format.unwrap_or_default();
    let verbose = cli.common.verbose;
    let stdin_is_terminal = std::io::stdin().is_terminal();
    match (cli.prompt, cli.first_prompt) {
        (Some(_), Some(first)) => {
            eprintln!("ahelper: give the prompt once: `-p \"…\"` or `\"{first}\"`, not both");
            EXIT_USAGE
        }
        (Some(prompt), None) => match read_prompt(prompt) {
            Ok(prompt) => one_shot(rt, session, &prompt, format, verbose, config),
            Err(code) => code,
        },
        (None, Some(first)) if !stdin_is_terminal => {
            eprintln!(
                "ahelper: no terminal for the REPL; answering the prompt once, as `ahelper -p` does"
            );
            one_shot(rt, session, &first, format, verbose, config)
        }
        (None, first) => {
            if !stdin_is_terminal {
                eprintln!(
                    "ahelper: stdin is not a terminal; use `ahelper -p \"<prompt>\"` (or `-p -` to read the prompt from stdin)"
                );
                return EXIT_USAGE;
            }
            let setup = repl::ReplSetup {
                prompter,
                append_system_prompt: cli.append_system_prompt.clone(),
                typeahead,
                resumed: cli.resume.is_some() || cli.continue_latest,
            };
            repl::run(rt, config, session, first, setup)
        }
    }
}

/// Answers `prompt` once in `session` (`ahelper -p`), then ends the process at once with the
/// run's exit code ([`oneshot::run`]): see [`end_one_shot`].
fn one_shot(
    rt: &tokio::runtime::Runtime,
    mut session: Session,
    prompt: &str,
    format: cli::OutputFormat,
    verbose: bool,
    config: &Config,
) -> ! {
    let end = rt.block_on(oneshot::run(
        &mut session,
        prompt,
        format,
        verbose,
        &config.pricing,
    ));
    rt.block_on(session.mcp.shutdown());
    end_one_shot(session, end)
}

/// Ends a finished one-shot run now, with the exit code of `end` (issue 11: exit within 2 ms of
/// the final event), or [`EXIT_OUTPUT_LOST`] when the last flush of stdout fails for a
/// reason other than a closed pipe and the run's code was 0 (the failure is reported on
/// stderr, once). Everything the run owes is out by then: the answer printed (stdout is
/// flushed here once more), every transcript and log line written as it came (unbuffered
/// writes, nothing held back), the MCP servers shut down. What is left would only delay the
/// exit: the session's drop (agent, tools, HTTP client and its pooled connection), the
/// configuration's and, above all, the runtime's shutdown, which wakes the blocking pool's
/// idle thread to exit on its own and contends with it for the pool's lock. The kernel
/// releases all of it at once: memory (after the parent is told: [`teardown`]), descriptors
/// (the connection is closed), threads.
///
/// The process ends with `_exit`: once stdout is flushed nothing in ahelper is owed to the C
/// library's `exit` (no C stdio output, no `atexit` handler that writes), whose handlers and
/// Rust's own cleanup (the main thread's signal stack) only fault in pages at the very end
/// (~0.05–0.1 ms in a traced run).
fn end_one_shot(session: Session, end: oneshot::RunEnd) -> ! {
    use std::io::Write;
    let mut code = end.code;
    // A closed stdout (`| head`) is not an error here either (see `write_stdout`); any other
    // failure of this last flush lost output the run counted as written, unless stderr already
    // says so. stderr is unbuffered.
    if let Err(e) = not_a_closed_pipe(std::io::stdout().lock().flush())
        && !end.output_lost
    {
        code = oneshot::report_lost_output(&e, &session.transcript_path, code);
    }
    std::mem::forget(session);
    // SAFETY: `_exit` ends the process; no destructor runs: the runtime, the configuration and
    // the caller's values are left to the kernel, and nothing of theirs is unwritten.
    unsafe { libc::_exit(code) }
}

/// The keys are in memory now (in `config`): takes them out of the environment block and of
/// what children inherit, still before the first thread (the runtime's) starts; then starts
/// logging through the configuration's redactor.
///
/// # Errors
/// [`hardening::HardeningError`] when the environment cannot be scrubbed.
fn scrub_then_log(
    config: &Config,
    env: &EnvSnapshot,
    verbose: bool,
    hardening: HardeningReport,
) -> Result<(), hardening::HardeningError> {
    // SAFETY: no other thread exists yet; the call checks it.
    let scrub = unsafe { hardening::scrub_environment(&config.secret_env) }?;
    init_logging(env, verbose, &config.redactor);
    tracing::info!(?hardening, ?scrub, redacted = ?config.redactor.names(), "process hardened");
    Ok(())
}

/// The prompt of `-p`: the text, or stdin when it is `-`; an empty prompt is a usage error.
fn read_prompt(prompt: String) -> Result<String, i32> {
    let prompt = if prompt == "-" {
        let mut text = String::new();
        if let Err(e) = std::io::stdin().read_to_string(&mut text) {
            eprintln!("ahelper: cannot read the prompt from stdin: {e}");
            return Err(EXIT_USAGE);
        }
        text
    } else {
        prompt
    };
    if prompt.trim().is_empty() {
        eprintln!("ahelper: the prompt is empty");
        return Err(EXIT_USAGE);
    }
    Ok(prompt)
}

/// Writes `text` to stdout. A closed stdout (`EPIPE`, e.g. `ahelper … | head -1`) is not an error:
/// the text is dropped. Other write errors are logged and dropped too; the one-shot path, whose
/// output is its result, uses [`try_write_stdout`] instead and fails the run.
pub(crate) fn write_stdout(text: std::fmt::Arguments<'_>) {
    if let Err(e) = try_write_stdout(text) {
        tracing::warn!(error = %e, "cannot write to stdout");
    }
}

/// Writes `text` to stdout and flushes it.
///
/// # Errors
/// The write's or the flush's error (e.g. `ENOSPC` when stdout is a file on a full disk), except
/// a closed stdout (`EPIPE`): as in [`write_stdout`], the reader went away on purpose and the text
/// is dropped without an error.
pub(crate) fn try_write_stdout(text: std::fmt::Arguments<'_>) -> std::io::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    not_a_closed_pipe(out.write_fmt(text).and_then(|()| out.flush()))
}

/// `result`, with a closed pipe (`EPIPE`) turned into success: see [`write_stdout`].
fn not_a_closed_pipe(result: std::io::Result<()>) -> std::io::Result<()> {
    match result {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// The workspace directory: `-C DIR` or the current directory.
fn workspace_dir(common: &CommonArgs) -> Result<PathBuf, String> {
    let dir = match &common.cwd {
        Some(d) => d.clone(),
        None => std::env::current_dir()
            .map_err(|e| format!("cannot read the current directory: {e}"))?,
    };
    if !dir.is_dir() {
        return Err(format!(
            "workspace directory {} does not exist",
            dir.display()
        ));
    }
    Ok(dir)
}

fn overrides(common: &CommonArgs) -> CliOverrides {
    CliOverrides {
        provider: common.provider.clone(),
        model: common.model.clone(),
        base_url: common.base_url.clone(),
        permission_mode: if common.dangerously_skip_permissions {
            Some("bypass".to_string())
        } else {
            common.permission_mode.clone()
        },
        max_turns: common.max_turns,
        sandbox: common.sandbox.clone(),
        add_dirs: common.add_dir.clone(),
        trusted_project: false,
    }
}

/// Logs go to `$XDG_STATE_HOME/ahelper/logs/ahelper.log` (never over the terminal UI); the filter
/// comes from `AHELPER_LOG` (default `warn`, `info` with `-v`). Every line is written through
/// `redactor`. Each record is written by the thread that logs it, in one `write` to the file
/// opened for appending ([`LogFile`]): no writer thread, so nothing to hand over or wait for
/// when the process exits, and no record lost then. Without a state directory, or when the
/// file cannot be opened, nothing is logged; a record that cannot be written is dropped.
fn init_logging(env: &EnvSnapshot, verbose: bool, redactor: &Redactor) -> Option<()> {
    let dir = env.state_dir()?.join("logs");
    std::fs::create_dir_all(&dir).ok()?;
    let writer = LogFile::open(&dir.join("ahelper.log")).ok()?;
    let default = if verbose { "info" } else { "warn" };
    let filter = tracing_subscriber::EnvFilter::try_new(env.get("AHELPER_LOG").unwrap_or(default))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let redactor = redactor.clone();
    tracing_subscriber::fmt()
        .with_writer(move || RedactingWriter::new(writer.clone(), redactor.clone()))
        .with_ansi(false)
        // A log record that cannot be written (a full disk) is dropped without a line on
        // stderr per record: what failed is reported where it happened.
        .log_internal_errors(false)
        .with_env_filter(filter)
        .try_init()
        .ok()?;
    std::panic::set_hook(Box::new(|info| {
        tracing::error!(%info, "panic");
        eprintln!("ahelper: internal error: {info}");
    }));
    Some(())
}

/// The log file, shared by every thread that logs. Opened with `O_APPEND`, so each `write` —
/// one whole record, as the tracing formatter hands it over — lands at the end in one piece,
/// whichever thread (or ahelper process) writes it.
#[derive(Clone)]
struct LogFile(Arc<std::fs::File>);

impl LogFile {
    /// Opens (creating) `path` for appending.
    ///
    /// # Errors
    /// The I/O error of opening it.
    fn open(path: &std::path::Path) -> std::io::Result<LogFile> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(LogFile(Arc::new(file)))
    }
}

impl std::io::Write for LogFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        (&*self.0).write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Cancels `cancel` on the first Ctrl-C; exits the process on the second. For the REPL: it
/// leaves `SIGTERM` and `SIGHUP` their default action (ahelper ends at once; its watchdog
/// ends the commands' processes), because a handler, once installed, would also swallow them
/// while the REPL waits for input.
pub(crate) fn spawn_ctrl_c_watcher(cancel: CancellationToken) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            cancel.cancel();
            eprintln!("\n(cancelling… press Ctrl-C again to quit)");
            if tokio::signal::ctrl_c().await.is_ok() {
                std::process::exit(130);
            }
        }
    })
}

/// Cancels `cancel` on the first Ctrl-C, `SIGTERM` or `SIGHUP` ([`interrupts`]); exits the
/// process with 130 on the second. For runs after which ahelper exits (`-p`, a swarm run).
pub(crate) fn spawn_interrupt_watcher(cancel: CancellationToken) -> tokio::task::JoinHandle<()> {
    let mut interrupts = interrupts::Interrupts::new();
    tokio::spawn(async move {
        let first = interrupts.next().await;
        cancel.cancel();
        interrupts::say(&format!(
            "\n(cancelling after {}… press Ctrl-C again to quit)",
            first.name()
        ));
        interrupts.next().await;
        std::process::exit(130);
    })
}

/// Forks ahelper's watchdog, a process that outlives ahelper by a moment: it waits until
/// ahelper is gone — however it ended, `kill -9` included (the write end of a pipe only ahelper
/// holds closes) — then kills every process still carrying this ahelper's
/// [`ahelper_agents::process_sweep::OWNER_VAR`] marker (commands' leftovers). Called first
/// thing in `main`, while the process has a single thread, so the forked child may run
/// ordinary code. Without a watchdog (fork failed) commands still end with their command;
/// only leftovers of a killed ahelper stay until the next `swarm`/`swarm resume` sweep.
fn start_orphan_watchdog() {
    // The init of a PID namespace (`docker run` without `--init`): the kernel kills every
    // process of the namespace when it exits, and a watchdog would only be one more process
    // (in the idle class) the kernel waits for before it tells ahelper's parent.
    // SAFETY: getpid cannot fail.
    if unsafe { libc::getpid() } == 1 {
        return;
    }
    let token = ahelper_agents::process_sweep::owner_token();
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 fills `fds`; fork in a single-threaded process; each branch closes the
    // end it does not use.
    unsafe {
        if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
            return;
        }
        match libc::fork() {
            -1 => {
                libc::close(fds[0]);
                libc::close(fds[1]);
            }
            0 => {
                libc::close(fds[1]);
                run_orphan_watchdog(fds[0], &token)
            }
            // The write end stays open (close-on-exec) for as long as ahelper lives.
            _ => {
                libc::close(fds[0]);
            }
        }
    }
}

/// The watchdog's life: leave the terminal's session (so Ctrl-C and a hang-up do not reach
/// it), wait for end of file on `parent_gone`, sweep, exit.
///
/// It runs under `SCHED_IDLE`: it wakes the moment ahelper exits, together with whoever waits
/// for ahelper (a shell, a script, a benchmark reaping it), and its sweep of `/proc` must not
/// take a CPU from them (issue 11: on a busy machine the sweep held the waiter off ~0.7 ms).
/// An idle-class task still runs, only after the others; a failure to set the class leaves
/// the watchdog as it was.
fn run_orphan_watchdog(parent_gone: i32, token: &str) -> ! {
    // SAFETY: plain system calls on descriptors this process owns; `param` is a valid,
    // initialised struct for `sched_setscheduler`.
    unsafe {
        libc::setsid();
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            for fd in 0..3 {
                libc::dup2(null, fd);
            }
            if null > 2 {
                libc::close(null);
            }
        }
        let _ = libc::chdir(c"/".as_ptr());
        libc::prctl(libc::PR_SET_NAME, c"ahelper-reaper".as_ptr(), 0, 0, 0);
        // Idle class only now: ahelper's terminal and directory are let go at once, even on a
        // busy machine.
        let param = libc::sched_param { sched_priority: 0 };
        libc::sched_setscheduler(0, libc::SCHED_IDLE, &param);
        let mut byte = [0u8; 1];
        loop {
            let n = libc::read(parent_gone, byte.as_mut_ptr().cast(), 1);
            if n == 0
                || (n < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR))
            {
                break;
            }
        }
    }
    ahelper_agents::process_sweep::kill_marked(ahelper_agents::process_sweep::OWNER_VAR, token);
    // SAFETY: ends this process without running the parent's exit handlers.
    unsafe { libc::_exit(0) }
}
