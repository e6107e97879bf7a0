//! Shell tool: [`RunCommand`] runs one command line with `bash -c` (or `sh -c` where bash is
//! missing) in the call's cwd, in its own process group, with a timeout.
//!
//! - `current_dir` is the call's cwd (checked with [`crate::sandbox::resolve`]), never the
//!   process cwd;
//! - the environment is ahelper's minus variables holding API keys ([`is_secret_env`]), plus
//!   [`ToolContext::env`] (e.g. `AHELPER_RUN_ID`);
//! - stdin is `/dev/null`; stdout and stderr share one pipe, so the output keeps their order;
//! - on timeout or cancellation the **whole process group** gets `SIGTERM`, then `SIGKILL`
//!   after [`TERM_GRACE`];
//! - **nothing outlives the command**: every command carries a unique
//!   [`crate::process_sweep::COMMAND_VAR`] in its environment, and when it ends (exit,
//!   timeout, cancel, the call's future dropped) every process still holding that marker —
//!   `nohup … &`, `setsid …`, double forks, whatever left the group — gets `SIGKILL`
//!   ([`crate::process_sweep::kill_marked`]); the output says when that happened after a
//!   normal exit;
//! - the shell gets `PR_SET_PDEATHSIG(SIGKILL)`: it dies with ahelper (it is spawned from one
//!   long-lived thread, because the signal fires when the spawning *thread* exits);
//!   [`crate::process_sweep::OWNER_VAR`] lets ahelper's watchdog end the rest;
//! - `TMPDIR` is a private directory per command ([`crate::command_temp`]), removed after it;
//! - when [`ToolContext::command_sandbox`] is enforced, the child is confined with landlock
//!   before `exec` ([`crate::sandbox_os`]): writes only in the workspace, the temp dir and the
//!   user's listed paths, no reads of denied paths, optionally no TCP;
//! - with the sandbox come the process and memory limits ([`crate::sandbox_os::CommandLimits`]);
//!   when the output shows a command hit one, a note says which
//!   ([`crate::sandbox_os::limit_hit`]);
//! - output is capped: at most about [`ToolContext::max_output_chars`] characters, head and
//!   tail kept, with a marker saying how much was cut.
//!
//! The verification runner ([`crate::verify`]) runs its command through [`run_in_group`], which
//! takes the same [`RunningCommand`] steps, so a verification command gets all of the above.

use super::catalog::RunCommandArgs;
use super::*;
use crate::command_temp::CommandTemp;
use crate::process_sweep;
use crate::redact::StreamRedactor;
use crate::sandbox::Access;
use std::collections::VecDeque;
use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc;
use std::time::Duration;
use tokio::io::AsyncReadExt;
use tokio::time::Instant;

/// Appended to a failed sandboxed command's output that mentions `Permission denied`.
const SANDBOX_HINT: &str = "\n[note: commands run in a sandbox: they may write only inside the \
     workspace and the temp dir, and may not read credential directories such as ~/.ssh; \
     a \"Permission denied\" outside those places comes from the sandbox]";

/// Timeout when the call gives none, in milliseconds (2 minutes).
pub const DEFAULT_TIMEOUT_MS: u64 = 120_000;
/// Largest accepted timeout, in milliseconds (10 minutes); larger values are clamped.
pub const MAX_TIMEOUT_MS: u64 = 600_000;
/// Time between `SIGTERM` and `SIGKILL` when a command is stopped.
pub const TERM_GRACE: Duration = Duration::from_millis(1500);
/// How long output is still read after the shell exited while a background process keeps the
/// output pipe open.
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(100);

/// True for environment variables that hold credentials and must not reach commands the model
/// runs: `*_API_KEY`, `*_API_TOKEN`, `*_AUTH_TOKEN`, `*_SECRET_KEY`, and every `ANTHROPIC_*` and
/// `OPENAI_*` variable (case-insensitive).
pub fn is_secret_env(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    upper.starts_with("ANTHROPIC_")
        || upper.starts_with("OPENAI_")
        || upper == "API_KEY"
        || ["_API_KEY", "_API_TOKEN", "_AUTH_TOKEN", "_SECRET_KEY"]
            .iter()
            .any(|s| upper.ends_with(s))
}

