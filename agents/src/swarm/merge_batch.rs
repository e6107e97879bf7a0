//! Batches of the verified merge queue ([`super::merge_policy::MergePolicy::Batched`]).
//!
//! The ready workers (plan order) are merged in memory into one candidate on top of the
//! integration tip, one merge commit per worker ([`git::candidate_chain`]), and the candidate
//! is verified once. Green: the integration branch advances to it (compare-and-swap), every
//! worker merged. Red: the batch is split to isolate the culprit. Each round verifies, at once
//! in up to `slots` verification worktrees, the prefixes of the suspect range that end at its
//! cut points (each part on top of the parts before it); the suspects shrink to the first part
//! whose prefix is red. The green prefix before the culprit advances the integration branch;
//! the culprit goes through the single-worker gate ([`MergeQueue::merge_gated`]): verified
//! again (the retry) and, still red, to the fixers, else `verify_failed` with its branch kept.
//! A culprit that passes its retry unchanged means the batch's red verdict was flaky; the
//! batch is named. The workers after the culprit stay ready for the next pass.
//!
//! The integration branch only moves to a tree verified without new failures (or whose
//! passing verdict is cached, [`super::merge_policy::VerdictCache`]). A run stopped in the
//! middle loses nothing: nothing moved, or a verified prefix moved and its workers are
//! contained in the integration branch, so on `swarm resume` their merge is "already up to
//! date" and nothing merges twice.

use super::coordinator::Progress;
use super::merge_policy::VerdictKey;
use super::merge_queue::{Gate, GatedMerge, MergeQueue, MergeStep};
use super::state::{WorkerRecord, WorkerStatus};
use super::{GitTaskError, git_task};
use crate::verify::{Verdict, VerifyOutcome, VerifyRun, compare};
use ahelper_worktrees as git;

/// What isolating a red batch found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Isolated {
    /// `worker` is red on top of the parts before it: it went to the gate (fixers, else
    /// `verify_failed`).
    Culprit {
        /// The worker's id.
        worker: String,
        /// The batch, `w3+w5+w7`.
        batch: String,
    },
    /// Every part passed, the last on retry: the batch's red verdict was flaky.
    Flaky {
        /// The batch, `w3+w5+w7`.
        batch: String,
    },
}

/// What a batch pass did.
#[derive(Default)]
pub struct BatchMerge {
    /// What merging each worker did, by plan index, in plan order (workers not named here
    /// stay ready).
    pub merges: Vec<(usize, GatedMerge)>,
    /// What isolating the batch found, when it was red.
    pub isolated: Option<Isolated>,
}

/// A batch's candidate: the integration tip it starts from and the candidate after each
/// worker.
struct Chain {
    start: git::Oid,
    tips: Vec<git::Oid>,
}

/// `w3+w5+w7`: the ids of `workers`, joined.
pub fn batch_name(workers: &[(usize, WorkerRecord)]) -> String {
    let ids: Vec<&str> = workers.iter().map(|(_, w)| w.id.as_str()).collect();
    ids.join("+")
}

/// The prefix ends that split `lo..hi` (at least 2 suspects) into up to `slots + 1` parts,
/// strictly between `lo` and `hi`, ascending: the prefix ending at `hi` is known red already,
/// so `slots` verifications cover `slots + 1` parts.
fn cuts(lo: usize, hi: usize, slots: usize) -> Vec<usize> {
    let parts = (slots + 1).min(hi - lo);
    (1..parts).map(|k| lo + (hi - lo) * k / parts).collect()
}

/// Every worker of `batch` merged: its own candidate commit, the verdict of the candidate
/// they were verified in.
fn merged(
    batch: &[(usize, WorkerRecord)],
    tips: &[git::Oid],
    verdict: Option<&Verdict>,
) -> Vec<(usize, GatedMerge)> {
    batch
        .iter()
        .zip(tips)
        .map(|((index, _), commit)| {
            let step = MergeStep::Merged {
                commit: *commit,
                verdict: verdict.cloned(),
            };
            let helpers = Vec::new();
            (*index, GatedMerge { step, helpers })
        })
        .collect()
}

/// The first worker of `batch` failed with `error` (nothing moved; the others stay ready).
fn failed_first(batch: &[(usize, WorkerRecord)], error: GitTaskError) -> BatchMerge {
    let step = MergeStep::Failed(error);
    let helpers = Vec::new();
    BatchMerge {
        merges: vec![(batch[0].0, GatedMerge { step, helpers })],
        isolated: None,
    }
}

