//! Events of a swarm run, published by the coordinator to whoever renders them (status table,
//! one line per event, or JSON lines with `--output-format stream-json`) and appended to
//! `runs/<run>/events.jsonl`.

use super::plan::Plan;
use super::state::{ConflictRecord, RunRecord, WorkerReport, WorkerStatus};
use super::summary::short_commit;
use serde::{Deserialize, Serialize};

/// One run event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum SwarmEvent {
    /// The run exists on disk.
    RunStarted {
        /// Run id.
        run_id: String,
        /// Base commit.
        base_commit: String,
        /// Integration branch.
        integration_branch: String,
    },
    /// A note for the user (dirty tree, landlock unavailable, …).
    Notice {
        /// Text.
        message: String,
    },
    /// The plan is ready.
    PlanReady {
        /// The plan.
        plan: Plan,
    },
    /// The plan was refused by validation (it may be re-asked).
    PlanRejected {
        /// Why.
        error: String,
    },
    /// A worker changed state.
    WorkerStatus {
        /// Worker id.
        worker: String,
        /// New state.
        status: WorkerStatus,
        /// The fix attempt, when the state is `fixing`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fix_round: Option<super::state::FixRound>,
    },
    /// Tokens used so far by one agent of the run — a worker, a fixer or merger (`fix-1`,
    /// `merge-1`) or the coordinator's closing turn — reported as its model turns stream in.
    Usage {
        /// `w1`, `fix-1`, `merge-1`, `coordinator`.
        agent: String,
        /// The agent's total so far (input and output tokens).
        total: crate::model::Usage,
        /// The run's total so far, this agent included (what the token budget is checked
        /// against).
        run_total: crate::model::Usage,
    },
    /// A worker began a turn.
    WorkerTurn {
        /// Worker id.
        worker: String,
        /// Turn number.
        turn: u32,
    },
    /// A worker started a tool call.
    WorkerToolCall {
        /// Worker id.
        worker: String,
        /// `tool main-argument`.
        action: String,
    },
    /// The coordinator finished a planning turn: its tokens and the time spent planning so far.
    PlanningProgress {
        /// Turns so far.
        turn: u32,
        /// Input tokens so far.
        input_tokens: u64,
        /// Output tokens so far.
        output_tokens: u64,
        /// Milliseconds since planning started.
        elapsed_ms: u64,
    },
    /// A worker's model request is being retried.
    WorkerRetry {
        /// Worker id.
        worker: String,
        /// Human text ("retrying in 2 s (attempt 2/5)").
        message: String,
    },
    /// A worker asks for a permission decision.
    PermissionRequested {
        /// Worker id.
        worker: String,
        /// Tool and subject.
        action: String,
    },
    /// A worker's tool call was refused (not run).
    PermissionDenied {
        /// Worker id.
        worker: String,
        /// `tool main-argument`.
        action: String,
        /// Why.
        reason: String,
        /// The allow rule that would let such a call run (`run_command(cargo test:*)`), when
        /// one would; `None` when a deny rule, a protected path or the mode refused it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        allow_rule: Option<String>,
    },
    /// A worker stopped and reported.
    WorkerReported {
        /// Worker id.
        worker: String,
        /// Report.
        report: WorkerReport,
    },
    /// A worker branch was merged into the integration branch.
    Merged {
        /// Worker id.
        worker: String,
        /// New integration tip.
        commit: String,
    },
    /// A worker branch conflicts with the integration branch; nothing was lost.
    MergeConflict {
        /// Worker id.
        worker: String,
        /// Conflicting files.
        files: Vec<ConflictRecord>,
    },
    /// The run ended (finished, cancelled or failed).
    RunFinished {
        /// Final state.
        record: Box<RunRecord>,
    },
}

