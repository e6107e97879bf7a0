//! Peak memory of `ahelper swarm` by number of workers (issue 11 item 5), against one agent.
//!
//! The built binary runs against the fake LLM server (100 ms per reply, so the workers of a run
//! are alive at the same time) on a temporary git repository: a one-agent `ahelper -p` run
//! (write a file, answer), then swarms of 1, 2 and 8 workers, each worker writing its own file
//! and answering. Peak RSS is the `ru_maxrss` that `wait4` reports for the `ahelper` process
//! alone (the VmHWM of `/proc/<pid>/status` at exit; its `git` children are not counted).
//!
//! Printed, with the load average: each peak, the swarm's fixed cost over one agent
//! (`RSS(1 worker) − RSS(agent)`) and the per-worker slopes `RSS(2) − RSS(1)` and
//! `(RSS(8) − RSS(1)) / 7` against the target of 1 MiB per extra worker (`slope / 1 MiB =
//! ratio`). Each configuration runs [`ROUNDS`] times; the median is printed. Nothing is asserted
//! about the figures; a run that does not finish its work fails the bench.
//!
//! Run: `cargo bench --bench swarm_memory`.

use ahelper_fake_llm::{Conversation, FakeLlm, Script, Turn};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// Repositories made with the git CLI, as in the tests.
#[path = "../tests/suite/support/git.rs"]
mod git_cli;

const LATENCY_MS: u64 = 100;
const ROUNDS: usize = 3;
const COORDINATOR: &str = "You are the coordinator of a swarm";
const MIB: f64 = 1024.0 * 1024.0;

fn main() {
    println!("ahelper binary: {}", env!("CARGO_BIN_EXE_ahelper"));
    println!("load average before: {}", load_average());
    let agent = median((0..ROUNDS).map(|_| run_agent()).collect());
    println!(
        "one agent (`ahelper -p`):  peak RSS {:>6.1} MiB  [load {}]",
        agent / MIB,
        load_average()
    );
    let mut swarm = Vec::new();
    for workers in [1, 2, 8] {
        let peak = median((0..ROUNDS).map(|_| run_swarm(workers)).collect());
        println!(
            "swarm, {workers} worker(s):     peak RSS {:>6.1} MiB  [load {}]",
            peak / MIB,
            load_average()
        );
        swarm.push(peak);
    }
    println!(
        "swarm's fixed cost over one agent: {:.1} MiB",
        (swarm[0] - agent) / MIB
    );
    let slope_2 = (swarm[1] - swarm[0]) / MIB;
    let slope_8 = (swarm[2] - swarm[0]) / 7.0 / MIB;
    println!("per extra worker, 1 → 2 workers: {slope_2:.2} MiB / 1 MiB = {slope_2:.2}");
    println!("per extra worker, 1 → 8 workers: {slope_8:.2} MiB / 1 MiB = {slope_8:.2}");
}

/// A temporary git repository with `files` files and the swarm caps, plus isolated HOME/XDG dirs.
struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new(files: usize) -> Fixture {
        let f = Fixture {
            dir: tempfile::tempdir().expect("tempdir"),
        };
        std::fs::create_dir_all(f.home()).unwrap();
        let names: Vec<String> = (1..=files).map(file_name).collect();
        let mut tracked: Vec<(&str, &str)> = names.iter().map(|n| (n.as_str(), "old\n")).collect();
        let caps = format!("[swarm]\nmax_workers = {files}\nmax_subtasks = {files}\n");
        tracked.push((".gitignore", ".ahelper/\n"));
        git_cli::init_repo(&f.repo(), &tracked);
        std::fs::create_dir_all(f.repo().join(".ahelper")).unwrap();
        std::fs::write(f.repo().join(".ahelper/config.toml"), caps).unwrap();
        f
    }
    fn repo(&self) -> PathBuf {
        self.dir.path().join("repo")
    }
    fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }
}

