//! Landlock's overhead per command: `run_command` with `true`, N times without a sandbox and
//! N times with an enforced [`CommandSandbox`] (interleaved), plus the cost of building the ruleset alone
//! ([`CommandSandbox::prepare`]), and the same sandbox on a workspace with `.git` and `.ahelper`
//! (bound read-only in a user + mount namespace of the command's own). Prints medians in µs.
//!
//! Run: `cargo bench -p ahelper-agents --bench landlock_overhead` (add `--profile dev` to skip
//! the optimised build; the cost is in system calls either way). `LANDLOCK_BENCH_RUNS` sets N
//! (default 200).

mod common;
use ahelper_agents::sandbox_os::{CommandSandbox, SandboxSettings, landlock_status};
use ahelper_agents::tools::{ToolContext, ToolRegistry};
use common::{median_us, rerun_without_cargo_library_path, runs_from};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn main() {
    rerun_without_cargo_library_path();
    let status = landlock_status();
    if status.abi().is_none() {
        println!("landlock_overhead: skipped: {status}");
        return;
    }
    let runs = runs_from("LANDLOCK_BENCH_RUNS");
    let dir = tempfile::tempdir().expect("temp dir");
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let settings = SandboxSettings::with_defaults(home.as_deref());
    let sandbox = CommandSandbox::new(&settings, dir.path());

    let plain = ToolContext::new(dir.path()).expect("context");
    let mut confined = plain.clone();
    confined.command_sandbox = Some(Arc::new(sandbox.clone()));
    let repo = tempfile::tempdir().expect("temp dir");
    for protected in [".git/hooks", ".ahelper"] {
        std::fs::create_dir_all(repo.path().join(protected)).expect("protected dir");
    }
    let mut binds = ToolContext::new(repo.path()).expect("context");
    binds.command_sandbox = Some(Arc::new(CommandSandbox::new(&settings, repo.path())));
    let tool = ToolRegistry::standard()
        .get("run_command")
        .expect("run_command")
        .clone();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");

    // Interleaved (one plain run, one sandboxed run, …) so that load drift on a shared machine
    // hits both sides alike; the first 20 pairs warm up.
    let (off, on, bound) = rt.block_on(async {
        let mut off = Vec::with_capacity(runs);
        let mut on = Vec::with_capacity(runs);
        let mut bound = Vec::with_capacity(runs);
        for i in 0..runs + 20 {
            for (ctx, samples) in [
                (&plain, &mut off),
                (&confined, &mut on),
                (&binds, &mut bound),
            ] {
                let start = Instant::now();
                let out = tool
                    .call(serde_json::json!({"command": "true"}), ctx)
                    .await
                    .expect("run_command");
                let elapsed = start.elapsed();
                assert!(!out.is_error, "{}", out.content);
                if i >= 20 {
                    samples.push(elapsed);
                }
            }
        }
        (off, on, bound)
    });

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
    let spawn = |mode: u8, count: usize, program: &[&str]| -> Vec<Duration> {
        (0..count)
            .map(|_| {
                let start = Instant::now();
                let mut cmd = std::process::Command::new(program[0]);
                cmd.args(&program[1..]);
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
                let status = cmd.status().expect("spawn");
                assert!(status.success());
                start.elapsed()
            })
            .collect()
    };
    let (mut bare_spawn, mut bare_fork, mut bare_landlock) = (Vec::new(), Vec::new(), Vec::new());
    let (mut bash_fork, mut bash_landlock) = (Vec::new(), Vec::new());
    let bash = ["/bin/bash", "-c", "true"];
    for _ in 0..runs.div_ceil(10) {
        bare_spawn.extend(spawn(0, 10, &["/bin/true"]));
        bare_fork.extend(spawn(1, 10, &["/bin/true"]));
        bare_landlock.extend(spawn(2, 10, &["/bin/true"]));
        bash_fork.extend(spawn(1, 10, &bash));
        bash_landlock.extend(spawn(2, 10, &bash));
    }
    let (bare_spawn, bare_fork, bare_landlock) = (
        median_us(bare_spawn),
        median_us(bare_fork),
        median_us(bare_landlock),
    );

    let off_us = median_us(off);
    let on_us = median_us(on);
    println!("landlock_overhead: {status}, {runs} interleaved pairs of `true` through run_command");
    println!("  without sandbox: median {off_us:.0} µs");
    println!("  with sandbox:    median {on_us:.0} µs");
    println!(
        "  overhead:        median {:.0} µs per command",
        on_us - off_us
    );
    let bound_us = median_us(bound);
    println!(
        "  with sandbox, `.git` and `.ahelper` bound read-only: median {bound_us:.0} µs \
         (+{:.0} µs for the namespaces and binds)",
        bound_us - on_us
    );
    println!(
        "  of which building the ruleset (prepare): median {:.0} µs",
        median_us(prepare)
    );
    println!(
        "  bare `bash -c true`: fork+exec {:.0} µs, fork+exec+landlock (incl. prepare) {:.0} µs",
        median_us(bash_fork),
        median_us(bash_landlock)
    );
    println!(
        "  bare /bin/true: posix_spawn {bare_spawn:.0} µs, fork+exec {bare_fork:.0} µs, fork+exec+landlock (incl. prepare) {bare_landlock:.0} µs"
    );
}
