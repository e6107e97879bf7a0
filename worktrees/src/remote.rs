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

/// [`fetch_refspecs`] from a repository on this machine, in-process: the remote is opened as a
/// repository, the commits the refspecs bring that this repository lacks are packed there —
/// walked from the wanted tips only, this repository's ref tips hidden — and the pack written
/// into this repository's object store; then each destination ref is moved from the value it
/// had before (compare-and-swap, as `git fetch` does). Not libgit2's `Remote::fetch`/
/// `download`: its local transport packs from every ref of the remote (objects of branches
/// and tags nobody asked for, again on every fetch), and its tip update truncates the user's
/// `FETCH_HEAD`. Only forced refspecs (`+src:dst`, one trailing `*` on both sides or none)
/// whose sources are commits.
///
/// # Errors
/// [`GitError::BranchNotFound`] for a source ref the remote does not have or a refspec of
/// another form; [`GitError::BranchCheckedOut`]; [`GitError::Libgit2`] (a ref that moved
/// meanwhile, a source that is not a commit, …). The caller then runs `git fetch`.
fn fetch_in_process(repo: &Path, url: &str, refspecs: &[String]) -> Result<(), GitError> {
    let local = open_repo(repo)?;
    let context = || format!("fetching {} from {url}", refspecs.join(" "));
    let path = url.strip_prefix("file://").unwrap_or(url);
    let remote = git2::Repository::open_ext(
        path,
        git2::RepositoryOpenFlags::NO_SEARCH,
        std::iter::empty::<&std::ffi::OsStr>(),
    )
    .ctx(context)?;
    let advertised = ref_tips(&remote).ctx(context)?;
    let mut updates = Vec::new();
    for spec in refspecs {
        updates.extend(refs_for_spec(spec, &advertised)?);
    }
    refuse_checked_out(&local, &updates)?;
    let before: Vec<Option<Oid>> = updates
        .iter()
        .map(|(name, _)| local.refname_to_id(name).ok())
        .collect();
    let tips: Vec<Oid> = updates.iter().map(|(_, oid)| *oid).collect();
    copy_missing_commits(&remote, &local, &tips).ctx(context)?;
    for ((name, oid), old) in updates.iter().zip(before) {
        let message = format!("fetch: from {url}");
        match old {
            Some(old) => local.reference_matching(name, *oid, true, old, &message),
            None => local.reference(name, *oid, false, &message),
        }
        .ctx(context)?;
    }
    Ok(())
}

/// Every ref of `repo` with the object it resolves to.
fn ref_tips(repo: &git2::Repository) -> Result<Vec<(String, Oid)>, git2::Error> {
    let mut tips = Vec::new();
    for reference in repo.references()? {
        let reference = reference?;
        if let (Ok(name), Ok(resolved)) = (reference.name(), reference.resolve())
            && let Some(oid) = resolved.target()
        {
            tips.push((name.to_string(), oid));
        }
    }
    Ok(tips)
}

/// `git fetch` refuses to move a branch a worktree has checked out; so does this (the caller
/// then leaves it to `git fetch`).
fn refuse_checked_out(local: &git2::Repository, updates: &[(String, Oid)]) -> Result<(), GitError> {
    for (refname, _) in updates {
        if let Some(branch) = refname.strip_prefix("refs/heads/")
            && let Some(owner) = crate::worktree::checked_out_by(local, branch)?
        {
            return Err(GitError::BranchCheckedOut {
                branch: branch.to_string(),
                ours: owner.is_ours(),
                path: owner.path,
            });
        }
    }
    Ok(())
}

