//! `ahelper worker`: a long-running process on a worker machine that pulls subtasks from the
//! JetStream work queue and runs each exactly as a local worker runs
//! ([`run_leased_worker_catching_panics`]: same caps, sandbox, transcript), in a worktree of a cached
//! clone of the run's repository, then pushes its branch and reports.
//!
//! Per subtask ([`Subtask::run`]): validate the message (a forged one is terminated, never
//! run) → say `accepted` → fetch the run's refs into the clone (one per repository URL under
//! the work dir; not when it has the start commit and no earlier attempt can have pushed) → the
//! worktree at the start commit (a spare of the clone turned into it when one is ready), or at
//! the pushed `wip` of an earlier attempt → the agent loop, its progress and transcript lines
//! streamed as events → push `ahelper/<run>/<worker>` → `done` and ack. While it runs, JetStream is told it is in
//! progress; a machine that dies stops saying so and the subtask is redelivered. On stop
//! (SIGTERM) running subtasks are cancelled, commit and push `wip`, and are handed back (nak).
//!
//! Spare worktrees ([`WorktreePool::for_clone`], one pool per clone for the life of the
//! process, in `worktrees/<repo>/.spares`): when a run is announced, its clone is prepared and
//! spares are made at its base commit for every slot; each subtask leases one (never one held
//! by another); once its worktree is ready, the pool makes spares again in the background for
//! the subtasks waiting in the queue and, once no subtask of the machine is starting, one for a
//! subtask published later, when that is cheap. A spare made
//! for an earlier run is reset to the subtask's start commit when used. Stopping removes them;
//! a process that starts removes those an earlier one left.

use super::batches::Announced;
use super::connect::{HEARTBEAT_EVERY, Nats, NatsError, PROGRESS_EVERY};
use super::pusher::{BranchPush, Pusher};
use super::wire::{
    self, EventBody, EventMessage, RunAnnouncement, SubtaskMessage, WIRE_VERSION, WireError,
    check_machine,
};
use crate::config::Config;
use crate::model::ModelClient;
use crate::sandbox_os::CommandSandbox;
use crate::swarm::coordinator::Progress;
use crate::swarm::run::{RemoteRunParts, RunContext};
use crate::swarm::spares::{self, WorktreeLease, WorktreePool};
use crate::swarm::state::{WorkerReport, WorkerStatus};
use crate::swarm::worker::{
    ProgressSink, StartInstructions, WorkerSpec, run_leased_worker_catching_panics,
};
use crate::swarm::{GitTaskError, create_parent_dir, git_task};
use ahelper_worktrees as git;
use async_nats::jetstream::{AckKind, Message};
use futures::StreamExt;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

/// Transcript bytes per event (NATS' default message limit is 1 MiB).
const TRANSCRIPT_BATCH_BYTES: usize = 256 * 1024;
/// How long one pull request waits on the server for a subtask.
const PULL_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// How `ahelper worker` runs.
pub struct HostOptions {
    /// Subtasks at once (≥ 1).
    pub concurrency: usize,
    /// Where clones, worktrees and transcripts live.
    pub work_dir: PathBuf,
    /// This machine's name in events and heartbeats (validated).
    pub name: String,
    /// What this machine accepts from coordinators.
    pub limits: super::limits::WorkerLimits,
}

/// This machine's model and configuration (API keys stay here).
pub struct HostModel {
    /// This machine's configuration.
    pub config: Config,
    /// Its model client.
    pub client: Arc<dyn ModelClient>,
    /// Its model name.
    pub model: String,
}

/// How `ahelper worker` ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostOutcome {
    /// Stopped on request; running subtasks finished or were handed back.
    Stopped {
        /// Subtasks it ran to the end.
        completed: u64,
        /// Subtasks it handed back.
        released: u64,
    },
}

/// `ahelper worker` could not run.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// NATS failed.
    #[error(transparent)]
    Nats(#[from] NatsError),
    /// `--name` has the wrong format.
    #[error("{0}; pass another --name")]
    Name(#[from] WireError),
    /// No coordinator key is trusted or no repository allowed: every subtask would be refused.
    #[error(
        "`ahelper worker` acts only for coordinators it trusts and on repositories it allows: give --trust-coordinator KEY (the key `ahelper swarm key` prints on the coordinator's machine) and --allow-repo URL"
    )]
    NoLimits,
    /// The work dir could not be created.
    #[error("cannot create the work dir {path}: {source}; pass a writable --work-dir")]
    WorkDir {
        /// The directory.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
}

/// What every subtask of this process shares.
struct Host {
    nats: Nats,
    options: HostOptions,
    model: HostModel,
    owner: git::GitOwner,
    /// One fetch at a time per clone.
    fetch_lock: tokio::sync::Mutex<()>,
    /// Finished branches, pushed together when they finish together.
    pusher: Pusher,
    /// The work queue's consumer (its length decides how many spares are made again).
    queue: async_nats::jetstream::consumer::PullConsumer,
    /// Spare worktrees per cached clone (by repository URL), made when a run is announced.
    spares: tokio::sync::Mutex<HashMap<String, Arc<WorktreePool>>>,
    /// Subtasks pulled whose worktree may still be being made (their agent is not past its
    /// first model reply).
    starting: AtomicUsize,
    /// This machine's command sandbox, probed once ([`RemoteRunParts::sandbox`]).
    sandbox: Arc<CommandSandbox>,
    /// Project instructions at start commits, shared by the subtasks.
    start_instructions: Arc<StartInstructions>,
    stop: CancellationToken,
}

