//! Setting a run up, planning, executing, resuming, and the final summary.

use super::coordinator::{CancelRun, CoordinatorActor, CoordinatorArgs};
use super::events::SwarmEvent;
use super::plan::{Plan, parse_plan};
use super::roles::{RoleDefinition, load_role};
use super::state::{RunRecord, RunStatus, WorkerRecord, WorkerStatus, run_dir};
use crate::agent::gate::{PermissionGate, RulePersistence};
use crate::agent::prompt::{SystemPromptParams, build_system_prompt};
use crate::agent::{Agent, AgentEvent, AgentSettings, AgentStopReason};
use crate::config::{AgentLimits, Config, EnvSnapshot};
use crate::model::{ModelClient, Usage};
use crate::permissions::{PermissionPolicy, Prompter};
use crate::tools::{ToolContext, ToolRegistry};
use crate::transcript::{TranscriptEntry, TranscriptWriter};
use ahelper_worktrees as git;
use dashmap::DashMap;
use kameo::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use tokio_util::sync::CancellationToken;

/// Errors before or during planning. (Worker failures are not errors of the run: they are
/// recorded per worker.)
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
    /// Planning failed after the retry.
    #[error("the coordinator could not produce a valid plan: {0}")]
    Plan(String),
    /// I/O or record problem.
    #[error("{0}")]
    Io(String),
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
/// `Arc`), never global.
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
    /// Output tokens per turn.
    pub max_output_tokens: u32,
    /// Context window.
    pub context_window: u32,
    /// Run-wide permission policy (answers `a`/`d` apply to every worker).
    pub policy: Arc<RwLock<PermissionPolicy>>,
    /// Who answers permission prompts (one at a time).
    pub prompter: Arc<dyn Prompter>,
    /// File claims (relative path → worker id).
    pub claims: Arc<DashMap<PathBuf, String>>,
    /// Workers at once.
    pub max_workers: usize,
    /// Turns per worker.
    pub worker_max_turns: u32,
    /// Agent limits.
    pub agent_limits: AgentLimits,
    /// Run-wide token budget.
    pub token_budget: u64,
    /// Run-wide deadline.
    pub deadline: Option<tokio::time::Instant>,
    /// Cancelled on Ctrl-C or a run-wide limit; workers use child tokens.
    pub cancel: CancellationToken,
    /// The worker role.
    pub worker_role: RoleDefinition,
    /// Event sink (UI).
    pub events: tokio::sync::mpsc::UnboundedSender<SwarmEvent>,
    /// Latest run record for renderers.
    pub snapshots: tokio::sync::watch::Sender<RunRecord>,
    /// Start instants of running workers (by plan index).
    pub worker_started: DashMap<usize, std::time::Instant>,
    events_log: std::sync::Mutex<Option<std::fs::File>>,
    /// Command sandbox for the repository root; each worker uses
    /// [`crate::sandbox_os::CommandSandbox::for_workspace`] with its worktree, so its commands
    /// can write only there (and in the temp dir and the user's listed paths), never in the
    /// main checkout or another worker's worktree.
    pub command_sandbox: Option<Arc<crate::sandbox_os::CommandSandbox>>,
    /// Secret values redacted from every worker's tool results, transcript and events, and
    /// from the run's events ([`RunContext::publish`]).
    pub redactor: crate::redact::Redactor,
}

impl RunContext {
    /// Sends an event to the UI and appends it to `runs/<run>/events.jsonl`, with known secret
    /// values redacted.
    pub fn publish(&self, event: SwarmEvent) {
        let event = self.redactor.redact_serde(event);
        if let Ok(mut guard) = self.events_log.lock()
            && let Some(file) = guard.as_mut()
        {
            use std::io::Write;
            let line = serde_json::json!({"ts": crate::transcript::now_rfc3339(), "event": &event});
            let _ = writeln!(file, "{line}");
        }
        let _ = self.events.send(event);
    }

    /// Transcript of a worker.
    pub fn worker_transcript(&self, worker: &str) -> PathBuf {
        run_dir(&self.repo_root, &self.run_id)
            .join("workers")
            .join(format!("{worker}.jsonl"))
    }
}

/// How the caller observes and steers a run.
pub struct RunIo {
    /// Events.
    pub events: tokio::sync::mpsc::UnboundedSender<SwarmEvent>,
    /// Prompter for permission requests (a [`crate::permissions::DenyPrompter`] without a
    /// terminal).
    pub prompter: Arc<dyn Prompter>,
    /// Cancel the run (first Ctrl-C).
    pub cancel: CancellationToken,
}