/// Git configuration every command runs with, given to git through `GIT_CONFIG_COUNT`,
/// `GIT_CONFIG_KEY_<n>` and `GIT_CONFIG_VALUE_<n>` (git-config(1), "ENVIRONMENT"): these
/// entries take precedence over every configuration file, so a repository's `.git/config` (or a
/// directory the model made to look like one) cannot make a read-only git command run a program
/// through the file-system monitor, hooks, a pager or the ssh command, and git does not treat a
/// bare-looking directory it stumbles on as a repository. `git -c KEY=…` on the command line
/// still wins; the permission layer treats it as a code runner. Keys that cannot be neutralised
/// this way (`diff.external`, `filter.<driver>.*`, `diff.<driver>.textconv`: an empty value is
/// an error, not "unset") are why git in a repository other than the workspace's own asks.
pub const GIT_HARDENING: &[(&str, &str)] = &[
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("core.pager", "cat"),
    ("core.sshCommand", "ssh"),
    ("safe.bareRepository", "explicit"),
    ("protocol.ext.allow", "never"),
];

/// The environment of a command: `inherited` without secrets ([`is_secret_env`]) and without
/// inherited `GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_<n>`/`GIT_CONFIG_VALUE_<n>`, then [`GIT_HARDENING`], then `extra`
/// (which wins, and is passed even when its names look secret — it was set on purpose).
pub fn command_env(
    inherited: impl IntoIterator<Item = (OsString, OsString)>,
    extra: &BTreeMap<String, String>,
) -> Vec<(OsString, OsString)> {
    let mut env: BTreeMap<OsString, OsString> = inherited
        .into_iter()
        .filter(|(k, _)| {
            let name = k.to_string_lossy();
            !is_secret_env(&name)
                && name != "GIT_CONFIG_COUNT"
                && !name.starts_with("GIT_CONFIG_KEY_")
                && !name.starts_with("GIT_CONFIG_VALUE_")
        })
        .collect();
    env.insert(
        "GIT_CONFIG_COUNT".into(),
        GIT_HARDENING.len().to_string().into(),
    );
    for (n, (key, value)) in GIT_HARDENING.iter().enumerate() {
        env.insert(format!("GIT_CONFIG_KEY_{n}").into(), (*key).into());
        env.insert(format!("GIT_CONFIG_VALUE_{n}").into(), (*value).into());
    }
    for (k, v) in extra {
        env.insert(k.into(), v.into());
    }
    env.into_iter().collect()
}

/// `run_command`: runs a shell command and returns its output and exit code.
pub struct RunCommand;

impl BuiltinTool for RunCommand {
    type Args = RunCommandArgs;

    async fn run(&self, args: RunCommandArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        run_command(&args, ctx).await
    }
}

fn shell_program() -> &'static str {
    ["/bin/bash", "/usr/bin/bash"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .unwrap_or("/bin/sh")
}

/// Sends `signal` to every process of the group `pgid`.
fn signal_group(pgid: i32, signal: libc::c_int) {
    // SAFETY: kill(2) has no memory-safety preconditions; a negative pid names a group.
    unsafe {
        libc::kill(-pgid, signal);
    }
}

