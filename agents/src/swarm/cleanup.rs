//! Removing what a run leaves behind: a merged worker's worktree and branch (right after its
//! merge) and, with `ahelper swarm clean`, every worktree and branch of a run that nothing
//! would be lost by deleting. Transcripts are always kept.
//!
//! The rules: a worktree with uncommitted changes, or a branch with commits that are not in the
//! integration branch, is kept (and listed) unless forced; the integration branch is deleted
//! only when it is still at the base, or merged into the user's current branch, or forced.

use super::state::{RunRecord, WorkerRecord, WorkerStatus};
use ahelper_worktrees::{self as git, CommitSummary, GitError, RepoLock};
use std::path::{Path, PathBuf};

/// The directory that holds a run's worktrees, from one worker's worktree path.
pub fn worktree_base_of(worktree: &Path) -> PathBuf {
    worktree.parent().map(Path::to_path_buf).unwrap_or_default()
}

/// A worker's private temp dir (its `TMPDIR` when the sandbox could not let it write in the
/// shared temp dir), next to the worktrees: `<base>/.tmp-<worker>`.
pub fn private_tmp_dir(worktree_base: &Path, worker: &str) -> PathBuf {
    worktree_base.join(format!(".tmp-{worker}"))
}

/// A worktree and branch to remove once merged: a worker's, a fixer's or a merger's.
#[derive(Debug, Clone)]
pub struct MergedWork {
    /// `w1`, `fix-1`, … (names its private temp dir).
    pub id: String,
    /// Its worktree.
    pub worktree: PathBuf,
    /// Its branch.
    pub branch: String,
}

impl From<&WorkerRecord> for MergedWork {
    fn from(w: &WorkerRecord) -> Self {
        MergedWork {
            id: w.id.clone(),
            worktree: w.worktree.clone(),
            branch: w.branch.clone(),
        }
    }
}

/// Removes merged work's worktree, private temp dir and branch (its commits are in
/// `integration_branch`).
///
/// # Errors
/// The [`GitError`] of the first removal that refused (dirty worktree, unmerged commits, …);
/// what remains is kept.
pub fn remove_merged_worker(
    lock: &RepoLock,
    repo: &Path,
    work: &MergedWork,
    integration_branch: &str,
) -> Result<(), GitError> {
    let base = worktree_base_of(&work.worktree);
    if work.worktree.exists() {
        git::remove_worktree(lock, repo, &base, &work.worktree, false)?;
    }
    let _ = std::fs::remove_dir_all(private_tmp_dir(&base, &work.id));
    git::delete_branch(lock, repo, &work.branch, integration_branch, false)?;
    Ok(())
}

/// Removes each of `works` in order ([`remove_merged_worker`]); the ones kept, by id, with why.
/// One refusal does not stop the others.
pub fn remove_merged_work(
    lock: &RepoLock,
    repo: &Path,
    works: &[MergedWork],
    integration_branch: &str,
) -> Vec<(String, GitError)> {
    works
        .iter()
        .filter_map(|work| {
            remove_merged_worker(lock, repo, work, integration_branch)
                .err()
                .map(|e| (work.id.clone(), e))
        })
        .collect()
}

/// One thing `swarm clean` did or refused, in order.
#[derive(Debug)]
pub enum CleanStep {
    /// A worktree directory was removed.
    WorktreeRemoved {
        /// The worktree.
        path: PathBuf,
    },
    /// A worktree was kept (dirty, locked, …).
    WorktreeKept {
        /// The worktree.
        path: PathBuf,
        /// Why.
        error: GitError,
    },
    /// The git registration of a worktree whose directory was already gone (deleted by hand)
    /// was pruned: its branch is no longer "checked out" there.
    RegistrationPruned {
        /// The missing worktree directory.
        path: PathBuf,
    },
    /// A worker branch was deleted.
    BranchDeleted {
        /// The branch.
        branch: String,
    },
    /// A worker branch was kept: it has commits that are not in the integration branch.
    BranchUnmerged {
        /// The branch.
        branch: String,
        /// The worker's state.
        status: WorkerStatus,
        /// Its commits not in the integration branch, newest first.
        commits: Vec<CommitSummary>,
    },
    /// A worker branch kept because the run's integration branch no longer exists, so whether
    /// its commits are merged cannot be checked (deleted with `force`).
    BranchWithoutIntegration {
        /// The branch.
        branch: String,
    },
    /// A branch the record names as a worker's is not one of the run's (`ahelper/<run>/…`): a
    /// hand-edited or planted `run.json`. Never deleted, even with `force`.
    BranchNotTheRuns {
        /// The branch.
        branch: String,
    },
    /// Deleting a worker branch failed.
    BranchKept {
        /// The branch.
        branch: String,
        /// Why.
        error: GitError,
    },
}

