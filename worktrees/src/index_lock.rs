//! Removing a stale `index.lock` — only with evidence (case S22).

use std::fs;
use std::path::Path;
use std::time::Duration;

use git2::Repository;
use serde::{Deserialize, Serialize};

use crate::GitError;
use crate::error::{Context as _, io_err};
use crate::repo::canonical;

/// What [`remove_stale_index_lock`] found and did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum StaleLockOutcome {
    /// There is no `index.lock`.
    NoLock,
    /// The lock was stale and was deleted.
    Removed {
        /// Age of the lock file (since its last modification), milliseconds.
        age_ms: u64,
    },
    /// The lock is younger than the minimum age; kept.
    TooRecent {
        /// Age of the lock file, milliseconds.
        age_ms: u64,
    },
    /// A running `git` process works in this worktree; kept.
    GitProcessRunning {
        /// Its process id.
        pid: u32,
    },
    /// Running git processes cannot be inspected on this platform (no `/proc`); kept.
    Unverifiable,
}

/// Deletes the `index.lock` of the checkout at `worktree` only when there is evidence it is stale: the
/// file is at least `min_age` old (by modification time) **and** no running `git` process has its
/// working directory in the worktree or its git dir, or names the worktree on its command line
/// (checked through `/proc`; elsewhere the lock is kept and [`StaleLockOutcome::Unverifiable`] is
/// returned). Unconditional deletion could steal a live lock from another session.
///
/// # Errors
/// [`GitError::Io`] when the lock cannot be inspected or deleted; [`GitError::Libgit2`] when
/// `worktree` is not a git checkout.
pub fn remove_stale_index_lock(
    worktree: &Path,
    min_age: Duration,
) -> Result<StaleLockOutcome, GitError> {
    let root = canonical(worktree)?;
    let repo = Repository::open(&root).ctx(|| format!("opening {}", root.display()))?;
    let git_dir = canonical(repo.path())?;
    let lock = git_dir.join("index.lock");
    let meta = match fs::metadata(&lock) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(StaleLockOutcome::NoLock),
        Err(e) => return Err(io_err("inspecting", &lock)(e)),
    };
    let age = meta
        .modified()
        .ok()
        .and_then(|m| m.elapsed().ok())
        .unwrap_or_default();
    let age_ms = age.as_millis() as u64;
    if age < min_age {
        return Ok(StaleLockOutcome::TooRecent { age_ms });
    }
    match live_git_process(&root, &git_dir) {
        Some(Some(pid)) => return Ok(StaleLockOutcome::GitProcessRunning { pid }),
        Some(None) => {}
        None => return Ok(StaleLockOutcome::Unverifiable),
    }
    match fs::remove_file(&lock) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(StaleLockOutcome::NoLock),
        Err(e) => return Err(io_err("deleting", &lock)(e)),
    }
    tracing::warn!(lock = %lock.display(), age_ms, "removed a stale index.lock");
    Ok(StaleLockOutcome::Removed { age_ms })
}

/// `None`: cannot tell (no `/proc`). `Some(Some(pid))`: a git process works in `root`/`git_dir`.
fn live_git_process(root: &Path, git_dir: &Path) -> Option<Option<u32>> {
    let proc_dir = Path::new("/proc");
    let entries = fs::read_dir(proc_dir).ok()?;
    if !proc_dir.join("self").exists() {
        return None;
    }
    let me = std::process::id();
    let root_str = root.to_string_lossy().into_owned();
    let processes = entries.flatten().filter_map(|entry| {
        let pid = entry.file_name().to_str()?.parse::<u32>().ok()?;
        (pid != me).then(|| (pid, entry.path()))
    });
    for (pid, dir) in processes {
        let comm = fs::read_to_string(dir.join("comm")).unwrap_or_default();
        let comm = comm.trim();
        if comm != "git" && !comm.starts_with("git-") {
            continue;
        }
        let cwd_hit = fs::read_link(dir.join("cwd"))
            .is_ok_and(|cwd| cwd.starts_with(root) || cwd.starts_with(git_dir));
        let cmdline_hit = fs::read(dir.join("cmdline")).is_ok_and(|raw| {
            raw.split(|b| *b == 0)
                .any(|arg| String::from_utf8_lossy(arg).starts_with(&root_str))
        });
        if cwd_hit || cmdline_hit {
            return Some(Some(pid));
        }
    }
    Some(None)
}
