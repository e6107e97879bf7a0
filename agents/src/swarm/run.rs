//! A run's life outside the actors: set-up ([`prepare_run`]), the context shared by the
//! coordinator and its workers ([`RunContext`]), and [`execute`], which hands a planned run to
//! the coordinator actor and waits for its final record.
//!
//! Typestate: [`prepare_run`] gives a [`PreparedRun`] (record on disk, status `planning`);
//! [`super::plan_run`] turns it into a [`PlannedRun`] (a record with a plan), which is all
//! [`execute`] accepts — a run without a plan cannot reach the coordinator.

use super::coordinator::{CancelRun, CoordinatorActor, CoordinatorArgs};
use super::events::SwarmEvent;
use super::plan::Plan;
use super::planning::PlanFailure;
use super::record_saver::RecordFlush;
use super::roles::{RoleDefinition, load_role};
use super::state::{RunRecord, RunStatus, RunStoreError, WorkerStatus, run_dir};
use super::verification::BaselineHandle;
use crate::agent::AgentSettings;
use crate::config::{Config, EnvSnapshot};
use crate::model::ModelClient;
use crate::permissions::{PermissionPolicy, Prompter};
use crate::redact::Redactor;
use crate::sandbox_os::CommandSandbox;
use crate::transcript::TranscriptError;
use ahelper_worktrees as git;
use dashmap::DashMap;
use kameo::prelude::*;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use tokio_util::sync::CancellationToken;

/// Errors before or during planning, or when a run cannot start. (Worker failures are not
/// errors of the run: they are recorded per worker.)
#[derive(Debug, thiserror::Error)]
pub enum SwarmError {
    /// Git problem (not a repository, no commits, bare, …); the message says what to do.
    #[error(transparent)]
    Git(#[from] git::GitError),
    /// Configuration problem.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// Another run is active on the same base.
    #[error(
        "run {run_id} is already active on this base commit (pid {pid}); wait for it, stop it, or pass --base to start from another commit"
    )]
    AlreadyActive {
        /// The active run.
        run_id: String,
        /// Its process.
        pid: u32,
    },
    /// Planning failed (after the one re-ask of an invalid plan).
    #[error("{}", planning_failed(.0))]
    Plan(#[source] PlanFailure),
    /// The user stopped the run while the coordinator planned (Ctrl-C): nothing was started;
    /// the record is `cancelled` with the reason (e.g. `cancelled by the user (Ctrl-C)`).
    #[error(
        "run {run_id} {reason} while the coordinator was planning; nothing was started. Start a new run, and remove this one with `ahelper swarm clean {run_id}`"
    )]
    PlanningCancelled {
        /// The run.
        run_id: String,
        /// Why it stopped.
        reason: String,
    },
    /// `run.json` could not be written or read.
    #[error(transparent)]
    Record(#[from] RunStoreError),
    /// The coordinator's transcript could not be opened.
    #[error(transparent)]
    Transcript(#[from] TranscriptError),
    /// The repository root cannot serve as the coordinator's workspace.
    #[error(transparent)]
    Workspace(#[from] crate::tools::WorkspaceError),
    /// The record's base commit is not a commit id (a hand-edited or damaged `run.json`).
    #[error("run {run_id} has an invalid base commit `{base}` in its run.json; start a new run")]
    InvalidBase {
        /// The run.
        run_id: String,
        /// What the record holds.
        base: String,
    },
    /// The run's integration branch is gone although workers were merged into it: made again
    /// at the base commit it would silently drop their merges.
    #[error(
        "the integration branch {branch} of run {run_id} is gone, but {merged} worker(s) were merged into it; resuming would start it again from the base commit and lose their merges. Restore the branch (its last commit is in `git reflog` or `git fsck --lost-found`: `git branch {branch} <commit>`), or start a new run"
    )]
    IntegrationBranchGone {
        /// The run.
        run_id: String,
        /// The missing branch.
        branch: String,
        /// Workers the record says were merged into it.
        merged: usize,
    },
    /// The record has no plan (it failed while planning), so it cannot be executed.
    #[error("run {run_id} has no plan (it stopped while planning); start a new run")]
    NotPlanned {
        /// The run.
        run_id: String,
    },
    /// The model settings are wrong (refused key, wrong `base_url`, not a model API): the
    /// coordinator's first request failed and no plan can be made until they are fixed.
    #[error("{0}")]
    ModelSettings(crate::model::ModelError),
    /// The model provider at `base_url` could not be reached or failed while the coordinator
    /// planned (after the request's retries): no plan was received, nothing was started.
    #[error(
        "{} the model provider at {base_url} while planning: {error}; nothing was started — check that the provider is up (and `base_url`), then start the run again",
        if matches!(**error, crate::model::ModelError::Connection(_)) { "could not reach" } else { "an error from" }
    )]
    ProviderFailed {
        /// The provider's `base_url`.
        base_url: String,
        /// What failed (boxed: the error is large).
        error: Box<crate::model::ModelError>,
    },
    /// The subtasks over the cap could not be written to the queued plan file.
    #[error(
        "could not write the subtasks over the cap to {}: {source}; free some space, or raise \
         --max-subtasks to run them all at once",
        .path.display()
    )]
    QueuedPlan {
        /// `runs/<run>/queued-plan.json`.
        path: PathBuf,
        /// The write's error.
        source: std::io::Error,
    },
    /// Role definitions.
    #[error(transparent)]
    Role(#[from] super::roles::RoleError),
}

