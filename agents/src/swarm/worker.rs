//! A worker: one subtask in its own worktree, branch, context window, transcript and caps.
//!
//! The [`WorkerActor`] owns a task that runs the agent loop, so the actor stays responsive to
//! [`CancelWorker`] while the loop runs. The task's steps: create the worktree → bind the tool
//! context to it → prepare a new worktree ([`super::setup`]: `.worktreeinclude`, `[swarm] setup`)
//! → build the agent → run it while forwarding its progress to the coordinator (the first
//! model request goes out while the worktree is being made when nothing before the reply needs
//! it: `worker/start.rs`) →
//! commit the worktree and report. When the loop ends the worker tells the coordinator a bounded
//! [`WorkerReport`]. A panic in the task becomes a failed report; it never takes the coordinator
//! down.

use super::cleanup::{private_tmp_dir, worktree_base_of};
use super::coordinator::{CoordinatorActor, Progress, WorkerDone};
use super::plan::Subtask;
use super::roles::RoleDefinition;
use super::run::RunContext;
use super::setup::SetupFailure;
use super::spares::{LeaseError, WorktreeLease};
use super::state::{FixRound, MAX_REPORT_SUMMARY_CHARS, WorkerReport, WorkerStatus};
use super::verification::RunVerifier;
use super::{GitTaskError, create_parent_dir, git_task};
use crate::agent::gate::{PermissionGate, RulePersistence};
use crate::agent::prompt::ProjectInstructions;
use crate::agent::{
    Agent, AgentEvent, AgentOutcome, AgentSettings, AgentStopReason, WorkspaceReady,
};
use crate::mcp::McpHub;
use crate::sandbox_os::CommandSandbox;
use crate::tools::{FileClaims, ToolContext, ToolRegistry, WorkspaceError};
use crate::transcript::TranscriptError;
use crate::verify::compare;
use crate::verify::prompts::{WorkerFixInput, worker_fix_prompt};
use ahelper_worktrees as git;
use futures::FutureExt;
use kameo::prelude::*;
pub use start::StartInstructions;
use start::{Ran, WorkerSteps, early_start};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio_util::sync::CancellationToken;

mod start;

/// Everything a worker starts with.
#[derive(Clone)]
pub struct WorkerSpec {
    /// Index in the plan.
    pub index: usize,
    /// Worker id (`w1`, …).
    pub id: String,
    /// The subtask.
    pub subtask: Subtask,
    /// Branch name.
    pub branch: String,
    /// Worktree directory.
    pub worktree: PathBuf,
    /// Commit to start from (ignored when resuming an existing branch).
    pub start_commit: git::Oid,
    /// Continue an earlier attempt: reuse branch and transcript.
    pub resume: bool,
    /// The worker role.
    pub role: RoleDefinition,
    /// Its transcript (`runs/<run>/workers/<id>.jsonl`).
    pub transcript: PathBuf,
}

/// The worker actor.
pub struct WorkerActor {
    cancel: CancellationToken,
    id: String,
}

/// Arguments of [`WorkerActor`].
pub struct WorkerArgs {
    /// Run-wide context.
    pub run: Arc<RunContext>,
    /// This worker.
    pub spec: WorkerSpec,
    /// Who to report to.
    pub coordinator: ActorRef<CoordinatorActor>,
    /// Its hold on its worktree directory and the spare it may recycle
    /// ([`super::spares::WorktreePool::lease`]); held until the worker reports. `Ok(None)`:
    /// no pool (the worktree is created as usual).
    pub lease: Result<Option<WorktreeLease>, LeaseError>,
}

impl Actor for WorkerActor {
    type Args = WorkerArgs;
    type Error = kameo::error::Infallible;

    async fn on_start(args: Self::Args, actor_ref: ActorRef<Self>) -> Result<Self, Self::Error> {
        let cancel = args.run.cancel.child_token();
        let id = args.spec.id.clone();
        let task_cancel = cancel.clone();
        tokio::spawn(async move {
            let index = args.spec.index;
            let coordinator = args.coordinator.clone();
            let sink = ProgressSink::Coordinator(coordinator.clone());
            let (status, report) = run_leased_worker_catching_panics(
                args.run,
                args.spec,
                sink,
                task_cancel,
                args.lease,
            )
            .await;
            let _ = coordinator
                .tell(WorkerDone {
                    index,
                    status,
                    report,
                })
                .await;
            let _ = actor_ref.stop_gracefully().await;
        });
        Ok(WorkerActor { cancel, id })
    }
}

