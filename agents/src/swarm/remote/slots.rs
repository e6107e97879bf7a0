//! The coordinator's side of remote workers: [`NatsSlots`], the [`WorkerSlots`] whose worker is
//! a subtask message on the JetStream work queue. It pushes the run's base commit (and each
//! worker's start commit) to the shared git remote, publishes subtasks, and turns the workers'
//! events back into the coordinator's [`Progress`] and [`WorkerDone`] messages: transcript lines
//! are written to `runs/<run>/workers/<w>.jsonl`, a finished branch is fetched from the remote
//! before the worker is reported done (so the merge queue merges it like a local one), and a
//! worker id that is not running (a duplicate delivery, a forged message) is ignored.

use super::auth::{Freshness, SHORT_LIFETIME, SUBTASK_LIFETIME, SigningKey};
use super::batches::{FETCHES_IN_FLIGHT, run_batches};
use super::connect::{HEARTBEAT_EVERY, HEARTBEAT_TTL, Nats, NatsError};
use super::lifecycle;
use super::liveness::{Liveness, MachineState, Reading};
use super::wire::{
    self, EventBody, EventMessage, SubtaskMessage, WIRE_VERSION, base_ref, start_ref,
};
use crate::swarm::coordinator::{CoordinatorActor, Progress, WorkerDone, WorkersDone};
use crate::swarm::run::RunContext;
use crate::swarm::slots::{RunningWorker, WorkerSlots};
use crate::swarm::state::{WorkerReport, WorkerStatus};
use crate::swarm::worker::WorkerSpec;
use crate::swarm::{GitTaskError, git_task};
use ahelper_worktrees as git;
use async_nats::jetstream::{self, consumer};
use futures::StreamExt;
use kameo::prelude::*;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// Setting up a distributed run failed.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// NATS could not be reached or set up.
    #[error(transparent)]
    Nats(#[from] NatsError),
    /// The git remote could not be read or written.
    #[error(
        "cannot push the run's base commit to the git remote {url}: {source}; workers on other machines fetch it from there, so it must be reachable and writable"
    )]
    Push {
        /// The remote's URL.
        url: String,
        /// Cause.
        source: GitTaskError,
    },
    /// The configured remote does not exist.
    #[error(
        "the repository has no git remote `{remote}` ({source}); add one both this machine and the workers reach (`git remote add {remote} URL`) or set `[swarm] remote`"
    )]
    NoRemote {
        /// Its name.
        remote: String,
        /// Cause.
        source: GitTaskError,
    },
}

/// At most this many events that arrived together are read (and their workers' branches
/// fetched) together.
const EVENTS_READ_TOGETHER: usize = 64;

/// A remote worker the coordinator waits for.
struct RemoteWorker {
    index: usize,
    branch: String,
    transcript: PathBuf,
    /// Lines of `lines_from`'s transcript written so far.
    lines: u64,
    /// The machine whose transcript lines are being written: each machine numbers the lines
    /// of its own transcript (an attempt on another machine starts at 0 again).
    lines_from: Option<String>,
    machine: Option<String>,
    /// What the coordinator was last told of its machine.
    machine_state: MachineState,
}

/// What the slots and their event listener share.
#[derive(Default)]
struct Shared {
    running: HashMap<String, RemoteWorker>,
    /// Commits the remote has at a ref of the run (the base, start commits pushed, finished
    /// workers' branches fetched): a worker starting from one needs no push of its start ref.
    on_remote: HashSet<git::Oid>,
}

/// Worker slots on other machines, through NATS JetStream and a shared git remote.
pub struct NatsSlots {
    nats: Nats,
    /// The coordinator's repository.
    repo_root: PathBuf,
    repo_url: String,
    run_id: String,
    shared: Arc<Mutex<Shared>>,
    listener: tokio::sync::OnceCell<()>,
    /// The workers' permission questions ([`super::ask`]).
    questions: Arc<super::ask::Questions>,
    /// The events stream's last sequence when the run was prepared: a new consumer of the
    /// run's events starts after it.
    events_from: u64,
    /// Cancelled when the run is closed: its event listener stops before its consumer is
    /// deleted (and never re-creates it).
    closed: CancellationToken,
    /// Signs the run's subtasks, announcement, cancels and answers ([`super::auth`]).
    key: Arc<SigningKey>,
}

impl NatsSlots {
    /// Prepares run `run_id` for remote workers: sets up the JetStream streams and pushes
    /// `base_commit` of the repository at `repo_root` to `refs/ahelper/<run>/base` on its git
    /// remote `remote` (whose URL the workers fetch from). Everything it sends the workers is
    /// signed with `key`.
    ///
    /// # Errors
    /// [`RemoteError`]: no such remote, an unreachable remote or server.
    pub async fn prepare(
        nats: Nats,
        repo_root: &Path,
        (remote, key): (&str, Arc<SigningKey>),
        run_id: &str,
        base_commit: git::Oid,
    ) -> Result<NatsSlots, RemoteError> {
        nats.work_stream().await?;
        nats.events_stream().await?;
        nats.heartbeats().await?;
        let events_from = lifecycle::events_position(&nats).await?;
        let root = repo_root.to_path_buf();
        let name = remote.to_string();
        let repo_url = git_task(move || Ok(git::remote_url(&root, &name)?))
            .await
            .map_err(|source| RemoteError::NoRemote {
                remote: remote.to_string(),
                source,
            })?;
        push(repo_root, &repo_url, base_commit, base_ref(run_id))
            .await
            .map_err(|source| RemoteError::Push {
                url: repo_url.clone(),
                source,
            })?;
        announce(&nats, &key, run_id, &repo_url, base_commit).await;
        let shared = Shared {
            on_remote: HashSet::from([base_commit]),
            ..Shared::default()
        };
        Ok(NatsSlots {
            nats,
            repo_root: repo_root.to_path_buf(),
            repo_url,
            run_id: run_id.to_string(),
            shared: Arc::new(Mutex::new(shared)),
            listener: tokio::sync::OnceCell::new(),
            questions: Arc::default(),
            events_from,
            closed: CancellationToken::new(),
            key,
        })
    }