impl CleanStep {
    /// Whether something was kept that the user asked to remove.
    pub fn is_refusal(&self) -> bool {
        !matches!(
            self,
            CleanStep::WorktreeRemoved { .. }
                | CleanStep::RegistrationPruned { .. }
                | CleanStep::BranchDeleted { .. }
        )
    }
}

/// Why an integration branch was deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntegrationDeleted {
    /// It was still at the base commit.
    NothingMerged,
    /// The user's current branch contains it.
    MergedIntoCurrent,
    /// `--force`.
    Forced,
}

/// What happened to a run's integration branch.
#[derive(Debug)]
pub enum IntegrationCleanup {
    /// There is none (never created, or already deleted).
    Missing,
    /// Deleted; nothing was lost (or forced).
    Deleted(IntegrationDeleted),
    /// Kept: it has the run's merged work, not in the user's branch yet.
    Kept,
    /// Deleting it failed.
    Failed(GitError),
}

/// What `swarm clean` did to one run.
#[derive(Debug)]
pub struct RunCleanup {
    /// Worktrees and branches of the workers, in worker order.
    pub steps: Vec<CleanStep>,
    /// The integration branch.
    pub integration: IntegrationCleanup,
}

impl RunCleanup {
    /// How many things were kept although asked to remove.
    pub fn refusals(&self) -> usize {
        self.steps.iter().filter(|s| s.is_refusal()).count()
    }
}

/// Why a run was not cleaned.
#[derive(Debug, thiserror::Error)]
pub enum CleanError {
    /// The run is still running.
    #[error("still running (pid {pid})")]
    Active {
        /// Its process.
        pid: u32,
    },
}

/// Cleans run `run` of the repository at `root`, whose worktrees are under `worktree_base`:
/// removes the workers' worktrees and branches, their private temp dirs and the base directory
/// when empty, then the integration branch when nothing would be lost. With `force`, dirty
/// worktrees and unmerged branches go too.
///
/// # Errors
/// [`CleanError::Active`] when the run is still running.
pub fn clean_run(
    lock: &RepoLock,
    root: &Path,
    run: &RunRecord,
    worktree_base: &Path,
    force: bool,
) -> Result<RunCleanup, CleanError> {
    if run.is_active() {
        return Err(CleanError::Active { pid: run.pid });
    }
    let mut steps = Vec::new();
    match prune_missing_worktrees(lock, root, run) {
        Ok(pruned) => steps.extend(
            pruned
                .into_iter()
                .map(|p| CleanStep::RegistrationPruned { path: p.path }),
        ),
        Err(error) => steps.push(CleanStep::WorktreeKept {
            path: worktree_base.to_path_buf(),
            error,
        }),
    }
    for owned in owned_worktrees(run) {
        if owned.worktree.exists() {
            steps.push(
                match git::remove_worktree(lock, root, worktree_base, &owned.worktree, force) {
                    Ok(_) => CleanStep::WorktreeRemoved {
                        path: owned.worktree.clone(),
                    },
                    Err(error) => CleanStep::WorktreeKept {
                        path: owned.worktree.clone(),
                        error,
                    },
                },
            );
        }
        if git::branch_tip(root, &owned.branch).is_ok() {
            steps.push(clean_worker_branch(lock, root, run, &owned, force));
        }
        let _ = std::fs::remove_dir_all(private_tmp_dir(worktree_base, &owned.id));
    }
    steps.extend(clean_leftover_spares(lock, root, worktree_base));
    let _ = std::fs::remove_dir(worktree_base);
    Ok(RunCleanup {
        steps,
        integration: clean_integration_branch(lock, root, run, force),
    })
}

