//! The signals that stop ahelper politely: Ctrl-C (`SIGINT`), `SIGTERM` (`kill`, a service
//! manager) and `SIGHUP` (the terminal was closed). All three mean the same: the first one
//! cancels the work in progress (a swarm's workers commit `wip`, transcripts are flushed, the
//! resume command is printed; the run then ends as cancelled, exit status 130); a second one
//! kills every child process and exits at once with 130.
//!
//! Used while a swarm run executes and during `ahelper -p`: once tokio has installed a
//! handler it stays for the life of the process, so the REPL (which waits for input between
//! prompts) and the planning and confirmation steps of a swarm leave `SIGTERM` and `SIGHUP`
//! their default action — ahelper ends at once and its watchdog ends the commands' processes.
//! After a `/swarm` in the REPL the handlers stay installed: the REPL then listens for both
//! signals itself and, outside a `/swarm`, restores their default action and raises them again
//! (`repl::restore_stop_signals`); its hang-up watcher (`repl::watch_for_hangup`) ends it when
//! its terminal closes at the prompt.

use std::io::Write;
use tokio::signal::unix::{Signal, SignalKind, signal};

/// Which signal arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interrupt {
    /// `SIGINT` (Ctrl-C).
    CtrlC,
    /// `SIGTERM`.
    Terminate,
    /// `SIGHUP`.
    Hangup,
}

impl Interrupt {
    /// What the user is told: `Ctrl-C`, `SIGTERM`, `SIGHUP`.
    pub fn name(self) -> &'static str {
        match self {
            Interrupt::CtrlC => "Ctrl-C",
            Interrupt::Terminate => "SIGTERM",
            Interrupt::Hangup => "SIGHUP",
        }
    }

    /// Why a run it stopped was cancelled, as its record and summary say it.
    pub fn cancel_reason(self) -> &'static str {
        match self {
            Interrupt::CtrlC => "cancelled by the user (Ctrl-C)",
            Interrupt::Terminate => "stopped by SIGTERM",
            Interrupt::Hangup => "stopped by SIGHUP (the terminal was closed)",
        }
    }
}

/// Listens for [`Interrupt`]s. Creating it installs the handlers, so the default actions
/// (terminate at once) no longer apply while ahelper runs.
pub struct Interrupts {
    term: Option<Signal>,
    hup: Option<Signal>,
}

impl Interrupts {
    /// Installs the `SIGTERM` and `SIGHUP` handlers (Ctrl-C is tokio's `ctrl_c`). A handler
    /// that cannot be installed is left out (that signal keeps its default action).
    pub fn new() -> Self {
        Interrupts {
            term: signal(SignalKind::terminate()).ok(),
            hup: signal(SignalKind::hangup()).ok(),
        }
    }

    /// The next interrupt.
    pub async fn next(&mut self) -> Interrupt {
        async fn recv(s: &mut Option<Signal>) {
            if let Some(s) = s
                && s.recv().await.is_some()
            {
                return;
            }
            std::future::pending::<()>().await
        }
        tokio::select! {
            r = tokio::signal::ctrl_c() => match r {
                Ok(()) => Interrupt::CtrlC,
                Err(_) => std::future::pending().await,
            },
            _ = recv(&mut self.term) => Interrupt::Terminate,
            _ = recv(&mut self.hup) => Interrupt::Hangup,
        }
    }
}

/// Writes one line to stderr, ignoring failures (after `SIGHUP` the terminal may be gone).
pub fn say(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}
