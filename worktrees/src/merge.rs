//! Merging branches without any checkout, and applying the result to the user's branch.

use std::path::Path;

use git2::{ErrorCode, Oid, Repository, RepositoryState};
use serde::{Deserialize, Serialize};

use crate::GitError;
use crate::branch::tip;
use crate::cli;
use crate::commit::touched_paths;
use crate::error::Context as _;
use crate::repo::{
    Identity, has_configured_identity, open_repo, status_paths, workdir, write_commit,
};
use crate::worktree::checked_out_by;

/// One conflicting path of a merge, with the blob ids of each side (`None` where the side deleted or
/// never had the file). Show a side with `git show <id>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConflictFile {
    /// Path relative to the repository root, `/`-separated.
    pub path: String,
    /// The file in the merge base.
    #[serde(with = "crate::serde_oid::option")]
    pub ancestor: Option<Oid>,
    /// The file on the target branch ("ours").
    #[serde(with = "crate::serde_oid::option")]
    pub ours: Option<Oid>,
    /// The file on the source branch ("theirs").
    #[serde(with = "crate::serde_oid::option")]
    pub theirs: Option<Oid>,
}

/// Declares the outcome of bringing a source branch onto a branch: the variants `UpToDate`,
/// `FastForward` and `Merged`, each with the commit the branch is at afterwards (serialised as
/// `{"outcome": "up_to_date", "commit": "<hex>"}` and so on), after the given docs and before
/// the given further variants.
macro_rules! branch_outcome {
    ($(#[$doc:meta])* $name:ident { $($more:tt)* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(tag = "outcome", rename_all = "snake_case")]
        pub enum $name {
            /// The branch already contained the source; nothing changed.
            UpToDate {
                /// The branch's (unchanged) tip.
                #[serde(with = "crate::serde_oid")]
                commit: Oid,
            },
            /// The branch was an ancestor of the source and now points at the source's tip.
            FastForward {
                /// The branch's new tip.
                #[serde(with = "crate::serde_oid")]
                commit: Oid,
            },
            /// A merge commit with parents (the branch's tip, the source's tip) was created and
            /// the branch points at it.
            Merged {
                /// The merge commit, the branch's new tip.
                #[serde(with = "crate::serde_oid")]
                commit: Oid,
            },
            $($more)*
        }
    };
}

branch_outcome! {
    /// Result of [`merge_into`]; the branch is the target branch.
    MergeOutcome {
        /// The branches conflict; no ref was changed and both branches are intact.
        Conflict {
            /// The conflicting paths, sorted.
            files: Vec<ConflictFile>,
        },
    }
}

branch_outcome! {
    /// Result of [`apply_to_current`]; the branch is the user's checked-out branch (its HEAD).
    ApplyOutcome {}
}

/// Merges the local branch `source_branch` into the local branch `target_branch` entirely in the
/// object database — no worktree, no checkout, no index file (S16: always the explicit target, never
/// whatever is checked out). Fast-forwards when the target is an ancestor of the source; otherwise
/// merges in memory (`git_merge_commits`, rename detection on, no side favoured) and, when clean,
/// writes a commit with parents (target, source) and `message`, signed by `identity` / the configured
/// user / [`Identity::fallback`]. The target ref is moved with compare-and-swap.
///
/// On conflict returns [`MergeOutcome::Conflict`] listing each file and both sides, and leaves every
/// ref untouched (S14: nothing is auto-resolved).
///
/// # Errors
/// [`GitError::BranchNotFound`]; [`GitError::MergeTargetCheckedOut`] when a worktree has the target
/// checked out; [`GitError::ConcurrentRefUpdate`] when the target moved meanwhile; [`GitError::RefLocked`]
/// when its lock file exists;
/// [`GitError::Libgit2`].
pub fn merge_into(
    repo: &Path,
    target_branch: &str,
    source_branch: &str,
    message: &str,
    identity: Option<&Identity>,
) -> Result<MergeOutcome, GitError> {
    let repo = open_repo(repo)?;
    let ours = tip(&repo, target_branch)?;
    let theirs = tip(&repo, source_branch)?;
    refuse_checked_out(&repo, target_branch)?;
    let merged = merge_in_memory(&repo, ours, theirs, message, identity)?;
    let (commit, reflog, done) = match &merged {
        MergeOutcome::UpToDate { .. } => return Ok(merged),
        MergeOutcome::Conflict { files } => {
            tracing::info!(
                target_branch,
                source_branch,
                conflicts = files.len(),
                "merge conflict"
            );
            return Ok(merged);
        }
        MergeOutcome::FastForward { commit } => (*commit, "fast-forward to", "fast-forwarded"),
        MergeOutcome::Merged { commit } => (*commit, "merge", "merged"),
    };
    let refname = format!("refs/heads/{target_branch}");
    move_ref(
        &repo,
        &refname,
        ours,
        commit,
        &format!("ahelper: {reflog} {source_branch}"),
    )?;
    tracing::info!(target_branch, source_branch, %commit, "{done}");
    Ok(merged)
}

/// What merging `theirs` into `ours` makes, without moving any ref: `ours` when it contains
/// `theirs`, `theirs` when `ours` is its ancestor, else a merge commit (written to the object
/// database, unreferenced, see [`write_merge_commit`]) or the conflicting files.
fn merge_in_memory(
    repo: &Repository,
    ours: Oid,
    theirs: Oid,
    message: &str,
    identity: Option<&Identity>,
) -> Result<MergeOutcome, GitError> {
    if ours == theirs || is_ancestor(repo, theirs, ours)? {
        return Ok(MergeOutcome::UpToDate { commit: ours });
    }
    if is_ancestor(repo, ours, theirs)? {
        return Ok(MergeOutcome::FastForward { commit: theirs });
    }
    Ok(match merge_trees(repo, ours, theirs)? {
        Err(files) => MergeOutcome::Conflict { files },
        Ok(tree_id) => MergeOutcome::Merged {
            commit: write_merge_commit(repo, tree_id, ours, theirs, message, identity)?,
        },
    })
}

/// A merge computed but not yet applied to its target branch ([`merge_candidate`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Candidate {
    /// The target already contains the source: nothing to verify, nothing to move.
    UpToDate {
        /// The target's tip.
        commit: Oid,
    },
    /// The target would become `commit` (the source's tip when a fast-forward, else a new
    /// merge commit with parents target, source that no ref points at yet); move it with
    /// [`advance_branch`] from `target`.
    Ready {
        /// The target's tip the candidate was made from (the compare-and-swap's expected value).
        target: Oid,
        /// The candidate commit.
        commit: Oid,
    },
    /// The branches conflict; nothing was written.
    Conflict {
        /// The conflicting files, sorted by path.
        files: Vec<ConflictFile>,
    },
}

