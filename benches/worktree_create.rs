//! Worktree start-up on generated repositories of 5,000 and 100,000 files (`WORKTREE_BENCH_FILES`,
//! comma-separated, overrides the sizes): ahelper's ways to give a worker a worktree against
//! plain git, measured in one run per size (interleaved rounds, median per way) and printed as
//! ratios to `git worktree add`, with the load average:
//!
//! * `git worktree add -b` (the reference) and `git worktree add --no-checkout` (registration
//!   alone: what ahelper holds the repository lock for);
//! * `ahelper create_worktree` (register under the lock, check out outside it) and libgit2's
//!   `git_worktree_add` (the alternative engine);
//! * `ahelper recycle_worktree` of a parked spare onto a new branch at a commit that changed one
//!   file (what a later worker of a run pays: a rename and `git reset --hard` of what differs),
//!   and `ahelper park_worktree` (what a merged worker's worktree costs instead of a removal);
//! * `git worktree remove` against `ahelper remove_worktree` (rename aside under the lock, files
//!   deleted after it).
//!
//! Run: `cargo bench -p ahelper-worktrees --bench worktree_create`.

use std::fs;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use ahelper_worktrees::{
    GitOwner, Oid, RepoLock, SpareFiles, create_worktree, park_worktree, recycle_worktree,
    remove_worktree,
};

/// Repositories made with the git CLI, as in the tests.
#[path = "../tests/suite/support/git.rs"]
mod git_cli;
/// Medians and the load average, as the other benchmarks print them.
#[path = "common/stats.rs"]
mod stats;
use stats::{journal_less_temp_dir, load_average, median};

const DEFAULT_SIZES: [usize; 2] = [5_000, 100_000];

struct Repo {
    _tmp: tempfile::TempDir,
    repo: PathBuf,
    wt_root: PathBuf,
    base: Oid,
    /// A commit after `base` that changed one file.
    next: Oid,
    lock: std::sync::Arc<RepoLock>,
    made: u64,
}

/// A repository of `files` source files, 50 to a directory, 20 lines each, in two commits.
fn repo(files: usize) -> Repo {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let repo = root.join("repo");
    let wt_root = root.join("wt");
    fs::create_dir_all(&wt_root).unwrap();
    for i in 0..files {
        let dir = repo.join(format!("src/m{:04}", i / 50));
        fs::create_dir_all(&dir).unwrap();
        let body: String = (0..20)
            .map(|l| format!("// file {i} line {l} of some source text\n"))
            .collect();
        fs::write(dir.join(format!("f{i:06}.rs")), body).unwrap();
    }
    git_cli::init_repo(&repo, &[]);
    let base = Oid::from_str(git_cli::git(&repo, &["rev-parse", "HEAD"]).trim()).unwrap();
    fs::write(repo.join("src/m0000/f000000.rs"), "// changed\n").unwrap();
    git_cli::git(&repo, &["commit", "-qam", "one file changed"]);
    let next = Oid::from_str(git_cli::git(&repo, &["rev-parse", "HEAD"]).trim()).unwrap();
    let lock = GitOwner::new().lock_for(&repo).unwrap();
    Repo {
        _tmp: tmp,
        repo,
        wt_root,
        base,
        next,
        lock,
        made: 0,
    }
}

impl Repo {
    fn unique(&mut self, prefix: &str) -> String {
        self.made += 1;
        format!("{prefix}{}", self.made)
    }

    fn git_add(&mut self, extra: &[&str]) -> PathBuf {
        let name = self.unique("cli");
        let path = self.wt_root.join(&name);
        let branch = format!("cli/{name}");
        let mut args = vec!["worktree", "add", "-q"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["-b", &branch, path.to_str().unwrap()]);
        let base = self.base.to_string();
        args.push(&base);
        git_cli::git(&self.repo, &args);
        path
    }

    fn ahelper_create(&mut self, at: Oid) -> PathBuf {
        let name = self.unique("api");
        let path = self.wt_root.join(&name);
        create_worktree(
            &self.lock,
            &self.repo,
            &path,
            &format!("ahelper/b/{name}"),
            at,
        )
        .unwrap();
        path
    }