/// A run that exists on disk and is ready to plan or execute.
pub struct PreparedRun {
    /// The record (status `planning`).
    pub record: RunRecord,
    /// Repository facts.
    pub repo: git::RepoInfo,
    /// Uncommitted paths of the user's checkout (workers start without them unless
    /// `--include-uncommitted`).
    pub dirty: Vec<String>,
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

pub use ahelper_worktrees::{integration_branch, worker_branch};

/// Checks the repository, records the base commit, creates the run directory, the integration
/// branch and the record. The user's checkout, branch, index and files are not modified.
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
    let mut base = git::resolve_commit(&root, &base_ref)?;
    for run in RunRecord::list(&root) {
        if run.is_active() && run.base_commit == base.to_string() {
            return Err(SwarmError::AlreadyActive {
                run_id: run.run_id,
                pid: run.pid,
            });
        }
    }
    git::ensure_excluded(&root, ".ahelper/")?;
    let dirty = git::dirty_paths(&root)?;
    let run_id = uuid::Uuid::now_v7().to_string();
    let mut base_label = base_ref.clone();
    if options.include_uncommitted && !dirty.is_empty() {
        base = git::snapshot_uncommitted(
            &root,
            base,
            &format!("refs/ahelper/{run_id}/base"),
            &format!("ahelper: snapshot of uncommitted changes for run {run_id}"),
            None,
        )?;
        base_label = format!("{base_ref}+uncommitted");
    }
    // The integration branch is created when workers start (see `execute`), so a plan-only run
    // or a failed plan leaves no branch behind.
    let integration = integration_branch(&run_id);
    let now = crate::transcript::now_rfc3339();
    let mut record = RunRecord {
        run_id: run_id.clone(),
        task: task.to_string(),
        repo_root: root.clone(),
        base_commit: base.to_string(),
        base_ref: base_label,
        integration_branch: integration,
        status: RunStatus::Planning,
        created_at: now.clone(),
        updated_at: now,
        pid: std::process::id(),
        plan: None,
        workers: vec![],
        usage: Usage::default(),
        summary: None,
        error: None,
        permission_mode: Some(config.permissions.mode),
    };
    record.save().map_err(|e| SwarmError::Io(e.to_string()))?;
    Ok(PreparedRun {
        record,
        repo,
        dirty,
    })
}

