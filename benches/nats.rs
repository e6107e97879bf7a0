//! Distributed swarms (issue 13): the built `ahelper` binary as coordinator (`swarm --nats`)
//! and as worker processes (`ahelper worker`), a real `nats-server -js` on 127.0.0.1, a bare
//! repository as the shared git remote, the fake LLM server at 200 ms per reply. Measured in one
//! run and printed as figures and ratios (never asserted), each configuration interleaved with
//! its local counterpart so that load changes hit both alike:
//!
//! 1. Dispatch overhead per subtask: 4 subtasks × 2 turns one after another (`maxworkers =
//!    1`), locally and on one worker process. The span from the planning reply (coordinator
//!    request received + latency) to the process's exit covers every dispatch, worker run,
//!    merge and the closing turn; (span over NATS − span local) / 4 is what NATS, the pushes and
//!    fetches of the shared remote and the worker's clone add per subtask. Target ≤ 50 ms.
//! 2. 16 subtasks × 5 turns (4 tool-call turns + a final text turn) on 4 worker processes of 4
//!    slots each (`maxworkers = 16`): the worker phase (first worker request received → last
//!    worker reply sent) against the ideal 5 × 200 ms, and the whole process against the ideal
//!    (planning + 5 worker turns + closing turn) × 200 ms, beside the same run with local
//!    workers. Target ≤ 1.15×.
//!
//! The median of a few rounds is printed with the load average before and after.
//!
//! With `AHELPER_BENCH_LOGS=<dir>`, the coordinator and the worker processes log at the level
//! `AHELPER_BENCH_LOG_LEVEL` (default `debug`) and each run's logs are copied to `<dir>` as
//! `<local|nats>-<subtasks>x<turns>-<time>-<process>.log` (the timings then include logging),
//! beside `<…>-model.log`, the arrival and reply times of every model request (to line up each
//! subtask's steps: publish, pull, fetch, worktree, model turns, commit, push, report, fetch).
//!
//! `AHELPER_BENCH_BIN=<path>` runs another `ahelper` build instead (e.g. a copy of an earlier
//! commit's binary), for a before/after under the same conditions.
//!
//! Run: `cargo bench --bench nats` (`-- dispatch` or `-- throughput` for one figure; needs `nats-server` on PATH; Debian: `apt-get install
//! nats-server`).

mod common;
use ahelper_fake_llm::{FakeLlm, RecordedRequest, Script, Turn};
use common::breakdown::Breakdown;
use common::stats::{journal_less_temp_dir, load_average, median, ms, print_against_ideal};
use common::{
    Finished, Fixture, KillOnDrop, ahelper_with_model, edit_turns, git_cli, planning_arrival,
    run_to_end, swarm_script, worker, worker_arrivals,
};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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

/// A swarm's repository ([`Fixture::swarm`], `file <i>` in each subtask's file) with a bare
/// clone as its `origin`.
fn fixture(subtasks: usize, maxworkers: usize) -> Fixture {
    let fixture = Fixture::swarm(subtasks, maxworkers, |i| format!("file {i}\n"), &[]);
    let (repo, remote) = (fixture.repo(), fixture.dir.path().join("remote.git"));
    let (repo, remote) = (repo.to_str().unwrap(), remote.to_str().unwrap());
    git_cli::git(fixture.dir.path(), &["clone", "-q", "--bare", repo, remote]);
    git_cli::git(&fixture.repo(), &["remote", "add", "origin", remote]);
    fixture
}

/// The plan (one subtask per file) and each worker's `turns` turns: writes and reads of its
/// file, then a final text.
fn script(subtasks: usize, turns: u64) -> Script {
    swarm_script(subtasks, LATENCY_MS, |i| {
        edit_turns(worker(i), i, turns).turn(Turn::text(format!("s{i} done")))
    })
}

/// A `nats-server -js` on a free port of 127.0.0.1, killed on drop.
struct Nats {
    _process: KillOnDrop,
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
        let process = Command::new("nats-server")
            .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
            .arg(store.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let nats = Nats {
            _process: KillOnDrop(vec![process]),
            port,
            _store: store,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Some(nats)
    }

    fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }
}

