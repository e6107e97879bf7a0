//! A worker's first `cargo build` in a fresh worktree against an incremental build in the user's
//! checkout (issue 11 item 2), for a small real crate with dependencies from the local registry
//! (`serde` with derive, `serde_json`, `anyhow`; `cargo --offline`, nothing downloaded).
//!
//! Run: `cargo bench --bench cargo_warm`. Each build runs once (cold builds take tens of seconds
//! on a loaded machine); printed as `figure / incremental build in the checkout = ratio`, with
//! the load average. Nothing is asserted about the figures; a build that fails fails the bench.
//!
//! Reference: in the checkout, a cold build, then one source line changed and built again
//! (the incremental build a user waits for). The worker's situation: a new worktree of the
//! same commit with the worker's first edit (one line of `src/lib.rs` changed), then
//! `cargo build` there, under each strategy:
//! - cold: the worktree's own empty `target/` (what a worktree gets with nothing done).
//! - (a) `.worktreeinclude` with `target/`: the checkout's `target/` brought into the worktree by
//!   [`ahelper_worktrees::bring_included`] (reflink where the file system supports it, else a
//!   copy); the time to bring it is part of the figure.
//! - (b) `CARGO_TARGET_DIR` per worker slot, kept between subtasks: the slot's directory was
//!   used by the slot's previous subtask in another worktree (removed since); the figure is the
//!   second subtask's build. The slot's first subtask builds cold (printed too).
//! - (c) a shared dependency cache: no `sccache` here and cargo has no read-only shared
//!   artifact directory, so measured as what such a cache gives at best: the dependencies'
//!   artifacts only (everything in `target/debug` that is not the crate's own) copied into the
//!   worktree's empty `target/`; the copy is part of the figure.
//! - default (`[swarm] warm_cargo = "auto"`): what ahelper does with nothing configured —
//!   [`ahelper_worktrees::list_cargo_seed`] + [`ahelper_worktrees::seed_cargo_target`] (the
//!   dependency artifacts of `target/debug`, reflink where supported, else a copy); listing and
//!   copying are part of the figure.
//!
//! `CARGO_WARM_ROWS=a,c,default` runs only those rows (of `cold`, `a`, `b`, `c`, `default`; all
//! by default): on a loaded machine each cold build takes minutes.
//!
//! With `CARGO_WARM_SEED_FROM=<checkout of a built Rust project>` (e.g. this repository), the
//! bench also lists and seeds that checkout's dependency artifacts into an empty directory and
//! prints files, bytes and seconds: what the default costs on a real `target/` (no build).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

mod common;
use common::git_cli;
use common::stats::load_average;

/// The crate's name; its own artifacts carry it (`libdemo-*`, `demo-*`).
const CRATE: &str = "warmdemo";

fn main() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let checkout = tmp.path().join("checkout");
    make_crate(&checkout);
    println!("load average before: {}", load_average());

    let cold_checkout = cargo_build(&checkout, None);
    edit(&checkout, 1);
    let incremental = cargo_build(&checkout, None);
    let reference = incremental.as_secs_f64();
    println!(
        "checkout: cold build {:.2} s; incremental build (one line changed) {:.2} s  [load {}]",
        cold_checkout.as_secs_f64(),
        reference,
        load_average()
    );
    println!("worker's first `cargo build` in a new worktree / incremental build in the checkout:");
    let report = |name: &str, took: Duration| {
        println!(
            "  {name:<58}{:>7.2} s / {reference:.2} s = {:>5.2}x  [load {}]",
            took.as_secs_f64(),
            took.as_secs_f64() / reference,
            load_average()
        );
    };

    let rows = std::env::var("CARGO_WARM_ROWS").unwrap_or_default();
    let wanted = |row: &str| rows.is_empty() || rows.split(',').any(|r| r.trim() == row);
    let nothing = |_: &Path| Duration::ZERO;
    if wanted("cold") {
        let cold = in_new_worktree(&checkout, "cold", nothing, None);
        report("cold (empty target/)", cold);
    }
    if wanted("a") {
        row_a(&checkout, &report);
    }
    if wanted("b") {
        let slot = tmp.path().join("slot-1-target");
        let first = in_new_worktree(&checkout, "slot-first", nothing, Some(&slot));
        let second = in_new_worktree(&checkout, "slot-second", nothing, Some(&slot));
        report("(b) slot CARGO_TARGET_DIR, slot's 1st subtask", first);
        report("(b) slot CARGO_TARGET_DIR, slot's next subtask", second);
    }
    if wanted("c") {
        let copy_dependencies = |wt: &Path| {
            let started = Instant::now();
            copy_dependency_artifacts(&checkout.join("target"), &wt.join("target"));
            started.elapsed()
        };
        let shared = in_new_worktree(&checkout, "deps-cache", copy_dependencies, None);
        report("(c) dependency artifacts only (copy + build)", shared);
    }
    if wanted("default") {
        let seed_default = |wt: &Path| {
            let started = Instant::now();
            let seeded = seed(&checkout, wt);
            println!("  ({})", seeded.describe());
            started.elapsed()
        };
        let default = in_new_worktree(&checkout, "warm-default", seed_default, None);
        report("default: warm_cargo = \"auto\" (seed + build)", default);
    }
    if let Some(big) = std::env::var_os("CARGO_WARM_SEED_FROM") {
        seed_scale(Path::new(&big), &tmp.path().join("seed-scale"));
    }
}