/// Options of a new run.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Base ref (default `HEAD`).
    pub base: Option<String>,
    /// Snapshot uncommitted changes into the base.
    pub include_uncommitted: bool,
    /// Overrides `swarm.max_workers`.
    pub max_workers: Option<usize>,
}

/// Everything shared by the coordinator and the workers of one run. Owned by the run (an
/// `Arc`), never global; immutable except for the file claims, the run-wide permission policy
/// and the cancel token, which are shared on purpose.
pub struct RunContext {
    /// Run id.
    pub run_id: String,
    /// The task.
    pub task: String,
    /// Repository root (the user's checkout).
    pub repo_root: PathBuf,
    /// Serialises worktree mutations on the repository.
    pub git_lock: Arc<git::RepoLock>,
    /// The model.
    pub client: Arc<dyn ModelClient>,
    /// Model name.
    pub model: String,
    /// Limits of every worker's agent: `[agent]` limits, the provider's output tokens and
    /// context window, `swarm.worker_max_turns` as `max_turns`, the run's deadline.
    pub worker_settings: AgentSettings,
    /// What counts as a hazard in a worker's branch (`swarm.max_file_mb`).
    pub hazard_limits: git::HazardLimits,
    /// Run-wide permission policy (answers `a`/`d` apply to every worker).
    pub policy: Arc<RwLock<PermissionPolicy>>,
    /// Who answers permission prompts (one at a time).
    pub prompter: Arc<dyn Prompter>,
    /// File claims (relative path → worker id).
    pub claims: Arc<DashMap<PathBuf, String>>,
    /// Workers at once.
    pub max_workers: usize,
    /// Run-wide token budget (input + output tokens).
    pub token_budget: u64,
    /// Run-wide deadline.
    pub deadline: Option<tokio::time::Instant>,
    /// Cancelled on Ctrl-C or a run-wide limit ([`RunContext::stop`]); workers, fixers,
    /// mergers and the closing turn use child tokens.
    pub cancel: CancellationToken,
    /// Why the run was stopped: the first reason given to [`RunContext::stop`].
    stop_reason: std::sync::OnceLock<String>,
    /// The worker role.
    pub worker_role: RoleDefinition,
    /// Event sink (UI).
    pub events: tokio::sync::mpsc::UnboundedSender<SwarmEvent>,
    /// Latest run record for renderers.
    pub snapshots: tokio::sync::watch::Sender<RunRecord>,
    events_log: std::sync::Mutex<Option<std::fs::File>>,
    /// The run's verifier (`None`: verification is off).
    pub verifier: Option<Arc<super::verification::RunVerifier>>,
    /// The verification run on the base commit (what new failures are judged against); it may
    /// still be running when the workers start: [`RunContext::wait_for_baseline`].
    pub baseline: Option<super::verification::BaselineHandle>,
    /// `[swarm] worker_fix_rounds`: rounds a worker gets back to fix new failures.
    pub worker_fix_rounds: u32,
    /// `[swarm] merge_fix_attempts`: fixer agents per red merge candidate.
    pub merge_fix_attempts: u32,
    /// How the merge queue gates the integration branch, chosen once for the run.
    pub merge_policy: super::merge_policy::MergePolicy,
    /// The run's passing verdicts by tree, command and baseline.
    pub verdicts: Arc<super::merge_policy::VerdictCache>,
    /// How each new worker worktree is prepared before its worker starts: `.worktreeinclude`
    /// and `[swarm] setup`.
    pub worktree_setup: super::setup::WorktreeSetup,
    /// The project instructions at the last start commit a worker asked for (the workers that
    /// start together read them once; a worker machine shares one between its subtasks).
    pub start_instructions: Arc<super::worker::StartInstructions>,
    /// Command sandbox for the repository root; each worker uses
    /// [`CommandSandbox::for_workspace`] with its worktree, so its commands can write only there
    /// (and in the temp dir and the user's listed paths), never in the main checkout or another
    /// worker's worktree.
    pub command_sandbox: Option<Arc<CommandSandbox>>,
    /// Secret values redacted from every worker's tool results, transcript and events, and
    /// from the run's events ([`RunContext::publish`]).
    pub redactor: Redactor,
    /// MCP servers every worker starts for itself, in its worktree ([`RunIo::mcp_servers`]).
    pub mcp_servers: Vec<crate::mcp::McpServerSpec>,
    /// Where workers run: in this process, or on other machines through NATS.
    pub worker_slots: Arc<dyn super::slots::WorkerSlots>,
    /// The run's spare worktrees and who holds which worktree directory, for workers in this
    /// process; `None` when workers run elsewhere.
    pub worktree_pool: Option<Arc<super::spares::WorktreePool>>,
}

impl RunContext {
    /// Sends an event to the UI and appends it to `runs/<run>/events.jsonl`, with known secret
    /// values redacted. Each line (`{"ts": RFC 3339, "event": …}`) is serialised first and
    /// appended with one `write` (an `O_APPEND` write of the whole line: a reader following the
    /// file never sees half of one, and a line costs one system call, not one per JSON token).
    pub fn publish(&self, event: SwarmEvent) {
        let event = self.redactor.redact_serde(event);
        let line = serde_json::json!({"ts": crate::transcript::now_rfc3339(), "event": &event});
        let mut bytes = line.to_string().into_bytes();
        bytes.push(b'\n');
        if let Ok(mut guard) = self.events_log.lock()
            && let Some(file) = guard.as_mut()
        {
            use std::io::Write;
            let _ = file.write_all(&bytes);
        }
        let _ = self.events.send(event);
    }
}

