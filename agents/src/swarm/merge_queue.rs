//! The merge queue: finished worker branches go into the run's integration branch one at a
//! time, in plan order, in memory (no checkout). A conflict loses nothing: no ref moves, both
//! branches are kept and the conflicting files are recorded.
//!
//! The coordinator asks [`MergeQueue::ready`] which workers may merge now. Without
//! verification it merges all of them in one pass ([`MergeQueue::merge_clean_run`]: one ref
//! update, the same commits as one at a time, in plan order), so workers that finish together
//! are not merged one round trip after another; the first that does not merge cleanly goes
//! through [`MergeQueue::merge_gated`]. With verification on, several ready workers are one
//! batch ([`super::merge_batch`]: verified once, split to isolate a culprit), a single one goes
//! through [`MergeQueue::merge_gated`]. The typed [`MergeStep`] says what the coordinator
//! records.
//!
//! The gate, when verification is on: the branch is merged into a *candidate* in memory
//! ([`git::merge_candidate`]), the candidate is checked out in the run's verification worktree
//! and verified, and only a candidate without new failures (against the baseline) advances the
//! integration branch (compare-and-swap, [`git::advance_branch`]). A red candidate goes to up to
//! `merge_fix_attempts` `fixer` agents, each re-verified; still red, the worker stays unmerged
//! ([`MergeStep::VerifyFailed`]) with its branch kept. A textual conflict goes to one `merger`
//! agent with the merge in progress in its own worktree; its result is verified like any merge;
//! when it fails, both branches are kept ([`MergeStep::Conflict`]).

use super::coordinator::{CoordinatorActor, Progress};
use super::helpers::{HelperFailure, create_helper_worktree, run_helper_agent};
use super::run::RunContext;
use super::state::{
    ConflictRecord, FixRound, HelperRecord, HelperRole, WorkerRecord, WorkerStatus,
};
use super::verification::RunVerifier;
use super::{GitTaskError, git_task};
use crate::verify::prompts::{
    FixerInput, MAX_FAILURE_OUTPUT_CHARS, MergerInput, Side, failure_excerpt, fixer_prompt,
    merger_prompt,
};
use crate::verify::{Verdict, VerifyRun};
use ahelper_worktrees as git;
use kameo::prelude::ActorRef;
use std::path::PathBuf;

/// What merging one worker branch did.
#[derive(Debug)]
pub enum MergeStep {
    /// The integration branch now contains the worker's commits (a merge commit, a fast
    /// forward, or it already did).
    Merged {
        /// The integration branch's new tip.
        commit: git::Oid,
        /// The verdict on that tip (`None` when verification is off or nothing changed).
        verdict: Option<Verdict>,
    },
    /// The candidate still had new failures after the fixer attempts: nothing changed, the
    /// worker's branch is kept.
    VerifyFailed {
        /// The last verdict.
        verdict: Verdict,
        /// Head and tail of the last failing run's output.
        output: String,
    },
    /// The branches conflict; nothing changed.
    Conflict {
        /// The conflicting files, sorted by path.
        files: Vec<ConflictRecord>,
    },
    /// The merge could not be attempted or written (the integration branch is unchanged).
    Failed(GitTaskError),
}

/// What a gated merge needs besides the queue.
#[derive(Clone)]
pub struct Gate<'a> {
    /// The run.
    pub run: &'a RunContext,
    /// The run's verifier (`None`: verification is off).
    pub verifier: Option<&'a RunVerifier>,
    /// The baseline run on the base commit.
    pub baseline: Option<&'a VerifyRun>,
    /// `[swarm] merge_fix_attempts`: fixers tried on a red candidate (0 also turns the merger
    /// off).
    pub merge_fix_attempts: u32,
    /// What the integration branch holds so far: the merged workers' summaries.
    pub integration_summary: &'a str,
    /// Helpers of the run so far (new ids continue their numbering).
    pub helpers_before: &'a [HelperRecord],
    /// Plan index of the worker, for progress messages.
    pub index: usize,
    /// Where progress goes (the status table shows `verifying`, `fixing 1/2`, …).
    pub coordinator: ActorRef<CoordinatorActor>,
}

impl Gate<'_> {
    /// This gate for the worker at plan index `index`.
    pub fn for_worker(&self, index: usize) -> Self {
        Gate {
            index,
            ..self.clone()
        }
    }

    async fn status(&self, status: WorkerStatus, fix_round: Option<FixRound>) {
        let _ = self
            .coordinator
            .tell(Progress::Phase {
                index: self.index,
                status,
                fix_round,
            })
            .await;
    }

    /// The next id of `role`: `fix-<n>` / `merge-<n>`, counting `made` in this merge.
    fn next_id(&self, role: HelperRole, made: &[HelperRecord]) -> String {
        let count = self
            .helpers_before
            .iter()
            .chain(made)
            .filter(|h| h.role == role)
            .count();
        match role {
            HelperRole::Fixer => format!("fix-{}", count + 1),
            HelperRole::Merger => format!("merge-{}", count + 1),
        }
    }

    /// The record of a new `role` helper for `worker`'s merge, with the next id after `made`.
    fn new_helper(
        &self,
        role: HelperRole,
        worker: &WorkerRecord,
        made: &[HelperRecord],
    ) -> HelperRecord {
        let id = self.next_id(role, made);
        HelperRecord::new(self.run, id, role, &worker.id, &worker.worktree)
    }
}