/// Asks the coordinator model for a plan, re-asking once with the validation error.
///
/// The coordinator is an agent with read-only tools rooted at the repository; its conversation
/// goes to `runs/<run>/coordinator.jsonl`.
///
/// # Errors
/// [`SwarmError::Plan`] after two invalid answers or a model failure.
pub async fn plan(
    prepared: &mut PreparedRun,
    config: &Config,
    client: Arc<dyn ModelClient>,
    model: &str,
    io: &RunIo,
) -> Result<Plan, SwarmError> {
    let root = prepared.record.repo_root.clone();
    let role = load_role(&root, "coordinator")?;
    let standard = ToolRegistry::standard();
    let mut tools = ToolRegistry::new();
    for name in &role.tools {
        if let Some(t) = standard.get(name)
            && t.kind() == crate::tools::ToolKind::Read
        {
            tools.register(t.clone());
        }
    }
    let mut ctx =
        ToolContext::new(&root).map_err(|e| SwarmError::Io(format!("{}: {e}", root.display())))?;
    ctx.redactor = config.redactor.clone();
    let max_subtasks = config.swarm.max_subtasks;
    let instructions = format!(
        "{}\n\nLimits: at most {max_subtasks} subtasks; {} workers run at once.",
        role.instructions, config.swarm.max_workers
    );
    let system_prompt = build_system_prompt(&SystemPromptParams {
        workspace_root: &ctx.workspace_root,
        cwd: &ctx.cwd,
        date: chrono::Local::now().format("%Y-%m-%d").to_string(),
        role_instructions: Some(&instructions),
        tools: &tools,
    });
    let provider = config.provider().ok();
    let settings = AgentSettings {
        max_turns: role.max_turns.unwrap_or(12),
        repeat_limit: config.agent.repeat_limit,
        max_tool_output_chars: config.agent.max_tool_output_chars,
        max_output_tokens: provider.map_or(8_192, |p| p.max_output_tokens),
        context_window: provider.map_or(200_000, |p| p.context_window),
        token_budget: Some(config.swarm.token_budget),
        deadline: None,
    };
    let gate = PermissionGate::new(
        Arc::new(RwLock::new(config.permissions.clone())),
        io.prompter.clone(),
        RulePersistence::InMemory,
    );
    let mut agent = Agent::new(
        client.clone(),
        model.to_string(),
        tools,
        gate,
        ctx,
        system_prompt,
        settings,
    );
    let mut writer = TranscriptWriter::open(&prepared.record.coordinator_transcript())
        .map_err(|e| SwarmError::Io(e.to_string()))?
        .with_redactor(config.redactor.clone());
    let _ = writer.append(TranscriptEntry::SessionStart {
        session_id: format!("{}/coordinator", prepared.record.run_id),
        workspace: root.display().to_string(),
        model: client.describe(),
    });
    agent.transcript = Some(writer);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<AgentEvent>();
    agent.events = Some(tx);
    let events = io.events.clone();
    let forward = tokio::spawn(async move {
        while let Some(e) = rx.recv().await {
            match e {
                AgentEvent::ToolCallStarted { name, input, .. } => {
                    let _ = events.send(SwarmEvent::WorkerToolCall {
                        worker: "coordinator".into(),
                        action: super::describe_action(&name, &input),
                    });
                }
                AgentEvent::Retry {
                    attempt,
                    max_attempts,
                    delay_ms,
                    reason,
                } => {
                    let _ = events.send(SwarmEvent::WorkerRetry {
                        worker: "coordinator".into(),
                        message: format!(
                            "{reason}; retrying in {} s (attempt {attempt}/{max_attempts})",
                            delay_ms.div_ceil(1000)
                        ),
                    });
                }
                _ => {}
            }
        }
    });
    let mut prompt = format!(
        "Task for the swarm:\n{}\n\nExplore as needed, then answer with the JSON plan only.",
        prepared.record.task
    );
    let mut result = Err(SwarmError::Plan("no answer".into()));
    for attempt in 0..2 {
        let outcome = agent.run(&prompt, &io.cancel).await;
        prepared.record.usage.add(outcome.usage);
        if outcome.stop_reason == AgentStopReason::Cancelled {
            result = Err(SwarmError::Plan("cancelled".into()));
            break;
        }
        if outcome.stop_reason == AgentStopReason::Error {
            result = Err(SwarmError::Plan(
                outcome.error.unwrap_or_else(|| "model error".into()),
            ));
            break;
        }
        // A reply that stopped at the output-token limit (the loop's only `completed` outcome
        // with an error) is named as such: "no JSON found" would send the model and the user
        // looking for the wrong problem.
        let cut_off = outcome.stop_reason == AgentStopReason::Completed && outcome.error.is_some();
        let parsed = parse_plan(&outcome.final_text, max_subtasks).map_err(|e| {
            if cut_off {
                super::plan::PlanError::Truncated {
                    max_output_tokens: agent.settings.max_output_tokens,
                }
            } else {
                e
            }
        });
        match parsed {
            Ok(plan) => {
                result = Ok(plan);
                break;
            }
            Err(e) => {
                let last_error = e.to_string();
                let _ = io.events.send(SwarmEvent::PlanRejected {
                    error: last_error.clone(),
                });
                if attempt == 0 {
                    prompt = format!(
                        "Your plan was rejected: {last_error}\nAnswer again with only the corrected JSON plan, nothing else."
                    );
                }
                result = Err(SwarmError::Plan(match e {
                    super::plan::PlanError::Truncated { max_output_tokens } => format!(
                        "the plan was cut off by the output-token limit ({max_output_tokens} \
                         tokens); raise `max_output_tokens` in .ahelper/config.toml (e.g. 2048) \
                         or give a smaller task"
                    ),
                    _ => last_error.clone(),
                }));
            }
        }
    }
    agent.events = None;
    drop(agent);
    let _ = forward.await;
    match result {
        Ok(plan) => {
            prepared.record.plan = Some(plan.clone());
            prepared.record.workers = worker_records(&prepared.record, &plan, config);
            prepared.record.status = RunStatus::Planned;
            prepared
                .record
                .save()
                .map_err(|e| SwarmError::Io(e.to_string()))?;
            let _ = io.events.send(SwarmEvent::PlanReady { plan: plan.clone() });
            Ok(plan)
        }
        Err(e) => {
            prepared.record.status = RunStatus::Failed;
            prepared.record.error = Some(e.to_string());
            let _ = prepared.record.save();
            Err(e)
        }
    }
}