/// Asks a worker to stop its agent loop; it then commits what it has (`wip`) and reports.
#[derive(Debug, Clone, Copy)]
pub struct CancelWorker;

impl Message<CancelWorker> for WorkerActor {
    type Reply = ();
    async fn handle(&mut self, _msg: CancelWorker, _ctx: &mut Context<Self, Self::Reply>) {
        tracing::info!(worker = %self.id, "cancel requested");
        self.cancel.cancel();
    }
}

/// Where a worker's progress goes.
#[derive(Clone)]
pub enum ProgressSink {
    /// The coordinator actor of this process (a local worker).
    Coordinator(ActorRef<CoordinatorActor>),
    /// A channel (a worker run for a coordinator elsewhere, which forwards it).
    Channel(tokio::sync::mpsc::UnboundedSender<Progress>),
}

impl ProgressSink {
    /// Delivers `progress`; a receiver that is gone is ignored (the run is over).
    pub async fn tell(&self, progress: Progress) {
        match self {
            ProgressSink::Coordinator(coordinator) => {
                let _ = coordinator.tell(progress).await;
            }
            ProgressSink::Channel(channel) => {
                let _ = channel.send(progress);
            }
        }
    }
}

/// Why a worker failed before its agent loop could run. Its message goes into the report.
#[derive(Debug, thiserror::Error)]
pub enum WorkerFailure {
    /// The worktree could not be created. A failure is an isolation failure: the worker never
    /// falls back to the user's checkout.
    #[error("could not create the worktree: {0}")]
    Worktree(#[source] GitTaskError),
    /// The worktree cannot be the tools' workspace.
    #[error("worktree {} is unusable: {}", .0.path.display(), .0.source)]
    Workspace(#[source] WorkspaceError),
    /// The transcript could not be opened.
    #[error("cannot open the transcript: {0}")]
    Transcript(#[source] TranscriptError),
    /// The new worktree could not be prepared (`.worktreeinclude`, `[swarm] setup`).
    #[error("{0}")]
    Setup(#[source] SetupFailure),
    /// The marker of its recycled worktree could not be flushed to disk (the disk failed); its
    /// work stays uncommitted in the worktree, for `swarm resume`.
    #[error("could not flush the worktree's marker to disk: {0}")]
    Marker(#[source] GitTaskError),
    /// Its worktree directory is held by someone else (never shared while in use).
    #[error("{0}")]
    Lease(#[source] LeaseError),
}

/// The prompt a worker starts with.
pub fn worker_prompt(subtask: &Subtask, task: &str) -> String {
    format!(
        "Your subtask `{}`: {}\n\n{}\n\nScope — the files you are expected to touch: {}\n\n\
         For context, the whole swarm works on: {}\n\n\
         Work in your current directory. When you are done, stop calling tools and reply with a short summary.",
        subtask.id,
        subtask.title,
        subtask.instructions,
        subtask.scope.join(", "),
        task
    )
}

/// The prompt a resumed worker continues its conversation with.
pub const RESUME_PROMPT: &str = "The run was interrupted. Continue your subtask from where you left off; check the current state of the files first.";

/// Runs worker `spec` to its end (worktree, agent loop, commit, self-check) and returns its final
/// state and report; a panic becomes a failed report. Progress goes to `coordinator`.
pub async fn run_worker_catching_panics(
    run: Arc<RunContext>,
    spec: WorkerSpec,
    coordinator: ProgressSink,
    cancel: CancellationToken,
) -> (WorkerStatus, WorkerReport) {
    run_leased_worker_catching_panics(run, spec, coordinator, cancel, Ok(None)).await
}

/// [`run_worker_catching_panics`] for a local worker holding `lease` (its worktree directory,
/// maybe a spare to recycle into it), held until the worker ends.
pub async fn run_leased_worker_catching_panics(
    run: Arc<RunContext>,
    spec: WorkerSpec,
    coordinator: ProgressSink,
    cancel: CancellationToken,
    lease: Result<Option<WorktreeLease>, LeaseError>,
) -> (WorkerStatus, WorkerReport) {
    let started = Instant::now();
    let index = spec.index;
    let worker = run_worker(run, spec, coordinator, cancel, (started, lease));
    let result = std::panic::AssertUnwindSafe(worker).catch_unwind().await;
    result.unwrap_or_else(|panic| {
        let message = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "unknown panic".into());
        tracing::error!(worker = index, %message, "worker panicked");
        (
            WorkerStatus::Failed,
            WorkerReport::failed(format!("worker crashed: {message}"), elapsed_ms(started)),
        )
    })
}

async fn run_worker(
    run: Arc<RunContext>,
    spec: WorkerSpec,
    coordinator: ProgressSink,
    cancel: CancellationToken,
    (started, lease): (Instant, Result<Option<WorktreeLease>, LeaseError>),
) -> (WorkerStatus, WorkerReport) {
    // Held to the end of this function: nobody else gets this worktree meanwhile.
    let mut lease = match lease {
        Ok(lease) => lease,
        Err(e) => return failed(WorkerFailure::Lease(e), started),
    };
    let steps = WorkerSteps {
        run: &run,
        spec: &spec,
        coordinator: &coordinator,
        cancel: &cancel,
    };
    let ran = match early_start(&run, &spec).await {
        Some(instructions) => steps.run_while_made(lease.as_mut(), instructions).await,
        None => steps.run_once_made(lease.as_mut()).await,
    };
    let Ran {
        worktree,
        mut agent,
        mcp,
        marker,
        outcome,
    } = match ran {
        Ok(ran) => ran,
        Err(failure) => return failed(failure, started),
    };
    if let Err(failure) = marker_flushed(marker).await {
        mcp.shutdown().await;
        return failed(failure, started);
    }
    let _ = coordinator
        .tell(Progress::Status {
            index: spec.index,
            status: WorkerStatus::Committing,
        })
        .await;
    let done = commit_and_report(&run, &spec, &worktree, outcome, started).await;
    let done = match &run.verifier {
        Some(verifier) if done.0 == WorkerStatus::Finished => {
            let checker = SelfCheck {
                run: &run,
                spec: &spec,
                worktree: &worktree,
                verifier,
                coordinator: &coordinator,
                cancel: &cancel,
                started,
            };
            checker.run(&mut agent, done.1).await
        }
        _ => done,
    };
    // The worker's servers end with it (after its last fix round).
    mcp.shutdown().await;
    done
}

/// Waits for the worktree marker's flush started after recycling (none: it was on disk already).
async fn marker_flushed(
    flush: Option<tokio::task::JoinHandle<Result<(), git::GitError>>>,
) -> Result<(), WorkerFailure> {
    let Some(flush) = flush else {
        return Ok(());
    };
    match flush.await {
        Ok(flushed) => flushed.map_err(|e| WorkerFailure::Marker(e.into())),
        Err(e) => Err(WorkerFailure::Marker(e.into())),
    }
}

fn failed(failure: WorkerFailure, started: Instant) -> (WorkerStatus, WorkerReport) {
    (
        WorkerStatus::Failed,
        WorkerReport::failed(failure.to_string(), elapsed_ms(started)),
    )
}

/// Whether worker `spec` starts the run's MCP servers: the run has some and its role offers an
/// MCP tool.
fn uses_mcp_servers(run: &RunContext, spec: &WorkerSpec) -> bool {
    !run.mcp_servers.is_empty() && spec.role.tools.iter().any(|t| t.starts_with("mcp__"))
}

/// Step 2b: the run's MCP servers, started for this worker with its worktree as working
/// directory and root, in the worker's command sandbox (none when the role offers no MCP
/// tool). A server that does not start — the workspace files it runs differ in this worktree
/// from the approved ones (another worker changed them), or it fails — is a notice for the
/// user; the worker goes on without its tools.
async fn start_mcp_servers(
    run: &RunContext,
    spec: &WorkerSpec,
    worktree: &Path,
    tool_context: &ToolContext,
) -> McpHub {
    if !uses_mcp_servers(run, spec) {
        return McpHub::default();
    }
    let sandbox = crate::mcp::ServerSandbox {
        policy: tool_context.command_sandbox.clone(),
        read_deny: run
            .policy
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .rules
            .deny
            .clone(),
    };
    let hub = McpHub::start(run.mcp_servers.clone(), worktree, &sandbox).await;
    for failure in hub.startup_failures() {
        run.publish(super::events::SwarmEvent::Notice {
            message: format!(
                "{}: {failure}; it works without that server's tools",
                spec.id
            ),
        });
    }
    hub
}

/// The worker's self-check: verify its committed worktree against the baseline; new failures go
/// back to the same agent (the failure output's head and tail) for at most
/// `worker_fix_rounds` more rounds, each committed and verified again.
struct SelfCheck<'a> {
    run: &'a RunContext,
    spec: &'a WorkerSpec,
    worktree: &'a Path,
    verifier: &'a RunVerifier,
    coordinator: &'a ProgressSink,
    cancel: &'a CancellationToken,
    started: Instant,
}

impl SelfCheck<'_> {
    async fn phase(&self, status: WorkerStatus, fix_round: Option<FixRound>) {
        let _ = self
            .coordinator
            .tell(Progress::Phase {
                index: self.spec.index,
                status,
                fix_round,
            })
            .await;
    }

    async fn run(
        &self,
        agent: &mut Agent,
        mut report: WorkerReport,
    ) -> (WorkerStatus, WorkerReport) {
        let max_rounds = self.run.worker_fix_rounds;
        loop {
            self.phase(WorkerStatus::Verifying, None).await;
            let checked = self
                .verifier
                .verify_worktree(self.worktree, self.cancel)
                .await;
            // Judged against the baseline, which may still be running (it started before
            // planning; the worker did not wait for it to start).
            let baseline = self.run.wait_for_baseline().await;
            let verdict = compare(baseline.as_ref(), &checked);
            report.verification = Some(verdict.render(&self.verifier.command));
            if !verdict.blocks_merge() {
                let judged = (&checked, &verdict, baseline.as_ref());
                remember_verdict(self.run, self.verifier, self.worktree, judged).await;
            }
            // Fix rounds stay inside the worker's caps: its turns so far count.
            let caps_left = report.turns < agent.settings().max_turns;
            if !verdict.blocks_merge()
                || report.fix_rounds >= max_rounds
                || !caps_left
                || self.cancel.is_cancelled()
            {
                return (WorkerStatus::Finished, report);
            }
            report.fix_rounds += 1;
            let round = FixRound {
                attempt: report.fix_rounds,
                of: max_rounds,
            };
            self.phase(WorkerStatus::Fixing, Some(round)).await;
            let prompt = worker_fix_prompt(&WorkerFixInput {
                run: &checked,
                verdict: &verdict,
                round: round.attempt,
                max_rounds,
            });
            let outcome = agent.run(&prompt, self.cancel).await;
            let (status, next) =
                commit_and_report(self.run, self.spec, self.worktree, outcome, self.started).await;
            report = merged_report(report, next);
            if status != WorkerStatus::Finished {
                return (status, report);
            }
        }
    }
}

/// Keeps a passing self-check's verdict in the run's cache ([`super::merge_policy`]) for the
/// worktree's committed tree, so a merge candidate with that tree (a fast-forward onto the
/// worker's commit) is not verified again. Only when the worktree is exactly its commit: no
/// uncommitted change and no ignored file (a build cache or a file the model wrote that
/// `.gitignore` hides could have made the tests pass where a clean checkout would not).
async fn remember_verdict(
    run: &RunContext,
    verifier: &RunVerifier,
    worktree: &Path,
    (checked, verdict, baseline): (
        &crate::verify::VerifyRun,
        &crate::verify::Verdict,
        Option<&crate::verify::VerifyRun>,
    ),
) {
    if !matches!(checked.outcome, crate::verify::VerifyOutcome::Passed) {
        return;
    }
    let dir = worktree.to_path_buf();
    let tree = git_task(move || {
        let exact = git::dirty_paths(&dir)?.is_empty() && !git::has_ignored_files(&dir)?;
        let head = git::last_head_commit(&dir).filter(|_| exact);
        Ok(head.map(|commit| git::tree_of(&dir, commit)).transpose()?)
    })
    .await;
    let Ok(Some(tree)) = tree else { return };
    let key = super::merge_policy::VerdictKey::new(tree, &verifier.command, baseline);
    run.verdicts.insert(key, verdict);
}

/// The report after a fix round: the round's commit and diff stats, the summaries of both,
/// usage, turns and tool calls added up.
fn merged_report(before: WorkerReport, round: WorkerReport) -> WorkerReport {
    let mut usage = before.usage;
    usage.add(round.usage);
    let summary = if round.summary.is_empty() {
        before.summary.clone()
    } else {
        bounded_summary(&format!(
            "{}\n\nFix round {}: {}",
            before.summary, before.fix_rounds, round.summary
        ))
    };
    WorkerReport {
        summary,
        usage,
        turns: before.turns + round.turns,
        tool_calls: before.tool_calls + round.tool_calls,
        fix_rounds: before.fix_rounds,
        verification: before.verification,
        commit: round.commit.or(before.commit),
        ..round
    }
}

fn elapsed_ms(started: Instant) -> u64 {
    started.elapsed().as_millis() as u64
}

/// Step 1: the worktree on the worker's branch — the existing one when a worktree already has
/// the branch, the branch as it is when resuming, else a new branch at the start commit; with
/// whether it was created now (a new worktree is prepared by [`super::setup`]).
async fn create_worktree(
    run: &RunContext,
    spec: &WorkerSpec,
) -> Result<(PathBuf, bool), GitTaskError> {
    let repo = run.repo_root.clone();
    let lock = run.git_lock.clone();
    let spec = spec.clone();
    // Only a worktree at `<…>/<repo id>/<run id>/<worker>` is finished in place (an edited
    // run record must not point this at another worktree of the repository).
    let run_dir = Path::new(&super::run::repo_id(&repo)).join(&run.run_id);
    git_task(move || {
        create_parent_dir(&spec.worktree)?;
        let existing = git::list_worktrees(&repo)?
            .into_iter()
            .find(|w| w.branch.as_deref() == Some(spec.branch.as_str()));
        match existing {
            Some(w) if w.path.exists() => {
                let recorded = std::fs::canonicalize(&spec.worktree).ok();
                if !w.is_ours() && recorded.as_deref() == Some(w.path.as_path()) {
                    // A kill between registering it and recording its marker: its commit
                    // would be refused without the marker.
                    git::adopt_worktree(&lock, &repo, &w.path, &spec.branch)?;
                }
                sweep_leftover_temps(&w.path, &spec.id);
                return Ok((w.path, false));
            }
            // Its directory was deleted by hand: drop the stale registration, then rebuild the
            // worktree from the branch below (its `wip` commits included).
            Some(w) => super::cleanup::prune_registration(&lock, &repo, &w.path)?,
            None => {}
        }
        if let Some(path) = interrupted_spare(&repo, &spec.worktree, &run_dir)? {
            // A spare moved into place by a process killed before it checked out the branch.
            git::adopt_worktree(&lock, &repo, &path, &spec.branch)?;
            return Ok((path, true));
        }
        let branch_exists = git::branch_tip(&repo, &spec.branch).is_ok();
        let info = if branch_exists && spec.resume {
            git::resume_worktree(&lock, &repo, &spec.worktree, &spec.branch)?
        } else {
            git::create_worktree(
                &lock,
                &repo,
                &spec.worktree,
                &spec.branch,
                spec.start_commit,
            )?
        };
        Ok((info.path, true))
    })
    .await
}

/// The registered worktree at the worker's recorded path `worktree` (in a directory ending
/// with `run_dir`, `<repo id>/<run id>`) when its HEAD is detached: what a kill between moving
/// a spare there and pointing it at the worker's branch leaves.
fn interrupted_spare(
    repo: &Path,
    worktree: &Path,
    run_dir: &Path,
) -> Result<Option<PathBuf>, GitTaskError> {
    let Ok(recorded) = std::fs::canonicalize(worktree) else {
        return Ok(None);
    };
    if !recorded.parent().is_some_and(|p| p.ends_with(run_dir)) {
        return Ok(None);
    }
    Ok(git::list_worktrees(repo)?
        .into_iter()
        .find(|w| !w.is_main && w.branch.is_none() && w.path == recorded)
        .map(|w| w.path))
}

/// Removes the temp files an interrupted atomic write left in the existing worktree of worker
/// `id` (a run killed while a file tool wrote), before the worker works there again. A failure
/// is logged: its commit leaves such files out anyway.
fn sweep_leftover_temps(worktree: &std::path::Path, id: &str) {
    match git::sweep_writer_temps(worktree) {
        Ok(removed) if removed.is_empty() => {}
        Ok(removed) => tracing::info!(
            worker = id,
            ?removed,
            "removed leftover temporary files of interrupted writes"
        ),
        Err(e) => {
            tracing::warn!(worker = id, error = %e, "could not sweep leftover temporary files")
        }
    }
}

/// Step 2: tools rooted at the worktree, with the run and worker ids in their environment, the
/// run's file claims, and a command sandbox that may write only in this worktree.
fn bind_tool_context(
    run: &RunContext,
    spec: &WorkerSpec,
    mut tool_context: ToolContext,
) -> ToolContext {
    super::helpers::mark_commands(&mut tool_context, &run.run_id, &spec.id);
    tool_context.claims = Some(FileClaims {
        map: run.claims.clone(),
        owner: spec.id.clone(),
    });
    tool_context.max_output_chars = run.worker_settings.max_tool_output_chars;
    tool_context.redactor = run.redactor.clone();
    if let Some(sandbox) = &run.command_sandbox {
        let sandbox = worker_sandbox(sandbox, run, &spec.worktree, &spec.id, &mut tool_context);
        tool_context.command_sandbox = Some(Arc::new(sandbox));
    }
    tool_context
}

/// The run's sandbox re-rooted at the worktree. A writable path that contains the user's
/// checkout or the run's worktrees (typically the temp dir, when the repository lives under
/// /tmp) would let this worker write there: it is dropped and the worker gets a private temp
/// dir (`TMPDIR`) instead. Reads are confined too ([`confine_reads`]).
pub(super) fn worker_sandbox(
    run_sandbox: &CommandSandbox,
    run: &RunContext,
    worktree: &Path,
    id: &str,
    tool_context: &mut ToolContext,
) -> CommandSandbox {
    let mut sandbox = run_sandbox.for_workspace(&tool_context.workspace_root);
    let base = worktree_base_of(worktree);
    let protected = [
        std::fs::canonicalize(&run.repo_root).unwrap_or_else(|_| run.repo_root.clone()),
        std::fs::canonicalize(&base).unwrap_or(base.clone()),
    ];
    let workspace = tool_context.workspace_root.clone();
    let before = sandbox.writable.len();
    sandbox
        .writable
        .retain(|w| *w == workspace || !protected.iter().any(|p| p.starts_with(w)));
    if sandbox.writable.len() != before {
        let private_tmp = private_tmp_dir(&base, id);
        if std::fs::create_dir_all(&private_tmp).is_ok() {
            let private_tmp = std::fs::canonicalize(&private_tmp).unwrap_or(private_tmp);
            tool_context
                .env
                .insert("TMPDIR".into(), private_tmp.display().to_string());
            sandbox.writable.push(private_tmp);
        }
    }
    confine_reads(&mut sandbox, &protected[0], &base);
    tool_context.added_dirs = sandbox.added_dirs();
    sandbox
}

/// A worker's commands may not read the user's checkout (`repo_root`: uncommitted files,
/// other runs' records) nor the worktrees of this repository's runs (the directory above the
/// run's `base`) — except the worker's own worktree (writable, hence readable) and the
/// repository's `.git` directory, read-only: git in a linked worktree needs it.
fn confine_reads(sandbox: &mut CommandSandbox, repo_root: &Path, base: &Path) {
    let worktrees = base.parent().unwrap_or(base);
    let worktrees = std::fs::canonicalize(worktrees).unwrap_or(worktrees.to_path_buf());
    for denied in [repo_root.to_path_buf(), worktrees] {
        if !sandbox.read_denied.contains(&denied) {
            sandbox.read_denied.push(denied);
        }
    }
    let git_dir = repo_root.join(".git");
    sandbox
        .readable
        .push(std::fs::canonicalize(&git_dir).unwrap_or(git_dir));
}

/// Step 3: the agent — the role's tools (its MCP tools among them), the run-wide permission policy (prompts labelled with
/// the worker and its subtask), the run's worker limits capped by the role, the resumed history
/// when continuing, and the worker's transcript.
fn build_agent(
    run: &RunContext,
    spec: &WorkerSpec,
    tool_context: ToolContext,
    mcp: &McpHub,
    early: Option<(WorkspaceReady, Option<ProjectInstructions>)>,
) -> Result<Agent, WorkerFailure> {
    let mut gate = PermissionGate::new(
        run.policy.clone(),
        run.prompter.clone(),
        RulePersistence::InMemory,
    );
    gate.requester = Some(format!("{} · {}", spec.id, spec.subtask.title));
    let max_turns = run.worker_settings.max_turns;
    let settings = AgentSettings {
        max_turns: spec.role.max_turns.map_or(max_turns, |m| m.min(max_turns)),
        ..run.worker_settings.clone()
    };
    let history = if spec.resume && spec.transcript.exists() {
        crate::transcript::read_transcript(&spec.transcript)
            .map(|lines| crate::transcript::history_from_transcript(&lines))
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    let mut tools = ToolRegistry::standard().select(&spec.role.tools);
    for tool in mcp.tools_for_role(&spec.role.tools) {
        tools.register(tool);
    }
    let mut builder = Agent::builder(run.client.clone(), run.model.clone(), tool_context, gate);
    if let Some((ready, instructions)) = early {
        builder = builder
            .workspace_ready(ready)
            .project_instructions(instructions);
    }
    builder
        .tools(tools)
        .role_instructions(spec.role.instructions.clone())
        .subagent()
        .settings(settings)
        .history(history)
        .transcript(
            spec.transcript.clone(),
            format!("{}/{}", run.run_id, spec.id),
        )
        .build()
        .map_err(WorkerFailure::Transcript)
}

/// Step 4: runs the subtask (or continues a resumed conversation) while its progress goes to
/// the coordinator.
async fn run_agent(
    agent: &mut Agent,
    run: &RunContext,
    spec: &WorkerSpec,
    coordinator: &ProgressSink,
    cancel: &CancellationToken,
) -> AgentOutcome {
    let forward = tokio::spawn(forward_progress(
        agent.subscribe(),
        spec.index,
        agent.tool_context().workspace_root.clone(),
        coordinator.clone(),
    ));
    let _ = coordinator
        .tell(Progress::Status {
            index: spec.index,
            status: WorkerStatus::Running,
        })
        .await;
    let outcome = if agent.history().is_empty() {
        agent
            .run(&worker_prompt(&spec.subtask, &run.task), cancel)
            .await
    } else {
        agent.run(RESUME_PROMPT, cancel).await
    };
    agent.unsubscribe();
    let _ = forward.await;
    outcome
}

/// Progress events to the coordinator (not the text stream: that stays in the transcript).
/// After each command, the number of paths it left changed in the `worktree` too (`git
/// status`), so that edits made through commands are counted.
async fn forward_progress(
    mut events: UnboundedReceiver<AgentEvent>,
    index: usize,
    worktree: std::path::PathBuf,
    coordinator: ProgressSink,
) {
    while let Some(event) = events.recv().await {
        let command_done =
            matches!(&event, AgentEvent::ToolCallFinished { name, .. } if name == "run_command");
        if let Some(update) = progress_of(index, event) {
            let _ = coordinator.tell(update).await;
        }
        if command_done {
            let dir = worktree.clone();
            let dirty = tokio::task::spawn_blocking(move || ahelper_worktrees::dirty_paths(&dir));
            if let Ok(Ok(paths)) = dirty.await {
                let files = paths.len();
                let _ = coordinator.tell(Progress::Changed { index, files }).await;
            }
        }
    }
}

fn progress_of(index: usize, event: AgentEvent) -> Option<Progress> {
    let retry = event.retry_message();
    match event {
        AgentEvent::TurnStarted { turn } => Some(Progress::Turn { index, turn }),
        AgentEvent::ToolCallStarted { name, input, .. } => Some(Progress::ToolCall {
            index,
            action: super::describe_action(&name, &input),
        }),
        AgentEvent::ToolCallFinished { .. } => Some(Progress::ToolCallDone { index }),
        AgentEvent::Usage { total, .. } => Some(Progress::Usage { index, total }),
        AgentEvent::PermissionDenied {
            name,
            input,
            reason,
            allow_rule,
            ..
        } => Some(Progress::Denied {
            index,
            action: super::describe_action(&name, &input),
            reason,
            allow_rule,
        }),
        AgentEvent::Retry { .. } => retry.map(|message| Progress::Retry { index, message }),
        _ => None,
    }
}

/// Step 5: commits what the worktree has (a `wip` commit when cancelled or stopped early) and
/// reports: the bounded summary, the commit when anything changed, diff stats, usage.
async fn commit_and_report(
    run: &RunContext,
    spec: &WorkerSpec,
    worktree: &Path,
    outcome: AgentOutcome,
    started: Instant,
) -> (WorkerStatus, WorkerReport) {
    let summary = bounded_summary(&outcome.final_text);
    let message = commit_message(spec, &run.run_id, outcome.stop_reason, &summary);
    let committed = commit_worktree(run, spec, worktree, message).await;
    let mut report = WorkerReport {
        stop_reason: outcome.stop_reason,
        summary,
        usage: outcome.usage,
        turns: outcome.turns,
        tool_calls: outcome.tool_calls,
        duration_ms: elapsed_ms(started),
        error: outcome.error.clone(),
        ..Default::default()
    };
    match committed {
        Ok(git::Measured {
            tip,
            stats,
            hazards,
            ..
        }) => {
            if tip != spec.start_commit {
                report.commit = Some(tip.to_string());
            }
            report.hazards = hazards;
            report.out_of_scope =
                super::plan::outside_scope(&stats.files_changed, &spec.subtask.scope);
            report.files_changed = stats.files_changed;
            report.insertions = stats.insertions;
            report.deletions = stats.deletions;
        }
        Err(e) => {
            report.error = Some(format!(
                "could not commit the worktree {}: {e}",
                worktree.display()
            ));
            return (WorkerStatus::Failed, report);
        }
    }
    let status = match outcome.stop_reason {
        AgentStopReason::Cancelled => WorkerStatus::Cancelled,
        AgentStopReason::Error => WorkerStatus::Failed,
        _ if report.commit.is_none() => WorkerStatus::NoChanges,
        _ => WorkerStatus::Finished,
    };
    (status, report)
}

/// The commit message: the subtask title and the summary; `wip: … (<stop reason>)` when the
/// loop did not complete.
fn commit_message(spec: &WorkerSpec, run_id: &str, stop: AgentStopReason, summary: &str) -> String {
    let trailer = format!("ahelper run {run_id} worker {}", spec.id);
    if stop == AgentStopReason::Completed {
        format!("{}\n\n{summary}\n\n{trailer}", spec.subtask.title)
    } else {
        format!(
            "wip: {} ({})\n\n{summary}\n\n{trailer}",
            spec.subtask.title,
            stop.as_str()
        )
    }
}

/// Commits the worktree and measures the branch against the start commit: the branch tip, the
/// diff stats and the hazardous content it adds — one repository open and one tree diff
/// ([`git::commit_and_measure`]).
async fn commit_worktree(
    run: &RunContext,
    spec: &WorkerSpec,
    worktree: &Path,
    message: String,
) -> Result<git::Measured, GitTaskError> {
    let worktree = worktree.to_path_buf();
    let start = spec.start_commit;
    let limits = run.hazard_limits;
    git_task(move || {
        Ok(git::commit_and_measure(
            &worktree, start, &message, &limits,
        )?)
    })
    .await
}

/// The model's final text, cut to [`MAX_REPORT_SUMMARY_CHARS`] with a note.
fn bounded_summary(text: &str) -> String {
    let text = text.trim();
    if text.chars().count() <= MAX_REPORT_SUMMARY_CHARS {
        return text.to_string();
    }
    let (kept, _) = crate::text::clip(text, MAX_REPORT_SUMMARY_CHARS - 60);
    format!("{kept}\n[… summary cut; the full text is in the worker's transcript]")
}