    /// The URL of the git remote the run's refs and branches go to.
    pub fn repo_url(&self) -> &str {
        &self.repo_url
    }

    /// Starts the task that consumes this run's events (once).
    async fn ensure_listener(
        &self,
        coordinator: &ActorRef<CoordinatorActor>,
        run: &Arc<RunContext>,
    ) {
        self.listener
            .get_or_init(|| async {
                let (finished, fetch_queue) = tokio::sync::mpsc::unbounded_channel();
                let fetcher = BranchFetcher {
                    run_id: run.run_id.clone(),
                    repo_root: run.repo_root.clone(),
                    repo_url: self.repo_url.clone(),
                    shared: self.shared.clone(),
                    coordinator: coordinator.clone(),
                    fetched: Mutex::default(),
                };
                let listener = Listener {
                    nats: self.nats.clone(),
                    run_id: run.run_id.clone(),
                    shared: self.shared.clone(),
                    coordinator: coordinator.clone(),
                    events_from: self.events_from,
                    finished,
                    ended: Mutex::default(),
                    closed: self.closed.clone(),
                    questions: self.questions.clone(),
                };
                tokio::spawn(fetcher.run(fetch_queue));
                tokio::spawn(listener.run());
                tokio::spawn(self.question_server(coordinator, run).run());
            })
            .await;
    }
}

impl NatsSlots {
    /// The server answering the run's remote permission questions with its prompter.
    fn question_server(
        &self,
        coordinator: &ActorRef<CoordinatorActor>,
        run: &Arc<RunContext>,
    ) -> super::ask::QuestionServer {
        super::ask::QuestionServer {
            client: self.nats.client.clone(),
            run_id: run.run_id.clone(),
            prompter: run.prompter.clone(),
            policy: run.policy.clone(),
            questions: self.questions.clone(),
            coordinator: coordinator.clone(),
            key: self.key.clone(),
        }
    }
}

#[async_trait::async_trait]
impl WorkerSlots for NatsSlots {
    async fn start(
        &self,
        coordinator: &ActorRef<CoordinatorActor>,
        run: Arc<RunContext>,
        spec: WorkerSpec,
    ) -> Box<dyn RunningWorker> {
        self.ensure_listener(coordinator, &run).await;
        if let Ok(mut shared) = self.shared.lock() {
            shared.running.insert(
                spec.id.clone(),
                RemoteWorker {
                    index: spec.index,
                    branch: spec.branch.clone(),
                    transcript: spec.transcript.clone(),
                    lines: 0,
                    lines_from: None,
                    machine: None,
                    machine_state: MachineState::Alive,
                },
            );
        }
        let label = format!("{} · {}", spec.id, spec.subtask.title);
        self.questions.expect(&spec.id, label);
        let message = SubtaskMessage {
            version: WIRE_VERSION,
            run_id: self.run_id.clone(),
            worker_id: spec.id.clone(),
            repo_url: self.repo_url.clone(),
            start_commit: spec.start_commit.to_string(),
            subtask: spec.subtask.clone(),
            task: run.task.clone(),
            role: spec.role.clone(),
            ask_coordinator: run.prompter.is_interactive(),
            first_attempt: !spec.resume,
            fresh: Freshness::new(SUBTASK_LIFETIME),
        };
        let subtask_nonce = message.fresh.nonce.clone();
        let dispatch = Dispatch {
            key: self.key.clone(),
            nats: self.nats.clone(),
            repo_root: run.repo_root.clone(),
            shared: self.shared.clone(),
            coordinator: coordinator.clone(),
            index: spec.index,
            reattach: spec.resume,
        };
        tokio::spawn(dispatch.run(message));
        Box::new(RemoteHandle {
            client: self.nats.client.clone(),
            key: self.key.clone(),
            run_id: self.run_id.clone(),
            worker_id: spec.id.clone(),
            subtask_nonce,
        })
    }

    async fn close(&self, run_id: &str) {
        if self.closed.is_cancelled() {
            // Released already (the coordinator does it during its closing turn).
            return;
        }
        self.closed.cancel();
        lifecycle::delete_fetched_branches(&self.repo_root, run_id).await;
        match lifecycle::release_run(&self.nats, run_id).await {
            Ok(released) => tracing::info!(
                run = %run_id,
                consumer_deleted = released.consumer_deleted,
                subtasks_purged = released.subtasks_purged,
                "released the run on NATS"
            ),
            Err(error) => {
                tracing::warn!(run = %run_id, %error, "releasing the run on NATS failed; `swarm clean` removes its consumer")
            }
        }
    }
}

