//! What ending every process of a command costs per command. Interleaved, N times each:
//!
//! - `run_command "true"` (no landlock) — the whole path: private `TMPDIR`, spawn from the
//!   spawner thread with `PR_SET_PDEATHSIG`, the marker sweep of `/proc` after the exit;
//! - a bare `bash -c true` through `tokio::process::Command` in its own process group with an
//!   output pipe — roughly what a command cost before (no temp dir, `posix_spawn`, no sweep);
//!
//! and the parts alone: one sweep ([`kill_marked`] of a marker no process carries: one walk of
//! `/proc` reading every `environ`), a [`CommandTemp`] created and removed, and the fork+exec of
//! `/bin/true` with `unshare(CLONE_NEWNET)` (what `sandbox.network = false` adds; root only)
//! next to one without. Prints medians in µs and the number of processes the sweep walked.
//!
//! Run: `cargo bench -p ahelper-agents --bench command_teardown` (`--profile dev` is enough:
//! the cost is in system calls). `TEARDOWN_BENCH_RUNS` sets N (default 200).

mod common;
use ahelper_agents::command_temp::CommandTemp;
use ahelper_agents::process_sweep::{COMMAND_VAR, kill_marked};
use ahelper_agents::tools::ToolContext;
use common::{
    WARMUP_ROUNDS, median_us, rerun_without_cargo_library_path, run_command_tool, runs_from,
    time_true, timed,
};
use std::os::unix::process::CommandExt;
use std::time::{Duration, Instant};

/// `bash -c true` as commands were spawned before: own process group, output into a pipe.
async fn bare_bash() -> Duration {
    let start = Instant::now();
    let mut child = tokio::process::Command::new("/bin/bash")
        .args(["-c", "true"])
        .process_group(0)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn bash");
    let mut out = child.stdout.take().expect("pipe");
    let mut sink = Vec::new();
    tokio::io::AsyncReadExt::read_to_end(&mut out, &mut sink)
        .await
        .expect("read");
    assert!(child.wait().await.expect("wait").success());
    start.elapsed()
}

/// fork+exec of `/bin/true`, in a new network namespace when `netns`.
fn true_with(netns: bool) -> Duration {
    timed(|| {
        let mut cmd = std::process::Command::new("/bin/true");
        // SAFETY: unshare(2) only, async-signal-safe; the other closure does nothing.
        unsafe {
            if netns {
                cmd.pre_exec(|| {
                    if libc::unshare(libc::CLONE_NEWNET) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            } else {
                cmd.pre_exec(|| Ok(()));
            }
        }
        assert!(cmd.status().expect("spawn").success());
    })
}

fn main() {
    rerun_without_cargo_library_path();
    let runs = runs_from("TEARDOWN_BENCH_RUNS");
    let dir = tempfile::tempdir().expect("temp dir");
    let ctx = ToolContext::new(dir.path()).expect("context");
    let tool = run_command_tool();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let (full, before) = rt.block_on(async {
        let (mut full, mut before) = (Vec::new(), Vec::new());
        for i in 0..WARMUP_ROUNDS + runs {
            let elapsed = time_true(&tool, &ctx).await;
            let bare = bare_bash().await;
            if i >= WARMUP_ROUNDS {
                full.push(elapsed);
                before.push(bare);
            }
        }
        (full, before)
    });
    let sweep: Vec<Duration> = (0..runs)
        .map(|_| timed(|| kill_marked(COMMAND_VAR, "no-such-command")))
        .collect();
    let (mut temp, mut temp_create) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let start = Instant::now();
        let made = CommandTemp::create().expect("temp dir");
        temp_create.push(start.elapsed());
        drop(made);
        temp.push(start.elapsed());
    }
    println!(
        "  (temp dir creation alone: median {:.0} µs)",
        median_us(temp_create)
    );
    let processes = std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.parse::<u32>().is_ok())
        })
        .count();
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let (mut plain, mut netns) = (Vec::new(), Vec::new());
    if root {
        for _ in 0..runs.div_ceil(2) {
            plain.push(true_with(false));
            netns.push(true_with(true));
        }
    }

    let (full, before) = (median_us(full), median_us(before));
    println!("command_teardown: {runs} interleaved pairs, {processes} processes in /proc");
    println!("  run_command \"true\" (temp dir, pdeathsig, sweep): median {full:.0} µs");
    println!("  bare bash -c true (process group, pipe):           median {before:.0} µs");
    println!(
        "  difference:                                        median {:.0} µs",
        full - before
    );
    println!(
        "  one sweep of /proc (no marked process):            median {:.0} µs",
        median_us(sweep)
    );
    println!(
        "  private temp dir created and removed:              median {:.0} µs",
        median_us(temp)
    );
    if root {
        let (plain, netns) = (median_us(plain), median_us(netns));
        println!("  /bin/true fork+exec:                               median {plain:.0} µs");
        println!(
            "  /bin/true in a new network namespace:              median {netns:.0} µs (+{:.0})",
            netns - plain
        );
    } else {
        println!("  network namespace: not measured (needs root)");
    }
}
