//! The persistent record of a swarm run: `.ahelper/runs/<run>/run.json`, rewritten atomically
//! (write to a temporary file, then rename) after every change, so `swarm ls`, `status`,
//! `resume` and `clean` see a consistent state even after a crash.
//!
//! Records written by older versions lack the fields added since: those marked
//! `#[serde(default)]` read as their default, and an absent `Option` field reads as `None`
//! (serde's rule for `Option`, so those carry no attribute).

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
    /// Was in flight when the process running the run died (`kill -9`, a crash); shown
    /// instead of its last recorded state by [`RunRecord::observed`]. `swarm resume` starts it
    /// again from its branch and transcript.
    Interrupted,
    /// Its worktree or its merge candidate is being verified.
    Verifying,
    /// A self-fix round (its own agent) or a `fixer` agent works on new failures
    /// ([`WorkerRecord::fix_round`] says which attempt).
    Fixing,
    /// A `merger` agent resolves the textual conflict of its merge.
    ResolvingConflict,
    /// Its merge candidate still had new failures after the fixer attempts: not merged, its
    /// branch is kept; [`WorkerRecord::verify_output`] has the failure output.
    VerifyFailed,
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
            WorkerStatus::Interrupted => "interrupted",
            WorkerStatus::Verifying => "verifying",
            WorkerStatus::Fixing => "fixing",
            WorkerStatus::ResolvingConflict => "resolving conflict",
            WorkerStatus::VerifyFailed => "verify failed",
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
                | WorkerStatus::VerifyFailed
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

/// Permission rules given on a run's command line, as rule text in ahelper's tool names
/// (`run_command(git diff:*)`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionRules {
    /// `--allowedTools` rules.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
    /// `--disallowedTools` rules.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<String>,
}

impl SessionRules {
    /// No rule at all.
    pub fn is_empty(&self) -> bool {
        self.allow.is_empty() && self.deny.is_empty()
    }

    /// Adds the rules of `other` not already here, keeping the order.
    pub fn add(&mut self, other: &SessionRules) {
        for (mine, theirs) in [
            (&mut self.allow, &other.allow),
            (&mut self.deny, &other.deny),
        ] {
            for rule in theirs {
                if !mine.contains(rule) {
                    mine.push(rule.clone());
                }
            }
        }
    }
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
    /// Its self-check: the verification of its worktree after its loop (and fix rounds), one
    /// line such as `python3 -m unittest passed`; `None` when verification is off or the worker
    /// did not finish.
    pub verification: Option<String>,
    /// Fix rounds it was sent back for.
    #[serde(default)]
    pub fix_rounds: u32,
    /// Hazardous content the branch adds (symlinks out of the repository, git drivers,
    /// submodules, large files, control characters in names, auto-run files); `--apply`
    /// refuses without confirmation while a merged worker has any.
    #[serde(default)]
    pub hazards: Vec<ahelper_worktrees::Hazard>,
    /// Files its branch changes outside the subtask's declared scope (e.g. through
    /// `run_command`), relative to the repository root: reported, not refused.
    #[serde(default)]
    pub out_of_scope: Vec<String>,
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
            verification: None,
            fix_rounds: 0,
            hazards: Vec::new(),
            out_of_scope: Vec::new(),
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
    /// When the tool call named by `last_action` started (RFC 3339); `None` when no call runs.
    pub action_started_at: Option<String>,
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
    /// Paths its commands left changed in its worktree (`git status` after its latest
    /// command; an untracked directory counts once).
    #[serde(default)]
    pub changed_files: usize,
    /// Tool calls refused by the permission rules or the user (`tool main-argument`).
    #[serde(default)]
    pub denied: Vec<String>,
    /// The allow rules that would let the refused calls run, each once, in the order first
    /// needed (e.g. `run_command(cargo test:*)`).
    #[serde(default)]
    pub allow_rules: Vec<String>,
    /// Refused calls no allow rule or mode would let run (deny rules, protected paths, hooks,
    /// `d` answers).
    #[serde(default)]
    pub refused_for_good: usize,
    /// The fix attempt under way while `status` is `fixing` (shown as `fixing 1/2`).
    pub fix_round: Option<FixRound>,
    /// The latest verification of its work (its worktree, then its merge candidate), one line
    /// such as `python3 -m unittest passed`.
    pub verification: Option<String>,
    /// The failure output (head and tail) when `status` is `verify failed`.
    pub verify_output: Option<String>,
    /// The machine a remote worker runs on (`None`: this machine).
    pub machine: Option<String>,
    /// Its machine stopped sending heartbeats while it ran (for the liveness timeout, while
    /// NATS was reachable); cleared when it reports its end.
    #[serde(default)]
    pub machine_lost: bool,
    /// The NATS server could not be read, so its machine's heartbeat is unknown, while this
    /// is true; cleared when reads succeed again or it reports its end.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub nats_unreachable: bool,
}

