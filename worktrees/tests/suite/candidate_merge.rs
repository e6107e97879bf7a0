//! The gated merge's git steps: merge_candidate, advance_branch, checkout_detached,
//! clean_untracked, start_merge, conclude_merge; and merge_clean_run, several clean merges with
//! one ref update.

use super::support::{Fixture, git, read, write};
use ahelper_worktrees::{
    Candidate, GitError, MergeSource, Oid, RepoLock, advance_branch, checkout_detached,
    clean_untracked, commit_all, conclude_merge, create_branch, create_worktree, merge_candidate,
    merge_clean_run, remove_run_ref_locks, start_merge,
};

/// Worker branch `ahelper/r/<w>` from HEAD with `file` rewritten; its tip.
fn worker(f: &Fixture, lock: &RepoLock, w: &str, file: &str, content: &str) -> Oid {
    let path = f.wt(&format!("r/{w}"));
    create_worktree(lock, &f.repo, &path, &format!("ahelper/r/{w}"), f.head()).unwrap();
    write(&path, file, content);
    commit_all(&path, w, None).unwrap().unwrap()
}

/// Workers `w1` and `w2` both rewriting the same line of `src/a.rs`; their tips.
fn conflicting_pair(f: &Fixture, lock: &RepoLock) -> (Oid, Oid) {
    (
        worker(f, lock, "w1", "src/a.rs", "fn a() { 1 }\n"),
        worker(f, lock, "w2", "src/a.rs", "fn a() { 2 }\n"),
    )
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
    let (w1, w2) = conflicting_pair(&f, &lock);
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

/// The tree of `rev`.
fn tree(f: &Fixture, rev: &str) -> String {
    git(&f.repo, &["rev-parse", &format!("{rev}^{{tree}}")])
}

/// A run of sources `ahelper/r/<w>`, each with the message `m-<w>`.
fn sources<'a>(names: &'a [(String, String)]) -> Vec<MergeSource<'a>> {
    names
        .iter()
        .map(|(branch, message)| MergeSource { branch, message })
        .collect()
}

fn named(workers: &[&str]) -> Vec<(String, String)> {
    workers
        .iter()
        .map(|w| (format!("ahelper/r/{w}"), format!("m-{w}")))
        .collect()
}

#[test]
fn a_clean_run_makes_the_same_tree_and_parents_as_merging_one_at_a_time() {
    let f = Fixture::new();
    let lock = f.lock();
    for (w, file) in [("w1", "src/a.rs"), ("w2", "src/b.rs"), ("w3", "src/c.rs")] {
        worker(&f, &lock, w, file, &format!("// {w}\n"));
    }
    // one at a time, in order
    create_branch(&f.repo, "ahelper/r/one", f.head()).unwrap();
    for w in ["w1", "w2", "w3"] {
        let source = format!("ahelper/r/{w}");
        let Candidate::Ready { target, commit } =
            merge_candidate(&f.repo, "ahelper/r/one", &source, &format!("m-{w}"), None).unwrap()
        else {
            panic!("a clean candidate")
        };
        advance_branch(&f.repo, "ahelper/r/one", target, commit).unwrap();
    }
    // one pass
    create_branch(&f.repo, "ahelper/r/run", f.head()).unwrap();
    let names = named(&["w1", "w2", "w3"]);
    let tips = merge_clean_run(&f.repo, "ahelper/r/run", &sources(&names), None).unwrap();
    assert_eq!(tips.len(), 3, "every source merged");
    assert_eq!(
        f.rev("ahelper/r/run"),
        tips[2],
        "one ref update to the last tip"
    );
    assert_eq!(
        tips[0],
        f.rev("ahelper/r/w1"),
        "the first is a fast-forward"
    );
    assert_eq!(tree(&f, "ahelper/r/run"), tree(&f, "ahelper/r/one"));
    for rev in ["ahelper/r/run", "ahelper/r/one"] {
        let parents = git(&f.repo, &["rev-list", "--parents", "-n1", rev]);
        assert!(
            parents.contains(&f.rev("ahelper/r/w3").to_string()),
            "{rev}: {parents}"
        );
        let message = git(&f.repo, &["log", "-1", "--format=%s", rev]);
        assert_eq!(message.trim(), "m-w3");
    }
    // already contained: nothing moves
    let again = merge_clean_run(&f.repo, "ahelper/r/run", &sources(&names[..1]), None).unwrap();
    assert_eq!(again, vec![tips[2]]);
    assert_eq!(f.rev("ahelper/r/run"), tips[2]);
}

