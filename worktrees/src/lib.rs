//! `ahelper-worktrees`: the git layer of ahelper's swarm.
//!
//! Everything here is synchronous and opens its own [`git2::Repository`] per call (a `Repository` is
//! `Send` but not `Sync`); async callers wrap calls in `tokio::task::spawn_blocking`. Nothing in this
//! crate knows about models or agents.
//!
//! # Guarantees
//!
//! * The user's checkout — current branch, index, working-tree files, uncommitted and untracked
//!   changes — is never modified, except by the explicit [`apply_to_current`].
//! * Worktree add/remove/prune on one repository are serialised behind one [`RepoLock`] (cases S08),
//!   handed out per repository by a [`GitOwner`]; there is no global state.
//! * Existing branches are never reset (S32); merges never drop a side of a conflict (S14) and leave
//!   every ref untouched on conflict (S16); removal only ever deletes registered linked worktrees (or
//!   recognised ahelper orphans) under the caller's base directory (S10, S07).
//!
//! # Which engine does what
//!
//! * **`git` CLI** (2.20+): `worktree add` / `worktree remove` — it runs the repository's hooks
//!   (`post-checkout`), honours LFS and other clean/smudge filters and sparse-checkout, and is faster
//!   than libgit2 at populating a worktree: on a 5,000-file repository `benches/worktree_create.rs`
//!   measured libgit2's `git_worktree_add` at 1.24× the CLI's time here (~2× in an earlier measurement
//!   on a 4,945-file repo), and [`create_worktree`] with all its checks at 1.01× plain
//!   `git worktree add -b` (median of 7 interleaved rounds; ~250 ms each). Also `git merge` in [`apply_to_current`], because that is the one
//!   operation that touches the user's checkout and should behave exactly like the user's own git
//!   (hooks, filters, merge configuration).
//! * **libgit2** (`git2`): everything that must not touch any working tree — discovery, status,
//!   snapshots into a private in-memory index, commits, merges in memory, conflict detection, diff
//!   stats, ref updates with compare-and-swap, and worktree listing.
//!
//! Case ids (S01, S07, …) are the rows of `worktrees/tests/data/swarm.md`; each is handled and
//! tested under the same id. `docs/architecture.md` shows where this crate sits in a run.

#![deny(clippy::print_stdout, clippy::print_stderr)]

mod branch;
mod cargo_warm;
mod cli;
mod commit;
mod error;
pub mod git_shape;
mod hazards;
mod include;
mod index_lock;
mod lock;
mod merge;
mod ref_lock;
mod remote;
mod repo;
mod serde_oid;
mod spare;
mod temp_files;
mod worktree;

pub use branch::{
    CommitSummary, DeletedBranch, branch_tip, create_branch, delete_branch, integration_branch,
    last_head_commit, resolve_commit, run_branch_prefix, unmerged_commits, worker_branch,
};
pub use cargo_warm::{
    CARGO_SEED_DIR, CargoSeed, CargoSeedReport, NoSeedReason, list_cargo_seed, seed_cargo_target,
};
pub use commit::{
    DiffStats, Measured, branch_diff_stats, commit_all, commit_and_measure, diff_stats,
    tracked_files,
};
pub use error::GitError;
pub use git2::Oid;
pub use hazards::{
    AUTO_RUN_NAMES, AUTO_RUN_PATHS, AUTO_RUN_SUFFIXES, Hazard, HazardKind, HazardLimits,
    is_auto_run, scan_hazards,
};
pub use include::{
    DEFAULT_INCLUDE_MAX_BYTES, INCLUDE_FILE, IncludeLimits, IncludeList, IncludeReport, SkipReason,
    SkippedInclude, bring_included, bring_listed, list_included,
};
pub use index_lock::{StaleLockOutcome, remove_stale_index_lock};
pub use lock::{GitOwner, RepoLock};
pub use merge::{
    ApplyOutcome, Candidate, ConflictFile, MergeOutcome, MergeSource, advance_branch,
    apply_to_current, candidate_chain, checkout_detached, clean_untracked, conclude_merge,
    has_ignored_files, merge_candidate, merge_clean_run, merge_into, start_merge, tree_of,
};
pub use ref_lock::remove_run_ref_locks;
pub use remote::{
    delete_local_refs, delete_remote_refs, ensure_clone, fetch_refspecs, local_refs, push_commit,
    push_commits, remote_ref, remote_refs, remote_url, set_branch,
};
pub use repo::{
    AHELPER_DIR, Head, Identity, RepoInfo, TreeFile, dirty_paths, ensure_excluded,
    first_file_at_commit, snapshot_uncommitted,
};
pub use spare::{
    MarkerSync, SpareFiles, create_spare_worktree, park_worktree, recycle_worktree,
    recycle_worktree_deferring_sync,
};
pub use temp_files::{
    WRITER_TEMP_INFIX, WRITER_TEMP_SUFFIX, is_writer_temp_name, is_writer_temp_path,
    sweep_writer_temps,
};
pub use worktree::{
    RemovedWorktree, WorktreeInfo, WorktreeMarker, adopt_worktree, create_worktree, list_worktrees,
    prune_worktrees, remove_worktree, resume_worktree,
};
