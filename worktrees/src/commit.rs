//! Committing a worker's worktree and measuring what changed.

use std::path::{Path, PathBuf};

use git2::{Diff, DiffFindOptions, DiffOptions, IndexAddOption, Oid, Repository};
use serde::{Deserialize, Serialize};

use crate::GitError;
use crate::error::Context as _;
use crate::repo::{Identity, canonical, open_repo, write_commit};
use crate::worktree::read_marker;

/// Size of the change between two commits.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiffStats {
    /// Paths added, modified, deleted or renamed (new path for renames), relative to the repository
    /// root, `/`-separated, sorted.
    pub files_changed: Vec<String>,
    /// Lines added.
    pub insertions: usize,
    /// Lines removed.
    pub deletions: usize,
}

/// Stages everything in the ahelper worktree at `worktree` — modified, deleted and new files, respecting
/// `.gitignore` and `info/exclude`; ahelper's own writer temp files left by an interrupted write
/// are left out and removed ([`crate::sweep_writer_temps`]) — and commits it on the worktree's branch with `message`.
/// Returns the new commit id, or `None` when nothing changed (the worktree's index is still
/// refreshed). The worktree's own index is written; no other checkout is touched.
///
/// Author and committer: `identity`, else the repository's `user.name`/`user.email`, else
/// [`Identity::fallback`] (`ahelper <ahelper@localhost>`). Commit hooks are not run (libgit2), so a
/// worker's commit is never blocked by the user's pre-commit checks.
///
/// As a guard for the user's checkout, `worktree` must be the root of a linked worktree that ahelper
/// created (its marker is present).
///
/// # Errors
/// [`GitError::InvalidWorktreePath`] when `worktree` is not one of
/// ahelper's linked worktrees; [`GitError::DetachedHead`]; [`GitError::IndexLocked`] when another
/// git process holds the worktree's `index.lock`; [`GitError::Libgit2`].
pub fn commit_all(
    worktree: &Path,
    message: &str,
    identity: Option<&Identity>,
) -> Result<Option<Oid>, GitError> {
    let (root, repo) = open_ahelper_worktree(worktree, "commit_all")?;
    Ok(commit_in(&repo, &root, message, identity)?.1)
}

/// A worker's branch after [`commit_and_measure`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Measured {
    /// The branch tip: the new commit, else the worktree's HEAD as it was.
    pub tip: Oid,
    /// Whether a commit was made (something had changed since the last one).
    pub committed: bool,
    /// The change from the start commit to `tip` (as [`diff_stats`]).
    pub stats: DiffStats,
    /// The hazards `tip` adds relative to the start commit (as [`crate::scan_hazards`]).
    pub hazards: Vec<crate::Hazard>,
}

/// [`commit_all`] in the ahelper worktree at `worktree`, then [`diff_stats`] and
/// [`crate::scan_hazards`] from commit `since` to the worktree's branch tip — with one opened
/// repository and one tree diff (a worker's end, run while its peers commit too). When the
/// tip is `since`, nothing is diffed: no changes and no hazards.
///
/// # Errors
/// Those of [`commit_all`]; [`GitError::CommitNotFound`] when `since` is unknown.
pub fn commit_and_measure(
    worktree: &Path,
    since: Oid,
    message: &str,
    limits: &crate::HazardLimits,
) -> Result<Measured, GitError> {
    let (root, repo) = open_ahelper_worktree(worktree, "commit_and_measure")?;
    let (head, commit) = commit_in(&repo, &root, message, None)?;
    let tip = commit.unwrap_or(head);
    let mut measured = Measured {
        tip,
        committed: commit.is_some(),
        stats: DiffStats::default(),
        hazards: Vec::new(),
    };
    if tip != since {
        let mut diff = tree_diff(&repo, since, tip)?;
        let mcp = crate::hazards::mcp_named_paths(&repo, &[since, tip]);
        measured.hazards = crate::hazards::hazards_in(&repo, &diff, tip, &mcp, limits)?;
        measured.stats = stats_of(&mut diff)?;
    }
    Ok(measured)
}

