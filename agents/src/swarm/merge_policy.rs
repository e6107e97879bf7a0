//! How the merge queue gates the integration branch, chosen once per run ([`MergePolicy`]),
//! and the run's verdict cache ([`VerdictCache`]).
//!
//! - Without verification every clean merge goes in at once ([`MergePolicy::Unverified`]).
//! - With verification the ready branches merge as one *batch*: one candidate (one merge commit
//!   per worker, plan order) verified once; a red batch is split to isolate the culprit, the
//!   parts verified at once in up to `slots` verification worktrees
//!   ([`MergePolicy::Batched`], `[swarm] verify_slots`).
//!
//! A verdict is a property of a tree, a command and the baseline it is judged against: the
//! cache keeps the passing verdicts of the run by that key, so a candidate whose tree was
//! verified already (a fast-forward onto a worker's self-checked commit, a part of a batch
//! verified during isolation) is not verified again. A red verdict is never cached: running it
//! again is how a flaky verification is told from a real failure.

use crate::verify::{Verdict, VerifyRun};
use ahelper_worktrees::Oid;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;

/// Default of `[swarm] verify_slots`: verification worktrees (and commands) at once.
pub const DEFAULT_VERIFY_SLOTS: u32 = 2;

/// The merge queue's policy for one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MergePolicy {
    /// Verification is off: ready branches that merge cleanly go in together, in plan order.
    Unverified,
    /// Verification is on: ready branches are verified as one batch; a red batch is split to
    /// find the culprit, with up to `slots` verifications at once.
    Batched {
        /// `[swarm] verify_slots` (at least 1).
        slots: u32,
    },
}

impl MergePolicy {
    /// The policy of a run: [`MergePolicy::Batched`] when it is `verified`, with `verify_slots`
    /// (0 counts as 1).
    pub fn for_run(verified: bool, verify_slots: u32) -> Self {
        if verified {
            MergePolicy::Batched {
                slots: verify_slots.max(1),
            }
        } else {
            MergePolicy::Unverified
        }
    }

    /// Whether merges are verified.
    pub fn verifies(self) -> bool {
        matches!(self, MergePolicy::Batched { .. })
    }

    /// Verification worktrees used at once (0 when merges are not verified).
    pub fn slots(self) -> usize {
        match self {
            MergePolicy::Unverified => 0,
            MergePolicy::Batched { slots } => slots as usize,
        }
    }
}

/// What a cached verdict is about: a tree verified with a command against a baseline.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VerdictKey {
    /// The tree verified.
    pub tree: Oid,
    /// The verification command line.
    pub command: String,
    /// A fingerprint of the baseline run (its outcome and failures).
    pub baseline: u64,
}

impl VerdictKey {
    /// The key of `tree` verified with `command` against `baseline`.
    pub fn new(tree: Oid, command: &str, baseline: Option<&VerifyRun>) -> Self {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        let shape = baseline.map(|b| format!("{:?} {:?}", b.outcome, b.failures));
        shape.hash(&mut hasher);
        VerdictKey {
            tree,
            command: command.to_string(),
            baseline: hasher.finish(),
        }
    }
}

/// The passing verdicts of one run, shared by the merge queue and the workers' self-checks.
#[derive(Debug, Default)]
pub struct VerdictCache {
    verdicts: Mutex<HashMap<VerdictKey, Verdict>>,
}

impl VerdictCache {
    /// The cached verdict of `key`, if any.
    pub fn get(&self, key: &VerdictKey) -> Option<Verdict> {
        self.lock().get(key).cloned()
    }

    /// Keeps `verdict` for `key` when it lets a merge through (red and inconclusive verdicts
    /// are not kept).
    pub fn insert(&self, key: VerdictKey, verdict: &Verdict) {
        if !verdict.blocks_merge() {
            self.lock().insert(key, verdict.clone());
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<VerdictKey, Verdict>> {
        // A panic while holding the lock leaves a map that is still whole.
        self.verdicts.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::{Comparison, NewFailure};

    fn key(n: u8) -> VerdictKey {
        VerdictKey::new(Oid::from_bytes(&[n; 20]).unwrap(), "make test", None)
    }

    #[test]
    fn only_passing_verdicts_are_kept() {
        let cache = VerdictCache::default();
        cache.insert(key(1), &Verdict::Green);
        let red = Verdict::NewFailures {
            new: NewFailure::TimedOut { after_s: 1 },
            pre_existing: Vec::new(),
            comparison: Comparison::ByExitStatus,
        };
        cache.insert(key(2), &red);
        assert_eq!(cache.get(&key(1)), Some(Verdict::Green));
        assert_eq!(cache.get(&key(2)), None);
        let other_command = VerdictKey {
            command: "make check".into(),
            ..key(1)
        };
        assert_eq!(cache.get(&other_command), None);
    }

    #[test]
    fn the_policy_follows_verification() {
        assert_eq!(MergePolicy::for_run(false, 3), MergePolicy::Unverified);
        assert_eq!(
            MergePolicy::for_run(true, 0),
            MergePolicy::Batched { slots: 1 }
        );
        assert_eq!(MergePolicy::for_run(true, 2).slots(), 2);
    }
}