/// `merged` so far, then what `rest` did (the rest of the batch stays ready).
fn keep(mut merged: Vec<(usize, GatedMerge)>, rest: Option<BatchMerge>) -> BatchMerge {
    let rest = rest.unwrap_or_default();
    merged.extend(rest.merges);
    BatchMerge {
        merges: merged,
        isolated: rest.isolated,
    }
}

/// A run of a verification that was not needed: the verdict came from the cache.
fn cached_run(command: &str) -> VerifyRun {
    VerifyRun {
        command: command.to_string(),
        outcome: VerifyOutcome::Passed,
        duration_ms: 0,
        output: "(not run again: this tree passed earlier in the run)".into(),
        failures: None,
    }
}

impl MergeQueue {
    /// Merges `ready` (at least 2, plan order) as one batch (see the module docs). `gate` is
    /// the gate of the first worker; a culprit's merge gets its own.
    pub async fn merge_batch(
        &self,
        ready: &[(usize, WorkerRecord)],
        gate: &Gate<'_>,
    ) -> BatchMerge {
        let chain = match self.chain(ready).await {
            Ok(chain) => chain,
            Err(e) => return failed_first(ready, e),
        };
        let n = chain.tips.len();
        if n < 2 {
            // The second does not merge cleanly on top of the first (or the first does not):
            // the gate merges the first alone and says why.
            let (index, worker) = &ready[0];
            let step = self.merge_gated(worker, &gate.for_worker(*index)).await;
            return BatchMerge {
                merges: vec![(*index, step)],
                isolated: None,
            };
        }
        let batch = &ready[..n];
        let last = chain.tips[n - 1];
        if last == chain.start {
            // All of them are in the integration branch already (a resumed run).
            return BatchMerge {
                merges: merged(batch, &chain.tips, None),
                isolated: None,
            };
        }
        report(
            gate,
            batch,
            format!("verifying batch {}", batch_name(batch)),
        )
        .await;
        let verdict = match self.verdict_of(gate, 0, last).await {
            Ok((_, verdict)) => verdict,
            Err(e) => return failed_first(batch, e),
        };
        if gate.run.cancel.is_cancelled() {
            return BatchMerge::default();
        }
        if verdict.blocks_merge() {
            return self.isolate(batch, &chain, gate).await;
        }
        match self.advance(chain.start, last).await {
            Ok(()) => BatchMerge {
                merges: merged(batch, &chain.tips, Some(&verdict)),
                isolated: None,
            },
            Err(e) => failed_first(batch, e),
        }
    }

    /// The candidate of `ready` on top of the integration tip, as far as it merges cleanly.
    async fn chain(&self, ready: &[(usize, WorkerRecord)]) -> Result<Chain, GitTaskError> {
        let (repo, target) = (self.repo_root.clone(), self.integration_branch.clone());
        let sources: Vec<(String, String)> = ready
            .iter()
            .map(|(_, w)| (w.branch.clone(), self.merge_message(w)))
            .collect();
        git_task(move || {
            let sources: Vec<git::MergeSource<'_>> = sources
                .iter()
                .map(|(branch, message)| git::MergeSource { branch, message })
                .collect();
            let start = git::branch_tip(&repo, &target)?;
            let tips = git::candidate_chain(&repo, start, &sources, None)?;
            Ok(Chain { start, tips })
        })
        .await
    }

    /// Isolates the culprit of the red `batch` (see the module docs). Each round's green
    /// prefix advances the integration branch at once, so a run stopped later keeps it.
    async fn isolate(
        &self,
        batch: &[(usize, WorkerRecord)],
        chain: &Chain,
        gate: &Gate<'_>,
    ) -> BatchMerge {
        let slots = gate.run.merge_policy.slots().max(1);
        let mut merged_so_far = Vec::new();
        let (mut lo, mut hi) = (0, batch.len());
        while hi - lo > 1 {
            let suspects = &batch[lo..hi];
            let activity = format!("isolating: {}", batch_name(suspects));
            report(gate, suspects, activity).await;
            let round = match self.split_round(gate, chain, (lo, hi), slots).await {
                Ok(Some(round)) => round,
                Ok(None) => return keep(merged_so_far, None),
                Err(e) => return keep(merged_so_far, Some(failed_first(&batch[lo..], e))),
            };
            let (green_end, red_end, green) = round;
            if green_end > lo {
                let from = if lo == 0 {
                    chain.start
                } else {
                    chain.tips[lo - 1]
                };
                if let Err(e) = self.advance(from, chain.tips[green_end - 1]).await {
                    return keep(merged_so_far, Some(failed_first(&batch[lo..], e)));
                }
                let tips = &chain.tips[lo..green_end];
                merged_so_far.extend(merged(&batch[lo..green_end], tips, green.as_ref()));
            }
            (lo, hi) = (green_end, red_end);
        }
        let (index, worker) = &batch[lo];
        report(gate, &batch[lo..=lo], format!("isolating: {}", worker.id)).await;
        let culprit = self.merge_gated(worker, &gate.for_worker(*index)).await;
        let batch = batch_name(batch);
        let passed_retry =
            matches!(culprit.step, MergeStep::Merged { .. }) && culprit.helpers.is_empty();
        let isolated = if passed_retry {
            Isolated::Flaky { batch }
        } else {
            let worker = worker.id.clone();
            Isolated::Culprit { worker, batch }
        };
        merged_so_far.push((*index, culprit));
        BatchMerge {
            merges: merged_so_far,
            isolated: Some(isolated),
        }
    }

