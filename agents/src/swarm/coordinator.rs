//! The coordinator actor: owns the run record, schedules workers into worker slots, runs the
//! merge queue and publishes events and snapshots. All mutable state of a running swarm lives
//! here (the record, the scheduler, the slots, start times, counted usage); workers only `tell`
//! it what happened.
//!
//! It never `ask`s a worker, so there is no request cycle on bounded mailboxes. A worker actor
//! that dies abnormally is recorded as failed (`on_link_died` is overridden: the default would
//! stop the coordinator).
//!
//! Worker slots: [`CoordinatorActor::start_worker`] is the one place a worker is started, through
//! the run's [`super::slots::WorkerSlots`] (a local worker actor linked to the coordinator, or a
//! subtask message for a worker on another machine); everything else sees a worker only through
//! [`Progress`] and [`WorkerDone`] messages and [`RunningWorker::cancel`].

use super::cleanup::{MergedWork, remove_merged_work};
use super::events::SwarmEvent;
use super::merge_batch::{BatchMerge, Isolated};
use super::merge_policy::MergePolicy;
use super::merge_queue::{Gate, GatedMerge, MergeQueue, MergeStep};
use super::plan::Plan;
use super::record_saver::{RecordFlush, RecordSaver};
use super::run::RunContext;
use super::scheduler::{Scheduler, SlotState};
use super::slots::RunningWorker;
use super::state::{FixRound, RunRecord, RunStatus, WorkerRecord, WorkerReport, WorkerStatus};
use super::worker::WorkerSpec;
use super::{GitTaskError, git_task};
use crate::model::Usage;
use ahelper_worktrees as git;
use kameo::error::ActorStopReason;
use kameo::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// Progress reported by a worker while it runs. Serialisable: a worker on another machine sends
/// it over NATS (JSON, tagged by `kind`).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
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
    /// The running tool call finished.
    ToolCallDone {
        /// Plan index.
        index: usize,
    },
    /// Paths changed in the worker's worktree (`git status`) after one of its commands.
    Changed {
        /// Plan index.
        index: usize,
        /// Changed paths (an untracked directory counts once).
        files: usize,
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
        /// The allow rule that would let such a call run, when one would.
        allow_rule: Option<String>,
    },
    /// Model request retried.
    Retry {
        /// Plan index.
        index: usize,
        /// Text.
        message: String,
    },
    /// The machine a remote worker runs on, or that machine stopped sending heartbeats.
    Machine {
        /// Plan index.
        index: usize,
        /// Its name.
        machine: String,
        /// What its heartbeats say ([`super::remote::liveness`]).
        state: super::remote::liveness::MachineState,
    },
    /// A phase after the worker's loop: its self-check (`verifying`, `fixing`) or its merge
    /// (`verifying`, `fixing`, `resolving conflict`).
    Phase {
        /// Plan index.
        index: usize,
        /// New state.
        status: WorkerStatus,
        /// The fix attempt, while `fixing`.
        fix_round: Option<FixRound>,
    },
    /// What the merge queue's verification does now (`verifying batch w3+w5+w7`,
    /// `isolating: w5`): the status table's verification row. Only the coordinator's own merge
    /// queue says this (a remote worker's is dropped).
    Queue {
        /// One line.
        activity: String,
    },
}

/// A merge pass ended: one gated merge, or a run of clean merges
/// ([`MergeQueue::merge_clean_run`]).
pub struct MergeDone {
    /// What merging each worker did, by plan index, in the order they merged.
    pub merges: Vec<(usize, GatedMerge)>,
    /// What isolating a red batch found.
    pub isolated: Option<Isolated>,
}

/// A fixer's or merger's token usage so far, reported after each of its model turns (see
/// [`super::helpers::run_helper_agent`]).
#[derive(Debug, Clone)]
pub struct HelperUsage {
    /// `fix-1`, `merge-1`, …
    pub helper: String,
    /// Its total so far.
    pub total: Usage,
}

/// The baseline finished (or its task died: `None`).
#[derive(Debug, Clone)]
pub struct BaselineDone {
    /// The verification run on the base commit.
    pub run: Option<crate::verify::VerifyRun>,
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

/// Workers that stopped together (remote workers whose branches came with one fetch): all are
/// recorded before the next merge pass starts, so that they merge in one pass.
#[derive(Debug, Clone)]
pub struct WorkersDone {
    /// Each worker's end, as [`WorkerDone`] says it.
    pub done: Vec<WorkerDone>,
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
    plan: Plan,
    scheduler: Scheduler,
    merge_queue: MergeQueue,
    /// The worker slots: running workers by plan index.
    workers: BTreeMap<usize, Box<dyn RunningWorker>>,
    actor_index: BTreeMap<ActorId, usize>,
    /// Start instants of running workers (by plan index), for the elapsed column.
    started: BTreeMap<usize, Instant>,
    cancelled: Option<String>,
    done: Option<tokio::sync::oneshot::Sender<RunRecord>>,
    last_save: Instant,
    /// Writes `run.json` off this actor's thread (`None` once the final record is written).
    saver: Option<RecordSaver>,
    /// Background removals of merged worktrees.
    cleanups: Vec<tokio::task::JoinHandle<()>>,
    /// Removals of merged worktrees nothing waits for (no subtask is queued): they start once
    /// the closing turn's request is under way, so that they do not compete with the last
    /// merges and that request for the CPU ([`CoordinatorActor::maybe_finish`]).
    deferred_removals: Vec<Vec<MergedWork>>,
    /// Worker usage already counted in `record.usage`, per worker.
    counted_usage: BTreeMap<usize, Usage>,
    /// Usage of the running merge's fixers and mergers already counted in `record.usage`, by
    /// helper id (until their merge ends and they join `record.helpers`).
    counted_helper_usage: BTreeMap<String, Usage>,
    /// What each worker had done before its current attempt (a resumed run's earlier
    /// process), added to the current attempt's figures so counts cover the whole run.
    earlier: BTreeMap<usize, EarlierAttempts>,
    /// The first worker of the merge pass under way (one pass at a time; a gated merge is a
    /// pass of one worker).
    merging: Vec<usize>,
    /// Whether the baseline task ended (recorded or not).
    baseline_ended: bool,
}

/// A worker's figures from before its current attempt.
#[derive(Debug, Clone, Copy, Default)]
struct EarlierAttempts {
    turns: u32,
    tool_calls: u32,
    usage: Usage,
    elapsed_ms: u64,
}

/// Arguments of [`CoordinatorActor`].
pub struct CoordinatorArgs {
    /// Run context.
    pub run: Arc<RunContext>,
    /// The run record with its workers (one per subtask).
    pub record: RunRecord,
    /// The plan.
    pub plan: Plan,
    /// Plan indices of unfinished workers not to start in this process (`swarm resume
    /// --only-failed` / `--worker`).
    pub held: BTreeSet<usize>,
    /// The flush of the record's last save before the run started: the coordinator's saves
    /// come after it.
    pub flush: RecordFlush,
    /// Fired with the final record.
    pub done: tokio::sync::oneshot::Sender<RunRecord>,
}

impl Actor for CoordinatorActor {
    type Args = CoordinatorArgs;
    type Error = kameo::error::Infallible;