impl RunContext {
    /// Stops the run: keeps `reason` (unless an earlier stop gave one) and cancels
    /// [`RunContext::cancel`] at once, so whatever the run awaits (a worker's turn, a
    /// verification, the coordinator's closing turn) ends now rather than when the coordinator
    /// reads its mailbox.
    pub fn stop(&self, reason: &str) {
        let _ = self.stop_reason.set(reason.to_string());
        self.cancel.cancel();
    }

    /// Why the run was stopped ([`RunContext::stop`]); `None` while it runs.
    pub fn stop_reason(&self) -> Option<&str> {
        self.stop_reason.get().map(String::as_str)
    }

    /// The baseline, once it has finished (`None` when verification is off or its task
    /// died). Workers wait here only to judge their self-check; the merge queue before its
    /// first verification.
    pub async fn wait_for_baseline(&self) -> Option<crate::verify::VerifyRun> {
        match &self.baseline {
            Some(handle) => handle.wait().await,
            None => None,
        }
    }
}

/// The user's stop of a run, shared by whoever may stop it (signal watchers, the live view)
/// and the run: a token, and the reason of the first [`UserStop::stop`] that gave one.
#[derive(Debug, Clone, Default)]
pub struct UserStop {
    token: CancellationToken,
    reason: Arc<std::sync::OnceLock<String>>,
}

impl UserStop {
    /// A stop nobody has asked for yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Stops the run, saying why (e.g. `stopped by SIGTERM`); the first reason given is kept.
    pub fn stop(&self, reason: &str) {
        let _ = self.reason.set(reason.to_string());
        self.token.cancel();
    }

    /// The token that fires on the stop (a planning turn runs under it).
    pub fn token(&self) -> &CancellationToken {
        &self.token
    }

    /// Why the run was stopped: the first reason given, else `cancelled by the user (Ctrl-C)`
    /// (the token was cancelled without one).
    pub fn reason(&self) -> String {
        self.reason
            .get()
            .cloned()
            .unwrap_or_else(|| "cancelled by the user (Ctrl-C)".into())
    }
}

/// How the caller observes and steers a run.
pub struct RunIo {
    /// Events.
    pub events: tokio::sync::mpsc::UnboundedSender<SwarmEvent>,
    /// Prompter for permission requests (a [`crate::permissions::DenyPrompter`] without a
    /// terminal).
    pub prompter: Arc<dyn Prompter>,
    /// The user's stop (first Ctrl-C, SIGTERM, a lost terminal) and its reason.
    pub cancel: UserStop,
    /// MCP servers the user trusts for this run (see [`crate::mcp::declared_servers`]). Each
    /// worker whose role names MCP tools (`mcp__*`) starts its own instances with its worktree
    /// as working directory and root, and stops them when it ends; their tool calls count
    /// against the worker's caps (turns, tool output) like any other tool.
    pub mcp_servers: Vec<crate::mcp::McpServerSpec>,
    /// Where workers run (`None`: in this process, [`super::slots::LocalSlots`]).
    pub worker_slots: Option<Arc<dyn super::slots::WorkerSlots>>,
}

/// A run that exists on disk and is ready to plan.
pub struct PreparedRun {
    /// The record (status `planning`).
    pub record: RunRecord,
    /// Repository facts.
    pub repo: git::RepoInfo,
    /// Uncommitted paths of the user's checkout (workers start without them unless
    /// `--include-uncommitted`).
    pub dirty: Vec<String>,
    /// A distributed run's NATS server and git remote, sent once its set-up (begun before
    /// planning) has connected and pushed the base: when it is there by the time the plan is
    /// saved, that save records it too ([`Self::take_ready_remote`]).
    pub remote_ready: Option<tokio::sync::oneshot::Receiver<super::state::RemoteRecord>>,
    /// The record's flush to disk, under way beside the planning request.
    pub flush: RecordFlush,
}

impl PreparedRun {
    /// Puts the distributed run's remote in the record when its set-up has sent it already
    /// (never waits: a set-up still under way is recorded later by [`PlannedRun::set_remote`]).
    pub fn take_ready_remote(&mut self) {
        if let Some(mut ready) = self.remote_ready.take() {
            match ready.try_recv() {
                Ok(remote) => self.record.remote = Some(remote),
                Err(_) => self.remote_ready = Some(ready),
            }
        }
    }

    /// What the user should know before the workers start: that they start without the
    /// checkout's uncommitted changes (unless `--include-uncommitted`), and that nothing they
    /// try will be allowed when nobody can answer permission prompts in `default` mode without
    /// allow rules.
    pub fn notices(
        &self,
        options: &RunOptions,
        config: &Config,
        prompts_answerable: bool,
    ) -> Vec<String> {
        let mut notices = Vec::new();
        if !self.dirty.is_empty() && !options.include_uncommitted {
            let (shown, more) = (self.dirty.iter().take(5), self.dirty.len() > 5);
            let shown: Vec<&str> = shown.map(String::as_str).collect();
            notices.push(format!(
                "note: your checkout has uncommitted changes ({}{}); the workers start from the base commit WITHOUT them \
                 (use --include-uncommitted to snapshot them into the base). Your files are not touched.",
                shown.join(", "),
                if more { ", …" } else { "" }
            ));
        }
        if !prompts_answerable
            && config.permissions.mode == crate::permissions::PermissionMode::Default
            && config.permissions.rules.allow.is_empty()
        {
            notices.push(
                "warning: no terminal to answer permission prompts and the permission mode is `default`: \
                 every edit or command a worker tries will be refused. Use --permission-mode accept-edits \
                 (and allow rules such as `run_command(cargo test:*)` in .ahelper/config.toml)."
                    .into(),
            );
        }
        notices
    }
}

