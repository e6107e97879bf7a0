//! The coordinator actor: owns the run record, schedules workers, runs the merge queue and
//! publishes events and snapshots.
//!
//! It never `ask`s a worker (workers only `tell` it), so there is no request cycle on bounded
//! mailboxes. A worker actor that dies abnormally is recorded as failed (`on_link_died` is
//! overridden: the default would stop the coordinator).

use super::events::SwarmEvent;
use super::run::RunContext;
use super::scheduler::Scheduler;
use super::state::{ConflictRecord, RunRecord, RunStatus, WorkerReport, WorkerStatus};
use super::worker::{CancelWorker, WorkerActor, WorkerArgs, WorkerSpec};
use crate::model::Usage;
use ahelper_worktrees as git;
use kameo::error::ActorStopReason;
use kameo::prelude::*;
use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::sync::Arc;

/// Progress reported by a worker while it runs.
#[derive(Debug, Clone)]
pub enum Progress {
    /// New state.
    Status {
        /// Plan index.
        index: usize,
        /// State.
        status: WorkerStatus,
    },
    /// A turn began.
    Turn {
        /// Plan index.
        index: usize,
        /// Turn number.
        turn: u32,
    },
    /// A tool call began.
    ToolCall {
        /// Plan index.
        index: usize,
        /// `tool main-argument`.
        action: String,
    },
    /// Token usage so far.
    Usage {
        /// Plan index.
        index: usize,
        /// Total of the worker.
        total: Usage,
    },
    /// A tool call was refused by the permission rules or the user.
    Denied {
        /// Plan index.
        index: usize,
        /// `tool main-argument`.
        action: String,
        /// Why.
        reason: String,
    },
    /// Model request retried.
    Retry {
        /// Plan index.
        index: usize,
        /// Text.
        message: String,
    },
}

/// A worker stopped.
#[derive(Debug, Clone)]
pub struct WorkerDone {
    /// Plan index.
    pub index: usize,
    /// Its final state before merging (`finished`, `no_changes`, `failed`, `cancelled`).
    pub status: WorkerStatus,
    /// Its report.
    pub report: WorkerReport,
}

/// Stop the run: no new workers; running ones are cancelled, commit `wip` and report.
#[derive(Debug, Clone)]
pub struct CancelRun {
    /// Why (shown in the summary).
    pub reason: String,
}

/// The coordinator.
pub struct CoordinatorActor {
    run: Arc<RunContext>,
    record: RunRecord,
    scheduler: Scheduler,
    workers: BTreeMap<usize, ActorRef<WorkerActor>>,
    actor_index: BTreeMap<ActorId, usize>,
    cancelled: Option<String>,
    done: Option<tokio::sync::oneshot::Sender<RunRecord>>,
    last_save: std::time::Instant,
    /// Background removals of merged worktrees.
    cleanups: Vec<tokio::task::JoinHandle<()>>,
    /// Worker usage already counted in `record.usage`, per worker.
    counted_usage: BTreeMap<usize, Usage>,
}

/// Arguments of [`CoordinatorActor`].
pub struct CoordinatorArgs {
    /// Run context.
    pub run: Arc<RunContext>,
    /// The run record with plan and workers filled in.
    pub record: RunRecord,
    /// Fired with the final record.
    pub done: tokio::sync::oneshot::Sender<RunRecord>,
}

impl Actor for CoordinatorActor {
    type Args = CoordinatorArgs;
    type Error = kameo::error::Infallible;

    async fn on_start(args: Self::Args, actor_ref: ActorRef<Self>) -> Result<Self, Self::Error> {
        let plan = args
            .record
            .plan
            .clone()
            .expect("a run being executed has a plan");
        let mut scheduler = Scheduler::new(plan.subtasks, args.run.max_workers);
        for (i, w) in args.record.workers.iter().enumerate() {
            use super::scheduler::SlotState;
            match w.status {
                WorkerStatus::Merged => scheduler.set_state(i, SlotState::Merged),
                WorkerStatus::NoChanges if completed_without_changes(w.report.as_ref()) => {
                    scheduler.set_state(i, SlotState::Merged)
                }
                WorkerStatus::Conflict | WorkerStatus::NoChanges | WorkerStatus::Failed => {
                    scheduler.set_state(i, SlotState::Ended)
                }
                WorkerStatus::Skipped => scheduler.set_state(i, SlotState::Skipped),
                _ => {}
            }
        }
        let mut coordinator = CoordinatorActor {
            run: args.run,
            record: args.record,
            scheduler,
            workers: BTreeMap::new(),
            actor_index: BTreeMap::new(),
            cancelled: None,
            done: Some(args.done),
            last_save: std::time::Instant::now(),
            counted_usage: BTreeMap::new(),
            cleanups: Vec::new(),
        };
        coordinator.record.status = RunStatus::Running;
        coordinator.record.pid = std::process::id();
        coordinator.schedule(&actor_ref).await;
        coordinator.publish_snapshot(true);
        Ok(coordinator)
    }

