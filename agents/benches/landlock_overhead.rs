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
use ahelper_agents::tools::ToolContext;
use common::{
    interleaved_true, make_protected_dirs, median_us, rerun_without_cargo_library_path, runs_from,
};
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
    let workspaces = Workspaces::new();
    let commands = command_samples(&workspaces, runs);
    let prepare = prepare_samples(&workspaces.sandbox, runs);
    let spawns = spawn_samples(&workspaces.sandbox, runs);
    println!("landlock_overhead: {status}, {runs} interleaved pairs of `true` through run_command");
    report_commands(&commands, prepare);
    report_spawns(spawns);
}

/// The three tool contexts a command runs in: no sandbox, the enforced sandbox, and the sandbox
/// on a workspace with `.git` and `.ahelper` (bound read-only). The temp dirs live as long as this.
struct Workspaces {
    _dir: tempfile::TempDir,
    _repo: tempfile::TempDir,
    sandbox: CommandSandbox,
    plain: ToolContext,
    confined: ToolContext,
    binds: ToolContext,
}

impl Workspaces {
    fn new() -> Workspaces {
        let dir = tempfile::tempdir().expect("temp dir");
        let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
        let settings = SandboxSettings::with_defaults(home.as_deref());
        let sandbox = CommandSandbox::new(&settings, dir.path());
        let plain = ToolContext::new(dir.path()).expect("context");
        let mut confined = plain.clone();
        confined.command_sandbox = Some(Arc::new(sandbox.clone()));
        let repo = tempfile::tempdir().expect("temp dir");
        make_protected_dirs(repo.path());
        let mut binds = ToolContext::new(repo.path()).expect("context");
        binds.command_sandbox = Some(Arc::new(CommandSandbox::new(&settings, repo.path())));
        Workspaces {
            _dir: dir,
            _repo: repo,
            sandbox,
            plain,
            confined,
            binds,
        }
    }
}

/// `true` through `run_command` in each workspace: durations without sandbox, with it, with binds.
struct CommandSamples {
    off: Vec<Duration>,
    on: Vec<Duration>,
    bound: Vec<Duration>,
}

/// Runs `true` through `run_command` interleaved (one plain run, one sandboxed run, …) so that
/// load drift on a shared machine hits both sides alike; the first rounds warm up.
fn command_samples(workspaces: &Workspaces, runs: usize) -> CommandSamples {
    let contexts = [&workspaces.plain, &workspaces.confined, &workspaces.binds];
    let [off, on, bound]: [Vec<Duration>; 3] = interleaved_true(&contexts, runs)
        .try_into()
        .expect("one series per context");
    CommandSamples { off, on, bound }
}

/// The cost of building the ruleset alone ([`CommandSandbox::prepare`]), `runs` times.
fn prepare_samples(sandbox: &CommandSandbox, runs: usize) -> Vec<Duration> {
    (0..runs)
        .map(|_| {
            let start = Instant::now();
            let prepared = sandbox.prepare().expect("prepare");
            let elapsed = start.elapsed();
            drop(prepared);
            elapsed
        })
        .collect()
}

/// How a bare child is started: std's posix_spawn path, a fork+exec with an empty pre_exec, or
/// fork+exec with the Landlock ruleset (its `prepare` included in the time).
#[derive(Clone, Copy)]
enum SpawnMode {
    Spawn,
    Fork,
    Landlock,
}

/// Bare spawns (no shell for `/bin/true`, no output capture) in each [`SpawnMode`].
struct SpawnSamples {
    bare_spawn: Vec<Duration>,
    bare_fork: Vec<Duration>,
    bare_landlock: Vec<Duration>,
    bash_fork: Vec<Duration>,
    bash_landlock: Vec<Duration>,
}

/// The same split as [`command_samples`] on a bare spawn of `/bin/true` and `bash -c true`,
/// interleaved in blocks of ten.
fn spawn_samples(sandbox: &CommandSandbox, runs: usize) -> SpawnSamples {
    let bare = ["/bin/true"];
    let bash = ["/bin/bash", "-c", "true"];
    let mut samples = SpawnSamples {
        bare_spawn: Vec::new(),
        bare_fork: Vec::new(),
        bare_landlock: Vec::new(),
        bash_fork: Vec::new(),
        bash_landlock: Vec::new(),
    };
    for _ in 0..runs.div_ceil(10) {
        for (mode, program, into) in [
            (SpawnMode::Spawn, &bare[..], &mut samples.bare_spawn),
            (SpawnMode::Fork, &bare[..], &mut samples.bare_fork),
            (SpawnMode::Landlock, &bare[..], &mut samples.bare_landlock),
            (SpawnMode::Fork, &bash[..], &mut samples.bash_fork),
            (SpawnMode::Landlock, &bash[..], &mut samples.bash_landlock),
        ] {
            into.extend((0..10).map(|_| time_spawn(sandbox, mode, program)));
        }
    }
    samples
}

/// Starts `program` (its path, then its arguments) once in `mode` and waits for it.
fn time_spawn(sandbox: &CommandSandbox, mode: SpawnMode, program: &[&str]) -> Duration {
    use std::os::unix::process::CommandExt;
    let start = Instant::now();
    let mut cmd = std::process::Command::new(program[0]);
    cmd.args(&program[1..]);
    match mode {
        SpawnMode::Spawn => {}
        // SAFETY: the closure does nothing.
        SpawnMode::Fork => unsafe {
            cmd.pre_exec(|| Ok(()));
        },
        SpawnMode::Landlock => {
            let mut prepared = sandbox.prepare().expect("prepare");
            // SAFETY: two async-signal-safe system calls, see PreparedSandbox.
            unsafe {
                cmd.pre_exec(move || prepared.restrict_self());
            }
        }
    }
    let status = cmd.status().expect("spawn");
    assert!(status.success());
    start.elapsed()
}

/// Prints the medians of the `run_command` samples and of `prepare`.
fn report_commands(commands: &CommandSamples, prepare: Vec<Duration>) {
    let off_us = median_us(commands.off.clone());
    let on_us = median_us(commands.on.clone());
    println!("  without sandbox: median {off_us:.0} µs");
    println!("  with sandbox:    median {on_us:.0} µs");
    println!(
        "  overhead:        median {:.0} µs per command",
        on_us - off_us
    );
    let bound_us = median_us(commands.bound.clone());
    println!(
        "  with sandbox, `.git` and `.ahelper` bound read-only: median {bound_us:.0} µs \
         (+{:.0} µs for the namespaces and binds)",
        bound_us - on_us
    );
    println!(
        "  of which building the ruleset (prepare): median {:.0} µs",
        median_us(prepare)
    );
}

/// Prints the medians of the bare spawns.
fn report_spawns(spawns: SpawnSamples) {
    println!(
        "  bare `bash -c true`: fork+exec {:.0} µs, fork+exec+landlock (incl. prepare) {:.0} µs",
        median_us(spawns.bash_fork),
        median_us(spawns.bash_landlock)
    );
    println!(
        "  bare /bin/true: posix_spawn {:.0} µs, fork+exec {:.0} µs, fork+exec+landlock (incl. prepare) {:.0} µs",
        median_us(spawns.bare_spawn),
        median_us(spawns.bare_fork),
        median_us(spawns.bare_landlock)
    );
}
