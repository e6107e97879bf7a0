//! Distributed swarms (issue 13): the built `ahelper` binary as coordinator (`swarm --nats`)
//! and as worker processes (`ahelper worker`), a real `nats-server -js` on 127.0.0.1, a bare
//! repository as the shared git remote, the fake LLM server at 200 ms per reply. Measured in one
//! run and printed as figures and ratios (never asserted), each configuration interleaved with
//! its local counterpart so that load changes hit both alike:
//!
//! 1. Dispatch overhead per subtask: 4 subtasks × 2 turns one after another (`max_workers =
//!    1`), locally and on one worker process. The span from the planning reply (coordinator
//!    request received + latency) to the process's exit covers every dispatch, worker run,
//!    merge and the closing turn; (span over NATS − span local) / 4 is what NATS, the pushes and
//!    fetches of the shared remote and the worker's clone add per subtask. Target ≤ 50 ms.
//! 2. 16 subtasks × 5 turns (4 tool-call turns + a final text turn) on 4 worker processes of 4
//!    slots each (`max_workers = 16`): the worker phase (first worker request received → last
//!    worker reply sent) against the ideal 5 × 200 ms, and the whole process against the ideal
//!    (planning + 5 worker turns + closing turn) × 200 ms, beside the same run with local
//!    workers. Target ≤ 1.15×.
//!
//! The median of a few rounds is printed with the load average before and after.
//!
//! Run: `cargo bench --bench nats` (needs `nats-server` on PATH; Debian: `apt-get install
//! nats-server`).

use ahelper_fake_llm::{Conversation, FakeLlm, RecordedRequest, Script, Turn};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Repositories made with the git CLI, as in the tests.
#[path = "../tests/suite/support/git.rs"]
mod git_cli;

/// Fake model latency per reply, ms.
const LATENCY_MS: u64 = 200;
/// Runs per configuration (median reported).
const ROUNDS: usize = 3;
/// Subtasks of the dispatch measurement, run one after another.
const SERIAL_SUBTASKS: usize = 4;
/// Subtasks, turns each, worker processes and slots per process of the throughput measurement.
const WIDE_SUBTASKS: usize = 16;
const WIDE_TURNS: u64 = 5;
const WORKER_PROCESSES: usize = 4;
const SLOTS_PER_PROCESS: usize = 4;

const COORDINATOR: &str = "You are the coordinator of a swarm";