impl WorkerRecord {
    /// Worker `id` for subtask `subtask_id` (`title`), queued on `branch` in `worktree`, with
    /// nothing done yet.
    pub fn queued(
        id: String,
        subtask_id: String,
        title: String,
        branch: String,
        worktree: PathBuf,
    ) -> WorkerRecord {
        WorkerRecord {
            id,
            subtask_id,
            title,
            status: WorkerStatus::Queued,
            branch,
            worktree,
            start_commit: None,
            turns: 0,
            usage: Usage::default(),
            tool_calls: 0,
            last_action: String::new(),
            started_at: None,
            action_started_at: None,
            elapsed_ms: 0,
            report: None,
            conflicts: vec![],
            claims: 0,
            changed_files: 0,
            denied: vec![],
            allow_rules: vec![],
            refused_for_good: 0,
            fix_round: None,
            verification: None,
            verify_output: None,
            machine: None,
            machine_lost: false,
            nats_unreachable: false,
        }
    }

    /// What the table's "last action" says once the worker enters its current `status`, so
    /// that it never keeps an earlier "waiting for the model" after the loop ended: `committing
    /// its worktree`, `committed; waiting to merge`, `failed: <error>`, `cancelled; its work is
    /// in a wip commit`, `merge conflict in 2 file(s)`, …. `None` for states whose action comes
    /// from elsewhere (running: turns and tool calls; verifying and fixing: their phase; merged:
    /// `merged as <commit>`) or that have none yet (queued).
    pub fn status_action(&self) -> Option<String> {
        let report = self.report.as_ref();
        let text = match self.status {
            WorkerStatus::Starting => "creating its worktree".into(),
            WorkerStatus::Committing => "committing its worktree".into(),
            WorkerStatus::Finished => "committed; waiting to merge".into(),
            WorkerStatus::NoChanges => "finished without changes".into(),
            WorkerStatus::Failed => match report.and_then(|r| r.error.as_deref()) {
                Some(e) => format!("failed: {}", e.lines().next().unwrap_or_default()),
                None => "failed".into(),
            },
            WorkerStatus::Cancelled if report.is_some_and(|r| r.commit.is_some()) => {
                "cancelled; its work is in a wip commit".into()
            }
            WorkerStatus::Cancelled => "cancelled".into(),
            WorkerStatus::Conflict => format!("merge conflict in {} file(s)", self.conflicts.len()),
            WorkerStatus::Skipped => "skipped: a dependency did not merge".into(),
            WorkerStatus::VerifyFailed => "not merged: new verification failures".into(),
            WorkerStatus::WaitingForPermission => "waiting for permission".into(),
            WorkerStatus::Queued
            | WorkerStatus::Running
            | WorkerStatus::Merged
            | WorkerStatus::Interrupted
            | WorkerStatus::Verifying
            | WorkerStatus::Fixing
            | WorkerStatus::ResolvingConflict => return None,
        };
        Some(text)
    }

