//! Linked worktrees: create, resume, list, remove, prune.
//!
//! Creation and removal go through the `git` CLI (`git worktree add` / `git worktree remove`): it runs
//! `post-checkout` hooks, applies LFS and other filters, honours sparse-checkout, and populated a
//! 5,000-file worktree faster than libgit2's `git_worktree_add` (libgit2 took 1.24× as long, see
//! `benches/worktree_create.rs`; the checks around it add ~1%). Everything around it — branch checks, path checks, listing,
//! verification, markers, single-entry pruning — uses libgit2 and plain file reads.
//!
//! Every worktree ahelper creates is recorded by a **marker**: a JSON file
//! `<common git dir>/ahelper/worktrees/<key>.json` (key = git blob hash of the worktree's canonical
//! path). It lives in the common git dir, not inside the worktree (so workers never see or commit it)
//! and not in `<common>/worktrees/<name>/` (so it survives the loss of git's admin dir, which is how
//! orphans are recognised — S07).

use std::fs;
use std::path::{Component, Path, PathBuf};
use std::sync::MutexGuard;
use std::time::{SystemTime, UNIX_EPOCH};

use git2::{
    Branch, BranchType, ObjectType, Oid, Repository, WorktreeLockStatus, WorktreePruneOptions,
};
use serde::{Deserialize, Serialize};

use crate::error::{Context as _, io_err};
use crate::repo::{canonical, open_repo, read_gitfile, status_paths, workdir};
use crate::{GitError, RepoLock, cli};

/// One worktree of a repository (the main checkout or a linked worktree).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorktreeInfo {
    /// The worktree's directory (canonicalised when it exists).
    pub path: PathBuf,
    /// Name of its admin dir under `<common git dir>/worktrees/`; `None` for the main worktree.
    pub name: Option<String>,
    /// Whether this is the main worktree (the one owning the common git dir).
    pub is_main: bool,
    /// The branch checked out (short name), or `None` when HEAD is detached.
    pub branch: Option<String>,
    /// The commit HEAD resolves to; `None` when unborn or unreadable.
    #[serde(with = "crate::serde_oid::option")]
    pub head: Option<Oid>,
    /// Whether it is locked (`git worktree lock`).
    pub locked: bool,
    /// The lock reason, if locked with one.
    pub lock_reason: Option<String>,
    /// Whether its directory is gone while git still has its admin entry (`git worktree prune` would
    /// remove it).
    pub prunable: bool,
    /// ahelper's marker for it, when ahelper created it.
    pub marker: Option<WorktreeMarker>,
}

impl WorktreeInfo {
    /// Whether ahelper created this worktree (its marker is present).
    pub fn is_ours(&self) -> bool {
        self.marker.is_some()
    }
}

/// What ahelper records about a worktree it created (JSON, see the module docs for the location).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorktreeMarker {
    /// Canonical path of the worktree directory.
    pub path: PathBuf,
    /// The branch it was created on (short name); empty for a spare worktree (HEAD detached,
    /// see [`crate::park_worktree`]).
    pub branch: String,
    /// The commit its HEAD was verified to be at creation.
    #[serde(with = "crate::serde_oid")]
    pub base: Oid,
    /// Creation time, milliseconds since the Unix epoch.
    pub created_unix_ms: u64,
    /// Id of the process that created it.
    pub pid: u32,
}

/// What [`remove_worktree`] did. Reports the true state (S37): whether the directory is really gone,
/// and which branch (kept, with its commits) the worktree had.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemovedWorktree {
    /// The worktree path that was removed.
    pub path: PathBuf,
    /// The branch it had checked out; the branch itself is kept (delete it with
    /// [`crate::delete_branch`]).
    pub branch: Option<String>,
    /// Its HEAD commit at removal, when known.
    #[serde(with = "crate::serde_oid::option")]
    pub head: Option<Oid>,
    /// Whether the directory no longer exists afterwards.
    pub directory_removed: bool,
    /// Whether it was an orphan (directory left, git's admin metadata gone — S07) rather than a
    /// registered worktree.
    pub orphan: bool,
}

/// Lists the main worktree (first) and every linked worktree of the repository containing `repo`,
/// including prunable ones, with lock state and ahelper markers. Read-only.
///
/// # Errors
/// Those of [`crate::RepoInfo::discover`] (except [`GitError::NoCommits`]), or [`GitError::Libgit2`].
pub fn list_worktrees(repo: &Path) -> Result<Vec<WorktreeInfo>, GitError> {
    let repo = open_repo(repo)?;
    list(&repo)
}

/// Creates a linked worktree at `path` on a new branch `branch` (e.g. `ahelper/<run>/<worker>`)
/// pointing at `base`, via `git worktree add --no-checkout <path> <branch>`, verifies that the new
/// worktree's HEAD is `refs/heads/<branch>` at `base` (S04) and records ahelper's marker — all under
/// `lock` — then populates it outside the lock, as `git worktree add` would (`git reset --hard`,
/// `post-checkout` hook), so that parallel workers do not queue behind each other's checkout.
///
/// * `branch` already exists at exactly `base` and no worktree has it: it is used as is (S02).
/// * `branch` exists elsewhere: [`GitError::BranchExists`] — an existing branch is never reset (S32).
/// * `branch` would nest with an existing branch (`a/b` vs `a/b/c`): [`GitError::BranchNameConflict`]
///   (use [`crate::worker_branch`] / [`crate::integration_branch`]).
/// * `branch` is checked out by any worktree: [`GitError::BranchCheckedOut`] naming that worktree and
///   whether it is ours (S01).
/// * `path` must not exist or be an empty directory ([`GitError::WorktreePathExists`]), must not lie
///   in the common git dir, and must not lie in the user's checkout unless git ignores it there (e.g.
///   under an excluded `.ahelper/`), else [`GitError::WorktreeInsideCheckout`]. Missing parent
///   directories are created.
///
/// On any failure after the branch was created here, the branch is deleted again; on a HEAD mismatch
/// the new worktree is removed ([`GitError::BaseMismatch`]).
///
/// # Errors
/// The above, plus [`GitError::InvalidBranchName`], [`GitError::CommitNotFound`],
/// [`GitError::WrongLock`], [`GitError::GitCommand`] / [`GitError::GitNotFound`] from `git`,
/// [`GitError::Io`], [`GitError::Libgit2`], and those of [`crate::RepoInfo::discover`].
pub fn create_worktree(
    lock: &RepoLock,
    repo: &Path,
    path: &Path,
    branch: &str,
    base: Oid,
) -> Result<WorktreeInfo, GitError> {
    add(lock, repo, path, branch, Some(base))
}

