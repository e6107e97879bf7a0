//! The gated merge's git steps: merge_candidate, advance_branch, checkout_detached,
//! clean_untracked, start_merge, conclude_merge.

use super::support::{Fixture, git, read, write};
use ahelper_worktrees::{
    Candidate, GitError, Oid, RepoLock, advance_branch, checkout_detached, clean_untracked,
    commit_all, conclude_merge, create_branch, create_worktree, merge_candidate, start_merge,
};

/// Worker branch `ahelper/r/<w>` from HEAD with `file` rewritten; its tip.
fn worker(f: &Fixture, lock: &RepoLock, w: &str, file: &str, content: &str) -> Oid {
    let path = f.wt(&format!("r/{w}"));
    create_worktree(lock, &f.repo, &path, &format!("ahelper/r/{w}"), f.head()).unwrap();
    write(&path, file, content);
    commit_all(&path, w, None).unwrap().unwrap()
}

#[test]
fn a_candidate_moves_no_ref_until_advanced_with_compare_and_swap() {
    let f = Fixture::new();
    let lock = f.lock();
    create_branch(&f.repo, "ahelper/r/integration", f.head()).unwrap();
    let w1 = worker(&f, &lock, "w1", "src/a.rs", "fn a() { 1 }\n");
    let w2 = worker(&f, &lock, "w2", "src/b.rs", "fn b() { 2 }\n");
    let base = f.head();

    // a fast-forward candidate is the branch's tip
    let c1 = merge_candidate(&f.repo, "ahelper/r/integration", "ahelper/r/w1", "m1", None).unwrap();
    assert_eq!(
        c1,
        Candidate::Ready {
            target: base,
            commit: w1
        }
    );
    assert_eq!(f.rev("ahelper/r/integration"), base, "no ref moved");
    advance_branch(&f.repo, "ahelper/r/integration", base, w1).unwrap();

    // a real merge: a commit with both parents that no ref points at yet
    let Candidate::Ready { target, commit } =
        merge_candidate(&f.repo, "ahelper/r/integration", "ahelper/r/w2", "m2", None).unwrap()
    else {
        panic!("expected a candidate")
    };
    assert_eq!(target, w1);
    assert_eq!(f.rev("ahelper/r/integration"), w1);
    let parents = git(
        &f.repo,
        &["rev-list", "--parents", "-n1", &commit.to_string()],
    );
    assert!(parents.contains(&w1.to_string()) && parents.contains(&w2.to_string()));
    // the compare-and-swap refuses a stale expectation
    assert!(matches!(
        advance_branch(&f.repo, "ahelper/r/integration", base, commit),
        Err(GitError::ConcurrentRefUpdate { .. })
    ));
    advance_branch(&f.repo, "ahelper/r/integration", w1, commit).unwrap();
    assert_eq!(
        merge_candidate(&f.repo, "ahelper/r/integration", "ahelper/r/w2", "m", None).unwrap(),
        Candidate::UpToDate { commit }
    );
}

#[test]
fn checkout_detached_shows_a_commit_and_drops_leftovers() {
    let f = Fixture::new();
    let lock = f.lock();
    let w1 = worker(&f, &lock, "w1", "src/a.rs", "fn a() { 1 }\n");
    let verify = f.worker(&lock, "r/verify");
    write(&verify, "leftover.txt", "from a test run\n");
    write(&verify, "target/cache", "ignored build cache\n");
    checkout_detached(&verify, w1).unwrap();
    assert_eq!(read(&verify, "src/a.rs"), "fn a() { 1 }\n");
    assert!(!verify.join("leftover.txt").exists());
    assert!(verify.join("target/cache").exists(), "ignored files stay");
    assert_eq!(f.rev("ahelper/r/verify"), f.head(), "its branch stays");
    write(&verify, "again.txt", "x\n");
    clean_untracked(&verify).unwrap();
    assert!(!verify.join("again.txt").exists());
}

#[test]
fn a_conflicting_merge_is_left_in_progress_and_concluded_after_resolution() {
    let f = Fixture::new();
    let lock = f.lock();
    let w1 = worker(&f, &lock, "w1", "src/a.rs", "fn a() { 1 }\n");
    let w2 = worker(&f, &lock, "w2", "src/a.rs", "fn a() { 2 }\n");
    create_branch(&f.repo, "ahelper/r/integration", w1).unwrap();
    assert!(matches!(
        merge_candidate(&f.repo, "ahelper/r/integration", "ahelper/r/w2", "m", None).unwrap(),
        Candidate::Conflict { .. }
    ));
    let merger = f.wt("r/merge-1");
    create_worktree(&lock, &f.repo, &merger, "ahelper/r/merge-1", w1).unwrap();
    let conflicted = start_merge(&merger, "ahelper/r/w2", None).unwrap();
    assert_eq!(conflicted, vec!["src/a.rs".to_string()]);
    assert!(read(&merger, "src/a.rs").contains("<<<<<<<"));
    write(&merger, "src/a.rs", "fn a() { 1 + 2 }\n");
    let commit = conclude_merge(&merger, "Merge w2", None).unwrap();
    let parents = git(
        &f.repo,
        &["rev-list", "--parents", "-n1", &commit.to_string()],
    );
    assert!(parents.contains(&w1.to_string()) && parents.contains(&w2.to_string()));
    advance_branch(&f.repo, "ahelper/r/integration", w1, commit).unwrap();
    assert_eq!(
        git(&f.repo, &["show", "ahelper/r/integration:src/a.rs"]),
        "fn a() { 1 + 2 }"
    );
}
