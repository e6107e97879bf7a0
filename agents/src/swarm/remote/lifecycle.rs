//! A distributed run's lifetime on NATS and on the shared git remote, beyond dispatching and
//! listening: re-attaching to a subtask that is still queued or in flight (`swarm resume` after
//! the coordinator died), the coordinator's durable consumer of the run's events, releasing
//! both when the run ends, and [`clean_run`] for `swarm clean` (the run's remote refs too).

use super::connect::{Nats, NatsError, NatsOptions, connect};
use super::wire::{self, check_run_id};
use crate::swarm::state::RemoteRecord;
use crate::swarm::{GitTaskError, git_task};
use ahelper_worktrees as git;
use std::path::Path;

/// The name of run `run`'s durable consumer of worker events (one per run, so a coordinator
/// that reconnects or is resumed continues where the last one stopped).
pub fn coordinator_consumer(run: &str) -> String {
    format!("coordinator-{run}")
}

/// Whether the work queue still holds worker `worker`'s subtask of run `run`: published and
/// not yet acknowledged — waiting for a machine, or being worked on by one. A resumed
/// coordinator then re-attaches to it (waits for its events) instead of publishing it again.
pub async fn subtask_queued(nats: &Nats, run: &str, worker: &str) -> bool {
    let Ok(stream) = nats.work_stream().await else {
        return false;
    };
    stream
        .get_last_raw_message_by_subject(&wire::work_subject(run, worker))
        .await
        .is_ok()
}

/// The last sequence number of the events stream now: a coordinator that starts a run's
/// consumer reads only events stored after it (earlier attempts' events stay unread).
///
/// # Errors
/// [`NatsError::JetStream`].
pub async fn events_position(nats: &Nats) -> Result<u64, NatsError> {
    let mut stream = nats.events_stream().await?;
    let info = stream
        .info()
        .await
        .map_err(|e| NatsError::js("reading the events stream", e))?;
    Ok(info.state.last_sequence)
}

/// What releasing a run on NATS removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Released {
    /// The run's durable consumer was deleted (`false`: there was none).
    pub consumer_deleted: bool,
    /// Subtasks of the run still in the work queue, removed.
    pub subtasks_purged: u64,
}

/// Deletes run `run`'s durable consumer and purges its subtasks left in the work queue (a
/// duplicate no machine took yet). Called when a run ends in its process and by `swarm clean`.
///
/// # Errors
/// [`NatsError::JetStream`] when the server refuses or cannot be reached.
pub async fn release_run(nats: &Nats, run: &str) -> Result<Released, NatsError> {
    let events = nats.events_stream().await?;
    let consumer_deleted = match events.delete_consumer(&coordinator_consumer(run)).await {
        Ok(_) => true,
        Err(e) if is_not_found(&e) => false,
        Err(e) => return Err(NatsError::js("deleting the run's consumer", e)),
    };
    let purged = nats
        .work_stream()
        .await?
        .purge()
        .filter(format!("ahelper.work.{run}.>"))
        .await
        .map_err(|e| NatsError::js("purging the run's subtasks", e))?;
    Ok(Released {
        consumer_deleted,
        subtasks_purged: purged.purged,
    })
}

fn is_not_found(error: &async_nats::jetstream::stream::ConsumerError) -> bool {
    use async_nats::jetstream::{ErrorCode, stream::ConsumerErrorKind};
    matches!(error.kind(), ConsumerErrorKind::JetStream(e) if e.error_code() == ErrorCode::CONSUMER_NOT_FOUND)
}

/// What [`clean_run`] removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RemoteCleanup {
    /// Refs deleted on the git remote (`refs/ahelper/<run>/…`, `refs/heads/ahelper/<run>/…`).
    pub refs_deleted: Vec<String>,
    /// What was released on NATS.
    pub released: Released,
}

/// `swarm clean` of a distributed run could not finish.
#[derive(Debug, thiserror::Error)]
pub enum CleanError {
    /// The run id is not one the coordinator makes.
    #[error(transparent)]
    RunId(#[from] wire::WireError),
    /// The git remote could not be read or its refs deleted.
    #[error(
        "cannot delete the run's refs on the git remote {url}: {source}; delete them with `git push {url} --delete <ref>…`"
    )]
    Git {
        /// The remote.
        url: String,
        /// Cause.
        source: GitTaskError,
    },
    /// NATS could not be reached or refused.
    #[error(
        "{0}; the run's consumer `coordinator-<run>` stays until it is deleted (`nats consumer rm AHELPER_EVENTS`)"
    )]
    Nats(#[from] NatsError),
}

/// Removes what run `run_id` left on the shared git remote and on NATS: its refs under
/// `refs/ahelper/<run>/` (base and start commits), the workers' pushed branches
/// `ahelper/<run>/…`, its durable consumer and its subtasks left in the queue. The git part
/// is done first and does not need NATS.
///
/// # Errors
/// [`CleanError`]; refs already deleted are listed in no error (the call can be repeated).
pub async fn clean_run(
    repo_root: &Path,
    remote: &RemoteRecord,
    nats: &NatsOptions,
    run_id: &str,
) -> Result<RemoteCleanup, CleanError> {
    check_run_id(run_id)?;
    delete_fetched_branches(repo_root, run_id).await;
    let refs_deleted = delete_run_refs(repo_root, &remote.repo_url, run_id)
        .await
        .map_err(|source| CleanError::Git {
            url: remote.repo_url.clone(),
            source,
        })?;
    let connection = connect(nats).await?;
    let released = release_run(&connection, run_id).await?;
    Ok(RemoteCleanup {
        refs_deleted,
        released,
    })
}

/// Deletes the coordinator's copies of the branches run `run_id`'s workers pushed, as last
/// fetched (`refs/ahelper-pushed/<run>/…` in the repository at `repo_root`; the workers' local
/// branches stay). A failure is logged: the refs only keep commits from being pruned.
pub async fn delete_fetched_branches(repo_root: &Path, run_id: &str) {
    let (root, prefix) = (repo_root.to_path_buf(), super::slots::pushed_prefix(run_id));
    let deleted = git_task(move || Ok(git::delete_local_refs(&root, &prefix)?)).await;
    if let Err(error) = deleted {
        tracing::warn!(run = %run_id, %error, "deleting the fetched copies of the workers' branches failed");
    }
}

/// Deletes the run's refs on `url`; returns their names.
async fn delete_run_refs(
    repo_root: &Path,
    url: &str,
    run_id: &str,
) -> Result<Vec<String>, GitTaskError> {
    let (root, url, run) = (repo_root.to_path_buf(), url.to_string(), run_id.to_string());
    git_task(move || {
        let mut refs = Vec::new();
        for prefix in [
            format!("refs/ahelper/{run}/"),
            format!("refs/heads/ahelper/{run}/"),
        ] {
            let found = git::remote_refs(&root, &url, &prefix)?;
            refs.extend(found.into_iter().map(|(name, _)| name));
        }
        git::delete_remote_refs(&root, &url, &refs)?;
        Ok(refs)
    })
    .await
}