/// Creates a linked worktree at `path` for the **existing** branch `branch` as it is (to resume a
/// worker whose worktree was removed, keeping its commits); verifies HEAD is the branch tip and
/// records the marker. Same path and checkout rules as [`create_worktree`].
///
/// # Errors
/// [`GitError::BranchNotFound`] when the branch does not exist; otherwise as [`create_worktree`].
pub fn resume_worktree(
    lock: &RepoLock,
    repo: &Path,
    path: &Path,
    branch: &str,
) -> Result<WorktreeInfo, GitError> {
    add(lock, repo, path, branch, None)
}

/// Finishes, for a worker's worktree at `path` on `branch`, what a process killed while making
/// it left undone: a worktree registered (`git worktree add`, or a spare moved into place) but
/// whose marker was never written gets it — without the marker its commits are refused; one
/// still detached (a spare moved to `path`, killed before its HEAD was pointed at `branch`) is
/// checked out on `branch` (`git reset --hard` to its tip: no agent worked there yet, its HEAD
/// never was on the branch). The caller vouches that `path` and `branch` are the ones it made
/// them for (a worker's recorded worktree and branch). Returns whether anything was done
/// (`false`: it is on `branch` with its marker). Runs under `lock`.
///
/// # Errors
/// [`GitError::InvalidWorktreePath`] when `path` is not a registered worktree of `repo` or its
/// HEAD is on another branch; [`GitError::Libgit2`] when `branch` is missing or HEAD is
/// unreadable; [`GitError::WrongLock`], [`GitError::Io`], [`GitError::GitCommand`].
pub fn adopt_worktree(
    lock: &RepoLock,
    repo: &Path,
    path: &Path,
    branch: &str,
) -> Result<bool, GitError> {
    let locked = Locked::open(lock, repo)?;
    let target = canonical(path)?;
    let not_ours = |reason: &str| GitError::InvalidWorktreePath {
        path: target.clone(),
        reason: reason.to_owned(),
    };
    let wt = registered_at(&locked.repo, &target)?
        .ok_or_else(|| not_ours("it is not a registered worktree of this repository"))?;
    match wt.branch.as_deref() {
        Some(on) if on != branch => {
            return Err(not_ours("its HEAD is on another branch than the worker's"));
        }
        Some(_) if wt.is_ours() => return Ok(false),
        Some(_) => {}
        None => point_at_branch(&locked.repo, &target, branch)?,
    }
    let head = Repository::open(&target)
        .and_then(|r| r.head()?.peel_to_commit().map(|c| c.id()))
        .ctx(|| format!("reading HEAD of {}", target.display()))?;
    write_marker_for(&locked.common, &target, branch, head)?;
    sync_marker(&locked.common, &target)?;
    tracing::info!(path = %target.display(), branch, "finished an interrupted worktree");
    Ok(true)
}

/// Points the detached worktree at `target` at `branch` and checks its tip out.
fn point_at_branch(repo: &Repository, target: &Path, branch: &str) -> Result<(), GitError> {
    let tip = repo
        .find_branch(branch, git2::BranchType::Local)
        .and_then(|b| b.get().peel_to_commit().map(|c| c.id()))
        .ctx(|| format!("reading the branch {branch}"))?;
    Repository::open(target)
        .and_then(|r| r.set_head(&format!("refs/heads/{branch}")))
        .ctx(|| format!("setting HEAD of {}", target.display()))?;
    checkout_new_worktree(repo, target, tip)
}

/// Creates (`base` given) or resumes (`base` `None`) the worktree at `path` on `branch`:
/// checks under the lock → prepares the branch → registers the worktree and its marker → checks
/// it out outside the lock → verifies HEAD (S04). A failure after the branch or the worktree was
/// created here undoes them.
fn add(
    lock: &RepoLock,
    repo_path: &Path,
    path: &Path,
    branch: &str,
    base: Option<Oid>,
) -> Result<WorktreeInfo, GitError> {
    check_branch_name(branch)?;
    let locked = Locked::open(lock, repo_path)?;
    let target = locked.new_path(path)?;
    let (mut new, expected) = NewWorktree::prepare(locked, target, branch, base)?;
    new.register()?;
    new.write_marker(expected)?;
    new.populate(expected)?;
    let info = find_registered(&new.locked.repo, &new.target)?;
    tracing::info!(path = %new.target.display(), branch, base = %expected, "created worktree");
    Ok(info)
}

/// The registered worktree at `target`, as [`crate::list_worktrees`] reports it.
pub(crate) fn find_registered(repo: &Repository, target: &Path) -> Result<WorktreeInfo, GitError> {
    registered_at(repo, target)?.ok_or_else(|| GitError::GitCommand {
        command: format!("git worktree add {}", target.display()),
        status: "exit status: 0".to_owned(),
        stderr: "the new worktree is not registered in the repository".to_owned(),
    })
}

/// S01: a branch checked out by any worktree gets no second one.
pub(crate) fn refuse_checked_out(repo: &Repository, branch: &str) -> Result<(), GitError> {
    match checked_out_by(repo, branch)? {
        Some(owner) => Err(GitError::BranchCheckedOut {
            branch: branch.to_owned(),
            ours: owner.is_ours(),
            path: owner.path,
        }),
        None => Ok(()),
    }
}

