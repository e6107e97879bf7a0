//! A run's verification: the command chosen for it, its own verification worktree (outside the
//! user's checkout, on `ahelper/<run>/verify`, then detached at each commit it verifies), the
//! baseline on the base commit, and verifying a commit or a worker's worktree against it.
//!
//! The building blocks (choosing, prechecking, running and comparing) are in [`crate::verify`];
//! this module binds them to a run: paths, sandbox, environment, the run's cancel token.

use super::run::worktree_base;
use super::state::RunRecord;
use super::{GitTaskError, create_parent_dir, git_task};
use crate::config::{Config, EnvSnapshot};
use crate::redact::Redactor;
use crate::sandbox_os::CommandSandbox;
use crate::verify::{VerifyRun, VerifySpec, run_verification};
use ahelper_worktrees as git;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Id of the verification worktree in paths, branch names and the status table.
pub const VERIFY_ID: &str = "verify";

/// The largest `[swarm] verify_slots`: verification worktrees of one run.
pub const MAX_VERIFY_SLOTS: usize = 16;

/// Id of verification slot `n` (0-based): `verify` for the first, then `verify-2`, `verify-3`…
pub fn slot_id(n: usize) -> String {
    if n == 0 {
        VERIFY_ID.to_string()
    } else {
        format!("{VERIFY_ID}-{}", n + 1)
    }
}

/// Everything needed to run a run's verification command somewhere.
#[derive(Debug, Clone)]
pub struct RunVerifier {
    /// The command line.
    pub command: String,
    /// Time limit of one run (`[swarm] verify_timeout_s`).
    pub timeout: Duration,
    /// The verification worktree.
    pub worktree: PathBuf,
    /// Its branch (`ahelper/<run>/verify`), at the base commit.
    pub branch: String,
    /// The run's command sandbox (re-rooted at each directory verified); `None` = unconfined.
    pub sandbox: Option<Arc<CommandSandbox>>,
    /// Added to the command's environment: `AHELPER_RUN_ID`, `PYTHONDONTWRITEBYTECODE=1` (so
    /// verifying a worker's worktree leaves no byte-code behind to be committed).
    pub env: BTreeMap<String, String>,
    /// The config's redactor: known secret values are replaced in the command's output.
    pub redactor: Redactor,
}

impl RunVerifier {
    /// The verifier of `record` with `command`: the worktree `<worktree base>/verify`, the
    /// config's time limit and sandbox.
    pub fn new(record: &RunRecord, config: &Config, command: &str) -> Self {
        let env_snapshot = EnvSnapshot::capture();
        let base = worktree_base(config, &env_snapshot, &record.repo_root, &record.run_id);
        let mut env = BTreeMap::new();
        env.insert("AHELPER_RUN_ID".to_string(), record.run_id.clone());
        env.insert("PYTHONDONTWRITEBYTECODE".to_string(), "1".to_string());
        RunVerifier {
            command: command.to_string(),
            timeout: Duration::from_secs(config.swarm.verify_timeout_s),
            worktree: record
                .verify_worktree
                .clone()
                .unwrap_or_else(|| base.join(VERIFY_ID)),
            branch: git::worker_branch(&record.run_id, VERIFY_ID),
            sandbox: Some(Arc::new(CommandSandbox::new(
                &config.sandbox,
                &record.repo_root,
            ))),
            env,
            redactor: config.redactor.clone(),
        }
    }

    /// The verifier of slot `n` ([`slot_id`]): the same command in its own worktree next to the
    /// first (`<worktree base>/verify-<n+1>` on `ahelper/<run>/verify-<n+1>`); slot 0 is this
    /// one. The worktree is made on first use ([`RunVerifier::prepare_worktree`]) and kept for
    /// the run, so its build caches stay warm.
    pub fn slot(&self, n: usize) -> RunVerifier {
        let mut slot = self.clone();
        if n > 0 {
            let id = slot_id(n);
            slot.worktree = self.worktree.with_file_name(&id);
            slot.branch = format!("{}-{}", self.branch, n + 1);
        }
        slot
    }

    /// Runs the command in `dir` (confined to it when the sandbox is enforced).
    pub async fn run_in(&self, dir: &Path, cancel: &CancellationToken) -> VerifyRun {
        let sandbox = self.sandbox.as_ref().map(|s| s.for_workspace(dir));
        run_verification(&VerifySpec {
            command: &self.command,
            dir,
            timeout: self.timeout,
            sandbox: sandbox.as_ref(),
            env: &self.env,
            redactor: &self.redactor,
            cancel,
        })
        .await
    }

