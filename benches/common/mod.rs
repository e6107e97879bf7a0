//! What the root crate's benchmarks share: the temporary repository and isolated home an
//! `ahelper` process runs in, that process's command line and environment, running it to its
//! end with its wall time and peak RSS (`wait4`), the swarm's scripted plan and workers for the
//! fake LLM server, and the small statistics every report prints (medians, load average).
//!
//! Included by each benchmark with `mod common;`; each uses a part of it.
#![allow(dead_code, reason = "each benchmark uses a part of this module")]

use ahelper_fake_llm::{Conversation, FakeLlm, RecordedRequest, Script, Turn};
use serde_json::{Value, json};
use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

pub mod breakdown;
pub mod stats;

/// Repositories made with the git CLI, as in the tests.
#[path = "../../tests/suite/support/git.rs"]
pub mod git_cli;

/// The `ahelper` binary under measurement.
pub const BIN: &str = env!("CARGO_BIN_EXE_ahelper");

/// The marker of the coordinator's planning request (its system prompt).
pub const COORDINATOR: &str = "You are the coordinator of a swarm";

/// A temporary directory holding a git repository (`repo/`) and an isolated home (`home/`).
pub struct Fixture {
    /// The temporary directory; removed on drop.
    pub dir: tempfile::TempDir,
}

impl Fixture {
    /// `repo/`: a repository whose first commit holds `files` (path, content); `home/`: empty.
    pub fn new(files: &[(&str, &str)]) -> Fixture {
        let fixture = Fixture {
            dir: tempfile::tempdir().expect("tempdir"),
        };
        std::fs::create_dir_all(fixture.home()).expect("home dir");
        git_cli::init_repo(&fixture.repo(), files);
        fixture
    }

    /// A swarm's repository: one file per subtask ([`file_name`], holding `content(i)`) and
    /// `extra` in the first commit, and the caps `max_workers` and `max_subtasks = subtasks` in
    /// `.ahelper/config.toml`.
    pub fn swarm(
        subtasks: usize,
        max_workers: usize,
        content: impl Fn(usize) -> String,
        extra: &[(&str, &str)],
    ) -> Fixture {
        let numbered: Vec<(String, String)> =
            (1..=subtasks).map(|i| (file_name(i), content(i))).collect();
        let files: Vec<(&str, &str)> = numbered
            .iter()
            .map(|(name, text)| (name.as_str(), text.as_str()))
            .chain(extra.iter().copied())
            .collect();
        let fixture = Fixture::new(&files);
        fixture.write(
            ".ahelper/config.toml",
            &format!("[swarm]\nmax_workers = {max_workers}\nmax_subtasks = {subtasks}\n"),
        );
        fixture
    }

    /// The repository.
    pub fn repo(&self) -> PathBuf {
        self.dir.path().join("repo")
    }

    /// The isolated home: HOME, and the XDG config and state dirs below it.
    pub fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    /// The log file of a run in this home.
    pub fn log_file(&self) -> PathBuf {
        self.home().join("state/ahelper/logs/ahelper.log")
    }

    /// Writes `text` to `rel` in the repository (not committed), creating parent directories.
    pub fn write(&self, rel: &str, text: &str) {
        git_cli::write_file(&self.repo(), rel, text);
    }
}

/// The file of subtask `i`: `f01.txt`, `f02.txt`, …
pub fn file_name(i: usize) -> String {
    format!("f{i:02}.txt")
}

/// The environment of an isolated `ahelper`: the caller's PATH, HOME and the XDG config and
/// state dirs under `home`, and git's fixed identity without system configuration.
fn isolated_env(home: &Path) -> Vec<(OsString, OsString)> {
    let vars = [
        ("PATH", std::env::var_os("PATH").unwrap_or_default()),
        ("HOME", home.as_os_str().to_owned()),
        ("XDG_CONFIG_HOME", home.join("config").into_os_string()),
        ("XDG_STATE_HOME", home.join("state").into_os_string()),
    ];
    vars.into_iter()
        .chain(git_cli::GIT_ENV.map(|(key, value)| (key, value.into())))
        .map(|(key, value)| (key.into(), value))
        .collect()
}

/// [`BIN`], or the binary named by `AHELPER_BENCH_BIN` (another build, e.g. a copy of an
/// earlier commit's, to compare two builds under the same conditions), with nothing of the
/// caller's environment but PATH (see [`isolated_env`]), stdin closed. The benches' own
/// `ahelper` worker processes and every swarm run go through it.
pub fn ahelper(home: &Path) -> Command {
    let bin =
        std::env::var_os("AHELPER_BENCH_BIN").map_or_else(|| PathBuf::from(BIN), PathBuf::from);
    ahelper_at(&bin, home)
}

/// [`ahelper`] with the binary `bin` instead of [`BIN`] (e.g. another build, for an A/B).
pub fn ahelper_at(bin: &Path, home: &Path) -> Command {
    let mut cmd = Command::new(bin);
    cmd.env_clear()
        .envs(isolated_env(home))
        .stdin(Stdio::null());
    cmd
}