/// (a): the checkout's whole `target/` brought by a `.worktreeinclude` naming it.
fn row_a(checkout: &Path, report: &impl Fn(&str, Duration)) {
    std::fs::write(checkout.join(".worktreeinclude"), "target/\n").unwrap();
    let bring_target = |wt: &Path| {
        let started = Instant::now();
        let brought = ahelper_worktrees::bring_included(checkout, wt, Default::default())
            .expect(".worktreeinclude brings target/");
        assert!(brought.skipped.is_empty(), "{}", brought.describe());
        println!("  ({})", brought.describe());
        started.elapsed()
    };
    let included = in_new_worktree(checkout, "include", bring_target, None);
    std::fs::remove_file(checkout.join(".worktreeinclude")).unwrap();
    report("(a) .worktreeinclude target/ (bring + build)", included);
}

/// ahelper's default seed of `checkout`'s dependency artifacts into `worktree`.
fn seed(checkout: &Path, worktree: &Path) -> ahelper_worktrees::CargoSeedReport {
    let include = ahelper_worktrees::list_included(checkout).expect("list .worktreeinclude");
    let seed = ahelper_worktrees::list_cargo_seed(checkout, &include).expect("list the seed");
    ahelper_worktrees::seed_cargo_target(&seed, worktree, Default::default())
        .expect("seed target/debug")
        .expect("a built Rust checkout is seeded")
}

/// The default's cost on a real project: list and copy `checkout`'s dependency artifacts into
/// the empty directory `dest` (nothing is built).
fn seed_scale(checkout: &Path, dest: &Path) {
    std::fs::create_dir_all(dest).unwrap();
    let started = Instant::now();
    let include = ahelper_worktrees::list_included(checkout).expect("list .worktreeinclude");
    let seed = ahelper_worktrees::list_cargo_seed(checkout, &include).expect("list the seed");
    let listed = started.elapsed();
    let (files, bytes) = seed.size();
    let started = Instant::now();
    let unlimited = ahelper_worktrees::IncludeLimits {
        max_bytes: u64::MAX,
    };
    let report =
        ahelper_worktrees::seed_cargo_target(&seed, dest, unlimited).expect("seed target/debug");
    let copied = started.elapsed();
    let guard = ahelper_worktrees::DEFAULT_INCLUDE_MAX_BYTES;
    println!(
        "  (measured without the size guard; the default guard of {} MB {})",
        guard / 1_000_000,
        if bytes <= guard {
            "takes it"
        } else {
            "skips it and names it"
        }
    );
    println!(
        "seed of {}: {files} files, {:.0} MB listed in {:.2} s, copied in {:.2} s ({:.0} MB/s)  [load {}]",
        checkout.display(),
        bytes as f64 / 1e6,
        listed.as_secs_f64(),
        copied.as_secs_f64(),
        bytes as f64 / 1e6 / copied.as_secs_f64().max(1e-9),
        load_average()
    );
    match report {
        Some(report) => println!("  ({})", report.describe()),
        None => println!("  (nothing seeded: {:?})", seed.applies()),
    }
}

