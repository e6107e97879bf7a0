//! A command's sandbox set-up against the number of entries around the workspace (issue 32):
//! two layouts side by side, each `<dir>/home` (the home whose `~/.ssh`… are denied, so `<dir>`
//! is an ancestor of denied paths and its entries are what the read rules are built around) and
//! `<dir>/ws` (the workspace, a git repository with a nested one) — one with nothing else in
//! `<dir>`, one with 20,000 files beside the workspace. Measures, interleaved, building one
//! command's sandbox (`CommandSandbox::prepare_with`, which includes the read-only binds' walk
//! for nested `.git`) and `true` through `run_command`, and prints the medians and the ratio
//! busy / empty (target of issue 32: ≤ 1.3).
//!
//! Run: `cargo bench -p ahelper-agents --bench sandbox_setup`. `SANDBOX_SETUP_RUNS` sets the
//! number of runs (default 200); `SANDBOX_SETUP_ENTRIES` the entries beside the busy workspace
//! (default 20,000). The layouts live under cargo's target tmp dir rather than `/tmp`, whose
//! own entries change whenever any process on the machine makes a temp file (each change
//! rebuilds the read rules once: see `sandbox_os/read_layer.rs`).

mod common;
use ahelper_agents::command_temp::CommandTemp;
use ahelper_agents::sandbox_os::{CommandSandbox, SandboxSettings, landlock_status};
use ahelper_agents::tools::ToolContext;
use common::{interleaved_true, make_protected_dirs, median_us, rerun_without_cargo_library_path};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn main() {
    rerun_without_cargo_library_path();
    let status = landlock_status();
    if status.abi().is_none() {
        println!("sandbox_setup: skipped: {status}");
        return;
    }
    let runs = number_from("SANDBOX_SETUP_RUNS", 200);
    let entries = number_from("SANDBOX_SETUP_ENTRIES", 20_000);
    let empty = Layout::new(0);
    let busy = Layout::new(entries);
    let (prepare_empty, prepare_busy) = prepare_samples(&empty, &busy, runs);
    let [run_empty, run_busy]: [Vec<Duration>; 2] =
        interleaved_true(&[&empty.context, &busy.context], runs)
            .try_into()
            .expect("two series");
    println!("sandbox_setup: {status}, {runs} runs, {entries} entries beside the busy workspace");
    report(
        "prepare (set-up of one command)",
        prepare_empty,
        prepare_busy,
    );
    report("`true` through run_command", run_empty, run_busy);
}

fn number_from(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// `<dir>/home` and `<dir>/ws` with `extra` files beside them, and the sandbox and tool context
/// of the workspace.
struct Layout {
    _dir: tempfile::TempDir,
    sandbox: CommandSandbox,
    context: ToolContext,
}

impl Layout {
    fn new(extra: usize) -> Layout {
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir");
        let root = std::fs::canonicalize(dir.path()).expect("canonical");
        let home = root.join("home");
        let ws = root.join("ws");
        std::fs::create_dir_all(home.join(".ssh")).expect("home");
        make_protected_dirs(&ws);
        std::fs::create_dir_all(ws.join("vendor/inner/.git")).expect("nested repo");
        for i in 0..extra {
            std::fs::write(root.join(format!("file-{i:05}")), "x").expect("entry");
        }
        let settings = SandboxSettings::with_defaults(Some(&home));
        let sandbox = CommandSandbox::new(&settings, &ws);
        let mut context = ToolContext::new(&ws).expect("context");
        context.command_sandbox = Some(Arc::new(sandbox.clone()));
        Layout {
            _dir: dir,
            sandbox,
            context,
        }
    }
}

/// `prepare_with` in each layout in turn, after a warm-up; the durations per layout.
fn prepare_samples(empty: &Layout, busy: &Layout, runs: usize) -> (Vec<Duration>, Vec<Duration>) {
    let temp = CommandTemp::create().expect("temp dir");
    let time = |layout: &Layout, temp: &Path| {
        let start = Instant::now();
        let prepared = layout.sandbox.prepare_with(Some(temp)).expect("prepare");
        let elapsed = start.elapsed();
        drop(prepared);
        elapsed
    };
    let temp: PathBuf = temp.path().to_path_buf();
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for round in 0..runs + 5 {
        let (x, y) = (time(empty, &temp), time(busy, &temp));
        if round >= 5 {
            a.push(x);
            b.push(y);
        }
    }
    (a, b)
}

fn report(what: &str, empty: Vec<Duration>, busy: Vec<Duration>) {
    let (e, b) = (median_us(empty), median_us(busy));
    println!(
        "  {what}: median {e:.0} µs with no entries beside the workspace, {b:.0} µs with them: \
         ×{:.2} (target ≤ 1.3)",
        b / e
    );
}