/// Tells the worker machines listening that run `run_id` is coming ([`wire::RunAnnouncement`]),
/// so that they prepare their clones while the coordinator plans. Best effort: a machine that
/// does not hear it prepares on its first subtask.
async fn announce(
    nats: &Nats,
    key: &SigningKey,
    run_id: &str,
    repo_url: &str,
    base_commit: git::Oid,
) {
    let announcement = wire::RunAnnouncement {
        version: WIRE_VERSION,
        run_id: run_id.to_string(),
        repo_url: repo_url.to_string(),
        base_commit: base_commit.to_string(),
        fresh: Freshness::new(SHORT_LIFETIME),
    };
    let Ok(body) = serde_json::to_string(&announcement) else {
        return;
    };
    let subject = wire::run_subject(run_id);
    let payload = key.sign(&subject, body);
    if let Err(error) = nats.client.publish(subject, payload.into()).await {
        tracing::debug!(%error, "announcing the run to worker machines failed");
    }
}

/// Pushes `commit` to `refname` on `url`.
async fn push(
    repo: &Path,
    url: &str,
    commit: git::Oid,
    refname: String,
) -> Result<(), GitTaskError> {
    let (repo, url) = (repo.to_path_buf(), url.to_string());
    git_task(move || Ok(git::push_commit(&repo, &url, commit, &refname)?)).await
}

/// Sending one subtask: its start commit to the remote, the message to the queue. A failure
/// fails the worker (the run goes on with the others).
struct Dispatch {
    /// Signs the subtask.
    key: Arc<SigningKey>,
    nats: Nats,
    repo_root: PathBuf,
    shared: Arc<Mutex<Shared>>,
    coordinator: ActorRef<CoordinatorActor>,
    index: usize,
    /// The worker was started before (`swarm resume`): its subtask may still be in the queue.
    reattach: bool,
}

impl Dispatch {
    async fn run(self, message: SubtaskMessage) {
        let Err(error) = self.send(&message).await else {
            return;
        };
        tracing::error!(worker = %message.worker_id, %error, "dispatching a subtask failed");
        let removed = self
            .shared
            .lock()
            .ok()
            .and_then(|mut s| s.running.remove(&message.worker_id));
        if removed.is_some() {
            let report =
                WorkerReport::failed(format!("could not dispatch the subtask: {error}"), 0);
            let _ = self
                .coordinator
                .tell(WorkerDone {
                    index: self.index,
                    status: WorkerStatus::Failed,
                    report,
                })
                .await;
        }
    }

    async fn send(&self, message: &SubtaskMessage) -> Result<(), String> {
        let (run, worker) = (&message.run_id, &message.worker_id);
        if self.reattach && lifecycle::subtask_queued(&self.nats, run, worker).await {
            tracing::info!(%run, %worker, "re-attached to the subtask still in the work queue");
            return Ok(());
        }
        let commit = git::Oid::from_str(&message.start_commit).map_err(|e| e.to_string())?;
        if !self.on_remote(commit) {
            let refname = start_ref(&message.run_id, &message.worker_id);
            push(&self.repo_root, &message.repo_url, commit, refname)
                .await
                .map_err(|e| format!("pushing its start commit to {}: {e}", message.repo_url))?;
            if let Ok(mut shared) = self.shared.lock() {
                shared.on_remote.insert(commit);
            }
        }
        let body = serde_json::to_string(message).map_err(|e| e.to_string())?;
        let subject = wire::work_subject(&message.run_id, &message.worker_id);
        let payload = self.key.sign(&subject, body);
        // The signed nonce is the message id: the work stream drops the same message published
        // again within its duplicate window, and a worker refuses it under another id.
        self.nats
            .publish(subject, &message.fresh.nonce, payload)
            .await
            .map_err(|e| e.to_string())?;
        tracing::debug!(%worker, "published the subtask");
        Ok(())
    }
}

impl Dispatch {
    /// Whether the remote has `commit` at a ref of the run already.
    fn on_remote(&self, commit: git::Oid) -> bool {
        self.shared
            .lock()
            .is_ok_and(|shared| shared.on_remote.contains(&commit))
    }
}

/// A remote worker as the coordinator holds it: cancelling sends a signed control message its
/// machine listens to (it then commits and pushes `wip` and reports `cancelled`).
struct RemoteHandle {
    client: async_nats::Client,
    key: Arc<SigningKey>,
    run_id: String,
    worker_id: String,
    /// The nonce of the subtask message the cancel is for.
    subtask_nonce: String,
}

impl RunningWorker for RemoteHandle {
    fn cancel(&self) {
        let message = wire::ControlMessage {
            version: WIRE_VERSION,
            run_id: self.run_id.clone(),
            worker_id: self.worker_id.clone(),
            subtask_nonce: self.subtask_nonce.clone(),
            fresh: Freshness::new(SHORT_LIFETIME),
        };
        let subject = wire::control_subject(&self.run_id, &self.worker_id);
        let payload = self.key.sign(
            &subject,
            serde_json::to_string(&message).unwrap_or_default(),
        );
        let client = self.client.clone();
        tokio::spawn(async move {
            let _ = client.publish(subject, payload.into()).await;
            let _ = client.flush().await;
        });
    }

    fn actor_id(&self) -> Option<ActorId> {
        None
    }
}