/// A run with a plan: made by [`super::plan_run`], or read back for `swarm resume`. The record's
/// `plan` is always `Some` and equal to [`PlannedRun::plan`].
#[derive(Debug, Clone)]
pub struct PlannedRun {
    record: RunRecord,
    plan: Plan,
    /// The baseline started before planning, still running or finished.
    pending_baseline: Option<super::verification::BaselineHandle>,
    /// Spare worktrees made while the coordinator planned.
    warm_start: Option<super::spares::WarmStart>,
    /// Plan indices of unfinished workers this process must not start (`swarm resume
    /// --only-failed` / `--worker`): they keep their state for a later resume.
    held: BTreeSet<usize>,
    /// The flush of the record's last save (the plan's), under way beside the first workers.
    flush: RecordFlush,
}

impl PlannedRun {
    /// The run of `record`, if it has a plan.
    ///
    /// # Errors
    /// [`SwarmError::NotPlanned`] when it failed while planning.
    pub fn from_record(record: RunRecord) -> Result<Self, SwarmError> {
        match record.plan.clone() {
            Some(plan) => Ok(PlannedRun {
                record,
                plan,
                pending_baseline: None,
                warm_start: None,
                held: BTreeSet::new(),
                flush: RecordFlush::default(),
            }),
            None => Err(SwarmError::NotPlanned {
                run_id: record.run_id,
            }),
        }
    }

    /// The record.
    pub fn record(&self) -> &RunRecord {
        &self.record
    }

    /// The plan.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The record and the plan.
    pub fn into_parts(self) -> (RunRecord, Plan) {
        (self.record, self.plan)
    }

    /// The run's record was saved (its plan) without waiting for the disk, flushed by `flush`
    /// ([`RunRecord::save_deferring_sync`]): the coordinator's saves wait for it.
    pub fn set_flush(&mut self, flush: RecordFlush) {
        self.flush = flush;
    }

    /// Returns once the record's last save is on disk (a run that does not start: before the
    /// process exits).
    pub async fn flushed(&self) {
        self.flush.wait().await;
    }

    /// For `swarm resume`: the workers at `selected` (plan indices) run again — a failed or
    /// skipped one is queued again (a failed one continues from its branch, `wip` commits
    /// included, and its transcript) — and every other unfinished worker is held: this process
    /// does not start it, and it keeps its state for a later resume.
    pub fn retry_only(&mut self, selected: &BTreeSet<usize>) {
        for (i, w) in self.record.workers.iter_mut().enumerate() {
            if selected.contains(&i) {
                if matches!(w.status, WorkerStatus::Failed | WorkerStatus::Skipped) {
                    w.status = WorkerStatus::Queued;
                    w.last_action = "queued again by swarm resume".into();
                }
            } else if !w.status.is_terminal() && w.status != WorkerStatus::Finished {
                self.held.insert(i);
                w.last_action = "held: not selected by this swarm resume".into();
            }
        }
    }

    /// Records where the run's workers run (a distributed run) and saves the record, unless
    /// the plan's save recorded it already.
    ///
    /// # Errors
    /// [`RunStoreError`] when `run.json` cannot be written.
    pub fn set_remote(&mut self, remote: super::state::RemoteRecord) -> Result<(), RunStoreError> {
        if self.record.remote.as_ref() == Some(&remote) {
            // Saved with the plan already.
            return Ok(());
        }
        self.record.remote = Some(remote);
        self.record.save()
    }

    /// Records the run's verification setting (`swarm resume` keeps it) and saves the record.
    ///
    /// # Errors
    /// [`RunStoreError`] when `run.json` cannot be written.
    pub fn set_verify(&mut self, choice: crate::verify::VerifyChoice) -> Result<(), RunStoreError> {
        self.record.verify = Some(choice);
        self.record.save()
    }

    /// Hands over the baseline started before planning (still running or finished): the
    /// workers start without waiting for it, and its result is recorded when it ends.
    pub fn set_pending_baseline(&mut self, baseline: super::verification::BaselineHandle) {
        self.pending_baseline = Some(baseline);
    }

    /// Hands over the spare worktrees made while the coordinator planned
    /// ([`super::spares::warm_up`]): the first workers recycle them instead of creating theirs.
    pub fn set_warm_start(&mut self, warm: super::spares::WarmStart) {
        self.warm_start = Some(warm);
    }
}

/// A short id for a repository: directory name plus 8 hex digits of a hash of its canonical path.
pub fn repo_id(repo_root: &Path) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    repo_root.hash(&mut h);
    let name = repo_root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "repo".into());
    let name: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{name}-{:08x}", h.finish() as u32)
}

/// Where the worktrees of a run go: `swarm.worktree_root` or
/// `$XDG_STATE_HOME/ahelper/worktrees`, then `<repo-id>/<run>/`.
pub fn worktree_base(
    config: &Config,
    env: &EnvSnapshot,
    repo_root: &Path,
    run_id: &str,
) -> PathBuf {
    let root = config
        .swarm
        .worktree_root
        .clone()
        .or_else(|| env.state_dir().map(|d| d.join("worktrees")))
        .unwrap_or_else(|| std::env::temp_dir().join("ahelper-worktrees"));
    root.join(repo_id(repo_root)).join(run_id)
}