/// The canonical root of `worktree` and its repository, when it is the root of a linked
/// worktree that ahelper created (its marker is present); `what` names the caller in the error.
fn open_ahelper_worktree(worktree: &Path, what: &str) -> Result<(PathBuf, Repository), GitError> {
    let root = canonical(worktree)?;
    let repo =
        Repository::open(&root).ctx(|| format!("opening the worktree {}", root.display()))?;
    let common = canonical(repo.commondir())?;
    if !repo.is_worktree() || read_marker(&common, &root).is_none() {
        return Err(GitError::InvalidWorktreePath {
            path: root,
            reason: format!("{what} only commits in linked worktrees created by ahelper"),
        });
    }
    Ok((root, repo))
}

/// Stages everything in the worktree `repo` (at `root`) and commits it on its branch: HEAD's
/// commit before, and the new commit (`None` when nothing changed).
fn commit_in(
    repo: &Repository,
    root: &Path,
    message: &str,
    identity: Option<&Identity>,
) -> Result<(Oid, Option<Oid>), GitError> {
    let lock = repo.path().join("index.lock");
    if lock.exists() {
        return Err(GitError::IndexLocked { path: lock });
    }
    let head = repo
        .head()
        .ctx(|| format!("reading HEAD of {}", root.display()))?;
    if !head.is_branch() {
        return Err(GitError::DetachedHead {
            path: root.to_owned(),
        });
    }
    let parent = head
        .peel_to_commit()
        .ctx(|| format!("resolving HEAD of {}", root.display()))?;

    let mut index = repo
        .index()
        .ctx(|| "opening the worktree's index".to_owned())?;
    let temps = stage_all_but_writer_temps(&mut index)?;
    let tree_id = index.write_tree().ctx(|| "writing the tree".to_owned())?;
    index
        .write()
        .ctx(|| "writing the worktree's index".to_owned())?;
    for temp in &temps {
        tracing::warn!(worktree = %root.display(), file = %temp.display(), "removed a leftover temporary file of an interrupted write");
        crate::temp_files::remove_temp(&root.join(temp))?;
    }
    if tree_id == parent.tree_id() {
        return Ok((parent.id(), None));
    }
    let id = write_commit(
        repo,
        Some("HEAD"),
        tree_id,
        &[&parent],
        message,
        identity,
        [
            "reading the tree",
            &format!("committing in {}", root.display()),
        ],
    )?;
    tracing::info!(worktree = %root.display(), commit = %id, "committed worktree");
    Ok((parent.id(), Some(id)))
}

/// Stages every new, modified and deleted file into `index` except ahelper's own writer temp
/// files ([`crate::is_writer_temp_name`], left by an interrupted write); returns those,
/// relative to the worktree root. One index-to-worktree diff: libgit2's `add_all` adds new and
/// modified files and removes the index entries of deleted ones (`update_all` would walk the
/// tracked files again).
fn stage_all_but_writer_temps(index: &mut git2::Index) -> Result<Vec<PathBuf>, GitError> {
    let mut temps = Vec::new();
    let mut skip_temps = |path: &Path, _spec: &[u8]| -> i32 {
        let name = path.file_name().map(|n| n.to_string_lossy());
        if name.is_some_and(|n| crate::is_writer_temp_name(&n)) {
            temps.push(path.to_owned());
            1
        } else {
            0
        }
    };
    index
        .add_all(["*"], IndexAddOption::DEFAULT, Some(&mut skip_temps))
        .ctx(|| "staging new, modified and deleted files".to_owned())?;
    Ok(temps)
}

/// Files changed and lines added/removed from commit `from` to commit `to` (tree to tree, with rename
/// detection), in the repository containing `repo`.
///
/// # Errors
/// [`GitError::CommitNotFound`] for an unknown id; [`GitError::Libgit2`]; those of
/// [`crate::RepoInfo::discover`].
pub fn diff_stats(repo: &Path, from: Oid, to: Oid) -> Result<DiffStats, GitError> {
    let repo = open_repo(repo)?;
    diff_stats_in(&repo, from, to)
}

