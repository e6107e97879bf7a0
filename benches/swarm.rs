//! The whole swarm, end to end: the built `ahelper` binary runs `swarm` against the fake LLM
//! server (200 ms per model reply) on a temporary git repository. Measured in one run and printed
//! as figures and ratios (never asserted):
//!
//! 1. 16 workers × 5 turns (4 tool-call turns + a final text turn) with `max_workers = 16`: the
//!    worker phase (first worker request received → last worker reply sent, from the server's
//!    request log) against the ideal 5 × 200 ms, and the whole process against the ideal
//!    (the coordinator's planning and closing turns + 5 worker turns) × 200 ms. Target ≤ 1.08×.
//! 2. Peak RSS per extra worker: `(RSS(16 workers) − RSS(1 worker)) / 15`, from the `ru_maxrss`
//!    that `wait4` reports for the `ahelper` process alone (its `git` children are its own
//!    children, not ours, and `wait4` on one pid never mixes in other processes). Target ≤ 1 MB.
//!
//! 3. A verified run: 4 workers × 5 turns with `verify = "sleep 0.5"` (a 0.5 s test suite, in
//!    the user's config: a project's `swarm.verify` needs the user's trust): the
//!    whole process against the ideal — the baseline in parallel with planning and the worker
//!    turns (max(500 ms, 200 ms + 5 × 200 ms)), the workers' self-checks in parallel (500 ms),
//!    the merge queue's verifications (2 × 500 ms: the workers that are ready together are
//!    verified as one batch) and the coordinator's closing turn (200 ms) — and how much
//!    of the baseline is hidden behind planning and the first workers (they start without
//!    waiting for it; the first self-check's verdict is the first thing that needs it):
//!    `1 − exposed / baseline duration`, where exposed = (coordinator's request received +
//!    baseline duration) − (first worker's last reply sent), at least 0. Also printed: how long
//!    fan-out waited after planning (first worker request − coordinator reply sent).
//!
//! 6. The verified merge queue (issue 28): 12 one-file subtasks on 8 workers, verification
//!    `sleep 3`, 200 ms per reply: the whole process against the ideal — planning, a worker
//!    (2 turns), its self-check, 2 merge verifications (batches), the closing turn — target
//!    ≤ 1.2×; then the same with one culprit (the verification fails only when the files of
//!    subtasks 3 and 7 are both edited: each is green alone), target ≤ 1.6× with only the
//!    culprit unmerged. `SWARM_BENCH_ONLY=queue` runs only this configuration.
//!
//! Each configuration runs a few times, alone, and the median is printed; the machine's load
//! average is printed with them. Then divan times one 16-worker swarm.
//!
//! `AHELPER_BENCH_BIN=<path>` runs another `ahelper` build instead (e.g. a copy of an earlier
//! commit's binary), for a before/after under the same conditions.
//!
//! Run: `cargo bench --bench swarm`.

mod common;
use ahelper_fake_llm::{Conversation, FakeLlm, RecordedRequest, Script, Turn};
use common::breakdown::Breakdown;
use common::stats::{journal_less_temp_dir, load_average, median, ms, print_against_ideal};
use common::{
    Fixture, ahelper_with_model, edit_turns, file_name, planning_arrival, run_to_end, swarm_script,
    worker, worker_arrivals,
};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::Duration;

/// Fake model latency per reply, ms.
const LATENCY_MS: u64 = 200;
/// Turns per worker: 4 tool calls + the final text.
const WORKER_TURNS: u64 = 5;
/// Runs per configuration (median reported).
const ROUNDS: usize = 3;
/// The verification command of the verified run and its duration, ms.
const VERIFY: &str = "sleep 0.5";
const VERIFY_MS: u64 = 500;
/// Workers of the verified run.
const VERIFIED_WORKERS: usize = 4;

/// A temporary git repository with one file per subtask and the swarm caps in
/// `.ahelper/config.toml` (at most `max_workers` workers at once), plus isolated HOME/XDG dirs.
fn fixture(subtasks: usize, max_workers: usize) -> Fixture {
    Fixture::swarm(
        subtasks,
        max_workers,
        |i| format!("file {i}\n"),
        &[("README.md", "bench\n")],
    )
}