/// The base directory run `record` (of the repository at `repo_root`) made its worktrees in:
/// the parent of its workers' recorded worktrees when that is an existing absolute directory
/// `<…>/<repo id>/<run id>` without `.` or `..` — `[swarm] worktree_root` or `XDG_STATE_HOME`
/// may have changed since the run started — else [`worktree_base`] as configured now. The
/// repository id comes from `repo_root`, not from the record, and [`RunRecord::load`] checked
/// that the record's run id is its directory's, so an edited record names no other directory.
pub fn recorded_worktree_base(
    config: &Config,
    env: &EnvSnapshot,
    repo_root: &Path,
    record: &RunRecord,
) -> PathBuf {
    let configured = worktree_base(config, env, repo_root, &record.run_id);
    let expected_tail = Path::new(&repo_id(repo_root)).join(&record.run_id);
    let plain = |base: &Path| {
        base.is_absolute()
            && base.components().all(|c| {
                matches!(
                    c,
                    std::path::Component::RootDir | std::path::Component::Normal(_)
                )
            })
    };
    record
        .workers
        .iter()
        .map(|w| super::cleanup::worktree_base_of(&w.worktree))
        .find(|base| plain(base) && base.ends_with(&expected_tail) && base.is_dir())
        .unwrap_or(configured)
}

pub use ahelper_worktrees::{integration_branch, worker_branch};

/// Checks the repository, records the base commit, creates the run directory and the record.
/// The user's checkout, branch, index and files are not modified. (The integration branch is
/// created when workers start, in [`execute`], so a plan-only run or a failed plan leaves no
/// branch behind.)
///
/// # Errors
/// [`SwarmError`] with a message that says what to do.
pub fn prepare_run(
    config: &Config,
    task: &str,
    options: &RunOptions,
) -> Result<PreparedRun, SwarmError> {
    let repo = git::RepoInfo::discover(&config.workspace_root)?;
    let root = repo.workdir.clone();
    let base_ref = options.base.clone().unwrap_or_else(|| "HEAD".into());
    let base = git::resolve_commit(&root, &base_ref)?;
    refuse_active_run_on(&root, base)?;
    git::ensure_excluded(&root, ".ahelper/")?;
    let dirty = git::dirty_paths(&root)?;
    let run_id = uuid::Uuid::now_v7().to_string();
    let (base, base_label) = if options.include_uncommitted && !dirty.is_empty() {
        let snapshot = git::snapshot_uncommitted(
            &root,
            base,
            &format!("refs/ahelper/{run_id}/base"),
            &format!("ahelper: snapshot of uncommitted changes for run {run_id}"),
            None,
        )?;
        (snapshot, format!("{base_ref}+uncommitted"))
    } else {
        (base, base_ref)
    };
    let mut record = new_record(run_id, task, root, base, base_label, config);
    // On disk beside the planning request rather than before it.
    let flush = RecordFlush::start(record.save_deferring_sync()?);
    Ok(PreparedRun {
        record,
        repo,
        dirty,
        remote_ready: None,
        flush,
    })
}

/// What [`SwarmError::Plan`] says: whose plan failed (the coordinator's, the user's file's,
/// the `--each` shards') and why.
fn planning_failed(failure: &PlanFailure) -> String {
    match failure {
        PlanFailure::Given(_) | PlanFailure::Shard(_) | PlanFailure::Files(_) => {
            format!("no plan to run: {failure}")
        }
        _ => format!("the coordinator could not produce a valid plan: {failure}"),
    }
}

/// One active run per base commit: a second would race the first for the same branches' names
/// and the user's attention.
fn refuse_active_run_on(root: &Path, base: git::Oid) -> Result<(), SwarmError> {
    match RunRecord::list(root)
        .into_iter()
        .find(|run| run.is_active() && run.base_commit == base.to_string())
    {
        Some(run) => Err(SwarmError::AlreadyActive {
            run_id: run.run_id,
            pid: run.pid,
        }),
        None => Ok(()),
    }
}

fn new_record(
    run_id: String,
    task: &str,
    repo_root: PathBuf,
    base: git::Oid,
    base_ref: String,
    config: &Config,
) -> RunRecord {
    RunRecord {
        integration_branch: integration_branch(&run_id),
        task: task.to_string(),
        base_commit: base.to_string(),
        base_ref,
        pid_start_time: super::state::process_start_time(std::process::id()),
        permission_mode: Some(config.permissions.mode),
        session_rules: config.session_rules.clone(),
        ..RunRecord::new(run_id, repo_root, RunStatus::Planning)
    }
}

