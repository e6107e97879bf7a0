//! Serialising worktree mutations per repository (case S08), without global state.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use git2::Repository;

use crate::GitError;
use crate::repo::{canonical, open_repo};

/// The one lock behind which every worktree add / remove / prune (and branch deletion) on one
/// repository runs. Identified by the repository's canonical common git dir, so all worktrees of a
/// repository share it. Share it as `Arc<RepoLock>`; get it from [`GitOwner::lock_for`] so that every
/// caller in the process uses the same one.
///
/// This serialises callers inside one process. Across processes, git's own lock files
/// (`index.lock`, `<ref>.lock`, the worktree admin dirs) are what protects the repository.
#[derive(Debug)]
pub struct RepoLock {
    common_dir: PathBuf,
    mutex: Mutex<()>,
}

impl RepoLock {
    /// A lock for the repository containing `repo`.
    ///
    /// # Errors
    /// Those of [`crate::RepoInfo::discover`].
    pub fn new(repo: &Path) -> Result<RepoLock, GitError> {
        let r = open_repo(repo)?;
        Ok(RepoLock {
            common_dir: canonical(r.commondir())?,
            mutex: Mutex::new(()),
        })
    }

    /// The canonical common git dir of the repository this lock guards.
    pub fn common_dir(&self) -> &Path {
        &self.common_dir
    }

    /// Takes the lock after checking it belongs to `repo`. A poisoned lock is recovered: it guards
    /// no data, only the order of git operations.
    pub(crate) fn acquire(&self, repo: &Repository) -> Result<MutexGuard<'_, ()>, GitError> {
        let common = canonical(repo.commondir())?;
        if common != self.common_dir {
            return Err(GitError::WrongLock {
                lock_repo: self.common_dir.clone(),
                repo: common,
            });
        }
        Ok(self.mutex.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// Hands out one [`RepoLock`] per repository (keyed by canonical common git dir). Create one per
/// process (e.g. per swarm run or in the application state) and pass it around in an `Arc`.
#[derive(Debug, Default)]
pub struct GitOwner {
    locks: Mutex<HashMap<PathBuf, Arc<RepoLock>>>,
}

impl GitOwner {
    /// An owner with no repositories yet.
    pub fn new() -> GitOwner {
        GitOwner::default()
    }

    /// The lock of the repository containing `repo`; the same `Arc` for every path in that repository
    /// (main checkout or any linked worktree).
    ///
    /// # Errors
    /// Those of [`crate::RepoInfo::discover`].
    pub fn lock_for(&self, repo: &Path) -> Result<Arc<RepoLock>, GitError> {
        let lock = RepoLock::new(repo)?;
        let mut map = self.locks.lock().unwrap_or_else(|p| p.into_inner());
        Ok(map
            .entry(lock.common_dir.clone())
            .or_insert_with(|| Arc::new(lock))
            .clone())
    }
}