/// What each worker plays.
#[derive(Debug, Clone, Copy)]
enum Play {
    /// `turns` turns: `turns - 1` tool calls alternating `write_file` / `read_file` on its file,
    /// then the final text.
    Edit { turns: u64 },
    /// `run_command sleep <secs>`, then `write_file` on its file, then the final text.
    SleepTool { secs: u64 },
}

/// One swarm configuration: subtasks, slots, model latency and what each worker plays.
#[derive(Debug, Clone, Copy)]
struct Shape {
    subtasks: usize,
    max_workers: usize,
    latency_ms: u64,
    play: Play,
}

impl Shape {
    /// Config 1: `workers` workers at once, 5 turns each, 200 ms.
    fn sixteen(workers: usize) -> Shape {
        Shape {
            subtasks: workers,
            max_workers: workers,
            latency_ms: LATENCY_MS,
            play: Play::Edit {
                turns: WORKER_TURNS,
            },
        }
    }
    /// Model turns per worker.
    fn turns(&self) -> u64 {
        match self.play {
            Play::Edit { turns } => turns,
            Play::SleepTool { .. } => 3,
        }
    }
    /// One worker's ideal duration: its model turns plus its tool time.
    fn worker_ideal(&self) -> Duration {
        let tool = match self.play {
            Play::Edit { .. } => 0,
            Play::SleepTool { secs } => secs * 1000,
        };
        Duration::from_millis(self.turns() * self.latency_ms + tool)
    }
    /// Waves of workers: `ceil(subtasks / max_workers)`.
    fn waves(&self) -> u32 {
        self.subtasks.div_ceil(self.max_workers) as u32
    }
    /// The whole run's ideal: planning, the waves of workers back to back, the closing turn.
    fn process_ideal(&self) -> Duration {
        Duration::from_millis(2 * self.latency_ms) + self.worker_ideal() * self.waves()
    }
}

/// A worker's conversation for `shape`.
fn worker_conversation(shape: &Shape, i: usize) -> Conversation {
    let conversation = match shape.play {
        Play::Edit { turns } => edit_turns(worker(i), i, turns),
        Play::SleepTool { secs } => worker(i)
            .turn(Turn::tool_call(
                "run_command",
                json!({"command": format!("sleep {secs}")}),
            ))
            .turn(Turn::tool_call(
                "write_file",
                json!({"path": file_name(i), "content": format!("worker {i} slept\n")}),
            )),
    };
    conversation.turn(Turn::text(format!("s{i} done")).with_usage(100, 10))
}

/// The coordinator's plan (one subtask per file) and each worker's conversation for `shape`.
fn script_for(shape: &Shape) -> Script {
    swarm_script(shape.subtasks, shape.latency_ms, |i| {
        worker_conversation(shape, i)
    })
}

/// One measured verified run (config 3).
struct VerifiedSample {
    /// Spawn → exit.
    process: Duration,
    /// The baseline's duration, from run.json.
    baseline: Duration,
    /// Coordinator reply sent → first worker request: how long fan-out waited after planning.
    fan_out_wait: Duration,
    /// How long the first worker's self-check could have waited for the baseline: baseline end
    /// (estimated from the coordinator's request) − the first worker's last reply sent.
    exposed: Duration,
}

/// One measured swarm run.
struct Sample {
    /// Spawn → exit of the `ahelper` process.
    process: Duration,
    /// First worker request received → last worker reply sent (received + latency).
    worker_phase: Duration,
    /// Peak resident set of the `ahelper` process, bytes (`ru_maxrss`).
    max_rss: u64,
    /// The log of the run (AHELPER_LOG=debug), for the profile.
    log: String,
    /// Where the time beyond the ideal went.
    breakdown: Breakdown,
}

/// Runs `ahelper swarm` with `workers` subtasks, alone, and waits for it with `wait4`.
fn run_swarm(workers: usize) -> Sample {
    let fixture = fixture(workers, workers);
    run_in(&fixture, workers).0
}

