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

use super::state::RunRecord;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Saves the newest record handed to it, in the background (see the module docs).
pub struct RecordSaver {
    newest: watch::Sender<Option<RunRecord>>,
    task: JoinHandle<()>,
}

impl RecordSaver {
    /// A saver with nothing to save yet; its task runs on the current tokio runtime.
    pub fn start() -> RecordSaver {
        let (newest, pending) = watch::channel(None);
        RecordSaver {
            newest,
            task: tokio::spawn(save_newest(pending)),
        }
    }

    /// Hands over `record` to be saved; returns at once. A record handed over before the
    /// previous one was written replaces it.
    pub fn save(&self, record: RunRecord) {
        self.newest.send_replace(Some(record));
    }

    /// Saves `record` after whatever is being saved and returns once it is written (or its
    /// save failed, which is logged like every failed save).
    pub async fn finish(self, record: RunRecord) {
        self.newest.send_replace(Some(record));
        drop(self.newest);
        if let Err(e) = self.task.await {
            tracing::error!(error = %e, "the run.json saver stopped");
        }
    }
}

/// The saver's task: waits for a new record, writes the newest one, until the sender is gone
/// and the last record handed over is written.
async fn save_newest(mut pending: watch::Receiver<Option<RunRecord>>) {
    // `changed` reports a record handed over before the sender went, then the end.
    while pending.changed().await.is_ok() {
        let Some(mut record) = pending.borrow_and_update().clone() else {
            continue;
        };
        let saved = tokio::task::spawn_blocking(move || record.save()).await;
        match saved {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::error!(error = %e, "saving run.json failed"),
            Err(e) => tracing::error!(error = %e, "saving run.json stopped"),
        }
    }
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
        saver.finish(record).await;
        let back = RunRecord::load(dir.path(), "r1").unwrap();
        assert_eq!(back.task, "final");
        assert_eq!(back.status, RunStatus::Finished);
    }
}