/// What a run killed mid-way can leave in its base directory besides the workers' worktrees:
/// spare worktrees (`.spare-<n>`, detached at a commit, made ahead for workers and never holding
/// work: only clean worktrees are parked as spares) are removed with their registration, and
/// directories renamed aside for deletion (`.removing-…`, already unregistered) are deleted.
fn clean_leftover_spares(lock: &RepoLock, root: &Path, worktree_base: &Path) -> Vec<CleanStep> {
    let Ok(entries) = std::fs::read_dir(worktree_base) else {
        return Vec::new();
    };
    let mut steps = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with(".removing-") {
            if std::fs::remove_dir_all(&path).is_ok() {
                steps.push(CleanStep::WorktreeRemoved { path });
            }
        } else if name.starts_with(".spare-") {
            steps.push(
                match git::remove_worktree(lock, root, worktree_base, &path, true) {
                    Ok(_) => CleanStep::WorktreeRemoved { path },
                    Err(error) => CleanStep::WorktreeKept { path, error },
                },
            );
        }
    }
    steps
}

/// A registration of a run's worktree whose directory was gone, now pruned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrunedRegistration {
    /// The missing worktree directory git still listed.
    pub path: PathBuf,
    /// The branch it had checked out (kept, with its commits).
    pub branch: Option<String>,
}

/// Prunes git's registrations of run `run`'s worktrees whose directories are gone (deleted by
/// hand, e.g. `rm -rf`): git would keep their branches "checked out" there, so they could be
/// neither deleted nor checked out again. Only this run's are touched — a registration whose
/// path is one of the run's worktrees or whose branch is one of the run's
/// (`ahelper/<run>/…`) — never a user's other worktrees, never a locked one, and only the admin
/// entry goes (the branch and its commits stay). Runs under `lock`.
///
/// # Errors
/// The [`GitError`] of the first registration that could not be pruned (those before it are
/// pruned).
pub fn prune_missing_worktrees(
    lock: &RepoLock,
    root: &Path,
    run: &RunRecord,
) -> Result<Vec<PrunedRegistration>, GitError> {
    let paths: Vec<PathBuf> = owned_worktrees(run)
        .into_iter()
        .map(|o| o.worktree)
        .collect();
    let branch_prefix = git::run_branch_prefix(&run.run_id);
    let mut pruned = Vec::new();
    for wt in git::list_worktrees(root)? {
        let ours = paths.contains(&wt.path)
            || wt
                .branch
                .as_deref()
                .is_some_and(|b| b.starts_with(&branch_prefix));
        if wt.is_main || !wt.prunable || wt.locked || !ours {
            continue;
        }
        prune_registration(lock, root, &wt.path)?;
        pruned.push(PrunedRegistration {
            path: wt.path,
            branch: wt.branch,
        });
    }
    Ok(pruned)
}

/// A worker's branch that was deleted while its worktree stayed, made again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoredBranch {
    /// The branch (short name).
    pub branch: String,
    /// The worktree that had it checked out.
    pub worktree: PathBuf,
    /// Where it points now.
    pub commit: git::Oid,
    /// Where that commit came from.
    pub source: RestoredFrom,
}

/// Where a [`RestoredBranch`] was made again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestoredFrom {
    /// The worktree's last commit, from its HEAD log: nothing the worker committed is lost.
    WorktreeHead,
    /// The worker's start commit (the worktree had no usable HEAD log): its files, as the
    /// worker left them, are committed on top when it finishes.
    StartCommit,
}

