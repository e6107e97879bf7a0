//! Worktree creation on a ~5,000-file repository: `ahelper_worktrees::create_worktree` against plain
//! `git worktree add -b` (and libgit2's `git_worktree_add`, the alternative engine), measured in one
//! run. Prints the ratios first (interleaved rounds, median per engine), then divan's table.
//!
//! Run: `cargo bench -p ahelper-worktrees --bench worktree_create`.

use std::fs;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use ahelper_worktrees::{GitOwner, Oid, RepoLock, create_worktree};

/// Repositories made with the git CLI, as in the tests.
#[path = "../tests/suite/support/git.rs"]
mod git_cli;

const FILES: usize = 5_000;

struct Repo {
    _tmp: tempfile::TempDir,
    repo: PathBuf,
    wt_root: PathBuf,
    base: Oid,
    lock: std::sync::Arc<RepoLock>,
}

fn repo() -> &'static Repo {
    static REPO: OnceLock<Repo> = OnceLock::new();
    REPO.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let repo = root.join("repo");
        let wt_root = root.join("wt");
        fs::create_dir_all(&wt_root).unwrap();
        for i in 0..FILES {
            let dir = repo.join(format!("src/m{:03}", i / 50));
            fs::create_dir_all(&dir).unwrap();
            let body: String = (0..20)
                .map(|l| format!("// file {i} line {l} of some source text\n"))
                .collect();
            fs::write(dir.join(format!("f{i:04}.rs")), body).unwrap();
        }
        git_cli::init_repo(&repo, &[]);
        let base = Oid::from_str(git_cli::git(&repo, &["rev-parse", "HEAD"]).trim()).unwrap();
        let lock = GitOwner::new().lock_for(&repo).unwrap();
        Repo {
            _tmp: tmp,
            repo,
            wt_root,
            base,
            lock,
        }
    })
}

fn unique(prefix: &str) -> String {
    static COUNTER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{prefix}{n}")
}

fn via_api(r: &Repo) {
    let name = unique("api");
    create_worktree(
        &r.lock,
        &r.repo,
        &r.wt_root.join(&name),
        &format!("ahelper/bench/{name}"),
        r.base,
    )
    .unwrap();
}

fn via_cli(r: &Repo) {
    let name = unique("cli");
    let path = r.wt_root.join(&name);
    git_cli::git(
        &r.repo,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            &format!("cli/{name}"),
            path.to_str().unwrap(),
            &r.base.to_string(),
        ],
    );
}

fn via_libgit2(r: &Repo) {
    let name = unique("lg2");
    let repo = git2::Repository::open(&r.repo).unwrap();
    let commit = repo.find_commit(r.base).unwrap();
    let branch = repo.branch(&format!("lg2/{name}"), &commit, false).unwrap();
    let mut opts = git2::WorktreeAddOptions::new();
    opts.reference(Some(branch.get()));
    repo.worktree(&name, &r.wt_root.join(&name), Some(&opts))
        .unwrap();
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let r = repo();
    let rounds = 7;
    let (mut api, mut cli, mut lg2) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        for (f, out) in [
            (via_cli as fn(&Repo), &mut cli),
            (via_api, &mut api),
            (via_libgit2, &mut lg2),
        ] {
            let t = Instant::now();
            f(r);
            out.push(t.elapsed());
        }
    }
    let (api, cli, lg2) = (median(api), median(cli), median(lg2));
    println!("worktree creation, {FILES}-file repository, median of {rounds} interleaved rounds:");
    println!("  git worktree add       {cli:>10.1?}");
    println!(
        "  ahelper create_worktree {api:>9.1?}  ratio vs git CLI = {:.2}x (target <= 1.0x)",
        api.as_secs_f64() / cli.as_secs_f64()
    );
    println!(
        "  libgit2 worktree add   {lg2:>10.1?}  ratio vs git CLI = {:.2}x",
        lg2.as_secs_f64() / cli.as_secs_f64()
    );
    divan::main();
}

#[divan::bench(sample_count = 5, sample_size = 1)]
fn git_cli_worktree_add() {
    via_cli(repo());
}

#[divan::bench(sample_count = 5, sample_size = 1)]
fn ahelper_create_worktree() {
    via_api(repo());
}

#[divan::bench(sample_count = 5, sample_size = 1)]
fn libgit2_worktree_add() {
    via_libgit2(repo());
}
