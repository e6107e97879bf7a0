//! Moving commits through a git remote both sides can reach (the distributed swarm): a cached
//! clone, pushing a commit to a ref, fetching refs. Runs the `git` program, so every transport
//! and credential helper the user has configured works.

use std::path::Path;

use crate::error::Context as _;
use crate::repo::open_repo;
use crate::{GitError, Oid, cli};

/// The URL of `remote` (e.g. `origin`) of the repository at `repo`.
///
/// # Errors
/// [`GitError::GitCommand`] when there is no such remote.
pub fn remote_url(repo: &Path, remote: &str) -> Result<String, GitError> {
    Ok(cli::git(repo, ["remote", "get-url", remote])?
        .trim()
        .to_string())
}

/// Pushes `commit` to `refname` (a full ref, `refs/…`) of the repository at `url`, replacing
/// what the ref pointed to.
///
/// # Errors
/// [`GitError::GitCommand`] with git's message when the push is refused or the remote is
/// unreachable.
pub fn push_commit(repo: &Path, url: &str, commit: Oid, refname: &str) -> Result<(), GitError> {
    push_commits(repo, url, &[(commit, refname.to_string())])
}

/// Pushes each `(commit, refname)` of `updates` (full refs, `refs/…`) to the repository at
/// `url` in one `git push`, replacing what the refs pointed to; nothing to do when empty. Git
/// updates the refs one by one on the remote, so a refused ref may leave others updated.
///
/// # Errors
/// [`GitError::GitCommand`] with git's message when a ref is refused or the remote is
/// unreachable.
pub fn push_commits(repo: &Path, url: &str, updates: &[(Oid, String)]) -> Result<(), GitError> {
    if updates.is_empty() {
        return Ok(());
    }
    let specs: Vec<String> = updates
        .iter()
        .map(|(commit, refname)| format!("+{commit}:{refname}"))
        .collect();
    let mut args = vec!["push", "--quiet", "--no-verify", url];
    args.extend(specs.iter().map(String::as_str));
    cli::git(repo, args)?;
    Ok(())
}

/// Fetches `refspecs` (`+src:dst`) from `url` into the repository at `repo`, without tags.
///
/// # Errors
/// [`GitError::GitCommand`] with git's message (unreachable remote, missing ref).
pub fn fetch_refspecs(repo: &Path, url: &str, refspecs: &[String]) -> Result<(), GitError> {
    // No `git maintenance run --auto` after each fetch: a run fetches often, and the
    // repository's owner runs maintenance on their own schedule.
    let mut args = vec![
        "fetch",
        "--quiet",
        "--no-tags",
        "--no-write-fetch-head",
        "--no-auto-maintenance",
        url,
    ];
    args.extend(refspecs.iter().map(String::as_str));
    cli::git(repo, args)?;
    Ok(())
}

/// The commit `refname` points to on `url`, `None` when it has no such ref.
///
/// # Errors
/// [`GitError::GitCommand`] when the remote cannot be read.
pub fn remote_ref(repo: &Path, url: &str, refname: &str) -> Result<Option<Oid>, GitError> {
    let out = cli::git(repo, ["ls-remote", url, refname])?;
    Ok(out
        .lines()
        .filter(|l| l.ends_with(&format!("\t{refname}")))
        .find_map(|l| l.split('\t').next().and_then(|h| Oid::from_str(h).ok())))
}

/// A clone of `url` at `dir` without a checkout (worktrees are added to it): made when `dir`
/// does not exist yet, left as it is when it does.
///
/// # Errors
/// [`GitError::GitCommand`] when cloning fails; [`GitError::PathNotFound`] when `dir` has no
/// parent directory.
pub fn ensure_clone(url: &str, dir: &Path) -> Result<(), GitError> {
    if dir.join(".git").exists() {
        return Ok(());
    }
    let parent = dir.parent().ok_or_else(|| GitError::PathNotFound {
        path: dir.to_path_buf(),
    })?;
    let target = dir.to_string_lossy().into_owned();
    cli::git(
        parent,
        [
            "clone",
            "--quiet",
            "--no-checkout",
            "--no-tags",
            url,
            target.as_str(),
        ],
    )?;
    Ok(())
}