/// Makes again the branches of run `run`'s workers that were deleted (`git update-ref -d`)
/// while their worktrees stayed: git shows such a worktree on an unborn branch, and the worker
/// would run again only to fail at its commit. Each is made at the worktree's last commit, else
/// at the worker's start commit.
///
/// # Errors
/// The [`GitError`] of the first branch that could not be made (those before it are made).
pub fn restore_deleted_branches(
    root: &Path,
    run: &RunRecord,
) -> Result<Vec<RestoredBranch>, GitError> {
    let listed = git::list_worktrees(root)?;
    let mut restored = Vec::new();
    for w in &run.workers {
        // The worktree git lists on the branch, at the worker's recorded path.
        let recorded = std::fs::canonicalize(&w.worktree).unwrap_or_else(|_| w.worktree.clone());
        let orphaned = listed.iter().any(|wt| {
            !wt.prunable
                && wt.head.is_none()
                && wt.branch.as_deref() == Some(w.branch.as_str())
                && wt.path == recorded
        });
        if !orphaned || git::branch_tip(root, &w.branch).is_ok() {
            continue;
        }
        let start = w.start_commit.as_deref().unwrap_or(&run.base_commit);
        let (commit, source) = match git::last_head_commit(&recorded) {
            Some(commit) => (commit, RestoredFrom::WorktreeHead),
            None => (git::resolve_commit(root, start)?, RestoredFrom::StartCommit),
        };
        git::create_branch(root, &w.branch, commit)?;
        restored.push(RestoredBranch {
            branch: w.branch.clone(),
            worktree: w.worktree.clone(),
            commit,
            source,
        });
    }
    Ok(restored)
}

/// Prunes the registration of the missing worktree `path` ([`git::remove_worktree`] deletes
/// nothing but the admin entry of a worktree whose directory is gone). Its base directory is
/// created first when it went too, as removal only acts inside an existing base.
pub fn prune_registration(lock: &RepoLock, root: &Path, path: &Path) -> Result<(), GitError> {
    let base = worktree_base_of(path);
    std::fs::create_dir_all(&base).map_err(|source| GitError::Io {
        action: "creating",
        path: base.clone(),
        source,
    })?;
    git::remove_worktree(lock, root, &base, path, false)?;
    let _ = std::fs::remove_dir(&base);
    Ok(())
}

/// A worktree and branch of a run: a worker's, a fixer's or merger's (with the status of the
/// worker it worked for), or the verification worktree's.
struct Owned {
    id: String,
    worktree: PathBuf,
    branch: String,
    status: WorkerStatus,
}

fn owned_worktrees(run: &RunRecord) -> Vec<Owned> {
    let status_of = |id: &str| run.worker(id).map_or(WorkerStatus::Failed, |w| w.status);
    let workers = run.workers.iter().map(|w| Owned {
        id: w.id.clone(),
        worktree: w.worktree.clone(),
        branch: w.branch.clone(),
        status: w.status,
    });
    let helpers = run.helpers.iter().map(|h| Owned {
        id: h.id.clone(),
        worktree: h.worktree.clone(),
        branch: h.branch.clone(),
        status: status_of(&h.worker),
    });
    // The first verification worktree and the merge queue's further slots next to it.
    let verify = run.verify_worktree.iter().flat_map(|path| {
        (0..super::verification::MAX_VERIFY_SLOTS).map(|n| {
            let id = super::verification::slot_id(n);
            Owned {
                worktree: path.with_file_name(&id),
                branch: git::worker_branch(&run.run_id, &id),
                id,
                status: WorkerStatus::Merged,
            }
        })
    });
    workers.chain(helpers).chain(verify).collect()
}