/// The commit the new worktree must start at, and whether the branch was created here: a new
/// branch at `base`; an existing one only at exactly `base` (S02; never reset, S32); the
/// existing branch's tip when resuming (`base` `None`).
pub(crate) fn prepare_branch(
    repo: &Repository,
    branch: &str,
    base: Option<Oid>,
) -> Result<(Oid, bool), GitError> {
    let existing = repo.refname_to_id(&format!("refs/heads/{branch}")).ok();
    match (base, existing) {
        (Some(base), None) => {
            crate::branch::check_no_nesting(repo, branch)?;
            let commit = repo
                .find_commit(base)
                .map_err(|_| GitError::CommitNotFound {
                    rev: base.to_string(),
                })?;
            repo.branch(branch, &commit, false)
                .ctx(|| format!("creating branch `{branch}` at {base}"))?;
            Ok((base, true))
        }
        (Some(base), Some(tip)) if tip == base => Ok((base, false)),
        (Some(base), Some(tip)) => Err(GitError::BranchExists {
            branch: branch.to_owned(),
            tip: tip.to_string(),
            wanted: base.to_string(),
        }),
        (None, Some(tip)) => Ok((tip, false)),
        (None, None) => Err(GitError::BranchNotFound {
            branch: branch.to_owned(),
        }),
    }
}

/// A worktree being created by [`add`] or [`crate::recycle_worktree`] in its locked
/// repository, and how to undo it.
pub(crate) struct NewWorktree<'a> {
    pub(crate) locked: Locked<'a>,
    /// The directory (canonical once registered).
    pub(crate) target: PathBuf,
    pub(crate) branch: &'a str,
    pub(crate) created_branch: bool,
}

impl<'a> NewWorktree<'a> {
    /// The worktree to make at `target` (checked by [`Locked::new_path`]) on `branch`, which no
    /// worktree may have (S01), prepared by [`prepare_branch`]; and the commit it must start at.
    pub(crate) fn prepare(
        locked: Locked<'a>,
        target: PathBuf,
        branch: &'a str,
        base: Option<Oid>,
    ) -> Result<(NewWorktree<'a>, Oid), GitError> {
        refuse_checked_out(&locked.repo, branch)?;
        let (expected, created_branch) = prepare_branch(&locked.repo, branch, base)?;
        let new = NewWorktree {
            locked,
            target,
            branch,
            created_branch,
        };
        Ok((new, expected))
    }

    /// Deletes the branch again when it was created for this worktree.
    pub(crate) fn undo_branch(&self) {
        if self.created_branch
            && let Ok(mut b) = self.locked.repo.find_branch(self.branch, BranchType::Local)
            && let Err(e) = b.delete()
        {
            tracing::warn!(branch = self.branch, error = %e, "could not delete the branch created for a failed worktree");
        }
    }

    /// Checks the registered worktree out outside the lock ([`checkout_new_worktree`]) and
    /// verifies its HEAD (S04). The worktree is registered with a live gitdir, so a concurrent
    /// prune leaves it alone meanwhile (S08). On a failure it is removed, under the lock again.
    pub(crate) fn populate(&mut self, expected: Oid) -> Result<(), GitError> {
        self.locked.unlock();
        let populated = sync_marker(&self.locked.common, &self.target)
            .and_then(|()| checkout_new_worktree(&self.locked.repo, &self.target, expected))
            .and_then(|()| self.verify_head(expected));
        if let Err(e) = populated {
            self.locked.relock()?;
            self.remove();
            return Err(e);
        }
        Ok(())
    }

    /// `git worktree add --no-checkout`: the admin dir and HEAD, under the lock. Populating the
    /// files is left to [`checkout_new_worktree`], outside the lock: it only touches the new
    /// worktree's own index and directory, so parallel workers check out in parallel instead of
    /// queueing behind each other's checkout (benches/swarm.rs). This is what
    /// `git worktree add` itself does in two steps.
    fn register(&mut self) -> Result<(), GitError> {
        if let Some(parent) = self.target.parent()
            && let Err(e) = fs::create_dir_all(parent)
        {
            self.undo_branch();
            return Err(io_err("creating", parent)(e));
        }
        let added = cli::run({
            let mut cmd = cli::command(
                &self.locked.main,
                ["worktree", "add", "--quiet", "--no-checkout"],
            );
            cmd.arg(&self.target).arg(self.branch);
            cmd
        });
        if let Err(e) = added {
            self.undo_branch();
            return Err(e);
        }
        self.target = canonical(&self.target)?;
        Ok(())
    }

    /// Records ahelper's marker for the new worktree.
    pub(crate) fn write_marker(&self, base: Oid) -> Result<(), GitError> {
        write_marker_for(&self.locked.common, &self.target, self.branch, base)
    }

    /// S04: the worktree must start exactly where it was asked to: HEAD is `refs/heads/<branch>`
    /// at `expected`.
    pub(crate) fn verify_head(&self, expected: Oid) -> Result<(), GitError> {
        let refname = format!("refs/heads/{}", self.branch);
        let actual = Repository::open(&self.target)
            .and_then(|r| {
                let head = r.head()?;
                Ok((head.name().ok().map(str::to_owned), head.target()))
            })
            .ok();
        if matches!(&actual, Some((Some(name), Some(id))) if *name == refname && *id == expected) {
            return Ok(());
        }
        Err(GitError::BaseMismatch {
            path: self.target.clone(),
            expected: expected.to_string(),
            actual: actual
                .map(|(name, id)| {
                    format!(
                        "{} ({})",
                        id.map(|i| i.to_string()).unwrap_or_else(|| "unborn".into()),
                        name.unwrap_or_else(|| "detached".into())
                    )
                })
                .unwrap_or_else(|| "unreadable".to_owned()),
        })
    }

    /// Removes the registered worktree, the branch created for it and the marker (the caller
    /// holds the lock).
    pub(crate) fn remove(&self) {
        let _ = cli::run({
            let mut cmd = cli::command(&self.locked.main, ["worktree", "remove", "--force"]);
            cmd.arg(&self.target);
            cmd
        });
        self.undo_branch();
        remove_marker(&self.locked.common, &self.target);
    }
}

