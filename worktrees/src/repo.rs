//! Opening repositories, the user's checkout state, uncommitted-change snapshots and `info/exclude`.

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use git2::{Commit, ErrorCode, Index, IndexAddOption, Oid, Repository, Signature, StatusOptions};
use serde::{Deserialize, Serialize};

use crate::GitError;
use crate::error::{Context as _, io_err};

/// The directory ahelper owns in every repository (transcripts, run state, project config).
/// Always excluded from snapshots and dirty-path lists.
pub const AHELPER_DIR: &str = ".ahelper";

/// Where HEAD of a checkout points.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Head {
    /// On a branch; the short name (`main`, `feature/x`), without `refs/heads/`.
    Branch {
        /// Short branch name.
        name: String,
    },
    /// Detached at a commit (see [`RepoInfo::head_commit`]).
    Detached,
}

/// The repository a command runs in, as found from a path inside its checkout.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RepoInfo {
    /// Root of the checkout the path is in (the user's working tree), canonicalised.
    pub workdir: PathBuf,
    /// This checkout's git directory (`<workdir>/.git`, or `<common>/worktrees/<name>` for a linked
    /// worktree), canonicalised.
    pub git_dir: PathBuf,
    /// The git directory shared by all worktrees (holds objects, refs, `info/exclude`), canonicalised.
    pub common_dir: PathBuf,
    /// Whether the checkout is a linked worktree rather than the main one.
    pub is_linked_worktree: bool,
    /// Current branch, or detached.
    pub head: Head,
    /// The commit HEAD resolves to.
    #[serde(with = "crate::serde_oid")]
    pub head_commit: Oid,
}

impl RepoInfo {
    /// Finds the repository containing `path` (searching parent directories like `git` does).
    ///
    /// # Errors
    /// [`GitError::PathNotFound`], [`GitError::NotARepository`], [`GitError::BareRepository`],
    /// [`GitError::NoCommits`] (unborn HEAD), [`GitError::MainWorktreeMissing`] (a linked worktree
    /// whose main repository was deleted, S38), [`GitError::BrokenGitFile`], or
    /// [`GitError::Libgit2`].
    pub fn discover(path: &Path) -> Result<RepoInfo, GitError> {
        let repo = open_repo(path)?;
        let workdir = workdir(&repo)?;
        let head = match repo.head() {
            Ok(head) => head,
            Err(e) if e.code() == ErrorCode::UnbornBranch || e.code() == ErrorCode::NotFound => {
                let branch = unborn_branch_name(&repo);
                return Err(GitError::NoCommits {
                    path: workdir,
                    branch,
                });
            }
            Err(e) => return Err(e).ctx(|| format!("reading HEAD of {}", workdir.display())),
        };
        let head_commit = head
            .peel_to_commit()
            .ctx(|| format!("resolving HEAD of {}", workdir.display()))?
            .id();
        let head_state = if head.is_branch() {
            Head::Branch {
                name: head.shorthand().unwrap_or_default().to_owned(),
            }
        } else {
            Head::Detached
        };
        Ok(RepoInfo {
            git_dir: canonical(repo.path())?,
            common_dir: canonical(repo.commondir())?,
            is_linked_worktree: repo.is_worktree(),
            workdir,
            head: head_state,
            head_commit,
        })
    }

    /// The current branch's short name, or `None` when HEAD is detached.
    pub fn branch(&self) -> Option<&str> {
        match &self.head {
            Head::Branch { name } => Some(name),
            Head::Detached => None,
        }
    }
}

/// Name of the branch an unborn HEAD points to (`main` for `ref: refs/heads/main`).
fn unborn_branch_name(repo: &Repository) -> String {
    fs::read_to_string(repo.path().join("HEAD"))
        .ok()
        .and_then(|s| s.trim().strip_prefix("ref: refs/heads/").map(str::to_owned))
        .unwrap_or_else(|| "HEAD".to_owned())
}

/// A commit author/committer identity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// Display name, e.g. `ahelper`.
    pub name: String,
    /// E-mail address, e.g. `ahelper@localhost`.
    pub email: String,
}

impl Identity {
    /// The identity used when none is given and git's `user.name` / `user.email` are not configured:
    /// `ahelper <ahelper@localhost>`.
    pub fn fallback() -> Identity {
        Identity {
            name: "ahelper".to_owned(),
            email: "ahelper@localhost".to_owned(),
        }
    }
}

