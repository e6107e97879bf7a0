//! The merge queue: finished worker branches go into the run's integration branch one at a
//! time, in plan order, in memory (no checkout). A conflict loses nothing: no ref moves, both
//! branches are kept and the conflicting files are recorded.
//!
//! The coordinator asks [`MergeQueue::ready`] which workers may merge now and calls
//! [`MergeQueue::merge_one`] for each; the typed [`MergeStep`] says what the coordinator records.
//! A step that verifies a merge (tests in a verification worktree) before the integration
//! branch advances belongs in `merge_one`, as further `MergeStep` outcomes.

use super::state::{ConflictRecord, WorkerRecord, WorkerStatus};
use super::{GitTaskError, git_task};
use ahelper_worktrees as git;
use std::path::PathBuf;

/// What merging one worker branch did.
#[derive(Debug)]
pub enum MergeStep {
    /// The integration branch now contains the worker's commits (a merge commit, a fast
    /// forward, or it already did).
    Merged {
        /// The integration branch's new tip.
        commit: git::Oid,
    },
    /// The branches conflict; nothing changed.
    Conflict {
        /// The conflicting files, sorted by path.
        files: Vec<ConflictRecord>,
    },
    /// The merge could not be attempted or written (the integration branch is unchanged).
    Failed(GitTaskError),
}

/// Merges into one run's integration branch.
#[derive(Debug, Clone)]
pub struct MergeQueue {
    repo_root: PathBuf,
    integration_branch: String,
    run_id: String,
}

impl MergeQueue {
    /// The queue of run `run_id` into `integration_branch` of the repository at `repo_root`.
    pub fn new(repo_root: PathBuf, integration_branch: String, run_id: String) -> Self {
        MergeQueue {
            repo_root,
            integration_branch,
            run_id,
        }
    }

    /// Indices of the workers to merge now, in plan order: finished workers up to the first
    /// worker before them in the plan that is still running. So runs of the same plan merge in
    /// the same order and a queued worker never blocks (no deadlock with dependencies or
    /// overlapping scopes). With `drain` (the run is stopping) every finished worker.
    pub fn ready(workers: &[WorkerRecord], drain: bool) -> Vec<usize> {
        let mut ready = Vec::new();
        for (i, w) in workers.iter().enumerate() {
            match w.status {
                WorkerStatus::Finished => ready.push(i),
                WorkerStatus::Starting
                | WorkerStatus::Running
                | WorkerStatus::WaitingForPermission
                | WorkerStatus::Committing
                    if !drain =>
                {
                    break;
                }
                _ => {}
            }
        }
        ready
    }

    /// Merges `worker`'s branch into the integration branch.
    pub async fn merge_one(&self, worker: &WorkerRecord) -> MergeStep {
        let repo = self.repo_root.clone();
        let target = self.integration_branch.clone();
        let source = worker.branch.clone();
        let message = format!(
            "Merge {} ({}): {}\n\nahelper run {}",
            worker.id, worker.subtask_id, worker.title, self.run_id
        );
        let merged =
            git_task(move || Ok(git::merge_into(&repo, &target, &source, &message, None)?)).await;
        match merged {
            Ok(git::MergeOutcome::Conflict { files }) => MergeStep::Conflict {
                files: files.iter().map(conflict_record).collect(),
            },
            Ok(
                git::MergeOutcome::Merged { commit }
                | git::MergeOutcome::FastForward { commit }
                | git::MergeOutcome::UpToDate { commit },
            ) => MergeStep::Merged { commit },
            Err(e) => MergeStep::Failed(e),
        }
    }
}

/// A conflicting file as the run record keeps it: the path and which side did what.
fn conflict_record(file: &git::ConflictFile) -> ConflictRecord {
    let sides = match (file.ours.is_some(), file.theirs.is_some()) {
        (true, true) => "both modified",
        (true, false) => "deleted by the worker, modified in the integration branch",
        (false, true) => "modified by the worker, deleted in the integration branch",
        (false, false) => "conflict",
    };
    ConflictRecord {
        path: file.path.clone(),
        sides: sides.into(),
    }
}