/// The log level of the bench's ahelper processes: `warn`, or `AHELPER_BENCH_LOG_LEVEL`
/// (default `debug`) when `AHELPER_BENCH_LOGS` names a directory to keep the logs in.
fn log_level() -> String {
    match std::env::var_os("AHELPER_BENCH_LOGS") {
        Some(_) => std::env::var("AHELPER_BENCH_LOG_LEVEL").unwrap_or_else(|_| "debug".into()),
        None => "warn".into(),
    }
}

/// Copies the log of the ahelper process whose home is `home` to `AHELPER_BENCH_LOGS` (when
/// set) as `<run>-<process>.log`.
fn keep_log(home: &std::path::Path, run: &str, process: &str) {
    let Some(dir) = std::env::var_os("AHELPER_BENCH_LOGS") else {
        return;
    };
    let dir = std::path::PathBuf::from(dir);
    let _ = std::fs::create_dir_all(&dir);
    let log = home.join("state/ahelper/logs/ahelper.log");
    let _ = std::fs::copy(log, dir.join(format!("{run}-{process}.log")));
}

/// Writes the model requests of a run to `AHELPER_BENCH_LOGS` (when set) as `<run>-model.log`:
/// one line per request, `<arrival> <reply sent> conversation=<c>` (seconds since the Unix
/// epoch; conversation 0 is the coordinator's, `i` worker `i`'s), to line up with the
/// processes' logs.
fn keep_model_log(requests: &[RecordedRequest], run: &str) {
    let Some(dir) = std::env::var_os("AHELPER_BENCH_LOGS") else {
        return;
    };
    let epoch = |t: std::time::SystemTime| {
        t.duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64())
    };
    let lines: String = requests
        .iter()
        .map(|r| {
            let replied = r.replied.map(|at| r.received_at + (at - r.received));
            format!(
                "{:.6} {:.6} conversation={}\n",
                epoch(r.received_at),
                replied.map_or(0.0, epoch),
                r.conversation.map_or(-1, |c| c as i64)
            )
        })
        .collect();
    let path = std::path::PathBuf::from(dir).join(format!("{run}-model.log"));
    let _ = std::fs::write(path, lines);
}

/// `ahelper worker` processes for one round (their model URL is the round's server), stopped
/// with SIGKILL on drop (their subtasks are all done by then).
struct Workers {
    _processes: KillOnDrop,
    dir: tempfile::TempDir,
    count: usize,
}

/// The coordinator's signing key in the benches (the tests' key: test data, not a secret).
const COORDINATOR_KEY_FILE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/nats-coordinator.nk"
);
/// Its public key, which the bench's worker machines trust.
const COORDINATOR_KEY: &str = "UAWXANW4VWPAOTF5YIAW3BQITPKSHWTSYSYHFMLAVDP6FVNVHP4AYZA5";

/// Everything under the temp dir, where the bench's bare remote is.
fn temp_repos() -> String {
    let tmp = std::env::temp_dir().display().to_string();
    format!("{}/", tmp.trim_end_matches('/'))
}

impl Workers {
    /// Copies the workers' logs (see [`keep_log`]).
    fn keep_logs(&self, run: &str) {
        for p in 1..=self.count {
            let home = self.dir.path().join(format!("home{p}"));
            keep_log(&home, run, &format!("worker{p}"));
        }
    }
}

