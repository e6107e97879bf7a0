//! The error type of the git layer.

use std::path::PathBuf;

use crate::CommitSummary;

/// Everything that can go wrong in `ahelper-worktrees`.
///
/// Every message says what happened and, where there is one, what the user can run to fix it.
/// Git object ids in messages are full 40-hex (or 64-hex for SHA-256 repos) strings.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GitError {
    /// The path is not inside any git repository.
    #[error(
        "{path} is not inside a git repository; run `git init` there (and commit something) or pass a path inside a repository"
    )]
    NotARepository {
        /// The path that was searched from.
        path: PathBuf,
    },

    /// The path does not exist.
    #[error("{path} does not exist")]
    PathNotFound {
        /// The missing path.
        path: PathBuf,
    },

    /// The repository is bare: it has no working tree to take a base from or to apply to.
    #[error(
        "{path} is a bare repository (no working tree); run ahelper inside a checkout of it, e.g. `git worktree add <dir>` or `git clone {path} <dir>`"
    )]
    BareRepository {
        /// The bare repository's git directory.
        path: PathBuf,
    },

    /// HEAD points at a branch with no commits yet (a freshly `git init`-ed repository).
    #[error(
        "the repository at {path} has no commits yet (branch `{branch}` is unborn); commit something first, e.g. `git add -A && git commit -m initial`"
    )]
    NoCommits {
        /// The repository's working tree.
        path: PathBuf,
        /// The unborn branch HEAD points to.
        branch: String,
    },

    /// The checkout is a linked worktree whose main repository (and its `.git` directory) is gone (S38).
    #[error(
        "{worktree} is a linked git worktree, but its main repository is gone: {gitdir} does not exist. The main checkout (and its .git directory) was moved or deleted; restore it, or re-clone and recreate this worktree"
    )]
    MainWorktreeMissing {
        /// The linked worktree whose `.git` file points nowhere.
        worktree: PathBuf,
        /// The git directory the `.git` file points to.
        gitdir: PathBuf,
    },

    /// A `.git` file exists but does not point to a git directory.
    #[error(
        "{gitfile} points to {gitdir}, which does not exist; this checkout's git metadata is missing (run `git worktree prune` in the main repository and recreate it)"
    )]
    BrokenGitFile {
        /// The `.git` file.
        gitfile: PathBuf,
        /// The missing git directory it names.
        gitdir: PathBuf,
    },

    /// HEAD is detached where a branch is required.
    #[error(
        "HEAD in {path} is detached (not on a branch); run `git switch <branch>` (or `git switch -c <new-branch>`) first"
    )]
    DetachedHead {
        /// The checkout with the detached HEAD.
        path: PathBuf,
    },

    /// A branch name is not a valid git reference name.
    #[error("`{name}` is not a valid git branch name (see `git check-ref-format --branch`)")]
    InvalidBranchName {
        /// The rejected name.
        name: String,
    },

    /// The branch name collides with an existing branch as a path: git cannot have both `a/b` and
    /// `a/b/c` (a ref is a file, so it cannot also be a directory of refs).
    #[error(
        "cannot create branch `{branch}` because branch `{existing}` exists, and git cannot have a branch that is also a directory of branches; pick names that do not nest (see ahelper_worktrees::integration_branch / worker_branch)"
    )]
    BranchNameConflict {
        /// The requested branch.
        branch: String,
        /// The existing branch it collides with.
        existing: String,
    },

    /// A branch does not exist.
    #[error("branch `{branch}` does not exist (list branches with `git branch --list`)")]
    BranchNotFound {
        /// The missing branch (short name, without `refs/heads/`).
        branch: String,
    },

    /// A revision or object id does not name a commit in this repository.
    #[error("`{rev}` does not name a commit in this repository")]
    CommitNotFound {
        /// The revision that was looked up.
        rev: String,
    },

    /// The branch already exists and points elsewhere; it is never reset (S32).
    #[error(
        "branch `{branch}` already exists at {tip}, not at the requested commit {wanted}, and is never reset or overwritten; pick another branch name, or delete it yourself with `git branch -D {branch}` if its commits are not needed"
    )]
    BranchExists {
        /// The existing branch.
        branch: String,
        /// Where it points now.
        tip: String,
        /// The commit it was asked to point to.
        wanted: String,
    },

    /// The branch is checked out by a worktree (S01), so it cannot be checked out again, moved or deleted.
    #[error(
        "branch `{branch}` is already checked out in the worktree at {path}{}; use another branch name, or remove that worktree first (`git worktree remove {path}`)",
        if *ours { " (an ahelper worktree)" } else { "" }
    )]
    BranchCheckedOut {
        /// The branch.
        branch: String,
        /// The worktree that has it checked out.
        path: PathBuf,
        /// Whether that worktree was created by ahelper (its marker is present).
        ours: bool,
    },

    /// The worktree directory already exists and is not empty (stale state is never reused, S04).
    #[error(
        "{path} already exists and is not empty; it is never reused. Remove it (`ahelper swarm clean`, or `git worktree remove {path}` if it is a worktree) or choose another directory"
    )]
    WorktreePathExists {
        /// The occupied path.
        path: PathBuf,
    },

    /// The requested worktree path is malformed.
    #[error("{path} cannot be used as a worktree path: {reason}")]
    InvalidWorktreePath {
        /// The rejected path.
        path: PathBuf,
        /// Why.
        reason: String,
    },

    /// The requested worktree directory lies inside the user's checkout and is not ignored (S31).
    #[error(
        "{path} is inside the checkout at {checkout} and not ignored by git, so the user's `git status`, IDE and test runner would see it; put worktrees outside the checkout (setting `swarm.worktree_root`) or under an ignored directory such as `.ahelper/`"
    )]
    WorktreeInsideCheckout {
        /// The requested worktree path.
        path: PathBuf,
        /// The checkout it lies in.
        checkout: PathBuf,
    },

    /// The new worktree's HEAD is not the requested base commit (S04); the worktree was removed again.
    #[error(
        "the new worktree at {path} has HEAD {actual}, not the requested base {expected}; it was removed again. Check for stale branches named like this run's (`git branch --list 'ahelper/*'`)"
    )]
    BaseMismatch {
        /// The worktree that was created.
        path: PathBuf,
        /// The requested base commit.
        expected: String,
        /// What HEAD resolved to.
        actual: String,
    },

    /// The worktree has uncommitted or untracked changes; removal refused without `force`.
    #[error(
        "the worktree at {path} has uncommitted changes ({}); commit them or pass --force to discard them",
        paths.join(", ")
    )]
    WorktreeDirty {
        /// The worktree.
        path: PathBuf,
        /// The changed paths, relative to the worktree.
        paths: Vec<String>,
    },

    /// The worktree is locked (`git worktree lock`); it is never removed or pruned.
    #[error(
        "the worktree at {path} is locked{}; run `git worktree unlock {path}` first if it is really no longer in use",
        reason.as_deref().map(|r| format!(" ({r})")).unwrap_or_default()
    )]
    WorktreeLocked {
        /// The worktree.
        path: PathBuf,
        /// The lock reason, if one was given.
        reason: Option<String>,
    },

    /// The worktree's HEAD is detached at commits that no branch contains; removing it would lose them (S29).
    #[error(
        "the worktree at {path} has a detached HEAD at {head} whose commits are on no branch; removing it would lose them. Save them first with `git -C {path} branch <name>`, or pass --force"
    )]
    UnreachableCommits {
        /// The worktree.
        path: PathBuf,
        /// Its detached HEAD commit.
        head: String,
    },

    /// A removal target failed a safety check (S10): nothing was deleted.
    #[error("refusing to remove {path}: {reason}; nothing was deleted")]
    UnsafeRemoval {
        /// The path that was asked to be removed.
        path: PathBuf,
        /// Which safety check failed.
        reason: String,
    },

    /// The lock passed in belongs to another repository.
    #[error(
        "the RepoLock passed belongs to the repository at {lock_repo}, not {repo}; get the right one from GitOwner::lock_for"
    )]
    WrongLock {
        /// The common git dir the lock guards.
        lock_repo: PathBuf,
        /// The repository the operation was for.
        repo: PathBuf,
    },

    /// Deleting the branch would lose commits not contained in `into`.
    #[error(
        "branch `{branch}` has {} commit(s) not in `{into}`: {}; merge them, or pass --force to delete the branch anyway",
        commits.len(),
        commits.iter().map(|c| format!("{:.12} {}", c.id.to_string(), c.summary)).collect::<Vec<_>>().join("; ")
    )]
    BranchNotMerged {
        /// The branch that was asked to be deleted.
        branch: String,
        /// The branch it was checked against.
        into: String,
        /// The commits that would be lost, newest first.
        commits: Vec<CommitSummary>,
    },

    /// A ref changed while it was being updated (another process moved it); nothing was changed.
    #[error(
        "`{reference}` was moved by someone else while ahelper was updating it (expected {expected}); nothing was changed, retry the operation"
    )]
    ConcurrentRefUpdate {
        /// The reference.
        reference: String,
        /// The value it was expected to have.
        expected: String,
    },

    /// The ref's lock file exists: a git process is updating the ref, or one was killed while it
    /// did (libgit2 and git write `<ref>.lock` and rename it over the ref); nothing was changed.
    #[error(
        "`{reference}` is locked: {lock} exists — a git process is updating it right now, or one crashed (or was killed) while it did, leaving the lock behind. If no git process is running in this repository, delete {lock} and retry; for a swarm run, `ahelper swarm resume <run>` removes its own stale ref locks"
    )]
    RefLocked {
        /// The reference.
        reference: String,
        /// Its lock file.
        lock: PathBuf,
    },

    /// Refused to merge into a branch that a worktree has checked out (moving it would leave that
    /// checkout's index and files behind, S16).
    #[error(
        "refusing to merge into `{branch}`: it is checked out in {path}, and moving it there would leave that checkout's files behind; merge into a branch no worktree has checked out (the run's integration branch), or run `git -C {path} merge <branch>` yourself"
    )]
    MergeTargetCheckedOut {
        /// The target branch.
        branch: String,
        /// The worktree that has it checked out.
        path: PathBuf,
    },

    /// A merge, rebase, cherry-pick or similar is in progress in the checkout.
    #[error(
        "a {state} is in progress in {path}; finish it or abort it (e.g. `git merge --abort`, `git rebase --abort`) and retry"
    )]
    RepositoryBusy {
        /// The checkout.
        path: PathBuf,
        /// What is in progress, e.g. "merge".
        state: String,
    },

    /// `apply` refused: merging would conflict.
    #[error(
        "applying `{source_branch}` to `{target}` would conflict in: {}; nothing was changed. Merge it yourself with `git merge {source_branch}` and resolve the conflicts",
        files.join(", ")
    )]
    ApplyConflict {
        /// The user's current branch.
        target: String,
        /// The branch being applied.
        source_branch: String,
        /// Conflicting paths.
        files: Vec<String>,
    },

    /// `apply` refused: the user's uncommitted changes touch files the merge would change.
    #[error(
        "your uncommitted changes touch files that applying `{source_branch}` would change: {}; nothing was changed. Commit or stash them (`git stash`), then retry",
        paths.join(", ")
    )]
    DirtyOverlap {
        /// The branch being applied.
        source_branch: String,
        /// The overlapping paths.
        paths: Vec<String>,
    },

    /// An `index.lock` exists in the worktree (another git process is running, or one crashed).
    #[error(
        "{path} exists: another git process is working in this worktree, or one crashed. If no git process is running there, delete the file and retry"
    )]
    IndexLocked {
        /// The lock file.
        path: PathBuf,
    },

    /// The `git` command-line program failed.
    #[error("`{command}` failed ({status}): {stderr}")]
    GitCommand {
        /// The command line that was run.
        command: String,
        /// Its exit status.
        status: String,
        /// Its standard error, trimmed.
        stderr: String,
    },

    /// The `git` program could not be started.
    #[error(
        "could not run `git` ({source}); install git 2.20 or newer and make sure it is on PATH"
    )]
    GitNotFound {
        /// The spawn error.
        source: std::io::Error,
    },

    /// The disk (or the user's quota) is full: a filesystem operation, `git` or libgit2 failed
    /// with "No space left on device" (`ENOSPC`/`EDQUOT`).
    #[error(
        "No space left on device while {action}{}. Free some disk space (`df -h` shows what is left) and try again ({detail})",
        if path.as_os_str().is_empty() { String::new() } else { format!(" {}", path.display()) }
    )]
    DiskFull {
        /// What was being done, e.g. "writing" or "running `git worktree add …` in".
        action: String,
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error text.
        detail: String,
    },

    /// `.worktreeinclude` could not be read or has a malformed pattern.
    #[error(
        "{path} is not a valid include file: {message}; fix the pattern (gitignore syntax) or remove the file"
    )]
    IncludeFile {
        /// The include file.
        path: PathBuf,
        /// The reader's or the pattern parser's message.
        message: String,
    },

    /// A filesystem operation failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done, e.g. "reading".
        action: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },

    /// libgit2 reported an error.
    #[error("git: {context}: {source}")]
    Libgit2 {
        /// What ahelper was doing.
        context: String,
        /// The libgit2 error.
        source: git2::Error,
    },
}