    async fn on_link_died(
        &mut self,
        actor_ref: WeakActorRef<Self>,
        id: ActorId,
        reason: ActorStopReason,
    ) -> Result<ControlFlow<ActorStopReason>, Self::Error> {
        if matches!(reason, ActorStopReason::Normal) {
            return Ok(ControlFlow::Continue(()));
        }
        if let Some(index) = self.actor_index.remove(&id)
            && self.workers.contains_key(&index)
        {
            tracing::error!(worker = index, ?reason, "worker actor died");
            let report = WorkerReport {
                stop_reason: "error".into(),
                error: Some(format!("worker actor died: {reason:?}")),
                ..Default::default()
            };
            if let Some(me) = actor_ref.upgrade() {
                self.on_worker_done(&me, index, WorkerStatus::Failed, report)
                    .await;
            }
        }
        Ok(ControlFlow::Continue(()))
    }
}

/// True when a worker ended its subtask normally (the model stopped calling tools) without
/// changing a file: the subtask is done, so subtasks depending on it may run — also when only
/// its final answer was cut by the output-token limit. A worker stopped by a cap (turns,
/// tokens, time), an error or a cancel with no changes is not done.
fn completed_without_changes(report: Option<&WorkerReport>) -> bool {
    report.is_some_and(|r| r.commit.is_none() && r.stop_reason == "completed")
}

impl CoordinatorActor {
    fn emit(&self, event: SwarmEvent) {
        self.run.publish(event);
    }

    fn set_status(&mut self, index: usize, status: WorkerStatus) {
        if self.record.workers[index].status == status {
            // Both the coordinator and the worker report `starting`: one event is enough.
            return;
        }
        self.record.workers[index].status = status;
        let worker = self.record.workers[index].id.clone();
        self.emit(SwarmEvent::WorkerStatus { worker, status });
    }

    fn publish_snapshot(&mut self, save: bool) {
        let now = std::time::Instant::now();
        let mut claims: BTreeMap<String, usize> = BTreeMap::new();
        for entry in self.run.claims.iter() {
            *claims.entry(entry.value().clone()).or_default() += 1;
        }
        for (i, w) in self.record.workers.iter_mut().enumerate() {
            w.claims = claims.get(&w.id).copied().unwrap_or(0);
            if self.workers.contains_key(&i)
                && let Some(start) = self.run.worker_started.get(&i)
            {
                w.elapsed_ms = start.elapsed().as_millis() as u64;
            }
        }
        if save || now.duration_since(self.last_save).as_millis() >= 1_000 {
            if let Err(e) = self.record.save() {
                tracing::error!(error = %e, "saving run.json failed");
            }
            self.last_save = now;
        }
        self.run.snapshots.send_replace(self.record.clone());
    }