fn worker_records(record: &RunRecord, plan: &Plan, config: &Config) -> Vec<WorkerRecord> {
    let env = EnvSnapshot::capture();
    let base = worktree_base(config, &env, &record.repo_root, &record.run_id);
    plan.subtasks
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let id = format!("w{}", i + 1);
            WorkerRecord {
                branch: worker_branch(&record.run_id, &id),
                worktree: base.join(&id),
                id,
                subtask_id: s.id.clone(),
                title: s.title.clone(),
                status: WorkerStatus::Queued,
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
                denied: vec![],
            }
        })
        .collect()
}

/// Runs the workers of a planned (or interrupted) run to the end and returns the final record.
/// Cancelling `io.cancel` stops scheduling, cancels running workers (they commit `wip`), and
/// returns once every worker has reported.
///
/// # Errors
/// [`SwarmError`] when the run cannot start (roles, git lock).
pub async fn execute(
    mut record: RunRecord,
    config: &Config,
    client: Arc<dyn ModelClient>,
    model: &str,
    io: RunIo,
    snapshots: tokio::sync::watch::Sender<RunRecord>,
) -> Result<RunRecord, SwarmError> {
    let root = record.repo_root.clone();
    let git_lock = Arc::new(git::RepoLock::new(&root)?);
    if git::branch_tip(&root, &record.integration_branch).is_err() {
        let base = git::Oid::from_str(&record.base_commit).map_err(|e| {
            SwarmError::Io(format!(
                "run {} has an invalid base commit: {e}",
                record.run_id
            ))
        })?;
        git::create_branch(&root, &record.integration_branch, base)?;
    }
    let worker_role = load_role(&root, "worker")?;
    let provider = config.provider().ok();
    let events_path = run_dir(&root, &record.run_id).join("events.jsonl");
    let events_log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&events_path)
        .ok();
    let already_used = record.usage.input_tokens + record.usage.output_tokens;
    let run = Arc::new(RunContext {
        run_id: record.run_id.clone(),
        task: record.task.clone(),
        repo_root: root.clone(),
        git_lock,
        client,
        model: model.to_string(),
        max_output_tokens: provider.map_or(8_192, |p| p.max_output_tokens),
        context_window: provider.map_or(200_000, |p| p.context_window),
        policy: Arc::new(RwLock::new(config.permissions.clone())),
        prompter: io.prompter.clone(),
        claims: Arc::new(DashMap::new()),
        max_workers: config.swarm.max_workers,
        worker_max_turns: config.swarm.worker_max_turns,
        agent_limits: config.agent.clone(),
        token_budget: config.swarm.token_budget.max(already_used + 1),
        deadline: Some(
            tokio::time::Instant::now() + std::time::Duration::from_secs(config.swarm.time_limit_s),
        ),
        cancel: CancellationToken::new(),
        worker_role,
        events: io.events.clone(),
        snapshots,
        worker_started: DashMap::new(),
        events_log: std::sync::Mutex::new(events_log),
        command_sandbox: Some(Arc::new(crate::sandbox_os::CommandSandbox::new(
            &config.sandbox,
            &root,
        ))),
        redactor: config.redactor.clone(),
    });
    // Workers that were mid-way when the run stopped start again from their branches.
    for w in &mut record.workers {
        if !w.status.is_terminal() {
            w.status = WorkerStatus::Queued;
        }
    }
    run.publish(SwarmEvent::RunStarted {
        run_id: record.run_id.clone(),
        base_commit: record.base_commit.clone(),
        integration_branch: record.integration_branch.clone(),
    });
    let (done_tx, done_rx) = tokio::sync::oneshot::channel();
    let coordinator = CoordinatorActor::spawn_with_mailbox(
        CoordinatorArgs {
            run: run.clone(),
            record: record.clone(),
            done: done_tx,
        },
        kameo::mailbox::unbounded(),
    );
    let cancel_watch = {
        let coordinator = coordinator.clone();
        let cancel = io.cancel.clone();
        tokio::spawn(async move {
            cancel.cancelled().await;
            let _ = coordinator
                .tell(CancelRun {
                    reason: "cancelled by the user (Ctrl-C)".into(),
                })
                .await;
        })
    };
    let deadline_watch = {
        let coordinator = coordinator.clone();
        let deadline = run.deadline;
        tokio::spawn(async move {
            if let Some(d) = deadline {
                tokio::time::sleep_until(d).await;
                let _ = coordinator
                    .tell(CancelRun {
                        reason: "the run's wall-clock limit was reached".into(),
                    })
                    .await;
            }
        })
    };
    let final_record = match done_rx.await {
        Ok(r) => r,
        Err(_) => {
            let mut r = RunRecord::load(&root, &record.run_id).unwrap_or(record);
            r.status = RunStatus::Failed;
            r.error = Some("the coordinator stopped unexpectedly".into());
            let _ = r.save();
            r
        }
    };
    cancel_watch.abort();
    deadline_watch.abort();
    let _ = coordinator.stop_gracefully().await;
    run.publish(SwarmEvent::RunFinished {
        record: Box::new(final_record.clone()),
    });
    Ok(final_record)
}