/// Copies into `local` the commits reachable from `tips` in `remote` that `local` lacks, with
/// their trees and blobs, as one pack. A tip `local` has is taken as complete (as git does).
fn copy_missing_commits(
    remote: &git2::Repository,
    local: &git2::Repository,
    tips: &[Oid],
) -> Result<(), git2::Error> {
    let local_odb = local.odb()?;
    let missing: Vec<Oid> = tips
        .iter()
        .copied()
        .filter(|oid| !local_odb.exists(*oid))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let mut walk = remote.revwalk()?;
    for tip in &missing {
        // A tag or a tree as a source: an error (and `git fetch` then).
        walk.push(remote.find_commit(*tip)?.id())?;
    }
    let remote_odb = remote.odb()?;
    for (_, oid) in ref_tips(local)? {
        if remote_odb.exists(oid) {
            // What this repository has, and all it reaches, is not sent (not a commit: ignored).
            let _ = walk.hide(oid);
        }
    }
    let mut pack = remote.packbuilder()?;
    pack.insert_walk(&mut walk)?;
    let mut writer = local_odb.packwriter()?;
    let mut written = Ok(());
    pack.foreach(|chunk| {
        written = std::io::Write::write_all(&mut writer, chunk);
        written.is_ok()
    })?;
    written.map_err(|e| git2::Error::from_str(&format!("writing the fetched pack: {e}")))?;
    writer.commit()?;
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

    fn git(dir: &Path, args: &[&str]) -> String {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=T", "-c", "user.email=t@example.com"])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    fn packs(repo: &Path) -> usize {
        std::fs::read_dir(repo.join(".git/objects/pack")).map_or(0, |d| {
            d.flatten()
                .filter(|e| e.path().extension().is_some_and(|x| x == "pack"))
                .count()
        })
    }

    /// The in-process fetch itself (not its `git fetch` fallback): it brings the wanted
    /// branch's new commit and blob, not the objects of an unrelated branch or tag on the
    /// remote, and a second fetch of the same refs writes nothing.
    #[test]
    fn only_the_wanted_commits_are_copied() {
        let dir = tempfile::tempdir().unwrap();
        let (remote, local) = (dir.path().join("remote"), dir.path().join("local"));
        std::fs::create_dir_all(&remote).unwrap();
        git(&remote, &["init", "-q", "-b", "main"]);
        std::fs::write(remote.join("a.txt"), "base\n").unwrap();
        git(&remote, &["add", "-A"]);
        git(&remote, &["commit", "-q", "-m", "base"]);
        git(
            dir.path(),
            &[
                "clone",
                "-q",
                remote.to_str().unwrap(),
                local.to_str().unwrap(),
            ],
        );
        git(&remote, &["checkout", "-q", "-b", "unrelated"]);
        std::fs::write(remote.join("big.txt"), "not asked for\n").unwrap();
        git(&remote, &["add", "-A"]);
        git(&remote, &["commit", "-q", "-m", "unrelated"]);
        git(&remote, &["tag", "-a", "-m", "t", "v1"]);
        let unrelated_blob = git(&remote, &["rev-parse", "HEAD:big.txt"]);
        git(&remote, &["checkout", "-q", "main"]);
        git(&remote, &["checkout", "-q", "-b", "ahelper/r/w1"]);
        std::fs::write(remote.join("w1.txt"), "from w1\n").unwrap();
        git(&remote, &["add", "-A"]);
        git(&remote, &["commit", "-q", "-m", "w1"]);
        let wanted = git(&remote, &["rev-parse", "HEAD"]);
        let spec = vec!["+refs/heads/ahelper/r/*:refs/ahelper-pushed/r/*".to_string()];

        fetch_in_process(&local, remote.to_str().unwrap(), &spec).unwrap();
        assert_eq!(
            git(&local, &["rev-parse", "refs/ahelper-pushed/r/w1"]),
            wanted
        );
        assert_eq!(
            git(&local, &["show", "refs/ahelper-pushed/r/w1:w1.txt"]),
            "from w1"
        );
        let has = |oid: &str| {
            std::process::Command::new("git")
                .arg("-C")
                .arg(&local)
                .args(["cat-file", "-e", oid])
                .status()
                .unwrap()
                .success()
        };
        assert!(
            !has(&unrelated_blob),
            "an unrelated branch's blob was copied"
        );
        let after_first = packs(&local);
        fetch_in_process(&local, remote.to_str().unwrap(), &spec).unwrap();
        assert_eq!(packs(&local), after_first, "a second fetch wrote a pack");
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
