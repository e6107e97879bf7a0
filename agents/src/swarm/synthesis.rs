//! The coordinator's closing turn: when the merge queue is done, the coordinator (its role's
//! instructions, no tools, one turn) reads a bounded account of the run
//! ([`crate::verify::prompts::synthesis_prompt`]: the plan, each worker's summary of at most
//! 2,000 characters, merge and verification outcomes, the diffstat) and writes the run's
//! summary. Its conversation is appended to `runs/<run>/coordinator.jsonl`.

use super::plan::Plan;
use super::roles::load_role;
use super::run::RunContext;
use super::state::{RunRecord, WorkerStatus};
use super::summary::verification_line;
use super::{GitTaskError, git_task};
use crate::agent::gate::{PermissionGate, RulePersistence};
use crate::agent::{Agent, AgentSettings, AgentStopReason};
use crate::model::Usage;
use crate::tools::{ToolContext, ToolRegistry};
use crate::verify::prompts::{SubtaskOutcome, SynthesisInput, synthesis_prompt};
use ahelper_worktrees as git;

/// Why the run has no synthesis.
#[derive(Debug, thiserror::Error)]
pub enum SynthesisError {
    /// The coordinator agent could not be built.
    #[error("the coordinator could not be set up: {0}")]
    Setup(String),
    /// The diffstat of the integration branch could not be computed.
    #[error("{0}")]
    Git(#[from] GitTaskError),
    /// The turn did not complete (model error, cancel, limit) or was empty.
    #[error("the coordinator's turn ended with {}: {error}", stop.as_str())]
    Turn {
        /// Why the turn stopped.
        stop: AgentStopReason,
        /// The error, if any.
        error: String,
    },
}

/// Runs the closing turn; the summary text and the tokens it used. `on_request` is called once
/// the turn's model request is under way (or the turn could not start): work that would only
/// compete with building that request waits for it.
///
/// # Errors
/// [`SynthesisError`].
pub async fn synthesize(
    run: &RunContext,
    record: &RunRecord,
    plan: &Plan,
    on_request: impl FnOnce() + Send + 'static,
) -> Result<(String, Usage), SynthesisError> {
    let mut on_request = Some(on_request);
    let result = closing_turn(run, record, plan, &mut on_request).await;
    if let Some(call) = on_request.take() {
        call();
    }
    result
}

async fn closing_turn(
    run: &RunContext,
    record: &RunRecord,
    plan: &Plan,
    on_request: &mut Option<impl FnOnce() + Send + 'static>,
) -> Result<(String, Usage), SynthesisError> {
    let diffstat = diffstat(record).await?;
    let verification = verification_line(record);
    let summaries: Vec<String> = record
        .workers
        .iter()
        .map(|w| worker_account(w, &record.helpers))
        .collect();
    let subtasks: Vec<SubtaskOutcome<'_>> = record
        .workers
        .iter()
        .zip(&summaries)
        .map(|(w, summary)| SubtaskOutcome {
            worker_id: &w.id,
            subtask_id: &w.subtask_id,
            title: &w.title,
            status: w.status.label(),
            summary,
            verification: w.verification.as_deref(),
        })
        .collect();
    let prompt = synthesis_prompt(&SynthesisInput {
        task: &record.task,
        plan,
        subtasks: &subtasks,
        verification: &verification,
        diffstat: &diffstat,
    });
    let mut agent = synthesis_agent(run, record)?;
    // The agent's first event (its turn started) comes just before the request is sent.
    let mut events = agent.subscribe();
    let notify = on_request.take();
    let started = tokio::spawn(async move {
        let _ = events.recv().await;
        if let Some(call) = notify {
            call();
        }
    });
    let outcome = agent.run(&prompt, &run.cancel.child_token()).await;
    agent.unsubscribe();
    let _ = started.await;
    let text = outcome.final_text.trim().to_string();
    if outcome.stop_reason != AgentStopReason::Completed || text.is_empty() {
        return Err(SynthesisError::Turn {
            stop: outcome.stop_reason,
            error: outcome.error.unwrap_or_else(|| "no text".into()),
        });
    }
    Ok((text, outcome.usage))
}

/// A worker's own summary followed by what its fixers and mergers said.
fn worker_account(
    w: &super::state::WorkerRecord,
    helpers: &[super::state::HelperRecord],
) -> String {
    if w.status == WorkerStatus::Skipped {
        return "(not run: a dependency did not merge)".into();
    }
    let mut text = w
        .report
        .as_ref()
        .map(|r| r.summary.trim().to_string())
        .unwrap_or_default();
    for h in helpers.iter().filter(|h| h.worker == w.id) {
        text.push_str(&format!("\n{}: {}", h.id, h.summary.trim()));
    }
    text
}

/// The coordinator's role without tools, one turn, the run's worker limits; appended to the
/// coordinator's transcript.
fn synthesis_agent(run: &RunContext, record: &RunRecord) -> Result<Agent, SynthesisError> {
    let setup = |e: &dyn std::fmt::Display| SynthesisError::Setup(e.to_string());
    let role = load_role(&run.repo_root, "coordinator").map_err(|e| setup(&e))?;
    let mut tool_context = ToolContext::new(&run.repo_root).map_err(|e| setup(&e))?;
    tool_context.redactor = run.redactor.clone();
    let gate = PermissionGate::new(
        run.policy.clone(),
        run.prompter.clone(),
        RulePersistence::InMemory,
    );
    let settings = AgentSettings {
        max_turns: 1,
        ..run.worker_settings.clone()
    };
    Agent::builder(run.client.clone(), run.model.clone(), tool_context, gate)
        .tools(ToolRegistry::new())
        .role_instructions(role.instructions)
        .settings(settings)
        .transcript(
            record.coordinator_transcript(),
            format!("{}/{}", record.run_id, super::planning::COORDINATOR_LABEL),
        )
        .build()
        .map_err(|e| setup(&e))
}

/// `N files changed, +I -D` and the paths, of the integration branch against the base.
async fn diffstat(record: &RunRecord) -> Result<String, GitTaskError> {
    let repo = record.repo_root.clone();
    let (branch, base) = (
        record.integration_branch.clone(),
        record.base_commit.clone(),
    );
    git_task(move || {
        let stats = git::branch_diff_stats(&repo, &base, &branch)?;
        let mut text = format!(
            "{} files changed, +{} -{}\n",
            stats.files_changed.len(),
            stats.insertions,
            stats.deletions
        );
        for path in &stats.files_changed {
            text.push_str(&format!(" {path}\n"));
        }
        Ok(text)
    })
    .await
}