/// [`ahelper`] talking to the fake LLM server at `model_url` (Anthropic wire format) with a
/// made-up key.
pub fn ahelper_with_model(home: &Path, model_url: &str) -> Command {
    with_model(ahelper(home), model_url)
}

/// `cmd` given the fake LLM server at `model_url` (Anthropic wire format) and a made-up key.
fn with_model(mut cmd: Command, model_url: &str) -> Command {
    cmd.env("ANTHROPIC_API_KEY", "sk-bench-not-a-real-key")
        .env("ANTHROPIC_BASE_URL", model_url);
    cmd
}

/// A process run to its end by [`run_to_end`].
pub struct Finished {
    /// When it was spawned.
    pub started: Instant,
    /// Spawn → reaped.
    pub wall: Duration,
    /// How it ended.
    pub status: ExitStatus,
    /// Peak resident set of the process alone (`ru_maxrss`; its children are not counted),
    /// bytes. Never below [`Finished::carried_rss`].
    pub max_rss: u64,
    /// The benchmark's own resident set when it spawned the process, bytes: the kernel counts
    /// it in the child's `ru_maxrss` (see [`reset_own_peak_rss`]), so a `max_rss` at or below
    /// it is the benchmark's, not the child's.
    pub carried_rss: u64,
    /// What it printed on stdout.
    pub stdout: String,
    /// What it printed on stderr.
    pub stderr: String,
}

impl Finished {
    /// When it was reaped.
    pub fn ended(&self) -> Instant {
        self.started + self.wall
    }

    /// Fails the benchmark unless it exited 0 having printed `answer`.
    pub fn assert_answered(&self, answer: &str) {
        assert!(
            self.status.success() && self.stdout.contains(answer),
            "ahelper -p failed ({}):\nstdout: {}\nstderr: {}",
            self.status,
            self.stdout,
            self.stderr
        );
    }

    /// Fails the benchmark with `what`, the status and stderr unless it exited 0.
    pub fn assert_success(&self, what: &str) {
        assert!(
            self.status.success(),
            "{what} failed ({}): {}",
            self.status,
            self.stderr
        );
    }
}

/// Runs `ahelper -C <repo> <args>…` in `home` against `server` to its end; how it ended and the
/// model requests it made.
pub fn run_in_repo(
    server: &FakeLlm,
    repo: &Path,
    home: &Path,
    args: &[&str],
) -> (Finished, Vec<RecordedRequest>) {
    run_in_repo_with(Path::new(BIN), server, repo, home, args)
}

/// [`run_in_repo`] with the binary `bin` instead of [`BIN`].
pub fn run_in_repo_with(
    bin: &Path,
    server: &FakeLlm,
    repo: &Path,
    home: &Path,
    args: &[&str],
) -> (Finished, Vec<RecordedRequest>) {
    let before = server.model_request_count();
    let mut cmd = with_model(ahelper_at(bin, home), &server.base_url());
    let finished = run_to_end(cmd.arg("-C").arg(repo).args(args));
    let requests = server.model_requests_since(before);
    (finished, requests)
}

/// Spawns `cmd` with its stdout and stderr read into strings, waits for it with `wait4` and
/// returns what it printed, its exit status, wall time and peak RSS.
pub fn run_to_end(cmd: &mut Command) -> Finished {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let carried_rss = reset_own_peak_rss();
    let started = Instant::now();
    let mut child = cmd.spawn().expect("the process starts");
    let stdout = read_in_background(child.stdout.take());
    let stderr = read_in_background(child.stderr.take());
    let (status, rusage) = wait4(&child);
    let wall = started.elapsed();
    // The child was reaped by `wait4`; forget it so that its drop does not wait again.
    std::mem::forget(child);
    Finished {
        started,
        wall,
        status: ExitStatus::from_raw(status),
        // Linux reports ru_maxrss in KiB.
        max_rss: rusage.ru_maxrss as u64 * 1024,
        carried_rss,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    }
}

/// Resets this process's peak resident set to its current one (`/proc/self/clear_refs`) and
/// returns that, bytes.
///
/// `Command` spawns with `posix_spawn`, whose child runs in this process's address space until
/// it execs, and at the exec Linux counts that address space's peak in the child's
/// `ru_maxrss`. Without the reset a child's peak RSS would read as the benchmark's own peak
/// whenever that is larger (it grows over a run with the requests the fake server keeps: from
/// 7 to 43 MiB over the one-shot bench, above `ahelper -p`'s ~21 MiB after a few runs). After
/// it, what the child carries is the benchmark's current resident set, the returned value.
/// Panics if the files of `/proc/self` cannot be used.
pub fn reset_own_peak_rss() -> u64 {
    // "5" resets the peak RSS (proc(5), /proc/pid/clear_refs).
    std::fs::write("/proc/self/clear_refs", "5").expect("/proc/self/clear_refs is writable");
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kib = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .ok()
        })
        .expect("/proc/self/status has VmRSS");
    kib * 1024
}

