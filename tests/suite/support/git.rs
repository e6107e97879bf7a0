//! The git CLI in a directory with a fixed identity and no system configuration, for tests and
//! benches. One file, included with `#[path]` by the end-to-end tests (`tests/suite/support`),
//! the worktrees tests (`worktrees/tests/suite/support.rs`) and the benches, so it uses `std`
//! only.

use std::path::Path;
use std::process::Command;

/// The environment of every git process these helpers start, and of the programs under test
/// that commit: no system configuration, a fixed author and committer.
pub const GIT_ENV: [(&str, &str); 5] = [
    ("GIT_CONFIG_NOSYSTEM", "1"),
    ("GIT_AUTHOR_NAME", "Test User"),
    ("GIT_AUTHOR_EMAIL", "test@example.com"),
    ("GIT_COMMITTER_NAME", "Test User"),
    ("GIT_COMMITTER_EMAIL", "test@example.com"),
];

/// Runs `git -C dir args…` with [`GIT_ENV`]; panics with git's stderr when it fails; returns
/// its stdout as is.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .envs(GIT_ENV)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Writes `content` to `root/rel`, creating parent directories.
pub fn write_file(root: &Path, rel: &str, content: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

/// Makes `dir` (created if missing) a repository on branch `main` whose first commit,
/// `initial`, holds `files` (path, content) and whatever `dir` already contained. The identity of
/// [`GIT_ENV`] is also written to the repository's config, for programs started without it.
pub fn init_repo(dir: &Path, files: &[(&str, &str)]) {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["config", "user.name", "Test User"]);
    git(dir, &["config", "user.email", "test@example.com"]);
    git(dir, &["config", "commit.gpgsign", "false"]);
    for (rel, content) in files {
        write_file(dir, rel, content);
    }
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "initial"]);
}