/// Like [`merge_into`], but leaves every ref where it is: merges `source_branch` into the tip of
/// `target_branch` in memory and returns the candidate commit (written to the object database,
/// unreferenced) for the caller to check before it calls [`advance_branch`].
///
/// # Errors
/// [`GitError::BranchNotFound`]; [`GitError::Libgit2`].
pub fn merge_candidate(
    repo: &Path,
    target_branch: &str,
    source_branch: &str,
    message: &str,
    identity: Option<&Identity>,
) -> Result<Candidate, GitError> {
    let repo = open_repo(repo)?;
    let ours = tip(&repo, target_branch)?;
    let theirs = tip(&repo, source_branch)?;
    Ok(
        match merge_in_memory(&repo, ours, theirs, message, identity)? {
            MergeOutcome::UpToDate { commit } => Candidate::UpToDate { commit },
            MergeOutcome::FastForward { commit } | MergeOutcome::Merged { commit } => {
                Candidate::Ready {
                    target: ours,
                    commit,
                }
            }
            MergeOutcome::Conflict { files } => Candidate::Conflict { files },
        },
    )
}

/// One branch for [`merge_clean_run`] to merge: its name and the merge commit's message.
#[derive(Debug, Clone, Copy)]
pub struct MergeSource<'a> {
    /// The local branch to merge.
    pub branch: &'a str,
    /// The message of its merge commit (unused for a fast-forward or when already contained).
    pub message: &'a str,
}

