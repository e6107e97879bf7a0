//! S22: a stale `index.lock` is removed only with evidence.

use std::fs;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

use super::support::{Fixture, git};
use ahelper_worktrees::{GitOwner, StaleLockOutcome, remove_stale_index_lock};

fn worktree_with_lock(f: &Fixture, age: Duration) -> (PathBuf, PathBuf) {
    let lock = GitOwner::new().lock_for(&f.repo).unwrap();
    let wt = f.worker(&lock, "r/w1");
    let gitdir = PathBuf::from(git(&wt, &["rev-parse", "--absolute-git-dir"]));
    let file = gitdir.join("index.lock");
    let handle = fs::File::create(&file).unwrap();
    handle.set_modified(SystemTime::now() - age).unwrap();
    (wt, file)
}

#[test]
fn no_lock_and_young_lock_are_left_alone() {
    let f = Fixture::new();
    assert_eq!(
        remove_stale_index_lock(&f.repo, Duration::from_secs(1)).unwrap(),
        StaleLockOutcome::NoLock
    );
    let (wt, file) = worktree_with_lock(&f, Duration::ZERO);
    let out = remove_stale_index_lock(&wt, Duration::from_secs(60)).unwrap();
    assert!(matches!(out, StaleLockOutcome::TooRecent { .. }), "{out:?}");
    assert!(file.exists());
}

#[test]
fn old_lock_without_git_process_is_removed() {
    let f = Fixture::new();
    let (wt, file) = worktree_with_lock(&f, Duration::from_secs(120));
    let out = remove_stale_index_lock(&wt, Duration::from_secs(60)).unwrap();
    if cfg!(target_os = "linux") {
        assert!(
            matches!(out, StaleLockOutcome::Removed { age_ms } if age_ms >= 120_000),
            "{out:?}"
        );
        assert!(!file.exists());
        // git works again in that worktree
        git(&wt, &["add", "-A"]);
    } else {
        assert_eq!(out, StaleLockOutcome::Unverifiable);
    }
}

#[test]
fn old_lock_with_a_live_git_process_in_the_worktree_is_kept() {
    let f = Fixture::new();
    let (wt, file) = worktree_with_lock(&f, Duration::from_secs(120));
    // A long-running git process working in that worktree (waits on stdin).
    let mut child = Command::new("git")
        .arg("-C")
        .arg(&wt)
        .args(["cat-file", "--batch"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    // wait until the process has changed into the worktree
    let pid = child.id();
    for _ in 0..200 {
        let cwd = fs::read_link(format!("/proc/{pid}/cwd")).ok();
        if cwd.as_deref() == Some(wt.as_path()) || !cfg!(target_os = "linux") {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let out = remove_stale_index_lock(&wt, Duration::from_secs(60)).unwrap();
    drop(child.stdin.take());
    child.wait().unwrap();
    if cfg!(target_os = "linux") {
        assert_eq!(out, StaleLockOutcome::GitProcessRunning { pid });
    }
    assert!(file.exists(), "a possibly live lock is never stolen");
}
