//! The persistent record of a swarm run: `.ahelper/runs/<run>/run.json`, rewritten atomically
//! (write to a temporary file, then rename) after every change, so `swarm ls`, `status`,
//! `resume` and `clean` see a consistent state even after a crash.

use super::plan::Plan;
use crate::agent::AgentStopReason;
use crate::model::Usage;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// State of a whole run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// The coordinator is planning.
    Planning,
    /// Plan printed (`--plan-only`) or not confirmed; nothing ran.
    Planned,
    /// Workers are running.
    Running,
    /// Every subtask ended; see the workers' states.
    Finished,
    /// Stopped by the user (Ctrl-C) or a run-wide limit; resumable.
    Cancelled,
    /// Planning or set-up failed.
    Failed,
}

impl RunStatus {
    /// snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Planning => "planning",
            RunStatus::Planned => "planned",
            RunStatus::Running => "running",
            RunStatus::Finished => "finished",
            RunStatus::Cancelled => "cancelled",
            RunStatus::Failed => "failed",
        }
    }
}

/// How a run ended, as its exit status says it ([`RunRecord::outcome`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunOutcome {
    /// Every subtask is merged into the integration branch or needed no change.
    Succeeded,
    /// Stopped by the user (Ctrl-C) or a run-wide limit; resumable.
    Cancelled,
    /// Anything else: a worker failed, conflicted or was skipped, every refused worker merged
    /// nothing, or the run itself failed or did not finish.
    Failed,
}

/// State of one worker, as the status table shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkerStatus {
    /// Waiting for a slot, a scope or a dependency.
    Queued,
    /// Creating its worktree.
    Starting,
    /// Agent loop running.
    Running,
    /// A tool call waits for the user's decision.
    WaitingForPermission,
    /// Committing its worktree.
    Committing,
    /// Committed; waiting for the merge queue.
    Finished,
    /// Merged into the integration branch.
    Merged,
    /// Its branch conflicts with the integration branch; kept for the user.
    Conflict,
    /// The worker finished without changing any file.
    NoChanges,
    /// Failed (model error, crash, worktree problem).
    Failed,
    /// Cancelled; its work so far is in a `wip` commit on its branch.
    Cancelled,
    /// Not run because a dependency did not merge.
    Skipped,
}

impl WorkerStatus {
    /// Label for the status table.
    pub fn label(self) -> &'static str {
        match self {
            WorkerStatus::Queued => "queued",
            WorkerStatus::Starting => "starting",
            WorkerStatus::Running => "running",
            WorkerStatus::WaitingForPermission => "waiting for permission",
            WorkerStatus::Committing => "committing",
            WorkerStatus::Finished => "finished",
            WorkerStatus::Merged => "merged",
            WorkerStatus::Conflict => "conflict",
            WorkerStatus::NoChanges => "no changes",
            WorkerStatus::Failed => "failed",
            WorkerStatus::Cancelled => "cancelled",
            WorkerStatus::Skipped => "skipped",
        }
    }

    /// Whether the worker is done for this run (resume restarts the unfinished ones).
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            WorkerStatus::Merged
                | WorkerStatus::Conflict
                | WorkerStatus::NoChanges
                | WorkerStatus::Failed
                | WorkerStatus::Skipped
        )
    }
}

/// A conflicting file of a merge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConflictRecord {
    /// Path relative to the repository root.
    pub path: String,
    /// Short description of both sides (e.g. "both modified").
    pub sides: String,
}