    /// Why a worker that changed nothing did not do its subtask: its calls were refused, or
    /// its loop stopped before the model finished (it gave up: turns, budget, time, an error).
    /// `None` when it finished normally and nothing was refused — its subtask needed no change.
    pub fn why_nothing_changed(&self) -> Option<String> {
        if !self.denied.is_empty() {
            let n = self.denied.len();
            return Some(format!(
                "{n} {} refused",
                if n == 1 { "call was" } else { "calls were" }
            ));
        }
        let stop = self.report.as_ref().map(|r| r.stop_reason)?;
        (stop != AgentStopReason::Completed).then(|| format!("it stopped: {}", stop.as_str()))
    }

    /// Records a refused call `action`, with the allow rule that would let it run, if any.
    pub fn note_refusal(&mut self, action: &str, allow_rule: Option<&str>) {
        self.denied.push(action.to_string());
        match allow_rule {
            Some(rule) if !self.allow_rules.iter().any(|r| r == rule) => {
                self.allow_rules.push(rule.to_string())
            }
            Some(_) => {}
            None => self.refused_for_good += 1,
        }
    }

    /// The state as the status table shows it: the status label, with the attempt while
    /// fixing (`fixing 1/2`).
    pub fn state_label(&self) -> String {
        match (self.status, self.fix_round) {
            (WorkerStatus::Fixing, Some(r)) => format!("fixing {}/{}", r.attempt, r.of),
            (status, _) => status.label().to_string(),
        }
    }
}

/// Attempt `attempt` of at most `of`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FixRound {
    /// 1-based attempt.
    pub attempt: u32,
    /// The bound (`worker_fix_rounds` or `merge_fix_attempts`).
    pub of: u32,
}

/// Which kind of helper agent the coordinator started after the workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HelperRole {
    /// Fixes new failures of a merge candidate (`fix-<n>`).
    Fixer,
    /// Resolves a textual conflict (`merge-<n>`).
    Merger,
}

/// A fixer or merger agent of the run: its transcript is `runs/<run>/workers/<id>.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HelperRecord {
    /// `fix-1`, `merge-1`, …
    pub id: String,
    /// Fixer or merger.
    pub role: HelperRole,
    /// The worker whose merge it worked on.
    pub worker: String,
    /// Its branch `ahelper/<run>/<id>`.
    pub branch: String,
    /// Its worktree.
    pub worktree: PathBuf,
    /// Its final answer (≤ 2,000 characters).
    pub summary: String,
    /// Verification of its result (one line), when it got that far.
    pub verification: Option<String>,
    /// Whether its result advanced the integration branch.
    pub merged: bool,
    /// Tokens used.
    pub usage: Usage,
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
    /// Start time of process `pid`, in clock ticks since boot (field 22 of `/proc/<pid>/stat`),
    /// so a recycled pid is not taken for the run's process. `None` in records written before
    /// it was recorded, or where `/proc` is unavailable.
    pub pid_start_time: Option<u64>,
    /// When `swarm clean` removed every worktree and branch of the run, RFC 3339; `swarm ls`
    /// hides such runs unless given `--all`.
    pub cleaned_at: Option<String>,
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
    pub permission_mode: Option<crate::permissions::PermissionMode>,
    /// The run's verification setting (`swarm resume` keeps it).
    pub verify: Option<crate::verify::VerifyChoice>,
    /// The run's verification worktree (checked out detached at the base, then at each merge
    /// candidate).
    pub verify_worktree: Option<PathBuf>,
    /// The verification run on the base commit.
    pub baseline: Option<crate::verify::VerifyRun>,
    /// The verdict on the integration branch as it is now (after the last merge).
    pub final_verdict: Option<crate::verify::Verdict>,
    /// Fixer and merger agents, in the order they started.
    #[serde(default)]
    pub helpers: Vec<HelperRecord>,
    /// The coordinator's summary of the run (its synthesis turn).
    pub synthesis: Option<String>,
    /// What the verification worktree is doing, e.g. `verifying w2's merge candidate`
    /// (`None`: idle).
    pub verify_activity: Option<String>,
    /// Merge batches whose verification failed while each of their parts passed (a flaky
    /// verification), e.g. `w3+w5+w7`, in the order they were found.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flaky_verifications: Vec<String>,
    /// Where a distributed run's workers run (`swarm --nats`): `swarm resume` re-attaches
    /// there and `swarm clean` removes what the run left there. `None`: local workers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<RemoteRecord>,
    /// Where each save also records the run's remote, verification and permission mode outside
    /// the repository ([`super::seal`]); not part of `run.json`. `None`: not recorded (a record
    /// read for display, a unit test).
    #[serde(skip)]
    pub seal: Option<PathBuf>,
    /// Whether its latest process ran without anyone to answer permission questions (no
    /// terminal): the summary then suggests running in a terminal to answer them.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub headless: bool,
    /// The session rules of the run's command line (`--allowedTools`, `--disallowedTools`),
    /// which `swarm resume` applies again; sealed outside the repository ([`super::seal`]).
    #[serde(default, skip_serializing_if = "SessionRules::is_empty")]
    pub session_rules: SessionRules,
}