/// Runs until `stop` is cancelled, then lets running subtasks hand themselves back.
///
/// # Errors
/// [`HostError`] when it cannot start (bad name, work dir, NATS).
pub async fn serve(
    nats: Nats,
    options: HostOptions,
    model: HostModel,
    stop: CancellationToken,
) -> Result<HostOutcome, HostError> {
    check_machine(&options.name)?;
    if options.limits.trusted.is_empty() || options.limits.repos.is_empty() {
        return Err(HostError::NoLimits);
    }
    std::fs::create_dir_all(&options.work_dir).map_err(|source| HostError::WorkDir {
        path: options.work_dir.clone(),
        source,
    })?;
    let consumer = nats.workers_consumer().await?;
    nats.events_stream().await?;
    let heartbeats = nats.heartbeats().await?;
    let sandbox = CommandSandbox::new(&model.config.sandbox, &options.work_dir);
    let host = Arc::new(Host {
        nats,
        options,
        model,
        owner: git::GitOwner::new(),
        fetch_lock: tokio::sync::Mutex::new(()),
        pusher: Pusher::start(),
        spares: tokio::sync::Mutex::default(),
        starting: AtomicUsize::new(0),
        sandbox: Arc::new(sandbox),
        start_instructions: Arc::default(),
        queue: consumer.clone(),
        stop,
    });
    let beating = tokio::spawn(heartbeat(
        heartbeats,
        host.options.name.clone(),
        host.stop.clone(),
    ));
    match host.nats.client.subscribe(wire::RUN_SUBJECTS).await {
        Ok(runs) => {
            tokio::spawn(prepare_announced_runs(host.clone(), runs));
        }
        Err(error) => {
            tracing::warn!(%error, "not listening to run announcements; clones are prepared on each run's first subtask")
        }
    }
    let slots = Arc::new(tokio::sync::Semaphore::new(host.options.concurrency.max(1)));
    let mut tasks = tokio::task::JoinSet::new();
    while !host.stop.is_cancelled() {
        let Some(permits) = free_slots(&slots, &host.stop).await else {
            break;
        };
        pull_into(&host, &consumer, permits, &mut tasks).await;
    }
    let (mut completed, mut released) = (0, 0);
    while let Some(done) = tasks.join_next().await {
        match done {
            Ok(SubtaskOutcome::Completed) => completed += 1,
            Ok(SubtaskOutcome::Released) => released += 1,
            _ => {}
        }
    }
    beating.abort();
    host.remove_spares().await;
    Ok(HostOutcome::Stopped {
        completed,
        released,
    })
}

/// Every free slot, once there is one; `None` on stop.
async fn free_slots(
    slots: &Arc<tokio::sync::Semaphore>,
    stop: &CancellationToken,
) -> Option<Vec<tokio::sync::OwnedSemaphorePermit>> {
    let first = tokio::select! {
        p = slots.clone().acquire_owned() => p.expect("the semaphore is never closed"),
        () = stop.cancelled() => return None,
    };
    let mut permits = vec![first];
    while let Ok(more) = slots.clone().try_acquire_owned() {
        permits.push(more);
    }
    Some(permits)
}