/// What a worker reports when it stops. `summary` is bounded (≤ 2,000 characters); the full
/// text stays in the worker's transcript.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerReport {
    /// Why its agent loop stopped (`completed`, `max_turns`, `error`, `cancelled`, …; `error`
    /// also when the worker failed before or after its loop). Records written before this was
    /// typed may hold an empty string, read as `error`.
    #[serde(deserialize_with = "stop_reason_or_error")]
    pub stop_reason: AgentStopReason,
    /// The model's final summary, at most 2,000 characters.
    pub summary: String,
    /// Commit on the worker branch, if anything changed.
    pub commit: Option<String>,
    /// Files changed relative to the worker's start commit.
    pub files_changed: Vec<String>,
    /// Lines added.
    pub insertions: usize,
    /// Lines removed.
    pub deletions: usize,
    /// Tokens used.
    pub usage: Usage,
    /// Turns used.
    pub turns: u32,
    /// Tool calls made.
    pub tool_calls: u32,
    /// Wall time in ms.
    pub duration_ms: u64,
    /// Error text for failed workers.
    pub error: Option<String>,
    /// Hazardous content the branch adds (symlinks out of the repository, git drivers,
    /// submodules, large files, control characters in names, auto-run files); `--apply`
    /// refuses without confirmation while a merged worker has any.
    #[serde(default)]
    pub hazards: Vec<ahelper_worktrees::Hazard>,
}

impl Default for WorkerReport {
    /// An empty report of a worker that did not get to run its loop (`stop_reason` `error`).
    fn default() -> Self {
        WorkerReport {
            stop_reason: AgentStopReason::Error,
            summary: String::new(),
            commit: None,
            files_changed: Vec::new(),
            insertions: 0,
            deletions: 0,
            usage: Usage::default(),
            turns: 0,
            tool_calls: 0,
            duration_ms: 0,
            error: None,
            hazards: Vec::new(),
        }
    }
}

impl WorkerReport {
    /// The report of a worker that failed outside its agent loop (worktree, transcript, crash).
    pub fn failed(error: impl Into<String>, duration_ms: u64) -> Self {
        WorkerReport {
            error: Some(error.into()),
            duration_ms,
            ..WorkerReport::default()
        }
    }

    /// Whether the worker ended its subtask normally (the model stopped calling tools) without
    /// changing a file: the subtask is done, so subtasks depending on it may run — also when
    /// only its final answer was cut by the output-token limit. A worker stopped by a cap
    /// (turns, tokens, time), an error or a cancel with no changes is not done.
    pub fn completed_without_changes(&self) -> bool {
        self.commit.is_none() && self.stop_reason == AgentStopReason::Completed
    }
}

/// Reads a stop reason; the empty string of older records is `error`.
fn stop_reason_or_error<'de, D>(deserializer: D) -> Result<AgentStopReason, D::Error>
where
    D: serde::Deserializer<'de>,
{
    let text = String::deserialize(deserializer)?;
    if text.is_empty() {
        return Ok(AgentStopReason::Error);
    }
    AgentStopReason::deserialize(serde::de::value::StrDeserializer::<D::Error>::new(&text))
}

/// Largest worker summary kept in reports and sent to the coordinator, in characters.
pub const MAX_REPORT_SUMMARY_CHARS: usize = 2_000;

/// One worker of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerRecord {
    /// Worker id (`w1`, `w2`, … in plan order).
    pub id: String,
    /// Subtask id from the plan.
    pub subtask_id: String,
    /// Subtask title.
    pub title: String,
    /// Current state.
    pub status: WorkerStatus,
    /// Branch `ahelper/<run>/<worker>`.
    pub branch: String,
    /// Worktree directory.
    pub worktree: PathBuf,
    /// Commit the worktree was created from.
    pub start_commit: Option<String>,
    /// Turns so far.
    pub turns: u32,
    /// Tokens so far.
    pub usage: Usage,
    /// Tool calls so far.
    pub tool_calls: u32,
    /// Last thing it did, e.g. `edit_file src/lib.rs`.
    pub last_action: String,
    /// Start time, RFC 3339.
    pub started_at: Option<String>,
    /// Milliseconds spent running (updated as it runs).
    pub elapsed_ms: u64,
    /// Final report.
    pub report: Option<WorkerReport>,
    /// Conflicting files when `status` is `conflict`.
    #[serde(default)]
    pub conflicts: Vec<ConflictRecord>,
    /// Files this worker has claimed in the run's file-claims map.
    #[serde(default)]
    pub claims: usize,
    /// Tool calls refused by the permission rules or the user (`tool main-argument`).
    #[serde(default)]
    pub denied: Vec<String>,
}