/// Config 3: a run verified with [`VERIFY`]. The command is the user's setting (in the user's
/// config under the isolated home): from the project's `.ahelper/config.toml`, `swarm.verify`
/// applies only once the user trusts that file (it is a command ahelper runs), so an untrusted
/// project's is ignored and the run would not verify at all.
fn run_verified() -> VerifiedSample {
    let fixture = fixture(VERIFIED_WORKERS, VERIFIED_WORKERS);
    let user_config = fixture.home().join("config/ahelper/config.toml");
    std::fs::create_dir_all(user_config.parent().unwrap()).unwrap();
    std::fs::write(&user_config, format!("[swarm]\nverify = \"{VERIFY}\"\n")).unwrap();
    let (sample, requests) = run_in(&fixture, VERIFIED_WORKERS);
    let run_dir = std::fs::read_dir(fixture.repo().join(".ahelper/runs"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let record: Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("run.json")).unwrap()).unwrap();
    assert!(
        record["final_verdict"]["verdict"] == "green",
        "the verified run verified its integration branch: {record:#}"
    );
    let baseline = record["baseline"]["duration_ms"]
        .as_u64()
        .unwrap_or_else(|| panic!("the verified run recorded its baseline: {record:#}"));
    let baseline = Duration::from_millis(baseline);
    let plan_received = planning_arrival(&requests);
    let plan_sent = plan_received + Duration::from_millis(LATENCY_MS);
    let first_worker_done = (1..=VERIFIED_WORKERS)
        .filter_map(|c| {
            requests
                .iter()
                .filter(|r| r.conversation == Some(c))
                .map(|r| r.received)
                .max()
        })
        .min()
        .unwrap()
        + Duration::from_millis(LATENCY_MS);
    let first_worker = *worker_arrivals(&requests).iter().min().unwrap();
    VerifiedSample {
        process: sample.process,
        baseline,
        fan_out_wait: first_worker.saturating_duration_since(plan_sent),
        exposed: (plan_received + baseline).saturating_duration_since(first_worker_done),
    }
}

/// Runs `ahelper swarm` in `fixture` with `workers` subtasks, alone, waits for it with `wait4`;
/// the sample and the model requests.
fn run_in(fixture: &Fixture, workers: usize) -> (Sample, Vec<RecordedRequest>) {
    run_shape_in(fixture, &Shape::sixteen(workers))
}

/// Runs `ahelper swarm` in `fixture` playing `shape`, alone, waits for it with `wait4`; the
/// sample and the model requests.
fn run_shape_in(fixture: &Fixture, shape: &Shape) -> (Sample, Vec<RecordedRequest>) {
    let server = FakeLlm::start_blocking(script_for(shape)).expect("fake LLM server starts");
    let log_level = std::env::var("SWARM_BENCH_LOG").unwrap_or_else(|_| "info".into());
    let finished = run_to_end(
        ahelper_with_model(&fixture.home(), &server.base_url())
            .current_dir(fixture.repo())
            .args(["swarm", "edit every file", "--yes"])
            .args(["--permission-mode", "bypass"])
            .env("AHELPER_LOG", log_level),
    );
    finished.assert_success("ahelper swarm");
    let requests = server.model_requests();
    let workers = worker_arrivals(&requests);
    assert_eq!(
        workers.len(),
        shape.subtasks * shape.turns() as usize,
        "every worker played its turns"
    );
    let first = workers.iter().min().unwrap();
    let last = workers.iter().max().unwrap();
    let sample = Sample {
        process: finished.wall,
        worker_phase: last.duration_since(*first) + Duration::from_millis(shape.latency_ms),
        max_rss: finished.max_rss,
        log: std::fs::read_to_string(fixture.log_file()).unwrap_or_default(),
        breakdown: Breakdown::of(&requests, finished.started, finished.ended()),
    };
    (sample, requests)
}

/// The median of `f` over `samples`.
fn median_of<T: Copy + PartialOrd>(samples: &[Sample], f: impl Fn(&Sample) -> T) -> T {
    median(samples.iter().map(f).collect())
}

/// The median worker phase and whole process of `samples`.
fn medians(samples: &[Sample]) -> (Duration, Duration) {
    (
        median_of(samples, |s| s.worker_phase),
        median_of(samples, |s| s.process),
    )
}