    /// Starts every subtask the scheduler allows.
    async fn schedule(&mut self, me: &ActorRef<Self>) {
        if self.cancelled.is_some() {
            return;
        }
        if self
            .run
            .deadline
            .is_some_and(|d| tokio::time::Instant::now() >= d)
        {
            self.cancelled = Some("the run's wall-clock limit was reached".into());
            return;
        }
        let plan = self.record.plan.clone().expect("plan");
        for index in self.scheduler.start_ready() {
            let record = &self.record.workers[index];
            let resume = record.start_commit.is_some();
            let start_commit = match record
                .start_commit
                .as_deref()
                .and_then(|c| git::Oid::from_str(c).ok())
            {
                Some(c) => c,
                None => {
                    // Start from the integration branch: the base commit plus everything merged so
                    // far (dependencies included).
                    let repo = self.run.repo_root.clone();
                    let branch = self.record.integration_branch.clone();
                    match tokio::task::spawn_blocking(move || git::branch_tip(&repo, &branch)).await
                    {
                        Ok(Ok(c)) => c,
                        other => {
                            let message = format!("cannot read the integration branch: {other:?}");
                            self.scheduler.worker_stopped(index);
                            self.scheduler.finish(index, false);
                            self.set_status(index, WorkerStatus::Failed);
                            self.record.workers[index].report = Some(WorkerReport {
                                error: Some(message),
                                ..Default::default()
                            });
                            continue;
                        }
                    }
                }
            };
            self.record.workers[index].start_commit = Some(start_commit.to_string());
            self.record.workers[index].started_at = Some(crate::transcript::now_rfc3339());
            self.run
                .worker_started
                .insert(index, std::time::Instant::now());
            let spec = WorkerSpec {
                index,
                id: self.record.workers[index].id.clone(),
                subtask: plan.subtasks[index].clone(),
                branch: self.record.workers[index].branch.clone(),
                worktree: self.record.workers[index].worktree.clone(),
                start_commit,
                resume,
                role: self.run.worker_role.clone(),
            };
            self.set_status(index, WorkerStatus::Starting);
            let worker = WorkerActor::spawn_link(
                me,
                WorkerArgs {
                    run: self.run.clone(),
                    spec,
                    coordinator: me.clone(),
                },
            )
            .await;
            self.actor_index.insert(worker.id(), index);
            self.workers.insert(index, worker);
        }
        // Subtasks skipped because a dependency did not merge.
        for i in 0..self.record.workers.len() {
            if self.scheduler.state(i) == super::scheduler::SlotState::Skipped
                && self.record.workers[i].status == WorkerStatus::Queued
            {
                self.set_status(i, WorkerStatus::Skipped);
            }
        }
    }

    async fn on_worker_done(
        &mut self,
        me: &ActorRef<Self>,
        index: usize,
        status: WorkerStatus,
        report: WorkerReport,
    ) {
        if self.workers.remove(&index).is_none() {
            return;
        }
        self.run.worker_started.remove(&index);
        let done_without_changes =
            status == WorkerStatus::NoChanges && completed_without_changes(Some(&report));
        self.account_usage(index, report.usage);
        let worker = self.record.workers[index].id.clone();
        self.record.workers[index].turns = report.turns;
        self.record.workers[index].tool_calls = report.tool_calls;
        self.record.workers[index].elapsed_ms = report.duration_ms;
        self.record.workers[index].report = Some(report.clone());
        self.emit(SwarmEvent::WorkerReported { worker, report });
        self.set_status(index, status);
        self.scheduler.worker_stopped(index);
        if done_without_changes {
            // Nothing to merge, and nothing missing: dependents may start.
            self.scheduler.finish(index, true);
        } else if status != WorkerStatus::Finished {
            // Failed, stopped early without changes, cancelled (kept for `swarm resume`): ended
            // for this process; dependents are skipped.
            self.scheduler.finish(index, false);
        }
        if status == WorkerStatus::NoChanges {
            // Its branch is still at its start commit: nothing to keep.
            self.remove_merged_worktree(index);
        }
        self.merge_ready(false).await;
        self.check_budget();
        self.schedule(me).await;
        self.publish_snapshot(true);
        self.maybe_finish().await;
    }

    fn account_usage(&mut self, index: usize, total: Usage) {
        let before = self.counted_usage.insert(index, total).unwrap_or_default();
        self.record.usage.input_tokens += total.input_tokens.saturating_sub(before.input_tokens);
        self.record.usage.output_tokens += total.output_tokens.saturating_sub(before.output_tokens);
        self.record.workers[index].usage = total;
    }

    fn check_budget(&mut self) {
        let used = self.record.usage.input_tokens + self.record.usage.output_tokens;
        if used >= self.run.token_budget && self.cancelled.is_none() {
            let reason = format!(
                "the run's token budget ({}) is used up",
                self.run.token_budget
            );
            self.emit(SwarmEvent::Notice {
                message: reason.clone(),
            });
            self.cancel_all(reason);
        }
    }