impl Workers {
    fn start(nats: &str, model: &str, processes: usize, slots: usize) -> Workers {
        let dir = tempfile::tempdir().expect("tempdir");
        let children = (1..=processes)
            .map(|p| {
                let home = dir.path().join(format!("home{p}"));
                std::fs::create_dir_all(&home).unwrap();
                ahelper_with_model(&home, model)
                    .args(["worker", "--nats", nats, "--name", &format!("bench-{p}")])
                    .args(["--concurrency", &slots.to_string(), "--work-dir"])
                    .arg(dir.path().join(format!("work{p}")))
                    .args(["--permission-mode", "bypass"])
                    .args(["--trust-coordinator", COORDINATOR_KEY])
                    .args(["--allow-repo", &temp_repos()])
                    .current_dir(&home)
                    .env("AHELPER_LOG", log_level())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .expect("ahelper worker starts")
            })
            .collect();
        // let them connect and start pulling
        std::thread::sleep(Duration::from_millis(1500));
        Workers {
            _processes: KillOnDrop(children),
            dir,
            count: processes,
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
    /// Where the time beyond the ideal went.
    breakdown: Breakdown,
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

/// Runs one swarm of `subtasks` × `turns` with `maxworkers`, its workers in `slots`.
fn run(subtasks: usize, turns: u64, maxworkers: usize, slots: Slots) -> Sample {
    let fixture = fixture(subtasks, maxworkers);
    let server = FakeLlm::start_blocking(script(subtasks, turns)).expect("fake LLM server starts");
    let workers = match slots {
        Slots::Local => None,
        Slots::Nats {
            url,
            processes,
            slots,
        } => Some(Workers::start(url, &server.base_url(), processes, slots)),
    };
    let mut cmd = ahelper_with_model(&fixture.home(), &server.base_url());
    cmd.current_dir(fixture.repo())
        .args(["swarm", "edit every file", "--yes", "--no-verify"])
        .args(["--permission-mode", "bypass"])
        .env("AHELPER_LOG", log_level());
    if let Slots::Nats { url, .. } = slots {
        cmd.args(["--nats", url])
            .env("AHELPER_NATS_SIGNING_KEY", COORDINATOR_KEY_FILE);
    }
    let finished = run_to_end(&mut cmd);
    finished.assert_success("ahelper swarm");
    let at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let kind = if workers.is_some() { "nats" } else { "local" };
    let label = format!("{kind}-{subtasks}x{turns}-{at}");
    keep_log(&fixture.home(), &label, "coordinator");
    keep_model_log(&server.model_requests(), &label);
    if let Some(workers) = &workers {
        workers.keep_logs(&label);
    }
    sample(
        &server.model_requests(),
        subtasks * turns as usize,
        &finished,
    )
}

fn sample(requests: &[RecordedRequest], worker_turns: usize, finished: &Finished) -> Sample {
    let latency = Duration::from_millis(LATENCY_MS);
    let plan_sent = planning_arrival(requests) + latency;
    let workers = worker_arrivals(requests);
    assert_eq!(workers.len(), worker_turns, "every worker played its turns");
    let first = *workers.iter().min().unwrap();
    let last = *workers.iter().max().unwrap();
    Sample {
        process: finished.wall,
        after_plan: finished.ended().saturating_duration_since(plan_sent),
        worker_phase: last - first + latency,
        breakdown: Breakdown::of(requests, finished.started, finished.ended()),
    }
}

/// The median of `f` over `samples`.
fn median_of(samples: &[Sample], f: impl Fn(&Sample) -> Duration) -> Duration {
    median(samples.iter().map(f).collect())
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
        median_of(&local, |s| s.after_plan),
        median_of(&remote, |s| s.after_plan),
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
        ms(median_of(&local, |s| s.process)),
        ms(median_of(&remote, |s| s.process))
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
    let ideals = (
        Duration::from_millis(WIDE_TURNS * LATENCY_MS),
        Duration::from_millis((WIDE_TURNS + 2) * LATENCY_MS),
    );
    println!(
        "\n2. {WIDE_SUBTASKS} subtasks x {WIDE_TURNS} turns, maxworkers = {WIDE_SUBTASKS} (median of {ROUNDS}):"
    );
    let label = format!("{WORKER_PROCESSES} worker processes x {SLOTS_PER_PROCESS}: ");
    for (label, samples) in [("local workers: ", &local), (label.as_str(), &remote)] {
        let medians = (
            median_of(samples, |s| s.worker_phase),
            median_of(samples, |s| s.process),
        );
        print_against_ideal(label, medians, ideals, 1.15);
        Breakdown::print_median(samples.iter().map(|s| s.breakdown));
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
    if let Some(note) = journal_less_temp_dir() {
        println!("{note}");
    }
    let url = nats.url();
    // `cargo bench --bench nats -- dispatch` (or `throughput`) runs one figure only.
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wanted = |figure: &str| only.is_empty() || only.iter().any(|o| o == figure);
    if wanted("dispatch") {
        dispatch_overhead(&url);
    }
    if wanted("throughput") {
        throughput(&url);
    }
    println!("\nload average after: {}\n", load_average());
}