/// Populates a worktree registered with `git worktree add --no-checkout`, as `git worktree add`
/// does after registering: `git reset --hard --no-recurse-submodules` in the worktree (filters,
/// sparse-checkout), then the `post-checkout` hook with the arguments git gives it
/// (`<null oid> <commit> 1`), when the repository has one (`core.hooksPath` or `hooks/` in the
/// common git dir).
///
/// # Errors
/// [`GitError::GitCommand`] / [`GitError::GitNotFound`] when `git` or the hook fails.
pub(crate) fn checkout_new_worktree(
    repo: &Repository,
    worktree: &Path,
    commit: Oid,
) -> Result<(), GitError> {
    cli::git(
        worktree,
        ["reset", "--hard", "--no-recurse-submodules", "--quiet"],
    )?;
    run_post_checkout_hook(repo, worktree, commit)
}

/// Runs the repository's `post-checkout` hook in `worktree` as `git worktree add` does
/// (`<null oid> <commit> 1`), when the repository has one (`core.hooksPath` or `hooks/` in the
/// common git dir); nothing (and no process) otherwise.
///
/// # Errors
/// [`GitError::GitCommand`] / [`GitError::GitNotFound`] when `git` or the hook fails.
pub(crate) fn run_post_checkout_hook(
    repo: &Repository,
    worktree: &Path,
    commit: Oid,
) -> Result<(), GitError> {
    let hooks_path_set = repo
        .config()
        .and_then(|c| c.get_path("core.hooksPath"))
        .is_ok();
    if hooks_path_set || repo.commondir().join("hooks/post-checkout").exists() {
        cli::git(
            worktree,
            [
                "hook",
                "run",
                "--ignore-missing",
                "post-checkout",
                "--",
                &Oid::ZERO_SHA1.to_string(),
                &commit.to_string(),
                "1",
            ],
        )?;
    }
    Ok(())
}

/// Removes the linked worktree at `path`, which must lie strictly inside `base_dir` (the directory
/// ahelper keeps worktrees in). The branch is kept. Runs under `lock`.
///
/// Safety (S10): nothing is deleted unless `path` is inside `base_dir`, is not a symlink, is not the
/// main worktree, the common git dir or the current git dir, is not an ancestor of any of them, and
/// is either a registered linked worktree of this repository or an ahelper orphan. On doubt nothing
/// is deleted and [`GitError::UnsafeRemoval`] says why.
///
/// * Registered worktree: refused when locked ([`GitError::WorktreeLocked`], even with `force`);
///   without `force` also when it has uncommitted or untracked changes ([`GitError::WorktreeDirty`])
///   or a detached HEAD whose commits no ref contains ([`GitError::UnreachableCommits`], S29). Under
///   the lock its directory is renamed aside and its admin entry pruned; its files are deleted after
///   the lock is released, so other worktrees are created and removed meanwhile (with submodules, or
///   when the rename fails: `git worktree remove [--force]` under the lock). A registered worktree
///   whose directory is already gone has just its admin entry pruned.
/// * Orphan (S07): the directory is not registered, its `.git` file points to a missing
///   `<common>/worktrees/<name>`, and ahelper's marker names it — the directory is deleted.
///
/// # Errors
/// The above, plus [`GitError::GitCommand`] if `git worktree remove` fails (the result's state is
/// then unchanged), [`GitError::WrongLock`], [`GitError::Io`], [`GitError::Libgit2`].
pub fn remove_worktree(
    lock: &RepoLock,
    repo: &Path,
    base_dir: &Path,
    path: &Path,
    force: bool,
) -> Result<RemovedWorktree, GitError> {
    let locked = Locked::open(lock, repo)?;
    let target = locked.removal_target(base_dir, path)?;
    // Found through its own `.git` file, without listing every worktree under the lock; the
    // full listing only when that does not find it (its `.git` file missing or broken, its
    // directory deleted by hand).
    let registered = match registered_at(&locked.repo, &target)? {
        Some(wt) => Some(wt),
        None => list(&locked.repo)?
            .into_iter()
            .find(|w| !w.is_main && w.path == target),
    };
    let removed = match registered {
        Some(wt) => remove_registered(&locked, &wt, target, force)?,
        None => return remove_orphan(&locked.common, target, path),
    };
    drop(locked);
    Ok(removed.delete_files())
}

/// A removed worktree whose files may still have to be deleted: [`remove_registered`]
/// unregisters it under the lock and leaves its directory, renamed aside, to be deleted after
/// the lock is released, so that other workers' worktrees are created and removed meanwhile.
struct Unregistered {
    removed: RemovedWorktree,
    /// The directory renamed aside (`<dir>/.removing-<name>-<pid>-<nanos>`), when there is one.
    aside: Option<PathBuf>,
}

impl Unregistered {
    /// Deletes the directory renamed aside; what could not be deleted is logged and reported
    /// through `directory_removed` (the worktree is unregistered either way).
    fn delete_files(self) -> RemovedWorktree {
        let Some(aside) = self.aside else {
            return self.removed;
        };
        if let Err(e) = fs::remove_dir_all(&aside) {
            tracing::warn!(dir = %aside.display(), error = %e, "could not delete a removed worktree's files");
        }
        RemovedWorktree {
            directory_removed: !aside.exists() && !self.removed.path.exists(),
            ..self.removed
        }
    }
}

fn unsafe_removal(path: &Path, reason: impl Into<String>) -> GitError {
    GitError::UnsafeRemoval {
        path: path.to_owned(),
        reason: reason.into(),
    }
}