/// One pull request for as many subtasks as `permits` has free slots, answered by the server
/// as soon as subtasks are published, or ended after [`PULL_WAIT`] (so a stop is noticed):
/// each subtask that arrives starts at once in one of the slots; the slots left free are
/// given back when the request ends.
async fn pull_into(
    host: &Arc<Host>,
    consumer: &async_nats::jetstream::consumer::PullConsumer,
    mut permits: Vec<tokio::sync::OwnedSemaphorePermit>,
    tasks: &mut tokio::task::JoinSet<SubtaskOutcome>,
) {
    let asked = std::time::Instant::now();
    // `batch` waits on the server; `fetch` would return at once when the queue is empty.
    let pull = consumer
        .batch()
        .max_messages(permits.len())
        .expires(PULL_WAIT)
        .messages();
    let mut batch = match pull.await {
        Ok(batch) => batch,
        Err(error) => {
            tracing::debug!(%error, "pulling subtasks failed");
            // An unreachable server fails at once: do not spin.
            if asked.elapsed() < PULL_WAIT / 2 {
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
            return;
        }
    };
    while !permits.is_empty() {
        let next = tokio::select! {
            next = batch.next() => next,
            () = host.stop.cancelled() => return,
        };
        let message = match next {
            Some(Ok(message)) => message,
            Some(Err(error)) => {
                tracing::debug!(%error, "a pull request ended with an error");
                if asked.elapsed() < PULL_WAIT / 2 {
                    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                }
                return;
            }
            None => return,
        };
        let permit = permits.pop();
        let host = host.clone();
        tasks.spawn(async move {
            let outcome = host.run_message(message).await;
            drop(permit);
            outcome
        });
    }
}

/// Prepares the clone of each announced run ([`wire::RunAnnouncement`]) ahead of its first
/// subtask, until stopped.
async fn prepare_announced_runs(host: Arc<Host>, mut runs: async_nats::Subscriber) {
    loop {
        let message = tokio::select! {
            m = runs.next() => m,
            () = host.stop.cancelled() => return,
        };
        let Some(message) = message else {
            return;
        };
        let trusted = &host.options.limits.trusted;
        let opened = RunAnnouncement::open(trusted, &message.subject, &message.payload);
        match opened {
            Ok(run) if !host.options.limits.repos.allows(&run.repo_url) => {
                tracing::warn!(subject = %message.subject, url = %run.repo_url, "refused a run announcement: its repository is not on the allow-list")
            }
            Ok(run) => {
                tokio::spawn(host.clone().prepare_clone(run));
            }
            Err(error) => {
                tracing::warn!(subject = %message.subject, %error, "refused a run announcement")
            }
        }
    }
}

/// Writes this machine's heartbeat every [`HEARTBEAT_EVERY`] until stopped.
async fn heartbeat(store: async_nats::jetstream::kv::Store, name: String, stop: CancellationToken) {
    let mut tick = tokio::time::interval(HEARTBEAT_EVERY);
    while !stop.is_cancelled() {
        let beat = serde_json::json!({"machine": name, "pid": std::process::id(), "at": crate::transcript::now_rfc3339()});
        if let Err(e) = store.put(&name, beat.to_string().into()).await {
            tracing::warn!(error = %e, "writing the heartbeat failed");
        }
        tokio::select! {
            _ = tick.tick() => {}
            () = stop.cancelled() => {}
        }
    }
}

/// How one subtask message ended on this machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SubtaskOutcome {
    /// Run to its end and acknowledged.
    Completed,
    /// Handed back to the queue (stop requested).
    Released,
    /// Refused: not a valid subtask (terminated, never redelivered).
    Refused,
}

impl Host {
    /// Makes the clone of `run`'s repository, or fetches the run's refs into it when it lacks
    /// the base commit, so that the run's first subtasks find the commit there.
    async fn prepare_clone(self: Arc<Self>, run: RunAnnouncement) {
        let clone = clone_dir(&self.options.work_dir, &run.repo_url);
        let fetching = self.fetch_lock.lock().await;
        let (url, id, base) = (
            run.repo_url.clone(),
            run.run_id.clone(),
            run.base_commit.clone(),
        );
        let prepared = git_task(move || {
            create_parent_dir(&clone)?;
            git::ensure_clone(&url, &clone)?;
            if !has_commit(&clone, &base) {
                let refs = format!("+refs/ahelper/{id}/*:refs/ahelper/{id}/*");
                git::fetch_refspecs(&clone, &url, &[refs])?;
            }
            Ok(())
        })
        .await;
        drop(fetching);
        match prepared {
            Ok(()) => {
                tracing::debug!(run = %run.run_id, "prepared the clone of an announced run");
                if let (Some(pool), Ok(base)) = (
                    self.spares_for(&run.repo_url).await,
                    git::Oid::from_str(&run.base_commit),
                ) {
                    pool.fill_at(base, self.options.concurrency.max(1));
                }
            }
            Err(error) => {
                tracing::warn!(run = %run.run_id, %error, "preparing the clone of an announced run failed; its first subtask tries again")
            }
        }
    }

    /// The spare worktrees of the clone of `url` (made on first use, once the clone exists;
    /// spares an earlier process left are removed first). `None` when the clone's lock cannot
    /// be had (workers then create their worktrees as usual).
    async fn spares_for(&self, url: &str) -> Option<Arc<WorktreePool>> {
        let mut pools = self.spares.lock().await;
        if let Some(pool) = pools.get(url) {
            return Some(pool.clone());
        }
        let clone = clone_dir(&self.options.work_dir, url);
        let lock = self.owner.lock_for(&clone).ok()?;
        let base = spares_dir(&self.options.work_dir, url);
        let (left_lock, left_clone, left_base) = (lock.clone(), clone.clone(), base.clone());
        let removed = tokio::task::spawn_blocking(move || {
            remove_left_spares(&left_lock, &left_clone, &left_base)
        })
        .await;
        if !matches!(removed, Ok(true)) {
            return None;
        }
        let pool = WorktreePool::for_clone(base, lock, clone);
        pools.insert(url.to_string(), pool.clone());
        Some(pool)
    }