/// The result of [`MergeQueue::merge_gated`]: the step and the helper agents it started.
pub struct GatedMerge {
    /// What happened.
    pub step: MergeStep,
    /// Fixers and mergers started for it, in order.
    pub helpers: Vec<HelperRecord>,
}

/// Merges into one run's integration branch.
#[derive(Debug, Clone)]
pub struct MergeQueue {
    pub(super) repo_root: PathBuf,
    pub(super) integration_branch: String,
    run_id: String,
}

impl MergeQueue {
    /// The queue of run `run_id` into `integration_branch` of the repository at `repo_root`.
    pub fn new(repo_root: PathBuf, integration_branch: String, run_id: String) -> Self {
        MergeQueue {
            repo_root,
            integration_branch,
            run_id,
        }
    }

    /// Indices of the workers to merge now, in plan order: finished workers up to the first
    /// worker before them in the plan that is still running. So runs of the same plan merge in
    /// the same order and a queued worker never blocks (no deadlock with dependencies or
    /// overlapping scopes). With `drain` (the run is stopping) every finished worker.
    pub fn ready(workers: &[WorkerRecord], drain: bool) -> Vec<usize> {
        let mut ready = Vec::new();
        for (i, w) in workers.iter().enumerate() {
            match w.status {
                WorkerStatus::Finished => ready.push(i),
                WorkerStatus::Starting
                | WorkerStatus::Running
                | WorkerStatus::WaitingForPermission
                | WorkerStatus::Committing
                | WorkerStatus::Verifying
                | WorkerStatus::Fixing
                | WorkerStatus::ResolvingConflict
                    if !drain =>
                {
                    break;
                }
                _ => {}
            }
        }
        ready
    }

    /// Merges `workers` (ready to merge, in plan order; verification off) into the integration
    /// branch in one pass with one ref update ([`git::merge_clean_run`]): the same commits as
    /// merging them one at a time. Stops before the first that does not merge cleanly (a
    /// conflict, an unreadable branch): it and the rest are left to [`MergeQueue::merge_gated`]
    /// and later passes. The integration branch's tip after each merged worker, in order.
    ///
    /// # Errors
    /// [`GitTaskError`] when the run could not be written (the integration branch is unchanged).
    pub async fn merge_clean_run(
        &self,
        workers: &[WorkerRecord],
    ) -> Result<Vec<git::Oid>, GitTaskError> {
        let repo = self.repo_root.clone();
        let target = self.integration_branch.clone();
        let sources: Vec<(String, String)> = workers
            .iter()
            .map(|w| (w.branch.clone(), self.merge_message(w)))
            .collect();
        git_task(move || {
            let sources: Vec<git::MergeSource<'_>> = sources
                .iter()
                .map(|(branch, message)| git::MergeSource { branch, message })
                .collect();
            Ok(git::merge_clean_run(&repo, &target, &sources, None)?)
        })
        .await
    }

    /// The integration branch as a fixer or merger prompt shows it: its name and `gate`'s
    /// summary of what is merged so far.
    fn integration_side<'a>(&'a self, gate: &Gate<'a>) -> Side<'a> {
        Side {
            label: &self.integration_branch,
            summary: gate.integration_summary,
        }
    }

    /// Merges `worker`'s branch through the gate (see the module docs): candidate → (merger on
    /// a conflict) → verification → (fixers on new failures) → compare-and-swap.
    pub async fn merge_gated(&self, worker: &WorkerRecord, gate: &Gate<'_>) -> GatedMerge {
        let mut helpers = Vec::new();
        let step = match self.candidate(worker).await {
            Err(e) => MergeStep::Failed(e),
            Ok(git::Candidate::UpToDate { commit }) => MergeStep::Merged {
                commit,
                verdict: None,
            },
            Ok(git::Candidate::Conflict { files }) => {
                let files: Vec<ConflictRecord> = files.iter().map(conflict_record).collect();
                match self
                    .resolve_conflict(worker, &files, gate, &mut helpers)
                    .await
                {
                    Some((target, commit)) => {
                        self.verify_and_advance(worker, target, commit, gate, &mut helpers)
                            .await
                    }
                    None => MergeStep::Conflict { files },
                }
            }
            Ok(git::Candidate::Ready { target, commit }) => {
                self.verify_and_advance(worker, target, commit, gate, &mut helpers)
                    .await
            }
        };
        GatedMerge { step, helpers }
    }