impl SwarmEvent {
    /// One human-readable line (for non-terminal output).
    pub fn to_line(&self) -> String {
        match self {
            SwarmEvent::RunStarted {
                run_id,
                base_commit,
                integration_branch,
            } => format!(
                "run {run_id} started from {} → {integration_branch}",
                short_commit(base_commit)
            ),
            SwarmEvent::Notice { message } => format!("note: {message}"),
            SwarmEvent::PlanReady { plan } => {
                format!("plan ready: {} subtasks", plan.subtasks.len())
            }
            SwarmEvent::PlanRejected { error } => format!("plan rejected: {error}"),
            SwarmEvent::WorkerStatus {
                worker,
                status,
                fix_round: Some(r),
            } => format!("[{worker}] {} {}/{}", status.label(), r.attempt, r.of),
            SwarmEvent::WorkerStatus { worker, status, .. } => {
                format!("[{worker}] {}", status.label())
            }
            SwarmEvent::Usage {
                agent,
                total,
                run_total,
            } => format!(
                "[{agent}] tokens {} in / {} out (run: {} in / {} out)",
                total.input_tokens,
                total.output_tokens,
                run_total.input_tokens,
                run_total.output_tokens
            ),
            SwarmEvent::WorkerTurn { worker, turn } => format!("[{worker}] turn {turn}"),
            SwarmEvent::WorkerToolCall { worker, action } => format!("[{worker}] {action}"),
            SwarmEvent::WorkerRetry { worker, message } => format!("[{worker}] {message}"),
            SwarmEvent::PlanningProgress {
                turn,
                input_tokens,
                output_tokens,
                elapsed_ms,
            } => format!(
                "[coordinator] planning: turn {turn} · tokens {input_tokens} in / {output_tokens} out · {:.1} s",
                *elapsed_ms as f64 / 1000.0
            ),
            SwarmEvent::PermissionRequested { worker, action } => {
                format!("[{worker}] needs permission: {action}")
            }
            SwarmEvent::PermissionDenied {
                worker,
                action,
                reason,
                allow_rule,
            } => {
                let (reason, _) = crate::text::clip(reason, 160);
                let allow = allow_rule
                    .as_ref()
                    .map(|r| format!(" (the rule `{r}` would allow it)"))
                    .unwrap_or_default();
                format!("[{worker}] refused {action}: {reason}{allow}")
            }
            SwarmEvent::WorkerReported { worker, report } => match &report.error {
                // Its loop may have completed, and what came after failed (its commit): no
                // "0 files" line that reads as a clean finish.
                Some(error) => format!(
                    "[{worker}] {}, {} turns — {}",
                    report.stop_reason.as_str(),
                    report.turns,
                    crate::text::clip(error, 300).0
                ),
                None => format!(
                    "[{worker}] {} — {} files, +{} -{}, {} turns",
                    report.stop_reason.as_str(),
                    report.files_changed.len(),
                    report.insertions,
                    report.deletions,
                    report.turns
                ),
            },
            SwarmEvent::Merged { worker, commit } => {
                format!("[{worker}] merged ({})", short_commit(commit))
            }
            SwarmEvent::MergeConflict { worker, files } => format!(
                "[{worker}] merge conflict in {}",
                files
                    .iter()
                    .map(|f| f.path.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            SwarmEvent::RunFinished { record } => {
                format!("run {} {}", record.run_id, record.status.as_str())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::AgentStopReason;

    /// A worker whose loop completed but whose commit failed: its report line gives the error,
    /// not "completed — 0 files" (which read as a clean finish just before "failed").
    #[test]
    fn a_report_with_an_error_names_it() {
        let mut report = WorkerReport {
            stop_reason: AgentStopReason::Completed,
            turns: 2,
            ..Default::default()
        };
        let line = |report: &WorkerReport| {
            SwarmEvent::WorkerReported {
                worker: "w1".into(),
                report: report.clone(),
            }
            .to_line()
        };
        assert_eq!(line(&report), "[w1] completed — 0 files, +0 -0, 2 turns");
        report.error = Some("could not commit the worktree /w: reference not found".into());
        assert_eq!(
            line(&report),
            "[w1] completed, 2 turns — could not commit the worktree /w: reference not found"
        );
    }
}
