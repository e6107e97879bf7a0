//! The `ahelper` binary: CLI, REPL, one-shot mode, swarm commands and their terminal output.
//! The agent logic lives in `ahelper-agents`; this crate only wires it to the terminal.

mod cli;
mod interrupts;
mod oneshot;
mod prompter;
mod render;
mod repl;
mod status_table;
mod swarm_cmd;
mod swarm_ui;

use ahelper_agents::config::{CliOverrides, Config, ConfigError, EnvSnapshot};
use ahelper_agents::permissions::{DenyPrompter, Prompter};
use ahelper_agents::session::{Session, SessionError, SessionOptions};
use clap::Parser;
use cli::{Cli, CommonArgs};
use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Exit code for usage and configuration errors (clap uses 2 for bad flags too).
const EXIT_USAGE: i32 = 2;

fn main() {
    let cli = Cli::parse();
    start_orphan_watchdog();
    std::process::exit(run(cli));
}

fn run(cli: Cli) -> i32 {
    let env = EnvSnapshot::capture();
    let _log_guard = init_logging(&env, cli.common.verbose);
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("ahelper: cannot start the async runtime: {e}");
            return 1;
        }
    };
    let workspace = match workspace_dir(&cli.common) {
        Ok(w) => w,
        Err(message) => {
            eprintln!("ahelper: {message}");
            return EXIT_USAGE;
        }
    };
    let config = match Config::load(&workspace, &env, &overrides(&cli.common)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ahelper: {e}");
            return EXIT_USAGE;
        }
    };
    if let Some(cli::Command::Swarm(args)) = cli.command {
        let mode_given =
            cli.common.permission_mode.is_some() || env.get("AHELPER_PERMISSION_MODE").is_some();
        return swarm_cmd::run(&rt, args, config, &env, mode_given);
    }
    let interactive = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    let prompter: Arc<dyn Prompter> = if interactive {
        Arc::new(prompter::TerminalPrompter::default())
    } else {
        Arc::new(DenyPrompter)
    };
    let session = match Session::start(
        &config,
        SessionOptions {
            prompter,
            resume: cli.resume.clone(),
            continue_latest: cli.continue_latest,
            client_override: None,
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
    match cli.prompt {
        Some(prompt) => {
            let prompt = if prompt == "-" {
                let mut text = String::new();
                if let Err(e) = std::io::stdin().read_to_string(&mut text) {
                    eprintln!("ahelper: cannot read the prompt from stdin: {e}");
                    return EXIT_USAGE;
                }
                text
            } else {
                prompt
            };
            if prompt.trim().is_empty() {
                eprintln!("ahelper: the prompt is empty");
                return EXIT_USAGE;
            }
            rt.block_on(oneshot::run(
                session,
                &prompt,
                cli.output_format,
                cli.common.verbose,
            ))
        }
        None => {
            if !std::io::stdin().is_terminal() {
                eprintln!(
                    "ahelper: stdin is not a terminal; use `ahelper -p \"<prompt>\"` (or `-p -` to read the prompt from stdin)"
                );
                return EXIT_USAGE;
            }
            repl::run(&rt, &config, session)
        }
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
        permission_mode: common.permission_mode.clone(),
        max_turns: common.max_turns,
        sandbox: common.sandbox.clone(),
    }
}

/// Logs go to `$XDG_STATE_HOME/ahelper/logs/ahelper.log` (never over the terminal UI); the filter
/// comes from `AHELPER_LOG` (default `warn`, `info` with `-v`).
fn init_logging(
    env: &EnvSnapshot,
    verbose: bool,
) -> Option<tracing_appender::non_blocking::WorkerGuard> {
    let dir = env.state_dir()?.join("logs");
    std::fs::create_dir_all(&dir).ok()?;
    let appender = tracing_appender::rolling::never(&dir, "ahelper.log");
    let (writer, guard) = tracing_appender::non_blocking(appender);
    let default = if verbose { "info" } else { "warn" };
    let filter = tracing_subscriber::EnvFilter::try_new(env.get("AHELPER_LOG").unwrap_or(default))
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_writer(writer)
        .with_ansi(false)
        .with_env_filter(filter)
        .try_init()
        .ok()?;
    std::panic::set_hook(Box::new(|info| {
        tracing::error!(%info, "panic");
        eprintln!("ahelper: internal error: {info}");
    }));
    Some(guard)
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
fn run_orphan_watchdog(parent_gone: i32, token: &str) -> ! {
    // SAFETY: plain system calls on descriptors this process owns.
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
