//! Helper agents of the merge queue: a `fixer` on a merge candidate that fails verification,
//! a `merger` on a textual conflict. Each runs in its own worktree on its own branch
//! (`ahelper/<run>/fix-<n>`, `ahelper/<run>/merge-<n>`) with its own transcript
//! (`runs/<run>/workers/<id>.jsonl`), built with [`crate::agent::AgentBuilder`] like a worker:
//! the role's tools, the run-wide permission policy, the run's worker limits capped by the role.

use super::coordinator::{CoordinatorActor, HelperUsage};
use super::roles::load_role;
use super::run::RunContext;
use super::state::{HelperRecord, HelperRole, MAX_REPORT_SUMMARY_CHARS, run_dir};
use super::worker::worker_sandbox;
use super::{GitTaskError, create_parent_dir, git_task};
use crate::agent::gate::{PermissionGate, RulePersistence};
use crate::agent::{Agent, AgentEvent, AgentOutcome, AgentSettings};
use crate::tools::{ToolContext, ToolRegistry};
use ahelper_worktrees as git;
use kameo::prelude::ActorRef;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::sync::mpsc::UnboundedReceiver;

/// Why a helper agent could not run.
#[derive(Debug, thiserror::Error)]
pub enum HelperFailure {
    /// Its worktree could not be created or its merge started.
    #[error("could not set up its worktree: {0}")]
    Worktree(#[from] GitTaskError),
    /// The role, the workspace or the transcript.
    #[error("could not build the agent: {0}")]
    Setup(String),
    /// The merger stopped with the conflict unresolved (markers left in a file).
    #[error("conflict markers are left in {0}")]
    Unresolved(String),
}

impl HelperRecord {
    /// A new helper `id` of `role` for `worker`, with its branch and worktree directory next
    /// to the run's worker worktrees.
    pub fn new(run: &RunContext, id: String, role: HelperRole, worker: &str, near: &Path) -> Self {
        let base = super::cleanup::worktree_base_of(near);
        HelperRecord {
            branch: git::worker_branch(&run.run_id, &id),
            worktree: base.join(&id),
            id,
            role,
            worker: worker.to_string(),
            summary: String::new(),
            verification: None,
            merged: false,
            usage: Default::default(),
        }
    }
}

/// Creates the helper's worktree on its branch at `start`.
///
/// # Errors
/// [`GitTaskError`] from the git layer.
pub async fn create_helper_worktree(
    run: &RunContext,
    helper: &HelperRecord,
    start: git::Oid,
) -> Result<PathBuf, GitTaskError> {
    let (lock, repo) = (run.git_lock.clone(), run.repo_root.clone());
    let (path, branch) = (helper.worktree.clone(), helper.branch.clone());
    git_task(move || {
        create_parent_dir(&path)?;
        Ok(git::create_worktree(&lock, &repo, &path, &branch, start)?.path)
    })
    .await
}

/// Runs the helper's agent (role `fixer` or `merger`) in `worktree` on `prompt` until it
/// stops; its summary (≤ 2,000 characters) and usage go into `helper`. Its token usage goes to
/// `coordinator` as it streams ([`HelperUsage`], after every model turn), so the run's totals
/// and budget count it live; every report has been sent when this returns.
///
/// # Errors
/// [`HelperFailure::Setup`] when the role, workspace or transcript is unusable.
pub async fn run_helper_agent(
    run: &RunContext,
    helper: &mut HelperRecord,
    worktree: &Path,
    prompt: &str,
    coordinator: &ActorRef<CoordinatorActor>,
) -> Result<AgentOutcome, HelperFailure> {
    let mut agent = helper_agent(run, helper, worktree)?;
    let forward = tokio::spawn(forward_usage(
        agent.subscribe(),
        helper.id.clone(),
        coordinator.clone(),
    ));
    let outcome = agent.run(prompt, &run.cancel.child_token()).await;
    agent.unsubscribe();
    drop(agent);
    let _ = forward.await;
    helper.summary = crate::text::clip(outcome.final_text.trim(), MAX_REPORT_SUMMARY_CHARS)
        .0
        .to_string();
    helper.usage = outcome.usage;
    Ok(outcome)
}

/// The helper's usage totals to the coordinator, one report per model turn.
async fn forward_usage(
    mut events: UnboundedReceiver<AgentEvent>,
    helper: String,
    coordinator: ActorRef<CoordinatorActor>,
) {
    while let Some(event) = events.recv().await {
        if let AgentEvent::Usage { total, .. } = event {
            let report = HelperUsage {
                helper: helper.clone(),
                total,
            };
            let _ = coordinator.tell(report).await;
        }
    }
}

/// Puts `AHELPER_RUN_ID` and `AHELPER_WORKER_ID` (the worker's or helper's id `agent_id`) in the
/// environment of the commands run through `tool_context`, so that a run's leftover processes
/// can be found by them.
pub(super) fn mark_commands(tool_context: &mut ToolContext, run_id: &str, agent_id: &str) {
    tool_context
        .env
        .insert(crate::process_sweep::RUN_VAR.into(), run_id.to_string());
    tool_context
        .env
        .insert("AHELPER_WORKER_ID".into(), agent_id.to_string());
}

fn helper_agent(
    run: &RunContext,
    helper: &HelperRecord,
    worktree: &Path,
) -> Result<Agent, HelperFailure> {
    let setup = |e: &dyn std::fmt::Display| HelperFailure::Setup(e.to_string());
    let role_name = match helper.role {
        HelperRole::Fixer => "fixer",
        HelperRole::Merger => "merger",
    };
    let role = load_role(&run.repo_root, role_name).map_err(|e| setup(&e))?;
    let mut tool_context = ToolContext::new(worktree).map_err(|e| setup(&e))?;
    mark_commands(&mut tool_context, &run.run_id, &helper.id);
    tool_context.max_output_chars = run.worker_settings.max_tool_output_chars;
    tool_context.redactor = run.redactor.clone();
    if let Some(sandbox) = &run.command_sandbox {
        let sandbox = worker_sandbox(sandbox, run, worktree, &helper.id, &mut tool_context);
        tool_context.command_sandbox = Some(Arc::new(sandbox));
    }
    let mut gate = PermissionGate::new(
        run.policy.clone(),
        run.prompter.clone(),
        RulePersistence::InMemory,
    );
    gate.requester = Some(format!("{} · {role_name} for {}", helper.id, helper.worker));
    let max_turns = run.worker_settings.max_turns;
    let settings = AgentSettings {
        max_turns: role.max_turns.map_or(max_turns, |m| m.min(max_turns)),
        ..run.worker_settings.clone()
    };
    let transcript = run_dir(&run.repo_root, &run.run_id)
        .join("workers")
        .join(format!("{}.jsonl", helper.id));
    Agent::builder(run.client.clone(), run.model.clone(), tool_context, gate)
        .tools(ToolRegistry::standard().select(&role.tools))
        .role_instructions(role.instructions.clone())
        .settings(settings)
        .transcript(transcript, format!("{}/{}", run.run_id, helper.id))
        .build()
        .map_err(|e| setup(&e))
}