/// S10: the resolved directory to remove, only when it lies strictly inside `base_dir`, is not a
/// symlink, and neither is, contains nor lies inside the main worktree's or the repository's
/// git dirs.
fn check_removal_target(
    repo: &Repository,
    main: &Path,
    common: &Path,
    base_dir: &Path,
    path: &Path,
) -> Result<PathBuf, GitError> {
    let base = fs::canonicalize(base_dir).map_err(|_| {
        unsafe_removal(
            path,
            format!("the base dir {} does not exist", base_dir.display()),
        )
    })?;
    let abs = std::path::absolute(path).map_err(io_err("resolving", path))?;
    if fs::symlink_metadata(&abs).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(unsafe_removal(
            path,
            "it is a symlink, not a worktree directory",
        ));
    }
    let target = resolve_lexically_missing(&abs)?;
    if !(target.starts_with(&base) && target != base) {
        return Err(unsafe_removal(
            path,
            format!("it is not inside the worktree base dir {}", base.display()),
        ));
    }
    let mut protected = vec![
        main.to_path_buf(),
        common.to_path_buf(),
        canonical(repo.path())?,
    ];
    if let Some(w) = repo.workdir() {
        protected.push(canonical(w)?);
    }
    for p in &protected {
        if p.starts_with(&target) {
            return Err(unsafe_removal(
                path,
                format!(
                    "it is (or contains) {}, which belongs to the main repository",
                    p.display()
                ),
            ));
        }
        if target.starts_with(p) && p != main {
            return Err(unsafe_removal(
                path,
                format!("it is inside the git dir {}", p.display()),
            ));
        }
    }
    Ok(target)
}

/// A registered linked worktree: refused when locked; without `force` also when dirty or on a
/// detached HEAD whose commits no ref contains (S29). A directory already gone has just its
/// admin entry pruned.
fn remove_registered(
    locked: &Locked<'_>,
    wt: &WorktreeInfo,
    target: PathBuf,
    force: bool,
) -> Result<Unregistered, GitError> {
    let Locked {
        repo, main, common, ..
    } = locked;
    if wt.locked {
        return Err(GitError::WorktreeLocked {
            path: target,
            reason: wt.lock_reason.clone(),
        });
    }
    let removed = |directory_removed: bool, path: PathBuf| RemovedWorktree {
        path,
        branch: wt.branch.clone(),
        head: wt.head,
        directory_removed,
        orphan: false,
    };
    if !target.exists() {
        prune_admin_entry(repo, common, wt)?;
        let removed = removed(true, target);
        return Ok(Unregistered {
            removed,
            aside: None,
        });
    }
    if !force {
        refuse_losing_work(repo, wt, &target)?;
    }
    if let Some(aside) = move_aside(&target) {
        prune_admin_entry(repo, common, wt)?;
        tracing::info!(path = %target.display(), "removed worktree");
        return Ok(Unregistered {
            removed: removed(false, target),
            aside: Some(aside),
        });
    }
    let mut cmd = cli::command(main, ["worktree", "remove"]);
    if force {
        cmd.arg("--force");
    }
    cmd.arg(&target);
    cli::run(cmd)?;
    remove_marker(common, &target);
    tracing::info!(path = %target.display(), "removed worktree");
    Ok(Unregistered {
        removed: removed(!target.exists(), target),
        aside: None,
    })
}

/// Renames the worktree directory `target` aside, next to it
/// (`.removing-<name>-<pid>-<nanos>`), so that unregistering it is a rename and an admin-dir
/// prune under the lock and deleting its files happens after. `None` (nothing moved: let
/// `git worktree remove` do it) when the worktree has submodules (git refuses to remove those
/// without `--force`, and their git dirs live elsewhere) or the rename fails.
fn move_aside(target: &Path) -> Option<PathBuf> {
    if target.join(".gitmodules").exists() {
        return None;
    }
    let (Some(parent), Some(name)) = (target.parent(), target.file_name()) else {
        return None;
    };
    // Unique: the lock is held, and the name of a registered worktree is unique among them.
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let aside = parent.join(format!(
        ".removing-{}-{}-{nanos}",
        name.to_string_lossy(),
        std::process::id()
    ));
    match fs::rename(target, &aside) {
        Ok(()) => Some(aside),
        Err(e) => {
            tracing::debug!(path = %target.display(), error = %e, "could not rename the worktree aside; git removes it");
            None
        }
    }
}

/// Prunes the admin entry (`<common>/worktrees/<name>`) of a registered worktree whose
/// directory is gone, and its marker.
fn prune_admin_entry(repo: &Repository, common: &Path, wt: &WorktreeInfo) -> Result<(), GitError> {
    let name = wt.name.clone().unwrap_or_default();
    let handle = repo
        .find_worktree(&name)
        .ctx(|| format!("opening worktree `{name}`"))?;
    handle
        .prune(Some(WorktreePruneOptions::new().working_tree(false)))
        .ctx(|| format!("pruning the admin entry of worktree `{name}`"))?;
    remove_marker(common, &wt.path);
    Ok(())
}

/// Uncommitted or untracked changes ([`GitError::WorktreeDirty`]), or a detached HEAD no ref
/// contains ([`GitError::UnreachableCommits`]), would be lost by removing the worktree.
pub(crate) fn refuse_losing_work(
    repo: &Repository,
    wt: &WorktreeInfo,
    target: &Path,
) -> Result<(), GitError> {
    let wt_repo =
        Repository::open(target).ctx(|| format!("opening the worktree {}", target.display()))?;
    let dirty = status_paths(&wt_repo, false)?;
    if !dirty.is_empty() {
        return Err(GitError::WorktreeDirty {
            path: target.to_path_buf(),
            paths: dirty,
        });
    }
    if wt.branch.is_none()
        && let Some(head) = wt.head
        && !reachable_from_refs(repo, head)?
    {
        return Err(GitError::UnreachableCommits {
            path: target.to_path_buf(),
            head: head.to_string(),
        });
    }
    Ok(())
}