    fn cancel_all(&mut self, reason: String) {
        self.cancelled = Some(reason);
        for worker in self.workers.values() {
            let _ = worker.tell(CancelWorker).try_send();
        }
        self.run.cancel.cancel();
    }

    /// Merges finished worker branches one at a time, in plan order, into the integration
    /// branch. A finished worker waits only for workers before it in the plan that are running,
    /// so runs of the same plan merge in the same order and a queued worker never blocks (no
    /// deadlock with dependencies or overlapping scopes). With `drain` (the run is stopping),
    /// every finished worker is merged.
    async fn merge_ready(&mut self, drain: bool) {
        let mut ready = Vec::new();
        for (i, w) in self.record.workers.iter().enumerate() {
            match w.status {
                WorkerStatus::Finished => ready.push(i),
                WorkerStatus::Starting
                | WorkerStatus::Running
                | WorkerStatus::WaitingForPermission
                | WorkerStatus::Committing
                    if !drain =>
                {
                    break;
                }
                _ => {}
            }
        }
        for index in ready {
            let worker = self.record.workers[index].clone();
            let repo = self.run.repo_root.clone();
            let target = self.record.integration_branch.clone();
            let message = format!(
                "Merge {} ({}): {}\n\nahelper run {}",
                worker.id, worker.subtask_id, worker.title, self.record.run_id
            );
            let source = worker.branch.clone();
            let outcome = tokio::task::spawn_blocking(move || {
                git::merge_into(&repo, &target, &source, &message, None)
            })
            .await
            .map_err(|e| e.to_string())
            .and_then(|r| r.map_err(|e| e.to_string()));
            match outcome {
                Ok(git::MergeOutcome::Conflict { files }) => {
                    let files: Vec<ConflictRecord> = files
                        .iter()
                        .map(|f| ConflictRecord {
                            path: f.path.clone(),
                            sides: match (f.ours.is_some(), f.theirs.is_some()) {
                                (true, true) => "both modified".into(),
                                (true, false) => {
                                    "deleted by the worker, modified in the integration branch"
                                        .into()
                                }
                                (false, true) => {
                                    "modified by the worker, deleted in the integration branch"
                                        .into()
                                }
                                (false, false) => "conflict".into(),
                            },
                        })
                        .collect();
                    self.record.workers[index].conflicts = files.clone();
                    self.emit(SwarmEvent::MergeConflict {
                        worker: worker.id.clone(),
                        files,
                    });
                    self.set_status(index, WorkerStatus::Conflict);
                    self.scheduler.finish(index, false);
                }
                Ok(git::MergeOutcome::Merged { commit })
                | Ok(git::MergeOutcome::FastForward { commit })
                | Ok(git::MergeOutcome::UpToDate { commit }) => {
                    self.emit(SwarmEvent::Merged {
                        worker: worker.id.clone(),
                        commit: commit.to_string(),
                    });
                    self.set_status(index, WorkerStatus::Merged);
                    self.scheduler.finish(index, true);
                    self.remove_merged_worktree(index);
                }
                Err(e) => {
                    let report = self.record.workers[index]
                        .report
                        .get_or_insert_with(Default::default);
                    report.error = Some(format!("merge failed: {e}"));
                    self.emit(SwarmEvent::Notice {
                        message: format!("[{}] merge failed: {e}", worker.id),
                    });
                    self.set_status(index, WorkerStatus::Failed);
                    self.scheduler.finish(index, false);
                }
            }
        }
    }

    /// A merged worker's worktree and branch are removed at once (its commits are in the
    /// integration branch); the transcript stays. Anything unexpected (dirty files, unmerged
    /// commits) keeps them and is reported.
    fn remove_merged_worktree(&mut self, index: usize) {
        let worker = self.record.workers[index].clone();
        let lock = self.run.git_lock.clone();
        let repo = self.run.repo_root.clone();
        let integration = self.record.integration_branch.clone();
        let run = self.run.clone();
        // In the background: the merge queue and the scheduler go on meanwhile; the run waits
        // for every removal before it reports that it finished.
        self.cleanups.push(tokio::task::spawn_blocking(move || {
            let base = worker
                .worktree
                .parent()
                .map(std::path::Path::to_path_buf)
                .unwrap_or_default();
            let result = (|| {
                if worker.worktree.exists() {
                    git::remove_worktree(&lock, &repo, &base, &worker.worktree, false)
                        .map_err(|e| e.to_string())?;
                }
                let _ = std::fs::remove_dir_all(base.join(format!(".tmp-{}", worker.id)));
                git::delete_branch(&lock, &repo, &worker.branch, &integration, false)
                    .map_err(|e| e.to_string())?;
                Ok::<(), String>(())
            })();
            if let Err(e) = result {
                run.publish(SwarmEvent::Notice {
                    message: format!(
                        "[{}] merged, but its worktree/branch were kept: {e}",
                        worker.id
                    ),
                });
            }
        }));
    }

