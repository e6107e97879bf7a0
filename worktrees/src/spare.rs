//! Spare worktrees: a worktree kept ready, HEAD detached, to become the next worker's worktree
//! faster than `git worktree add` + `git worktree remove` would make and unmake one.
//!
//! * [`create_spare_worktree`]: a new detached worktree at a commit (made while the coordinator
//!   is still planning, before any worker branch exists);
//! * [`park_worktree`]: a finished, clean worktree (its branch merged) becomes a spare: HEAD
//!   detached at its commit, the directory renamed to the spare's path — its branch is then no
//!   longer checked out anywhere and can be deleted;
//! * [`recycle_worktree`]: a spare becomes a worker's worktree on a new branch at its start
//!   commit: renamed to the worker's path, HEAD set to the branch, then `git reset --hard` (only
//!   the files that differ are rewritten) outside the lock — except for a spare made by
//!   [`create_spare_worktree`] and unused since ([`SpareFiles::AsCreated`]) whose HEAD already
//!   is the start commit: its files and index are that commit's, nothing is rewritten and no git
//!   process runs (a ref, a rename, HEAD and admin files).
//!
//! Ref and admin-file updates (branch creation, HEAD, `<common>/worktrees/<name>/gitdir`, the
//! marker) happen under the [`RepoLock`]; populating files happens outside it. Ignored files of
//! a parked worktree (build outputs, `.worktreeinclude` copies) stay: the next worker starts
//! with them warm. Untracked files that are not ignored never do: only a clean worktree is
//! parked.

use std::fs;
use std::path::{Path, PathBuf};

use git2::{Oid, Repository};

use crate::error::{Context as _, io_err};
use crate::repo::canonical;
use crate::worktree::{
    Locked, NewWorktree, WorktreeInfo, check_branch_name, checkout_new_worktree, find_registered,
    refuse_losing_work, registered_at, remove_marker, run_post_checkout_hook, sync_marker,
    write_marker_for,
};

/// What is known of a spare's files when it is recycled ([`recycle_worktree`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpareFiles {
    /// Made by [`create_spare_worktree`] and held unused since (by the caller's own
    /// bookkeeping): its index and files are those of its HEAD. Recycled onto a branch at that
    /// same commit, nothing is rewritten: only the branch, the rename, HEAD and the admin files.
    AsCreated,
    /// Parked after use ([`park_worktree`]) or not known: `git reset --hard` to the start
    /// commit (only the files that differ are rewritten).
    Used,
}
use crate::{GitError, RepoLock, cli};

/// Creates a worktree at `path` with HEAD detached at `commit` (`git worktree add --detach
/// --no-checkout` and the marker under `lock`, the checkout outside it), to be recycled by
/// [`recycle_worktree`]. Same path rules as [`crate::create_worktree`]; its marker's `branch`
/// is empty.
///
/// # Errors
/// [`GitError::CommitNotFound`], [`GitError::WorktreePathExists`],
/// [`GitError::WorktreeInsideCheckout`], [`GitError::GitCommand`] / [`GitError::GitNotFound`],
/// [`GitError::Io`], [`GitError::Libgit2`], [`GitError::WrongLock`].
pub fn create_spare_worktree(
    lock: &RepoLock,
    repo: &Path,
    path: &Path,
    commit: Oid,
) -> Result<WorktreeInfo, GitError> {
    let mut locked = Locked::open(lock, repo)?;
    locked
        .repo
        .find_commit(commit)
        .map_err(|_| GitError::CommitNotFound {
            rev: commit.to_string(),
        })?;
    let target = locked.new_path(path)?;
    if let Some(parent) = target.parent() {
        fs::create_dir_all(parent).map_err(io_err("creating", parent))?;
    }
    cli::run({
        let mut cmd = cli::command(
            &locked.main,
            ["worktree", "add", "--quiet", "--no-checkout", "--detach"],
        );
        cmd.arg(&target).arg(commit.to_string());
        cmd
    })?;
    let target = canonical(&target)?;
    write_marker_for(&locked.common, &target, "", commit)?;
    locked.unlock();
    let populated = sync_marker(&locked.common, &target)
        .and_then(|()| checkout_new_worktree(&locked.repo, &target, commit));
    if let Err(e) = populated {
        locked.relock()?;
        force_remove(&locked.main, &locked.common, &target);
        return Err(e);
    }
    find_registered(&locked.repo, &target)
}

