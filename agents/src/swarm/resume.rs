//! `swarm resume`: which runs can be continued, which of their workers run again, and with
//! which permission mode.
//!
//! A run can be resumed when no process is running it and it has a plan. Its queued and
//! unfinished workers start again from their branches and transcripts ([`super::execute`]
//! requeues them); so do workers that failed (a model outage, a crash, a worktree problem) —
//! their `wip` commits stay on their branches — and workers skipped because a dependency did not
//! merge. A [`ResumeSelection`] narrows that set (`--only-failed`, `--worker w2`). A run stopped
//! before its closing turn with no worker left runs that turn (the run's summary). It keeps the
//! permission mode it was started with unless the user gives one.

use super::run::{PlannedRun, SwarmError};
use super::state::{RunRecord, RunStatus, WorkerRecord, WorkerStatus};
use crate::permissions::PermissionMode;
use std::collections::BTreeSet;

/// Why a run cannot be resumed.
#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    /// Another process is running it.
    #[error("run {run_id} is still running (pid {pid}); it cannot be resumed twice")]
    StillRunning {
        /// The run.
        run_id: String,
        /// Its process.
        pid: u32,
    },
    /// It failed while planning.
    #[error(transparent)]
    NotPlanned(SwarmError),
    /// `--worker` named a worker the run does not have.
    #[error(
        "run {run_id} has no worker `{worker}`; its workers are {known} (see `ahelper swarm status {run_id}`)"
    )]
    UnknownWorker {
        /// The run.
        run_id: String,
        /// The id given.
        worker: String,
        /// The run's worker ids, comma-separated.
        known: String,
    },
    /// `--worker` named a worker that has nothing left to retry.
    #[error(
        "worker {worker} of run {run_id} is {state}: there is nothing to retry (resume retries unfinished, failed and skipped workers)"
    )]
    NotRetryable {
        /// The run.
        run_id: String,
        /// The worker.
        worker: String,
        /// Its state label.
        state: &'static str,
    },
}

/// Which workers `swarm resume` runs again.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ResumeSelection {
    /// Every worker that is unfinished, failed, or skipped (the default).
    #[default]
    All,
    /// Only the failed workers (`--only-failed`).
    OnlyFailed,
    /// Only these workers (`--worker w2`, repeatable), each of which must be retryable.
    Workers(Vec<String>),
}

/// A run that may be resumed.
#[derive(Debug)]
pub enum Resumable {
    /// Workers are left to run, or none (`selected` empty) but the run stopped before its
    /// closing turn ([`misses_its_closing_turn`]): resuming writes the summary.
    Unfinished {
        /// The run, its selected failed and skipped workers queued again and the others held.
        run: PlannedRun,
        /// Ids of the workers that run again, in plan order.
        selected: Vec<String>,
    },
    /// No worker is left to run, retry or select; there is nothing to run.
    NothingLeft(RunRecord),
}

/// Whether `swarm resume` may run worker `w` again: it is not done (queued, in flight,
/// cancelled, interrupted, waiting to merge) or it failed or was skipped.
pub fn is_retryable(w: &WorkerRecord) -> bool {
    !w.status.is_terminal() || matches!(w.status, WorkerStatus::Failed | WorkerStatus::Skipped)
}

/// Checks that `record` can be resumed and picks the workers `selection` runs again.
///
/// # Errors
/// [`ResumeError`] when it is still running, has no plan, or `selection` names a worker that
/// does not exist or has nothing to retry.
pub fn check_resumable(
    record: RunRecord,
    selection: &ResumeSelection,
) -> Result<Resumable, ResumeError> {
    if record.is_active() {
        return Err(ResumeError::StillRunning {
            run_id: record.run_id,
            pid: record.pid,
        });
    }
    let mut run = PlannedRun::from_record(record).map_err(ResumeError::NotPlanned)?;
    let selected = selected_indices(run.record(), selection)?;
    if selected.is_empty()
        && !(*selection == ResumeSelection::All && misses_its_closing_turn(run.record()))
    {
        let (record, _) = run.into_parts();
        return Ok(Resumable::NothingLeft(record));
    }
    let ids = selected
        .iter()
        .map(|&i| run.record().workers[i].id.clone())
        .collect();
    run.retry_only(&selected);
    Ok(Resumable::Unfinished { run, selected: ids })
}