/// Not registered: only an ahelper orphan of this repository may be deleted (S07) — a directory
/// whose `.git` file points to a missing admin dir of this repository, named by a marker.
fn remove_orphan(common: &Path, target: PathBuf, path: &Path) -> Result<RemovedWorktree, GitError> {
    if !target.is_dir() {
        return Err(unsafe_removal(
            path,
            "it is not a registered worktree of this repository and not a directory",
        ));
    }
    let gitdir = read_gitfile(&target.join(".git")).ok_or_else(|| {
        unsafe_removal(
            path,
            "it is not a registered worktree and has no `.git` file",
        )
    })?;
    if gitdir.exists() {
        return Err(unsafe_removal(
            path,
            format!(
                "it is not registered in this repository but its `.git` points to the existing {}",
                gitdir.display()
            ),
        ));
    }
    let admin_parent = gitdir.parent().map(resolve_lexically_missing).transpose()?;
    if admin_parent.as_deref() != Some(common.join("worktrees").as_path()) {
        return Err(unsafe_removal(
            path,
            format!(
                "its `.git` points to {}, which is not an admin dir of this repository",
                gitdir.display()
            ),
        ));
    }
    let Some(marker) = read_marker(common, &target) else {
        return Err(unsafe_removal(
            path,
            "it looks like an orphaned worktree of this repository, but ahelper did not create it (no marker); delete it yourself if it is not needed",
        ));
    };
    fs::remove_dir_all(&target).map_err(io_err("deleting the orphaned worktree", &target))?;
    remove_marker(common, &target);
    tracing::info!(path = %target.display(), "deleted orphaned worktree");
    Ok(RemovedWorktree {
        directory_removed: !target.exists(),
        path: target,
        branch: Some(marker.branch),
        head: None,
        orphan: true,
    })
}

/// Prunes the admin entries of ahelper's worktrees whose directories are gone (only ours, never
/// locked ones, one entry at a time — unlike `git worktree prune`, which wipes every stale entry,
/// S08), and drops markers of worktrees that no longer exist at all. Returns the pruned paths.
/// Runs under `lock`.
///
/// # Errors
/// [`GitError::WrongLock`], [`GitError::Libgit2`], those of [`crate::RepoInfo::discover`].
pub fn prune_worktrees(lock: &RepoLock, repo: &Path) -> Result<Vec<PathBuf>, GitError> {
    let repo = open_repo(repo)?;
    let _guard = lock.acquire(&repo)?;
    let common = canonical(repo.commondir())?;
    let worktrees = list(&repo)?;
    let mut pruned = Vec::new();
    for wt in &worktrees {
        if wt.is_main || !wt.prunable || wt.locked || !wt.is_ours() {
            continue;
        }
        prune_admin_entry(&repo, &common, wt)?;
        pruned.push(wt.path.clone());
    }
    // Markers whose worktree is neither registered nor on disk any more.
    if let Ok(entries) = fs::read_dir(markers_dir(&common)) {
        for entry in entries.flatten() {
            let Some(marker) = fs::read(entry.path())
                .ok()
                .and_then(|b| serde_json::from_slice::<WorktreeMarker>(&b).ok())
            else {
                continue;
            };
            let registered = worktrees.iter().any(|w| w.path == marker.path);
            if !registered && !marker.path.exists() {
                let _ = fs::remove_file(entry.path());
            }
        }
    }
    Ok(pruned)
}

// ---- helpers -------------------------------------------------------------------------------------

/// A repository opened for a worktree operation, under its [`RepoLock`], with what the
/// operation's paths are checked against: its canonical common git dir and main worktree. The
/// lock is held from [`Locked::open`] until [`Locked::unlock`] or the end of this value.
pub(crate) struct Locked<'l> {
    pub(crate) repo: Repository,
    pub(crate) common: PathBuf,
    pub(crate) main: PathBuf,
    lock: &'l RepoLock,
    guard: Option<MutexGuard<'l, ()>>,
}

impl<'l> Locked<'l> {
    /// Opens the repository containing `repo` and takes `lock`, which must be its lock.
    ///
    /// # Errors
    /// Those of [`crate::RepoInfo::discover`], [`GitError::WrongLock`], [`GitError::Io`].
    pub(crate) fn open(lock: &'l RepoLock, repo: &Path) -> Result<Locked<'l>, GitError> {
        let repo = open_repo(repo)?;
        let guard = lock.acquire(&repo)?;
        let common = canonical(repo.commondir())?;
        let main = main_workdir(&repo)?;
        Ok(Locked {
            repo,
            common,
            main,
            lock,
            guard: Some(guard),
        })
    }

    /// Releases the lock, to work on files that only this operation touches.
    pub(crate) fn unlock(&mut self) {
        self.guard = None;
    }

    /// Takes the lock again after [`Locked::unlock`].
    ///
    /// # Errors
    /// [`GitError::WrongLock`], [`GitError::Io`].
    pub(crate) fn relock(&mut self) -> Result<(), GitError> {
        self.guard = Some(self.lock.acquire(&self.repo)?);
        Ok(())
    }

    /// `path` resolved as the place of a new worktree, checked by [`check_new_path`].
    pub(crate) fn new_path(&self, path: &Path) -> Result<PathBuf, GitError> {
        check_new_path(&self.repo, &self.main, &self.common, path)
    }

    /// `path` resolved as a worktree to take away from `base_dir`, checked by
    /// [`check_removal_target`] (S10).
    pub(crate) fn removal_target(&self, base_dir: &Path, path: &Path) -> Result<PathBuf, GitError> {
        check_removal_target(&self.repo, &self.main, &self.common, base_dir, path)
    }
}

pub(crate) fn check_branch_name(branch: &str) -> Result<(), GitError> {
    let valid = !branch.starts_with('-')
        && branch != "HEAD"
        && Branch::name_is_valid(branch).unwrap_or(false);
    if valid {
        Ok(())
    } else {
        Err(GitError::InvalidBranchName {
            name: branch.to_owned(),
        })
    }
}

/// The main worktree's directory, also when `repo` is a linked worktree.
pub(crate) fn main_workdir(repo: &Repository) -> Result<PathBuf, GitError> {
    if !repo.is_worktree() {
        return workdir(repo);
    }
    let common = canonical(repo.commondir())?;
    match Repository::open(&common) {
        Ok(main) if main.workdir().is_some() => workdir(&main),
        _ => common
            .parent()
            .map(Path::to_owned)
            .ok_or(GitError::BareRepository { path: common }),
    }
}

/// Canonicalises the longest existing prefix of `path` and appends the rest (for paths that do not
/// exist yet). `..` after the existing prefix is rejected by keeping it literal, which never matches
/// a protected directory by prefix.
fn resolve_lexically_missing(path: &Path) -> Result<PathBuf, GitError> {
    let abs = std::path::absolute(path).map_err(io_err("resolving", path))?;
    let mut existing = abs.as_path();
    let mut rest = Vec::new();
    loop {
        if existing.exists() {
            break;
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                existing = parent;
            }
            _ => break,
        }
    }
    let mut out = canonical(existing)?;
    for c in rest.into_iter().rev() {
        out.push(c);
    }
    Ok(out)
}