    /// Subtask `msg`'s hold on its worktree directory `worktree`, with a spare of its clone
    /// when one is ready. `None`: no pool, or the directory is held by another delivery of the
    /// same subtask still running here (its worktree is then found or created as without
    /// spares, and no spare is handed to it).
    async fn lease(&self, msg: &SubtaskMessage, worktree: &Path) -> Option<WorktreeLease> {
        let pool = self.spares_for(&msg.repo_url).await?;
        let lease = match pool.lease(0, worktree.to_path_buf()) {
            Ok(lease) => lease,
            Err(error) => {
                tracing::warn!(worker = %msg.worker_id, %error, "no spare worktree for a subtask delivered twice");
                return None;
            }
        };
        Some(lease)
    }

    /// Spares of the clone of `url` for the subtasks that wait in the work queue now (of any
    /// run or machine), plus one once no subtask of this machine is starting, so that a subtask
    /// published later (the next of a run with fewer slots than subtasks, a dependent, the
    /// next run) finds one too — at most one per slot — are made in the background, when that
    /// is cheap ([`WorktreePool::replenish`]; ready ones count). Called once a subtask's
    /// worktree is ready (its agent waits on the model), not when it leases: making spares
    /// then would compete with the worktrees being made for the subtasks that just arrived.
    async fn replenish_spares(self: Arc<Self>, url: String) {
        let Some(pool) = self.spares.lock().await.get(&url).cloned() else {
            return;
        };
        let waiting = match self.queue.get_info().await {
            Ok(info) => usize::try_from(info.num_pending).unwrap_or(usize::MAX),
            Err(error) => {
                tracing::debug!(%error, "reading the work queue's length failed; no spares made");
                0
            }
        };
        let later = usize::from(self.starting.load(Ordering::SeqCst) == 0);
        tracing::debug!(waiting, later, "asked for spare worktrees");
        pool.replenish((waiting + later).min(self.options.concurrency.max(1)));
    }

    /// On stop: every clone's pool closed and its spares removed (a spare still being made is
    /// removed by its maker, awaited here).
    async fn remove_spares(&self) {
        let pools: Vec<Arc<WorktreePool>> =
            self.spares.lock().await.drain().map(|(_, p)| p).collect();
        for pool in pools {
            let Some((lock, repo)) = pool.maker_repo() else {
                continue;
            };
            let _ = spares::close_and_remove(&pool, lock, repo).await;
            for task in pool.take_makers() {
                let _ = task.await;
            }
        }
    }

    /// The subtask of `message` once it is the trusted coordinator's and within this
    /// machine's limits; `None` when refused (logged; terminated, or handed back when signed by
    /// a key this machine does not trust: another machine may trust it).
    async fn admit(&self, message: &Message) -> Option<SubtaskMessage> {
        let msg_id = message
            .headers
            .as_ref()
            .and_then(|h| h.get(async_nats::header::NATS_MESSAGE_ID))
            .map(|v| v.as_str());
        let trusted = &self.options.limits.trusted;
        let opened = SubtaskMessage::open(trusted, &message.subject, &message.payload, msg_id);
        let mut subtask = match opened {
            Ok(s) => s,
            Err(error) => {
                tracing::warn!(subject = %message.subject, %error, "refused a subtask message");
                let kind = if error.is_untrusted_key() {
                    AckKind::Nak(Some(std::time::Duration::from_secs(1)))
                } else {
                    AckKind::Term
                };
                let _ = message.ack_with(kind).await;
                return None;
            }
        };
        match self.options.limits.apply(&mut subtask) {
            Ok(narrowed) => {
                if !narrowed.tools_dropped.is_empty() || narrowed.ask_refused {
                    tracing::warn!(worker = %subtask.worker_id, dropped = ?narrowed.tools_dropped, ask_refused = narrowed.ask_refused, "narrowed a subtask to this worker's limits");
                }
                Some(subtask)
            }
            Err(error) => {
                tracing::warn!(subject = %message.subject, %error, "refused a subtask message");
                let _ = message.ack_with(AckKind::Term).await;
                None
            }
        }
    }

    async fn run_message(self: Arc<Self>, message: Message) -> SubtaskOutcome {
        let Some(subtask) = self.admit(&message).await else {
            return SubtaskOutcome::Refused;
        };
        let redelivered = message.info().is_ok_and(|info| info.delivered > 1);
        tracing::debug!(worker = %subtask.worker_id, redelivered, "pulled a subtask");
        let run = Subtask::new(self.clone(), subtask, redelivered);
        let keepalive = tokio::spawn(keep_in_progress(message.clone()));
        let outcome = run.run().await;
        keepalive.abort();
        match outcome {
            SubtaskOutcome::Released => {
                let _ = message.ack_with(AckKind::Nak(None)).await;
            }
            _ => {
                let _ = message.double_ack().await;
            }
        }
        outcome
    }
}

/// Tells JetStream every [`PROGRESS_EVERY`] that the subtask is still being worked on.
async fn keep_in_progress(message: Message) {
    loop {
        tokio::time::sleep(PROGRESS_EVERY).await;
        let _ = message.ack_with(AckKind::Progress).await;
    }
}

/// Publishes a subtask's events in the order they were queued, each once JetStream stored the
/// one before, until the queue is closed and empty.
async fn publish_in_order(
    nats: Nats,
    mut queue: tokio::sync::mpsc::UnboundedReceiver<(String, Vec<u8>)>,
) {
    while let Some((subject, payload)) = queue.recv().await {
        publish_until_stored(&nats, subject, payload).await;
    }
}

