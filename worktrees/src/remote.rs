//! Moving commits through a git remote both sides can reach (the distributed swarm): a cached
//! clone, pushing a commit to a ref, fetching refs. Runs the `git` program, so every transport
//! and credential helper the user has configured works — except a fetch from a repository on
//! this machine, which libgit2 does in-process ([`fetch_refspecs`]).

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
/// From a repository on this machine (an absolute path or a `file://` URL) libgit2 copies the
/// objects in this process: a fetch there has no credentials, hooks or transport to honour,
/// and `git fetch` would start five processes (fetch, upload-pack, pack-objects, index-pack or
/// unpack-objects, rev-list) for what is, at the end of a distributed run, a few commits per
/// finished worker. Any other URL — or a local fetch that libgit2 could not do — runs
/// `git fetch`.
///
/// # Errors
/// [`GitError::GitCommand`] with git's message (unreachable remote, missing ref);
/// [`GitError::Libgit2`] for a local repository.
pub fn fetch_refspecs(repo: &Path, url: &str, refspecs: &[String]) -> Result<(), GitError> {
    if local_repository(url) {
        match fetch_in_process(repo, url, refspecs) {
            Ok(()) => return Ok(()),
            // `git` says it in its own words (or manages where libgit2 did not, e.g. a
            // repository owned by another user that `safe.directory` allows).
            Err(e) => tracing::debug!(error = %e, "in-process fetch failed; running git fetch"),
        }
    }
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

/// Whether `url` names a repository on this machine: an absolute path, or a `file://` URL
/// (without `%` escapes). A relative path is left to `git` (it resolves it the same way).
fn local_repository(url: &str) -> bool {
    let path = url.strip_prefix("file://").unwrap_or(url);
    path.starts_with('/') && !path.contains('%') && Path::new(path).is_dir()
}

/// [`fetch_refspecs`] from a repository on this machine, with libgit2's local transport: the
/// objects are downloaded, then each destination ref is set. Not `Remote::fetch`: its tips
/// update truncates the user's `FETCH_HEAD`, which `git fetch --no-write-fetch-head` leaves
/// alone. Only forced refspecs (`+src:dst`, one trailing `*` on both sides or none).
///
/// # Errors
/// [`GitError::BranchNotFound`] for a source ref the remote does not have (libgit2 would
/// fetch nothing without a word) or a refspec of another form; [`GitError::Libgit2`].
fn fetch_in_process(repo: &Path, url: &str, refspecs: &[String]) -> Result<(), GitError> {
    let repository = open_repo(repo)?;
    let context = || format!("fetching {} from {url}", refspecs.join(" "));
    let mut remote = repository.remote_anonymous(url).ctx(context)?;
    remote.connect(git2::Direction::Fetch).ctx(context)?;
    let advertised: Vec<(String, Oid)> = remote
        .list()
        .ctx(context)?
        .iter()
        .map(|head| (head.name().to_string(), head.oid()))
        .collect();
    let mut updates = Vec::new();
    for spec in refspecs {
        updates.extend(refs_for_spec(spec, &advertised)?);
    }
    for (refname, _) in &updates {
        // `git fetch` refuses to move a branch a worktree has checked out; so does this, by
        // leaving it to `git fetch`.
        if let Some(branch) = refname.strip_prefix("refs/heads/")
            && let Some(owner) = crate::worktree::checked_out_by(&repository, branch)?
        {
            return Err(GitError::BranchCheckedOut {
                branch: branch.to_string(),
                ours: owner.is_ours(),
                path: owner.path,
            });
        }
    }
    let mut options = git2::FetchOptions::new();
    options.download_tags(git2::AutotagOption::None);
    remote.download(refspecs, Some(&mut options)).ctx(context)?;
    remote.disconnect().ctx(context)?;
    for (refname, oid) in updates {
        repository
            .reference(&refname, oid, true, &format!("fetch: from {url}"))
            .ctx(context)?;
    }
    Ok(())
}

/// The local refs forced refspec `spec` (`+src:dst`) sets from the `advertised` refs, with
/// their commits.
fn refs_for_spec(spec: &str, advertised: &[(String, Oid)]) -> Result<Vec<(String, Oid)>, GitError> {
    let not_supported = || GitError::BranchNotFound {
        branch: spec.to_string(),
    };
    let (source, destination) = spec
        .strip_prefix('+')
        .and_then(|s| s.split_once(':'))
        .ok_or_else(not_supported)?;
    match (source.strip_suffix('*'), destination.strip_suffix('*')) {
        (Some(from), Some(to)) if !from.contains('*') && !to.contains('*') => Ok(advertised
            .iter()
            .filter_map(|(name, oid)| Some((format!("{to}{}", name.strip_prefix(from)?), *oid)))
            .collect()),
        (None, None) => advertised
            .iter()
            .find(|(name, _)| name == source)
            .map(|(_, oid)| vec![(destination.to_string(), *oid)])
            .ok_or_else(|| GitError::BranchNotFound {
                branch: source.to_string(),
            }),
        _ => Err(not_supported()),
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn oid(n: u8) -> Oid {
        Oid::from_bytes(&[n; 20]).unwrap()
    }

    /// A glob maps every advertised ref under its prefix; an exact refspec maps its one ref;
    /// a missing source or an unforced refspec is refused (the caller then runs `git fetch`).
    #[test]
    fn refspecs_map_advertised_refs() {
        let advertised = vec![
            ("refs/heads/ahelper/r/w1".to_string(), oid(1)),
            ("refs/heads/ahelper/r/w2".to_string(), oid(2)),
            ("refs/heads/main".to_string(), oid(3)),
        ];
        assert_eq!(
            refs_for_spec(
                "+refs/heads/ahelper/r/*:refs/ahelper-pushed/r/*",
                &advertised
            )
            .unwrap(),
            vec![
                ("refs/ahelper-pushed/r/w1".to_string(), oid(1)),
                ("refs/ahelper-pushed/r/w2".to_string(), oid(2)),
            ]
        );
        assert_eq!(
            refs_for_spec("+refs/heads/main:refs/heads/base", &advertised).unwrap(),
            vec![("refs/heads/base".to_string(), oid(3))]
        );
        for refused in [
            "+refs/heads/gone:refs/heads/gone",
            "refs/heads/main:refs/heads/main",
            "+refs/*/x/*:refs/*",
        ] {
            assert!(refs_for_spec(refused, &advertised).is_err(), "{refused}");
        }
    }

    #[test]
    fn local_repositories_are_absolute_paths_or_file_urls() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_str().unwrap();
        assert!(local_repository(path));
        assert!(local_repository(&format!("file://{path}")));
        for other in [
            "origin",
            "../remote.git",
            "git@example.com:r.git",
            "ssh://example.com/r.git",
            "https://example.com/r.git",
            "/no/such/dir/r.git",
        ] {
            assert!(!local_repository(other), "{other}");
        }
    }
}