    /// Creates the verification worktree at `commit` (or reuses it when it exists, e.g. on
    /// resume).
    ///
    /// # Errors
    /// [`GitTaskError`] from the git layer.
    pub async fn prepare_worktree(
        &self,
        lock: Arc<git::RepoLock>,
        repo: &Path,
        commit: git::Oid,
    ) -> Result<(), GitTaskError> {
        let (repo, path, branch) = (
            repo.to_path_buf(),
            self.worktree.clone(),
            self.branch.clone(),
        );
        git_task(move || {
            if git::list_worktrees(&repo)?.iter().any(|w| w.path == path) {
                return Ok(());
            }
            create_parent_dir(&path)?;
            git::create_worktree(&lock, &repo, &path, &branch, commit)?;
            Ok(())
        })
        .await
    }

    /// Checks out `commit` detached in the verification worktree and runs the command there.
    ///
    /// # Errors
    /// [`GitTaskError`] when the checkout fails.
    pub async fn verify_commit(
        &self,
        commit: git::Oid,
        cancel: &CancellationToken,
    ) -> Result<VerifyRun, GitTaskError> {
        let path = self.worktree.clone();
        git_task(move || Ok(git::checkout_detached(&path, commit)?)).await?;
        Ok(self.run_in(&self.worktree, cancel).await)
    }

    /// Runs the command in a worker's (committed) worktree, then removes the untracked files
    /// the run left there (ignored files such as build caches stay), so nothing of it is
    /// committed with the worker's next changes.
    pub async fn verify_worktree(&self, dir: &Path, cancel: &CancellationToken) -> VerifyRun {
        let run = self.run_in(dir, cancel).await;
        let path = dir.to_path_buf();
        if let Err(e) = git_task(move || Ok(git::clean_untracked(&path)?)).await {
            tracing::warn!(error = %e, dir = %dir.display(), "cleaning after verification failed");
        }
        run
    }
}

/// The baseline of a run: the verification worktree created at the base commit and the
/// command run there. A worktree that cannot be created gives a run that could not start.
pub async fn run_baseline(
    verifier: &RunVerifier,
    lock: Arc<git::RepoLock>,
    repo: &Path,
    base: git::Oid,
    cancel: &CancellationToken,
) -> VerifyRun {
    let prepared = verifier.prepare_worktree(lock, repo, base).await;
    let checked = match prepared {
        Ok(()) => verifier.verify_commit(base, cancel).await,
        Err(e) => Err(e),
    };
    checked.unwrap_or_else(|e| VerifyRun {
        command: verifier.command.clone(),
        outcome: crate::verify::VerifyOutcome::CouldNotStart {
            reason: format!("the verification worktree could not be set up: {e}"),
        },
        duration_ms: 0,
        output: String::new(),
        failures: None,
    })
}

/// The baseline of a run while it may still be running. It starts before planning and keeps
/// running while the coordinator plans and the first workers work; only what judges new
/// failures waits for it ([`BaselineHandle::wait`]): a worker's self-check and the merge queue
/// before its first verification. Clones share the one run.
#[derive(Debug, Clone)]
pub struct BaselineHandle {
    result: tokio::sync::watch::Receiver<Option<VerifyRun>>,
    cancel: CancellationToken,
}

impl BaselineHandle {
    /// Starts [`run_baseline`] on `base` in a task of its own.
    pub fn start(
        verifier: RunVerifier,
        lock: Arc<git::RepoLock>,
        repo: PathBuf,
        base: git::Oid,
    ) -> Self {
        let (tx, result) = tokio::sync::watch::channel(None);
        let cancel = CancellationToken::new();
        let stop = cancel.clone();
        tokio::spawn(async move {
            let run = run_baseline(&verifier, lock, &repo, base, &stop).await;
            tx.send_replace(Some(run));
        });
        BaselineHandle { result, cancel }
    }

    /// A baseline that is known already (a resumed run's).
    pub fn ready(run: VerifyRun) -> Self {
        let (_, result) = tokio::sync::watch::channel(Some(run));
        BaselineHandle {
            result,
            cancel: CancellationToken::new(),
        }
    }

    /// The baseline, once it finished: `None` only when its task died without a result.
    pub async fn wait(&self) -> Option<VerifyRun> {
        let mut result = self.result.clone();
        let finished = result.wait_for(Option::is_some).await;
        finished.ok().and_then(|r| r.clone())
    }

    /// The baseline if it finished already.
    pub fn finished(&self) -> Option<VerifyRun> {
        self.result.borrow().clone()
    }

    /// Stops it (its command's process group is killed); [`BaselineHandle::wait`] then gives
    /// a cancelled run.
    pub fn stop(&self) {
        self.cancel.cancel();
    }

    /// Stops it and waits until its command is gone.
    pub async fn stop_and_wait(&self) {
        self.stop();
        let _ = self.wait().await;
    }
}