    async fn on_start(args: Self::Args, actor_ref: ActorRef<Self>) -> Result<Self, Self::Error> {
        let record = args.record;
        let scheduler = restored_scheduler(
            &args.plan,
            &record.workers,
            &args.held,
            args.run.max_workers,
        );
        let merge_queue = MergeQueue::new(
            record.repo_root.clone(),
            record.integration_branch.clone(),
            record.run_id.clone(),
        );
        let mut coordinator = CoordinatorActor {
            run: args.run,
            record,
            plan: args.plan,
            scheduler,
            merge_queue,
            workers: BTreeMap::new(),
            actor_index: BTreeMap::new(),
            started: BTreeMap::new(),
            cancelled: None,
            done: Some(args.done),
            last_save: Instant::now(),
            saver: Some(RecordSaver::after(args.flush)),
            counted_usage: BTreeMap::new(),
            counted_helper_usage: BTreeMap::new(),
            earlier: BTreeMap::new(),
            cleanups: Vec::new(),
            deferred_removals: Vec::new(),
            merging: Vec::new(),
            baseline_ended: false,
        };
        coordinator.record.status = RunStatus::Running;
        coordinator.record.pid = std::process::id();
        coordinator.watch_baseline(&actor_ref);
        coordinator.schedule(&actor_ref).await;
        tracing::debug!(
            workers = coordinator.workers.len(),
            "started the first workers"
        );
        // A resumed run's committed branches go back to the merge queue.
        coordinator.start_next_merge(&actor_ref, false);
        coordinator.publish_snapshot(true);
        coordinator.maybe_finish(&actor_ref).await;
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
            let report = WorkerReport::failed(format!("worker actor died: {reason:?}"), 0);
            if let Some(me) = actor_ref.upgrade() {
                self.on_worker_done(&me, index, WorkerStatus::Failed, report)
                    .await;
            }
        }
        Ok(ControlFlow::Continue(()))
    }
}

/// What `total` adds to `before` (an earlier total of the same agent).
fn usage_since(before: Usage, total: Usage) -> Usage {
    Usage {
        input_tokens: total.input_tokens.saturating_sub(before.input_tokens),
        output_tokens: total.output_tokens.saturating_sub(before.output_tokens),
        cache_read_tokens: total
            .cache_read_tokens
            .saturating_sub(before.cache_read_tokens),
        cache_write_tokens: total
            .cache_write_tokens
            .saturating_sub(before.cache_write_tokens),
    }
}

/// The scheduler of a (possibly resumed) run: subtasks that already ended keep their slot state;
/// `held` unfinished ones count as ended for this process (their dependents wait or are skipped).
fn restored_scheduler(
    plan: &Plan,
    workers: &[WorkerRecord],
    held: &BTreeSet<usize>,
    max_workers: usize,
) -> Scheduler {
    let mut scheduler = Scheduler::new(plan.subtasks.clone(), max_workers);
    for (i, w) in workers.iter().enumerate() {
        let state = match w.status {
            WorkerStatus::Merged => SlotState::Merged,
            WorkerStatus::NoChanges
                if w.report
                    .as_ref()
                    .is_some_and(WorkerReport::completed_without_changes) =>
            {
                SlotState::Merged
            }
            WorkerStatus::Conflict
            | WorkerStatus::NoChanges
            | WorkerStatus::Failed
            | WorkerStatus::VerifyFailed => SlotState::Ended,
            WorkerStatus::Finished => SlotState::Finished,
            WorkerStatus::Skipped => SlotState::Skipped,
            _ if held.contains(&i) => SlotState::Ended,
            _ => continue,
        };
        scheduler.set_state(i, state);
    }
    scheduler
}

impl CoordinatorActor {
    fn emit(&self, event: SwarmEvent) {
        self.run.publish(event);
    }

    /// Records what worker `index`'s machine heartbeats say, with a notice when it becomes
    /// lost or NATS becomes unreachable. A worker that already ended keeps no such flag.
    fn note_machine_state(
        &mut self,
        index: usize,
        machine: String,
        state: super::remote::liveness::MachineState,
    ) {
        use super::remote::liveness::MachineState;
        let w = &self.record.workers[index];
        let (lost, unreachable) = (
            state == MachineState::Lost,
            state == MachineState::NatsUnreachable,
        );
        let message = match state {
            MachineState::Lost if !w.machine_lost => {
                Some(format!("[{}] machine lost: {machine}", w.id))
            }
            MachineState::NatsUnreachable if !w.nats_unreachable => Some(format!(
                "[{}] NATS unreachable: the heartbeat of {machine} cannot be read; it is not taken for lost while this lasts",
                w.id
            )),
            _ => None,
        };
        if let Some(message) = message {
            self.emit(SwarmEvent::Notice { message });
        }
        let ended = w.status.is_terminal() || w.status == WorkerStatus::Finished;
        let w = &mut self.record.workers[index];
        w.machine = Some(machine);
        w.machine_lost = lost && !ended;
        w.nats_unreachable = unreachable && !ended;
    }

    fn set_status(&mut self, index: usize, status: WorkerStatus) {
        if self.record.workers[index].status == status && status != WorkerStatus::Fixing {
            // Both the coordinator and the worker report `starting`: one event is enough.
            // (Each fix attempt is news.)
            return;
        }
        self.record.workers[index].status = status;
        if matches!(
            status,
            WorkerStatus::Finished | WorkerStatus::NoChanges | WorkerStatus::Merged
        ) {
            // It reported its end: whatever its machine's heartbeats said no longer matters.
            self.record.workers[index].machine_lost = false;
            self.record.workers[index].nats_unreachable = false;
        }
        if let Some(action) = self.record.workers[index].status_action() {
            self.record.workers[index].last_action = action;
        }
        let worker = self.record.workers[index].id.clone();
        let fix_round = self.record.workers[index].fix_round;
        self.emit(SwarmEvent::WorkerStatus {
            worker,
            status,
            fix_round,
        });
    }