/// The whole run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// Run id (UUID v7).
    pub run_id: String,
    /// The user's task.
    pub task: String,
    /// Repository root (the user's checkout).
    pub repo_root: PathBuf,
    /// Base commit id.
    pub base_commit: String,
    /// What the base was given as (`HEAD`, a branch, or `HEAD+uncommitted`).
    pub base_ref: String,
    /// Integration branch `ahelper/<run>`.
    pub integration_branch: String,
    /// State.
    pub status: RunStatus,
    /// Creation time, RFC 3339.
    pub created_at: String,
    /// Last update, RFC 3339.
    pub updated_at: String,
    /// Process id of the ahelper running it (to detect an active run).
    pub pid: u32,
    /// The plan once made.
    pub plan: Option<Plan>,
    /// Workers in plan order.
    pub workers: Vec<WorkerRecord>,
    /// Tokens of the coordinator and all workers.
    pub usage: Usage,
    /// Final summary text.
    pub summary: Option<String>,
    /// Error of a failed run.
    pub error: Option<String>,
    /// The permission mode the run was started with (`swarm resume` keeps it unless told
    /// otherwise).
    #[serde(default)]
    pub permission_mode: Option<crate::permissions::PermissionMode>,
}

/// Errors reading or writing run records.
#[derive(Debug, thiserror::Error)]
pub enum RunStoreError {
    /// I/O ("No space left on device" in the user's words when the disk is full).
    #[error("{}", io_message(path, source))]
    Io {
        /// File.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// Bad JSON.
    #[error("{path} is not a valid run record: {message}")]
    Corrupt {
        /// File.
        path: PathBuf,
        /// Parser message.
        message: String,
    },
    /// No run matches.
    #[error("no run matches `{0}`; see `ahelper swarm ls`")]
    NotFound(String),
    /// Several runs match a prefix.
    #[error("`{0}` matches several runs; give more characters of the run id")]
    Ambiguous(String),
}

/// The text of [`RunStoreError::Io`]: a full disk in the user's words, else `path: error`.
fn io_message(path: &Path, source: &std::io::Error) -> String {
    if crate::atomic_write::is_disk_full(source) {
        crate::atomic_write::describe_write_error(&path.display().to_string(), source)
    } else {
        format!("{}: {source}", path.display())
    }
}

/// `<repo>/.ahelper/runs`.
pub fn runs_dir(repo_root: &Path) -> PathBuf {
    repo_root.join(".ahelper").join("runs")
}

/// `<repo>/.ahelper/runs/<run>`.
pub fn run_dir(repo_root: &Path, run_id: &str) -> PathBuf {
    runs_dir(repo_root).join(run_id)
}

impl RunRecord {
    /// Writes `run.json` atomically (temporary file, fsync, rename: the previous record stays
    /// whole when the disk is full).
    ///
    /// # Errors
    /// [`RunStoreError::Io`].
    pub fn save(&mut self) -> Result<(), RunStoreError> {
        self.updated_at = crate::transcript::now_rfc3339();
        let dir = run_dir(&self.repo_root, &self.run_id);
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| RunStoreError::Io { path, source }
        };
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        let target = dir.join("run.json");
        let text = serde_json::to_string_pretty(self).expect("run records serialise");
        crate::atomic_write::write_path(&target, text.as_bytes()).map_err(io(&target))
    }

    /// Reads one run's record.
    ///
    /// # Errors
    /// [`RunStoreError`].
    pub fn load(repo_root: &Path, run_id: &str) -> Result<RunRecord, RunStoreError> {
        let path = run_dir(repo_root, run_id).join("run.json");
        let text = std::fs::read_to_string(&path).map_err(|source| RunStoreError::Io {
            path: path.clone(),
            source,
        })?;
        serde_json::from_str(&text).map_err(|e| RunStoreError::Corrupt {
            path,
            message: e.to_string(),
        })
    }

    /// Every run of the repository, oldest first (run ids are UUID v7 and sort by time).
    /// Unreadable records are skipped.
    pub fn list(repo_root: &Path) -> Vec<RunRecord> {
        let mut ids: Vec<String> = std::fs::read_dir(runs_dir(repo_root))
            .map(|rd| {
                rd.filter_map(Result::ok)
                    .filter_map(|e| e.file_name().into_string().ok())
                    .collect()
            })
            .unwrap_or_default();
        ids.sort();
        ids.iter()
            .filter_map(|id| RunRecord::load(repo_root, id).ok())
            .collect()
    }

