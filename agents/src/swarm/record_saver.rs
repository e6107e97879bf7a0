//! Writing a running swarm's `run.json` off the coordinator's thread.
//!
//! [`RunRecord::save`] writes atomically and `fsync`s the file and its directory: 4–12 ms on a
//! loaded virtual disk. The coordinator used to do that on its own actor thread for every new
//! worker state, report and merge, so at the end of a run (every worker committing and merging
//! at once) the saves stood between the last worker's reply and the closing turn. Now the
//! coordinator hands the record to a [`RecordSaver`] and goes on: one task writes the newest
//! record on tokio's blocking pool, one save at a time, and records handed over while a save
//! runs collapse into the next one (only the newest is written). [`RecordSaver::finish`] writes
//! the final record and returns once it is on disk.
//!
//! What a crash can lose: the states handed over during the last save (a few ms), as before a
//! crash could land between a state change and its save; the record on disk is always whole.
//!
//! Before the coordinator starts, the run's record is written twice on the way to the first
//! model requests: when the run is prepared (before the planning request) and when its plan is
//! saved (before the first workers). Both are renamed into place at once
//! ([`RunRecord::save_deferring_sync`]: every reader sees them whole) and flushed to disk beside
//! what follows ([`RecordFlush`]); the run's [`RecordSaver`] starts saving only once the plan's
//! flush is done, so the final record is still the last one written and on disk when the run
//! reports its end. Until a flush ends only a power loss can undo that save (the record then
//! reads as before, or, for the first save, empty).

use super::state::{RunRecord, RunStoreError};
use crate::atomic_write::PendingSync;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A record written without waiting for the disk ([`RunRecord::save_deferring_sync`]) being
/// flushed on tokio's blocking pool. Clones share the flush; the default has nothing to flush.
#[derive(Debug, Clone, Default)]
pub struct RecordFlush(Arc<tokio::sync::Mutex<Option<JoinHandle<()>>>>);

impl RecordFlush {
    /// Starts flushing `pending` in the background (on this thread, before returning, when
    /// called outside a tokio runtime). A failed flush is logged: the record stays renamed in
    /// place, and the next save writes (and flushes) it whole again.
    pub fn start(pending: PendingSync) -> RecordFlush {
        let flush = move || {
            if let Err(e) = pending.sync() {
                tracing::error!(error = %e, "flushing run.json to disk failed");
            }
        };
        let task = match tokio::runtime::Handle::try_current() {
            Ok(runtime) => Some(runtime.spawn_blocking(flush)),
            Err(_) => {
                flush();
                None
            }
        };
        RecordFlush(Arc::new(tokio::sync::Mutex::new(task)))
    }

    /// Returns once the flush has ended.
    pub async fn wait(&self) {
        let mut task = self.0.lock().await;
        if let Some(running) = task.as_mut()
            && let Err(e) = running.await
        {
            tracing::error!(error = %e, "flushing run.json stopped");
        }
        *task = None;
    }
}

/// Saves the newest record handed to it, in the background (see the module docs).
pub struct RecordSaver {
    newest: watch::Sender<Option<RunRecord>>,
    task: JoinHandle<Result<(), RunStoreError>>,
}

impl RecordSaver {
    /// A saver with nothing to save yet; its task runs on the current tokio runtime.
    pub fn start() -> RecordSaver {
        RecordSaver::after(RecordFlush::default())
    }

    /// A saver whose first save waits for `earlier`, the flush of a record written before it
    /// (the plan's): saves stay in order and [`RecordSaver::finish`] returns only once that
    /// flush is done too.
    pub fn after(earlier: RecordFlush) -> RecordSaver {
        let (newest, pending) = watch::channel(None);
        let task = tokio::spawn(async move {
            earlier.wait().await;
            save_newest(pending).await
        });
        RecordSaver { newest, task }
    }

    /// Hands over `record` to be saved; returns at once. A record handed over before the
    /// previous one was written replaces it.
    pub fn save(&self, record: RunRecord) {
        self.newest.send_replace(Some(record));
    }

    /// Saves `record` after whatever is being saved and returns once it is written.
    ///
    /// # Errors
    /// Why the final record is not on disk ([`RunStoreError::Io`]: a full disk, a read-only
    /// directory); `run.json` then holds the last record that could be saved, whole.
    pub async fn finish(self, record: RunRecord) -> Result<(), RunStoreError> {
        self.newest.send_replace(Some(record));
        drop(self.newest);
        match self.task.await {
            Ok(last) => last,
            Err(e) => Err(RunStoreError::Io {
                path: PathBuf::from("run.json"),
                source: std::io::Error::other(format!("the run.json saver stopped: {e}")),
            }),
        }
    }
}

/// The saver's task: waits for a new record, writes the newest one, until the sender is gone
/// and the last record handed over is written. Returns how the last save went (a failed save
/// that a later one wrote over is only logged: every save writes the whole record).
async fn save_newest(mut pending: watch::Receiver<Option<RunRecord>>) -> Result<(), RunStoreError> {
    let mut last = Ok(());
    // `changed` reports a record handed over before the sender went, then the end.
    while pending.changed().await.is_ok() {
        let Some(mut record) = pending.borrow_and_update().clone() else {
            continue;
        };
        let path = record.record_path();
        last = match tokio::task::spawn_blocking(move || record.save()).await {
            Ok(saved) => saved,
            Err(e) => Err(RunStoreError::Io {
                path,
                source: std::io::Error::other(format!("saving stopped: {e}")),
            }),
        };
        if let Err(e) = &last {
            tracing::error!(error = %e, "saving run.json failed");
        }
    }
    last
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::swarm::state::RunStatus;

    /// Records handed over quickly are all accounted for by the final save: the file on disk
    /// is the last record, whole.
    #[tokio::test]
    async fn the_final_record_is_on_disk_when_finish_returns() {
        let dir = tempfile::tempdir().unwrap();
        let saver = RecordSaver::start();
        let mut record = RunRecord::new("r1".into(), dir.path().into(), RunStatus::Running);
        for i in 0..20 {
            record.task = format!("step {i}");
            saver.save(record.clone());
        }
        record.status = RunStatus::Finished;
        record.task = "final".into();
        saver.finish(record).await.unwrap();
        let back = RunRecord::load(dir.path(), "r1").unwrap();
        assert_eq!(back.task, "final");
        assert_eq!(back.status, RunStatus::Finished);
    }

    /// A record saved without waiting for the disk is readable, whole, at once; a saver started
    /// after its flush writes over it, and the final record is what stays.
    #[tokio::test]
    async fn a_deferred_save_is_readable_at_once_and_the_saver_writes_after_its_flush() {
        let dir = tempfile::tempdir().unwrap();
        let mut record = RunRecord::new("r2".into(), dir.path().into(), RunStatus::Planned);
        record.task = "planned".into();
        let flush = RecordFlush::start(record.save_deferring_sync().unwrap());
        let back = RunRecord::load(dir.path(), "r2").unwrap();
        assert_eq!(back.task, "planned");
        let saver = RecordSaver::after(flush.clone());
        record.status = RunStatus::Finished;
        record.task = "final".into();
        saver.finish(record).await.unwrap();
        flush.wait().await;
        let back = RunRecord::load(dir.path(), "r2").unwrap();
        assert_eq!(back.task, "final");
        assert_eq!(back.status, RunStatus::Finished);
        let names: Vec<String> = std::fs::read_dir(crate::swarm::state::run_dir(dir.path(), "r2"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            names.iter().all(|n| !n.ends_with(".tmp")),
            "no temporary file is left: {names:?}"
        );
    }
}