fn check_new_path(
    repo: &Repository,
    main: &Path,
    common: &Path,
    path: &Path,
) -> Result<PathBuf, GitError> {
    let abs = std::path::absolute(path).map_err(io_err("resolving", path))?;
    if abs.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(GitError::InvalidWorktreePath {
            path: abs,
            reason: "it contains `..`; pass a normalised absolute path".to_owned(),
        });
    }
    if fs::symlink_metadata(&abs).is_ok() {
        let empty_dir = abs.is_dir()
            && fs::read_dir(&abs)
                .map(|mut d| d.next().is_none())
                .unwrap_or(false);
        if !empty_dir {
            return Err(GitError::WorktreePathExists { path: abs });
        }
    }
    let target = resolve_lexically_missing(&abs)?;
    if target.starts_with(common) || common.starts_with(&target) {
        return Err(GitError::WorktreeInsideCheckout {
            path: target,
            checkout: common.to_owned(),
        });
    }
    let mut checkouts = vec![main.to_owned()];
    if let Some(w) = repo.workdir() {
        checkouts.push(canonical(w)?);
    }
    for checkout in checkouts {
        let Ok(rel) = target.strip_prefix(&checkout) else {
            continue;
        };
        // Allowed only under a directory git ignores there (e.g. an excluded `.ahelper/`).
        let owner =
            Repository::open(&checkout).ctx(|| format!("opening {}", checkout.display()))?;
        let mut prefix = PathBuf::new();
        let mut ignored = false;
        for c in rel.components() {
            prefix.push(c);
            let as_dir = format!("{}/", prefix.to_string_lossy());
            if owner.is_path_ignored(&as_dir).unwrap_or(false) {
                ignored = true;
                break;
            }
        }
        if !ignored {
            return Err(GitError::WorktreeInsideCheckout {
                path: target,
                checkout,
            });
        }
    }
    Ok(target)
}