/// The refs of `url` whose names start with `prefix` (e.g. `refs/ahelper/<run>/`), with the
/// commits they point to, in the remote's order.
///
/// # Errors
/// [`GitError::GitCommand`] when the remote cannot be read.
pub fn remote_refs(repo: &Path, url: &str, prefix: &str) -> Result<Vec<(String, Oid)>, GitError> {
    let out = cli::git(repo, ["ls-remote", url])?;
    Ok(out
        .lines()
        .filter_map(|l| {
            let (hash, name) = l.split_once('\t')?;
            let oid = Oid::from_str(hash).ok()?;
            name.starts_with(prefix).then(|| (name.to_string(), oid))
        })
        .collect())
}

/// Deletes `refnames` (full refs) on `url` in one push; nothing to do when empty.
///
/// # Errors
/// [`GitError::GitCommand`] with git's message when the push is refused or the remote is
/// unreachable.
pub fn delete_remote_refs(repo: &Path, url: &str, refnames: &[String]) -> Result<(), GitError> {
    if refnames.is_empty() {
        return Ok(());
    }
    let specs: Vec<String> = refnames.iter().map(|r| format!(":{r}")).collect();
    let mut args = vec!["push", "--quiet", "--no-verify", url];
    args.extend(specs.iter().map(String::as_str));
    cli::git(repo, args)?;
    Ok(())
}

/// The local refs of the repository at `repo` whose full names start with `prefix` (e.g.
/// `refs/ahelper-pushed/<run>/`), with the commits they point to.
///
/// # Errors
/// [`GitError::Libgit2`] when the repository or its refs cannot be read.
pub fn local_refs(repo: &Path, prefix: &str) -> Result<Vec<(String, Oid)>, GitError> {
    let repo = open_repo(repo)?;
    let refs = repo
        .references_glob(&format!("{prefix}*"))
        .ctx(|| format!("listing the refs under {prefix}"))?;
    let mut found = Vec::new();
    for reference in refs {
        let reference = reference.ctx(|| format!("reading a ref under {prefix}"))?;
        if let (Some(name), Some(target)) = (reference.name().ok(), reference.target())
            && name.starts_with(prefix)
        {
            found.push((name.to_string(), target));
        }
    }
    Ok(found)
}

/// Points the local branch `branch` at `commit`, creating it or moving it wherever it was (a
/// finished worker's branch taken from the remote, as a forced fetch into it would).
///
/// # Errors
/// [`GitError::CommitNotFound`] when the repository lacks `commit`; [`GitError::Libgit2`].
pub fn set_branch(repo: &Path, branch: &str, commit: Oid) -> Result<(), GitError> {
    let repo = open_repo(repo)?;
    repo.find_commit(commit)
        .map_err(|_| GitError::CommitNotFound {
            rev: commit.to_string(),
        })?;
    repo.reference(
        &format!("refs/heads/{branch}"),
        commit,
        true,
        "ahelper: a finished worker's branch from the remote",
    )
    .ctx(|| format!("pointing the branch {branch} at {commit}"))?;
    Ok(())
}

/// Deletes the local refs of the repository at `repo` whose full names start with `prefix`;
/// returns how many it deleted.
///
/// # Errors
/// [`GitError::Libgit2`] when a ref cannot be read or deleted.
pub fn delete_local_refs(repo: &Path, prefix: &str) -> Result<usize, GitError> {
    let names: Vec<String> = local_refs(repo, prefix)?
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    let repo = open_repo(repo)?;
    for name in &names {
        if let Ok(mut reference) = repo.find_reference(name) {
            reference
                .delete()
                .ctx(|| format!("deleting the ref {name}"))?;
        }
    }
    Ok(names.len())
}