fn file_name(i: usize) -> String {
    format!("f{i:02}.txt")
}

/// One worker's (or the agent's) work: write its file, answer.
fn writer(marker: String, file: &str) -> Conversation {
    Conversation::new()
        .matching(marker)
        .turn(Turn::tool_call(
            "write_file",
            json!({"path": file, "content": "new\n"}),
        ))
        .turn(Turn::text(format!("{file} written")))
}

fn run_agent() -> f64 {
    let fixture = Fixture::new(1);
    let script = Script::new()
        .with_latency_ms(LATENCY_MS)
        .with_conversation(writer("Rewrite the file".into(), &file_name(1)));
    let server = FakeLlm::start_blocking(script).expect("fake LLM server starts");
    let mut cmd = command(&fixture, &server);
    cmd.args([
        "-p",
        "Rewrite the file f01.txt.",
        "--permission-mode",
        "bypass",
    ]);
    let peak = peak_rss(cmd);
    assert_eq!(
        server.model_requests().len(),
        2,
        "the agent played its 2 turns"
    );
    peak
}

fn run_swarm(workers: usize) -> f64 {
    let fixture = Fixture::new(workers);
    let subtasks: Vec<Value> = (1..=workers)
        .map(|i| {
            json!({"id": format!("s{i}"), "title": format!("Edit {}", file_name(i)),
                   "instructions": format!("Rewrite {}.", file_name(i)),
                   "scope": [file_name(i)]})
        })
        .collect();
    let plan = json!({"summary": "one file each", "subtasks": subtasks}).to_string();
    let mut script = Script::new().with_latency_ms(LATENCY_MS).with_conversation(
        Conversation::new()
            .matching(COORDINATOR)
            .turn(Turn::text(plan)),
    );
    for i in 1..=workers {
        script = script.with_conversation(writer(format!("Your subtask `s{i}`"), &file_name(i)));
    }
    let server = FakeLlm::start_blocking(script).expect("fake LLM server starts");
    let mut cmd = command(&fixture, &server);
    cmd.args([
        "swarm",
        "edit every file",
        "--yes",
        "--permission-mode",
        "bypass",
    ]);
    let peak = peak_rss(cmd);
    let worker_requests = server
        .model_requests()
        .iter()
        .filter(|r| r.conversation.is_some_and(|c| c > 0))
        .count();
    assert_eq!(
        worker_requests,
        2 * workers,
        "every worker played its 2 turns"
    );
    peak
}

/// The binary in `fixture`'s repository with a clean environment, talking to `server`.
fn command(fixture: &Fixture, server: &FakeLlm) -> Command {
    let home = fixture.home();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ahelper"));
    cmd.current_dir(fixture.repo())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("XDG_STATE_HOME", home.join("state"))
        .envs(git_cli::GIT_ENV)
        .env("ANTHROPIC_API_KEY", "sk-bench")
        .env("ANTHROPIC_BASE_URL", server.base_url())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    cmd
}

/// Runs `cmd` to its end; its peak RSS in bytes. Fails the bench when it does not exit 0.
fn peak_rss(mut cmd: Command) -> f64 {
    let mut child = cmd.spawn().expect("ahelper starts");
    let stderr = child.stderr.take().expect("piped stderr");
    let reader = std::thread::spawn(move || std::io::read_to_string(stderr).unwrap_or_default());
    let (status, rusage) = wait4(child.id() as libc::pid_t);
    // The child was reaped by `wait4`; forget it so that its drop does not wait again.
    std::mem::forget(child);
    let stderr = reader.join().unwrap_or_default();
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "ahelper failed (status {status}): {stderr}"
    );
    // Linux reports ru_maxrss in KiB.
    rusage.ru_maxrss as f64 * 1024.0
}

/// Waits for `pid`; its wait status and resource usage (its own, children excluded).
fn wait4(pid: libc::pid_t) -> (libc::c_int, libc::rusage) {
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

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}