/// Consumes the run's events (a durable consumer: a reconnect or a server restart continues
/// where it stopped) and watches the heartbeats of the machines running its workers.
///
/// It holds no [`RunContext`] (whose event sender must close when the run ends) and stops when
/// the coordinator has stopped.
struct Listener {
    nats: Nats,
    run_id: String,
    shared: Arc<Mutex<Shared>>,
    coordinator: ActorRef<CoordinatorActor>,
    events_from: u64,
    /// Finished workers whose branches the [`BranchFetcher`] fetches, those of the events read
    /// together in one message.
    finished: tokio::sync::mpsc::UnboundedSender<Vec<Finished>>,
    /// The finished workers of the events being read, sent once they are all handled.
    ended: Mutex<Vec<Finished>>,
    /// The run is closed: no more reading (its consumer is being deleted).
    closed: CancellationToken,
    /// The workers' questions: an ended worker's are given up.
    questions: Arc<super::ask::Questions>,
}

impl Listener {
    async fn run(self) {
        let this = Arc::new(self);
        tokio::spawn(this.clone().watch_heartbeats());
        loop {
            match this.consume().await {
                Ok(()) => return,
                Err(error) if this.closed.is_cancelled() => {
                    tracing::debug!(%error, "the run is closed; its events are no longer read");
                    return;
                }
                Err(error) => {
                    tracing::warn!(%error, "reading worker events failed; retrying");
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                }
            }
        }
    }