/// Publishes an event until JetStream has stored it: through a NATS restart or a network
/// drop of any length (the client reconnects by itself), waiting 1 s, then up to 5 s, between
/// attempts. One message id for every attempt, so an attempt whose acknowledgement was lost is
/// stored once.
async fn publish_until_stored(nats: &Nats, subject: String, payload: Vec<u8>) {
    let id = uuid::Uuid::now_v7().to_string();
    let mut wait = std::time::Duration::from_secs(1);
    let mut attempt = 0u32;
    while let Err(error) = nats.publish(subject.clone(), &id, payload.clone()).await {
        attempt += 1;
        if attempt % 10 == 1 {
            tracing::warn!(%error, %subject, attempt, "publishing an event failed; retrying");
        }
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(std::time::Duration::from_secs(5));
    }
}

/// One subtask on this machine.
struct Subtask {
    host: Arc<Host>,
    msg: SubtaskMessage,
    /// Its events, in order, to the task that publishes them ([`publish_in_order`]).
    events: tokio::sync::mpsc::UnboundedSender<(String, Vec<u8>)>,
    /// That task; it ends once `events` is dropped and everything sent is stored.
    publisher: tokio::task::JoinHandle<()>,
    /// Cancelled on stop or the coordinator's cancel.
    cancel: CancellationToken,
    /// JetStream delivered the message before (a machine died or handed it back).
    redelivered: bool,
    /// No longer counted in [`Host::starting`].
    started: AtomicBool,
}

impl Subtask {
    fn new(host: Arc<Host>, msg: SubtaskMessage, redelivered: bool) -> Subtask {
        let cancel = host.stop.child_token();
        host.starting.fetch_add(1, Ordering::SeqCst);
        let (events, queue) = tokio::sync::mpsc::unbounded_channel();
        let publisher = tokio::spawn(publish_in_order(host.nats.clone(), queue));
        Subtask {
            host,
            msg,
            events,
            publisher,
            cancel,
            redelivered,
            started: AtomicBool::new(false),
        }
    }