/// Attaches context to a libgit2 error.
pub(crate) trait Context<T> {
    fn ctx(self, context: impl FnOnce() -> String) -> Result<T, GitError>;
}

impl<T> Context<T> for Result<T, git2::Error> {
    fn ctx(self, context: impl FnOnce() -> String) -> Result<T, GitError> {
        self.map_err(|source| {
            let context = context();
            if says_disk_full(source.message()) {
                GitError::DiskFull {
                    action: context,
                    path: PathBuf::new(),
                    detail: source.message().to_string(),
                }
            } else {
                GitError::Libgit2 { context, source }
            }
        })
    }
}

/// Whether an error text (git's stderr, a libgit2 message) says the disk or quota is full.
pub(crate) fn says_disk_full(text: &str) -> bool {
    text.contains("No space left on device") || text.contains("Disk quota exceeded")
}

/// Builds a [`GitError::Io`], or [`GitError::DiskFull`] when the disk or quota is full.
pub(crate) fn io_err(
    action: &'static str,
    path: impl Into<PathBuf>,
) -> impl FnOnce(std::io::Error) -> GitError {
    let path = path.into();
    move |source| {
        if matches!(
            source.kind(),
            std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
        ) {
            GitError::DiskFull {
                action: action.to_string(),
                path,
                detail: source.to_string(),
            }
        } else {
            GitError::Io {
                action,
                path,
                source,
            }
        }
    }
}
