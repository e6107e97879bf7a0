//! What the runtime's benchmarks share: running again without cargo's `LD_LIBRARY_PATH`, the
//! number of runs from the environment, medians, and timing `true` through `run_command`.
#![allow(dead_code, reason = "each benchmark uses a part of this module")]

use ahelper_agents::tools::{Tool, ToolContext, ToolRegistry};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `cargo bench` puts every build-script output directory on `LD_LIBRARY_PATH`, which makes
/// each dynamically linked child (bash) probe dozens of paths and inflates every measured
/// command; when it is set, runs this benchmark again without it (as ahelper's commands run)
/// and exits with that run's status.
pub fn rerun_without_cargo_library_path() {
    if std::env::var_os("LD_LIBRARY_PATH").is_some() {
        let status = std::process::Command::new(std::env::current_exe().expect("own path"))
            .env_remove("LD_LIBRARY_PATH")
            .status()
            .expect("re-run the benchmark");
        std::process::exit(status.code().unwrap_or(1));
    }
}

/// How many runs to measure: the number in the environment variable `var`, or 200.
pub fn runs_from(var: &str) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200)
}

/// The median of `samples`, in microseconds.
pub fn median_us(mut samples: Vec<Duration>) -> f64 {
    samples.sort();
    samples[samples.len() / 2].as_secs_f64() * 1e6
}

/// Rounds run before the measured ones, to warm up caches and the runtime.
pub const WARMUP_ROUNDS: usize = 20;

/// How long `f` took.
pub fn timed<T>(f: impl FnOnce() -> T) -> Duration {
    let start = Instant::now();
    let _ = f();
    start.elapsed()
}

/// The standard `run_command` tool.
pub fn run_command_tool() -> Arc<dyn Tool> {
    ToolRegistry::standard()
        .get("run_command")
        .expect("run_command")
        .clone()
}

/// One `true` through `tool` (`run_command`) in `ctx`: how long the call took. Fails the
/// benchmark when the command fails.
pub async fn time_true(tool: &Arc<dyn Tool>, ctx: &ToolContext) -> Duration {
    let start = Instant::now();
    let out = tool
        .call(serde_json::json!({"command": "true"}), ctx)
        .await
        .expect("run_command");
    let elapsed = start.elapsed();
    assert!(!out.is_error, "{}", out.content);
    elapsed
}

/// `true` through `run_command` in each of `contexts` in turn, [`WARMUP_ROUNDS`] + `runs`
/// rounds on a current-thread runtime, so that load drift on a shared machine hits every
/// context alike; the measured durations per context.
pub fn interleaved_true(contexts: &[&ToolContext], runs: usize) -> Vec<Vec<Duration>> {
    let tool = run_command_tool();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let mut samples = vec![Vec::with_capacity(runs); contexts.len()];
    rt.block_on(async {
        for round in 0..WARMUP_ROUNDS + runs {
            for (ctx, into) in contexts.iter().zip(samples.iter_mut()) {
                let elapsed = time_true(&tool, ctx).await;
                if round >= WARMUP_ROUNDS {
                    into.push(elapsed);
                }
            }
        }
    });
    samples
}

/// Creates `.git/hooks` and `.ahelper` in `root`: the directories the sandbox binds read-only.
pub fn make_protected_dirs(root: &Path) {
    for protected in [".git/hooks", ".ahelper"] {
        std::fs::create_dir_all(root.join(protected)).expect("protected dir");
    }
}