/// A git repository at `dir` holding a library crate with three registry dependencies.
fn make_crate(dir: &Path) {
    let manifest = format!(
        "[package]\nname = \"{CRATE}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
         [dependencies]\nserde = {{ version = \"1\", features = [\"derive\"] }}\n\
         serde_json = \"1\"\nanyhow = \"1\"\n"
    );
    let lib = "//! A small crate with dependencies.\n\
        use serde::{Deserialize, Serialize};\n\n\
        /// A task.\n#[derive(Debug, Serialize, Deserialize, PartialEq)]\n\
        pub struct Task {\n    pub id: String,\n    pub done: bool,\n}\n\n\
        /// Parses a task list.\npub fn parse(text: &str) -> anyhow::Result<Vec<Task>> {\n    \
        Ok(serde_json::from_str(text)?)\n}\n\n\
        /// The ids of the tasks not done.\npub fn open(tasks: &[Task]) -> Vec<&str> {\n    \
        tasks.iter().filter(|t| !t.done).map(|t| t.id.as_str()).collect()\n}\n\n\
        pub fn edited() -> u32 {\n    0\n}\n";
    git_cli::init_repo(
        dir,
        &[
            ("Cargo.toml", manifest.as_str()),
            ("src/lib.rs", lib),
            (".gitignore", "/target\n"),
        ],
    );
    // The lock file resolved offline from the local registry, committed as a project would.
    let status = cargo(dir)
        .args(["generate-lockfile", "--offline"])
        .status()
        .expect("cargo runs");
    assert!(status.success(), "cargo generate-lockfile --offline failed");
    git_cli::git(dir, &["add", "Cargo.lock"]);
    git_cli::git(dir, &["commit", "-q", "-m", "lock file"]);
}

/// Changes the body of `edited()` in `dir` to return `n` (a one-line edit).
fn edit(dir: &Path, n: u32) {
    let path = dir.join("src/lib.rs");
    let text = std::fs::read_to_string(&path).unwrap();
    let old = text
        .lines()
        .skip_while(|l| !l.starts_with("pub fn edited"))
        .nth(1)
        .unwrap()
        .to_string();
    std::fs::write(&path, text.replace(&old, &format!("    {n}"))).unwrap();
}

/// `cargo` for `dir` with a clean cargo environment (nothing of the `cargo bench` running us).
fn cargo(dir: &Path) -> Command {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy().to_string();
        if key.starts_with("CARGO_") && key != "CARGO_HOME" || key.starts_with("RUST") {
            cmd.env_remove(key);
        }
    }
    cmd.current_dir(dir).env("CARGO_TERM_COLOR", "never");
    cmd
}

/// Time of `cargo build --offline` in `dir` (target dir `target_dir` when given).
fn cargo_build(dir: &Path, target_dir: Option<&Path>) -> Duration {
    let mut cmd = cargo(dir);
    cmd.args(["build", "--offline", "--quiet"]);
    if let Some(target) = target_dir {
        cmd.env("CARGO_TARGET_DIR", target);
    }
    let started = Instant::now();
    let status = cmd.status().expect("cargo runs");
    let took = started.elapsed();
    assert!(status.success(), "cargo build failed in {}", dir.display());
    took
}

/// In a new worktree of `checkout`: `prepare` (as ahelper prepares it before the worker
/// starts), the worker's first edit, `cargo build` (into `target_dir` when given); returns the
/// time of `prepare` plus the build's, then removes the worktree.
fn in_new_worktree(
    checkout: &Path,
    name: &str,
    prepare: impl FnOnce(&Path) -> Duration,
    target_dir: Option<&Path>,
) -> Duration {
    let worktree: PathBuf = checkout.with_file_name(format!("wt-{name}"));
    git_cli::git(
        checkout,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            name,
            worktree.to_str().unwrap(),
        ],
    );
    let prepared = prepare(&worktree);
    edit(&worktree, 2);
    let took = prepared + cargo_build(&worktree, target_dir);
    git_cli::git(
        checkout,
        &["worktree", "remove", "--force", worktree.to_str().unwrap()],
    );
    took
}

/// Copies everything under `from/debug` except the crate's own artifacts into `to/debug`.
fn copy_dependency_artifacts(from: &Path, to: &Path) {
    let own = |name: &str| name.contains(CRATE);
    for sub in ["deps", "build", ".fingerprint"] {
        let dir = from.join("debug").join(sub);
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().to_string();
            if !own(&name) {
                copy_tree(&entry.path(), &to.join("debug").join(sub).join(&name));
            }
        }
    }
}

fn copy_tree(from: &Path, to: &Path) {
    let meta = std::fs::symlink_metadata(from).unwrap();
    if meta.is_dir() {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap().flatten() {
            copy_tree(&entry.path(), &to.join(entry.file_name()));
        }
    } else if meta.is_file() {
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(from, to).unwrap();
        // cargo compares artifact mtimes: keep them as they were.
        let file = std::fs::File::options().write(true).open(to).unwrap();
        file.set_modified(meta.modified().unwrap()).unwrap();
    }
}
