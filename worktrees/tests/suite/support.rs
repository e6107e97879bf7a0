//! Shared helpers for the integration tests: real repositories in tempdirs, built with the git CLI.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use std::sync::Arc;

use ahelper_worktrees::{GitOwner, Oid, RepoLock, create_worktree};

/// The git helpers the end-to-end tests and the benches use too.
#[path = "../../../tests/suite/support/git.rs"]
mod git_cli;

pub use git_cli::{init_repo, write_file as write};

/// Runs `git -C dir args…` with a fixed identity; panics with stderr on failure; returns stdout
/// without surrounding whitespace.
pub fn git(dir: &Path, args: &[&str]) -> String {
    git_cli::git(dir, args).trim().to_owned()
}

pub fn read(root: &Path, rel: &str) -> String {
    fs::read_to_string(root.join(rel)).unwrap()
}

/// A temp dir holding a repository at `<tmp>/repo` (branch `main`, one commit with a few files) and a
/// worktree base dir at `<tmp>/wt` (outside the checkout).
pub struct Fixture {
    pub tmp: tempfile::TempDir,
    pub repo: PathBuf,
    pub wt_base: PathBuf,
}

impl Fixture {
    pub fn new() -> Fixture {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().canonicalize().unwrap();
        let repo = root.join("repo");
        let wt_base = root.join("wt");
        fs::create_dir_all(&wt_base).unwrap();
        init_repo(
            &repo,
            &[
                ("README.md", "# demo\n\nintro\n"),
                ("src/a.rs", "fn a() {}\n"),
                ("src/b.rs", "fn b() {}\n"),
                ("src/c.rs", "fn c() {}\n"),
                (".gitignore", "target/\n*.log\n"),
            ],
        );
        Fixture { tmp, repo, wt_base }
    }

    pub fn head(&self) -> Oid {
        Oid::from_str(&git(&self.repo, &["rev-parse", "HEAD"])).unwrap()
    }

    pub fn rev(&self, rev: &str) -> Oid {
        Oid::from_str(&git(&self.repo, &["rev-parse", rev])).unwrap()
    }

    pub fn wt(&self, name: &str) -> PathBuf {
        self.wt_base.join(name)
    }

    /// The repository lock of a new [`GitOwner`].
    pub fn lock(&self) -> Arc<RepoLock> {
        GitOwner::new().lock_for(&self.repo).unwrap()
    }

    /// A worktree `wt(name)` made by ahelper on a new branch `ahelper/<name>` at HEAD.
    pub fn worker(&self, lock: &RepoLock, name: &str) -> PathBuf {
        let path = self.wt(name);
        let branch = format!("ahelper/{name}");
        create_worktree(lock, &self.repo, &path, &branch, self.head()).unwrap();
        path
    }

    /// [`Fixture::worker`] (with a lock of its own) holding `files` (path, content), not
    /// committed.
    pub fn worker_with(&self, name: &str, files: &[(&str, &str)]) -> PathBuf {
        let path = self.worker(&self.lock(), name);
        for (rel, content) in files {
            write(&path, rel, content);
        }
        path
    }

    /// A linked worktree `wt(name)` on a new `branch`, made with the git CLI (not by ahelper).
    pub fn git_worktree(&self, name: &str, branch: &str) -> PathBuf {
        let path = self.wt(name);
        let args = [
            "worktree",
            "add",
            "-q",
            path.to_str().unwrap(),
            "-b",
            branch,
        ];
        git(&self.repo, &args);
        path
    }

    /// Makes the user's checkout dirty: a modified tracked file, a staged change, a deleted file and
    /// an untracked file (plus an ignored one).
    pub fn make_dirty(&self) {
        write(
            &self.repo,
            "README.md",
            "# demo\n\nintro\nuser's unsaved line\n",
        );
        write(&self.repo, "src/b.rs", "fn b() { /* staged */ }\n");
        git(&self.repo, &["add", "src/b.rs"]);
        fs::remove_file(self.repo.join("src/c.rs")).unwrap();
        write(&self.repo, "notes.txt", "user's untracked notes\n");
        write(&self.repo, "build.log", "ignored\n");
    }
}

/// Everything of the user's checkout that ahelper must never change: HEAD, the index file, every
/// branch ref, and every file of the working tree (bytes), `.git` and `.ahelper` excluded.
#[derive(Debug, PartialEq, Eq)]
pub struct UserState {
    head_file: Vec<u8>,
    index: Vec<u8>,
    current_branch: String,
    head_commit: String,
    files: BTreeMap<PathBuf, Vec<u8>>,
}

impl UserState {
    pub fn capture(repo: &Path) -> UserState {
        let mut files = BTreeMap::new();
        collect(repo, repo, &mut files);
        UserState {
            head_file: fs::read(repo.join(".git/HEAD")).unwrap(),
            index: fs::read(repo.join(".git/index")).unwrap_or_default(),
            current_branch: git(repo, &["symbolic-ref", "-q", "--short", "HEAD"]),
            head_commit: git(repo, &["rev-parse", "HEAD"]),
            files,
        }
    }
}

fn collect(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
    for entry in fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if name == ".git" || name == ".ahelper" {
            continue;
        }
        let path = entry.path();
        if path.is_dir() {
            collect(root, &path, out);
        } else {
            out.insert(
                path.strip_prefix(root).unwrap().to_owned(),
                fs::read(&path).unwrap(),
            );
        }
    }
}