/// True when no live process is left in the group `pgid`. Zombies do not count: processes
/// re-parented to an init that does not reap (common in containers) stay zombies forever.
fn group_gone(pgid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence.
    let rc = unsafe { libc::kill(-pgid, 0) };
    if rc != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) {
        return true;
    }
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return false;
    };
    for entry in dir.flatten() {
        let name = entry.file_name();
        if !name.as_encoded_bytes().iter().all(u8::is_ascii_digit) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid pgrp …`; comm may contain spaces and parentheses.
        let Some((_, rest)) = stat.rsplit_once(") ") else {
            continue;
        };
        let mut fields = rest.split(' ');
        let state = fields.next();
        let pgrp = fields.nth(1).and_then(|f| f.parse::<i32>().ok());
        if pgrp == Some(pgid) && state != Some("Z") && state != Some("X") {
            return false;
        }
    }
    true
}

/// Kills the group and every process carrying the command's marker with `SIGKILL` when
/// dropped while armed (the call's future was dropped).
struct GroupGuard {
    pgid: i32,
    marker: String,
    /// The user namespace of the command's own (OS sandbox), when it has one: processes that
    /// cleared their environment (`env -i`) are still in it.
    user_namespace: Option<u64>,
    /// The report pipe of the command's own PID namespace, when it may get one
    /// ([`crate::sandbox_os::PreparedSandbox::take_report`]). When the namespace's init
    /// reported, every other process in it was killed (and the kernel ends them all when init
    /// dies), so no sweep of `/proc` is needed; without a report (the command was killed, or
    /// the kernel gave it no PID namespace) the sweep runs.
    pid_namespace: Option<OwnedFd>,
    armed: bool,
}

impl GroupGuard {
    /// Kills every process carrying the command's marker or living in its user namespace —
    /// or, when the init of the command's PID namespace reported, reads how many it killed.
    /// Returns how many were killed.
    fn sweep(&self) -> usize {
        let reported = self
            .pid_namespace
            .as_ref()
            .and_then(crate::sandbox_os::read_leftover_report);
        if let Some(killed) = reported {
            return usize::try_from(killed).unwrap_or(usize::MAX);
        }
        let marked = process_sweep::kill_marked(process_sweep::COMMAND_VAR, &self.marker);
        let in_namespace = self
            .user_namespace
            .map_or(0, process_sweep::kill_in_user_namespace);
        marked + in_namespace
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if self.armed {
            signal_group(self.pgid, libc::SIGKILL);
            self.sweep();
        }
    }
}

/// The user namespace `pid` lives in when it is not ahelper's own (the OS sandbox gave the
/// command one). Read right after the spawn, before the shell is reaped.
fn own_user_namespace(pid: u32) -> Option<u64> {
    let theirs = process_sweep::user_namespace_of(pid)?;
    (Some(theirs) != process_sweep::user_namespace_of(std::process::id())).then_some(theirs)
}

/// [`process_sweep::owner_token`] of this process, computed once.
fn owner_token() -> &'static str {
    static TOKEN: OnceLock<String> = OnceLock::new();
    TOKEN.get_or_init(process_sweep::owner_token)
}

type SpawnJob = Box<dyn FnOnce() + Send>;

/// The sender of the one thread that spawns every command. `PR_SET_PDEATHSIG` fires when the
/// thread that forked the child exits, and tokio's threads may come and go; this one lives as
/// long as the process. `None` when the thread could not be started (commands are then spawned
/// from the calling thread).
fn spawner() -> Option<&'static mpsc::Sender<SpawnJob>> {
    static SPAWNER: OnceLock<Option<mpsc::Sender<SpawnJob>>> = OnceLock::new();
    SPAWNER
        .get_or_init(|| {
            let (tx, rx) = mpsc::channel::<SpawnJob>();
            std::thread::Builder::new()
                .name("ahelper-spawner".into())
                .spawn(move || {
                    for job in rx {
                        job();
                    }
                })
                .ok()
                .map(|_| tx)
        })
        .as_ref()
}

/// Spawns `cmd` from the [`spawner`] thread (inside the caller's tokio runtime) and drops
/// `cmd` there, closing the parent's copies of the child's pipe ends.
fn spawn_from_spawner(mut cmd: tokio::process::Command) -> std::io::Result<tokio::process::Child> {
    let gone = || std::io::Error::other("the command spawner thread is gone");
    let Some(spawner) = spawner() else {
        return cmd.spawn();
    };
    let handle = tokio::runtime::Handle::current();
    let (tx, rx) = mpsc::sync_channel(1);
    spawner
        .send(Box::new(move || {
            let _runtime = handle.enter();
            let spawned = cmd.spawn();
            drop(cmd);
            let _ = tx.send(spawned);
        }))
        .map_err(|_| gone())?;
    rx.recv().map_err(|_| gone())?
}

/// Makes the shell die with ahelper: `PR_SET_PDEATHSIG(SIGKILL)`, and exit at once if ahelper
/// already died between `fork` and the `prctl`.
fn die_with_parent(cmd: &mut tokio::process::Command) {
    let parent = std::process::id() as i32;
    // SAFETY: runs in the forked child; prctl(2) and getppid(2) are async-signal-safe and the
    // closure allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::getppid() != parent {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
}

/// Output kept within a bound: the first and the last `half` bytes, after secret values were
/// redacted (before the cut, so that no cut leaves part of a value behind).
struct Capture {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: usize,
    half: usize,
    redact: StreamRedactor,
}

impl Capture {
    fn new(half: usize, redact: StreamRedactor) -> Self {
        Capture {
            head: Vec::new(),
            tail: VecDeque::new(),
            total: 0,
            half,
            redact,
        }
    }

    fn push(&mut self, bytes: &[u8]) {
        let clean = self.redact.push(bytes);
        self.keep(&clean);
    }

    fn keep(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len();
        if self.head.len() < self.half {
            let take = (self.half - self.head.len()).min(bytes.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        self.tail.extend(bytes);
        while self.tail.len() > self.half {
            self.tail.pop_front();
        }
    }

    /// Takes in what the redactor still holds back (the end of the output). Call once, when
    /// no more output comes.
    fn flush(&mut self) {
        let rest = self.redact.finish();
        self.keep(&rest);
    }

    /// True when [`Capture::finish`] with `max_chars` will leave part of the output out (call
    /// after [`Capture::flush`]).
    fn cuts(&self, max_chars: usize) -> bool {
        if self.head.len() + self.tail.len() < self.total {
            return true;
        }
        let mut all = self.head.clone();
        all.extend(self.tail.iter());
        String::from_utf8_lossy(&all).chars().count() > max_chars
    }

    /// The output as text of at most about `max_chars` characters (flushed first unless
    /// [`Capture::flush`] was called).
    fn finish(mut self, max_chars: usize) -> String {
        self.flush();
        let kept = self.head.len() + self.tail.len();
        if kept == self.total {
            let mut all = self.head;
            all.extend(self.tail);
            return truncate_middle(&String::from_utf8_lossy(&all), max_chars);
        }
        let head = String::from_utf8_lossy(&self.head);
        let tail_bytes: Vec<u8> = self.tail.into_iter().collect();
        let tail = String::from_utf8_lossy(&tail_bytes);
        let head_chars = max_chars * 6 / 10;
        let tail_chars = max_chars - head_chars;
        let (head, _) = crate::text::clip(&head, head_chars);
        let tail = crate::text::last_chars(&tail, tail_chars);
        let cut = self.total - head.len() - tail.len();
        format!("{head}\n[… about {cut} bytes cut from the middle of this output …]\n{tail}")
    }
}

/// How a command run by [`RunningCommand`] ended.
pub(crate) enum Outcome {
    /// It exited (or was killed by a signal it did not get from us).
    Exited(ExitStatus),
    /// The time limit passed; the whole process group was stopped.
    TimedOut,
    /// The cancellation token fired; the whole process group was stopped.
    Cancelled,
}

fn describe_status(status: &ExitStatus) -> (String, bool) {
    if let Some(code) = status.code() {
        (format!("[exit code: {code}]"), code != 0)
    } else if let Some(sig) = status.signal() {
        let name = match sig {
            libc::SIGKILL => " (SIGKILL)",
            libc::SIGTERM => " (SIGTERM)",
            libc::SIGSEGV => " (SIGSEGV)",
            libc::SIGABRT => " (SIGABRT)",
            libc::SIGINT => " (SIGINT)",
            libc::SIGPIPE => " (SIGPIPE)",
            _ => "",
        };
        (format!("[killed by signal {sig}{name}]"), true)
    } else {
        ("[finished with an unknown status]".into(), true)
    }
}

/// Runs one command: check the arguments → spawn the shell in its own process group (confined
/// when the sandbox is enforced) → read its output until it exits, times out or is cancelled →
/// stop the group if needed → the output with a footer saying how it ended.
async fn run_command(args: &RunCommandArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    let requested_ms = checked_timeout(args)?;
    let timeout_ms = requested_ms.min(MAX_TIMEOUT_MS);
    let cwd = ctx.resolve(".", Access::Read)?;
    if !cwd.physical.is_dir() {
        return Err(ToolError::new(format!(
            "the working directory {} does not exist",
            cwd.physical.display()
        )));
    }
    let sandbox = ctx.command_sandbox.as_deref();
    let mut running = RunningCommand::spawn(
        &args.command,
        &cwd.physical,
        &ctx.env,
        sandbox,
        &ctx.read_deny,
    )?;
    let mut capture = Capture::new(ctx.max_output_chars.max(1000) * 2, ctx.redactor.stream());
    let deadline = Instant::now() + Duration::from_millis(timeout_ms);
    let outcome = running.wait(&mut capture, &ctx.cancel, deadline).await?;
    let leftovers = running.stop(&outcome, &mut capture).await;
    let (footer, is_error) = footer(&outcome, leftovers, timeout_ms);
    let mut text = capture.finish(ctx.max_output_chars);
    if text.is_empty() {
        text.push_str("(no output)");
    }
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&footer);
    if running.sandboxed && is_error && text.contains("Permission denied") {
        text.push_str(SANDBOX_HINT);
    }
    if let Some(note) = limit_note(running.limits.as_ref(), &text) {
        text.push('\n');
        text.push_str(&note);
    }
    if requested_ms > MAX_TIMEOUT_MS {
        text.push_str(&format!(
            "\n[note: timeout_ms {requested_ms} was lowered to the maximum {MAX_TIMEOUT_MS}]"
        ));
    }
    Ok(ToolOutput {
        content: text,
        is_error,
        usage: crate::model::Usage::default(),
    })
}

/// Which limit a command's `output` shows it hit ([`crate::sandbox_os::limit_hit`]), as the
/// note for the model, when it ran with `limits`.
fn limit_note(limits: Option<&crate::sandbox_os::CommandLimits>, output: &str) -> Option<String> {
    limits
        .and_then(|l| crate::sandbox_os::limit_hit(l, output))
        .map(|hit| hit.describe())
}

/// A command line for [`run_in_group`].
pub(crate) struct GroupCommand<'a> {
    /// Shell command line, run with `bash -c` (or `sh -c`).
    pub command: &'a str,
    /// Existing directory it runs in.
    pub cwd: &'a Path,
    /// Variables added to the environment (ahelper's minus secrets, see [`command_env`]).
    pub env: &'a BTreeMap<String, String>,
    /// Landlock policy; applied when enforced.
    pub sandbox: Option<&'a crate::sandbox_os::CommandSandbox>,
    /// Time limit; then the whole process group is stopped (`SIGTERM`, `SIGKILL` after
    /// [`TERM_GRACE`]).
    pub timeout: Duration,
    /// Output cap in characters (head and tail kept, see [`Capture`]).
    pub max_output_chars: usize,
    /// Known secret values, replaced in the output before it is kept.
    pub redactor: &'a crate::redact::Redactor,
    /// Cancelling it stops the whole process group.
    pub cancel: &'a CancellationToken,
}

/// What [`run_in_group`] observed.
pub(crate) struct GroupRun {
    /// How the command ended.
    pub outcome: Outcome,
    /// stdout and stderr interleaved, secrets redacted, at most about `max_output_chars`
    /// characters (head and tail kept, with a marker where the middle was cut); no footer.
    pub output: String,
    /// True when part of the output was cut to respect the cap.
    pub truncated: bool,
}

/// Runs `spec.command` exactly as `run_command` runs a command — the same [`RunningCommand`]
/// steps: `bash -c` in its own process group from the spawner thread with
/// `PR_SET_PDEATHSIG`, stdin `/dev/null`, stdout and stderr on one pipe, the environment
/// without secrets plus the command marker and a private `TMPDIR`, the landlock sandbox when
/// enforced; stops the whole group on timeout or cancellation, and kills every process still
/// carrying the marker when it ends. The verification runner's entry ([`crate::verify`]).
///
/// # Errors
/// [`ToolError`] when the temp dir, the pipe, the sandbox or the shell cannot be set up.
pub(crate) async fn run_in_group(spec: &GroupCommand<'_>) -> Result<GroupRun, ToolError> {
    let mut running = RunningCommand::spawn(spec.command, spec.cwd, spec.env, spec.sandbox, &[])?;
    let mut capture = Capture::new(spec.max_output_chars.max(1000) * 2, spec.redactor.stream());
    let deadline = Instant::now() + spec.timeout;
    let outcome = running.wait(&mut capture, spec.cancel, deadline).await?;
    running.stop(&outcome, &mut capture).await;
    capture.flush();
    let truncated = capture.cuts(spec.max_output_chars);
    let mut output = capture.finish(spec.max_output_chars);
    if let Some(note) = limit_note(running.limits.as_ref(), &output) {
        if !output.is_empty() && !output.ends_with('\n') {
            output.push('\n');
        }
        output.push_str(&note);
        output.push('\n');
    }
    Ok(GroupRun {
        outcome,
        output,
        truncated,
    })
}

/// The requested timeout in ms (the default when none); refuses an empty command and a zero
/// timeout.
fn checked_timeout(args: &RunCommandArgs) -> Result<u64, ToolError> {
    if args.command.trim().is_empty() {
        return Err(ToolError::new(
            "command is empty; give a shell command line",
        ));
    }
    let requested_ms = args.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS);
    if requested_ms == 0 {
        return Err(ToolError::new(
            "timeout_ms must be at least 1 (default 120000, at most 600000)",
        ));
    }
    Ok(requested_ms)
}

fn io_error(what: &str, e: std::io::Error) -> ToolError {
    ToolError::new(format!("cannot {what}: {e}"))
}

/// A started command: the shell, its process group, the read end of its output pipe.
struct RunningCommand {
    child: tokio::process::Child,
    pgid: i32,
    guard: GroupGuard,
    output: tokio::net::unix::pipe::Receiver,
    /// Confined by the landlock sandbox.
    sandboxed: bool,
    /// The process and memory limits it runs with (those of the sandbox, when enforced).
    limits: Option<crate::sandbox_os::CommandLimits>,
    /// The command's `TMPDIR`; removed after the sweep (declared after `guard`, so it is
    /// dropped after it).
    _temp: CommandTemp,
}

impl RunningCommand {
    /// Starts `bash -c <command>` in `cwd` with the command environment (ahelper's minus
    /// secrets, plus `env`, the command marker and a private `TMPDIR`), stdin from
    /// `/dev/null`, stdout and stderr into one pipe, in a new process group, dying with
    /// ahelper, confined by `sandbox` when it is enforced — with what the `read_deny` rules
    /// cover in the workspace and the `--add-dir` directories hidden
    /// ([`crate::permissions::hidden_paths_in`]).
    fn spawn(
        command: &str,
        cwd: &Path,
        env: &BTreeMap<String, String>,
        sandbox: Option<&crate::sandbox_os::CommandSandbox>,
        read_deny: &[crate::permissions::PermissionRule],
    ) -> Result<Self, ToolError> {
        let temp =
            CommandTemp::create().map_err(|e| io_error("create the command's temp dir", e))?;
        let marker = uuid::Uuid::now_v7().to_string();
        let mut extra = env.clone();
        extra.insert("TMPDIR".into(), temp.path().display().to_string());
        extra.insert(process_sweep::COMMAND_VAR.into(), marker.clone());
        extra.insert(process_sweep::OWNER_VAR.into(), owner_token().to_string());
        let (reader, writer) = std::io::pipe().map_err(|e| io_error("create an output pipe", e))?;
        let writer2 = writer
            .try_clone()
            .map_err(|e| io_error("create an output pipe", e))?;
        let mut cmd = tokio::process::Command::new(shell_program());
        cmd.arg("-c")
            .arg(command)
            .current_dir(cwd)
            .env_clear()
            .envs(command_env(std::env::vars_os(), &extra))
            .stdin(Stdio::null())
            .stdout(Stdio::from(OwnedFd::from(writer)))
            .stderr(Stdio::from(OwnedFd::from(writer2)))
            .process_group(0)
            .kill_on_drop(true);
        die_with_parent(&mut cmd);
        let mut report = None;
        let limits = sandbox.filter(|p| p.is_enforced()).map(|p| p.limits);
        let sandboxed = match sandbox {
            Some(policy) if policy.is_enforced() => {
                // Without its sandbox no command may run, and the model cannot change that.
                let hidden = if policy.namespaces {
                    crate::permissions::hidden_paths_in(
                        read_deny,
                        policy.workspace_root(),
                        &policy.added_dirs(),
                    )
                    .map_err(|e| ToolError::new(e.to_string()))?
                } else {
                    crate::permissions::HiddenPaths::default()
                };
                if let Some(dir) = hidden.dirs.iter().find(|d| cwd.starts_with(d)) {
                    return Err(ToolError::new(format!(
                        "the working directory {} is inside {}, which a read_file deny rule \
                         covers; run the command from another directory",
                        cwd.display(),
                        dir.display()
                    )));
                }
                let mut prepared =
                    policy
                        .prepare_hiding(Some(temp.path()), &hidden)
                        .map_err(|e| match e {
                            crate::sandbox_os::SandboxOsError::Hide { .. } => {
                                ToolError::new(e.to_string())
                            }
                            _ => ToolError::fatal(e.to_string()),
                        })?;
                report = prepared.take_report();
                prepared.install(&mut cmd);
                true
            }
            _ => false,
        };
        // The spawner drops `cmd`, and with it our copies of the pipe's write end, so that EOF
        // can arrive.
        let child = spawn_from_spawner(cmd).map_err(|e| io_error("start the shell", e))?;
        let pgid = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .ok_or_else(|| ToolError::new("the shell exited before it could be tracked"))?;
        let guard = GroupGuard {
            pgid,
            marker,
            user_namespace: own_user_namespace(pgid.unsigned_abs()),
            pid_namespace: report,
            armed: true,
        };
        let output = tokio::net::unix::pipe::Receiver::from_owned_fd(OwnedFd::from(reader))
            .map_err(|e| io_error("read the command's output", e))?;
        Ok(RunningCommand {
            child,
            pgid,
            guard,
            output,
            sandboxed,
            limits,
            _temp: temp,
        })
    }

    /// Reads output into `capture` until the shell exited and the pipe is drained (or
    /// [`DRAIN_AFTER_EXIT`] passed while a background process keeps it open), the deadline
    /// passed or `cancel` fired.
    async fn wait(
        &mut self,
        capture: &mut Capture,
        cancel: &CancellationToken,
        deadline: Instant,
    ) -> Result<Outcome, ToolError> {
        let mut buf = vec![0u8; 64 * 1024];
        let mut status: Option<ExitStatus> = None;
        let mut eof = false;
        let mut drain_until: Option<Instant> = None;
        loop {
            if let Some(s) = status
                && eof
            {
                return Ok(Outcome::Exited(s));
            }
            tokio::select! {
                _ = cancel.cancelled(), if status.is_none() => return Ok(Outcome::Cancelled),
                _ = tokio::time::sleep_until(deadline), if status.is_none() => return Ok(Outcome::TimedOut),
                _ = tokio::time::sleep_until(drain_until.unwrap_or(deadline)), if drain_until.is_some() => {
                    if let Some(s) = status { return Ok(Outcome::Exited(s)); }
                }
                s = self.child.wait(), if status.is_none() => {
                    let s = s.map_err(|e| io_error("wait for the command", e))?;
                    status = Some(s);
                    drain_until = Some(Instant::now() + DRAIN_AFTER_EXIT);
                }
                r = self.output.read(&mut buf), if !eof => match r {
                    Ok(0) | Err(_) => eof = true,
                    Ok(n) => capture.push(&buf[..n]),
                },
            }
        }
    }

    /// Stops the group after a timeout or cancel (reading what it still writes), then kills
    /// every process still carrying the command's marker. Returns how many such processes a
    /// command that exited normally had left running.
    async fn stop(&mut self, outcome: &Outcome, capture: &mut Capture) -> usize {
        if matches!(outcome, Outcome::Exited(_)) {
            return self.end_leftovers();
        }
        let mut buf = vec![0u8; 64 * 1024];
        terminate_group(
            self.pgid,
            &mut self.child,
            &mut self.output,
            capture,
            &mut buf,
        )
        .await;
        self.end_leftovers();
        0
    }

    /// Kills every process still carrying the command's marker (left the group, detached,
    /// re-parented) and disarms the guard. Returns how many were killed.
    fn end_leftovers(&mut self) -> usize {
        let killed = self.guard.sweep();
        self.guard.armed = false;
        killed
    }
}

/// The footer line saying how a `run_command` call ended (and how many processes it left
/// behind were killed), and whether the call failed.
fn footer(outcome: &Outcome, leftovers: usize, timeout_ms: u64) -> (String, bool) {
    match outcome {
        Outcome::Exited(s) => {
            let (mut footer, is_error) = describe_status(s);
            if leftovers > 0 {
                footer.push_str(&format!(
                    "\n[note: {leftovers} background process(es) the command left running were \
                     killed; commands may not leave processes behind]"
                ));
            }
            (footer, is_error)
        }
        Outcome::TimedOut => (
            format!(
                "[timed out after {timeout_ms} ms: the command and every process it started \
                 were killed; output so far is shown above]"
            ),
            true,
        ),
        Outcome::Cancelled => (
            "[cancelled: the command and every process it started were killed]".to_string(),
            true,
        ),
    }
}

/// `SIGTERM` to the group, `SIGKILL` after [`TERM_GRACE`] if anything is left; reaps the shell
/// and keeps reading output meanwhile.
async fn terminate_group(
    pgid: i32,
    child: &mut tokio::process::Child,
    output: &mut tokio::net::unix::pipe::Receiver,
    capture: &mut Capture,
    buf: &mut [u8],
) {
    signal_group(pgid, libc::SIGTERM);
    let grace_end = Instant::now() + TERM_GRACE;
    let mut eof = false;
    loop {
        // Reap the shell so that a zombie does not keep the group alive.
        let _ = child.try_wait();
        if group_gone(pgid) || Instant::now() >= grace_end {
            break;
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(10)) => {}
            r = output.read(buf), if !eof => match r {
                Ok(0) | Err(_) => eof = true,
                Ok(n) => capture.push(&buf[..n]),
            },
        }
    }
    signal_group(pgid, libc::SIGKILL);
    let _ = child.wait().await;
    // Whatever is still buffered in the pipe.
    while !eof {
        match tokio::time::timeout(DRAIN_AFTER_EXIT, output.read(buf)).await {
            Ok(Ok(n)) if n > 0 => capture.push(&buf[..n]),
            _ => eof = true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_removed_from_the_child_env() {
        let inherited = [
            ("PATH", "/bin"),
            ("ANTHROPIC_API_KEY", "k"),
            ("ANTHROPIC_BASE_URL", "u"),
            ("OPENAI_API_KEY", "k"),
            ("GROQ_API_KEY", "k"),
            ("my_api_key", "k"),
            ("GITHUB_AUTH_TOKEN", "k"),
            ("HOME", "/home/u"),
        ]
        .map(|(k, v)| (OsString::from(k), OsString::from(v)));
        let mut extra = BTreeMap::new();
        extra.insert("AHELPER_RUN_ID".to_string(), "r1".to_string());
        let env = command_env(inherited, &extra);
        let names: Vec<String> = env
            .iter()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .filter(|k| !k.starts_with("GIT_CONFIG_"))
            .collect();
        assert_eq!(names, ["AHELPER_RUN_ID", "HOME", "PATH"]);
        let value = |name: &str| {
            env.iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.to_string_lossy().into_owned())
        };
        assert_eq!(
            value("GIT_CONFIG_COUNT"),
            Some(GIT_HARDENING.len().to_string())
        );
        assert_eq!(value("GIT_CONFIG_KEY_0").as_deref(), Some("core.fsmonitor"));
        assert_eq!(value("GIT_CONFIG_VALUE_0").as_deref(), Some("false"));
    }

    #[test]
    fn capture_redacts_a_key_split_across_reads_and_at_the_cut() {
        let key = "sk-ant-0123456789abcdef";
        let redactor = crate::redact::Redactor::new([("ANTHROPIC_API_KEY", key)]).unwrap();
        let mut c = Capture::new(1000, redactor.stream());
        c.push(b"key: sk-ant-0123");
        c.push(b"456789abcdef\n");
        // A key straddling the point where the middle is cut.
        c.push(&vec![b'.'; 990]);
        c.push(key.as_bytes());
        c.push(&vec![b'.'; 3000]);
        let text = c.finish(600);
        assert!(
            text.starts_with("key: [REDACTED:ANTHROPIC_API_KEY]\n"),
            "{text}"
        );
        assert!(!text.contains("sk-ant-0"), "{text}");
    }

    #[test]
    fn capture_keeps_head_and_tail() {
        let mut c = Capture::new(1000, crate::redact::Redactor::default().stream());
        for i in 0..10_000u32 {
            c.push(format!("{i:05}\n").as_bytes());
        }
        let text = c.finish(600);
        assert!(text.starts_with("00000\n"));
        assert!(text.ends_with("09999\n"));
        assert!(text.contains("bytes cut from the middle"));
        assert!(text.chars().count() < 800);
    }
}
