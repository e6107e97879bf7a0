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

mod common;
use ahelper_fake_llm::{Conversation, FakeLlm, Script, Turn};
use common::stats::{load_average, median};
use common::{
    BIN, Fixture, ahelper_with_model, file_name, run_to_end, swarm_script, worker_arrivals,
};
use serde_json::json;
use std::process::Command;

const LATENCY_MS: u64 = 100;
const ROUNDS: usize = 3;
const MIB: f64 = 1024.0 * 1024.0;

fn main() {
    println!("ahelper binary: {BIN}");
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

/// A temporary git repository with `files` files (`.ahelper/` ignored) and the swarm caps, plus
/// isolated HOME/XDG dirs.
fn fixture(files: usize) -> Fixture {
    Fixture::swarm(
        files,
        files,
        |_| "old\n".into(),
        &[(".gitignore", ".ahelper/\n")],
    )
}

/// One worker's (or the agent's) work: write its file, answer.
fn writer(conversation: Conversation, file: &str) -> Conversation {
    conversation
        .turn(Turn::tool_call(
            "write_file",
            json!({"path": file, "content": "new\n"}),
        ))
        .turn(Turn::text(format!("{file} written")))
}

fn run_agent() -> f64 {
    let fixture = fixture(1);
    let script = Script::new()
        .with_latency_ms(LATENCY_MS)
        .with_conversation(writer(
            Conversation::new().matching("Rewrite the file"),
            &file_name(1),
        ));
    let server = FakeLlm::start_blocking(script).expect("fake LLM server starts");
    let peak = peak_rss(
        command(&fixture, &server)
            .args(["-p", "Rewrite the file f01.txt."])
            .args(["--permission-mode", "bypass"]),
    );
    assert_eq!(
        server.model_requests().len(),
        2,
        "the agent played its 2 turns"
    );
    peak
}

fn run_swarm(workers: usize) -> f64 {
    let fixture = fixture(workers);
    let script = swarm_script(workers, LATENCY_MS, |i| {
        writer(common::worker(i), &file_name(i))
    });
    let server = FakeLlm::start_blocking(script).expect("fake LLM server starts");
    let peak = peak_rss(
        command(&fixture, &server)
            .args(["swarm", "edit every file", "--yes"])
            .args(["--permission-mode", "bypass"]),
    );
    assert_eq!(
        worker_arrivals(&server.model_requests()).len(),
        2 * workers,
        "every worker played its 2 turns"
    );
    peak
}

/// The binary in `fixture`'s repository with a clean environment, talking to `server`.
fn command(fixture: &Fixture, server: &FakeLlm) -> Command {
    let mut cmd = ahelper_with_model(&fixture.home(), &server.base_url());
    cmd.current_dir(fixture.repo());
    cmd
}

/// Runs `cmd` to its end; its peak RSS in bytes. Fails the bench when it does not exit 0.
fn peak_rss(cmd: &mut Command) -> f64 {
    let finished = run_to_end(cmd);
    finished.assert_success("ahelper");
    finished.max_rss as f64
}