/// Reads the piped output `pipe` to its end on a thread of its own.
fn read_in_background<R: std::io::Read + Send + 'static>(
    pipe: Option<R>,
) -> std::thread::JoinHandle<String> {
    let pipe = pipe.expect("piped output");
    std::thread::spawn(move || std::io::read_to_string(pipe).unwrap_or_default())
}

/// Waits for `child`; its wait status and resource usage (its own, children excluded).
fn wait4(child: &Child) -> (libc::c_int, libc::rusage) {
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    // SAFETY: an all-zero `rusage` is a valid value of this plain C struct.
    let mut rusage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `status` and `rusage` are valid, exclusively borrowed out-pointers.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut rusage) };
        if r == pid {
            return (status, rusage);
        }
        let err = std::io::Error::last_os_error();
        assert_eq!(
            err.kind(),
            std::io::ErrorKind::Interrupted,
            "wait4 failed: {err}"
        );
    }
}

/// Copies the binary `bin` to `dest`, writes the copy to disk and drops it from the page
/// cache, so that a peak RSS measured of it does not depend on how `bin`'s file was written.
///
/// `ru_maxrss` counts the pages of the binary the process maps (about 15 of the ~21 MiB of
/// `ahelper -p`), and how many the kernel maps around each page the process runs depends on
/// the page cache's folios (Linux maps a whole large folio where it can, whose size depends on
/// how the file was written or read). The same bytes measured 24.6 MiB as written by `cp`,
/// 22.2 MiB by `cat`, 20.3 MiB in 4 KiB writes, and 21.0 MiB for each once dropped from the
/// cache and read back by the process's own page faults. A private copy is mapped by no other
/// process, so all its pages can be dropped; the first run reads it back from disk (let it be a
/// warm-up run). Panics if the copy cannot be made.
pub fn uncached_copy(bin: &Path, dest: &Path) {
    use std::os::fd::AsRawFd as _;
    std::fs::copy(bin, dest)
        .unwrap_or_else(|err| panic!("copying {} failed: {err}", bin.display()));
    let copy = std::fs::File::open(dest).expect("the copy opens");
    // Dirty pages would stay in the cache: write them out first.
    copy.sync_all().expect("the copy is written to disk");
    // SAFETY: a plain system call on a descriptor this process owns.
    let err = unsafe { libc::posix_fadvise(copy.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    assert_eq!(err, 0, "posix_fadvise(DONTNEED) failed: error {err}");
}

/// Child processes killed (SIGKILL) and reaped when this is dropped.
pub struct KillOnDrop(pub Vec<Child>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The coordinator's planning reply: one subtask `s<i>` per file ([`file_name`]).
pub fn plan(subtasks: usize) -> String {
    let subtasks: Vec<Value> = (1..=subtasks)
        .map(|i| {
            json!({"id": format!("s{i}"), "title": format!("Edit {}", file_name(i)),
                   "instructions": format!("Rewrite {}.", file_name(i)),
                   "scope": [file_name(i)]})
        })
        .collect();
    json!({"summary": "one file each", "subtasks": subtasks}).to_string()
}

/// A swarm's script at `latency_ms` per reply: the coordinator's [`plan`] (conversation 0),
/// then `worker(i)` for each subtask `s<i>` (conversation `i`).
pub fn swarm_script(
    subtasks: usize,
    latency_ms: u64,
    worker: impl Fn(usize) -> Conversation,
) -> Script {
    let coordinator = Conversation::new()
        .named("coordinator")
        .matching(COORDINATOR)
        .turn(Turn::text(plan(subtasks)));
    (1..=subtasks).fold(
        Script::new()
            .with_latency_ms(latency_ms)
            .with_conversation(coordinator),
        |script, i| script.with_conversation(worker(i)),
    )
}

/// The conversation of subtask `s<i>`'s worker, without turns yet.
pub fn worker(i: usize) -> Conversation {
    Conversation::new()
        .named(format!("s{i}"))
        .matching(format!("Your subtask `s{i}`"))
}

/// `turns - 1` tool calls of worker `i` on its file, alternating `write_file` and `read_file`,
/// added to `conversation` (the final text is the caller's).
pub fn edit_turns(conversation: Conversation, i: usize, turns: u64) -> Conversation {
    let file = file_name(i);
    (1..turns).fold(conversation, |c, t| {
        c.turn(if t % 2 == 1 {
            Turn::tool_call(
                "write_file",
                json!({"path": file, "content": format!("worker {i} turn {t}\n")}),
            )
        } else {
            Turn::tool_call("read_file", json!({"path": file}))
        })
    })
}

/// When the requests of the workers (conversations after the coordinator's) arrived.
pub fn worker_arrivals(requests: &[RecordedRequest]) -> Vec<Instant> {
    requests
        .iter()
        .filter(|r| r.conversation.is_some_and(|c| c > 0))
        .map(|r| r.received)
        .collect()
}

/// When the coordinator's first (planning) request arrived.
pub fn planning_arrival(requests: &[RecordedRequest]) -> Instant {
    requests
        .iter()
        .filter(|r| r.conversation == Some(0))
        .map(|r| r.received)
        .min()
        .expect("the coordinator planned")
}