/// [`diff_stats`] from the commit `base` (any revision: a commit id, a branch) to the tip of
/// the local branch `branch`, with one repository open (a swarm's closing turn: its integration
/// branch against its base).
///
/// # Errors
/// [`GitError::CommitNotFound`] for an unknown `base`, [`GitError::BranchNotFound`]; those of
/// [`diff_stats`].
pub fn branch_diff_stats(repo: &Path, base: &str, branch: &str) -> Result<DiffStats, GitError> {
    let repo = open_repo(repo)?;
    let tip = crate::branch::tip(&repo, branch)?;
    let base = repo
        .revparse_single(base)
        .and_then(|o| o.peel_to_commit())
        .map(|c| c.id())
        .map_err(|_| GitError::CommitNotFound {
            rev: base.to_owned(),
        })?;
    diff_stats_in(&repo, base, tip)
}

/// The diff of commit `from`'s tree to commit `to`'s (default options, no rename detection).
///
/// # Errors
/// [`GitError::CommitNotFound`] for an unknown id; [`GitError::Libgit2`].
pub(crate) fn tree_diff(repo: &Repository, from: Oid, to: Oid) -> Result<Diff<'_>, GitError> {
    let tree = |id: Oid| {
        repo.find_commit(id)
            .and_then(|c| c.tree())
            .map_err(|_| GitError::CommitNotFound {
                rev: id.to_string(),
            })
    };
    let (a, b) = (tree(from)?, tree(to)?);
    repo.diff_tree_to_tree(Some(&a), Some(&b), Some(&mut DiffOptions::new()))
        .ctx(|| format!("diffing {from}..{to}"))
}

pub(crate) fn diff_stats_in(repo: &Repository, from: Oid, to: Oid) -> Result<DiffStats, GitError> {
    let mut diff = tree_diff(repo, from, to)?;
    stats_of(&mut diff)
}

/// Files changed (rename detection on) and lines added/removed of a tree diff.
fn stats_of(diff: &mut Diff<'_>) -> Result<DiffStats, GitError> {
    diff.find_similar(Some(DiffFindOptions::new().renames(true)))
        .ctx(|| "detecting renames".to_owned())?;
    let stats = diff.stats().ctx(|| "counting changed lines".to_owned())?;
    let mut files: Vec<String> = diff
        .deltas()
        .filter_map(|d| {
            d.new_file()
                .path()
                .or_else(|| d.old_file().path())
                .map(Path::to_owned)
        })
        .map(|p| p.to_string_lossy().replace('\\', "/"))
        .collect();
    files.sort();
    files.dedup();
    Ok(DiffStats {
        files_changed: files,
        insertions: stats.insertions(),
        deletions: stats.deletions(),
    })
}

/// Every path touched between two trees (old and new paths of renames), for overlap checks.
pub(crate) fn touched_paths(
    repo: &Repository,
    from: &git2::Tree<'_>,
    to: &git2::Tree<'_>,
) -> Result<Vec<String>, GitError> {
    let diff = repo
        .diff_tree_to_tree(Some(from), Some(to), None)
        .ctx(|| "diffing trees".to_owned())?;
    let mut out = Vec::new();
    for d in diff.deltas() {
        for p in [d.old_file().path(), d.new_file().path()]
            .into_iter()
            .flatten()
        {
            out.push(p.to_string_lossy().replace('\\', "/"));
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// The files tracked at `commit` of the repository at `repo`: every blob of the commit's tree
/// (regular, executable and symlink entries; submodules are not files of this repository), as
/// paths relative to the repository root, `/`-separated, sorted. Paths that are not UTF-8 are
/// left out (scopes and globs are UTF-8).
///
/// # Errors
/// [`GitError::Libgit2`] when the repository, the commit or its tree cannot be read.
pub fn tracked_files(repo: &Path, commit: Oid) -> Result<Vec<String>, GitError> {
    let repo = open_repo(repo)?;
    let tree = repo
        .find_commit(commit)
        .and_then(|c| c.tree())
        .ctx(|| format!("reading the tree of {commit}"))?;
    let mut files = Vec::new();
    tree.walk(git2::TreeWalkMode::PreOrder, |dir, entry| {
        if entry.kind() == Some(git2::ObjectType::Blob)
            && let Ok(name) = entry.name()
        {
            files.push(format!("{dir}{name}"));
        }
        git2::TreeWalkResult::Ok
    })
    .ctx(|| format!("listing the files of {commit}"))?;
    files.sort();
    Ok(files)
}