    /// Reads events until the run is over (the coordinator is gone).
    async fn consume(&self) -> Result<(), NatsError> {
        let stream = self.nats.events_stream().await?;
        let name = lifecycle::coordinator_consumer(&self.run_id);
        // An existing consumer (a coordinator that died, resumed) is taken as it is: it
        // continues with the events its predecessor did not acknowledge.
        let consumer: consumer::PullConsumer = stream
            .get_or_create_consumer(
                &name,
                consumer::pull::Config {
                    durable_name: Some(name.clone()),
                    filter_subject: format!("ahelper.events.{}.>", self.run_id),
                    ack_policy: consumer::AckPolicy::Explicit,
                    deliver_policy: consumer::DeliverPolicy::ByStartSequence {
                        start_sequence: self.events_from + 1,
                    },
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| NatsError::js("creating the coordinator's consumer", e))?;
        // The events that arrived together are read together: the workers that reported
        // their ends at once (a machine's branches pushed together) are fetched together.
        let mut messages = consumer
            .messages()
            .await
            .map_err(|e| NatsError::js("reading events", e))?
            .ready_chunks(EVENTS_READ_TOGETHER);
        let mut tick = tokio::time::interval(std::time::Duration::from_millis(500));
        loop {
            let next = tokio::select! {
                next = messages.next() => next,
                () = self.closed.cancelled() => return Ok(()),
                _ = tick.tick() => {
                    if self.coordinator.is_alive() {
                        continue;
                    }
                    return Ok(());
                }
            };
            let Some(read) = next else {
                return Ok(());
            };
            let handled = self.handle_all(read).await;
            self.send_ended().await;
            handled?;
        }
    }

    /// Handles and acknowledges the events of `read` in order, up to the first error.
    async fn handle_all(
        &self,
        read: Vec<Result<jetstream::Message, consumer::pull::MessagesError>>,
    ) -> Result<(), NatsError> {
        for message in read {
            let message = message.map_err(|e| NatsError::js("reading events", e))?;
            self.handle(&message.subject, &message.payload).await;
            let _ = message.ack().await;
        }
        Ok(())
    }

    /// Hands the workers that ended in the events just handled to the fetcher, together.
    async fn send_ended(&self) {
        let ended = match self.ended.lock() {
            Ok(mut ended) => std::mem::take(&mut *ended),
            Err(_) => return,
        };
        if ended.is_empty() {
            return;
        }
        if let Err(unsent) = self.finished.send(ended) {
            for finished in unsent.0 {
                let done = finished.failed("the coordinator's fetcher stopped".into());
                let _ = self.coordinator.tell(done).await;
            }
        }
    }

    /// One event: validated, then applied to the worker it names when that worker runs.
    async fn handle(&self, subject: &str, payload: &[u8]) {
        let event = match EventMessage::parse(subject, payload) {
            Ok(event) if event.run_id == self.run_id => event,
            Ok(_) => return,
            Err(error) => {
                tracing::warn!(%subject, %error, "refused a worker event");
                return;
            }
        };
        let Some(index) = self.index_of(&event.worker_id) else {
            tracing::info!(
                worker = %event.worker_id,
                machine = %event.machine,
                kind = event_kind(&event.body),
                "event of a worker that is not running ignored (a duplicate delivery or an earlier attempt)"
            );
            return;
        };
        self.note_machine(index, &event.worker_id, &event.machine)
            .await;
        match event.body {
            EventBody::Accepted => {}
            EventBody::Progress { progress } => {
                if let Some(progress) = with_index(progress, index) {
                    let _ = self.coordinator.tell(progress).await;
                }
            }
            EventBody::Transcript { from_line, lines } => {
                self.write_transcript(&event.worker_id, &event.machine, from_line, &lines);
            }
            EventBody::Done { status, report } => {
                tracing::debug!(worker = %event.worker_id, "the worker is done");
                self.finish(&event.worker_id, index, status, report).await;
            }
            EventBody::Released => {
                let status = WorkerStatus::Queued;
                let _ = self
                    .coordinator
                    .tell(Progress::Status { index, status })
                    .await;
            }
        }
    }

    fn index_of(&self, worker: &str) -> Option<usize> {
        let shared = self.shared.lock().ok()?;
        shared.running.get(worker).map(|w| w.index)
    }

    /// Tells the coordinator which machine runs worker `index` when that changes.
    async fn note_machine(&self, index: usize, worker: &str, machine: &str) {
        let changed = self.shared.lock().ok().and_then(|mut s| {
            let w = s.running.get_mut(worker)?;
            if w.machine.as_deref() == Some(machine) && w.machine_state == MachineState::Alive {
                return None;
            }
            w.machine = Some(machine.to_string());
            w.machine_state = MachineState::Alive;
            Some(())
        });
        if changed.is_some() {
            let machine = machine.to_string();
            let progress = Progress::Machine {
                index,
                machine,
                state: MachineState::Alive,
            };
            let _ = self.coordinator.tell(progress).await;
        }
    }

    /// Appends the lines not written yet to the worker's transcript.
    fn write_transcript(&self, worker: &str, machine: &str, from_line: u64, lines: &[String]) {
        let Ok(mut shared) = self.shared.lock() else {
            return;
        };
        let Some(w) = shared.running.get_mut(worker) else {
            return;
        };
        if w.lines_from.as_deref() != Some(machine) {
            w.lines_from = Some(machine.to_string());
            w.lines = 0;
        }
        let skip = w.lines.saturating_sub(from_line) as usize;
        let new: Vec<&String> = lines.iter().skip(skip).collect();
        if new.is_empty() {
            return;
        }
        if let Err(e) = append_lines(&w.transcript, &new) {
            tracing::error!(path = %w.transcript.display(), error = %e, "writing a remote transcript failed");
            return;
        }
        w.lines = from_line.max(w.lines) + new.len() as u64;
    }

    /// The worker ended: its branch is fetched from the remote (when it committed, by the
    /// [`BranchFetcher`], once the events read with this one are handled), then the
    /// coordinator is told. Only the first end of a worker counts.
    async fn finish(&self, worker: &str, index: usize, status: WorkerStatus, report: WorkerReport) {
        let Some(remote) = self
            .shared
            .lock()
            .ok()
            .and_then(|mut s| s.running.remove(worker))
        else {
            return;
        };
        self.questions.forget(worker);
        let done = match report.commit.clone() {
            Some(commit) => {
                let finished = Finished {
                    worker: worker.to_string(),
                    branch: remote.branch,
                    commit,
                    done: WorkerDone {
                        index,
                        status,
                        report,
                    },
                };
                if let Ok(mut ended) = self.ended.lock() {
                    ended.push(finished);
                    return;
                }
                finished.failed("the coordinator's event listener failed".into())
            }
            None => WorkerDone {
                index,
                status,
                report,
            },
        };
        let _ = self.coordinator.tell(done).await;
    }

    /// Reads the heartbeats of the running workers' machines every [`HEARTBEAT_EVERY`] and
    /// tells the coordinator when one's state changes ([`Liveness`]: lost only after the
    /// timeout while NATS is reachable; NATS unreachable while reads fail).
    async fn watch_heartbeats(self: Arc<Self>) {
        let mut tick = tokio::time::interval(HEARTBEAT_EVERY);
        let mut liveness = Liveness::new(HEARTBEAT_TTL, tokio::time::Instant::now().into_std());
        while self.coordinator.is_alive() {
            tick.tick().await;
            let Some(machines) = self.watched_machines() else {
                return;
            };
            let names: Vec<&str> = machines.iter().map(|m| m.2.as_str()).collect();
            liveness.retain(&names);
            let store = self.nats.heartbeats().await.ok();
            if store.is_none() {
                liveness.unreachable();
            }
            for (worker, index, machine, told) in machines {
                let reading = match &store {
                    Some(store) => read_heartbeat(store, &machine).await,
                    None => Reading::Unreachable,
                };
                let now = tokio::time::Instant::now().into_std();
                let state = liveness.observe(&machine, reading, now);
                if state != told {
                    self.set_machine_state(&worker, index, machine, state).await;
                }
            }
        }
    }

    /// The running workers with a machine: (worker, plan index, machine, state last told);
    /// `None` when the shared state is poisoned.
    fn watched_machines(&self) -> Option<Vec<(String, usize, String, MachineState)>> {
        let s = self.shared.lock().ok()?;
        Some(
            s.running
                .iter()
                .filter_map(|(id, w)| {
                    Some((id.clone(), w.index, w.machine.clone()?, w.machine_state))
                })
                .collect(),
        )
    }

    async fn set_machine_state(
        &self,
        worker: &str,
        index: usize,
        machine: String,
        state: MachineState,
    ) {
        if let Ok(mut s) = self.shared.lock()
            && let Some(w) = s.running.get_mut(worker)
        {
            w.machine_state = state;
        }
        let _ = self
            .coordinator
            .tell(Progress::Machine {
                index,
                machine,
                state,
            })
            .await;
    }
}

/// One reading of `machine`'s heartbeat key in `store`.
async fn read_heartbeat(store: &async_nats::jetstream::kv::Store, machine: &str) -> Reading {
    match store.entry(machine).await {
        Ok(Some(entry)) if entry.operation == async_nats::jetstream::kv::Operation::Put => {
            Reading::Beat(entry.revision)
        }
        Ok(_) => Reading::Absent,
        Err(_) => Reading::Unreachable,
    }
}

/// A worker that ended with a commit: the coordinator hears of it once its branch is fetched.
struct Finished {
    worker: String,
    /// The local branch its pushed branch is fetched into.
    branch: String,
    /// The commit its report names.
    commit: String,
    /// What the coordinator is told.
    done: WorkerDone,
}

impl Finished {
    /// What the coordinator is told when the branch could not be fetched as reported.
    fn failed(mut self, error: String) -> WorkerDone {
        self.done.report.error = Some(error);
        self.done.status = WorkerStatus::Failed;
        self.done
    }
}

/// Takes finished workers' branches from the remote into their local branches. A fetch takes
/// every branch the run's workers pushed (`ahelper/<run>/*` into `refs/ahelper-pushed/<run>/*`
/// of this repository), so a worker whose branch arrived with an earlier fetch — it pushed
/// before its `done` event was read — needs none: its branch is set at once. The others are
/// fetched at once while fewer than [`FETCHES_IN_FLIGHT`] fetches run; those that finish while
/// that many run go together into the next `git fetch`.
struct BranchFetcher {
    run_id: String,
    repo_root: PathBuf,
    repo_url: String,
    shared: Arc<Mutex<Shared>>,
    coordinator: ActorRef<CoordinatorActor>,
    /// The pushed branches' tips as of the last fetch, by worker id.
    fetched: Mutex<HashMap<String, git::Oid>>,
}

impl BranchFetcher {
    /// Takes the finished workers queued (those whose ends were read together at once) until
    /// the listener is gone: those whose branch was fetched already at once, the others in
    /// batches ([`run_batches`], up to [`FETCHES_IN_FLIGHT`] at once).
    async fn run(self, mut queue: tokio::sync::mpsc::UnboundedReceiver<Vec<Finished>>) {
        let fetcher = Arc::new(self);
        let (to_fetch, fetch_queue) = tokio::sync::mpsc::unbounded_channel::<Vec<Finished>>();
        let batches = tokio::spawn(run_batches(fetch_queue, FETCHES_IN_FLIGHT, {
            let fetcher = fetcher.clone();
            move |batch| {
                let fetcher = fetcher.clone();
                async move {
                    fetcher
                        .fetch_and_tell(batch.into_iter().flatten().collect())
                        .await
                }
            }
        }));
        while let Some(ended) = queue.recv().await {
            let (known, unknown): (Vec<Finished>, Vec<Finished>) =
                ended.into_iter().partition(|f| fetcher.was_fetched(f));
            if !known.is_empty() {
                let fetcher = fetcher.clone();
                tokio::spawn(async move { fetcher.fetch_and_tell(known).await });
            }
            if unknown.is_empty() {
                continue;
            }
            if let Err(unsent) = to_fetch.send(unknown) {
                for finished in unsent.0 {
                    let done = finished.failed("the coordinator's fetcher stopped".into());
                    let _ = fetcher.coordinator.tell(done).await;
                }
            }
        }
        drop(to_fetch);
        let _ = batches.await;
    }