/// The NATS server and git remote of a distributed run, as the coordinator used them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteRecord {
    /// The NATS server URL (`nats://…`, `tls://…`; comma-separated for a cluster). Credentials
    /// are never recorded: they come from the flags and environment of each command.
    pub nats_url: String,
    /// The URL of the git remote the run's refs and worker branches were pushed to.
    pub repo_url: String,
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
    #[error(
        "{path} is not a valid run record: {message}; the run's worktrees and branches are kept. Restore the file, or move its run directory away to drop the run"
    )]
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

/// The ids of the repository's runs (the directories under `.ahelper/runs/`), sorted: oldest
/// first, run ids being UUID v7.
fn run_ids(repo_root: &Path) -> Vec<String> {
    let mut ids: Vec<String> = std::fs::read_dir(runs_dir(repo_root))
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .filter_map(|e| e.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    ids.sort();
    ids
}

/// Of `unreadable` (ids and errors), why the record of the one run whose id is `prefix`, or the
/// only one that starts with it, cannot be read; `None` when none, or several, match.
fn unreadable_match(
    unreadable: Vec<(String, RunStoreError)>,
    prefix: &str,
) -> Option<RunStoreError> {
    let mut matching: Vec<(String, RunStoreError)> = unreadable
        .into_iter()
        .filter(|(id, _)| id.starts_with(prefix))
        .collect();
    let exact = matching.iter().position(|(id, _)| id == prefix);
    match (exact, matching.len()) {
        (Some(i), _) => Some(matching.swap_remove(i).1),
        (None, 1) => matching.pop().map(|(_, error)| error),
        _ => None,
    }
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
    /// A run `run_id` of the repository at `repo_root` in `status`, created now by this process,
    /// with no task, base, integration branch, plan or workers yet (the caller fills in what it
    /// knows).
    pub fn new(run_id: String, repo_root: PathBuf, status: RunStatus) -> RunRecord {
        let now = crate::transcript::now_rfc3339();
        RunRecord {
            run_id,
            task: String::new(),
            repo_root,
            base_commit: String::new(),
            base_ref: String::new(),
            integration_branch: String::new(),
            status,
            created_at: now.clone(),
            updated_at: now,
            pid: std::process::id(),
            pid_start_time: None,
            cleaned_at: None,
            plan: None,
            workers: Vec::new(),
            usage: Usage::default(),
            summary: None,
            error: None,
            permission_mode: None,
            verify: None,
            verify_worktree: None,
            baseline: None,
            final_verdict: None,
            helpers: Vec::new(),
            synthesis: None,
            verify_activity: None,
            flaky_verifications: Vec::new(),
            remote: None,
            seal: None,
            headless: false,
            session_rules: SessionRules::default(),
        }
    }

    /// Writes `run.json` atomically (temporary file, fsync, rename: the previous record stays
    /// whole when the disk is full).
    ///
    /// # Errors
    /// [`RunStoreError::Io`].
    pub fn save(&mut self) -> Result<(), RunStoreError> {
        self.write(crate::atomic_write::write_path).map(|_| ())
    }

    /// [`RunRecord::save`] without waiting for the disk: the record is renamed into place
    /// (every reader sees it whole) and flushed when the caller syncs what this returns
    /// ([`crate::atomic_write::write_path_deferring_sync`]).
    ///
    /// # Errors
    /// [`RunStoreError::Io`].
    pub fn save_deferring_sync(
        &mut self,
    ) -> Result<crate::atomic_write::PendingSync, RunStoreError> {
        self.write(crate::atomic_write::write_path_deferring_sync)
    }

    fn write<T>(
        &mut self,
        replace: impl FnOnce(&Path, &[u8]) -> std::io::Result<T>,
    ) -> Result<T, RunStoreError> {
        self.updated_at = crate::transcript::now_rfc3339();
        let dir = run_dir(&self.repo_root, &self.run_id);
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| RunStoreError::Io { path, source }
        };
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        let target = self.record_path();
        let text = serde_json::to_string_pretty(self).expect("run records serialise");
        let written = replace(&target, text.as_bytes()).map_err(io(&target))?;
        if let Some(seal) = &self.seal {
            super::seal::write(seal, self).map_err(io(seal))?;
        }
        Ok(written)
    }

    /// `<repo>/.ahelper/runs/<run>/run.json`, where [`RunRecord::save`] writes this record.
    pub fn record_path(&self) -> PathBuf {
        run_dir(&self.repo_root, &self.run_id).join("run.json")
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
        let record: RunRecord =
            serde_json::from_str(&text).map_err(|e| RunStoreError::Corrupt {
                path: path.clone(),
                message: e.to_string(),
            })?;
        record
            .check_ids(run_id)
            .map_err(|message| RunStoreError::Corrupt { path, message })?;
        Ok(record)
    }

    /// Checks what paths and branch names are made from: the record names the run of its
    /// directory (`dir_id`), and every worker and helper id is a plain name (1–64 of `A-Z a-z
    /// 0-9 _ -`), so that an edited or planted `run.json` (`.ahelper/runs/` is in the
    /// repository) cannot point a clean-up outside the run's directories.
    fn check_ids(&self, dir_id: &str) -> Result<(), String> {
        if self.run_id != dir_id {
            return Err(format!(
                "it names run `{}`, but it is in the directory of run `{dir_id}`",
                self.run_id
            ));
        }
        let plain = |id: &str| {
            (1..=64).contains(&id.len())
                && id
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        };
        let ids = self.workers.iter().map(|w| w.id.as_str());
        match ids
            .chain(self.helpers.iter().map(|h| h.id.as_str()))
            .find(|id| !plain(id))
        {
            Some(id) => Err(format!(
                "worker id `{id}` is not a plain name (1-64 of A-Z a-z 0-9 _ -)"
            )),
            None => Ok(()),
        }
    }

    /// Every run of the repository, oldest first (run ids are UUID v7 and sort by time).
    /// Unreadable records are skipped: [`RunRecord::list_all`] names them.
    pub fn list(repo_root: &Path) -> Vec<RunRecord> {
        Self::list_all(repo_root).0
    }

    /// Every run of the repository, oldest first, each record read once: those that could be
    /// read, and the ids of those whose record cannot be (missing, not JSON, not a run record)
    /// with why ([`RunStoreError::Io`] or [`RunStoreError::Corrupt`]).
    pub fn list_all(repo_root: &Path) -> (Vec<RunRecord>, Vec<(String, RunStoreError)>) {
        let mut unreadable = Vec::new();
        let records = run_ids(repo_root)
            .into_iter()
            .filter_map(|id| match RunRecord::load(repo_root, &id) {
                Ok(record) => Some(record),
                Err(error) => {
                    unreadable.push((id, error));
                    None
                }
            })
            .collect();
        (records, unreadable)
    }

    /// Finds a run by id or unique prefix.
    ///
    /// # Errors
    /// [`RunStoreError::NotFound`] or [`RunStoreError::Ambiguous`]; when no readable run
    /// matches but one unreadable run does, why its record cannot be read.
    pub fn find(repo_root: &Path, prefix: &str) -> Result<RunRecord, RunStoreError> {
        let (records, unreadable) = Self::list_all(repo_root);
        let matches: Vec<RunRecord> = records
            .into_iter()
            .filter(|r| r.run_id.starts_with(prefix))
            .collect();
        match matches.len() {
            0 => Err(unreadable_match(unreadable, prefix)
                .unwrap_or_else(|| RunStoreError::NotFound(prefix.into()))),
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
        match self.status {
            RunStatus::Cancelled => RunOutcome::Cancelled,
            _ if self.failure_reason().is_some() => RunOutcome::Failed,
            _ => RunOutcome::Succeeded,
        }
    }

    /// Why the run is not a success (one line), or `None` when it is: finished, every subtask
    /// merged (or done without needing a change), at least one change merged, and the final
    /// integration branch passes verification (or verification is off).
    pub fn failure_reason(&self) -> Option<String> {
        match self.status {
            RunStatus::Finished => {}
            RunStatus::Cancelled => {
                return Some(self.error.clone().unwrap_or_else(|| "cancelled".into()));
            }
            other => {
                return Some(
                    self.error
                        .clone()
                        .unwrap_or_else(|| format!("the run is {}", other.as_str())),
                );
            }
        }
        let not_done: Vec<String> = self
            .workers
            .iter()
            .filter_map(|w| match (w.status, w.why_nothing_changed()) {
                (WorkerStatus::Merged, _) | (WorkerStatus::NoChanges, None) => None,
                (WorkerStatus::NoChanges, Some(why)) => {
                    Some(format!("{} {} ({why})", w.id, w.status.label()))
                }
                (status, _) => Some(format!("{} {}", w.id, status.label())),
            })
            .collect();
        if !not_done.is_empty() {
            return Some(format!("not every subtask merged: {}", not_done.join(", ")));
        }
        if !self
            .workers
            .iter()
            .any(|w| w.status == WorkerStatus::Merged)
        {
            let refused = self.workers.iter().any(|w| !w.denied.is_empty());
            return Some(if refused {
                "nothing was merged: the workers' tool calls were refused by permissions".into()
            } else {
                "nothing was merged: no subtask changed anything".into()
            });
        }
        let verify_on = self.verify.as_ref().is_some_and(|v| v.command().is_some());
        match &self.final_verdict {
            _ if !verify_on => None,
            Some(v) if !v.blocks_merge() => None,
            Some(_) => Some("the integration branch fails verification".into()),
            None => Some("the integration branch was not verified".into()),
        }
    }

    /// The coordinator's transcript (plan conversation and run events).
    pub fn coordinator_transcript(&self) -> PathBuf {
        run_dir(&self.repo_root, &self.run_id).join("coordinator.jsonl")
    }

    /// The state `swarm ls` and `swarm status` show: the status, or `interrupted` for a run left
    /// `planning` or `running` by a process that is gone or is not the one that ran it (resume it
    /// or clean it).
    pub fn state_label(&self) -> &'static str {
        if self.is_interrupted() {
            "interrupted"
        } else {
            self.status.as_str()
        }
    }

    /// Whether the run was left `planning` or `running` by a process that no longer runs it
    /// (killed, crashed, or its pid now belongs to another process).
    pub fn is_interrupted(&self) -> bool {
        matches!(self.status, RunStatus::Running | RunStatus::Planning) && !self.is_active()
    }

    /// Whether the process recorded in `pid` is still alive, is the same process (its start
    /// time matches `pid_start_time` when recorded), and the run is not over.
    pub fn is_active(&self) -> bool {
        matches!(self.status, RunStatus::Planning | RunStatus::Running)
            && self.pid != 0
            && process_alive(self.pid)
            && match (self.pid_start_time, process_start_time(self.pid)) {
                (Some(recorded), Some(now)) => recorded == now,
                _ => true,
            }
    }

    /// Records the current process as the one running the run (`pid`, `pid_start_time`).
    pub fn claim_for_this_process(&mut self) {
        self.pid = std::process::id();
        self.pid_start_time = process_start_time(self.pid);
    }

    /// The record as it should be shown: for an interrupted run ([`Self::is_interrupted`]),
    /// every worker that was in flight is [`WorkerStatus::Interrupted`]. Not saved.
    pub fn observed(mut self) -> RunRecord {
        if self.is_interrupted() {
            for w in &mut self.workers {
                if matches!(
                    w.status,
                    WorkerStatus::Starting
                        | WorkerStatus::Running
                        | WorkerStatus::WaitingForPermission
                        | WorkerStatus::Committing
                ) {
                    w.status = WorkerStatus::Interrupted;
                }
            }
        }
        self
    }
}