    /// Its worktree is ready (its agent got past its first reply) or it ended: it no longer
    /// counts as starting.
    fn started(&self) {
        if !self.started.swap(true, Ordering::SeqCst) {
            self.host.starting.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Whether an earlier attempt (this delivery's predecessor, or a run before `swarm
    /// resume`) may have pushed the worker's branch.
    fn after_earlier_attempt(&self) -> bool {
        self.redelivered || !self.msg.first_attempt
    }

    /// Queues an event for publishing (the agent loop does not wait for JetStream).
    fn event(&self, body: EventBody) {
        let event = EventMessage {
            version: WIRE_VERSION,
            run_id: self.msg.run_id.clone(),
            worker_id: self.msg.worker_id.clone(),
            machine: self.host.options.name.clone(),
            body,
        };
        let subject = wire::events_subject(&self.msg.run_id, &self.msg.worker_id);
        let payload = serde_json::to_vec(&event).unwrap_or_default();
        if self.events.send((subject, payload)).is_err() {
            tracing::error!(worker = %self.msg.worker_id, "the subtask's event publisher stopped");
        }
    }

    /// Sends the subtask's last event and waits until JetStream stored all its events.
    async fn last_event(self, body: EventBody) {
        self.event(body);
        let Subtask {
            events, publisher, ..
        } = self;
        drop(events);
        let _ = publisher.await;
    }

    /// The subtask from accepting it to its report.
    async fn run(self) -> SubtaskOutcome {
        let worker = self.msg.worker_id.clone();
        self.event(EventBody::Accepted);
        let control = self.watch_control().await;
        let prepared = self.prepare().await;
        let (status, report, pushing) = match prepared {
            Ok((spec, clone, lease)) => {
                let (status, report, announced) = self.run_worker(spec, &clone, lease).await;
                (status, report, Some((clone, announced)))
            }
            Err(e) => (WorkerStatus::Failed, WorkerReport::failed(e, 0), None),
        };
        self.started();
        if let Some(control) = control {
            control.abort();
        }
        let (status, report) = match pushing {
            Some((clone, announced)) => self.push_branch(&clone, (status, report), announced).await,
            None => (status, report),
        };
        let released = self.host.stop.is_cancelled() && status == WorkerStatus::Cancelled;
        if released {
            self.last_event(EventBody::Released).await;
            return SubtaskOutcome::Released;
        }
        self.last_event(EventBody::Done { status, report }).await;
        tracing::debug!(worker = %worker, "reported done");
        SubtaskOutcome::Completed
    }

    /// Cancels the subtask when the coordinator says so: a cancel signed by a trusted key for
    /// this subtask message; any other message on the subject is logged and ignored.
    async fn watch_control(&self) -> Option<tokio::task::JoinHandle<()>> {
        let subject = wire::control_subject(&self.msg.run_id, &self.msg.worker_id);
        let mut sub = self.host.nats.client.subscribe(subject).await.ok()?;
        let cancel = self.cancel.clone();
        let host = self.host.clone();
        let nonce = self.msg.fresh.nonce.clone();
        Some(tokio::spawn(async move {
            while let Some(message) = sub.next().await {
                let trusted = &host.options.limits.trusted;
                match wire::ControlMessage::open(trusted, &message.subject, &message.payload) {
                    Ok(control) if control.subtask_nonce == nonce => {
                        cancel.cancel();
                        return;
                    }
                    Ok(_) => tracing::info!("ignored a cancel of another attempt"),
                    Err(error) => {
                        tracing::warn!(subject = %message.subject, %error, "refused a cancel")
                    }
                }
            }
        }))
    }

    /// The clone, fetched; the worker's spec (a new branch at the start commit, or the pushed
    /// `wip` of an earlier attempt) and its hold on its worktree directory (with a spare).
    async fn prepare(&self) -> Result<(WorkerSpec, PathBuf, Option<WorktreeLease>), String> {
        let paths = WorkPaths::new(&self.host.options.work_dir, &self.msg);
        let after_earlier_attempt = self.after_earlier_attempt();
        // The subtasks that arrive together find the start commit in the clone (the run was
        // announced): none waits for another's look at the clone, only fetches take turns.
        let ready = if after_earlier_attempt {
            None
        } else {
            ready_without_fetch(&paths, &self.msg).await
        };
        let resume = match ready {
            Some(resume) => resume,
            None => {
                let _fetching = self.host.fetch_lock.lock().await;
                fetch_run(&paths, &self.msg, after_earlier_attempt)
                    .await
                    .map_err(|e| {
                        format!("could not fetch the run from {}: {e}", self.msg.repo_url)
                    })?
            }
        };
        tracing::debug!(worker = %self.msg.worker_id, "the clone has the subtask's start");
        let start_commit = git::Oid::from_str(&self.msg.start_commit).map_err(|e| e.to_string())?;
        let spec = WorkerSpec {
            index: 0,
            id: self.msg.worker_id.clone(),
            subtask: self.msg.subtask.clone(),
            branch: wire::worker_branch(&self.msg.run_id, &self.msg.worker_id),
            worktree: paths.worktree,
            start_commit,
            resume,
            role: self.msg.role.clone(),
            transcript: paths.transcript,
        };
        let lease = self.host.lease(&self.msg, &spec.worktree).await;
        let spare = lease.as_ref().is_some_and(|l| l.has_spare());
        tracing::debug!(worker = %self.msg.worker_id, spare, "leased the worktree directory");
        Ok((spec, paths.clone, lease))
    }

    /// The local worker's run, with progress and transcript lines streamed as events; and, once
    /// it started committing, the announcement of its push ([`Pusher::announce`]).
    async fn run_worker(
        &self,
        spec: WorkerSpec,
        clone: &Path,
        lease: Option<WorktreeLease>,
    ) -> (WorkerStatus, WorkerReport, Option<Announced>) {
        let lock = match self.host.owner.lock_for(clone) {
            Ok(lock) => lock,
            Err(e) => {
                let report = WorkerReport::failed(e.to_string(), 0);
                return (WorkerStatus::Failed, report, None);
            }
        };
        let parts = RemoteRunParts {
            run_id: self.msg.run_id.clone(),
            task: self.msg.task.clone(),
            clone: clone.to_path_buf(),
            git_lock: lock,
            role: self.msg.role.clone(),
            cancel: self.cancel.clone(),
            sandbox: self.host.sandbox.clone(),
            start_instructions: self.host.start_instructions.clone(),
        };
        let model = &self.host.model;
        let mut run =
            RunContext::for_remote_worker(parts, &model.config, model.client.clone(), &model.model);
        if self.msg.ask_coordinator {
            run.prompter = Arc::new(self.remote_prompter());
        }
        let run = Arc::new(run);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let tail = TranscriptTail::new(spec.transcript.clone());
        let sink = ProgressSink::Channel(tx);
        // A task of its own: the agent loop goes on while this one publishes its progress,
        // reads its transcript and asks for spares.
        let mut worker = AbortOnDropHandle::new(tokio::spawn(run_leased_worker_catching_panics(
            run,
            spec,
            sink,
            self.cancel.clone(),
            Ok(lease),
        )));
        let mut tick = tokio::time::interval(std::time::Duration::from_millis(500));
        let mut tail = tail;
        let mut replenished = false;
        let mut announced = None;
        let (status, report) = loop {
            tokio::select! {
                done = &mut worker => break done.unwrap_or_else(|e| {
                    (WorkerStatus::Failed, WorkerReport::failed(format!("the worker's task ended: {e}"), 0))
                }),
                Some(progress) = rx.recv() => {
                    let past_first_reply = matches!(progress, Progress::ToolCall { .. } | Progress::Turn { turn: 2.., .. });
                    if !replenished && past_first_reply {
                        // Its worktree is ready (its first request may go out before) and it
                        // waits on a tool or the model: the CPU is free.
                        replenished = true;
                        self.started();
                        tokio::spawn(self.host.clone().replenish_spares(self.msg.repo_url.clone()));
                    }
                    self.announce_commit(&progress, &mut announced);
                    self.event(EventBody::Progress { progress });
                }
                _ = tick.tick() => self.send_transcript(&mut tail),
            }
        };
        while let Ok(progress) = rx.try_recv() {
            self.event(EventBody::Progress { progress });
        }
        self.send_transcript(&mut tail);
        (status, report, announced)
    }

    /// When `progress` says the worker started committing, its push is announced to the
    /// machine's pusher (once): a push of another slot's branch about to start waits for it.
    fn announce_commit(&self, progress: &Progress, announced: &mut Option<Announced>) {
        let committing = matches!(
            progress,
            Progress::Status {
                status: WorkerStatus::Committing,
                ..
            }
        );
        if committing && announced.is_none() {
            *announced = Some(self.host.pusher.announce());
        }
    }

    /// Asks the coordinator this subtask's permission questions ([`super::ask`]).
    fn remote_prompter(&self) -> super::ask::RemotePrompter {
        super::ask::RemotePrompter {
            client: self.host.nats.client.clone(),
            run_id: self.msg.run_id.clone(),
            worker_id: self.msg.worker_id.clone(),
            machine: self.host.options.name.clone(),
            trusted: self.host.options.limits.trusted.clone(),
        }
    }

    /// New transcript lines, in batches of at most [`TRANSCRIPT_BATCH_BYTES`] (one longer line
    /// goes alone).
    fn send_transcript(&self, tail: &mut TranscriptTail) {
        let Some((mut from_line, lines)) = tail.new_lines() else {
            return;
        };
        let mut batch: Vec<String> = Vec::new();
        let mut bytes = 0;
        for line in lines {
            if !batch.is_empty() && bytes + line.len() > TRANSCRIPT_BATCH_BYTES {
                let sent = std::mem::take(&mut batch);
                let count = sent.len() as u64;
                self.event(EventBody::Transcript {
                    from_line,
                    lines: sent,
                });
                from_line += count;
                bytes = 0;
            }
            bytes += line.len();
            batch.push(line);
        }
        if !batch.is_empty() {
            self.event(EventBody::Transcript {
                from_line,
                lines: batch,
            });
        }
    }

    /// Pushes the worker's branch when it committed anything (`announced`: its push's
    /// announcement, withdrawn once queued or when there is nothing to push); a failed push
    /// fails the worker.
    async fn push_branch(
        &self,
        clone: &Path,
        (status, mut report): (WorkerStatus, WorkerReport),
        announced: Option<Announced>,
    ) -> (WorkerStatus, WorkerReport) {
        let branch = wire::worker_branch(&self.msg.run_id, &self.msg.worker_id);
        let root = clone.to_path_buf();
        let start = self.msg.start_commit.clone();
        let tip = git_task(move || {
            Ok(git::branch_tip(&root, &branch)
                .ok()
                .filter(|tip| tip.to_string() != start)
                .map(|tip| (tip, branch)))
        })
        .await;
        let pushed = match tip {
            Ok(Some((commit, branch))) => {
                let push = BranchPush {
                    clone: clone.to_path_buf(),
                    url: self.msg.repo_url.clone(),
                    commit,
                    refname: format!("refs/heads/{branch}"),
                };
                self.host.pusher.push(push, announced).await
            }
            Ok(None) => Ok(()),
            Err(e) => Err(e.to_string()),
        };
        tracing::debug!(worker = %self.msg.worker_id, ok = pushed.is_ok(), "pushed the branch");
        match pushed {
            Ok(()) => (status, report),
            Err(e) => {
                report.error = Some(format!("could not push the worker's branch: {e}"));
                report.commit = None;
                (WorkerStatus::Failed, report)
            }
        }
    }
}

/// Where a subtask's files live under the work dir: built only from validated ids and a hash of
/// the URL, so nothing from the message can point outside it.
struct WorkPaths {
    clone: PathBuf,
    worktree: PathBuf,
    transcript: PathBuf,
}

impl WorkPaths {
    fn new(work_dir: &Path, msg: &SubtaskMessage) -> WorkPaths {
        let repo = repo_key(&msg.repo_url);
        let (run, worker) = (msg.run_id.as_str(), msg.worker_id.as_str());
        WorkPaths {
            clone: clone_dir(work_dir, &msg.repo_url),
            worktree: work_dir
                .join("worktrees")
                .join(&repo)
                .join(run)
                .join(worker),
            transcript: work_dir
                .join("transcripts")
                .join(run)
                .join(format!("{worker}.jsonl")),
        }
    }
}

/// The name of `url`'s clone and worktrees under the work dir: a hash of the URL.
fn repo_key(url: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(url.as_bytes());
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// Where the cached clone of `url` lives under the work dir.
fn clone_dir(work_dir: &Path, url: &str) -> PathBuf {
    work_dir.join("repos").join(repo_key(url))
}

/// Where the spare worktrees of the clone of `url` live: `worktrees/<repo>/.spares` (no run id
/// starts with a dot).
fn spares_dir(work_dir: &Path, url: &str) -> PathBuf {
    work_dir
        .join("worktrees")
        .join(repo_key(url))
        .join(".spares")
}

/// Removes the spares an earlier `ahelper worker` left in `base` (registered in `clone` or
/// not). `false` when some could not be removed (no spares are made then).
fn remove_left_spares(lock: &git::RepoLock, clone: &Path, base: &Path) -> bool {
    if !base.exists() {
        return true;
    }
    let base = base.canonicalize().unwrap_or_else(|_| base.to_path_buf());
    if let Ok(worktrees) = git::list_worktrees(clone) {
        for spare in worktrees.iter().filter(|w| w.path.starts_with(&base)) {
            spares::remove_spare(lock, clone, &spare.path);
        }
    }
    std::fs::remove_dir_all(&base).is_ok() && git::prune_worktrees(lock, clone).is_ok()
}

/// Whether the repository at `repo` has the commit `commit` (40 hex).
fn has_commit(repo: &Path, commit: &str) -> bool {
    git::resolve_commit(repo, commit).is_ok_and(|c| c.to_string() == commit)
}

/// The clone exists and has the start commit: the run's refs (`refs/ahelper/<run>/…`) and
/// its workers' pushed branches (as `refs/ahelper-pushed/<run>/<worker>`) are fetched in one
/// `git fetch`, which is skipped when the commit is there already (an earlier subtask of the
/// run fetched or made it) and no earlier attempt can have pushed a `wip`. After an earlier
/// attempt, its pushed branch becomes the local branch when there is none yet. Returns
/// whether the worker continues an earlier attempt.
async fn fetch_run(
    paths: &WorkPaths,
    msg: &SubtaskMessage,
    after_earlier_attempt: bool,
) -> Result<bool, GitTaskError> {
    let (clone, url) = (paths.clone.clone(), msg.repo_url.clone());
    let (run, worker) = (msg.run_id.clone(), msg.worker_id.clone());
    let start = msg.start_commit.clone();
    git_task(move || {
        create_parent_dir(&clone)?;
        git::ensure_clone(&url, &clone)?;
        let present = has_commit(&clone, &start);
        if after_earlier_attempt || !present {
            let refs = format!("+refs/ahelper/{run}/*:refs/ahelper/{run}/*");
            let pushed = format!("+refs/heads/ahelper/{run}/*:{}*", pushed_prefix(&run));
            git::fetch_refspecs(&clone, &url, &[refs, pushed])?;
        }
        let branch = wire::worker_branch(&run, &worker);
        if git::branch_tip(&clone, &branch).is_ok() {
            return Ok(true);
        }
        if !after_earlier_attempt {
            return Ok(false);
        }
        let pushed = format!("{}{worker}", pushed_prefix(&run));
        let Ok(wip) = git::resolve_commit(&clone, &pushed) else {
            return Ok(false);
        };
        git::create_branch(&clone, &branch, wip)?;
        Ok(true)
    })
    .await
}

/// A first attempt whose clone has its start commit already needs no fetch: whether it
/// continues a branch of this machine (`Some(true)`: its local branch exists) or starts anew
/// (`Some(false)`). `None`: the clone or the commit is missing (or cannot be read), so the run
/// is fetched ([`fetch_run`], under the fetch lock).
async fn ready_without_fetch(paths: &WorkPaths, msg: &SubtaskMessage) -> Option<bool> {
    let clone = paths.clone.clone();
    let start = msg.start_commit.clone();
    let branch = wire::worker_branch(&msg.run_id, &msg.worker_id);
    tokio::task::spawn_blocking(move || {
        let present = clone.join(".git").exists() && has_commit(&clone, &start);
        present.then(|| git::branch_tip(&clone, &branch).is_ok())
    })
    .await
    .ok()
    .flatten()
}

/// Where a clone keeps the branches the run's workers pushed, as last fetched.
fn pushed_prefix(run: &str) -> String {
    format!("refs/ahelper-pushed/{run}/")
}

/// Reads the complete lines appended to a transcript since the last call.
struct TranscriptTail {
    path: PathBuf,
    offset: u64,
    lines: u64,
}

impl TranscriptTail {
    fn new(path: PathBuf) -> TranscriptTail {
        TranscriptTail {
            path,
            offset: 0,
            lines: 0,
        }
    }

    /// `(lines sent before, new lines)`, `None` when nothing new is complete.
    fn new_lines(&mut self) -> Option<(u64, Vec<String>)> {
        use std::io::{Read, Seek};
        let mut file = std::fs::File::open(&self.path).ok()?;
        file.seek(std::io::SeekFrom::Start(self.offset)).ok()?;
        let mut text = String::new();
        file.read_to_string(&mut text).ok()?;
        let complete = text.rfind('\n')? + 1;
        let lines: Vec<String> = text[..complete].lines().map(str::to_string).collect();
        self.offset += complete as u64;
        let from = self.lines;
        self.lines += lines.len() as u64;
        Some((from, lines))
    }
}