/// The signature for a new commit: `identity` if given, else the repository's configured
/// `user.name`/`user.email`, else [`Identity::fallback`]. Time is now.
pub(crate) fn signature(
    repo: &Repository,
    identity: Option<&Identity>,
) -> Result<Signature<'static>, GitError> {
    if let Some(id) = identity {
        return Signature::now(&id.name, &id.email)
            .ctx(|| format!("building a signature for {} <{}>", id.name, id.email));
    }
    if let Ok(sig) = repo.signature() {
        return Ok(sig);
    }
    let id = Identity::fallback();
    Signature::now(&id.name, &id.email).ctx(|| "building the fallback signature".to_owned())
}

/// Writes the commit of the tree `tree_id` with `parents` and `message`, signed as
/// [`signature`] says for `identity`, and moves `update_ref` (e.g. `HEAD`) to it when given.
/// `context` says what failed in errors: reading the tree, writing the commit.
///
/// # Errors
/// [`GitError::Libgit2`].
pub(crate) fn write_commit(
    repo: &Repository,
    update_ref: Option<&str>,
    tree_id: Oid,
    parents: &[&Commit<'_>],
    message: &str,
    identity: Option<&Identity>,
    context: [&str; 2],
) -> Result<Oid, GitError> {
    let tree = repo.find_tree(tree_id).ctx(|| context[0].to_owned())?;
    let sig = signature(repo, identity)?;
    repo.commit(update_ref, &sig, &sig, message, &tree, parents)
        .ctx(|| context[1].to_owned())
}

/// Whether git's `user.name` and `user.email` are configured for this repository.
pub(crate) fn has_configured_identity(repo: &Repository) -> bool {
    repo.signature().is_ok()
}

/// Opens the repository containing `path`, mapping failures to clear errors (see [`RepoInfo::discover`]).
pub(crate) fn open_repo(path: &Path) -> Result<Repository, GitError> {
    if !path.exists() {
        return Err(GitError::PathNotFound {
            path: path.to_owned(),
        });
    }
    let abs = canonical(path)?;
    if let Some(err) = broken_gitfile(&abs) {
        return Err(err);
    }
    let repo = match Repository::discover(&abs) {
        Ok(repo) => repo,
        Err(e) if e.code() == ErrorCode::NotFound => {
            return Err(GitError::NotARepository { path: abs });
        }
        Err(e) => return Err(e).ctx(|| format!("opening the repository at {}", abs.display())),
    };
    if repo.is_bare() || repo.workdir().is_none() {
        return Err(GitError::BareRepository {
            path: repo.path().to_owned(),
        });
    }
    Ok(repo)
}

/// Walks up from `start` to the first `.git` entry; if it is a `.git` file naming a missing git dir,
/// returns the matching error (S38 when the missing dir is `<common>/worktrees/<name>`).
fn broken_gitfile(start: &Path) -> Option<GitError> {
    for dir in start.ancestors() {
        let dotgit = dir.join(".git");
        let Ok(meta) = fs::symlink_metadata(&dotgit) else {
            continue;
        };
        if !meta.is_file() {
            return None;
        }
        let gitdir = read_gitfile(&dotgit)?;
        if gitdir.exists() {
            return None;
        }
        let in_worktrees = gitdir
            .parent()
            .and_then(Path::file_name)
            .is_some_and(|n| n == "worktrees");
        return Some(if in_worktrees {
            GitError::MainWorktreeMissing {
                worktree: dir.to_owned(),
                gitdir,
            }
        } else {
            GitError::BrokenGitFile {
                gitfile: dotgit,
                gitdir,
            }
        });
    }
    None
}

/// Reads a `.git` file (`gitdir: <path>`), resolving a relative path against the file's directory.
pub(crate) fn read_gitfile(dotgit: &Path) -> Option<PathBuf> {
    let text = fs::read_to_string(dotgit).ok()?;
    let target = text.lines().next()?.strip_prefix("gitdir:")?.trim();
    let target = PathBuf::from(target);
    Some(if target.is_absolute() {
        target
    } else {
        dotgit.parent()?.join(target)
    })
}

/// The canonical working-tree root of an opened (non-bare) repository.
pub(crate) fn workdir(repo: &Repository) -> Result<PathBuf, GitError> {
    match repo.workdir() {
        Some(w) => canonical(w),
        None => Err(GitError::BareRepository {
            path: repo.path().to_owned(),
        }),
    }
}

/// `fs::canonicalize` with an [`GitError::Io`] error.
pub(crate) fn canonical(path: &Path) -> Result<PathBuf, GitError> {
    fs::canonicalize(path).map_err(io_err("resolving", path))
}

/// Whether `path` is `.ahelper` or lies under it (relative, `/`-separated).
pub(crate) fn is_ahelper_path(rel: &str) -> bool {
    rel == AHELPER_DIR
        || rel
            .strip_prefix(AHELPER_DIR)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// Paths (relative, `/`-separated, sorted) with uncommitted changes in `repo`'s working tree or index,
/// including untracked files that are not ignored. With `recurse_untracked` false an untracked
/// directory is listed once as `dir/`. `.ahelper/` is left out.
pub(crate) fn status_paths(
    repo: &Repository,
    recurse_untracked: bool,
) -> Result<Vec<String>, GitError> {
    let mut opts = StatusOptions::new();
    opts.include_untracked(true)
        .recurse_untracked_dirs(recurse_untracked)
        .include_ignored(false)
        .exclude_submodules(false)
        .renames_head_to_index(true)
        .renames_index_to_workdir(true);
    let statuses = repo
        .statuses(Some(&mut opts))
        .ctx(|| "reading the working tree status".to_owned())?;
    let mut out: Vec<String> = Vec::new();
    for entry in statuses.iter() {
        let mut add = |p: Option<&Path>| {
            if let Some(p) = p {
                let s = p.to_string_lossy().replace('\\', "/");
                if !is_ahelper_path(s.trim_end_matches('/')) {
                    out.push(s);
                }
            }
        };
        if let Some(d) = entry.head_to_index() {
            add(d.old_file().path());
            add(d.new_file().path());
        }
        if let Some(d) = entry.index_to_workdir() {
            add(d.old_file().path());
            add(d.new_file().path());
        }
        if entry.head_to_index().is_none() && entry.index_to_workdir().is_none() {
            add(entry.path().ok().map(Path::new));
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// The user's uncommitted changes: paths (relative to the checkout root, `/`-separated, sorted) that
/// are modified, staged, deleted, renamed or untracked-but-not-ignored. An untracked directory appears
/// once as `dir/`. Anything under `.ahelper/` is left out. Read-only: the index is not refreshed.
///
/// # Errors
/// Those of [`RepoInfo::discover`] (except [`GitError::NoCommits`]), or [`GitError::Libgit2`].
pub fn dirty_paths(repo: &Path) -> Result<Vec<String>, GitError> {
    let repo = open_repo(repo)?;
    status_paths(&repo, false)
}

/// Records the working tree's current state — tracked changes, deletions and untracked files that are
/// not ignored (nothing under `.ahelper/`) — as a new commit whose parent is `base` (normally the
/// HEAD commit), and points the reference `ref_name` (e.g. `refs/ahelper/<run>/base`) at it so it is
/// not garbage-collected. Returns the commit id.
///
/// The user's index, branch and files are not touched: the tree is built in a private in-memory
/// index (`Index::new`, filled from HEAD's tree, then `add_all` + `update_all` against the working
/// tree) that is never written to disk. The commit tree is the whole working tree, not a diff, so with
/// `base` ≠ HEAD the snapshot also contains HEAD's differences from `base`.
///
/// When the working tree equals `base`'s tree nothing is created and `base` is returned.
/// The commit is signed by `identity`, else the configured user, else [`Identity::fallback`].
///
/// # Errors
/// [`GitError::CommitNotFound`] for an unknown `base`; [`GitError::Libgit2`] when `ref_name` is not a
/// valid `refs/…` name or already exists pointing elsewhere; those of [`RepoInfo::discover`].
pub fn snapshot_uncommitted(
    repo: &Path,
    base: Oid,
    ref_name: &str,
    message: &str,
    identity: Option<&Identity>,
) -> Result<Oid, GitError> {
    let repo = open_repo(repo)?;
    let base_commit = repo
        .find_commit(base)
        .map_err(|_| GitError::CommitNotFound {
            rev: base.to_string(),
        })?;
    let head_tree = repo
        .head()
        .and_then(|h| h.peel_to_tree())
        .ctx(|| "reading HEAD's tree".to_owned())?;

    let mut index = Index::new().ctx(|| "creating an in-memory index".to_owned())?;
    index
        .read_tree(&head_tree)
        .ctx(|| "loading HEAD's tree into the in-memory index".to_owned())?;
    // Binds the in-memory index to this (private, short-lived) Repository handle so add_all can see
    // the working tree; the user's on-disk index file is never read for writing nor written.
    repo.set_index(&mut index)
        .ctx(|| "attaching the in-memory index".to_owned())?;
    let mut skip_ahelper = |path: &Path, _spec: &[u8]| -> i32 {
        i32::from(is_ahelper_path(&path.to_string_lossy().replace('\\', "/")))
    };
    index
        .add_all(["*"], IndexAddOption::DEFAULT, Some(&mut skip_ahelper))
        .ctx(|| "adding the working tree to the in-memory index".to_owned())?;
    index
        .update_all(["*"], Some(&mut skip_ahelper))
        .ctx(|| "recording deleted files in the in-memory index".to_owned())?;
    // Files under .ahelper/ that HEAD tracks stay as HEAD has them; untracked ones were skipped.
    let tree_id = index
        .write_tree_to(&repo)
        .ctx(|| "writing the snapshot tree".to_owned())?;

    if tree_id == base_commit.tree_id() {
        return Ok(base);
    }
    let commit = write_commit(
        &repo,
        None,
        tree_id,
        &[&base_commit],
        message,
        identity,
        ["reading the snapshot tree", "writing the snapshot commit"],
    )?;
    match repo.reference(
        ref_name,
        commit,
        false,
        "ahelper: snapshot of uncommitted changes",
    ) {
        Ok(_) => {}
        Err(e) if e.code() == ErrorCode::Exists => {
            let existing = repo.refname_to_id(ref_name).ok();
            if existing != Some(commit) {
                return Err(e).ctx(|| {
                    format!("`{ref_name}` already exists; choose a new ref name for this snapshot")
                });
            }
        }
        Err(e) => return Err(e).ctx(|| format!("creating the ref `{ref_name}`")),
    }
    Ok(commit)
}

/// Makes sure `pattern` (e.g. `.ahelper/`) is a line of the repository's `info/exclude` (in the
/// common git dir, so it applies to every worktree); appends it once, never edits `.gitignore`.
/// Returns `true` when the line was added, `false` when it was already there.
///
/// # Errors
/// [`GitError::Io`] when the file cannot be read or written; those of [`RepoInfo::discover`].
pub fn ensure_excluded(repo: &Path, pattern: &str) -> Result<bool, GitError> {
    let repo = open_repo(repo)?;
    let info = repo.commondir().join("info");
    let file = info.join("exclude");
    let existing = match fs::read_to_string(&file) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(io_err("reading", &file)(e)),
    };
    let wanted = pattern.trim();
    if existing.lines().any(|l| l.trim() == wanted) {
        return Ok(false);
    }
    fs::create_dir_all(&info).map_err(io_err("creating", &info))?;
    let mut f = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&file)
        .map_err(io_err("opening", &file))?;
    let mut line = String::new();
    if !existing.is_empty() && !existing.ends_with('\n') {
        line.push('\n');
    }
    line.push_str(wanted);
    line.push('\n');
    f.write_all(line.as_bytes())
        .map_err(io_err("appending to", &file))?;
    Ok(true)
}

/// What a commit's tree has at a top-level name ([`first_file_at_commit`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TreeFile {
    /// A regular (or executable) file: its bytes, at most the `max_bytes` asked for, and its
    /// whole size in bytes.
    Regular {
        /// The first `max_bytes` bytes.
        bytes: Vec<u8>,
        /// The blob's size, bytes.
        size: usize,
    },
    /// Something a checkout would not make a plain file of: a symlink, a directory, a
    /// submodule. What it resolves to is only known on disk.
    Other,
}

/// The first of the top-level entries `names` that `commit`'s tree has (in the order given),
/// with its index in `names`, read from the object store with one open of the repository at
/// `repo_path` (no checkout needed): what a new worktree at `commit` will have there. Only that
/// entry's blob is read. `None` when the tree has none of them.
///
/// # Errors
/// [`GitError`] opening the repository, finding the commit or reading the blob.
pub fn first_file_at_commit(
    repo_path: &Path,
    commit: Oid,
    names: &[&str],
    max_bytes: usize,
) -> Result<Option<(usize, TreeFile)>, GitError> {
    let repo = open_repo(repo_path)?;
    let tree = repo
        .find_commit(commit)
        .and_then(|c| c.tree())
        .ctx(|| format!("reading the tree of commit {commit}"))?;
    let Some((index, entry)) = names
        .iter()
        .enumerate()
        .find_map(|(i, name)| tree.get_name(name).map(|entry| (i, entry)))
    else {
        return Ok(None);
    };
    if !matches!(entry.filemode(), 0o100644 | 0o100755) {
        return Ok(Some((index, TreeFile::Other)));
    }
    let blob = repo
        .find_blob(entry.id())
        .ctx(|| format!("reading {} of commit {commit}", names[index]))?;
    let content = blob.content();
    let file = TreeFile::Regular {
        bytes: content[..content.len().min(max_bytes)].to_vec(),
        size: content.len(),
    };
    Ok(Some((index, file)))
}