fn reachable_from_refs(repo: &Repository, commit: Oid) -> Result<bool, GitError> {
    let refs = repo.references().ctx(|| "listing refs".to_owned())?;
    for r in refs.flatten() {
        if r.name()
            .is_ok_and(|n| n == "HEAD" || r.is_remote() && n.ends_with("/HEAD"))
        {
            continue;
        }
        if let Ok(c) = r.peel_to_commit()
            && (c.id() == commit || repo.graph_descendant_of(c.id(), commit).unwrap_or(false))
        {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Reads a `HEAD` file: `(branch short name, resolved commit)`.
fn read_head(repo: &Repository, head_file: &Path) -> (Option<String>, Option<Oid>) {
    let Ok(text) = fs::read_to_string(head_file) else {
        return (None, None);
    };
    let text = text.trim();
    if let Some(refname) = text.strip_prefix("ref:") {
        let refname = refname.trim();
        let short = refname
            .strip_prefix("refs/heads/")
            .unwrap_or(refname)
            .to_owned();
        (Some(short), repo.refname_to_id(refname).ok())
    } else {
        (None, Oid::from_str(text).ok())
    }
}

/// The worktree (the main one included) that has `branch` checked out, if any.
///
/// # Errors
/// [`GitError::Libgit2`] and [`GitError::Io`] listing the worktrees.
pub(crate) fn checked_out_by(
    repo: &Repository,
    branch: &str,
) -> Result<Option<WorktreeInfo>, GitError> {
    if !any_head_on(repo, branch)? {
        // No HEAD file names it: no worktree has it (the full listing is only for the owner).
        return Ok(None);
    }
    Ok(list(repo)?
        .into_iter()
        .find(|w| w.branch.as_deref() == Some(branch)))
}

/// Whether the main `HEAD` or any `<common>/worktrees/<name>/HEAD` is `ref: refs/heads/<branch>`:
/// plain file reads, so that the check before a new worktree costs microseconds per worktree
/// under the lock instead of a full [`list`].
fn any_head_on(repo: &Repository, branch: &str) -> Result<bool, GitError> {
    let common = repo.commondir();
    let wanted = format!("refs/heads/{branch}");
    let on_branch = |head: &Path| {
        fs::read_to_string(head).is_ok_and(|t| {
            t.trim()
                .strip_prefix("ref:")
                .is_some_and(|r| r.trim() == wanted)
        })
    };
    if on_branch(&common.join("HEAD")) {
        return Ok(true);
    }
    let admin = common.join("worktrees");
    let entries = match fs::read_dir(&admin) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(io_err("listing", &admin)(e)),
    };
    Ok(entries.flatten().any(|e| on_branch(&e.path().join("HEAD"))))
}

/// The registered linked worktree at `target` (canonical), found through its own `.git` file
/// and checked against its admin entry's `gitdir`, without listing the other worktrees (the
/// cost stays the same however many worktrees the repository has). `None` when `target` is
/// not a registered linked worktree of `repo`.
///
/// # Errors
/// [`GitError::Io`] canonicalising paths.
pub(crate) fn registered_at(
    repo: &Repository,
    target: &Path,
) -> Result<Option<WorktreeInfo>, GitError> {
    let common = canonical(repo.commondir())?;
    let Some(admin) = read_gitfile(&target.join(".git")) else {
        return Ok(None);
    };
    let Ok(admin) = canonical(&admin) else {
        return Ok(None);
    };
    if admin.parent() != Some(common.join("worktrees").as_path()) {
        return Ok(None);
    }
    let Some(name) = admin.file_name().and_then(|n| n.to_str()) else {
        return Ok(None);
    };
    Ok(linked_entry(repo, &common, name)?.filter(|w| w.path == target))
}

/// The linked worktree registered as `<common>/worktrees/<name>`, as [`list`] reports it;
/// `None` (with a warning) when its admin dir has no `gitdir` file.
fn linked_entry(
    repo: &Repository,
    common: &Path,
    name: &str,
) -> Result<Option<WorktreeInfo>, GitError> {
    let admin = common.join("worktrees").join(name);
    let Some(path) = fs::read_to_string(admin.join("gitdir"))
        .ok()
        .and_then(|s| Path::new(s.trim()).parent().map(Path::to_owned))
    else {
        tracing::warn!(name, "worktree admin dir without a gitdir file; skipped");
        return Ok(None);
    };
    let (path, exists) = resolve_listed(path)?;
    let (locked, lock_reason) = match repo.find_worktree(name).map(|w| w.is_locked()) {
        Ok(Ok(WorktreeLockStatus::Locked(reason))) => (true, reason.filter(|r| !r.is_empty())),
        _ => (false, None),
    };
    let (branch, head) = read_head(repo, &admin.join("HEAD"));
    Ok(Some(WorktreeInfo {
        marker: read_marker(common, &path),
        path,
        name: Some(name.to_owned()),
        is_main: false,
        branch,
        head,
        locked,
        lock_reason,
        prunable: !exists,
    }))
}

/// A listed worktree's directory, canonical, and whether it exists. A listing outside the
/// repository lock (a worker looking for its branch's worktree) can meet a worktree being
/// renamed under it (a spare recycled or parked by another worker): a directory gone between
/// the check and its resolution is reported as missing, as if listed a moment later, instead
/// of failing the whole listing; any other failure to resolve it is an error.
fn resolve_listed(path: PathBuf) -> Result<(PathBuf, bool), GitError> {
    if !path.exists() {
        return Ok((path, false));
    }
    match canonical(&path) {
        Ok(resolved) => Ok((resolved, true)),
        Err(_) if !path.exists() => Ok((path, false)),
        Err(e) => Err(e),
    }
}

pub(crate) fn list(repo: &Repository) -> Result<Vec<WorktreeInfo>, GitError> {
    let common = canonical(repo.commondir())?;
    let main = main_workdir(repo)?;
    let (branch, head) = read_head(repo, &common.join("HEAD"));
    let mut out = vec![WorktreeInfo {
        marker: None,
        path: main,
        name: None,
        is_main: true,
        branch,
        head,
        locked: false,
        lock_reason: None,
        prunable: false,
    }];
    let names = repo.worktrees().ctx(|| "listing worktrees".to_owned())?;
    for name in names.iter().filter_map(|n| n.ok().flatten()) {
        out.extend(linked_entry(repo, &common, name)?);
    }
    Ok(out)
}

fn markers_dir(common: &Path) -> PathBuf {
    common.join("ahelper").join("worktrees")
}

fn marker_file(common: &Path, path: &Path) -> PathBuf {
    let key = Oid::hash_object(ObjectType::Blob, path.as_os_str().as_encoded_bytes())
        .map(|o| o.to_string())
        .unwrap_or_else(|_| "invalid".to_owned());
    markers_dir(common).join(format!("{key}.json"))
}

pub(crate) fn read_marker(common: &Path, path: &Path) -> Option<WorktreeMarker> {
    let bytes = fs::read(marker_file(common, path)).ok()?;
    serde_json::from_slice::<WorktreeMarker>(&bytes)
        .ok()
        .filter(|m| m.path == path)
}

/// Records ahelper's marker for the worktree at `path` on `branch` (empty for a spare, HEAD
/// detached) at `base`, created now by this process.
pub(crate) fn write_marker_for(
    common: &Path,
    path: &Path,
    branch: &str,
    base: Oid,
) -> Result<(), GitError> {
    let marker = WorktreeMarker {
        path: path.to_path_buf(),
        branch: branch.to_owned(),
        base,
        created_unix_ms: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0),
        pid: std::process::id(),
    };
    write_marker(common, &marker)
}

fn write_marker(common: &Path, marker: &WorktreeMarker) -> Result<(), GitError> {
    let dir = markers_dir(common);
    fs::create_dir_all(&dir).map_err(io_err("creating", &dir))?;
    let file = marker_file(common, &marker.path);
    let tmp = file.with_extension("json.tmp");
    let json = serde_json::to_vec_pretty(marker).unwrap_or_default();
    fs::write(&tmp, &json).map_err(|e| {
        let _ = fs::remove_file(&tmp);
        io_err("writing", &tmp)(e)
    })?;
    fs::rename(&tmp, &file).map_err(io_err("renaming", &file))
}

/// Flushes the marker of the worktree at `path` to disk. Called after the repository lock is
/// released: the marker is written and renamed into place under the lock (other processes'
/// readers see all of it or none of it), and its `fsync` (milliseconds on a busy disk, which
/// other workers' worktree operations would otherwise wait for) only guards against a power
/// loss, after which an empty marker reads as "not ahelper's" (never deleted).
///
/// # Errors
/// [`GitError::Io`] opening or syncing it.
pub(crate) fn sync_marker(common: &Path, path: &Path) -> Result<(), GitError> {
    let file = marker_file(common, path);
    fs::File::open(&file)
        .and_then(|f| f.sync_all())
        .map_err(io_err("flushing", &file))
}

pub(crate) fn remove_marker(common: &Path, path: &Path) {
    let file = marker_file(common, path);
    if let Err(e) = fs::remove_file(&file)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(file = %file.display(), error = %e, "could not delete a worktree marker");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A listed worktree directory that is there is resolved; one that is gone (deleted, or
    /// renamed away by a recycle while an unlocked listing looked at it) is reported missing
    /// instead of failing the listing.
    #[test]
    fn a_listed_directory_is_resolved_or_reported_missing() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        fs::create_dir(&real).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let (resolved, exists) = resolve_listed(link).unwrap();
        assert!(exists);
        assert_eq!(resolved, canonical(&real).unwrap());
        let gone = dir.path().join("gone");
        assert_eq!(resolve_listed(gone.clone()).unwrap(), (gone, false));
    }
}
