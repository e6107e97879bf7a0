//! The per-command cost of issue 15's OS mechanisms, through `run_command "true"`, measured
//! interleaved in one run (medians in µs):
//!
//! - **unconfined**: no sandbox; after the command the `/proc` sweep for its marker runs;
//! - **landlock only**: the ruleset, no namespaces (`namespaces = false`, as where user
//!   namespaces are disabled): the sweep runs (marker);
//! - **namespaces**: landlock plus a user, mount and PID namespace of the command's own, `/`
//!   private, `.git` and `.ahelper` bound read-only, a fresh `/proc`, the namespace's init
//!   (which kills and counts leftovers) — no sweep of `/proc`;
//! - **namespaces + hidden**: the same with a `read_file(**/.env)` deny rule on a workspace of
//!   `HIDDEN_BENCH_FILES` files (default 1,000) holding three `.env` files: the workspace walk
//!   and one placeholder bind per covered file.
//!
//! And the parts alone: one sweep of `/proc` by marker and by user namespace, and the walk that
//! finds what the rule covers ([`hidden_paths`]).
//!
//! Run: `cargo bench -p ahelper-agents --profile dev --bench command_isolation`
//! (`ISOLATION_BENCH_RUNS` sets the number of rounds, default 200).

mod common;
use ahelper_agents::permissions::{PermissionRule, hidden_paths};
use ahelper_agents::process_sweep::{COMMAND_VAR, kill_in_user_namespace, kill_marked};
use ahelper_agents::sandbox_os::{
    CommandSandbox, SandboxSettings, landlock_status, namespaces_available,
};
use ahelper_agents::tools::ToolContext;
use common::{
    interleaved_true, make_protected_dirs, median_us, rerun_without_cargo_library_path, runs_from,
    timed,
};
use std::path::Path;
use std::sync::Arc;

/// A workspace with `.git`, `.ahelper`, `files` ordinary files in 10 directories and three
/// `.env` files.
fn workspace(files: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    make_protected_dirs(dir.path());
    for i in 0..files {
        let sub = dir.path().join(format!("src/d{}", i % 10));
        std::fs::create_dir_all(&sub).expect("dir");
        std::fs::write(sub.join(format!("f{i}.rs")), "fn main() {}\n").expect("file");
    }
    for env in [".env", "src/d1/.env", "src/d2/.env"] {
        std::fs::write(dir.path().join(env), "SECRET=x\n").expect(".env");
    }
    dir
}

fn context(root: &Path, sandbox: Option<CommandSandbox>) -> ToolContext {
    let mut ctx = ToolContext::new(root).expect("context");
    ctx.command_sandbox = sandbox.map(Arc::new);
    ctx
}

fn main() {
    rerun_without_cargo_library_path();
    let status = landlock_status();
    if status.abi().is_none() || !namespaces_available() {
        println!(
            "command_isolation: skipped: {status}, namespaces: {}",
            namespaces_available()
        );
        return;
    }
    let runs = runs_from("ISOLATION_BENCH_RUNS");
    let files = std::env::var("HIDDEN_BENCH_FILES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000usize)
        .max(1);
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let settings = SandboxSettings::with_defaults(home.as_deref());
    let ws = workspace(files);
    let root = ws.path();
    let with_ns = CommandSandbox::new(&settings, root);
    assert!(with_ns.namespaces, "namespaces are available");
    let mut landlock_only = with_ns.clone();
    landlock_only.namespaces = false;
    let deny: PermissionRule = "read_file(**/.env)".parse().expect("rule");
    let mut hiding = context(root, Some(with_ns.clone()));
    hiding.read_deny = vec![deny.clone()];
    let contexts = [
        context(root, None),
        context(root, Some(landlock_only)),
        context(root, Some(with_ns)),
        hiding,
    ];
    let samples = interleaved_true(&contexts.iter().collect::<Vec<_>>(), runs);
    let medians: Vec<f64> = samples.into_iter().map(median_us).collect();
    let marker_sweep = median_us(
        (0..runs)
            .map(|_| timed(|| kill_marked(COMMAND_VAR, "no-such-command")))
            .collect(),
    );
    let namespace_sweep = median_us(
        (0..runs)
            .map(|_| timed(|| kill_in_user_namespace(u64::MAX)))
            .collect(),
    );
    let real = std::fs::canonicalize(root).expect("root");
    let walk = median_us(
        (0..runs)
            .map(|_| timed(|| hidden_paths(std::slice::from_ref(&deny), &real).expect("walk")))
            .collect(),
    );
    let processes = std::fs::read_dir("/proc")
        .map(|d| {
            d.flatten()
                .filter(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .bytes()
                        .all(|b| b.is_ascii_digit())
                })
                .count()
        })
        .unwrap_or(0);
    println!(
        "command_isolation: {status}, {runs} interleaved rounds of `true` through run_command, \
         {processes} processes in /proc"
    );
    let names = [
        "unconfined (marker sweep)",
        "landlock only (marker + namespace sweep)",
        "landlock + user/mount/PID namespaces + binds (no sweep)",
        &format!("  + read_file(**/.env) hidden ({files} files walked, 3 binds)"),
    ];
    for (name, us) in names.iter().zip(&medians) {
        println!("  {name:<62} median {us:>7.0} µs");
    }
    println!(
        "  namespaces + binds vs landlock only: {:+.0} µs; hiding vs namespaces: {:+.0} µs",
        medians[2] - medians[1],
        medians[3] - medians[2]
    );
    println!(
        "  one /proc sweep by marker: median {marker_sweep:.0} µs; by user namespace: median {namespace_sweep:.0} µs"
    );
    println!("  hidden_paths walk alone ({files} files): median {walk:.0} µs");
}
