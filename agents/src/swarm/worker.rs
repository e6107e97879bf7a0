//! A worker: one subtask in its own worktree, branch, context window, transcript and caps.
//!
//! The [`WorkerActor`] owns a task that runs the agent loop, so the actor stays responsive to
//! [`CancelWorker`] while the loop runs (`DESIGN.md` §8). When the loop ends the worker commits
//! its worktree and tells the coordinator a bounded [`WorkerReport`]. A panic in the task becomes
//! a failed report; it never takes the coordinator down.

use super::coordinator::{CoordinatorActor, Progress, WorkerDone};
use super::plan::Subtask;
use super::roles::RoleDefinition;
use super::run::RunContext;
use super::state::{MAX_REPORT_SUMMARY_CHARS, WorkerReport, WorkerStatus};
use crate::agent::gate::{PermissionGate, RulePersistence};
use crate::agent::prompt::{SystemPromptParams, build_system_prompt};
use crate::agent::{Agent, AgentEvent, AgentSettings, AgentStopReason};
use crate::tools::{FileClaims, ToolContext, ToolRegistry};
use crate::transcript::{TranscriptEntry, TranscriptWriter};
use ahelper_worktrees as git;
use futures::FutureExt;
use kameo::prelude::*;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;
use tokio_util::sync::CancellationToken;

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
            let started = Instant::now();
            let result = std::panic::AssertUnwindSafe(run_worker(
                args.run.clone(),
                args.spec,
                coordinator.clone(),
                task_cancel,
            ))
            .catch_unwind()
            .await;
            let (status, report) = match result {
                Ok(done) => done,
                Err(panic) => {
                    let message = panic
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_else(|| "unknown panic".into());
                    tracing::error!(worker = index, %message, "worker panicked");
                    (
                        WorkerStatus::Failed,
                        WorkerReport {
                            stop_reason: "error".into(),
                            error: Some(format!("worker crashed: {message}")),
                            duration_ms: started.elapsed().as_millis() as u64,
                            ..Default::default()
                        },
                    )
                }
            };
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

