//! Two sub-agents in one response (issue 12's peer-harness script): the parent's first response
//! calls `agent` twice; each sub-agent runs `sleep 1` and answers; the parent answers. Every
//! model response takes 300 ms (the fake server's latency).
//!
//! Run: `cargo bench --bench subagents` (release build). The ideal is the critical path with
//! both sub-agents at once: parent response (300 ms) → sub-agent response (300) → `sleep 1`
//! (1000) → sub-agent reply (300) → parent answer (300) = 2.2 s. Printed: the median wall of
//! `ahelper -p` over the runs as `wall / ideal = ratio` (target ≤ 1.1; Claude Code measured
//! 3.70 s, Codex 2.82 s on the same script). A run that does not complete the script fails the
//! bench, so the figure is of a real run; nothing about the figure is asserted.

mod common;
use ahelper_fake_llm::{Conversation, FakeLlm, Script, Turn};
use common::stats::median;
use common::{BIN, Fixture, run_in_repo};
use serde_json::json;
use std::path::Path;
use std::time::Duration;

const RUNS: usize = 7;
const WARMUP: usize = 1;
const LATENCY_MS: u64 = 300;
const PARENT: &str = "Run the two checks with sub-agents.";
const ANSWER: &str = "Both checks passed.";

fn main() {
    let fixture = Fixture::new(&[("README.md", "# demo\n")]);
    let (repo, home) = (fixture.repo(), fixture.home());
    let server = FakeLlm::start_blocking(script()).expect("fake LLM server starts");
    let ideal = Duration::from_millis(4 * LATENCY_MS + 1000);
    println!("ahelper binary: {BIN}");
    println!("runs: {WARMUP} warm-up + {RUNS} measured; {LATENCY_MS} ms per model response");
    let mut walls = Vec::new();
    let mut phases: Vec<Vec<f64>> = vec![Vec::new(); 7];
    for i in 0..WARMUP + RUNS {
        let (wall, offsets) = run_once(&server, &repo, &home);
        if i >= WARMUP {
            walls.push(wall.as_secs_f64());
            for (phase, offset) in phases.iter_mut().zip(offsets) {
                phase.push(offset);
            }
        }
    }
    walls.sort_by(f64::total_cmp);
    let wall = median(walls.clone());
    println!(
        "two sub-agents × `sleep 1`: wall {wall:.2} s / ideal {:.2} s = {:.2}x (target ≤ 1.10; Claude Code 3.70 s = 1.68x, Codex 2.82 s = 1.28x)",
        ideal.as_secs_f64(),
        wall / ideal.as_secs_f64()
    );
    println!(
        "(fastest {:.2} s, slowest {:.2} s)",
        walls[0],
        walls[walls.len() - 1]
    );
    println!(
        "where the time goes (median ms from spawn; ideal = first request + the latency path):"
    );
    let names = [
        "parent's 1st request",
        "1st sub-agent's 1st request",
        "2nd sub-agent's 1st request",
        "1st sub-agent's reply request",
        "2nd sub-agent's reply request",
        "parent's last request",
        "exit",
    ];
    let ideal_after_first = [0, 300, 300, 1600, 1600, 1900, 2200];
    let first = median(phases[0].clone());
    for ((name, values), ideal) in names.iter().zip(&phases).zip(ideal_after_first) {
        println!(
            "  {name:<32}{:>8.0} ms (ideal {:>6.0})",
            median(values.clone()),
            first + ideal as f64
        );
    }
}

/// The parent calls `agent` twice in one response; each child runs `sleep 1`, then answers.
fn script() -> Script {
    let child = |marker: &str| {
        Conversation::new()
            .named(marker)
            .matching(marker)
            .turn(Turn::tool_call(
                "run_command",
                json!({"command": "sleep 1"}),
            ))
            .turn(Turn::text(format!("{marker} done")))
    };
    let calls = ["one", "two"].iter().fold(Turn::new(), |turn, n| {
        turn.with_tool_call(
            "agent",
            json!({"description": format!("check {n}"), "prompt": format!("Check {n}: run sleep 1.")}),
        )
    });
    Script::new()
        .with_latency_ms(LATENCY_MS)
        .with_conversation(child("Check one:"))
        .with_conversation(child("Check two:"))
        .with_conversation(
            Conversation::new()
                .matching(PARENT)
                .turn(calls)
                .turn(Turn::text(ANSWER)),
        )
}

/// One `ahelper -p` run: its wall time from spawn to exit, and the arrival of each of its six
/// model requests then its exit, in ms from spawn.
fn run_once(server: &FakeLlm, repo: &Path, home: &Path) -> (Duration, Vec<f64>) {
    let (finished, requests) = run_in_repo(
        server,
        repo,
        home,
        &["-p", PARENT, "--allowedTools", "run_command(sleep:*)"],
    );
    finished.assert_answered(ANSWER);
    let (started, wall) = (finished.started, finished.wall);
    assert_eq!(requests.len(), 6, "2 parent + 2 × 2 sub-agent requests");
    let body = requests.last().unwrap().body.to_string();
    assert!(
        body.contains("Check one: done") && body.contains("Check two: done"),
        "both sub-agents answered: {body}"
    );
    let mut offsets: Vec<f64> = requests
        .iter()
        .map(|r| r.received.saturating_duration_since(started).as_secs_f64() * 1000.0)
        .collect();
    offsets.sort_by(f64::total_cmp);
    offsets.push(wall.as_secs_f64() * 1000.0);
    (wall, offsets)
}