/// Parks the clean worktree at `path` (strictly inside `base_dir`, registered, ahelper's, not
/// locked) as a spare at `spare`: HEAD detached at its commit, the directory renamed to
/// `spare`, git's admin entry and the marker updated — all under `lock`, no file rewritten.
/// Returns the spare's canonical path. Its branch is kept and no longer checked out.
///
/// # Errors
/// [`GitError::UnsafeRemoval`] when `path` is not inside `base_dir`,
/// [`GitError::InvalidWorktreePath`] when it is not a registered worktree of ahelper; [`GitError::WorktreeLocked`]; [`GitError::WorktreeDirty`] /
/// [`GitError::UnreachableCommits`] when parking would lose work; [`GitError::WorktreePathExists`]
/// for a taken `spare`; [`GitError::Io`], [`GitError::Libgit2`], [`GitError::WrongLock`].
pub fn park_worktree(
    lock: &RepoLock,
    repo: &Path,
    base_dir: &Path,
    path: &Path,
    spare: &Path,
) -> Result<PathBuf, GitError> {
    let locked = Locked::open(lock, repo)?;
    let spare = park_locked(&locked, base_dir, path, spare)?;
    drop(locked);
    sync_marker(&common_of(lock), &spare)?;
    Ok(spare)
}

/// The common git dir `lock` guards (where the markers live).
fn common_of(lock: &RepoLock) -> PathBuf {
    lock.common_dir().to_path_buf()
}

/// [`park_worktree`]'s work under the lock.
fn park_locked(
    locked: &Locked<'_>,
    base_dir: &Path,
    path: &Path,
    spare: &Path,
) -> Result<PathBuf, GitError> {
    let target = locked.removal_target(base_dir, path)?;
    let (repo, common) = (&locked.repo, &locked.common);
    let wt = registered_ours(repo, &target)?;
    refuse_losing_work(repo, &wt, &target)?;
    let head = wt.head.ok_or_else(|| GitError::BaseMismatch {
        path: target.clone(),
        expected: "a commit".to_owned(),
        actual: "unborn".to_owned(),
    })?;
    let spare = locked.new_path(spare)?;
    Repository::open(&target)
        .and_then(|r| r.set_head_detached(head))
        .ctx(|| format!("detaching HEAD of {}", target.display()))?;
    let spare = move_registered(common, &wt, &target, &spare)?;
    write_marker_for(common, &spare, "", head)?;
    remove_marker(common, &target);
    tracing::info!(from = %target.display(), to = %spare.display(), "parked worktree");
    Ok(spare)
}

/// Turns the spare at `spare` (made by [`create_spare_worktree`] or [`park_worktree`]) into a
/// worktree at `path` on a new branch `branch` at `base`, as [`crate::create_worktree`] would
/// make it: same branch rules (S01, S02, S32) and path rules, HEAD verified (S04). Under `lock`:
/// the branch, the rename, HEAD, the admin entry and the marker (no listing of the other
/// worktrees, no `fsync`); outside it: the marker flushed, `git reset --hard` (rewrites only the
/// files that differ; skipped for `files` [`SpareFiles::AsCreated`] at `base`) and the
/// `post-checkout` hook. On a failure after the rename the worktree is removed and the branch
/// created here deleted.
///
/// # Errors
/// Those of [`crate::create_worktree`], and [`GitError::InvalidWorktreePath`] when `spare` is not a
/// detached, unlocked, registered worktree of ahelper.
pub fn recycle_worktree(
    lock: &RepoLock,
    repo_path: &Path,
    spare: &Path,
    path: &Path,
    branch: &str,
    base: Oid,
    files: SpareFiles,
) -> Result<WorktreeInfo, GitError> {
    let (info, _) = recycle(lock, repo_path, (spare, path), (branch, base), files, false)?;
    Ok(info)
}

/// [`recycle_worktree`], except that when the spare's files are kept (no `git reset --hard`)
/// the new marker is not flushed to disk yet: the caller starts using the worktree at once and
/// flushes it with [`MarkerSync::sync`] before it relies on the worktree surviving a power loss
/// (a worker: before it commits). `None`: the marker is on disk already.
///
/// # Errors
/// Those of [`recycle_worktree`].
pub fn recycle_worktree_deferring_sync(
    lock: &RepoLock,
    repo_path: &Path,
    (spare, path): (&Path, &Path),
    branch: &str,
    base: Oid,
    files: SpareFiles,
) -> Result<(WorktreeInfo, Option<MarkerSync>), GitError> {
    recycle(lock, repo_path, (spare, path), (branch, base), files, true)
}

/// A worktree's marker, written and renamed into place (every reader sees it) but not yet
/// flushed to disk ([`recycle_worktree_deferring_sync`]).
#[derive(Debug)]
#[must_use = "the marker is not on disk until it is synced"]
pub struct MarkerSync {
    common: PathBuf,
    path: PathBuf,
}

impl MarkerSync {
    /// Flushes the marker (`fsync`): after a power loss the worktree is still ahelper's.
    ///
    /// # Errors
    /// [`GitError::Io`] opening or syncing it.
    pub fn sync(self) -> Result<(), GitError> {
        sync_marker(&self.common, &self.path)
    }
}