fn bounded_summary(text: &str) -> String {
    let text = text.trim();
    if text.chars().count() <= MAX_REPORT_SUMMARY_CHARS {
        return text.to_string();
    }
    let mut s: String = text.chars().take(MAX_REPORT_SUMMARY_CHARS - 60).collect();
    s.push_str("\n[… summary cut; the full text is in the worker's transcript]");
    s
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

async fn run_worker(
    run: Arc<RunContext>,
    spec: WorkerSpec,
    coordinator: ActorRef<CoordinatorActor>,
    cancel: CancellationToken,
) -> (WorkerStatus, WorkerReport) {
    let started = Instant::now();
    let index = spec.index;
    let progress = |status: WorkerStatus| Progress::Status { index, status };
    let failed = |error: String| {
        (
            WorkerStatus::Failed,
            WorkerReport {
                stop_reason: "error".into(),
                error: Some(error),
                duration_ms: started.elapsed().as_millis() as u64,
                ..Default::default()
            },
        )
    };

    // 1. The worktree. A failure is an isolation failure: never fall back to the user's checkout.
    let worktree = {
        let run = run.clone();
        let spec = spec.clone();
        tokio::task::spawn_blocking(move || {
            if let Some(parent) = spec.worktree.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
            }
            let existing = git::list_worktrees(&run.repo_root)
                .map_err(|e| e.to_string())?
                .into_iter()
                .find(|w| w.branch.as_deref() == Some(spec.branch.as_str()));
            if let Some(w) = existing {
                return Ok(w.path);
            }
            let branch_exists = git::branch_tip(&run.repo_root, &spec.branch).is_ok();
            let info = if branch_exists && spec.resume {
                git::resume_worktree(&run.git_lock, &run.repo_root, &spec.worktree, &spec.branch)
            } else {
                git::create_worktree(
                    &run.git_lock,
                    &run.repo_root,
                    &spec.worktree,
                    &spec.branch,
                    spec.start_commit,
                )
            }
            .map_err(|e| e.to_string())?;
            Ok::<PathBuf, String>(info.path)
        })
        .await
        .unwrap_or_else(|e| Err(format!("worktree task failed: {e}")))
    };
    let worktree = match worktree {
        Ok(w) => w,
        Err(e) => return failed(format!("could not create the worktree: {e}")),
    };

    // 2. The agent, bound to the worktree.
    let mut tool_context = match ToolContext::new(&worktree) {
        Ok(c) => c,
        Err(e) => return failed(format!("worktree {} is unusable: {e}", worktree.display())),
    };
    tool_context
        .env
        .insert("AHELPER_RUN_ID".into(), run.run_id.clone());
    tool_context
        .env
        .insert("AHELPER_WORKER_ID".into(), spec.id.clone());
    tool_context.claims = Some(FileClaims {
        map: run.claims.clone(),
        owner: spec.id.clone(),
    });
    tool_context.max_output_chars = run.agent_limits.max_tool_output_chars;
    tool_context.redactor = run.redactor.clone();
    if let Some(sandbox) = &run.command_sandbox {
        let mut sandbox = sandbox.for_workspace(&worktree);
        // A writable path that contains the user's checkout or the run's worktrees (typically
        // the temp dir, when the repository lives under /tmp) would let this worker write there:
        // drop it and give the worker a private temp dir instead.
        let base = spec
            .worktree
            .parent()
            .map(std::path::Path::to_path_buf)
            .unwrap_or_default();
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
            let private_tmp = base.join(format!(".tmp-{}", spec.id));
            if std::fs::create_dir_all(&private_tmp).is_ok() {
                let private_tmp = std::fs::canonicalize(&private_tmp).unwrap_or(private_tmp);
                tool_context
                    .env
                    .insert("TMPDIR".into(), private_tmp.display().to_string());
                sandbox.writable.push(private_tmp);
            }
        }
        tool_context.command_sandbox = Some(Arc::new(sandbox));
    }
    let mut tools = ToolRegistry::new();
    let standard = ToolRegistry::standard();
    for name in &spec.role.tools {
        if let Some(t) = standard.get(name) {
            tools.register(t.clone());
        }
    }
    let system_prompt = build_system_prompt(&SystemPromptParams {
        workspace_root: &tool_context.workspace_root,
        cwd: &tool_context.cwd,
        date: chrono::Local::now().format("%Y-%m-%d").to_string(),
        role_instructions: Some(&spec.role.instructions),
        tools: &tools,
    });
    let mut gate = PermissionGate::new(
        run.policy.clone(),
        run.prompter.clone(),
        RulePersistence::InMemory,
    );
    gate.requester = Some(format!("{} · {}", spec.id, spec.subtask.title));
    let settings = AgentSettings {
        max_turns: spec
            .role
            .max_turns
            .map_or(run.worker_max_turns, |m| m.min(run.worker_max_turns)),
        repeat_limit: run.agent_limits.repeat_limit,
        max_tool_output_chars: run.agent_limits.max_tool_output_chars,
        max_output_tokens: run.max_output_tokens,
        context_window: run.context_window,
        token_budget: None,
        deadline: run.deadline,
    };
    let mut agent = Agent::new(
        run.client.clone(),
        run.model.clone(),
        tools,
        gate,
        tool_context,
        system_prompt,
        settings,
    );
    let transcript_path = run.worker_transcript(&spec.id);
    let resumed_history = if spec.resume && transcript_path.exists() {
        crate::transcript::read_transcript(&transcript_path)
            .map(|lines| crate::transcript::history_from_transcript(&lines))
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    match TranscriptWriter::open(&transcript_path) {
        Ok(w) => {
            let mut w = w.with_redactor(run.redactor.clone());
            let _ = w.append(TranscriptEntry::SessionStart {
                session_id: format!("{}/{}", run.run_id, spec.id),
                workspace: worktree.display().to_string(),
                model: run.client.describe(),
            });
            agent.transcript = Some(w);
        }
        Err(e) => return failed(format!("cannot open the transcript: {e}")),
    }

    // 3. Progress events to the coordinator (not the text stream: that stays in the transcript).
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<AgentEvent>();
    agent.events = Some(tx);
    let forward = {
        let coordinator = coordinator.clone();
        tokio::spawn(async move {
            while let Some(event) = rx.recv().await {
                let update = match event {
                    AgentEvent::TurnStarted { turn } => Some(Progress::Turn { index, turn }),
                    AgentEvent::ToolCallStarted { name, input, .. } => Some(Progress::ToolCall {
                        index,
                        action: crate::swarm::describe_action(&name, &input),
                    }),
                    AgentEvent::Usage { total, .. } => Some(Progress::Usage { index, total }),
                    AgentEvent::PermissionDenied {
                        name,
                        input,
                        reason,
                        ..
                    } => Some(Progress::Denied {
                        index,
                        action: crate::swarm::describe_action(&name, &input),
                        reason,
                    }),
                    AgentEvent::Retry {
                        attempt,
                        max_attempts,
                        delay_ms,
                        reason,
                    } => Some(Progress::Retry {
                        index,
                        message: format!(
                            "{reason}; retrying in {} s (attempt {attempt}/{max_attempts})",
                            delay_ms.div_ceil(1000)
                        ),
                    }),
                    _ => None,
                };
                if let Some(u) = update {
                    let _ = coordinator.tell(u).await;
                }
            }
        })
    };
    let _ = coordinator.tell(progress(WorkerStatus::Running)).await;
    let outcome = if resumed_history.is_empty() {
        agent
            .run(&worker_prompt(&spec.subtask, &run.task), &cancel)
            .await
    } else {
        agent.history = resumed_history;
        agent
            .run(
                "The run was interrupted. Continue your subtask from where you left off; check the current state of the files first.",
                &cancel,
            )
            .await
    };
    agent.events = None;
    let _ = forward.await;
    drop(agent);

    // 4. Commit what the worktree has (a `wip` commit when cancelled or stopped early).
    let _ = coordinator.tell(progress(WorkerStatus::Committing)).await;
    let cancelled = outcome.stop_reason == AgentStopReason::Cancelled;
    let summary = bounded_summary(&outcome.final_text);
    let message = if outcome.stop_reason == AgentStopReason::Completed {
        format!(
            "{}\n\n{}\n\nahelper run {} worker {}",
            spec.subtask.title, summary, run.run_id, spec.id
        )
    } else {
        format!(
            "wip: {} ({})\n\n{}\n\nahelper run {} worker {}",
            spec.subtask.title,
            outcome.stop_reason.as_str(),
            summary,
            run.run_id,
            spec.id
        )
    };
    let commit_result = {
        let worktree = worktree.clone();
        let repo = run.repo_root.clone();
        let branch = spec.branch.clone();
        let start = spec.start_commit;
        tokio::task::spawn_blocking(move || {
            let commit = git::commit_all(&worktree, &message, None).map_err(|e| e.to_string())?;
            let tip = git::branch_tip(&repo, &branch).map_err(|e| e.to_string())?;
            let stats = git::diff_stats(&repo, start, tip).map_err(|e| e.to_string())?;
            Ok::<_, String>((commit, tip, stats))
        })
        .await
        .unwrap_or_else(|e| Err(format!("commit task failed: {e}")))
    };
    let mut report = WorkerReport {
        stop_reason: outcome.stop_reason.as_str().into(),
        summary,
        usage: outcome.usage,
        turns: outcome.turns,
        tool_calls: outcome.tool_calls,
        duration_ms: started.elapsed().as_millis() as u64,
        error: outcome.error.clone(),
        ..Default::default()
    };
    match commit_result {
        Ok((_, tip, stats)) => {
            if tip != spec.start_commit {
                report.commit = Some(tip.to_string());
            }
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
        _ if cancelled => WorkerStatus::Cancelled,
        AgentStopReason::Error => WorkerStatus::Failed,
        _ if report.commit.is_none() => WorkerStatus::NoChanges,
        _ => WorkerStatus::Finished,
    };
    (status, report)
}