/// Config 3: wall vs ideal of a verified run, and the baseline hidden behind planning and the
/// first workers.
fn verified_figures() {
    let samples: Vec<VerifiedSample> = (0..ROUNDS).map(|_| run_verified()).collect();
    let ideal = Duration::from_millis(
        VERIFY_MS.max(LATENCY_MS + WORKER_TURNS * LATENCY_MS)
            + VERIFY_MS
            + 2 * VERIFY_MS
            + LATENCY_MS,
    );
    let process = median(samples.iter().map(|s| s.process).collect());
    println!(
        "\n3. verified run, {VERIFIED_WORKERS} workers x {WORKER_TURNS} turns, verify `{VERIFY}` (median of {ROUNDS}):"
    );
    println!(
        "  whole process {:.1} ms = {:.2}x ideal {:.0} ms (baseline || planning + turns, self-checks, 2 batch verifications, synthesis)",
        ms(process),
        process.as_secs_f64() / ideal.as_secs_f64(),
        ms(ideal)
    );
    for s in &samples {
        let hidden = 1.0 - s.exposed.as_secs_f64() / s.baseline.as_secs_f64().max(1e-9);
        println!(
            "  baseline {:.0} ms, fan-out waited {:.0} ms after planning, {:.0} ms exposed to the first self-check: {:.0}% of the baseline hidden behind planning and the first workers",
            ms(s.baseline),
            ms(s.fan_out_wait),
            ms(s.exposed),
            hidden.clamp(0.0, 1.0) * 100.0,
        );
    }
}

/// Configs 4 and 5: wall / ideal of `shape` (median of [`ROUNDS`] runs), worker phase and whole
/// process.
fn shape_figures(label: &str, shape: &Shape, target: f64) {
    let samples: Vec<Sample> = (0..ROUNDS)
        .map(|_| {
            let fixture = fixture(shape.subtasks, shape.max_workers);
            run_shape_in(&fixture, shape).0
        })
        .collect();
    let ideals = (shape.worker_ideal() * shape.waves(), shape.process_ideal());
    println!(
        "\n{label} (median of {ROUNDS}, load average {}):",
        load_average()
    );
    print_against_ideal("", medians(&samples), ideals, target);
    let all: Vec<String> = samples
        .iter()
        .map(|s| format!("{:.0}/{:.0}", ms(s.worker_phase), ms(s.process)))
        .collect();
    println!("  per round, worker phase/process (ms): {}", all.join(", "));
    Breakdown::print_median(samples.iter().map(|s| s.breakdown));
    keep_log(
        &format!("{}on{}.log", shape.subtasks, shape.max_workers),
        samples.last(),
    );
}

/// With `SWARM_BENCH_KEEP_LOG=<dir>`: the log of `sample` (the last run of a configuration)
/// written to `<dir>/<name>`, for a profile of where its time went.
fn keep_log(name: &str, sample: Option<&Sample>) {
    let (Some(dir), Some(sample)) = (std::env::var_os("SWARM_BENCH_KEEP_LOG"), sample) else {
        return;
    };
    let path = PathBuf::from(dir).join(name);
    let _ = std::fs::write(&path, &sample.log);
    println!("  log of the last run: {}", path.display());
}

/// Config 6: the subtasks, slots and verification time of the merge-queue run.
const QUEUE_SUBTASKS: usize = 12;
const QUEUE_WORKERS: usize = 8;
const QUEUE_VERIFY_MS: u64 = 3_000;

