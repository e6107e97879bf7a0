//! Ref lock files (`<ref>.lock`) a crash leaves behind. Git and libgit2 update a loose ref by
//! writing `<common dir>/<ref>.lock` and renaming it over the ref; a process killed in between
//! leaves the lock, and every later update of that ref fails as "locked" until it is deleted.

use std::fs;
use std::path::{Path, PathBuf};

use git2::Repository;

use crate::GitError;
use crate::error::{Context as _, io_err};
use crate::repo::canonical;

/// The lock file of the loose ref `refname` (`refs/heads/…`) in `repo`'s common git dir.
pub(crate) fn lock_file(repo: &Repository, refname: &str) -> PathBuf {
    repo.commondir().join(format!("{refname}.lock"))
}

/// Deletes the ref lock files (`*.lock`) under the refs of swarm run `run_id` —
/// `refs/heads/ahelper/<run>/` (its integration, worker and helper branches) and
/// `refs/ahelper/<run>/` (its base snapshot) — in the repository containing `repo`. Returns
/// the files deleted, sorted.
///
/// Only for a caller that holds the run exclusively (ahelper's run claim): no other ahelper
/// process updates these refs then, so a lock there was left by a crash. Locks elsewhere (the
/// user's branches, `packed-refs.lock`) are never touched.
///
/// # Errors
/// [`GitError::Libgit2`] when `repo` is not a repository; [`GitError::Io`] when a directory
/// cannot be read or a lock cannot be deleted.
pub fn remove_run_ref_locks(repo: &Path, run_id: &str) -> Result<Vec<PathBuf>, GitError> {
    let repository = Repository::discover(repo).ctx(|| format!("opening {}", repo.display()))?;
    let common = canonical(repository.commondir())?;
    let mut removed = Vec::new();
    for dir in [
        common.join("refs/heads/ahelper").join(run_id),
        common.join("refs/ahelper").join(run_id),
    ] {
        collect_locks(&dir, &mut removed)?;
    }
    removed.sort();
    for lock in &removed {
        match fs::remove_file(lock) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io_err("deleting the stale ref lock", lock)(e)),
        }
    }
    Ok(removed)
}

/// Adds the `*.lock` files under `dir` (recursively, not following links) to `out`; a missing
/// directory has none.
fn collect_locks(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), GitError> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_err("reading", dir)(e)),
    };
    for entry in entries {
        let entry = entry.map_err(io_err("reading", dir))?;
        let kind = entry.file_type().map_err(io_err("reading", entry.path()))?;
        let path = entry.path();
        if kind.is_dir() {
            collect_locks(&path, out)?;
        } else if kind.is_file() && path.extension().is_some_and(|e| e == "lock") {
            out.push(path);
        }
    }
    Ok(())
}