    async fn candidate(&self, worker: &WorkerRecord) -> Result<git::Candidate, GitTaskError> {
        let repo = self.repo_root.clone();
        let target = self.integration_branch.clone();
        let source = worker.branch.clone();
        let message = self.merge_message(worker);
        git_task(move || {
            Ok(git::merge_candidate(
                &repo, &target, &source, &message, None,
            )?)
        })
        .await
    }

    pub(super) fn merge_message(&self, worker: &WorkerRecord) -> String {
        format!(
            "Merge {} ({}): {}\n\nahelper run {}",
            worker.id, worker.subtask_id, worker.title, self.run_id
        )
    }

    pub(super) async fn advance(
        &self,
        target: git::Oid,
        commit: git::Oid,
    ) -> Result<(), GitTaskError> {
        let repo = self.repo_root.clone();
        let branch = self.integration_branch.clone();
        git_task(move || Ok(git::advance_branch(&repo, &branch, target, commit)?)).await
    }

    /// Verifies `commit` (made from the integration tip `target`), lets fixers work on new
    /// failures, and advances the integration branch to the first green commit.
    async fn verify_and_advance(
        &self,
        worker: &WorkerRecord,
        target: git::Oid,
        commit: git::Oid,
        gate: &Gate<'_>,
        helpers: &mut Vec<HelperRecord>,
    ) -> MergeStep {
        let Some(verifier) = gate.verifier else {
            return match self.advance(target, commit).await {
                Ok(()) => MergeStep::Merged {
                    commit,
                    verdict: None,
                },
                Err(e) => MergeStep::Failed(e),
            };
        };
        let mut current = commit;
        let (mut run, mut verdict) = match self.verify(current, gate).await {
            Ok(checked) => checked,
            Err(e) => return MergeStep::Failed(e),
        };
        let mut attempt = 0;
        while verdict.blocks_merge()
            && attempt < gate.merge_fix_attempts
            && !gate.run.cancel.is_cancelled()
        {
            attempt += 1;
            let round = FixRound {
                attempt,
                of: gate.merge_fix_attempts,
            };
            gate.status(WorkerStatus::Fixing, Some(round)).await;
            let fixed = self
                .fix(worker, current, (&run, &verdict), round, gate, helpers)
                .await;
            let Some(tip) = fixed else { continue };
            current = tip;
            (run, verdict) = match self.verify(current, gate).await {
                Ok(checked) => checked,
                Err(e) => return MergeStep::Failed(e),
            };
            if let Some(h) = helpers.last_mut() {
                h.verification = Some(verdict.render(&verifier.command));
            }
        }
        if verdict.blocks_merge() {
            return MergeStep::VerifyFailed {
                output: failure_excerpt(&run.output, MAX_FAILURE_OUTPUT_CHARS),
                verdict,
            };
        }
        match self.advance(target, current).await {
            Ok(()) => {
                if let Some(h) = helpers
                    .iter_mut()
                    .rev()
                    .find(|h| h.role == HelperRole::Fixer)
                {
                    h.merged = attempt > 0;
                }
                MergeStep::Merged {
                    commit: current,
                    verdict: Some(verdict),
                }
            }
            Err(e) => MergeStep::Failed(e),
        }
    }

    /// Verifies `commit` in the first verification slot (or reuses the run's cached verdict
    /// on its tree).
    async fn verify(
        &self,
        commit: git::Oid,
        gate: &Gate<'_>,
    ) -> Result<(VerifyRun, Verdict), GitTaskError> {
        gate.status(WorkerStatus::Verifying, None).await;
        self.verdict_of(gate, 0, commit).await
    }

    /// One fixer attempt on the red commit `current`: its worktree on `ahelper/<run>/fix-<n>`
    /// from `current`, the fixer prompt, its work committed. The new tip, or `None` when it
    /// changed nothing or could not run.
    async fn fix(
        &self,
        worker: &WorkerRecord,
        current: git::Oid,
        (run, verdict): (&VerifyRun, &Verdict),
        round: FixRound,
        gate: &Gate<'_>,
        helpers: &mut Vec<HelperRecord>,
    ) -> Option<git::Oid> {
        let mut helper = gate.new_helper(HelperRole::Fixer, worker, helpers);
        let summary = worker_summary(worker);
        let prompt = fixer_prompt(&FixerInput {
            run,
            verdict,
            integration: self.integration_side(gate),
            incoming: Side {
                label: &worker.branch,
                summary: &summary,
            },
            attempt: round.attempt,
            max_attempts: round.of,
        });
        let tip = self.run_fixer(&mut helper, current, &prompt, gate).await;
        if let Err(e) = &tip {
            helper.summary = format!("the fixer could not run: {e}");
        }
        helpers.push(helper);
        tip.ok().flatten()
    }

