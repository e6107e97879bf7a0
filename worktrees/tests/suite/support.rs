//! Shared helpers for the integration tests: real repositories in tempdirs, built with the git CLI.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use ahelper_worktrees::Oid;

/// Runs `git -C dir args…` with a fixed identity; panics with stderr on failure; returns stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "Test User")
        .env("GIT_AUTHOR_EMAIL", "test@example.com")
        .env("GIT_COMMITTER_NAME", "Test User")
        .env("GIT_COMMITTER_EMAIL", "test@example.com")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Writes `content` to `root/rel`, creating parent directories.
pub fn write(root: &Path, rel: &str, content: &str) {
    let p = root.join(rel);
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, content).unwrap();
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
        fs::create_dir_all(&repo).unwrap();
        fs::create_dir_all(&wt_base).unwrap();
        git(&repo, &["init", "-q", "-b", "main"]);
        git(&repo, &["config", "user.name", "Test User"]);
        git(&repo, &["config", "user.email", "test@example.com"]);
        write(&repo, "README.md", "# demo\n\nintro\n");
        write(&repo, "src/a.rs", "fn a() {}\n");
        write(&repo, "src/b.rs", "fn b() {}\n");
        write(&repo, "src/c.rs", "fn c() {}\n");
        write(&repo, ".gitignore", "target/\n*.log\n");
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-q", "-m", "initial"]);
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