/// Start time of process `pid` in clock ticks since boot: field 22 of `/proc/<pid>/stat`
/// (proc(5)); `None` when the process is gone or `/proc` is unavailable.
pub fn process_start_time(pid: u32) -> Option<u64> {
    stat_fields(pid)?.get(19)?.parse().ok()
}

/// The fields of `/proc/<pid>/stat` after the command name (field 3, the state, first).
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may contain spaces: count from the last `)`.
    let after_name = &stat[stat.rfind(')')? + 1..];
    Some(after_name.split_whitespace().map(str::to_string).collect())
}

/// Whether a process with this pid exists (signal 0) and has not exited (a zombie, state `Z`
/// or `X` in `/proc/<pid>/stat`, killed but not yet reaped by its parent, is not alive).
pub fn process_alive(pid: u32) -> bool {
    if stat_fields(pid).is_some_and(|f| matches!(f.first().map(String::as_str), Some("Z" | "X"))) {
        return false;
    }
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

    /// A worker record in `status` with `denied` refused calls.
    fn outcome_worker(status: WorkerStatus, denied: &[&str]) -> WorkerRecord {
        let mut worker = WorkerRecord::queued(
            "w1".into(),
            "s".into(),
            "t".into(),
            "b".into(),
            PathBuf::new(),
        );
        worker.status = status;
        worker.denied = denied.iter().map(|d| d.to_string()).collect();
        worker
    }

    /// A run record in `status` with `workers`.
    fn outcome_run(status: RunStatus, workers: Vec<WorkerRecord>) -> RunRecord {
        RunRecord {
            task: "t".into(),
            base_commit: "c".into(),
            base_ref: "HEAD".into(),
            integration_branch: "i".into(),
            workers,
            ..RunRecord::new("r".into(), PathBuf::new(), status)
        }
    }

    #[test]
    fn records_without_the_optional_fields_of_later_versions_still_load() {
        let mut worker = outcome_worker(WorkerStatus::Finished, &[]);
        worker.report = Some(WorkerReport::default());
        let run = outcome_run(RunStatus::Finished, vec![worker]);
        let mut json = serde_json::to_value(&run).unwrap();
        let run_fields = [
            "pid_start_time",
            "cleaned_at",
            "permission_mode",
            "verify",
            "verify_worktree",
            "baseline",
            "final_verdict",
            "synthesis",
            "verify_activity",
        ];
        let worker_fields = [
            "action_started_at",
            "fix_round",
            "verification",
            "verify_output",
            "machine",
        ];
        for field in run_fields {
            assert!(
                json.as_object_mut().unwrap().remove(field).is_some(),
                "{field}"
            );
        }
        let old_worker = json["workers"][0].as_object_mut().unwrap();
        for field in worker_fields {
            assert!(old_worker.remove(field).is_some(), "{field}");
        }
        let old_report = old_worker["report"].as_object_mut().unwrap();
        assert!(old_report.remove("verification").is_some());
        let back: RunRecord = serde_json::from_value(json).unwrap();
        assert_eq!(back, run);
    }

    #[test]
    fn outcome_follows_the_workers() {
        let worker = outcome_worker;
        let run = outcome_run;
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
        // nothing changed: not a success
        let nothing = finished(vec![worker(NoChanges, &[])]);
        assert_eq!(nothing.outcome(), RunOutcome::Failed);
        assert!(
            nothing
                .failure_reason()
                .unwrap()
                .contains("no subtask changed")
        );
    }

    #[test]
    fn outcome_with_verification_follows_the_final_verdict() {
        let worker = outcome_worker;
        let finished = |w| outcome_run(RunStatus::Finished, w);
        use WorkerStatus::*;
        // verification on: the final verdict decides
        let verified = |verdict: Option<crate::verify::Verdict>| {
            let mut r = finished(vec![worker(Merged, &[])]);
            r.verify = Some(crate::verify::VerifyChoice::On {
                command: "make test".into(),
                source: crate::verify::CommandSource::Config,
            });
            r.final_verdict = verdict;
            r
        };
        assert_eq!(
            verified(Some(crate::verify::Verdict::Green)).outcome(),
            RunOutcome::Succeeded
        );
        let red = verified(Some(crate::verify::Verdict::Inconclusive {
            reason: "x".into(),
        }));
        assert_eq!(red.outcome(), RunOutcome::Failed);
        assert!(red.failure_reason().unwrap().contains("fails verification"));
        assert_eq!(verified(None).outcome(), RunOutcome::Failed);
        // a subtask left unmerged is named
        let failed = finished(vec![worker(Merged, &[]), worker(VerifyFailed, &[])]);
        assert!(
            failed
                .failure_reason()
                .unwrap()
                .contains("w1 verify failed")
        );
    }

    #[test]
    fn a_killed_process_not_yet_reaped_is_not_alive() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        // `true` exits at once; until we wait for it, it is a zombie.
        while process_alive(pid) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let alive = process_alive(pid);
        child.wait().unwrap();
        assert!(!alive, "a zombie counts as alive");
        assert!(process_alive(std::process::id()));
    }

    #[test]
    fn a_recycled_pid_is_not_the_runs_process() {
        let dir = tempfile::tempdir().unwrap();
        let mut r: RunRecord = serde_json::from_value(serde_json::json!({
            "run_id": "r", "task": "t", "repo_root": dir.path(), "base_commit": "c",
            "base_ref": "HEAD", "integration_branch": "i", "status": "running",
            "created_at": "", "updated_at": "", "pid": 0, "plan": null, "workers": [],
            "usage": {"input_tokens": 0, "output_tokens": 0}, "summary": null, "error": null
        }))
        .unwrap();
        r.claim_for_this_process();
        assert!(r.pid_start_time.is_some());
        assert!(r.is_active() && !r.is_interrupted());
        r.pid_start_time = r.pid_start_time.map(|t| t + 1);
        assert!(!r.is_active() && r.is_interrupted());
        assert_eq!(r.state_label(), "interrupted");
        // records written before the start time was recorded: the pid alone decides
        r.pid_start_time = None;
        assert!(r.is_active());
    }

    #[test]
    fn save_load_find() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = RunRecord {
            task: "t".into(),
            base_commit: "c".into(),
            base_ref: "HEAD".into(),
            integration_branch: "ahelper/0190-abc".into(),
            ..RunRecord::new("0190-abc".into(), dir.path().into(), RunStatus::Running)
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