    async fn run_fixer(
        &self,
        helper: &mut HelperRecord,
        current: git::Oid,
        prompt: &str,
        gate: &Gate<'_>,
    ) -> Result<Option<git::Oid>, HelperFailure> {
        let worktree = create_helper_worktree(gate.run, helper, current).await?;
        run_helper_agent(gate.run, helper, &worktree, prompt, &gate.coordinator).await?;
        let message = format!(
            "Fix verification of {} ({})\n\n{}\n\nahelper run {} {}",
            helper.worker, self.integration_branch, helper.summary, self.run_id, helper.id
        );
        let committed = git_task(move || Ok(git::commit_all(&worktree, &message, None)?)).await?;
        Ok(committed)
    }

    /// One merger on a textual conflict: its worktree on `ahelper/<run>/merge-<n>` at the
    /// integration tip with the merge of the worker's branch in progress, the merger prompt,
    /// then the merge concluded. `(integration tip, merge commit)`, or `None` when there is no
    /// merger (`merge_fix_attempts` 0), it failed, or markers are left.
    async fn resolve_conflict(
        &self,
        worker: &WorkerRecord,
        files: &[ConflictRecord],
        gate: &Gate<'_>,
        helpers: &mut Vec<HelperRecord>,
    ) -> Option<(git::Oid, git::Oid)> {
        if gate.merge_fix_attempts == 0 || gate.run.cancel.is_cancelled() {
            return None;
        }
        gate.status(WorkerStatus::ResolvingConflict, None).await;
        let mut helper = gate.new_helper(HelperRole::Merger, worker, helpers);
        let resolved = self.run_merger(worker, files, &mut helper, gate).await;
        if let Err(e) = &resolved {
            if helper.summary.is_empty() {
                helper.summary = format!("the merger did not resolve the conflict: {e}");
            } else {
                helper.verification = Some(format!("not used: {e}"));
            }
        }
        helpers.push(helper);
        resolved.ok()
    }

    async fn run_merger(
        &self,
        worker: &WorkerRecord,
        files: &[ConflictRecord],
        helper: &mut HelperRecord,
        gate: &Gate<'_>,
    ) -> Result<(git::Oid, git::Oid), HelperFailure> {
        let (repo, branch) = (self.repo_root.clone(), self.integration_branch.clone());
        let target = git_task(move || Ok(git::branch_tip(&repo, &branch)?)).await?;
        let worktree = create_helper_worktree(gate.run, helper, target).await?;
        let (wt, source) = (worktree.clone(), worker.branch.clone());
        git_task(move || Ok(git::start_merge(&wt, &source, None)?)).await?;
        let summary = worker_summary(worker);
        let prompt = merger_prompt(&MergerInput {
            conflicts: files,
            integration: self.integration_side(gate),
            incoming: Side {
                label: &worker.branch,
                summary: &summary,
            },
            verify_command: gate.verifier.map(|v| v.command.as_str()),
        });
        run_helper_agent(gate.run, helper, &worktree, &prompt, &gate.coordinator).await?;
        if let Some(path) = files_with_markers(&worktree, files) {
            return Err(HelperFailure::Unresolved(path));
        }
        let message = self.merge_message(worker);
        let wt = worktree.clone();
        let commit = git_task(move || Ok(git::conclude_merge(&wt, &message, None)?)).await?;
        Ok((target, commit))
    }
}

/// A conflicting file as the run record keeps it: the path and which side did what.
fn conflict_record(file: &git::ConflictFile) -> ConflictRecord {
    let sides = match (file.ours.is_some(), file.theirs.is_some()) {
        (true, true) => "both modified",
        (true, false) => "deleted by the worker, modified in the integration branch",
        (false, true) => "modified by the worker, deleted in the integration branch",
        (false, false) => "conflict",
    };
    ConflictRecord {
        path: file.path.clone(),
        sides: sides.into(),
    }
}

/// The worker's own summary, or a note that it has none.
fn worker_summary(worker: &WorkerRecord) -> String {
    worker
        .report
        .as_ref()
        .map(|r| r.summary.clone())
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| format!("({} left no summary)", worker.id))
}

/// The first of `files` in `worktree` that still has a conflict marker line.
fn files_with_markers(worktree: &std::path::Path, files: &[ConflictRecord]) -> Option<String> {
    files
        .iter()
        .find(|f| {
            std::fs::read_to_string(worktree.join(&f.path)).is_ok_and(|text| {
                text.lines()
                    .any(|l| l.starts_with("<<<<<<<") || l.starts_with(">>>>>>>"))
            })
        })
        .map(|f| f.path.clone())
}