/// The summary printed at the end of a run: per worker what happened, the integration branch,
/// and exactly what to run next (conflicts, cancelled workers, cleanup).
pub fn final_summary(record: &RunRecord) -> String {
    let mut s = String::new();
    let count = |st: WorkerStatus| record.workers.iter().filter(|w| w.status == st).count();
    s.push_str(&format!(
        "Run {} {} — {} merged, {} conflict, {} failed, {} cancelled, {} no changes, {} skipped of {} subtasks; {} tokens in / {} out.\n",
        record.run_id,
        record.status.as_str(),
        count(WorkerStatus::Merged),
        count(WorkerStatus::Conflict),
        count(WorkerStatus::Failed),
        count(WorkerStatus::Cancelled),
        count(WorkerStatus::NoChanges),
        count(WorkerStatus::Skipped),
        record.workers.len(),
        record.usage.input_tokens,
        record.usage.output_tokens,
    ));
    if let Some(e) = &record.error {
        s.push_str(&format!("Stopped: {e}\n"));
    }
    for w in &record.workers {
        let files = w
            .report
            .as_ref()
            .map(|r| r.files_changed.len())
            .unwrap_or(0);
        let (ins, del) = w
            .report
            .as_ref()
            .map(|r| (r.insertions, r.deletions))
            .unwrap_or((0, 0));
        s.push_str(&format!(
            "  {} {:<11} {} — {files} files, +{ins} -{del}\n",
            w.id,
            w.status.label(),
            w.title
        ));
        if let Some(err) = w.report.as_ref().and_then(|r| r.error.as_ref()) {
            s.push_str(&format!("      error: {err}\n"));
        }
        if !w.denied.is_empty() {
            let shown: Vec<&str> = w.denied.iter().take(5).map(String::as_str).collect();
            s.push_str(&format!(
                "      {} tool call(s) refused by permissions: {}{}\n",
                w.denied.len(),
                shown.join("; "),
                if w.denied.len() > 5 { "; …" } else { "" }
            ));
        }
    }
    if record.workers.iter().any(|w| !w.denied.is_empty()) {
        s.push_str(
            "Refused calls: allow what the workers need with rules in .ahelper/config.toml (e.g. `run_command(cargo test:*)`) or --permission-mode accept-edits, or run in a terminal to answer prompts.\n",
        );
    }
    s.push_str(&format!(
        "Integration branch: {} (base {}).\n",
        record.integration_branch,
        &record.base_commit[..record.base_commit.len().min(12)]
    ));
    for w in record
        .workers
        .iter()
        .filter(|w| w.status == WorkerStatus::Conflict)
    {
        let files: Vec<&str> = w.conflicts.iter().map(|c| c.path.as_str()).collect();
        s.push_str(&format!(
            "Conflict: {} ({}) conflicts in {}. Both branches are kept. To resolve:\n  git checkout {} && git merge {}\n  # fix the files, then: git add -A && git commit\n",
            w.id,
            w.branch,
            files.join(", "),
            record.integration_branch,
            w.branch
        ));
    }
    if record
        .workers
        .iter()
        .any(|w| w.status == WorkerStatus::Cancelled || !w.status.is_terminal())
    {
        s.push_str(&format!(
            "Resume with: ahelper swarm resume {}\n",
            record.run_id
        ));
    }
    if record
        .workers
        .iter()
        .any(|w| w.status == WorkerStatus::Merged)
    {
        s.push_str(&format!(
            "Review with: git diff {}...{}   Apply with: git merge {}\n",
            &record.base_commit[..record.base_commit.len().min(12)],
            record.integration_branch,
            record.integration_branch
        ));
    }
    s.push_str(&format!(
        "Logs: ahelper swarm logs {} [worker]   Clean up: ahelper swarm clean {}\n",
        record.run_id, record.run_id
    ));
    s
}