/// Merges `sources`, in order, into `target_branch` in memory, each on top of the previous
/// result — the same commits, parents and trees as [`merge_candidate`] + [`advance_branch`]
/// for each source one after another — as long as they merge cleanly (a fast-forward, a merge
/// commit, or already contained); stops before the first source that conflicts or cannot be
/// read or merged, and leaves it and the rest to the caller. Then moves the target once, with
/// compare-and-swap from the tip it started at, to the last result: one ref update and one
/// reflog line however many sources merged.
///
/// Returns the target's tip after each merged source, in order (its length is how many of
/// `sources` merged; empty: nothing moved).
///
/// # Errors
/// [`GitError::BranchNotFound`] for the target; [`GitError::MergeTargetCheckedOut`];
/// [`GitError::ConcurrentRefUpdate`] when the target moved meanwhile (nothing merged then);
/// [`GitError::RefLocked`] when its lock file exists (a crashed update);
/// [`GitError::Libgit2`].
pub fn merge_clean_run(
    repo: &Path,
    target_branch: &str,
    sources: &[MergeSource<'_>],
    identity: Option<&Identity>,
) -> Result<Vec<Oid>, GitError> {
    let repo = open_repo(repo)?;
    let start = tip(&repo, target_branch)?;
    let tips = chain_in_memory(&repo, start, sources, identity);
    let current = tips.last().copied().unwrap_or(start);
    if current != start {
        refuse_checked_out(&repo, target_branch)?;
        let log = format!("ahelper: merge {} branches", tips.len());
        move_ref(
            &repo,
            &format!("refs/heads/{target_branch}"),
            start,
            current,
            &log,
        )?;
        tracing::info!(target_branch, merged = tips.len(), commit = %current, "merged a run of branches");
    }
    Ok(tips)
}

/// Merges `sources`, in order, on top of the commit `start` in memory, each on top of the
/// previous result (the commits [`merge_clean_run`] would make), and moves no ref: the
/// candidate of a batch of branches, one merge commit per branch. Stops before the first source
/// that conflicts or cannot be read or merged.
///
/// Returns the candidate after each merged source, in order (its length is how many of
/// `sources` merged).
///
/// # Errors
/// [`GitError::Libgit2`] when the repository cannot be opened.
pub fn candidate_chain(
    repo: &Path,
    start: Oid,
    sources: &[MergeSource<'_>],
    identity: Option<&Identity>,
) -> Result<Vec<Oid>, GitError> {
    let repo = open_repo(repo)?;
    Ok(chain_in_memory(&repo, start, sources, identity))
}

/// Merges `sources`, in order, on top of `start` in memory, each on top of the previous result,
/// stopping before the first that conflicts or cannot be read or merged; the result after each
/// merged source.
fn chain_in_memory(
    repo: &Repository,
    start: Oid,
    sources: &[MergeSource<'_>],
    identity: Option<&Identity>,
) -> Vec<Oid> {
    let mut tips = Vec::with_capacity(sources.len());
    let mut current = start;
    for source in sources {
        let merged = tip(repo, source.branch)
            .and_then(|theirs| merge_in_memory(repo, current, theirs, source.message, identity));
        current = match merged {
            Ok(MergeOutcome::UpToDate { commit })
            | Ok(MergeOutcome::FastForward { commit })
            | Ok(MergeOutcome::Merged { commit }) => commit,
            Ok(MergeOutcome::Conflict { .. }) | Err(_) => break,
        };
        tips.push(current);
    }
    tips
}

/// The id of `commit`'s tree (what a verification verdict is a property of).
///
/// # Errors
/// [`GitError::Libgit2`] when the commit cannot be read.
pub fn tree_of(repo: &Path, commit: Oid) -> Result<Oid, GitError> {
    let repo = open_repo(repo)?;
    let commit = repo
        .find_commit(commit)
        .ctx(|| format!("reading commit {commit}"))?;
    Ok(commit.tree_id())
}

/// Whether `worktree` holds any ignored file or directory (build caches, `.pyc`, anything a
/// `.gitignore` hides): a verification there may have seen more than the committed tree.
///
/// # Errors
/// [`GitError::Libgit2`] when the status cannot be read.
pub fn has_ignored_files(worktree: &Path) -> Result<bool, GitError> {
    let repo = open_repo(worktree)?;
    let mut opts = git2::StatusOptions::new();
    opts.include_untracked(false)
        .include_ignored(true)
        .recurse_ignored_dirs(false);
    let statuses = repo
        .statuses(Some(&mut opts))
        .ctx(|| "reading the working tree status".to_owned())?;
    Ok(statuses.iter().any(|e| e.status().is_ignored()))
}

/// Moves `branch` from `expected` to `new` with compare-and-swap, refusing when a worktree has
/// it checked out.
///
/// # Errors
/// [`GitError::MergeTargetCheckedOut`]; [`GitError::RefLocked`] when its lock file exists;
/// [`GitError::ConcurrentRefUpdate`] when the branch is no
/// longer at `expected`; [`GitError::Libgit2`].
pub fn advance_branch(repo: &Path, branch: &str, expected: Oid, new: Oid) -> Result<(), GitError> {
    let repo = open_repo(repo)?;
    refuse_checked_out(&repo, branch)?;
    move_ref(
        &repo,
        &format!("refs/heads/{branch}"),
        expected,
        new,
        &format!("ahelper: advance to {new}"),
    )
}

/// Refuses with [`GitError::MergeTargetCheckedOut`] when a worktree has `branch` checked out
/// (moving it would leave that worktree's files behind its branch).
///
/// # Errors
/// [`GitError::MergeTargetCheckedOut`]; [`GitError::Libgit2`] listing the worktrees.
fn refuse_checked_out(repo: &Repository, branch: &str) -> Result<(), GitError> {
    match checked_out_by(repo, branch)? {
        Some(owner) => Err(GitError::MergeTargetCheckedOut {
            branch: branch.to_owned(),
            path: owner.path,
        }),
        None => Ok(()),
    }
}

/// Writes the merge commit of `ours` and `theirs` (parents in that order) with the merged tree
/// `tree_id` and `message`, signed by `identity` or the repository's user; no ref points at it.
///
/// # Errors
/// [`GitError::Libgit2`].
fn write_merge_commit(
    repo: &Repository,
    tree_id: Oid,
    ours: Oid,
    theirs: Oid,
    message: &str,
    identity: Option<&Identity>,
) -> Result<Oid, GitError> {
    let (a, b) = (
        repo.find_commit(ours).ctx(|| format!("reading {ours}"))?,
        repo.find_commit(theirs)
            .ctx(|| format!("reading {theirs}"))?,
    );
    write_commit(
        repo,
        None,
        tree_id,
        &[&a, &b],
        message,
        identity,
        ["reading the merged tree", "writing the merge commit"],
    )
}

/// Starts `git merge --no-commit --no-ff <source_branch>` in the worktree `worktree` (checked
/// out on the branch that receives it), leaving a conflicted merge in progress: conflict markers
/// in the files, `MERGE_HEAD` set. Returns the conflicted paths (empty when the merge applied
/// cleanly; it is still uncommitted).
///
/// # Errors
/// [`GitError::GitCommand`] when git fails for another reason than conflicts;
/// [`GitError::GitNotFound`].
pub fn start_merge(
    worktree: &Path,
    source_branch: &str,
    identity: Option<&Identity>,
) -> Result<Vec<String>, GitError> {
    let mut cmd = cli::command(
        worktree,
        ["merge", "-q", "--no-commit", "--no-ff", source_branch],
    );
    with_identity(&mut cmd, worktree, identity);
    let merged = cli::run(cmd);
    let conflicted = cli::git(worktree, ["diff", "--name-only", "--diff-filter=U"])?;
    let files: Vec<String> = conflicted.lines().map(str::to_owned).collect();
    match merged {
        Err(e) if files.is_empty() => Err(e),
        _ => Ok(files),
    }
}

/// Concludes the merge in progress in `worktree` with everything in it staged (`git add -A`,
/// `git commit --no-verify -m <message>`); returns the new commit.
///
/// # Errors
/// [`GitError::GitCommand`] (e.g. nothing to commit, no merge in progress);
/// [`GitError::GitNotFound`].
pub fn conclude_merge(
    worktree: &Path,
    message: &str,
    identity: Option<&Identity>,
) -> Result<Oid, GitError> {
    cli::git(worktree, ["add", "-A"])?;
    let mut cmd = cli::command(worktree, ["commit", "-q", "--no-verify", "-m", message]);
    with_identity(&mut cmd, worktree, identity);
    cli::run(cmd)?;
    let head = cli::git(worktree, ["rev-parse", "HEAD"])?;
    Oid::from_str(head.trim()).ctx(|| format!("reading HEAD of {}", worktree.display()))
}

/// `identity`, or the fallback when the repository has none configured, as git's environment.
fn with_identity(cmd: &mut std::process::Command, worktree: &Path, identity: Option<&Identity>) {
    let fallback = Identity::fallback();
    let configured = Repository::open(worktree).is_ok_and(|r| has_configured_identity(&r));
    let id = identity.or((!configured).then_some(&fallback));
    if let Some(id) = id {
        cmd.env("GIT_AUTHOR_NAME", &id.name)
            .env("GIT_AUTHOR_EMAIL", &id.email)
            .env("GIT_COMMITTER_NAME", &id.name)
            .env("GIT_COMMITTER_EMAIL", &id.email);
    }
}

/// Checks out `commit` detached in the worktree `worktree`, discarding its local changes and
/// untracked files (ignored files such as build caches stay): `git checkout --detach --force`,
/// `git clean -fdq`.
///
/// # Errors
/// [`GitError::GitCommand`]; [`GitError::GitNotFound`].
pub fn checkout_detached(worktree: &Path, commit: Oid) -> Result<(), GitError> {
    let hex = commit.to_string();
    cli::git(
        worktree,
        ["checkout", "-q", "--detach", "--force", hex.as_str()],
    )?;
    clean_untracked(worktree)
}

/// Removes the untracked files and directories of `worktree` (`git clean -fdq`; ignored files
/// such as build caches stay).
///
/// # Errors
/// [`GitError::GitCommand`]; [`GitError::GitNotFound`].
pub fn clean_untracked(worktree: &Path) -> Result<(), GitError> {
    cli::git(worktree, ["clean", "-fdq"])?;
    Ok(())
}

/// Merges the local branch `source_branch` (normally the run's integration branch) into the branch
/// the user's checkout at `repo` has checked out — the one operation in this crate that changes the
/// user's checkout, and only when it is safe:
///
/// * HEAD must be on a branch ([`GitError::DetachedHead`]) with no merge/rebase in progress
///   ([`GitError::RepositoryBusy`]);
/// * the merge must be clean ([`GitError::ApplyConflict`], checked in memory first);
/// * none of the user's uncommitted or untracked paths may be among the files the merge changes
///   ([`GitError::DirtyOverlap`]); their other uncommitted changes are kept as they are.
///
/// Then runs `git merge --ff-only <tip>` (or `git merge --no-edit -m <message> <tip>`) in the user's
/// checkout, so the user's hooks, filters and merge configuration apply exactly as with their own git.
/// If git fails part-way, `git merge --abort` restores the previous state and the error is returned.
///
/// # Errors
/// The above, [`GitError::BranchNotFound`], [`GitError::GitCommand`] / [`GitError::GitNotFound`],
/// [`GitError::Libgit2`], those of [`crate::RepoInfo::discover`].
pub fn apply_to_current(
    repo: &Path,
    source_branch: &str,
    message: &str,
    identity: Option<&Identity>,
) -> Result<ApplyOutcome, GitError> {
    let repo = open_repo(repo)?;
    let root = workdir(&repo)?;
    let (current, ours) = current_branch(&repo, &root)?;
    let theirs = tip(&repo, source_branch)?;
    if ours == theirs || is_ancestor(&repo, theirs, ours)? {
        return Ok(ApplyOutcome::UpToDate { commit: ours });
    }
    let fast_forward = is_ancestor(&repo, ours, theirs)?;
    let merged_tree = if fast_forward {
        repo.find_commit(theirs)
            .and_then(|c| c.tree())
            .ctx(|| format!("reading {theirs}"))?
            .id()
    } else {
        merge_trees(&repo, ours, theirs)?.map_err(|files| GitError::ApplyConflict {
            target: current.clone(),
            source_branch: source_branch.to_owned(),
            files: files.into_iter().map(|f| f.path).collect(),
        })?
    };
    refuse_dirty_overlap(&repo, ours, merged_tree, source_branch)?;
    run_git_merge(&repo, &root, theirs, fast_forward, message, identity)?;
    let new_head = Repository::open(&root)
        .and_then(|r| r.head()?.peel_to_commit().map(|c| c.id()))
        .ctx(|| "reading the new HEAD".to_owned())?;
    tracing::info!(branch = %current, source_branch, commit = %new_head, fast_forward, "applied");
    Ok(if fast_forward {
        ApplyOutcome::FastForward { commit: new_head }
    } else {
        ApplyOutcome::Merged { commit: new_head }
    })
}

/// The branch the checkout at `root` has (short name) and its commit; refused on a detached
/// HEAD or with a merge/rebase in progress.
fn current_branch(repo: &Repository, root: &Path) -> Result<(String, Oid), GitError> {
    let head = repo
        .head()
        .ctx(|| format!("reading HEAD of {}", root.display()))?;
    if !head.is_branch() {
        return Err(GitError::DetachedHead {
            path: root.to_path_buf(),
        });
    }
    let current = head.shorthand().unwrap_or_default().to_owned();
    if repo.state() != RepositoryState::Clean {
        return Err(GitError::RepositoryBusy {
            path: root.to_path_buf(),
            state: format!("{:?}", repo.state()).to_lowercase(),
        });
    }
    let ours = head
        .peel_to_commit()
        .ctx(|| "resolving HEAD".to_owned())?
        .id();
    Ok((current, ours))
}

/// [`GitError::DirtyOverlap`] when any of the user's uncommitted or untracked paths is among
/// the files going from `ours` to `merged_tree` changes.
fn refuse_dirty_overlap(
    repo: &Repository,
    ours: Oid,
    merged_tree: Oid,
    source_branch: &str,
) -> Result<(), GitError> {
    let old_tree = repo
        .find_commit(ours)
        .and_then(|c| c.tree())
        .ctx(|| "reading HEAD's tree".to_owned())?;
    let new_tree = repo
        .find_tree(merged_tree)
        .ctx(|| "reading the merged tree".to_owned())?;
    let touched = touched_paths(repo, &old_tree, &new_tree)?;
    let overlap: Vec<String> = status_paths(repo, true)?
        .into_iter()
        .filter(|d| {
            let dir = format!("{}/", d.trim_end_matches('/'));
            touched.iter().any(|t| t == d || t.starts_with(&dir))
        })
        .collect();
    if overlap.is_empty() {
        return Ok(());
    }
    Err(GitError::DirtyOverlap {
        source_branch: source_branch.to_owned(),
        paths: overlap,
    })
}

/// `git merge --ff-only <theirs>` (or `git merge --no-edit -m <message> <theirs>`) in the user's
/// checkout, with `identity` (or the fallback when none is configured); `git merge --abort`
/// when it fails part-way.
fn run_git_merge(
    repo: &Repository,
    root: &Path,
    theirs: Oid,
    fast_forward: bool,
    message: &str,
    identity: Option<&Identity>,
) -> Result<(), GitError> {
    let theirs_hex = theirs.to_string();
    let mut cmd = if fast_forward {
        cli::command(root, ["merge", "-q", "--ff-only", theirs_hex.as_str()])
    } else {
        cli::command(
            root,
            [
                "merge",
                "-q",
                "--no-edit",
                "-m",
                message,
                theirs_hex.as_str(),
            ],
        )
    };
    let fallback = Identity::fallback();
    let id = identity.or((!has_configured_identity(repo)).then_some(&fallback));
    if let Some(id) = id {
        cmd.env("GIT_AUTHOR_NAME", &id.name)
            .env("GIT_AUTHOR_EMAIL", &id.email)
            .env("GIT_COMMITTER_NAME", &id.name)
            .env("GIT_COMMITTER_EMAIL", &id.email);
    }
    if let Err(e) = cli::run(cmd) {
        if repo.path().join("MERGE_HEAD").exists() {
            let _ = cli::git(root, ["merge", "--abort"]);
        }
        return Err(e);
    }
    Ok(())
}

/// Whether `ancestor` is an ancestor of `descendant` (strictly).
fn is_ancestor(repo: &Repository, ancestor: Oid, descendant: Oid) -> Result<bool, GitError> {
    repo.graph_descendant_of(descendant, ancestor)
        .ctx(|| format!("comparing {ancestor} and {descendant}"))
}

/// Merges two commits in memory: `Ok(tree id)` when clean, `Err(conflicts)` otherwise.
fn merge_trees(
    repo: &Repository,
    ours: Oid,
    theirs: Oid,
) -> Result<Result<Oid, Vec<ConflictFile>>, GitError> {
    let a = repo.find_commit(ours).ctx(|| format!("reading {ours}"))?;
    let b = repo
        .find_commit(theirs)
        .ctx(|| format!("reading {theirs}"))?;
    let mut index = repo
        .merge_commits(&a, &b, None)
        .ctx(|| format!("merging {theirs} into {ours}"))?;
    if index.has_conflicts() {
        let mut files = Vec::new();
        for c in index.conflicts().ctx(|| "reading conflicts".to_owned())? {
            let c = c.ctx(|| "reading conflicts".to_owned())?;
            let path = [&c.our, &c.their, &c.ancestor]
                .into_iter()
                .flatten()
                .next()
                .map(|e| String::from_utf8_lossy(&e.path).into_owned())
                .unwrap_or_default();
            files.push(ConflictFile {
                path,
                ancestor: c.ancestor.map(|e| e.id),
                ours: c.our.map(|e| e.id),
                theirs: c.their.map(|e| e.id),
            });
        }
        files.sort_by(|x, y| x.path.cmp(&y.path));
        return Ok(Err(files));
    }
    let tree = index
        .write_tree_to(repo)
        .ctx(|| "writing the merged tree".to_owned())?;
    Ok(Ok(tree))
}

/// Moves `refname` from `old` to `new`, failing if someone else moved it meanwhile.
fn move_ref(
    repo: &Repository,
    refname: &str,
    old: Oid,
    new: Oid,
    log: &str,
) -> Result<(), GitError> {
    match repo.reference_matching(refname, new, true, old, log) {
        Ok(_) => Ok(()),
        Err(e) if e.code() == ErrorCode::Locked => Err(GitError::RefLocked {
            reference: refname.to_owned(),
            lock: crate::ref_lock::lock_file(repo, refname),
        }),
        Err(e) if e.code() == ErrorCode::Modified => Err(GitError::ConcurrentRefUpdate {
            reference: refname.to_owned(),
            expected: old.to_string(),
        }),
        Err(e) => Err(e).ctx(|| format!("updating {refname}")),
    }
}
