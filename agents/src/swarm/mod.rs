//! The swarm: a coordinator plans a task into subtasks and runs isolated workers in parallel,
//! each in its own git worktree and branch, then merges their branches into one integration
//! branch. `docs/architecture.md` follows one run through these modules in order.
//!
//! - [`run`]: a run's set-up ([`prepare_run`]), its shared context and [`execute`];
//! - [`planning`]: the coordinator's planning conversation ([`plan_run`]) and [`plan`]: the
//!   plan's schema and validation;
//! - [`coordinator`]: the actor that owns the run record, schedules workers ([`scheduler`]) and
//!   feeds the [`merge_queue`];
//! - [`worker`]: one subtask in its own worktree (and its self-check);
//! - [`verification`]: the run's verification worktree, baseline and verifier; [`helpers`]: the
//!   `fixer` and `merger` agents of the gated merge queue; [`merge_policy`]: how it batches
//!   verifications and the run's verdict cache;
//! - [`state`]: the persistent record (`run.json`), [`events`]: what renderers are told;
//! - [`summary`], [`logs`], [`resume`], [`cleanup`], [`process`]: what the `swarm` subcommands
//!   need besides printing.

pub mod cleanup;
pub mod coordinator;
pub mod events;
pub mod helpers;
pub mod logs;
pub mod merge_batch;
pub mod merge_policy;
pub mod merge_queue;
pub mod plan;
pub mod plan_review;
pub mod planning;
pub mod process;
pub mod record_saver;
pub mod remote;
pub mod repo_match;
pub mod resume;
pub mod roles;
pub mod run;
pub mod run_claim;
pub mod scheduler;
pub mod seal;
pub mod setup;
pub mod sharding;
pub mod slots;
pub mod spares;
pub mod state;
pub mod summary;
pub mod synthesis;
pub mod verification;
pub mod worker;

pub use planning::{PlanFailure, plan_run};
pub use run::{
    PlannedRun, PreparedRun, RunIo, RunOptions, SwarmError, UserStop, execute, prepare_run,
};
pub use summary::final_summary;

use ahelper_worktrees::GitError;

/// Characters of a tool call's main argument shown in the status table's "last action" column.
pub const ACTION_CHARS: usize = 60;

/// `tool main-argument`, for the status table's "last action" column.
pub fn describe_action(name: &str, input: &serde_json::Value) -> String {
    crate::tools::describe_call(name, input, ACTION_CHARS)
}

/// A git operation run on tokio's blocking pool failed.
#[derive(Debug, thiserror::Error)]
pub enum GitTaskError {
    /// The git layer refused or failed; its message says what to do.
    #[error(transparent)]
    Git(#[from] GitError),
    /// A directory could not be created.
    #[error("cannot create {path}: {source}")]
    CreateDir {
        /// The directory.
        path: std::path::PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// The blocking task panicked or was cancelled (a bug; the log has the panic).
    #[error("the git task stopped unexpectedly: {0}")]
    Panicked(#[from] tokio::task::JoinError),
}

/// Creates the directory `path` will be made in (a worktree, a clone), with its parents.
///
/// # Errors
/// [`GitTaskError::CreateDir`].
pub(crate) fn create_parent_dir(path: &std::path::Path) -> Result<(), GitTaskError> {
    let Some(parent) = path.parent() else {
        return Ok(());
    };
    std::fs::create_dir_all(parent).map_err(|source| GitTaskError::CreateDir {
        path: parent.to_path_buf(),
        source,
    })
}

/// Runs `op` (synchronous git work) on tokio's blocking pool.
pub(crate) async fn git_task<T, F>(op: F) -> Result<T, GitTaskError>
where
    F: FnOnce() -> Result<T, GitTaskError> + Send + 'static,
    T: Send + 'static,
{
    tokio::task::spawn_blocking(op).await?
}