fn clean_worker_branch(
    lock: &RepoLock,
    root: &Path,
    run: &RunRecord,
    worker: &Owned,
    force: bool,
) -> CleanStep {
    let branch = worker.branch.clone();
    if !branch.starts_with(&git::run_branch_prefix(&run.run_id)) {
        return CleanStep::BranchNotTheRuns { branch };
    }
    if worker.id == super::verification::VERIFY_ID {
        // The verification checkout's own branch never holds work of its own (it checks out
        // the base and merge candidates): nothing is lost by deleting it, even before the
        // run started (no integration branch yet).
        return match git::delete_branch(lock, root, &branch, &branch, true) {
            Ok(_) => CleanStep::BranchDeleted { branch },
            Err(error) => CleanStep::BranchKept { branch, error },
        };
    }
    if git::branch_tip(root, &run.integration_branch).is_err() {
        // Nothing to compare with: keep the work unless forced (the branch itself as `into`
        // makes `delete_branch` check nothing).
        if !force {
            return CleanStep::BranchWithoutIntegration { branch };
        }
        return match git::delete_branch(lock, root, &branch, &branch, true) {
            Ok(_) => CleanStep::BranchDeleted { branch },
            Err(error) => CleanStep::BranchKept { branch, error },
        };
    }
    match git::unmerged_commits(root, &branch, &run.integration_branch) {
        Ok(commits) if !commits.is_empty() && !force => CleanStep::BranchUnmerged {
            branch,
            status: worker.status,
            commits,
        },
        _ => match git::delete_branch(lock, root, &branch, &run.integration_branch, force) {
            Ok(_) => CleanStep::BranchDeleted { branch },
            Err(error) => CleanStep::BranchKept { branch, error },
        },
    }
}

/// Deletes a run's integration branch when nothing would be lost: it is still at the base
/// commit, or it is merged into the current branch; otherwise keeps it (deleted anyway with
/// `force`).
pub fn clean_integration_branch(
    lock: &RepoLock,
    root: &Path,
    run: &RunRecord,
    force: bool,
) -> IntegrationCleanup {
    let branch = &run.integration_branch;
    let Ok(tip) = git::branch_tip(root, branch) else {
        return IntegrationCleanup::Missing;
    };
    let current = git::RepoInfo::discover(root)
        .ok()
        .and_then(|i| i.branch().map(str::to_string));
    let merged_into_current = current
        .as_deref()
        .is_some_and(|c| git::unmerged_commits(root, branch, c).is_ok_and(|u| u.is_empty()));
    let reason = if tip.to_string() == run.base_commit {
        IntegrationDeleted::NothingMerged
    } else if merged_into_current {
        IntegrationDeleted::MergedIntoCurrent
    } else if force {
        IntegrationDeleted::Forced
    } else {
        return IntegrationCleanup::Kept;
    };
    let into = current.unwrap_or_else(|| branch.clone());
    match git::delete_branch(lock, root, branch, &into, true) {
        Ok(_) => IntegrationCleanup::Deleted(reason),
        Err(e) => IntegrationCleanup::Failed(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::swarm::state::RunStatus;
    use std::process::Command;

    fn git_in(dir: &Path, args: &[&str]) {
        let status = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .current_dir(dir)
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    }

    /// A run killed while it had a spare worktree and a directory renamed aside for deletion:
    /// `clean_run` removes both (and the spare's registration), and the base directory goes.
    #[test]
    fn clean_removes_spares_and_directories_left_aside_by_a_killed_run() {
        let repo = tempfile::tempdir().unwrap();
        let root = repo.path();
        git_in(root, &["init", "-q"]);
        std::fs::write(root.join("a.txt"), "a\n").unwrap();
        git_in(root, &["add", "."]);
        git_in(root, &["commit", "-qm", "base"]);
        let outside = tempfile::tempdir().unwrap();
        let base = outside.path().join("run");
        let lock = git::GitOwner::new().lock_for(root).unwrap();
        let head = git::RepoInfo::discover(root).unwrap().head_commit;
        let spare = base.join(".spare-1");
        git::create_spare_worktree(&lock, root, &spare, head).unwrap();
        let aside = base.join(".removing-w1-1-2");
        std::fs::create_dir_all(aside.join("src")).unwrap();
        std::fs::write(aside.join("src/x.rs"), "x").unwrap();
        let mut run = RunRecord::new("r".into(), root.to_path_buf(), RunStatus::Cancelled);
        run.pid = 0;
        let cleanup = clean_run(&lock, root, &run, &base, false).unwrap();
        assert!(
            !spare.exists() && !aside.exists() && !base.exists(),
            "{cleanup:?}"
        );
        let listed = git::list_worktrees(root).unwrap();
        assert!(listed.iter().all(|w| w.path != spare), "{listed:?}");
    }
}
