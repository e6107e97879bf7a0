//! Branches: create, inspect, list unmerged commits, delete safely.

use std::path::Path;

use git2::{BranchType, ErrorCode, Oid, Repository};
use serde::{Deserialize, Serialize};

use crate::error::Context as _;
use crate::repo::open_repo;
use crate::worktree::checked_out_by;
use crate::{GitError, RepoLock};

/// A commit's id and the first line of its message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitSummary {
    /// The commit id.
    #[serde(with = "crate::serde_oid")]
    pub id: Oid,
    /// The first line of its message.
    pub summary: String,
}

/// What [`delete_branch`] deleted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeletedBranch {
    /// The deleted branch (short name).
    pub branch: String,
    /// Where it pointed (recover with `git branch <name> <tip>` until garbage collection).
    #[serde(with = "crate::serde_oid")]
    pub tip: Oid,
    /// Commits that were not in `into` and are now only reachable through the reflog / `tip`
    /// (non-empty only with `force`).
    pub unmerged: Vec<CommitSummary>,
}

/// The run's integration branch: `ahelper/<run>/integration`.
///
/// Not `ahelper/<run>` as first sketched: git stores refs as paths, so a branch `ahelper/<run>` and
/// worker branches `ahelper/<run>/<worker>` cannot exist together ([`GitError::BranchNameConflict`]).
/// The worker id `integration` is therefore reserved.
pub fn integration_branch(run: &str) -> String {
    format!("ahelper/{run}/integration")
}

/// A worker's branch: `ahelper/<run>/<worker>` (see [`integration_branch`]).
pub fn worker_branch(run: &str, worker: &str) -> String {
    format!("{}{worker}", run_branch_prefix(run))
}

/// What every branch of run `run` starts with: `ahelper/<run>/`.
pub fn run_branch_prefix(run: &str) -> String {
    format!("ahelper/{run}/")
}

/// Refuses a new branch name that nests with an existing branch (`a/b` vs `a/b/c`).
pub(crate) fn check_no_nesting(repo: &Repository, branch: &str) -> Result<(), GitError> {
    let conflict = |existing: &str| GitError::BranchNameConflict {
        branch: branch.to_owned(),
        existing: existing.to_owned(),
    };
    let mut prefix = String::new();
    let parts: Vec<&str> = branch.split('/').collect();
    for part in &parts[..parts.len().saturating_sub(1)] {
        if !prefix.is_empty() {
            prefix.push('/');
        }
        prefix.push_str(part);
        if repo.refname_to_id(&format!("refs/heads/{prefix}")).is_ok() {
            return Err(conflict(&prefix));
        }
    }
    let glob = format!("refs/heads/{branch}/*");
    if let Ok(mut refs) = repo.references_glob(&glob)
        && let Some(Ok(r)) = refs.next()
    {
        let name = r.name().unwrap_or_default();
        return Err(conflict(name.strip_prefix("refs/heads/").unwrap_or(name)));
    }
    Ok(())
}

/// Resolves a revision (`HEAD`, a branch, a tag, a hex id, `main~2`…) to a commit id.
///
/// # Errors
/// [`GitError::CommitNotFound`]; those of [`crate::RepoInfo::discover`].
pub fn resolve_commit(repo: &Path, rev: &str) -> Result<Oid, GitError> {
    let repo = open_repo(repo)?;
    repo.revparse_single(rev)
        .and_then(|o| o.peel_to_commit())
        .map(|c| c.id())
        .map_err(|_| GitError::CommitNotFound {
            rev: rev.to_owned(),
        })
}

/// The commit the local branch `branch` (short name) points to.
///
/// # Errors
/// [`GitError::BranchNotFound`]; those of [`crate::RepoInfo::discover`].
pub fn branch_tip(repo: &Path, branch: &str) -> Result<Oid, GitError> {
    let repo = open_repo(repo)?;
    tip(&repo, branch)
}

pub(crate) fn tip(repo: &Repository, branch: &str) -> Result<Oid, GitError> {
    repo.refname_to_id(&format!("refs/heads/{branch}"))
        .map_err(|_| GitError::BranchNotFound {
            branch: branch.to_owned(),
        })
}

/// The commit a worktree's HEAD last pointed to, from its HEAD log (`<git dir>/logs/HEAD`,
/// which git keeps per worktree): what its branch was at when the branch was deleted from
/// under it (`git update-ref -d`; run inside the worktree, that adds a last entry from the tip
/// to zero, so the newest non-zero commit of the log is taken, new side first). `None` when
/// `worktree` is not itself a repository's working tree (no search upwards), has no HEAD log,
/// or no commit of it is still in the repository.
pub fn last_head_commit(worktree: &Path) -> Option<Oid> {
    let repo = Repository::open_ext(
        worktree,
        git2::RepositoryOpenFlags::NO_SEARCH,
        std::iter::empty::<&std::ffi::OsStr>(),
    )
    .ok()?;
    let log = repo.reflog("HEAD").ok()?;
    log.iter()
        .flat_map(|entry| [entry.id_new(), entry.id_old()])
        .find(|commit| !commit.is_zero() && repo.find_commit(*commit).is_ok())
}