/// Config 6: one run of 12 one-file subtasks on 8 workers verified by `verify` (the user's
/// config, no fix rounds, no fixers); (spawn → exit, the ids of the workers not merged).
fn run_queue(verify: &str) -> (Duration, Vec<String>) {
    let fixture = fixture(QUEUE_SUBTASKS, QUEUE_WORKERS);
    let user_config = fixture.home().join("config/ahelper/config.toml");
    std::fs::create_dir_all(user_config.parent().unwrap()).unwrap();
    let config =
        format!("[swarm]\nverify = {verify:?}\nworker_fix_rounds = 0\nmerge_fix_attempts = 0\n");
    std::fs::write(&user_config, config).unwrap();
    let shape = Shape {
        subtasks: QUEUE_SUBTASKS,
        max_workers: QUEUE_WORKERS,
        latency_ms: LATENCY_MS,
        play: Play::Edit { turns: 2 },
    };
    let server = FakeLlm::start_blocking(script_for(&shape)).expect("fake LLM server starts");
    let finished = run_to_end(
        ahelper_with_model(&fixture.home(), &server.base_url())
            .current_dir(fixture.repo())
            .args(["swarm", "edit every file", "--yes"])
            .args(["--permission-mode", "bypass"]),
    );
    let run_dir = std::fs::read_dir(fixture.repo().join(".ahelper/runs"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let record: Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("run.json")).unwrap()).unwrap();
    let unmerged = record["workers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["status"] != "merged")
        .map(|w| format!("{} ({})", w["id"].as_str().unwrap(), w["status"]))
        .collect();
    (finished.wall, unmerged)
}

/// Config 6: the merge queue's figures, green and with one culprit.
fn queue_figures() {
    let ideal = Duration::from_millis(
        LATENCY_MS + 2 * LATENCY_MS + QUEUE_VERIFY_MS + 2 * QUEUE_VERIFY_MS + LATENCY_MS,
    );
    let (a, b) = (file_name(3), file_name(7));
    let culprit = format!("sleep 3; ! {{ grep -q turn {a} && grep -q turn {b}; }}");
    println!(
        "\n6. merge queue: {QUEUE_SUBTASKS} one-file subtasks on {QUEUE_WORKERS} workers, verify `sleep 3`, ideal {:.0} ms (planning + worker + self-check + 2 verifications + closing turn), load average {}:",
        ms(ideal),
        load_average()
    );
    for (label, verify, target) in [
        ("all green", "sleep 3", 1.2),
        ("one culprit", &*culprit, 1.6),
    ] {
        let (wall, unmerged) = run_queue(verify);
        println!(
            "  {label}: whole process {:.0} ms = {:.2}x ideal (target <= {target}x); not merged: {}",
            ms(wall),
            wall.as_secs_f64() / ideal.as_secs_f64(),
            if unmerged.is_empty() {
                "none".to_string()
            } else {
                unmerged.join(", ")
            }
        );
    }
}

fn main() {
    if std::env::var("SWARM_BENCH_ONLY").as_deref() == Ok("queue") {
        queue_figures();
        return;
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "swarm benchmark: fake model at {LATENCY_MS} ms per reply, {cores} cores, load average {} before",
        load_average()
    );
    if let Some(note) = journal_less_temp_dir() {
        println!("{note}");
    }
    // Interleaved rounds so that load changes hit both configurations alike.
    let (mut one, mut sixteen) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        one.push(run_swarm(1));
        sixteen.push(run_swarm(16));
    }

    // the worker turns; planning, the worker turns and the coordinator's closing turn
    let ideals = (
        Duration::from_millis(WORKER_TURNS * LATENCY_MS),
        Duration::from_millis((WORKER_TURNS + 2) * LATENCY_MS),
    );
    println!(
        "\n1. time, 16 workers x {WORKER_TURNS} turns, max_workers = 16 (median of {ROUNDS}):"
    );
    for (label, samples) in [("1 worker : ", &one), ("16 workers: ", &sixteen)] {
        print_against_ideal(label, medians(samples), ideals, 1.08);
    }
    let all: Vec<String> = sixteen
        .iter()
        .map(|s| format!("{:.0}", ms(s.worker_phase)))
        .collect();
    println!("  16-worker phase per round (ms): {}", all.join(", "));
    Breakdown::print_median(sixteen.iter().map(|s| s.breakdown));

    let rss1 = median_of(&one, |s| s.max_rss);
    let rss16 = median_of(&sixteen, |s| s.max_rss);
    let per_worker = (rss16 as f64 - rss1 as f64) / 15.0;
    const MIB: f64 = 1024.0 * 1024.0;
    println!("\n2. peak RSS (ru_maxrss of the ahelper process, median of {ROUNDS}):");
    println!(
        "  1 worker {:.1} MiB, 16 workers {:.1} MiB: {:.2} MiB per extra worker (target <= 1 MB)",
        rss1 as f64 / MIB,
        rss16 as f64 / MIB,
        per_worker / MIB
    );
    keep_log("swarm16.log", sixteen.last());
    shape_figures(
        "4. 24 subtasks on 8 workers x 3 turns, 200 ms per reply",
        &Shape {
            subtasks: 24,
            max_workers: 8,
            latency_ms: LATENCY_MS,
            play: Play::Edit { turns: 3 },
        },
        1.08,
    );
    shape_figures(
        "5. 2 workers, 300 ms per reply, a 1 s tool (`run_command sleep 1`)",
        &Shape {
            subtasks: 2,
            max_workers: 2,
            latency_ms: 300,
            play: Play::SleepTool { secs: 1 },
        },
        1.03,
    );
    verified_figures();
    queue_figures();
    println!("\nload average after: {}\n", load_average());
    divan::main();
}

/// One 16-worker swarm, whole process (about 1.5 s a sample).
#[divan::bench(sample_count = 2, sample_size = 1)]
fn swarm_16_workers_5_turns() {
    divan::black_box(run_swarm(16));
}