#[test]
fn a_clean_run_stops_before_a_conflict_and_keeps_the_rest() {
    let f = Fixture::new();
    let lock = f.lock();
    let (w1, w2) = conflicting_pair(&f, &lock);
    let w3 = worker(&f, &lock, "w3", "src/b.rs", "fn b() { 3 }\n");
    create_branch(&f.repo, "ahelper/r/integration", f.head()).unwrap();
    let names = named(&["w1", "w2", "w3"]);
    let tips = merge_clean_run(&f.repo, "ahelper/r/integration", &sources(&names), None).unwrap();
    assert_eq!(tips, vec![w1], "merged up to the conflict");
    assert_eq!(f.rev("ahelper/r/integration"), w1);
    assert_eq!(f.rev("ahelper/r/w2"), w2, "the conflicting branch is kept");
    assert_eq!(f.rev("ahelper/r/w3"), w3, "the rest wait");
    // the conflict is the gate's to report, with its files
    let Candidate::Conflict { files } =
        merge_candidate(&f.repo, "ahelper/r/integration", "ahelper/r/w2", "m", None).unwrap()
    else {
        panic!("expected a conflict")
    };
    assert_eq!(files[0].path, "src/a.rs");
    // a missing branch stops a run too, and nothing moves when nothing merged
    let missing = named(&["gone", "w3"]);
    let tips = merge_clean_run(&f.repo, "ahelper/r/integration", &sources(&missing), None).unwrap();
    assert!(tips.is_empty());
    assert_eq!(f.rev("ahelper/r/integration"), w1);
}

/// Issue 37.3: a ref lock a crash left is named as one (its path), not as a concurrent
/// update; removing the run's own ref locks lets the branch move again, and touches no lock
/// outside the run's refs.
#[test]
fn a_stale_ref_lock_is_named_and_the_runs_own_are_removed() {
    let f = Fixture::new();
    let lock = f.lock();
    create_branch(&f.repo, "ahelper/r/integration", f.head()).unwrap();
    let w1 = worker(&f, &lock, "w1", "src/a.rs", "fn a() { 1 }\n");
    let refs = f.repo.join(".git/refs/heads");
    std::fs::write(refs.join("ahelper/r/integration.lock"), "").unwrap();
    std::fs::write(refs.join("main.lock"), "").unwrap();
    match advance_branch(&f.repo, "ahelper/r/integration", f.head(), w1) {
        Err(e @ GitError::RefLocked { .. }) => {
            let text = e.to_string();
            assert!(text.contains("integration.lock exists"), "{text}");
            assert!(text.contains("crashed"), "{text}");
        }
        other => panic!("{other:?}"),
    }
    let removed = remove_run_ref_locks(&f.repo, "r").unwrap();
    assert_eq!(removed.len(), 1, "{removed:?}");
    assert!(removed[0].ends_with("refs/heads/ahelper/r/integration.lock"));
    assert!(refs.join("main.lock").exists(), "not the run's: kept");
    advance_branch(&f.repo, "ahelper/r/integration", f.head(), w1).unwrap();
}

/// Issue 37.1: an interrupted write's temp file is neither committed nor left behind.
#[test]
fn commits_leave_out_and_remove_writer_temp_files() {
    let f = Fixture::new();
    let lock = f.lock();
    let path = f.wt("r/w1");
    create_worktree(&lock, &f.repo, &path, "ahelper/r/w1", f.head()).unwrap();
    let temp = "src/.a.rs.ahelper-0190d1b2c3d4e5f60718293a4b5c6d7e.tmp";
    write(&path, temp, "fn a() { hal");
    write(&path, "src/a.rs", "fn a() { 1 }\n");
    let tip = commit_all(&path, "w1", None).unwrap().unwrap();
    let files = git(&f.repo, &["ls-tree", "-r", "--name-only", &tip.to_string()]);
    assert!(!files.contains(".ahelper-"), "{files}");
    assert!(!path.join(temp).exists());
}