fn recycle(
    lock: &RepoLock,
    repo_path: &Path,
    (spare, path): (&Path, &Path),
    (branch, base): (&str, Oid),
    files: SpareFiles,
    defer_sync: bool,
) -> Result<(WorktreeInfo, Option<MarkerSync>), GitError> {
    check_branch_name(branch)?;
    let locked = Locked::open(lock, repo_path)?;
    let spare = canonical(spare)?;
    let wt = registered_ours(&locked.repo, &spare)?;
    if wt.branch.is_some() {
        return Err(not_a_spare(&spare, "its HEAD is on a branch"));
    }
    let target = locked.new_path(path)?;
    let (mut new, expected) = NewWorktree::prepare(locked, target, branch, Some(base))?;
    if let Some(parent) = new.target.parent() {
        fs::create_dir_all(parent).map_err(io_err("creating", parent))?;
    }
    new.target = match move_registered(&new.locked.common, &wt, &spare, &new.target) {
        Ok(target) => target,
        Err(e) => {
            new.undo_branch();
            return Err(e);
        }
    };
    remove_marker(&new.locked.common, &spare);
    let pointed = Repository::open(&new.target)
        .and_then(|r| r.set_head(&format!("refs/heads/{branch}")))
        .ctx(|| format!("setting HEAD of {}", new.target.display()))
        .and_then(|()| new.write_marker(expected));
    if let Err(e) = pointed {
        new.remove();
        return Err(e);
    }
    let unchanged = files == SpareFiles::AsCreated && wt.head == Some(expected);
    let marker = if unchanged {
        keep_files(&mut new, expected, defer_sync)?
    } else {
        new.populate(expected)?;
        None
    };
    tracing::info!(from = %spare.display(), path = %new.target.display(), branch, base = %expected, reset = !unchanged, "recycled worktree");
    Ok((find_registered(&new.locked.repo, &new.target)?, marker))
}

/// A spare's files already are `expected`'s ([`SpareFiles::AsCreated`] at that commit): no
/// `git reset --hard`. Outside the lock: the marker flushed (unless `defer_sync`: then it is
/// returned to be flushed later), the `post-checkout` hook (when the repository has one) and
/// HEAD verified (S04); on a failure the worktree is removed under the lock again.
fn keep_files(
    new: &mut NewWorktree<'_>,
    expected: Oid,
    defer_sync: bool,
) -> Result<Option<MarkerSync>, GitError> {
    new.locked.unlock();
    let marker = MarkerSync {
        common: new.locked.common.clone(),
        path: new.target.clone(),
    };
    let (marker, synced) = if defer_sync {
        (Some(marker), Ok(()))
    } else {
        (None, marker.sync())
    };
    let kept = synced
        .and_then(|()| run_post_checkout_hook(&new.locked.repo, &new.target, expected))
        .and_then(|()| new.verify_head(expected));
    if let Err(e) = kept {
        new.locked.relock()?;
        new.remove();
        return Err(e);
    }
    Ok(marker)
}

/// The registered worktree at `target`, ahelper's and not locked.
fn registered_ours(repo: &Repository, target: &Path) -> Result<WorktreeInfo, GitError> {
    let wt = registered_at(repo, target)?
        .ok_or_else(|| not_a_spare(target, "it is not a registered worktree of this repository"))?;
    if !wt.is_ours() {
        return Err(not_a_spare(target, "ahelper did not create it (no marker)"));
    }
    if wt.locked {
        return Err(GitError::WorktreeLocked {
            path: target.to_path_buf(),
            reason: wt.lock_reason.clone(),
        });
    }
    Ok(wt)
}

/// Renames the registered worktree `wt` from `from` to `to` and points its admin entry
/// (`<common>/worktrees/<name>/gitdir`) at the new place, as `git worktree move` does. The
/// canonical new path.
fn move_registered(
    common: &Path,
    wt: &WorktreeInfo,
    from: &Path,
    to: &Path,
) -> Result<PathBuf, GitError> {
    let name = wt.name.clone().unwrap_or_default();
    let gitdir_file = common.join("worktrees").join(&name).join("gitdir");
    fs::rename(from, to).map_err(io_err("renaming the worktree to", to))?;
    let to = canonical(to)?;
    let tmp = gitdir_file.with_extension("tmp");
    let written = fs::write(&tmp, format!("{}\n", to.join(".git").display()))
        .and_then(|()| fs::rename(&tmp, &gitdir_file));
    if let Err(e) = written {
        // Back where git expects it.
        let _ = fs::remove_file(&tmp);
        let _ = fs::rename(&to, from);
        return Err(io_err("writing", &gitdir_file)(e));
    }
    Ok(to)
}

/// `git worktree remove --force` and the marker (the caller holds the lock).
fn force_remove(main: &Path, common: &Path, target: &Path) {
    let _ = cli::run({
        let mut cmd = cli::command(main, ["worktree", "remove", "--force"]);
        cmd.arg(target);
        cmd
    });
    remove_marker(common, target);
}

fn not_a_spare(path: &Path, reason: &str) -> GitError {
    GitError::InvalidWorktreePath {
        path: path.to_path_buf(),
        reason: format!("it cannot be parked or recycled as a spare worktree: {reason}"),
    }
}