    /// Finds a run by id or unique prefix.
    ///
    /// # Errors
    /// [`RunStoreError::NotFound`] or [`RunStoreError::Ambiguous`].
    pub fn find(repo_root: &Path, prefix: &str) -> Result<RunRecord, RunStoreError> {
        let matches: Vec<RunRecord> = Self::list(repo_root)
            .into_iter()
            .filter(|r| r.run_id.starts_with(prefix))
            .collect();
        match matches.len() {
            0 => Err(RunStoreError::NotFound(prefix.into())),
            1 => Ok(matches.into_iter().next().expect("one")),
            _ => {
                if let Some(exact) = matches.iter().find(|r| r.run_id == prefix) {
                    return Ok(exact.clone());
                }
                Err(RunStoreError::Ambiguous(prefix.into()))
            }
        }
    }

    /// The worker record with id `worker`.
    pub fn worker(&self, worker: &str) -> Option<&WorkerRecord> {
        self.workers.iter().find(|w| w.id == worker)
    }

    /// Transcript path of a worker: `runs/<run>/workers/<worker>.jsonl`.
    pub fn worker_transcript(&self, worker: &str) -> PathBuf {
        run_dir(&self.repo_root, &self.run_id)
            .join("workers")
            .join(format!("{worker}.jsonl"))
    }

    /// How the run ended, for the exit status: see [`RunOutcome`].
    pub fn outcome(&self) -> RunOutcome {
        let merged_any = self
            .workers
            .iter()
            .any(|w| w.status == WorkerStatus::Merged);
        let refused_any = self.workers.iter().any(|w| !w.denied.is_empty());
        let all_done = self
            .workers
            .iter()
            .all(|w| matches!(w.status, WorkerStatus::Merged | WorkerStatus::NoChanges));
        match self.status {
            RunStatus::Cancelled => RunOutcome::Cancelled,
            RunStatus::Finished if refused_any && !merged_any => RunOutcome::Failed,
            RunStatus::Finished if all_done => RunOutcome::Succeeded,
            _ => RunOutcome::Failed,
        }
    }

    /// The coordinator's transcript (plan conversation and run events).
    pub fn coordinator_transcript(&self) -> PathBuf {
        run_dir(&self.repo_root, &self.run_id).join("coordinator.jsonl")
    }

    /// The state `swarm ls` shows: the status, or `stopped` for a run left `planning` or
    /// `running` by a process that is gone (resume it or clean it).
    pub fn state_label(&self) -> &'static str {
        if matches!(self.status, RunStatus::Running | RunStatus::Planning) && !self.is_active() {
            "stopped"
        } else {
            self.status.as_str()
        }
    }

    /// Whether the process recorded in `pid` is still alive and the run is not over.
    pub fn is_active(&self) -> bool {
        matches!(self.status, RunStatus::Planning | RunStatus::Running)
            && self.pid != 0
            && process_alive(self.pid)
    }
}