/// Creates the local branch `name` at `commit` (e.g. the integration branch `ahelper/<run>` at the
/// base commit). Idempotent when it already points there; an existing branch elsewhere is never moved.
///
/// # Errors
/// [`GitError::BranchExists`] when it exists at another commit; [`GitError::InvalidBranchName`];
/// [`GitError::BranchNameConflict`] when it would nest with an existing branch;
/// [`GitError::CommitNotFound`]; [`GitError::Libgit2`].
pub fn create_branch(repo: &Path, name: &str, commit: Oid) -> Result<(), GitError> {
    let repo = open_repo(repo)?;
    if name.starts_with('-') || !git2::Branch::name_is_valid(name).unwrap_or(false) {
        return Err(GitError::InvalidBranchName {
            name: name.to_owned(),
        });
    }
    let target = repo
        .find_commit(commit)
        .map_err(|_| GitError::CommitNotFound {
            rev: commit.to_string(),
        })?;
    if repo.refname_to_id(&format!("refs/heads/{name}")).is_err() {
        check_no_nesting(&repo, name)?;
    }
    match repo.branch(name, &target, false) {
        Ok(_) => Ok(()),
        Err(e) if e.code() == ErrorCode::Exists => {
            let existing = tip(&repo, name)?;
            if existing == commit {
                Ok(())
            } else {
                Err(GitError::BranchExists {
                    branch: name.to_owned(),
                    tip: existing.to_string(),
                    wanted: commit.to_string(),
                })
            }
        }
        Err(e) => Err(e).ctx(|| format!("creating branch `{name}`")),
    }
}

/// Commits reachable from `branch` but not from `into` (both local branch short names), newest first —
/// what would be lost if `branch` were deleted without being merged into `into`.
///
/// # Errors
/// [`GitError::BranchNotFound`] for either branch; [`GitError::Libgit2`].
pub fn unmerged_commits(
    repo: &Path,
    branch: &str,
    into: &str,
) -> Result<Vec<CommitSummary>, GitError> {
    let repo = open_repo(repo)?;
    unmerged_in(&repo, tip(&repo, branch)?, tip(&repo, into)?)
}

pub(crate) fn unmerged_in(
    repo: &Repository,
    from: Oid,
    hide: Oid,
) -> Result<Vec<CommitSummary>, GitError> {
    let mut walk = repo.revwalk().ctx(|| "walking history".to_owned())?;
    walk.push(from).ctx(|| "walking history".to_owned())?;
    walk.hide(hide).ctx(|| "walking history".to_owned())?;
    let mut out = Vec::new();
    for id in walk {
        let id = id.ctx(|| "walking history".to_owned())?;
        let commit = repo
            .find_commit(id)
            .ctx(|| format!("reading commit {id}"))?;
        out.push(CommitSummary {
            id,
            summary: commit
                .summary()
                .ok()
                .flatten()
                .unwrap_or_default()
                .to_owned(),
        });
    }
    Ok(out)
}

/// Deletes the local branch `name`, refusing when it has commits not reachable from the branch
/// `into` (listing them) unless `force`, and always when a worktree has it checked out. Runs under
/// `lock` so it cannot race a worktree being created on the branch.
///
/// # Errors
/// [`GitError::BranchNotMerged`]; [`GitError::BranchCheckedOut`]; [`GitError::BranchNotFound`];
/// [`GitError::WrongLock`]; [`GitError::Libgit2`].
pub fn delete_branch(
    lock: &RepoLock,
    repo: &Path,
    name: &str,
    into: &str,
    force: bool,
) -> Result<DeletedBranch, GitError> {
    let repo = open_repo(repo)?;
    let _guard = lock.acquire(&repo)?;
    let branch_tip = tip(&repo, name)?;
    if let Some(owner) = checked_out_by(&repo, name)? {
        return Err(GitError::BranchCheckedOut {
            branch: name.to_owned(),
            ours: owner.is_ours(),
            path: owner.path,
        });
    }
    let unmerged = unmerged_in(&repo, branch_tip, tip(&repo, into)?)?;
    if !unmerged.is_empty() && !force {
        return Err(GitError::BranchNotMerged {
            branch: name.to_owned(),
            into: into.to_owned(),
            commits: unmerged,
        });
    }
    let mut branch =
        repo.find_branch(name, BranchType::Local)
            .map_err(|_| GitError::BranchNotFound {
                branch: name.to_owned(),
            })?;
    branch
        .delete()
        .ctx(|| format!("deleting branch `{name}`"))?;
    tracing::info!(branch = name, tip = %branch_tip, unmerged = unmerged.len(), "deleted branch");
    Ok(DeletedBranch {
        branch: name.to_owned(),
        tip: branch_tip,
        unmerged,
    })
}