    fn libgit2_add(&mut self) -> PathBuf {
        let name = self.unique("lg2");
        let path = self.wt_root.join(&name);
        let repo = git2::Repository::open(&self.repo).unwrap();
        let commit = repo.find_commit(self.base).unwrap();
        let branch = repo.branch(&format!("lg2/{name}"), &commit, false).unwrap();
        let mut opts = git2::WorktreeAddOptions::new();
        opts.reference(Some(branch.get()));
        repo.worktree(&name, &path, Some(&opts)).unwrap();
        path
    }
}

fn timed<T>(f: impl FnOnce() -> T) -> (Duration, T) {
    let t = Instant::now();
    let out = f();
    (t.elapsed(), out)
}

/// One round of every way on `r`; durations in the order of [`WAYS`].
fn round(r: &mut Repo) -> [Duration; 8] {
    let (git_add, cli) = timed(|| r.git_add(&[]));
    let (no_checkout, bare) = timed(|| r.git_add(&["--no-checkout"]));
    let base = r.base;
    let (api, made) = timed(|| r.ahelper_create(base));
    let (lg2, _) = timed(|| r.libgit2_add());
    // A worker's worktree, merged: parked, then recycled for the next worker at a later commit.
    let spare_name = r.unique(".spare-");
    let spare = r.wt_root.join(spare_name);
    let (park, spare) =
        timed(|| park_worktree(&r.lock, &r.repo, &r.wt_root, &made, &spare).unwrap());
    let next_name = r.unique("next");
    let next = r.wt_root.join(&next_name);
    let branch = format!("ahelper/b/{next_name}");
    let (recycle, _) = timed(|| {
        recycle_worktree(
            &r.lock,
            &r.repo,
            &spare,
            &next,
            &branch,
            r.next,
            SpareFiles::Used,
        )
        .unwrap()
    });
    let (git_remove, _) = timed(|| {
        git_cli::git(
            &r.repo,
            &["worktree", "remove", "--force", cli.to_str().unwrap()],
        )
    });
    let (api_remove, _) =
        timed(|| remove_worktree(&r.lock, &r.repo, &r.wt_root, &next, true).unwrap());
    git_cli::git(
        &r.repo,
        &["worktree", "remove", "--force", bare.to_str().unwrap()],
    );
    [
        git_add,
        no_checkout,
        api,
        lg2,
        recycle,
        park,
        git_remove,
        api_remove,
    ]
}

const WAYS: [&str; 8] = [
    "git worktree add",
    "git worktree add --no-checkout",
    "ahelper create_worktree",
    "libgit2 worktree add",
    "ahelper recycle_worktree (spare -> new branch, 1 file differs)",
    "ahelper park_worktree (merged worktree -> spare)",
    "git worktree remove",
    "ahelper remove_worktree",
];

fn main() {
    let sizes: Vec<usize> = std::env::var("WORKTREE_BENCH_FILES")
        .ok()
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| DEFAULT_SIZES.to_vec());
    if let Some(note) = journal_less_temp_dir() {
        println!("{note}");
    }
    for files in sizes {
        let (made_in, mut r) = timed(|| repo(files));
        let rounds = if files > 20_000 { 3 } else { 5 };
        let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); WAYS.len()];
        let load_before = load_average();
        for _ in 0..rounds {
            for (i, d) in round(&mut r).into_iter().enumerate() {
                samples[i].push(d);
            }
        }
        let medians: Vec<Duration> = samples.into_iter().map(median).collect();
        println!(
            "\nworktree start-up, {files}-file repository (made in {made_in:.1?}), median of {rounds} rounds, load average {load_before} before, {} after:",
            load_average()
        );
        let reference = medians[0].as_secs_f64();
        for (way, d) in WAYS.iter().zip(&medians) {
            println!(
                "  {way:<64} {d:>10.1?}  = {:.3}x git worktree add",
                d.as_secs_f64() / reference
            );
        }
        println!(
            "  ahelper remove_worktree / git worktree remove = {:.2}x",
            medians[7].as_secs_f64() / medians[6].as_secs_f64()
        );
    }
}
