//! `swarm resume`: which runs can be continued, and with which permission mode.
//!
//! A run can be resumed when no process is running it and it has a plan; its queued and
//! unfinished workers start again from their branches and transcripts ([`super::execute`]
//! requeues them). It keeps the permission mode it was started with unless the user gives one.

use super::run::{PlannedRun, SwarmError};
use super::state::RunRecord;
use crate::permissions::PermissionMode;

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
}

/// A run that may be resumed.
#[derive(Debug)]
pub enum Resumable {
    /// Workers are left to run.
    Unfinished {
        /// The run.
        run: PlannedRun,
        /// Workers that are queued or were interrupted.
        unfinished: usize,
    },
    /// Every worker already ended; there is nothing to run.
    NothingLeft(RunRecord),
}

/// Checks that `record` can be resumed and counts what is left.
///
/// # Errors
/// [`ResumeError`] when it is still running or has no plan.
pub fn check_resumable(record: RunRecord) -> Result<Resumable, ResumeError> {
    if record.is_active() {
        return Err(ResumeError::StillRunning {
            run_id: record.run_id,
            pid: record.pid,
        });
    }
    let run = PlannedRun::from_record(record).map_err(ResumeError::NotPlanned)?;
    let unfinished = run
        .record()
        .workers
        .iter()
        .filter(|w| !w.status.is_terminal())
        .count();
    if unfinished == 0 {
        let (record, _) = run.into_parts();
        return Ok(Resumable::NothingLeft(record));
    }
    Ok(Resumable::Unfinished { run, unfinished })
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