    /// Whether the last fetch brought `finished`'s branch at the commit its report names.
    fn was_fetched(&self, finished: &Finished) -> bool {
        let Ok(commit) = git::Oid::from_str(&finished.commit) else {
            return false;
        };
        self.fetched
            .lock()
            .is_ok_and(|tips| tips.get(&finished.worker) == Some(&commit))
    }

    /// Takes `batch`'s branches (fetching the run's pushed branches unless each was fetched
    /// already) and tells the coordinator of its workers, in one message: done, or failed when
    /// its branch could not be had as reported.
    async fn fetch_and_tell(&self, batch: Vec<Finished>) {
        let outcomes = self.take(&batch).await;
        tracing::debug!(workers = batch.len(), "fetched finished branches");
        let done = batch
            .into_iter()
            .zip(outcomes)
            .map(|(finished, outcome)| match outcome {
                Ok(commit) => {
                    if let Ok(mut shared) = self.shared.lock() {
                        shared.on_remote.insert(commit);
                    }
                    finished.done
                }
                Err(error) => finished.failed(error),
            })
            .collect();
        // Told together: they merge in one pass.
        let _ = self.coordinator.tell(WorkersDone { done }).await;
    }

    /// Each of `batch`'s branches set at its fetched tip ([`take_branches`]).
    async fn take(&self, batch: &[Finished]) -> Vec<Result<git::Oid, String>> {
        let fetch = !batch.iter().all(|f| self.was_fetched(f));
        let wanted: Vec<WantedBranch> = batch
            .iter()
            .map(|f| WantedBranch {
                worker: f.worker.clone(),
                branch: f.branch.clone(),
                commit: f.commit.clone(),
            })
            .collect();
        let (root, url, run) = (
            self.repo_root.clone(),
            self.repo_url.clone(),
            self.run_id.clone(),
        );
        let count = wanted.len();
        let taken = git_task(move || Ok(take_branches(&root, &url, &run, &wanted, fetch))).await;
        let Taken { tips, outcomes } = match taken {
            Ok(taken) => taken,
            Err(e) => {
                let error = format!("could not fetch its branch: {e}");
                return vec![Err(error); count];
            }
        };
        if let (Some(tips), Ok(mut fetched)) = (tips, self.fetched.lock()) {
            fetched.extend(tips);
        }
        outcomes
    }
}

/// A finished worker's branch to take: `ahelper/<run>/<worker>` as fetched into the local
/// `branch`, which must then be at `commit`.
struct WantedBranch {
    worker: String,
    branch: String,
    commit: String,
}

/// Where the coordinator's repository keeps the branches run `run`'s workers pushed, as last
/// fetched (`refs/ahelper-pushed/<run>/<worker>`; deleted when the run ends).
pub(super) fn pushed_prefix(run: &str) -> String {
    format!("refs/ahelper-pushed/{run}/")
}

/// What [`take_branches`] did.
struct Taken {
    /// The tips of the run's pushed branches by worker id, when it fetched.
    tips: Option<HashMap<String, git::Oid>>,
    /// Per wanted branch: the commit it was set at, or why not.
    outcomes: Vec<Result<git::Oid, String>>,
}

/// With `fetch`, fetches every branch the run's workers pushed in one `git fetch` and reads
/// their tips; then sets each `wanted` branch at its worker's fetched tip, which must be the
/// commit its report names.
fn take_branches(root: &Path, url: &str, run: &str, wanted: &[WantedBranch], fetch: bool) -> Taken {
    let prefix = pushed_prefix(run);
    let fetch_error = if fetch {
        fetch_pushed(root, url, run).err()
    } else {
        None
    };
    let tips: HashMap<String, git::Oid> = git::local_refs(root, &prefix)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(name, oid)| Some((name.strip_prefix(&prefix)?.to_string(), oid)))
        .collect();
    let outcomes = wanted
        .iter()
        .map(|w| take_branch(root, run, w, tips.get(&w.worker), fetch_error.as_ref()))
        .collect();
    Taken {
        tips: fetch.then_some(tips),
        outcomes,
    }
}

