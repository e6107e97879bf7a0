//! Moving commits through a shared remote on this machine: `push_commits` to a bare
//! repository, `fetch_refspecs` back from it (in-process for an absolute path or a `file://`
//! URL, `git fetch` otherwise) — the same refs and objects either way.

use super::support::*;
use ahelper_worktrees::{Oid, fetch_refspecs, push_commits};
use std::path::Path;

/// A bare remote next to the fixture's repository, holding `refs/heads/ahelper/r/w1` at a new
/// commit on top of `main` (which the fetching side does not have); that commit.
fn remote_with_a_branch(fx: &Fixture) -> (std::path::PathBuf, Oid) {
    let remote = fx.tmp.path().canonicalize().unwrap().join("remote.git");
    git(
        fx.tmp.path(),
        &["init", "-q", "--bare", remote.to_str().unwrap()],
    );
    let pusher = fx.tmp.path().join("pusher");
    git(
        fx.tmp.path(),
        &[
            "clone",
            "-q",
            fx.repo.to_str().unwrap(),
            pusher.to_str().unwrap(),
        ],
    );
    write(&pusher, "new.txt", "from a worker\n");
    git(&pusher, &["add", "-A"]);
    git(&pusher, &["commit", "-q", "-m", "worker"]);
    let commit = Oid::from_str(&git(&pusher, &["rev-parse", "HEAD"])).unwrap();
    push_commits(
        &pusher,
        remote.to_str().unwrap(),
        &[(commit, "refs/heads/ahelper/r/w1".into())],
    )
    .unwrap();
    (remote, commit)
}

fn fetched(repo: &Path, url: &str) -> Oid {
    fetch_refspecs(
        repo,
        url,
        &["+refs/heads/ahelper/r/w1:refs/heads/ahelper/r/w1".to_string()],
    )
    .unwrap();
    Oid::from_str(&git(repo, &["rev-parse", "ahelper/r/w1"])).unwrap()
}

/// An absolute path, a `file://` URL: the branch and its commit arrive (the commit's tree is
/// readable); the user's FETCH_HEAD stays as it was.
#[test]
fn a_branch_is_fetched_from_a_repository_on_this_machine() {
    let fx = Fixture::new();
    let (remote, commit) = remote_with_a_branch(&fx);
    let path = remote.to_str().unwrap().to_string();
    for url in [path.clone(), format!("file://{path}")] {
        git(&fx.repo, &["update-ref", "-d", "refs/heads/ahelper/r/w1"]);
        let users = "0123456789012345678901234567890123456789\t\tbranch 'main' of elsewhere\n";
        std::fs::write(fx.repo.join(".git/FETCH_HEAD"), users).unwrap();
        assert_eq!(fetched(&fx.repo, &url), commit, "{url}");
        assert_eq!(
            git(&fx.repo, &["show", "ahelper/r/w1:new.txt"]),
            "from a worker"
        );
        assert_eq!(
            std::fs::read_to_string(fx.repo.join(".git/FETCH_HEAD")).unwrap(),
            users,
            "{url}: the user's FETCH_HEAD is kept"
        );
    }
}

/// A ref the remote does not have: an error that says so (git's words), nothing created.
#[test]
fn a_missing_ref_is_an_error() {
    let fx = Fixture::new();
    let (remote, _) = remote_with_a_branch(&fx);
    let e = fetch_refspecs(
        &fx.repo,
        remote.to_str().unwrap(),
        &["+refs/heads/ahelper/r/w9:refs/heads/ahelper/r/w9".to_string()],
    )
    .unwrap_err();
    assert!(e.to_string().contains("ahelper/r/w9"), "{e}");
    assert!(
        git(&fx.repo, &["branch", "--list", "ahelper/r/w9"]).is_empty(),
        "nothing created"
    );
}

/// A glob refspec (how a worker machine and the coordinator fetch every pushed branch of a
/// run) brings each branch under the prefix, and nothing else.
#[test]
fn a_glob_refspec_fetches_every_branch_under_it() {
    let fx = Fixture::new();
    let (remote, commit) = remote_with_a_branch(&fx);
    git(
        &remote,
        &["update-ref", "refs/heads/ahelper/r/w2", &commit.to_string()],
    );
    git(
        &remote,
        &["update-ref", "refs/heads/other", &commit.to_string()],
    );
    fetch_refspecs(
        &fx.repo,
        remote.to_str().unwrap(),
        &["+refs/heads/ahelper/r/*:refs/ahelper-pushed/r/*".to_string()],
    )
    .unwrap();
    let listed = git(
        &fx.repo,
        &["for-each-ref", "--format=%(refname) %(objectname)"],
    );
    for w in ["w1", "w2"] {
        assert!(
            listed.contains(&format!("refs/ahelper-pushed/r/{w} {commit}")),
            "{listed}"
        );
    }
    assert!(!listed.contains("other"), "{listed}");
}

/// Into a branch a worktree has checked out: refused, as `git fetch` refuses it, and the
/// branch stays where it was.
#[test]
fn a_checked_out_branch_is_not_moved() {
    let fx = Fixture::new();
    let (remote, _) = remote_with_a_branch(&fx);
    let before = fx.head();
    let e = fetch_refspecs(
        &fx.repo,
        remote.to_str().unwrap(),
        &["+refs/heads/ahelper/r/w1:refs/heads/main".to_string()],
    )
    .unwrap_err();
    assert!(e.to_string().contains("main"), "{e}");
    assert_eq!(fx.head(), before);
}