/// Whether a process with this pid exists (signal 0).
pub fn process_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: kill with signal 0 only checks for the existence of the process.
    unsafe {
        libc::kill(pid, 0) == 0
            || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn which_reports_without_changes_let_dependents_run() {
        let report = |stop: &str, error: Option<&str>, commit: Option<&str>| WorkerReport {
            stop_reason: serde_json::from_value(serde_json::json!(stop)).unwrap(),
            error: error.map(Into::into),
            commit: commit.map(Into::into),
            ..Default::default()
        };
        let completed_without_changes =
            |r: Option<&WorkerReport>| r.is_some_and(WorkerReport::completed_without_changes);
        assert!(completed_without_changes(Some(&report(
            "completed",
            None,
            None
        ))));
        // Seen with a real small model: its summary was cut at max_output_tokens.
        assert!(completed_without_changes(Some(&report(
            "completed",
            Some("the answer was cut off by the output-token limit (max_output_tokens)"),
            None
        ))));
        for stop in [
            "max_turns",
            "error",
            "cancelled",
            "time_limit",
            "token_budget",
        ] {
            assert!(
                !completed_without_changes(Some(&report(stop, None, None))),
                "{stop}"
            );
        }
        assert!(!completed_without_changes(Some(&report(
            "completed",
            None,
            Some("abc")
        ))));
        assert!(!completed_without_changes(None));
    }

    #[test]
    fn stop_reasons_keep_their_serialized_names() {
        let report = WorkerReport {
            stop_reason: AgentStopReason::MaxTurns,
            ..Default::default()
        };
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["stop_reason"], "max_turns");
        let mut old = json.clone();
        old["stop_reason"] = serde_json::json!("");
        let back: WorkerReport = serde_json::from_value(old).unwrap();
        assert_eq!(back.stop_reason, AgentStopReason::Error);
        let back: WorkerReport = serde_json::from_value(json).unwrap();
        assert_eq!(back, report);
    }

    #[test]
    fn outcome_follows_the_workers() {
        let worker = |status: WorkerStatus, denied: &[&str]| WorkerRecord {
            id: "w1".into(),
            subtask_id: "s".into(),
            title: "t".into(),
            status,
            branch: "b".into(),
            worktree: PathBuf::new(),
            start_commit: None,
            turns: 0,
            usage: Usage::default(),
            tool_calls: 0,
            last_action: String::new(),
            started_at: None,
            elapsed_ms: 0,
            report: None,
            conflicts: vec![],
            claims: 0,
            denied: denied.iter().map(|d| d.to_string()).collect(),
        };
        let run = |status: RunStatus, workers: Vec<WorkerRecord>| RunRecord {
            run_id: "r".into(),
            task: "t".into(),
            repo_root: PathBuf::new(),
            base_commit: "c".into(),
            base_ref: "HEAD".into(),
            integration_branch: "i".into(),
            status,
            created_at: String::new(),
            updated_at: String::new(),
            pid: 0,
            plan: None,
            workers,
            usage: Usage::default(),
            summary: None,
            error: None,
            permission_mode: None,
        };
        use WorkerStatus::*;
        let finished = |w| run(RunStatus::Finished, w);
        assert_eq!(
            finished(vec![worker(Merged, &[]), worker(NoChanges, &[])]).outcome(),
            RunOutcome::Succeeded
        );
        assert_eq!(
            finished(vec![worker(Merged, &[]), worker(Conflict, &[])]).outcome(),
            RunOutcome::Failed
        );
        // every worker was refused something and nothing merged: not a success
        assert_eq!(
            finished(vec![worker(NoChanges, &["run_command ls"])]).outcome(),
            RunOutcome::Failed
        );
        assert_eq!(
            finished(vec![worker(Merged, &["run_command ls"])]).outcome(),
            RunOutcome::Succeeded
        );
        assert_eq!(
            run(RunStatus::Cancelled, vec![worker(Merged, &[])]).outcome(),
            RunOutcome::Cancelled
        );
        assert_eq!(run(RunStatus::Failed, vec![]).outcome(), RunOutcome::Failed);
    }

    #[test]
    fn save_load_find() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = RunRecord {
            run_id: "0190-abc".into(),
            task: "t".into(),
            repo_root: dir.path().into(),
            base_commit: "c".into(),
            base_ref: "HEAD".into(),
            integration_branch: "ahelper/0190-abc".into(),
            status: RunStatus::Running,
            created_at: String::new(),
            updated_at: String::new(),
            pid: std::process::id(),
            plan: None,
            workers: vec![],
            usage: Usage::default(),
            summary: None,
            error: None,
            permission_mode: None,
        };
        r.save().unwrap();
        assert!(r.is_active());
        let back = RunRecord::find(dir.path(), "0190").unwrap();
        assert_eq!(back.run_id, r.run_id);
        assert!(matches!(
            RunRecord::find(dir.path(), "zzz"),
            Err(RunStoreError::NotFound(_))
        ));
        assert!(
            !dir.path()
                .join(".ahelper/runs/0190-abc")
                .read_dir()
                .unwrap()
                .any(|e| { e.unwrap().file_name().to_string_lossy().contains("tmp") })
        );
    }
}