/// Workers whose work is already on the integration branch though the record does not say so
/// (a process killed between a merge and saving the record, or a record written over by a
/// second process): their branch has commits past their start commit and every one of them is
/// reachable from the integration branch. Each goes back to `finished` (waiting to merge), so
/// the merge queue finds it contained, records it merged and removes its worktree — it is
/// never run or merged again. Returns their ids; nothing changes when the integration branch
/// cannot be read.
pub fn settle_already_merged(record: &mut RunRecord) -> Vec<String> {
    let root = record.repo_root.clone();
    let integration = record.integration_branch.clone();
    if ahelper_worktrees::branch_tip(&root, &integration).is_err() {
        return Vec::new();
    }
    let mut settled = Vec::new();
    for w in &mut record.workers {
        let redo = is_retryable(w) && w.status != WorkerStatus::Finished;
        if redo && branch_is_merged(&root, w, &integration) {
            w.status = WorkerStatus::Finished;
            w.last_action = "already on the integration branch".into();
            settled.push(w.id.clone());
        }
    }
    settled
}

/// Whether worker `w`'s branch has commits past its start commit, all reachable from the
/// branch `integration`.
fn branch_is_merged(root: &std::path::Path, w: &WorkerRecord, integration: &str) -> bool {
    let Ok(tip) = ahelper_worktrees::branch_tip(root, &w.branch) else {
        return false;
    };
    let started_here = w.start_commit.as_deref() == Some(tip.to_string().as_str());
    !started_here
        && w.start_commit.is_some()
        && ahelper_worktrees::unmerged_commits(root, &w.branch, integration)
            .is_ok_and(|left| left.is_empty())
}

/// Whether `record` was stopped (cancelled, or its process gone) without its closing turn: the
/// coordinator's summary (a Ctrl-C or `kill` during that turn, or the last merge). Resuming it
/// runs that turn even when no worker is left.
pub fn misses_its_closing_turn(record: &RunRecord) -> bool {
    record.synthesis.is_none() && (record.status == RunStatus::Cancelled || record.is_interrupted())
}

/// The plan indices of the workers `selection` runs again.
fn selected_indices(
    record: &RunRecord,
    selection: &ResumeSelection,
) -> Result<BTreeSet<usize>, ResumeError> {
    let workers = record.workers.iter().enumerate();
    match selection {
        ResumeSelection::All => Ok(workers
            .filter(|(_, w)| is_retryable(w))
            .map(|(i, _)| i)
            .collect()),
        ResumeSelection::OnlyFailed => Ok(workers
            .filter(|(_, w)| w.status == WorkerStatus::Failed)
            .map(|(i, _)| i)
            .collect()),
        ResumeSelection::Workers(ids) => ids.iter().map(|id| named_worker(record, id)).collect(),
    }
}

/// The index of worker `id`, when it exists and may run again.
fn named_worker(record: &RunRecord, id: &str) -> Result<usize, ResumeError> {
    let Some(index) = record.workers.iter().position(|w| w.id == id) else {
        let known: Vec<&str> = record.workers.iter().map(|w| w.id.as_str()).collect();
        return Err(ResumeError::UnknownWorker {
            run_id: record.run_id.clone(),
            worker: id.to_string(),
            known: known.join(", "),
        });
    };
    let w = &record.workers[index];
    if !is_retryable(w) {
        return Err(ResumeError::NotRetryable {
            run_id: record.run_id.clone(),
            worker: id.to_string(),
            state: w.status.label(),
        });
    }
    Ok(index)
}

/// The permission mode to resume with, when it differs from the configured one: the run's own
/// mode, unless the user gave one (`--permission-mode` or `AHELPER_PERMISSION_MODE`).
pub fn resume_permission_mode(
    record: &RunRecord,
    configured: PermissionMode,
    mode_given: bool,
) -> Option<PermissionMode> {
    record
        .permission_mode
        .filter(|mode| !mode_given && *mode != configured)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only a run that stopped (cancelled, or its process gone) before its summary was written
    /// misses its closing turn.
    #[test]
    fn a_stopped_run_without_a_summary_misses_its_closing_turn() {
        let run = |status: RunStatus, synthesis: Option<&str>| RunRecord {
            synthesis: synthesis.map(str::to_string),
            // no process runs it any more
            pid: 0,
            ..RunRecord::new("r1".into(), std::path::PathBuf::new(), status)
        };
        assert!(misses_its_closing_turn(&run(RunStatus::Cancelled, None)));
        // interrupted
        assert!(misses_its_closing_turn(&run(RunStatus::Running, None)));
        assert!(!misses_its_closing_turn(&run(
            RunStatus::Cancelled,
            Some("done")
        )));
        assert!(!misses_its_closing_turn(&run(RunStatus::Finished, None)));
        assert!(!misses_its_closing_turn(&run(RunStatus::Failed, None)));
    }
}