    /// One round of isolation over the suspects `lo..hi` (the prefix to `hi` is red, the one
    /// to `lo` green): the prefixes ending at the cut points verified at once, one per slot.
    /// `(end of the longest green prefix, end of the first red one, the green verdict)`, or
    /// `None` when the run was stopped meanwhile.
    async fn split_round(
        &self,
        gate: &Gate<'_>,
        chain: &Chain,
        (lo, hi): (usize, usize),
        slots: usize,
    ) -> Result<Option<(usize, usize, Option<Verdict>)>, GitTaskError> {
        let cuts = cuts(lo, hi, slots);
        let checks = cuts
            .iter()
            .enumerate()
            .map(|(slot, end)| self.verdict_of(gate, slot, chain.tips[end - 1]));
        let verdicts = futures::future::join_all(checks).await;
        if gate.run.cancel.is_cancelled() {
            return Ok(None);
        }
        let (mut green_end, mut green) = (lo, None);
        for (end, checked) in cuts.into_iter().zip(verdicts) {
            let (_, verdict) = checked?;
            if verdict.blocks_merge() {
                return Ok(Some((green_end, end, green)));
            }
            (green_end, green) = (end, Some(verdict));
        }
        Ok(Some((green_end, hi, green)))
    }

    /// The verdict on `commit` in verification slot `slot`: the cached one when its tree
    /// passed already in this run (`None` run then), else a run of the command there. Only a
    /// passing verdict is cached.
    ///
    /// # Errors
    /// [`GitTaskError`] when the commit cannot be read or the slot's worktree set up.
    pub(super) async fn verdict_of(
        &self,
        gate: &Gate<'_>,
        slot: usize,
        commit: git::Oid,
    ) -> Result<(VerifyRun, Verdict), GitTaskError> {
        let Some(verifier) = gate.verifier else {
            let reason = "no verification command".to_string();
            let run = cached_run("");
            return Ok((run, Verdict::Inconclusive { reason }));
        };
        let repo = self.repo_root.clone();
        let tree = git_task(move || Ok(git::tree_of(&repo, commit)?)).await?;
        let key = VerdictKey::new(tree, &verifier.command, gate.baseline);
        if let Some(verdict) = gate.run.verdicts.get(&key) {
            tracing::info!(%commit, %tree, "verdict reused from the run's cache");
            return Ok((cached_run(&verifier.command), verdict));
        }
        let verifier = verifier.slot(slot);
        if slot > 0 {
            let lock = gate.run.git_lock.clone();
            verifier
                .prepare_worktree(lock, &self.repo_root, commit)
                .await?;
        }
        let run = verifier.verify_commit(commit, &gate.run.cancel).await?;
        let verdict = compare(gate.baseline, &run);
        if !matches!(run.outcome, VerifyOutcome::Cancelled) {
            gate.run.verdicts.insert(key, &verdict);
        }
        Ok((run, verdict))
    }
}

/// Tells the coordinator that `workers` are being verified and what the queue does
/// (`verifying batch w3+w5+w7`, `isolating: w5`): the status table's verification row.
async fn report(gate: &Gate<'_>, workers: &[(usize, WorkerRecord)], activity: String) {
    for (index, _) in workers {
        let _ = gate
            .coordinator
            .tell(Progress::Phase {
                index: *index,
                status: WorkerStatus::Verifying,
                fix_round: None,
            })
            .await;
    }
    let _ = gate.coordinator.tell(Progress::Queue { activity }).await;
}

#[cfg(test)]
mod tests {
    use super::cuts;

    #[test]
    fn cuts_split_the_suspects_into_slots_plus_one_parts() {
        assert_eq!(cuts(0, 2, 2), vec![1]);
        assert_eq!(cuts(0, 6, 2), vec![2, 4]);
        assert_eq!(cuts(0, 12, 1), vec![6]);
        assert_eq!(cuts(4, 7, 4), vec![5, 6]);
    }
}