/// Runs the workers of a planned (or interrupted) run to the end and returns the final record.
/// Cancelling `io.cancel` stops scheduling, cancels running workers (they commit `wip`), and
/// returns once every worker has reported.
///
/// Steps: create the integration branch → build the [`RunContext`] → requeue unfinished
/// workers → start the coordinator actor with cancel and deadline watchers → wait for its final
/// record.
///
/// # Errors
/// [`SwarmError`] when the run cannot start (roles, git lock, base commit).
pub async fn execute(
    run: PlannedRun,
    config: &Config,
    client: Arc<dyn ModelClient>,
    model: &str,
    io: RunIo,
    snapshots: tokio::sync::watch::Sender<RunRecord>,
) -> Result<RunRecord, SwarmError> {
    let pending = run.pending_baseline.clone();
    let warm = run.warm_start.clone();
    let held = run.held.clone();
    let flush = run.flush.clone();
    let (mut record, plan) = run.into_parts();
    // A resumed run is this process's now: `swarm ls` must see it running, not interrupted.
    record.claim_for_this_process();
    record.headless = !io.prompter.is_interactive();
    let baseline = match ensure_integration_branch(&record)
        .and_then(|()| ensure_baseline(&mut record, config, pending))
    {
        Ok(baseline) => baseline,
        Err(e) => {
            discard_warm_start(warm).await;
            flush.wait().await;
            return Err(e);
        }
    };
    let warm = match warm {
        Some(warm) if io.worker_slots.is_some() => {
            // Workers run elsewhere: spares in this checkout serve nobody.
            warm.discard().await;
            None
        }
        warm => warm,
    };
    let context = match run_context(
        &record,
        config,
        (client, model),
        (&io, warm.clone()),
        snapshots,
        baseline,
    ) {
        Ok(context) => Arc::new(context),
        Err(e) => {
            discard_warm_start(warm).await;
            flush.wait().await;
            return Err(e);
        }
    };
    tracing::debug!("the run's context is ready");
    requeue_unfinished(&mut record);
    context.publish(SwarmEvent::RunStarted {
        run_id: record.run_id.clone(),
        base_commit: record.base_commit.clone(),
        integration_branch: record.integration_branch.clone(),
    });
    let final_record = coordinate(context.clone(), (record, plan, held, flush), io.cancel).await;
    context.worker_slots.close(&final_record.run_id).await;
    context.publish(SwarmEvent::RunFinished {
        record: Box::new(final_record.clone()),
    });
    Ok(final_record)
}

/// Workers that were mid-way when the run stopped start again from their branches; a worker
/// whose branch was committed and waited for (or was in) the merge queue goes back to the queue.
fn requeue_unfinished(record: &mut RunRecord) {
    for w in &mut record.workers {
        match w.status {
            WorkerStatus::Verifying | WorkerStatus::Fixing | WorkerStatus::ResolvingConflict
                if w.report.as_ref().is_some_and(|r| r.commit.is_some()) =>
            {
                w.status = WorkerStatus::Finished;
                w.fix_round = None;
            }
            WorkerStatus::Finished => {}
            status if !status.is_terminal() => w.status = WorkerStatus::Queued,
            _ => {}
        }
    }
}

/// With verification on: the record names the verification worktree, and the run has its
/// baseline — the recorded one, the one started before planning (`pending`), or one started
/// now (a resumed run that stopped before its baseline ended). It runs in the background; the
/// workers do not wait for it.
fn ensure_baseline(
    record: &mut RunRecord,
    config: &Config,
    pending: Option<BaselineHandle>,
) -> Result<Option<BaselineHandle>, SwarmError> {
    let Some(command) = record.verify.as_ref().and_then(|v| v.command()) else {
        if let Some(pending) = pending {
            pending.stop();
        }
        return Ok(None);
    };
    let verifier = super::verification::RunVerifier::new(record, config, command);
    record.verify_worktree = Some(verifier.worktree.clone());
    record.save()?;
    if let Some(run) = record.baseline.clone() {
        return Ok(Some(BaselineHandle::ready(run)));
    }
    if pending.is_some() {
        return Ok(pending);
    }
    let base = git::Oid::from_str(&record.base_commit).map_err(|_| SwarmError::InvalidBase {
        run_id: record.run_id.clone(),
        base: record.base_commit.clone(),
    })?;
    let lock = Arc::new(git::RepoLock::new(&record.repo_root)?);
    Ok(Some(BaselineHandle::start(
        verifier,
        lock,
        record.repo_root.clone(),
        base,
    )))
}

/// The integration branch starts at the base commit; a resumed run keeps the one it has, and
/// one whose branch is gone after merges is refused ([`SwarmError::IntegrationBranchGone`]).
fn ensure_integration_branch(record: &RunRecord) -> Result<(), SwarmError> {
    let root = &record.repo_root;
    if git::branch_tip(root, &record.integration_branch).is_ok() {
        return Ok(());
    }
    let merged = record
        .workers
        .iter()
        .filter(|w| w.status == WorkerStatus::Merged)
        .count();
    if merged > 0 {
        return Err(SwarmError::IntegrationBranchGone {
            run_id: record.run_id.clone(),
            branch: record.integration_branch.clone(),
            merged,
        });
    }
    let base = git::Oid::from_str(&record.base_commit).map_err(|_| SwarmError::InvalidBase {
        run_id: record.run_id.clone(),
        base: record.base_commit.clone(),
    })?;
    git::create_branch(root, &record.integration_branch, base)?;
    Ok(())
}

/// Removes the spares of a run that does not start.
async fn discard_warm_start(warm: Option<super::spares::WarmStart>) {
    if let Some(warm) = warm {
        warm.discard().await;
    }
}

