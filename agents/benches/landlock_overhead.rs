//! Landlock's overhead per command: `run_command` with `true`, N times without a sandbox and
//! N times with an enforced [`CommandSandbox`], plus the cost of building the ruleset alone
//! ([`CommandSandbox::prepare`]). Prints medians in µs.
//!
//! Run: `cargo bench -p ahelper-agents --bench landlock_overhead` (add `--profile dev` to skip
//! the optimised build; the cost is in system calls either way). `LANDLOCK_BENCH_RUNS` sets N
//! (default 200).

use ahelper_agents::sandbox_os::{CommandSandbox, SandboxSettings, landlock_status};
use ahelper_agents::tools::{ToolContext, ToolRegistry};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn median_us(mut samples: Vec<Duration>) -> f64 {
    samples.sort();
    samples[samples.len() / 2].as_secs_f64() * 1e6
}

fn main() {
    let status = landlock_status();
    if status.abi().is_none() {
        println!("landlock_overhead: skipped: {status}");
        return;
    }
    let runs: usize = std::env::var("LANDLOCK_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let dir = tempfile::tempdir().expect("temp dir");
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let settings = SandboxSettings::with_defaults(home.as_deref());
    let sandbox = CommandSandbox::new(&settings, dir.path());

    let plain = ToolContext::new(dir.path()).expect("context");
    let mut confined = plain.clone();
    confined.command_sandbox = Some(Arc::new(sandbox.clone()));
    let tool = ToolRegistry::standard()
        .get("run_command")
        .expect("run_command")
        .clone();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");

    let measure = |ctx: &ToolContext| -> Vec<Duration> {
        rt.block_on(async {
            let mut samples = Vec::with_capacity(runs);
            for _ in 0..runs {
                let start = Instant::now();
                let out = tool
                    .call(serde_json::json!({"command": "true"}), ctx)
                    .await
                    .expect("run_command");
                samples.push(start.elapsed());
                assert!(!out.is_error, "{}", out.content);
            }
            samples
        })
    };
    // Warm up both paths, then interleave two rounds each to even out drift.
    let _ = measure(&plain);
    let _ = measure(&confined);
    let mut off = measure(&plain);
    let mut on = measure(&confined);
    off.extend(measure(&plain));
    on.extend(measure(&confined));

    let prepare: Vec<Duration> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            let prepared = sandbox.prepare().expect("prepare");
            let elapsed = start.elapsed();
            drop(prepared);
            elapsed
        })
        .collect();

    // The same split on a bare spawn of /bin/true (no shell, no output capture): std's
    // posix_spawn path, a fork+exec with an empty pre_exec, and fork+exec with the ruleset.
    let spawn = |mode: u8| -> Vec<Duration> {
        (0..runs)
            .map(|_| {
                let start = Instant::now();
                let mut cmd = std::process::Command::new("/bin/true");
                if mode == 1 {
                    use std::os::unix::process::CommandExt;
                    // SAFETY: the closure does nothing.
                    unsafe {
                        cmd.pre_exec(|| Ok(()));
                    }
                }
                if mode == 2 {
                    let mut prepared = sandbox.prepare().expect("prepare");
                    use std::os::unix::process::CommandExt;
                    // SAFETY: two async-signal-safe system calls, see PreparedSandbox.
                    unsafe {
                        cmd.pre_exec(move || prepared.restrict_self());
                    }
                }
                let status = cmd.status().expect("spawn /bin/true");
                assert!(status.success());
                start.elapsed()
            })
            .collect()
    };
    let bare_spawn = median_us(spawn(0));
    let bare_fork = median_us(spawn(1));
    let bare_landlock = median_us(spawn(2));

    let off_us = median_us(off);
    let on_us = median_us(on);
    println!("landlock_overhead: {status}, {runs}×2 runs of `true` through run_command");
    println!("  without sandbox: median {off_us:.0} µs");
    println!("  with sandbox:    median {on_us:.0} µs");
    println!(
        "  overhead:        median {:.0} µs per command",
        on_us - off_us
    );
    println!(
        "  of which building the ruleset (prepare): median {:.0} µs",
        median_us(prepare)
    );
    println!(
        "  bare /bin/true: posix_spawn {bare_spawn:.0} µs, fork+exec {bare_fork:.0} µs, fork+exec+landlock (incl. prepare) {bare_landlock:.0} µs"
    );
}