    async fn maybe_finish(&mut self) {
        if !self.workers.is_empty() {
            return;
        }
        if self.cancelled.is_some() {
            // Work that completed before the stop is still merged.
            self.merge_ready(true).await;
        } else if !self.scheduler.is_finished() {
            return;
        }
        for cleanup in std::mem::take(&mut self.cleanups) {
            let _ = cleanup.await;
        }
        self.finish_run();
    }

    fn finish_run(&mut self) {
        self.record.status = if self.cancelled.is_some() {
            RunStatus::Cancelled
        } else {
            RunStatus::Finished
        };
        self.record.error = self.cancelled.clone();
        self.record.summary = Some(super::run::final_summary(&self.record));
        self.publish_snapshot(true);
        if let Some(done) = self.done.take() {
            let _ = done.send(self.record.clone());
        }
    }
}

impl Message<Progress> for CoordinatorActor {
    type Reply = ();
    async fn handle(&mut self, msg: Progress, _ctx: &mut Context<Self, Self::Reply>) {
        match msg {
            Progress::Status { index, status } => {
                if self.workers.contains_key(&index) {
                    self.set_status(index, status);
                }
                self.publish_snapshot(false);
                return;
            }
            Progress::Denied {
                index,
                action,
                reason,
            } => {
                self.record.workers[index].denied.push(action.clone());
                let worker = self.record.workers[index].id.clone();
                self.emit(SwarmEvent::PermissionDenied {
                    worker,
                    action,
                    reason,
                });
            }
            Progress::Turn { index, turn } => {
                self.record.workers[index].turns = turn;
                self.record.workers[index].last_action =
                    format!("waiting for the model (turn {turn})");
                let worker = self.record.workers[index].id.clone();
                self.emit(SwarmEvent::WorkerTurn { worker, turn });
            }
            Progress::ToolCall { index, action } => {
                self.record.workers[index].tool_calls += 1;
                self.record.workers[index].last_action = action.clone();
                let worker = self.record.workers[index].id.clone();
                self.emit(SwarmEvent::WorkerToolCall { worker, action });
            }
            Progress::Usage { index, total } => {
                self.account_usage(index, total);
                self.check_budget();
            }
            Progress::Retry { index, message } => {
                self.record.workers[index].last_action = message.clone();
                let worker = self.record.workers[index].id.clone();
                self.emit(SwarmEvent::WorkerRetry { worker, message });
            }
        }
        self.publish_snapshot(false);
    }
}

impl Message<WorkerDone> for CoordinatorActor {
    type Reply = ();
    async fn handle(&mut self, msg: WorkerDone, ctx: &mut Context<Self, Self::Reply>) {
        let me = ctx.actor_ref().clone();
        self.on_worker_done(&me, msg.index, msg.status, msg.report)
            .await;
    }
}

impl Message<CancelRun> for CoordinatorActor {
    type Reply = ();
    async fn handle(&mut self, msg: CancelRun, _ctx: &mut Context<Self, Self::Reply>) {
        if self.cancelled.is_none() {
            self.emit(SwarmEvent::Notice {
                message: format!("cancelling: {}", msg.reason),
            });
            self.cancel_all(msg.reason);
            for i in 0..self.record.workers.len() {
                if self.record.workers[i].status == WorkerStatus::Queued {
                    self.record.workers[i].last_action = "not started (run cancelled)".into();
                }
            }
            self.publish_snapshot(true);
            self.maybe_finish().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn which_reports_without_changes_let_dependents_run() {
        let report = |stop: &str, error: Option<&str>, commit: Option<&str>| WorkerReport {
            stop_reason: stop.into(),
            error: error.map(Into::into),
            commit: commit.map(Into::into),
            ..Default::default()
        };
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
}
