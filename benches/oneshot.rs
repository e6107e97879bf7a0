//! The whole process: `ahelper -p` against the fake LLM server (0 ms latency) on a temporary git
//! repository, with a scripted 3-turn task (list_dir, read_file, answer), plus `ahelper --version`.
//!
//! Run: `cargo bench --bench oneshot` (the binary is built with the bench profile, i.e. release).
//! `ONESHOT_BENCH_BIN=<path>[:<path>…]` measures those `ahelper` binaries instead of the one
//! built with the bench, e.g. a copy of main's build and this branch's for an A/B in one
//! sitting: with several, they take turns run by run (same fake server, same load) and the
//! figures are printed for each.
//! Prints, as the median over the runs, each figure against its target from issue 2 as
//! `figure / target = ratio` (ratio ≤ 1 meets the target). Nothing is asserted about the figures;
//! a run that does not complete the task fails the bench, so the numbers are of a real run.
//!
//! Figures:
//! - wall: from spawning the process to reaping it.
//! - first request: from spawning to the fake server receiving the first model request.
//! - gap between turns: arrival of a model request minus arrival of the previous one, averaged
//!   over the run's two gaps. With 0 ms latency this is the server's reply time (tiny: a few
//!   chunks on loopback) plus the client's parse, tool execution and next request — an upper
//!   bound of the process's own gap.
//! - exit tail: from the fake server handing the last frame of the final model response to the
//!   connection (`RecordedRequest::replied`) to the process reaped, and that tail as a share of
//!   the wall time (issue 11 item 1: ≤ 2 ms, ≤ 10 %). It includes the client's read and parse of
//!   that response, the transcript lines, the printed answer and the process's teardown.
//! - last request → exit: the same from the server receiving the last request, i.e. with the
//!   server's own reply time (an upper bound, the figure earlier versions of this bench printed).
//! - peak RSS: `ru_maxrss` of the child from `wait4(2)`. The kernel counts in it the spawning
//!   process's resident set (`posix_spawn`), so the bench resets its own peak before each spawn
//!   and prints what it carried at most (the figure's floor; see
//!   `common::reset_own_peak_rss`). Most of the figure is the binary's own pages mapped from
//!   the page cache, whose count depends on how the file was written (`cp`: up to 3 MiB more),
//!   so each binary runs from a fresh copy dropped from the page cache, read back by its first
//!   (warm-up) run: builds compare whatever their files' history.
//! - `--version`: wall time of `ahelper --version`.

mod common;
use ahelper_fake_llm::{Conversation, FakeLlm, Script, Turn};
use common::stats::load_average;
use common::{BIN, Fixture, ahelper_at, run_in_repo_with, uncached_copy};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

const RUNS: usize = 30;
const WARMUP: usize = 3;
const VERSION_RUNS: usize = 100;
const ANSWER: &str = "The crate exposes one function, answer(), which returns 42.";

/// What one `ahelper -p` run measured.
struct Run {
    wall: Duration,
    first_request: Duration,
    gap: Duration,
    tail: Duration,
    request_tail: Duration,
    max_rss_bytes: u64,
    /// The bench's own resident set at the spawn, which `max_rss_bytes` cannot go below.
    carried_rss_bytes: u64,
}

fn main() {
    let fixture = make_repo();
    let (repo, home) = (fixture.repo(), fixture.home());

    let script = Script::new().with_latency_ms(0).with_conversation(
        Conversation::new()
            .named("list-read-answer")
            .turn(Turn::tool_call("list_dir", json!({"path": "."})))
            .turn(Turn::tool_call("read_file", json!({"path": "src/lib.rs"})))
            .turn(Turn::text(ANSWER)),
    );
    let server = FakeLlm::start_blocking(script).expect("fake LLM server starts");

    let bins = binaries();
    let copies = tempfile::tempdir().expect("tempdir for the binaries' copies");
    let copied = uncached_copies(&bins, copies.path());
    println!("load average at the start: {}", load_average());
    println!(
        "one-shot runs per binary: {WARMUP} warm-up + {RUNS} measured; --version runs: {VERSION_RUNS}{}",
        if bins.len() > 1 {
            " (the binaries take turns, run by run)"
        } else {
            ""
        }
    );
    let mut runs: Vec<Vec<Run>> = bins.iter().map(|_| Vec::new()).collect();
    for i in 0..WARMUP + RUNS {
        for (bin, measured) in copied.iter().zip(&mut runs) {
            let run = run_once(bin, &server, &repo, &home);
            // The bench's own memory is in every spawned child's peak RSS: keep it flat.
            server.forget_requests();
            if i >= WARMUP {
                measured.push(run);
            }
        }
    }
    let mut versions: Vec<Vec<Duration>> = bins.iter().map(|_| Vec::new()).collect();
    for _ in 0..VERSION_RUNS {
        for (bin, measured) in copied.iter().zip(&mut versions) {
            measured.push(version_once(bin, &home));
        }
    }
    for ((bin, runs), version) in bins.iter().zip(&runs).zip(versions) {
        print_figures(bin, runs, version);
    }
    println!("load average: {}", load_average());
}

/// The binaries to measure: the paths in `ONESHOT_BENCH_BIN` (separated by `:`), else [`BIN`].
fn binaries() -> Vec<PathBuf> {
    match std::env::var_os("ONESHOT_BENCH_BIN") {
        Some(list) if !list.is_empty() => std::env::split_paths(&list).collect(),
        _ => vec![PathBuf::from(BIN)],
    }
}