/// Attempts of [`fetch_pushed`], and the wait before the second (doubled before each next).
const FETCH_ATTEMPTS: u32 = 3;
const FETCH_RETRY_AFTER: std::time::Duration = std::time::Duration::from_millis(150);

/// Fetches every branch run `run`'s workers pushed to `url` into [`pushed_prefix`] of `root`,
/// trying again after a failure: two fetches in flight update the same refs, and one that
/// finds a ref locked by the other for longer than git waits (`core.filesRefLockTimeout`, 100
/// ms: a loaded machine) fails, which must not fail the finished worker whose branch it was to
/// bring. The last attempt's error when none succeeds (a remote that stays unreachable costs
/// 0.45 s more).
fn fetch_pushed(root: &Path, url: &str, run: &str) -> Result<(), git::GitError> {
    let spec = format!("+refs/heads/ahelper/{run}/*:{}*", pushed_prefix(run));
    let mut wait = FETCH_RETRY_AFTER;
    let mut attempt = 1;
    loop {
        match git::fetch_refspecs(root, url, std::slice::from_ref(&spec)) {
            Ok(()) => return Ok(()),
            Err(error) if attempt >= FETCH_ATTEMPTS => return Err(error),
            Err(error) => {
                tracing::debug!(%error, attempt, "fetching the pushed branches failed; trying again");
                std::thread::sleep(wait);
                wait *= 2;
                attempt += 1;
            }
        }
    }
}

/// Sets `w`'s local branch at `tip`, its worker's pushed branch as fetched, when that is the
/// commit its report names.
fn take_branch(
    root: &Path,
    run: &str,
    w: &WantedBranch,
    tip: Option<&git::Oid>,
    fetch_error: Option<&git::GitError>,
) -> Result<git::Oid, String> {
    let expected =
        git::Oid::from_str(&w.commit).map_err(|_| format!("invalid commit {}", w.commit))?;
    let remote_branch = wire::worker_branch(run, &w.worker);
    let tip = match (tip, fetch_error) {
        (Some(tip), _) => *tip,
        (None, Some(e)) => return Err(format!("could not fetch its branch {remote_branch}: {e}")),
        (None, None) => {
            return Err(format!(
                "could not fetch its branch {remote_branch}: the remote has no such branch"
            ));
        }
    };
    if tip != expected {
        return Err(format!(
            "its branch {remote_branch} on the remote is at {tip}, its report names {expected}"
        ));
    }
    git::set_branch(root, &w.branch, tip)
        .map_err(|e| format!("could not set its branch {} at {tip}: {e}", w.branch))?;
    Ok(tip)
}

/// `progress` with the coordinator's index of its worker (a remote worker's own is ignored);
/// `None` for what only the coordinator may say (which machine runs a worker).
fn with_index(progress: Progress, i: usize) -> Option<Progress> {
    Some(match progress {
        Progress::Status { status, .. } => Progress::Status { index: i, status },
        Progress::Turn { turn, .. } => Progress::Turn { index: i, turn },
        Progress::ToolCall { action, .. } => Progress::ToolCall { index: i, action },
        Progress::ToolCallDone { .. } => Progress::ToolCallDone { index: i },
        Progress::Changed { files, .. } => Progress::Changed { index: i, files },
        Progress::Usage { total, .. } => Progress::Usage { index: i, total },
        Progress::Denied {
            action,
            reason,
            allow_rule,
            ..
        } => Progress::Denied {
            index: i,
            action,
            reason,
            allow_rule,
        },
        Progress::Retry { message, .. } => Progress::Retry { index: i, message },
        Progress::Machine { .. } | Progress::Queue { .. } => return None,
        Progress::Phase {
            status, fix_round, ..
        } => Progress::Phase {
            index: i,
            status,
            fix_round,
        },
    })
}

/// The `kind` of an event as it is on the wire, for logs.
fn event_kind(body: &EventBody) -> &'static str {
    match body {
        EventBody::Accepted => "accepted",
        EventBody::Progress { .. } => "progress",
        EventBody::Transcript { .. } => "transcript",
        EventBody::Done { .. } => "done",
        EventBody::Released => "released",
    }
}