/// A temporary repository with one file per subtask, the swarm caps in `.ahelper/config.toml`,
/// a bare clone as its `origin`, and isolated HOME/XDG dirs.
struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new(subtasks: usize, max_workers: usize) -> Fixture {
        let f = Fixture {
            dir: tempfile::tempdir().expect("tempdir"),
        };
        std::fs::create_dir_all(f.repo()).unwrap();
        std::fs::create_dir_all(f.home()).unwrap();
        let files: Vec<(String, String)> = (1..=subtasks)
            .map(|i| (file_name(i), format!("file {i}\n")))
            .collect();
        let files: Vec<(&str, &str)> = files
            .iter()
            .map(|(n, c)| (n.as_str(), c.as_str()))
            .collect();
        git_cli::init_repo(&f.repo(), &files);
        std::fs::create_dir_all(f.repo().join(".ahelper")).unwrap();
        std::fs::write(
            f.repo().join(".ahelper/config.toml"),
            format!("[swarm]\nmax_workers = {max_workers}\nmax_subtasks = {subtasks}\n"),
        )
        .unwrap();
        let remote = f.dir.path().join("remote.git");
        git_cli::git(
            f.dir.path(),
            &[
                "clone",
                "-q",
                "--bare",
                f.repo().to_str().unwrap(),
                remote.to_str().unwrap(),
            ],
        );
        git_cli::git(
            &f.repo(),
            &["remote", "add", "origin", remote.to_str().unwrap()],
        );
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

/// The plan (one subtask per file) and each worker's `turns` turns: writes and reads of its
/// file, then a final text.
fn script(subtasks: usize, turns: u64) -> Script {
    let plan: Vec<Value> = (1..=subtasks)
        .map(|i| {
            json!({"id": format!("s{i}"), "title": format!("Edit {}", file_name(i)),
                   "instructions": format!("Rewrite {}.", file_name(i)),
                   "scope": [file_name(i)]})
        })
        .collect();
    let plan = json!({"summary": "one file each", "subtasks": plan}).to_string();
    let mut script = Script::new().with_latency_ms(LATENCY_MS).with_conversation(
        Conversation::new()
            .named("coordinator")
            .matching(COORDINATOR)
            .turn(Turn::text(plan)),
    );
    for i in 1..=subtasks {
        let file = file_name(i);
        let mut c = Conversation::new()
            .named(format!("s{i}"))
            .matching(format!("Your subtask `s{i}`"));
        for t in 1..turns {
            c = c.turn(if t % 2 == 1 {
                Turn::tool_call(
                    "write_file",
                    json!({"path": file, "content": format!("worker {i} turn {t}\n")}),
                )
            } else {
                Turn::tool_call("read_file", json!({"path": file}))
            });
        }
        script = script.with_conversation(c.turn(Turn::text(format!("s{i} done"))));
    }
    script
}

/// A `nats-server -js` on a free port of 127.0.0.1, killed on drop.
struct Nats {
    child: Child,
    port: u16,
    _store: tempfile::TempDir,
}

impl Nats {
    fn start() -> Option<Nats> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .ok()?
            .port();
        let store = tempfile::tempdir().ok()?;
        let child = Command::new("nats-server")
            .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
            .arg(store.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(Nats {
            child,
            port,
            _store: store,
        })
    }
    fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `ahelper worker` processes for one round (their model URL is the round's server), stopped
/// with SIGKILL on drop (their subtasks are all done by then).
struct Workers {
    children: Vec<Child>,
    _dir: tempfile::TempDir,
}

impl Workers {
    fn start(nats: &str, model: &str, processes: usize, slots: usize) -> Workers {
        let dir = tempfile::tempdir().expect("tempdir");
        let children = (1..=processes)
            .map(|p| {
                let home = dir.path().join(format!("home{p}"));
                std::fs::create_dir_all(&home).unwrap();
                Command::new(env!("CARGO_BIN_EXE_ahelper"))
                    .args(["worker", "--nats", nats, "--name", &format!("bench-{p}")])
                    .args(["--concurrency", &slots.to_string(), "--work-dir"])
                    .arg(dir.path().join(format!("work{p}")))
                    .args(["--permission-mode", "bypass"])
                    .current_dir(&home)
                    .env_clear()
                    .env("PATH", std::env::var("PATH").unwrap_or_default())
                    .env("HOME", &home)
                    .env("XDG_CONFIG_HOME", home.join("config"))
                    .env("XDG_STATE_HOME", home.join("state"))
                    .envs(git_cli::GIT_ENV)
                    .env("AHELPER_LOG", "warn")
                    .env("ANTHROPIC_API_KEY", "sk-bench")
                    .env("ANTHROPIC_BASE_URL", model)
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .expect("ahelper worker starts")
            })
            .collect();
        // let them connect and start pulling
        std::thread::sleep(Duration::from_millis(1500));
        Workers {
            children,
            _dir: dir,
        }
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// One measured run.
#[derive(Clone, Copy)]
struct Sample {
    /// Spawn → exit of the coordinator.
    process: Duration,
    /// Planning reply sent → exit.
    after_plan: Duration,
    /// First worker request received → last worker reply sent.
    worker_phase: Duration,
}

/// Where the workers run.
#[derive(Clone, Copy)]
enum Slots<'a> {
    Local,
    Nats {
        url: &'a str,
        processes: usize,
        slots: usize,
    },
}

/// Runs one swarm of `subtasks` × `turns` with `max_workers`, its workers in `slots`.
fn run(subtasks: usize, turns: u64, max_workers: usize, slots: Slots) -> Sample {
    let fixture = Fixture::new(subtasks, max_workers);
    let server = FakeLlm::start_blocking(script(subtasks, turns)).expect("fake LLM server starts");
    let _workers = match slots {
        Slots::Local => None,
        Slots::Nats {
            url,
            processes,
            slots,
        } => Some(Workers::start(url, &server.base_url(), processes, slots)),
    };
    let home = fixture.home();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ahelper"));
    cmd.current_dir(fixture.repo())
        .args(["swarm", "edit every file", "--yes", "--no-verify"])
        .args(["--permission-mode", "bypass"])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("XDG_STATE_HOME", home.join("state"))
        .envs(git_cli::GIT_ENV)
        .env("AHELPER_LOG", "warn")
        .env("ANTHROPIC_API_KEY", "sk-bench")
        .env("ANTHROPIC_BASE_URL", server.base_url())
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    if let Slots::Nats { url, .. } = slots {
        cmd.args(["--nats", url]);
    }
    let started = Instant::now();
    let out = cmd.output().expect("ahelper runs");
    let ended = Instant::now();
    assert!(
        out.status.success(),
        "ahelper swarm failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    sample(
        &server.model_requests(),
        subtasks * turns as usize,
        started,
        ended,
    )
}

fn sample(
    requests: &[RecordedRequest],
    worker_turns: usize,
    started: Instant,
    ended: Instant,
) -> Sample {
    let latency = Duration::from_millis(LATENCY_MS);
    let plan_sent = requests
        .iter()
        .filter(|r| r.conversation == Some(0))
        .map(|r| r.received)
        .min()
        .expect("the coordinator planned")
        + latency;
    let workers: Vec<Instant> = requests
        .iter()
        .filter(|r| r.conversation.is_some_and(|c| c > 0))
        .map(|r| r.received)
        .collect();
    assert_eq!(workers.len(), worker_turns, "every worker played its turns");
    let first = *workers.iter().min().unwrap();
    let last = *workers.iter().max().unwrap();
    Sample {
        process: ended - started,
        after_plan: ended.saturating_duration_since(plan_sent),
        worker_phase: last - first + latency,
    }
}

fn median(samples: &[Sample], f: impl Fn(&Sample) -> Duration) -> Duration {
    let mut v: Vec<Duration> = samples.iter().map(f).collect();
    v.sort();
    v[v.len() / 2]
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Figure 1: what NATS adds per subtask.
fn dispatch_overhead(url: &str) {
    let (mut local, mut remote) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        local.push(run(SERIAL_SUBTASKS, 2, 1, Slots::Local));
        remote.push(run(
            SERIAL_SUBTASKS,
            2,
            1,
            Slots::Nats {
                url,
                processes: 1,
                slots: 1,
            },
        ));
    }
    let (l, r) = (
        median(&local, |s| s.after_plan),
        median(&remote, |s| s.after_plan),
    );
    let added = (ms(r) - ms(l)) / SERIAL_SUBTASKS as f64;
    println!(
        "\n1. dispatch overhead, {SERIAL_SUBTASKS} subtasks x 2 turns one after another (median of {ROUNDS}):"
    );
    println!(
        "  planning reply -> exit: local {:.0} ms, over NATS {:.0} ms: {added:.1} ms added per subtask (target <= 50 ms)",
        ms(l),
        ms(r)
    );
    println!(
        "  whole process: local {:.0} ms, over NATS {:.0} ms",
        ms(median(&local, |s| s.process)),
        ms(median(&remote, |s| s.process))
    );
}

/// Figure 2: 16 × 5 on 4 worker processes against the ideal.
fn throughput(url: &str) {
    let (mut local, mut remote) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        local.push(run(WIDE_SUBTASKS, WIDE_TURNS, WIDE_SUBTASKS, Slots::Local));
        remote.push(run(
            WIDE_SUBTASKS,
            WIDE_TURNS,
            WIDE_SUBTASKS,
            Slots::Nats {
                url,
                processes: WORKER_PROCESSES,
                slots: SLOTS_PER_PROCESS,
            },
        ));
    }
    let ideal_workers = Duration::from_millis(WIDE_TURNS * LATENCY_MS);
    let ideal_process = Duration::from_millis((WIDE_TURNS + 2) * LATENCY_MS);
    println!(
        "\n2. {WIDE_SUBTASKS} subtasks x {WIDE_TURNS} turns, max_workers = {WIDE_SUBTASKS} (median of {ROUNDS}):"
    );
    let label = format!("{WORKER_PROCESSES} worker processes x {SLOTS_PER_PROCESS}");
    for (label, samples) in [("local workers", &local), (label.as_str(), &remote)] {
        let phase = median(samples, |s| s.worker_phase);
        let process = median(samples, |s| s.process);
        println!(
            "  {label}: worker phase {:.0} ms = {:.2}x ideal {:.0} ms (target <= 1.15x); whole process {:.0} ms = {:.2}x ideal {:.0} ms",
            ms(phase),
            phase.as_secs_f64() / ideal_workers.as_secs_f64(),
            ms(ideal_workers),
            ms(process),
            process.as_secs_f64() / ideal_process.as_secs_f64(),
            ms(ideal_process),
        );
    }
}

fn main() {
    let Some(nats) = Nats::start() else {
        println!(
            "nats benchmark skipped: nats-server is not on PATH (apt-get install nats-server)"
        );
        return;
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "nats benchmark: fake model at {LATENCY_MS} ms per reply, {cores} cores, load average {} before",
        load_average()
    );
    let url = nats.url();
    dispatch_overhead(&url);
    throughput(&url);
    println!("\nload average after: {}\n", load_average());
}