/// Fresh copies of `bins` in `dir` (`dir/<i>/ahelper`), dropped from the page cache: each is
/// then mapped as its own runs read it back, however its original was written (see
/// [`uncached_copy`]: the peak RSS depends on it).
fn uncached_copies(bins: &[PathBuf], dir: &Path) -> Vec<PathBuf> {
    bins.iter()
        .enumerate()
        .map(|(i, bin)| {
            let dest = dir.join(i.to_string());
            std::fs::create_dir(&dest).expect("a directory for the copy");
            let dest = dest.join("ahelper");
            uncached_copy(bin, &dest);
            dest
        })
        .collect()
}

/// Prints the medians of `runs` and `version` (the runs of `bin`) against their targets.
fn print_figures(bin: &Path, runs: &[Run], version: Vec<Duration>) {
    let ms = |d: Duration| d.as_secs_f64() * 1_000.0;
    let wall = median(runs.iter().map(|r| ms(r.wall)).collect());
    let first = median(runs.iter().map(|r| ms(r.first_request)).collect());
    let gap = median(runs.iter().map(|r| ms(r.gap)).collect());
    let tail = median(runs.iter().map(|r| ms(r.tail)).collect());
    let request_tail = median(runs.iter().map(|r| ms(r.request_tail)).collect());
    let tail_share = median(
        runs.iter()
            .map(|r| r.tail.as_secs_f64() / r.wall.as_secs_f64())
            .collect(),
    );
    let rss = median(
        runs.iter()
            .map(|r| r.max_rss_bytes as f64 / (1024.0 * 1024.0))
            .collect(),
    );
    let version = median(version.into_iter().map(ms).collect());
    let min_wall = runs
        .iter()
        .map(|r| ms(r.wall))
        .fold(f64::INFINITY, f64::min);

    println!();
    println!("ahelper binary: {}", bin.display());
    println!("figure (median)                 figure / target = ratio");
    report("wall time of `ahelper -p`", wall, 50.0, "ms");
    report("process start → 1st request", first, 15.0, "ms");
    report("gap between turns", gap, 3.0, "ms");
    report("exit tail (final reply → exit)", tail, 2.0, "ms");
    report("exit tail / wall", tail_share * 100.0, 10.0, "%");
    println!(
        "last request → exit             {request_tail:>6.2} ms (the server's reply time included)"
    );
    report("peak RSS", rss, 25.0, "MiB");
    let carried = runs.iter().map(|r| r.carried_rss_bytes).max().unwrap_or(0);
    println!(
        "  (floor: the bench's own RSS at a spawn, ≤ {:.2} MiB)",
        carried as f64 / (1024.0 * 1024.0)
    );
    report("`ahelper --version` wall time", version, 3.0, "ms");
    println!("(fastest `ahelper -p` run: {min_wall:.2} ms)");
}

fn report(what: &str, figure: f64, target: f64, unit: &str) {
    println!(
        "{what:<32}{figure:>8.2} {unit} / {target} {unit} = {:.2}",
        figure / target
    );
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// A repository holding a tiny crate, and an isolated home.
fn make_repo() -> Fixture {
    Fixture::new(&[
        ("README.md", "# demo\n\nA tiny crate.\n"),
        (
            "Cargo.toml",
            "[package]\nname = \"demo\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        ),
        (
            "src/lib.rs",
            "/// The answer.\npub fn answer() -> u32 {\n    42\n}\n",
        ),
        (".gitignore", ".ahelper/\n"),
    ])
}

fn run_once(bin: &Path, server: &FakeLlm, repo: &Path, home: &Path) -> Run {
    let prompt = "List the files, read src/lib.rs and tell me what it does.";
    let (finished, requests) = run_in_repo_with(bin, server, repo, home, &["-p", prompt]);
    finished.assert_answered(ANSWER);
    let (spawned, wall) = (finished.started, finished.wall);
    assert_eq!(
        requests.iter().map(|r| r.tool_results).collect::<Vec<_>>(),
        vec![0, 1, 2],
        "three turns, one tool result more each time"
    );
    let first_request = requests[0].received.saturating_duration_since(spawned);
    let gaps: Vec<Duration> = requests
        .windows(2)
        .map(|w| w[1].received.duration_since(w[0].received))
        .collect();
    let gap = gaps.iter().sum::<Duration>() / gaps.len() as u32;
    let since_spawn = |at: Instant| at.saturating_duration_since(spawned);
    let request_tail = wall.saturating_sub(since_spawn(requests[2].received));
    let replied = requests[2]
        .replied
        .expect("the server records the end of the final reply it sent");
    let tail = wall.saturating_sub(since_spawn(replied));
    Run {
        wall,
        first_request,
        gap,
        tail,
        request_tail,
        max_rss_bytes: finished.max_rss,
        carried_rss_bytes: finished.carried_rss,
    }
}

fn version_once(bin: &Path, home: &Path) -> Duration {
    let mut cmd = ahelper_at(bin, home);
    cmd.arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let started = Instant::now();
    let status = cmd.status().expect("ahelper --version runs");
    let took = started.elapsed();
    assert!(status.success(), "ahelper --version failed: {status}");
    took
}