fn append_lines(path: &Path, lines: &[&String]) -> std::io::Result<()> {
    use std::io::Write;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    let mut text = String::new();
    for line in lines {
        text.push_str(line);
        text.push('\n');
    }
    file.write_all(text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::swarm::remote::testing::git;

    const RUN: &str = "0190a0b0-0000-7000-8000-000000000001";

    /// The coordinator's repository, a bare remote, and workers `w1` and `w2` that pushed a
    /// commit each to `ahelper/<run>/<worker>` there: (repository, remote URL, their commits).
    fn pushed_branches(dir: &Path) -> (PathBuf, String, Vec<String>) {
        let (repo, remote, worker) = (dir.join("repo"), dir.join("remote.git"), dir.join("w"));
        std::fs::create_dir_all(&repo).unwrap();
        git(&repo, &["init", "-q"]);
        std::fs::write(repo.join("f.txt"), "base\n").unwrap();
        git(&repo, &["add", "f.txt"]);
        git(&repo, &["commit", "-q", "-m", "base"]);
        git(dir, &["clone", "-q", "--bare", "repo", "remote.git"]);
        git(dir, &["clone", "-q", "remote.git", "w"]);
        let url = remote.to_string_lossy().into_owned();
        let commits = ["w1", "w2"]
            .iter()
            .map(|w| {
                std::fs::write(worker.join(format!("{w}.txt")), "x\n").unwrap();
                git(&worker, &["add", "."]);
                git(&worker, &["commit", "-q", "-m", w]);
                let spec = format!("HEAD:refs/heads/ahelper/{RUN}/{w}");
                git(&worker, &["push", "-q", &url, &spec]);
                git(&worker, &["rev-parse", "HEAD"])
            })
            .collect();
        (repo, url, commits)
    }

    fn wanted(worker: &str, commit: &str) -> WantedBranch {
        WantedBranch {
            worker: worker.into(),
            branch: format!("ahelper/{RUN}/{worker}"),
            commit: commit.into(),
        }
    }

    #[test]
    fn one_fetch_brings_every_pushed_branch_and_a_later_one_needs_none() {
        let dir = tempfile::tempdir().unwrap();
        let (repo, url, commits) = pushed_branches(dir.path());
        let Taken { tips, outcomes } =
            take_branches(&repo, &url, RUN, &[wanted("w1", &commits[0])], true);
        assert_eq!(outcomes[0].as_ref().unwrap().to_string(), commits[0]);
        let tips = tips.expect("fetched");
        assert_eq!(tips.len(), 2, "{tips:?}");
        assert_eq!(tips["w2"].to_string(), commits[1]);
        // w2 was fetched with w1: taken without a fetch (the remote is gone meanwhile).
        std::fs::remove_dir_all(dir.path().join("remote.git")).unwrap();
        let Taken { tips, outcomes } =
            take_branches(&repo, &url, RUN, &[wanted("w2", &commits[1])], false);
        assert!(tips.is_none());
        assert_eq!(outcomes[0].as_ref().unwrap().to_string(), commits[1]);
        let branch = format!("ahelper/{RUN}/w2");
        assert_eq!(git(&repo, &["rev-parse", &branch]), commits[1]);
        // When the run ends, the fetched copies go; the workers' branches stay.
        let deleted = git::delete_local_refs(&repo, &pushed_prefix(RUN)).unwrap();
        assert_eq!(deleted, 2);
        assert!(
            git::local_refs(&repo, &pushed_prefix(RUN))
                .unwrap()
                .is_empty()
        );
        assert_eq!(git(&repo, &["rev-parse", &branch]), commits[1]);
    }

    #[test]
    fn a_ref_locked_by_another_fetch_for_longer_than_git_waits_fails_no_worker() {
        let dir = tempfile::tempdir().unwrap();
        let (repo, url, commits) = pushed_branches(dir.path());
        // Another fetch in flight holds w2's ref for 400 ms: git gives up on it after 100 ms.
        let lock = repo.join(format!(".git/{}w2.lock", pushed_prefix(RUN)));
        std::fs::create_dir_all(lock.parent().unwrap()).unwrap();
        std::fs::write(&lock, "").unwrap();
        let held = lock.clone();
        let other = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(400));
            std::fs::remove_file(held).unwrap();
        });
        let wanted = [wanted("w1", &commits[0]), wanted("w2", &commits[1])];
        let outcomes = take_branches(&repo, &url, RUN, &wanted, true).outcomes;
        other.join().unwrap();
        assert_eq!(outcomes[0].as_ref().unwrap().to_string(), commits[0]);
        assert_eq!(outcomes[1].as_ref().unwrap().to_string(), commits[1]);
        assert_eq!(
            git(&repo, &["rev-parse", &format!("ahelper/{RUN}/w2")]),
            commits[1]
        );
    }

    #[test]
    fn a_branch_at_another_commit_or_missing_fails_only_its_worker() {
        let dir = tempfile::tempdir().unwrap();
        let (repo, url, commits) = pushed_branches(dir.path());
        let wanted = [
            wanted("w1", &commits[1]),
            wanted("w2", &commits[1]),
            wanted("w3", &commits[1]),
        ];
        let outcomes = take_branches(&repo, &url, RUN, &wanted, true).outcomes;
        let error = outcomes[0].as_ref().unwrap_err();
        assert!(error.contains("its report names"), "{error}");
        assert!(outcomes[1].is_ok(), "{outcomes:?}");
        let error = outcomes[2].as_ref().unwrap_err();
        assert!(error.contains("no such branch"), "{error}");
        assert!(git::branch_tip(&repo, &format!("ahelper/{RUN}/w1")).is_err());
    }
}