fn run_context(
    record: &RunRecord,
    config: &Config,
    (client, model): (Arc<dyn ModelClient>, &str),
    (io, warm): (&RunIo, Option<super::spares::WarmStart>),
    snapshots: tokio::sync::watch::Sender<RunRecord>,
    baseline: Option<BaselineHandle>,
) -> Result<RunContext, SwarmError> {
    let root = record.repo_root.clone();
    let (git_lock, worktree_pool) = match warm {
        Some(warm) => (warm.lock, Some(warm.pool)),
        None => {
            // Spares go next to the workers' worktrees.
            let pool = io.worker_slots.is_none().then(|| {
                let base = record
                    .workers
                    .first()
                    .map(|w| super::cleanup::worktree_base_of(&w.worktree))
                    .unwrap_or_else(|| {
                        worktree_base(config, &EnvSnapshot::capture(), &root, &record.run_id)
                    });
                super::spares::WorktreePool::new(base)
            });
            (Arc::new(git::RepoLock::new(&root)?), pool)
        }
    };
    let events_log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(run_dir(&root, &record.run_id).join("events.jsonl"))
        .ok();
    let deadline = Some(
        tokio::time::Instant::now() + std::time::Duration::from_secs(config.swarm.time_limit_s),
    );
    let worker_settings = AgentSettings {
        max_turns: config.swarm.worker_max_turns,
        deadline,
        ..AgentSettings::new(&config.agent, config.provider().ok())
    };
    let already_used = record.usage.input_tokens + record.usage.output_tokens;
    let verifier = record
        .verify
        .as_ref()
        .and_then(|v| v.command())
        .map(|command| {
            Arc::new(super::verification::RunVerifier::new(
                record, config, command,
            ))
        });
    Ok(RunContext {
        merge_policy: super::merge_policy::MergePolicy::for_run(
            verifier.is_some(),
            config.swarm.verify_slots,
        ),
        verdicts: Arc::default(),
        verifier,
        baseline,
        worker_fix_rounds: config.swarm.worker_fix_rounds,
        merge_fix_attempts: config.swarm.merge_fix_attempts,
        worktree_setup: super::setup::WorktreeSetup::from_config(config),
        start_instructions: Default::default(),
        run_id: record.run_id.clone(),
        task: record.task.clone(),
        git_lock,
        worktree_pool,
        client,
        model: model.to_string(),
        worker_settings,
        hazard_limits: hazard_limits(config),
        policy: Arc::new(RwLock::new(config.permissions.clone())),
        prompter: io.prompter.clone(),
        claims: Arc::new(DashMap::new()),
        max_workers: config.swarm.max_workers,
        token_budget: config.swarm.token_budget.max(already_used + 1),
        deadline,
        cancel: CancellationToken::new(),
        stop_reason: std::sync::OnceLock::new(),
        worker_role: load_role(&root, "worker")?,
        events: io.events.clone(),
        snapshots,
        events_log: std::sync::Mutex::new(events_log),
        command_sandbox: Some(Arc::new(CommandSandbox::new(&config.sandbox, &root))),
        redactor: config.redactor.clone(),
        mcp_servers: io.mcp_servers.clone(),
        repo_root: root,
        worker_slots: io
            .worker_slots
            .clone()
            .unwrap_or_else(|| Arc::new(super::slots::LocalSlots)),
    })
}

/// Spawns the coordinator actor, forwards the user's cancel (which also stops the run at once,
/// [`RunContext::stop`]) and the run's deadline to it as [`CancelRun`], and waits for the final
/// record. A coordinator that dies without answering
/// leaves a `failed` record.
async fn coordinate(
    context: Arc<RunContext>,
    (record, plan, held, flush): (RunRecord, Plan, BTreeSet<usize>, RecordFlush),
    user_stop: UserStop,
) -> RunRecord {
    let fallback = record.clone();
    let (done_tx, done_rx) = tokio::sync::oneshot::channel();
    let coordinator = CoordinatorActor::spawn_with_mailbox(
        CoordinatorArgs {
            run: context.clone(),
            record,
            plan,
            held,
            flush,
            done: done_tx,
        },
        kameo::mailbox::unbounded(),
    );
    let stopping = context.clone();
    let cancel_watch = tokio::spawn(cancel_when(coordinator.clone(), async move {
        user_stop.token().cancelled().await;
        let reason = user_stop.reason();
        // At once, not when the coordinator reads its mailbox: what it awaits (its closing
        // turn) ends now.
        stopping.stop(&reason);
        reason
    }));
    let deadline = context.deadline;
    // Every agent's settings carry the deadline (the closing turn ends there by itself).
    let deadline_watch = tokio::spawn(cancel_when(coordinator.clone(), async move {
        match deadline {
            Some(d) => tokio::time::sleep_until(d).await,
            None => std::future::pending().await,
        }
        "the run's wall-clock limit was reached".to_string()
    }));
    let final_record = match done_rx.await {
        Ok(r) => r,
        Err(_) => {
            let seal = fallback.seal.clone();
            let mut r = RunRecord::load(&context.repo_root, &fallback.run_id).unwrap_or(fallback);
            r.seal = seal;
            r.status = RunStatus::Failed;
            r.error = Some("the coordinator stopped unexpectedly".into());
            let _ = r.save();
            r
        }
    };
    cancel_watch.abort();
    deadline_watch.abort();
    let _ = coordinator.stop_gracefully().await;
    final_record
}

/// Tells the coordinator to cancel the run, with the reason `trigger` gives when it fires; it
/// handles it once its current message is done.
async fn cancel_when(
    coordinator: ActorRef<CoordinatorActor>,
    trigger: impl std::future::Future<Output = String>,
) {
    let reason = trigger.await;
    let _ = coordinator.tell(CancelRun { reason }).await;
}

/// What a worker machine (`ahelper worker`) needs to run one subtask of a coordinator
/// elsewhere: its own configuration, model and permission policy, the cached clone the subtask's
/// worktree is made in, and the run's task and worker role from the subtask message.
pub struct RemoteRunParts {
    /// Run id (validated).
    pub run_id: String,
    /// The whole swarm's task.
    pub task: String,
    /// The cached clone of the run's repository on this machine.
    pub clone: PathBuf,
    /// Its lock, shared by every subtask in that clone.
    pub git_lock: Arc<git::RepoLock>,
    /// The run's worker role.
    pub role: RoleDefinition,
    /// Cancelled when the subtask must stop (SIGTERM, the coordinator's cancel).
    pub cancel: CancellationToken,
    /// This machine's command sandbox, probed once when it started serving (landlock,
    /// namespaces: a fork each); the subtask's is [`CommandSandbox::for_workspace`] of it.
    pub sandbox: Arc<CommandSandbox>,
    /// The project instructions at a start commit, shared by this machine's subtasks (a
    /// commit id tells its tree, whatever the repository).
    pub start_instructions: Arc<super::worker::StartInstructions>,
}