    /// Refreshes the claims and elapsed columns, saves `run.json` when asked (or at most once a
    /// second) and hands renderers the new record.
    fn publish_snapshot(&mut self, save: bool) {
        let now = Instant::now();
        let mut claims: BTreeMap<String, usize> = BTreeMap::new();
        for entry in self.run.claims.iter() {
            *claims.entry(entry.value().clone()).or_default() += 1;
        }
        for (i, w) in self.record.workers.iter_mut().enumerate() {
            w.claims = claims.get(&w.id).copied().unwrap_or(0);
            if self.workers.contains_key(&i)
                && let Some(start) = self.started.get(&i)
            {
                let earlier = self.earlier.get(&i).map_or(0, |e| e.elapsed_ms);
                w.elapsed_ms = earlier + start.elapsed().as_millis() as u64;
            }
        }
        if (save || now.duration_since(self.last_save).as_millis() >= 1_000)
            && let Some(saver) = &self.saver
        {
            saver.save(self.record.clone());
            self.last_save = now;
        }
        self.run.snapshots.send_replace(self.record.clone());
    }

    /// Starts every subtask the scheduler allows, then marks the subtasks skipped because a
    /// dependency did not merge.
    async fn schedule(&mut self, me: &ActorRef<Self>) {
        if self.cancelled.is_some() || self.run.cancel.is_cancelled() {
            // Stopped ([`RunContext::stop`]); its [`CancelRun`] may still be in the mailbox.
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
        // The integration branch does not move while this batch starts: read once.
        let mut tip = None;
        for index in self.scheduler.start_ready() {
            match self.start_commit(index, &mut tip).await {
                Ok((start_commit, resume)) => {
                    self.start_worker(me, index, start_commit, resume).await;
                }
                Err(e) => self.fail_before_start(index, e),
            }
        }
        for i in 0..self.record.workers.len() {
            if self.scheduler.state(i) == SlotState::Skipped
                && self.record.workers[i].status == WorkerStatus::Queued
            {
                self.set_status(i, WorkerStatus::Skipped);
            }
        }
        if !self.scheduler.has_queued() {
            self.close_worktree_pool();
        } else {
            self.replenish_spares();
        }
    }

    /// Spares for the subtasks that wait for a slot, made in the background once no worker
    /// is starting or committing: the CPU idles while the running workers wait on the model,
    /// but a spare made while workers hand over their slots (commit, recycle the next
    /// worktree, prepare it) competes with them for the CPU and the git lock and delays the
    /// next worker's first request. Called again when a worker reports that it runs.
    fn replenish_spares(&self) {
        let Some(pool) = &self.run.worktree_pool else {
            return;
        };
        let handing_over = self.workers.keys().any(|&i| {
            matches!(
                self.record.workers[i].status,
                WorkerStatus::Starting | WorkerStatus::Committing
            )
        });
        if !handing_over && self.scheduler.has_queued() {
            pool.replenish(self.waiting_for_slots());
        }
    }

    /// How many queued subtasks can next take a worker slot (at most `max_workers`).
    fn waiting_for_slots(&self) -> usize {
        self.scheduler.queued().min(self.run.max_workers)
    }

    /// No subtask waits to start any more: the spare worktrees go, in the background.
    fn close_worktree_pool(&mut self) {
        if let Some(pool) = self.run.worktree_pool.as_ref().filter(|p| p.is_open()) {
            let (lock, repo) = (self.run.git_lock.clone(), self.run.repo_root.clone());
            self.cleanups
                .push(super::spares::close_and_remove(pool, lock, repo));
        }
    }

    /// Where worker `index` starts, and whether it resumes an earlier attempt: its recorded
    /// start commit when it has one, else the integration branch as it is now (the base commit
    /// plus everything merged so far, dependencies included).
    /// `tip`: the integration branch's tip once read for the batch being started.
    async fn start_commit(
        &self,
        index: usize,
        tip: &mut Option<git::Oid>,
    ) -> Result<(git::Oid, bool), GitTaskError> {
        let record = &self.record.workers[index];
        let resume = record.start_commit.is_some();
        if let Some(commit) = record
            .start_commit
            .as_deref()
            .and_then(|c| git::Oid::from_str(c).ok())
        {
            return Ok((commit, resume));
        }
        if let Some(tip) = *tip {
            return Ok((tip, resume));
        }
        let repo = self.run.repo_root.clone();
        let branch = self.record.integration_branch.clone();
        let read = git_task(move || Ok(git::branch_tip(&repo, &branch)?)).await?;
        *tip = Some(read);
        Ok((read, resume))
    }

    fn fail_before_start(&mut self, index: usize, error: GitTaskError) {
        self.scheduler.worker_stopped(index);
        self.scheduler.finish(index, false);
        self.record.workers[index].report = Some(WorkerReport::failed(
            format!("cannot read the integration branch: {error}"),
            0,
        ));
        self.set_status(index, WorkerStatus::Failed);
    }

    /// The worker slot: starts worker `index` on its subtask from `start_commit`. The only
    /// place a worker comes to life; a worker on another machine would start here too.
    async fn start_worker(
        &mut self,
        me: &ActorRef<Self>,
        index: usize,
        start_commit: git::Oid,
        resume: bool,
    ) {
        let transcript = self
            .record
            .worker_transcript(&self.record.workers[index].id);
        let record = &mut self.record.workers[index];
        self.earlier.insert(
            index,
            EarlierAttempts {
                turns: record.turns,
                tool_calls: record.tool_calls,
                usage: record.usage,
                elapsed_ms: record.elapsed_ms,
            },
        );
        record.start_commit = Some(start_commit.to_string());
        record.started_at = Some(crate::transcript::now_rfc3339());
        let spec = WorkerSpec {
            index,
            id: record.id.clone(),
            subtask: self.plan.subtasks[index].clone(),
            branch: record.branch.clone(),
            worktree: record.worktree.clone(),
            start_commit,
            resume,
            role: self.run.worker_role.clone(),
            transcript,
        };
        self.started.insert(index, Instant::now());
        self.set_status(index, WorkerStatus::Starting);
        let worker = self
            .run
            .worker_slots
            .start(me, self.run.clone(), spec)
            .await;
        if let Some(id) = worker.actor_id() {
            self.actor_index.insert(id, index);
        }
        self.workers.insert(index, worker);
    }

    /// A worker reported: record its report, free its slot, merge what is ready, start what
    /// can start, and finish the run when nothing is left.
    async fn on_worker_done(
        &mut self,
        me: &ActorRef<Self>,
        index: usize,
        status: WorkerStatus,
        report: WorkerReport,
    ) {
        if self.record_worker_done(index, status, report) {
            self.after_workers_done(me).await;
        }
    }

    /// Workers that stopped together ([`WorkersDone`]): each recorded, then one merge pass
    /// started for all that are ready.
    async fn on_workers_done(&mut self, me: &ActorRef<Self>, done: Vec<WorkerDone>) {
        let mut recorded = false;
        for d in done {
            recorded |= self.record_worker_done(d.index, d.status, d.report);
        }
        if recorded {
            self.after_workers_done(me).await;
        }
    }

    /// Records that worker `index` stopped (its report, the scheduler); `false` when it was
    /// not running.
    fn record_worker_done(
        &mut self,
        index: usize,
        status: WorkerStatus,
        report: WorkerReport,
    ) -> bool {
        if self.workers.remove(&index).is_none() {
            return false;
        }
        tracing::debug!(worker = index, ?status, "worker done");
        self.started.remove(&index);
        let done_without_changes =
            status == WorkerStatus::NoChanges && report.completed_without_changes();
        self.record_report(index, status, report);
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
        true
    }

    /// After workers stopped: the next merge pass, the budget, new workers, the snapshot, and
    /// the run's end when that was the last.
    async fn after_workers_done(&mut self, me: &ActorRef<Self>) {
        self.start_next_merge(me, false);
        self.check_budget();
        self.schedule(me).await;
        self.publish_snapshot(true);
        self.maybe_finish(me).await;
    }

    fn record_report(&mut self, index: usize, status: WorkerStatus, report: WorkerReport) {
        self.account_usage(index, report.usage);
        let earlier = self.earlier.get(&index).copied().unwrap_or_default();
        let worker = &mut self.record.workers[index];
        worker.turns = earlier.turns + report.turns;
        worker.tool_calls = earlier.tool_calls + report.tool_calls;
        worker.elapsed_ms = earlier.elapsed_ms + report.duration_ms;
        worker.verification = report.verification.clone();
        worker.report = Some(report.clone());
        let worker = worker.id.clone();
        self.emit(SwarmEvent::WorkerReported { worker, report });
        self.set_status(index, status);
    }

    fn account_usage(&mut self, index: usize, total: Usage) {
        let before = self.counted_usage.insert(index, total).unwrap_or_default();
        let new = usage_since(before, total);
        self.record.usage.add(new);
        let mut whole_run = self
            .earlier
            .get(&index)
            .map(|e| e.usage)
            .unwrap_or_default();
        whole_run.add(total);
        self.record.workers[index].usage = whole_run;
        if new != Usage::default() {
            let agent = self.record.workers[index].id.clone();
            self.emit_usage(agent, whole_run);
        }
    }

    /// Counts what helper `id` used beyond what was counted for it already (its total is
    /// `total`), and tells renderers.
    fn count_helper_usage(&mut self, id: &str, total: Usage) {
        let before = self
            .counted_helper_usage
            .insert(id.to_string(), total)
            .unwrap_or_default();
        let new = usage_since(before, total);
        if new != Usage::default() {
            self.record.usage.add(new);
            self.emit_usage(id.to_string(), total);
        }
    }

    fn emit_usage(&self, agent: String, total: Usage) {
        self.emit(SwarmEvent::Usage {
            agent,
            total,
            run_total: self.record.usage,
        });
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
        self.run.stop(&reason);
        self.cancelled = Some(reason);
        if let Some(baseline) = &self.run.baseline {
            baseline.stop();
        }
        for worker in self.workers.values() {
            worker.cancel();
        }
    }

    /// Starts the next merge pass, unless one is under way, in a task of its own: the workers
    /// that are ready ([`MergeQueue::ready`]; with `drain`, every finished worker). Without
    /// verification they all merge at once where they merge cleanly; otherwise (or for the
    /// first that does not) one gated merge. Returns whether a merge is under way.
    fn start_next_merge(&mut self, me: &ActorRef<Self>, drain: bool) -> bool {
        if !self.merging.is_empty() {
            return true;
        }
        if self.cancelled.is_some() && self.run.merge_policy.verifies() {
            // A verification would be cancelled at once: the finished branches wait for
            // `swarm resume`.
            return false;
        }
        let ready = MergeQueue::ready(&self.record.workers, drain);
        let Some(&index) = ready.first() else {
            return false;
        };
        let batched = matches!(self.run.merge_policy, MergePolicy::Batched { .. });
        let ready: Vec<(usize, WorkerRecord)> = if !self.run.merge_policy.verifies() || batched {
            ready
                .into_iter()
                .map(|i| (i, self.record.workers[i].clone()))
                .collect()
        } else {
            vec![(index, self.record.workers[index].clone())]
        };
        let indices: Vec<usize> = ready.iter().map(|(i, _)| *i).collect();
        tracing::debug!(workers = ?indices, "merge pass started");
        self.merging = indices;
        let pass = MergePass {
            queue: self.merge_queue.clone(),
            run: self.run.clone(),
            recorded_baseline: self.record.baseline.clone(),
            helpers: self.record.helpers.clone(),
            summary: self.integration_summary(),
            coordinator: me.clone(),
        };
        tokio::spawn(async move {
            let coordinator = pass.coordinator.clone();
            let (merges, isolated) = pass.merge(ready).await;
            let _ = coordinator.tell(MergeDone { merges, isolated }).await;
        });
        true
    }

    /// What the integration branch holds so far, for fixers and mergers: each merged worker's
    /// summary.
    fn integration_summary(&self) -> String {
        let merged: Vec<String> = self
            .record
            .workers
            .iter()
            .filter(|w| w.status == WorkerStatus::Merged)
            .map(|w| {
                let summary = w.report.as_ref().map_or("", |r| r.summary.as_str());
                format!("{} ({}): {}", w.id, w.title, summary.trim())
            })
            .collect();
        if merged.is_empty() {
            "(nothing merged yet: the base commit)".into()
        } else {
            merged.join("\n")
        }
    }

    /// A merge pass ended: its helpers join the record (their tokens count against the
    /// budget), each step is recorded, the queue goes on.
    async fn on_merge_done(&mut self, me: &ActorRef<Self>, done: MergeDone) {
        let MergeDone { merges, isolated } = done;
        let pass = std::mem::take(&mut self.merging);
        self.record.verify_activity = None;
        match isolated {
            Some(Isolated::Flaky { batch }) => {
                self.emit(SwarmEvent::Notice {
                    message: format!(
                        "flaky verification: batch {batch} failed, then each part passed on retry"
                    ),
                });
                self.record.flaky_verifications.push(batch);
            }
            Some(Isolated::Culprit { worker, batch }) => self.emit(SwarmEvent::Notice {
                message: format!("[{worker}] isolated as the culprit of batch {batch}"),
            }),
            None => {}
        }
        for index in pass {
            // Workers of the pass it did not get to (after a culprit, or stopped) are ready
            // again.
            let untouched = !merges.iter().any(|(i, _)| *i == index);
            if untouched && self.record.workers[index].status == WorkerStatus::Verifying {
                self.record.workers[index].last_action = "waiting to merge".into();
                self.set_status(index, WorkerStatus::Finished);
            }
        }
        tracing::debug!(merged = merges.len(), "merge pass done");
        for (index, result) in merges {
            for helper in result.helpers {
                // What streamed in was counted already; only the rest (none, normally) is added.
                self.count_helper_usage(&helper.id, helper.usage);
                self.counted_helper_usage.remove(&helper.id);
                self.record.helpers.push(helper);
            }
            self.record.workers[index].fix_round = None;
            self.record_merge(index, result.step);
        }
        self.check_budget();
        self.start_next_merge(
            me,
            self.cancelled.is_some() && !self.run.merge_policy.verifies(),
        );
        self.schedule(me).await;
        self.publish_snapshot(true);
        self.maybe_finish(me).await;
    }

    /// Records what merging worker `index` did; a merged worker's worktree and branch go.
    fn record_merge(&mut self, index: usize, step: MergeStep) {
        let worker = self.record.workers[index].id.clone();
        let command = self.run.verifier.as_ref().map(|v| v.command.clone());
        match step {
            MergeStep::Conflict { files } => {
                self.record.workers[index].conflicts = files.clone();
                self.emit(SwarmEvent::MergeConflict { worker, files });
                self.set_status(index, WorkerStatus::Conflict);
                self.scheduler.finish(index, false);
            }
            MergeStep::Merged { commit, verdict } => {
                self.record.workers[index].last_action =
                    format!("merged as {}", &commit.to_string()[..12]);
                if let (Some(verdict), Some(command)) = (verdict, &command) {
                    self.record.workers[index].verification = Some(verdict.render(command));
                    self.record.final_verdict = Some(verdict);
                }
                self.emit(SwarmEvent::Merged {
                    worker,
                    commit: commit.to_string(),
                });
                self.set_status(index, WorkerStatus::Merged);
                self.scheduler.finish(index, true);
                self.remove_merged_worktree(index);
            }
            MergeStep::VerifyFailed { verdict, .. } if self.run.cancel.is_cancelled() => {
                // Not judged: the run stopped under it. Back to the queue for `swarm resume`.
                tracing::info!(worker, ?verdict, "merge verification interrupted");
                self.set_status(index, WorkerStatus::Finished);
            }
            MergeStep::VerifyFailed { verdict, output } => {
                let line = command.as_deref().map(|c| verdict.render(c));
                self.emit(SwarmEvent::Notice {
                    message: format!(
                        "[{worker}] not merged: {}",
                        line.as_deref().unwrap_or("verification failed")
                    ),
                });
                let w = &mut self.record.workers[index];
                w.verification = line;
                w.verify_output = Some(output);
                self.set_status(index, WorkerStatus::VerifyFailed);
                self.scheduler.finish(index, false);
            }
            MergeStep::Failed(e) => {
                let report = self.record.workers[index]
                    .report
                    .get_or_insert_with(Default::default);
                report.error = Some(format!("merge failed: {e}"));
                self.emit(SwarmEvent::Notice {
                    message: format!("[{worker}] merge failed: {e}"),
                });
                self.set_status(index, WorkerStatus::Failed);
                self.scheduler.finish(index, false);
            }
        }
    }

    /// A merged worker's worktree and branch are removed at once (its commits are in the
    /// integration branch), in the background: the merge queue and the scheduler go on
    /// meanwhile; the run waits for every removal before it reports that it finished. The
    /// transcript stays. Anything unexpected (dirty files, unmerged commits) keeps them and is
    /// reported.
    fn remove_merged_worktree(&mut self, index: usize) {
        let ticket = self.park_ticket(index);
        let worker = &self.record.workers[index];
        // Its fixers' and merger's worktrees and branches go with it (their commits are merged
        // too; a branch with unmerged commits is kept and reported).
        let work: Vec<MergedWork> = std::iter::once(MergedWork::from(worker))
            .chain(
                self.record
                    .helpers
                    .iter()
                    .filter(|h| h.worker == worker.id)
                    .map(|h| MergedWork {
                        id: h.id.clone(),
                        worktree: h.worktree.clone(),
                        branch: h.branch.clone(),
                    }),
            )
            .collect();
        self.spawn_removals(ticket, work);
    }

    /// Removes `work` in the background (after parking the worktree of `ticket` as a spare);
    /// when nothing is parked and no subtask waits to start, later
    /// ([`Self::deferred_removals`]).
    fn spawn_removals(&mut self, ticket: Option<super::spares::ParkTicket>, work: Vec<MergedWork>) {
        if ticket.is_none() && !self.scheduler.has_queued() {
            self.deferred_removals.push(work);
            return;
        }
        let integration = self.record.integration_branch.clone();
        let run = self.run.clone();
        self.cleanups.push(tokio::task::spawn_blocking(move || {
            if let Some(ticket) = ticket {
                park(&run, ticket);
            }
            remove_and_report(&run, &work, &integration);
        }));
    }

    /// Starts the deferred removals (each worker's on a blocking thread of its own, as
    /// [`Self::spawn_removals`] would) once `go` is cancelled; the handle of the task that waits
    /// for them all.
    fn start_deferred_removals(&mut self, go: CancellationToken) -> tokio::task::JoinHandle<()> {
        let deferred = std::mem::take(&mut self.deferred_removals);
        let integration = self.record.integration_branch.clone();
        let run = self.run.clone();
        tokio::spawn(async move {
            if deferred.is_empty() {
                return;
            }
            go.cancelled().await;
            let removals: Vec<_> = deferred
                .into_iter()
                .map(|work| {
                    let (run, integration) = (run.clone(), integration.clone());
                    tokio::task::spawn_blocking(move || {
                        remove_and_report(&run, &work, &integration);
                    })
                })
                .collect();
            for removal in removals {
                if let Err(e) = removal.await {
                    tracing::error!(error = %e, "removing a merged worktree stopped");
                }
            }
        })
    }

    /// Releases what the worker slots hold for this run elsewhere (a distributed run's NATS
    /// consumer, queued subtasks and fetched branches: [`super::slots::WorkerSlots::close`])
    /// once `go` is cancelled — the closing turn's request is under way: every worker has
    /// reported, and the release overlaps the model's answer instead of following it.
    fn start_releasing_slots(&self, go: CancellationToken) -> tokio::task::JoinHandle<()> {
        let (slots, run_id) = (self.run.worker_slots.clone(), self.record.run_id.clone());
        tokio::spawn(async move {
            go.cancelled().await;
            slots.close(&run_id).await;
        })
    }

    /// The hold to park worker `index`'s merged worktree as a spare, while subtasks wait to
    /// start and its worktree is held by nobody; `None`: it is removed as usual.
    fn park_ticket(&self, index: usize) -> Option<super::spares::ParkTicket> {
        if !self.scheduler.has_queued() {
            return None;
        }
        let pool = self.run.worktree_pool.as_ref()?;
        let worktree = &self.record.workers[index].worktree;
        match pool.begin_park(worktree, self.waiting_for_slots()) {
            Ok(ticket) => Some(ticket),
            Err(e) => {
                tracing::debug!(error = %e, "not parking a merged worktree");
                None
            }
        }
    }

    async fn maybe_finish(&mut self, me: &ActorRef<Self>) {
        if self.done.is_none() || !self.workers.is_empty() || !self.merging.is_empty() {
            return;
        }
        if self.cancelled.is_none() && self.run.cancel.is_cancelled() {
            // Stopped ([`RunContext::stop`]): its [`CancelRun`], in the mailbox, ends the run.
            return;
        }
        if self.cancelled.is_none() && self.baseline_pending() {
            // The record gets its baseline ([`BaselineDone`] finishes the run then).
            return;
        }
        if self.cancelled.is_some() {
            // Work that completed before the stop is still merged when nothing needs verifying
            // (a verification would be cancelled at once: those branches wait for resume).
            if !self.run.merge_policy.verifies() && self.start_next_merge(me, true) {
                return;
            }
        } else if !self.scheduler.is_finished() {
            return;
        }
        if self.cancelled.is_some()
            && let Some(baseline) = &self.run.baseline
        {
            // Its command's process group is gone before the run reports that it stopped.
            baseline.stop_and_wait().await;
        }
        // The last removals run while the coordinator writes its summary (it reads the
        // record, not the worktrees); the run reports that it finished once both are done.
        self.close_worktree_pool();
        let mut cleanups = std::mem::take(&mut self.cleanups);
        if let Some(pool) = &self.run.worktree_pool {
            cleanups.extend(pool.take_makers());
        }
        let go = CancellationToken::new();
        cleanups.push(self.start_deferred_removals(go.clone()));
        cleanups.push(self.start_releasing_slots(go.clone()));
        if self.cancelled.is_none() {
            tracing::debug!("closing turn");
            self.synthesize(move || go.cancel()).await;
        } else {
            go.cancel();
        }
        for cleanup in cleanups {
            let _ = cleanup.await;
        }
        self.finish_run().await;
    }

    /// Tells this actor when the run's baseline ends ([`BaselineDone`]), unless the record has
    /// it already.
    fn watch_baseline(&self, me: &ActorRef<Self>) {
        if self.record.baseline.is_some() {
            return;
        }
        if let Some(handle) = self.run.baseline.clone() {
            let me = me.clone();
            tokio::spawn(async move {
                let run = handle.wait().await;
                let _ = me.tell(BaselineDone { run }).await;
            });
        }
    }

    /// Whether verification is on and the baseline has not been recorded yet.
    fn baseline_pending(&self) -> bool {
        self.run.baseline.is_some() && self.record.baseline.is_none() && !self.baseline_ended
    }

    /// The baseline ended: recorded and announced, unless it was cancelled (a resumed run runs
    /// it again).
    fn record_baseline(&mut self, run: Option<crate::verify::VerifyRun>) {
        self.baseline_ended = true;
        let Some(run) = run else {
            self.emit(SwarmEvent::Notice {
                message: "baseline: the verification of the base commit stopped without a result"
                    .into(),
            });
            return;
        };
        if run.outcome == crate::verify::VerifyOutcome::Cancelled {
            return;
        }
        self.emit(SwarmEvent::Notice {
            message: super::summary::baseline_line(&run),
        });
        self.record.baseline = Some(run);
        self.publish_snapshot(true);
    }

    /// The coordinator's closing turn: the run's summary ([`super::synthesis`]); its tokens
    /// count against the run's.
    /// `on_request`: called once its model request is under way.
    async fn synthesize(&mut self, on_request: impl FnOnce() + Send + 'static) {
        self.emit(SwarmEvent::Notice {
            message: "coordinator: writing the run's summary".into(),
        });
        let closing = super::synthesis::synthesize(&self.run, &self.record, &self.plan, on_request);
        match closing.await {
            Ok((text, usage)) => {
                self.record.usage.add(usage);
                self.emit_usage(super::planning::COORDINATOR_LABEL.into(), usage);
                self.record.synthesis = Some(text);
            }
            Err(_) if self.cancelled.is_none() && self.run.cancel.is_cancelled() => {
                // Stopped during the closing turn: the run ends as cancelled, now (its
                // [`CancelRun`] is still in the mailbox).
                let reason = self.run.stop_reason().unwrap_or("cancelled").to_string();
                self.emit(SwarmEvent::Notice {
                    message: format!("cancelling: {reason}; the run's summary was not written"),
                });
                self.cancelled = Some(reason);
            }
            Err(e) => {
                self.emit(SwarmEvent::Notice {
                    message: format!("coordinator: no summary: {e}"),
                });
            }
        }
    }

    /// Records how the run ended and reports it once `run.json` has the final record.
    async fn finish_run(&mut self) {
        self.record.status = if self.cancelled.is_some() {
            RunStatus::Cancelled
        } else {
            RunStatus::Finished
        };
        self.record.error = self.cancelled.clone();
        self.record.summary = Some(super::summary::final_summary(&self.record));
        if let Some(saver) = self.saver.take()
            && let Err(e) = saver.finish(self.record.clone()).await
        {
            self.record_not_saved(&e);
        }
        self.publish_snapshot(false);
        if let Some(done) = self.done.take() {
            let _ = done.send(self.record.clone());
        }
    }

    /// The final record could not be written (`e`): a note says so, and a run that would have
    /// ended `finished` ends `failed` with why, so its result and exit status do not claim an
    /// end that `swarm status` will not show (the file keeps the last record saved: a running
    /// run, `interrupted` once this process is gone). A cancelled run stays cancelled (exit
    /// status 130, its reason kept): the note is its word on the record.
    fn record_not_saved(&mut self, e: &super::state::RunStoreError) {
        self.emit(SwarmEvent::Notice {
            message: format!(
                "could not record the run's end: {e}; `ahelper swarm resume {}` records it once run.json can be written",
                self.record.run_id
            ),
        });
        if self.record.status == RunStatus::Cancelled {
            return;
        }
        self.record.status = RunStatus::Failed;
        self.record.error = Some(format!(
            "the run's end could not be recorded: {e}; its merges are on {}, and `ahelper swarm resume {}` records its end once run.json can be written",
            self.record.integration_branch, self.record.run_id
        ));
        self.record.summary = Some(super::summary::final_summary(&self.record));
    }

    /// Applies one progress report of a running worker to its record and tells renderers.
    fn record_progress(&mut self, msg: Progress) {
        match msg {
            Progress::Status { index, status } => {
                if self.workers.contains_key(&index) {
                    self.set_status(index, status);
                }
            }
            Progress::Denied {
                index,
                action,
                reason,
                allow_rule,
            } => {
                let w = &mut self.record.workers[index];
                w.note_refusal(&action, allow_rule.as_deref());
                let worker = w.id.clone();
                self.emit(SwarmEvent::PermissionDenied {
                    worker,
                    action,
                    reason,
                    allow_rule,
                });
            }
            Progress::Turn { index, turn } => {
                let earlier = self.earlier.get(&index).map_or(0, |e| e.turns);
                let w = &mut self.record.workers[index];
                w.turns = earlier + turn;
                w.last_action = format!("waiting for the model (turn {turn})");
                w.action_started_at = None;
                let worker = w.id.clone();
                self.emit(SwarmEvent::WorkerTurn { worker, turn });
            }
            Progress::ToolCall { index, action } => {
                let w = &mut self.record.workers[index];
                w.tool_calls += 1;
                w.last_action = match action.strip_prefix("run_command ") {
                    Some(command) => format!("running `{command}`"),
                    None => action.clone(),
                };
                w.action_started_at = Some(chrono::Utc::now().to_rfc3339());
                let worker = w.id.clone();
                self.emit(SwarmEvent::WorkerToolCall { worker, action });
            }
            Progress::ToolCallDone { index } => {
                let w = &mut self.record.workers[index];
                w.action_started_at = None;
                w.last_action = "waiting for the model".into();
            }
            Progress::Changed { index, files } => {
                self.record.workers[index].changed_files = files;
            }
            Progress::Usage { index, total } => {
                self.account_usage(index, total);
                self.check_budget();
            }
            Progress::Machine {
                index,
                machine,
                state,
            } => self.note_machine_state(index, machine, state),
            Progress::Retry { index, message } => {
                let w = &mut self.record.workers[index];
                w.last_action = message.clone();
                let worker = w.id.clone();
                self.emit(SwarmEvent::WorkerRetry { worker, message });
            }
            Progress::Phase {
                index,
                status,
                fix_round,
            } => {
                let merging = self.merging.contains(&index);
                let w = &mut self.record.workers[index];
                w.fix_round = fix_round;
                w.action_started_at = None;
                w.last_action = match (status, merging) {
                    (WorkerStatus::Verifying, true) => "verifying its merge candidate".into(),
                    (WorkerStatus::Verifying, false) => "verifying its worktree".into(),
                    (WorkerStatus::Fixing, true) => "a fixer works on its merge".into(),
                    (WorkerStatus::Fixing, false) => "fixing new failures".into(),
                    _ => status.label().to_string(),
                };
                self.record.verify_activity = (merging && status == WorkerStatus::Verifying)
                    .then(|| format!("verifying {}'s merge candidate", w.id));
                self.set_status(index, status);
            }
            Progress::Queue { activity } => {
                if !self.merging.is_empty() {
                    self.record.verify_activity = Some(activity);
                }
            }
        }
    }
}

impl Message<Progress> for CoordinatorActor {
    type Reply = ();
    async fn handle(&mut self, msg: Progress, _ctx: &mut Context<Self, Self::Reply>) {
        // A worker's new state is written to run.json at once (it is rare, and after a crash
        // `swarm status` must show the state the worker was really in); other progress is
        // saved at most once a second.
        let state_changed = matches!(msg, Progress::Status { .. });
        let running = matches!(
            msg,
            Progress::Status {
                status: WorkerStatus::Running,
                ..
            }
        );
        self.record_progress(msg);
        if running {
            // The starting workers may all be running now: spares for the next ones.
            self.replenish_spares();
        }
        self.publish_snapshot(state_changed);
    }
}

impl Message<HelperUsage> for CoordinatorActor {
    type Reply = ();
    async fn handle(&mut self, msg: HelperUsage, _ctx: &mut Context<Self, Self::Reply>) {
        self.count_helper_usage(&msg.helper, msg.total);
        self.check_budget();
        self.publish_snapshot(false);
    }
}

impl Message<BaselineDone> for CoordinatorActor {
    type Reply = ();
    async fn handle(&mut self, msg: BaselineDone, ctx: &mut Context<Self, Self::Reply>) {
        let me = ctx.actor_ref().clone();
        self.record_baseline(msg.run);
        if self.done.is_some() {
            self.maybe_finish(&me).await;
        }
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

impl Message<WorkersDone> for CoordinatorActor {
    type Reply = ();
    async fn handle(&mut self, msg: WorkersDone, ctx: &mut Context<Self, Self::Reply>) {
        let me = ctx.actor_ref().clone();
        self.on_workers_done(&me, msg.done).await;
    }
}

impl Message<MergeDone> for CoordinatorActor {
    type Reply = ();
    async fn handle(&mut self, msg: MergeDone, ctx: &mut Context<Self, Self::Reply>) {
        let me = ctx.actor_ref().clone();
        self.on_merge_done(&me, msg).await;
    }
}

impl Message<CancelRun> for CoordinatorActor {
    type Reply = ();
    async fn handle(&mut self, msg: CancelRun, ctx: &mut Context<Self, Self::Reply>) {
        let me = ctx.actor_ref().clone();
        if self.cancelled.is_none() {
            self.emit(SwarmEvent::Notice {
                message: format!("cancelling: {}", msg.reason),
            });
            self.cancel_all(msg.reason);
            for w in &mut self.record.workers {
                if w.status == WorkerStatus::Queued {
                    w.last_action = "not started (run cancelled)".into();
                }
            }
            self.publish_snapshot(true);
            self.maybe_finish(&me).await;
        }
    }
}

/// What a merge pass needs, moved into its task ([`CoordinatorActor::start_next_merge`]).
struct MergePass {
    queue: MergeQueue,
    run: Arc<RunContext>,
    /// The baseline when the record has it already.
    recorded_baseline: Option<crate::verify::VerifyRun>,
    /// Helpers of the run so far.
    helpers: Vec<super::state::HelperRecord>,
    /// What the integration branch holds so far.
    summary: String,
    coordinator: ActorRef<CoordinatorActor>,
}

impl MergePass {
    /// Merges `ready` (plan order) by the run's [`MergePolicy`]: unverified, the workers that
    /// merge cleanly one after another in one pass when there are several, else the first
    /// through the gate; batched, all of them as one verified batch
    /// ([`MergeQueue::merge_batch`]). A panic of the merge becomes a failed merge of the first
    /// worker. The merges and the batch whose verification turned out flaky.
    async fn merge(
        self,
        ready: Vec<(usize, WorkerRecord)>,
    ) -> (Vec<(usize, GatedMerge)>, Option<Isolated>) {
        let index = ready[0].0;
        let merging = tokio::spawn(async move {
            let merged = self.clean_run(&ready).await;
            if !merged.is_empty() {
                return (merged, None);
            }
            let batch = self.gated(&ready).await;
            (batch.merges, batch.isolated)
        });
        merging.await.unwrap_or_else(|e| {
            let step = MergeStep::Failed(e.into());
            let helpers = Vec::new();
            (vec![(index, GatedMerge { step, helpers })], None)
        })
    }

    /// The clean merges of a run of ready workers ([`MergeQueue::merge_clean_run`]); empty
    /// when verification is on, only one worker is ready, or the first does not merge cleanly
    /// (the gate deals with it and says why).
    async fn clean_run(&self, ready: &[(usize, WorkerRecord)]) -> Vec<(usize, GatedMerge)> {
        if self.run.merge_policy.verifies() || ready.len() < 2 {
            return Vec::new();
        }
        let workers: Vec<WorkerRecord> = ready.iter().map(|(_, w)| w.clone()).collect();
        let tips = match self.queue.merge_clean_run(&workers).await {
            Ok(tips) => tips,
            Err(e) => {
                tracing::debug!(error = %e, "a run of merges failed; merging one at a time");
                return Vec::new();
            }
        };
        ready
            .iter()
            .zip(tips)
            .map(|((index, _), commit)| {
                let step = MergeStep::Merged {
                    commit,
                    verdict: None,
                };
                let helpers = Vec::new();
                (*index, GatedMerge { step, helpers })
            })
            .collect()
    }

    /// The merge of `ready` through the gate: the first alone ([`MergeQueue::merge_gated`]),
    /// or all of them as a batch ([`MergeQueue::merge_batch`]) when the policy batches.
    async fn gated(&self, ready: &[(usize, WorkerRecord)]) -> BatchMerge {
        let (index, worker) = (ready[0].0, &ready[0].1);
        // The first verification waits for the baseline (it may still run: the workers did
        // not wait for it).
        let baseline = match &self.recorded_baseline {
            Some(run) => Some(run.clone()),
            None => self.run.wait_for_baseline().await,
        };
        let gate = Gate {
            run: &self.run,
            verifier: self.run.verifier.as_deref(),
            baseline: baseline.as_ref(),
            merge_fix_attempts: self.run.merge_fix_attempts,
            integration_summary: &self.summary,
            helpers_before: &self.helpers,
            index,
            coordinator: self.coordinator.clone(),
        };
        if ready.len() > 1 && matches!(self.run.merge_policy, MergePolicy::Batched { .. }) {
            return self.queue.merge_batch(ready, &gate).await;
        }
        BatchMerge {
            merges: vec![(index, self.queue.merge_gated(worker, &gate).await)],
            isolated: None,
        }
    }
}

/// Removes merged `work` ([`remove_merged_work`]); what was kept is a notice.
fn remove_and_report(run: &RunContext, work: &[MergedWork], integration: &str) {
    for (id, e) in remove_merged_work(&run.git_lock, &run.repo_root, work, integration) {
        run.publish(SwarmEvent::Notice {
            message: format!("[{id}] merged, but its worktree/branch were kept: {e}"),
        });
    }
}

/// Parks a merged worker's clean worktree as a spare for the next worker
/// ([`git::park_worktree`]); when that fails it is removed as usual afterwards.
fn park(run: &RunContext, ticket: super::spares::ParkTicket) {
    let base = super::cleanup::worktree_base_of(ticket.worktree());
    match git::park_worktree(
        &run.git_lock,
        &run.repo_root,
        &base,
        ticket.worktree(),
        ticket.spare(),
    ) {
        Ok(_) => {
            if let Some(spare) = ticket.parked() {
                // The pool closed meanwhile.
                super::spares::remove_spare(&run.git_lock, &run.repo_root, &spare);
            }
        }
        Err(e) => tracing::debug!(error = %e, "could not park a merged worktree; removing it"),
    }
}
