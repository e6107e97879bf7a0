//! Worker slots: how the coordinator brings a worker to life. [`CoordinatorActor::start_worker`]
//! hands a [`WorkerSpec`] to the run's [`WorkerSlots`] and keeps the [`RunningWorker`] it gets
//! back; everything else sees a worker only through [`Progress`] and [`WorkerDone`] messages.
//!
//! Two implementations: [`LocalSlots`] (a [`WorkerActor`] linked to the coordinator, in this
//! process) and [`super::remote::NatsSlots`] (a subtask message on a NATS JetStream work queue,
//! run by `ahelper worker` on another machine).
//!
//! [`Progress`]: super::coordinator::Progress
//! [`WorkerDone`]: super::coordinator::WorkerDone

use super::coordinator::CoordinatorActor;
use super::run::RunContext;
use super::worker::{CancelWorker, WorkerActor, WorkerArgs, WorkerSpec};
use kameo::prelude::*;
use std::sync::Arc;

/// A worker the coordinator started and has not heard the end of.
pub trait RunningWorker: Send + Sync {
    /// Asks it to stop its agent loop; it then commits what it has (`wip`) and reports.
    /// Never waits.
    fn cancel(&self);
    /// The id of the local actor linked to the coordinator (its death is a failed worker),
    /// `None` for a worker elsewhere.
    fn actor_id(&self) -> Option<ActorId>;
}

/// Where workers run.
#[async_trait::async_trait]
pub trait WorkerSlots: Send + Sync {
    /// Starts the worker `spec` for `coordinator`, which it tells its progress and its end.
    async fn start(
        &self,
        coordinator: &ActorRef<CoordinatorActor>,
        run: Arc<RunContext>,
        spec: WorkerSpec,
    ) -> Box<dyn RunningWorker>;

    /// Run `run_id` ended in this process (every worker it started has reported): releases
    /// what the slots hold for it elsewhere. Never fails; problems are logged.
    async fn close(&self, _run_id: &str) {}
}

/// Workers in this process: one [`WorkerActor`] per subtask, linked to the coordinator, holding
/// a lease on its worktree directory from the run's [`super::spares::WorktreePool`] (with a
/// spare worktree to recycle when one is ready).
#[derive(Debug, Clone, Copy, Default)]
pub struct LocalSlots;

#[async_trait::async_trait]
impl WorkerSlots for LocalSlots {
    async fn start(
        &self,
        coordinator: &ActorRef<CoordinatorActor>,
        run: Arc<RunContext>,
        spec: WorkerSpec,
    ) -> Box<dyn RunningWorker> {
        let lease = run
            .worktree_pool
            .as_ref()
            .map(|pool| pool.lease(spec.index, spec.worktree.clone()))
            .transpose();
        let worker = WorkerActor::spawn_link(
            coordinator,
            WorkerArgs {
                run,
                spec,
                coordinator: coordinator.clone(),
                lease,
            },
        )
        .await;
        Box::new(worker)
    }
}

impl RunningWorker for ActorRef<WorkerActor> {
    fn cancel(&self) {
        let _ = self.tell(CancelWorker).try_send();
    }

    fn actor_id(&self) -> Option<ActorId> {
        Some(self.id())
    }
}