impl RunContext {
    /// The context of one remote subtask: this machine's `[agent]`, `[swarm]` worker limits,
    /// permission rules, sandbox and redaction; permission prompts are denied at once (no
    /// terminal) — the caller replaces `prompter` when the coordinator answers them
    /// ([`super::remote::ask`]); no verification (the coordinator verifies every merge); events
    /// stay local.
    pub fn for_remote_worker(
        parts: RemoteRunParts,
        config: &Config,
        client: Arc<dyn ModelClient>,
        model: &str,
    ) -> RunContext {
        let root = parts.clone;
        let worker_settings = AgentSettings {
            max_turns: config.swarm.worker_max_turns,
            ..AgentSettings::new(&config.agent, config.provider().ok())
        };
        let (events, _) = tokio::sync::mpsc::unbounded_channel();
        let (snapshots, _) = tokio::sync::watch::channel(remote_record(&parts.run_id, &root));
        RunContext {
            verifier: None,
            baseline: None,
            worker_fix_rounds: 0,
            merge_fix_attempts: 0,
            merge_policy: super::merge_policy::MergePolicy::Unverified,
            verdicts: Arc::default(),
            // This machine's own `[swarm] setup` and `.worktreeinclude` guard; MCP servers are
            // not started for remote subtasks (their approval lives on the coordinator's side).
            worktree_setup: super::setup::WorktreeSetup::from_config(config),
            start_instructions: parts.start_instructions,
            mcp_servers: Vec::new(),
            run_id: parts.run_id,
            task: parts.task,
            git_lock: parts.git_lock,
            client,
            model: model.to_string(),
            worker_settings,
            hazard_limits: hazard_limits(config),
            policy: Arc::new(RwLock::new(config.permissions.clone())),
            prompter: Arc::new(crate::permissions::DenyPrompter),
            claims: Arc::new(DashMap::new()),
            max_workers: 1,
            token_budget: config.swarm.token_budget,
            deadline: None,
            cancel: parts.cancel,
            stop_reason: std::sync::OnceLock::new(),
            worker_role: parts.role,
            events,
            snapshots,
            events_log: std::sync::Mutex::new(None),
            command_sandbox: Some(Arc::new(parts.sandbox.for_workspace(&root))),
            redactor: config.redactor.clone(),
            repo_root: root,
            worker_slots: Arc::new(super::slots::LocalSlots),
            worktree_pool: None,
        }
    }
}

/// The hazard scan's limits of `config` (`swarm.max_file_mb`).
fn hazard_limits(config: &Config) -> git::HazardLimits {
    git::HazardLimits {
        max_file_bytes: config.swarm.max_file_bytes,
    }
}

/// The placeholder record of a remote subtask's context (nothing renders it).
fn remote_record(run_id: &str, root: &Path) -> RunRecord {
    RunRecord::new(run_id.to_string(), root.to_path_buf(), RunStatus::Running)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::CliOverrides;
    use crate::model::scripted::{ScriptedClient, ScriptedTurn};

    /// A worker machine's subtasks take its sandbox probe and its project instructions cache;
    /// each subtask's sandbox is rooted at its own clone.
    #[tokio::test]
    async fn remote_subtasks_share_the_machines_sandbox_probe_and_instructions() {
        let machine = tempfile::tempdir().unwrap();
        let env = EnvSnapshot::from_pairs([("HOME".into(), machine.path().display().to_string())]);
        let config = Config::load(machine.path(), &env, &CliOverrides::default()).unwrap();
        let sandbox = Arc::new(CommandSandbox::new(&config.sandbox, machine.path()));
        let instructions = Arc::new(super::super::worker::StartInstructions::default());
        let client: Arc<dyn ModelClient> =
            Arc::new(ScriptedClient::new(Vec::<ScriptedTurn>::new()));
        let owner = git::GitOwner::new();
        let contexts: Vec<RunContext> = ["a", "b"]
            .iter()
            .map(|name| {
                let clone = machine.path().join(name);
                std::fs::create_dir(&clone).unwrap();
                let init = std::process::Command::new("git")
                    .args(["init", "-q"])
                    .current_dir(&clone)
                    .status();
                assert!(init.unwrap().success());
                let parts = RemoteRunParts {
                    run_id: "run".into(),
                    task: "task".into(),
                    git_lock: owner.lock_for(&clone).unwrap(),
                    role: load_role(&clone, "worker").unwrap(),
                    clone,
                    cancel: CancellationToken::new(),
                    sandbox: sandbox.clone(),
                    start_instructions: instructions.clone(),
                };
                RunContext::for_remote_worker(parts, &config, client.clone(), "model")
            })
            .collect();
        for (context, name) in contexts.iter().zip(["a", "b"]) {
            assert!(Arc::ptr_eq(&context.start_instructions, &instructions));
            let theirs = context.command_sandbox.as_ref().unwrap();
            let clone = machine.path().join(name).canonicalize().unwrap();
            assert_eq!(theirs.workspace_root(), clone);
            assert_eq!(theirs.is_enforced(), sandbox.is_enforced());
        }
    }
}
