//! Spare worktrees: created detached, parked after use, recycled onto a new branch.

use super::support::{Fixture, git, read, write};
use ahelper_worktrees::{
    GitError, SpareFiles, commit_all, create_spare_worktree, create_worktree, delete_branch,
    list_worktrees, park_worktree, recycle_worktree, recycle_worktree_deferring_sync,
    remove_worktree,
};

#[test]
fn spare_is_detached_and_recycles_onto_a_new_branch_at_its_start_commit() {
    let f = Fixture::new();
    let lock = f.lock();
    let base = f.head();
    let spare = create_spare_worktree(&lock, &f.repo, &f.wt("r/.spare-1"), base).unwrap();
    assert_eq!(spare.branch, None, "a spare's HEAD is detached");
    assert_eq!(spare.head, Some(base));
    assert!(spare.is_ours());
    assert_eq!(read(&spare.path, "src/a.rs"), "fn a() {}\n");
    // The integration branch moved on: the worker starts from a later commit.
    write(&f.repo, "src/a.rs", "fn a() { 1 }\n");
    git(&f.repo, &["commit", "-qam", "later"]);
    let later = f.head();
    let path = f.wt("r/w1");
    let info = recycle_worktree(
        &lock,
        &f.repo,
        &spare.path,
        &path,
        "ahelper/r/w1",
        later,
        SpareFiles::AsCreated,
    )
    .unwrap();
    assert_eq!(info.path, path);
    assert_eq!(info.branch.as_deref(), Some("ahelper/r/w1"));
    assert_eq!(info.head, Some(later));
    assert_eq!(info.marker.unwrap().branch, "ahelper/r/w1");
    assert!(
        !spare.path.exists(),
        "the spare became the worker's worktree"
    );
    assert_eq!(read(&path, "src/a.rs"), "fn a() { 1 }\n");
    assert_eq!(git(&path, &["status", "--porcelain"]), "");
    assert_eq!(
        git(&path, &["symbolic-ref", "--short", "HEAD"]),
        "ahelper/r/w1"
    );
    assert_eq!(list_worktrees(&f.repo).unwrap().len(), 2);
    // git agrees on where it is.
    assert!(git(&f.repo, &["worktree", "list", "--porcelain"]).contains(path.to_str().unwrap()));
}

/// A spare recycled with its files kept leaves the marker's flush to the caller: the worktree
/// is ahelper's at once (it commits), and the flush succeeds afterwards. A spare whose files
/// are reset has its marker flushed already.
#[test]
fn recycling_with_a_deferred_sync_hands_back_the_markers_flush() {
    let f = Fixture::new();
    let (lock, base) = (f.lock(), f.head());
    let [kept, reset] = ["r/.spare-1", "r/.spare-2"]
        .map(|name| create_spare_worktree(&lock, &f.repo, &f.wt(name), base));
    let path = f.wt("r/w1");
    let (info, marker) = recycle_worktree_deferring_sync(
        &lock,
        &f.repo,
        (&kept.unwrap().path, &path),
        "ahelper/r/w1",
        base,
        SpareFiles::AsCreated,
    )
    .unwrap();
    assert_eq!(info.marker.unwrap().branch, "ahelper/r/w1");
    let marker = marker.expect("files kept: the flush is the caller's");
    write(&path, "src/a.rs", "fn a() { 2 }\n");
    assert!(commit_all(&path, "w1", None).unwrap().is_some());
    marker.sync().unwrap();

    let (_, marker) = recycle_worktree_deferring_sync(
        &lock,
        &f.repo,
        (&reset.unwrap().path, &f.wt("r/w2")),
        "ahelper/r/w2",
        base,
        SpareFiles::Used,
    )
    .unwrap();
    assert!(marker.is_none(), "reset: flushed with the files");
}

#[test]
fn parked_worktree_keeps_ignored_files_frees_its_branch_and_serves_the_next_worker() {
    let f = Fixture::new();
    let lock = f.lock();
    let base = f.head();
    let w1 = f.wt("r/w1");
    create_worktree(&lock, &f.repo, &w1, "ahelper/r/w1", base).unwrap();
    write(&w1, "src/b.rs", "fn b() { 1 }\n");
    write(&w1, "target/build.bin", "warm");
    commit_all(&w1, "w1 work", None).unwrap();
    let w1_tip = f.rev("ahelper/r/w1");
    git(&f.repo, &["merge", "-q", "--no-edit", "ahelper/r/w1"]);

    let spare = park_worktree(&lock, &f.repo, &f.wt_base, &w1, &f.wt("r/.spare-1")).unwrap();
    assert!(!w1.exists());
    let listed = list_worktrees(&f.repo).unwrap();
    let parked = listed.iter().find(|w| w.path == spare).unwrap();
    assert_eq!(
        (parked.branch.as_deref(), parked.head),
        (None, Some(w1_tip))
    );
    // Its branch is checked out nowhere now: it can be deleted (it is merged).
    delete_branch(&lock, &f.repo, "ahelper/r/w1", "main", false).unwrap();

    let w2 = f.wt("r/w2");
    recycle_worktree(
        &lock,
        &f.repo,
        &spare,
        &w2,
        "ahelper/r/w2",
        base,
        SpareFiles::Used,
    )
    .unwrap();
    assert_eq!(
        read(&w2, "src/b.rs"),
        "fn b() {}\n",
        "back at w2's start commit"
    );
    assert_eq!(
        read(&w2, "target/build.bin"),
        "warm",
        "ignored build outputs stay warm"
    );
    assert_eq!(git(&w2, &["status", "--porcelain"]), "");
    remove_worktree(&lock, &f.repo, &f.wt_base, &w2, false).unwrap();
    assert_eq!(list_worktrees(&f.repo).unwrap().len(), 1);
}

#[test]
fn parking_refuses_a_worktree_with_work_and_recycling_refuses_one_on_a_branch() {
    let f = Fixture::new();
    let w1 = f.worker_with("r/w1", &[("new.txt", "not committed")]);
    let lock = f.lock();
    let err = park_worktree(&lock, &f.repo, &f.wt_base, &w1, &f.wt("r/.spare-1")).unwrap_err();
    assert!(matches!(err, GitError::WorktreeDirty { .. }), "{err:?}");
    assert_eq!(read(&w1, "new.txt"), "not committed");
    assert!(!f.wt("r/.spare-1").exists());
    // A worktree on a branch is somebody's: it is never recycled.
    let err = recycle_worktree(
        &lock,
        &f.repo,
        &w1,
        &f.wt("r/w2"),
        "ahelper/r/w2",
        f.head(),
        SpareFiles::Used,
    )
    .unwrap_err();
    assert!(
        matches!(err, GitError::InvalidWorktreePath { .. }),
        "{err:?}"
    );
    assert_eq!(
        git(&w1, &["symbolic-ref", "--short", "HEAD"]),
        "ahelper/r/w1"
    );
    assert!(git(&f.repo, &["branch", "--list", "ahelper/r/w2"]).is_empty());
}

#[test]
fn fresh_spare_at_the_start_commit_recycles_without_rewriting_files() {
    let f = Fixture::new();
    let lock = f.lock();
    let base = f.head();
    let spare = create_spare_worktree(&lock, &f.repo, &f.wt("r/.spare-1"), base).unwrap();
    let file = spare.path.join("src/a.rs");
    let inode = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&file).unwrap());
    let path = f.wt("r/w1");
    let info = recycle_worktree(
        &lock,
        &f.repo,
        &spare.path,
        &path,
        "ahelper/r/w1",
        base,
        SpareFiles::AsCreated,
    )
    .unwrap();
    assert_eq!(
        (info.path.as_path(), info.branch.as_deref(), info.head),
        (path.as_path(), Some("ahelper/r/w1"), Some(base))
    );
    assert_eq!(info.marker.unwrap().branch, "ahelper/r/w1");
    assert!(!spare.path.exists());
    let moved = path.join("src/a.rs");
    assert_eq!(
        std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&moved).unwrap()),
        inode,
        "the file was not rewritten"
    );
    // Clean, on its own branch, and git's admin files agree on where it is.
    assert_eq!(git(&path, &["status", "--porcelain"]), "");
    assert_eq!(
        git(&path, &["symbolic-ref", "--short", "HEAD"]),
        "ahelper/r/w1"
    );
    let dotgit = read(&path, ".git");
    let admin = std::path::PathBuf::from(dotgit.trim().strip_prefix("gitdir: ").unwrap());
    assert_eq!(
        std::fs::read_to_string(admin.join("gitdir"))
            .unwrap()
            .trim(),
        path.join(".git").to_str().unwrap()
    );
    let porcelain = git(&f.repo, &["worktree", "list", "--porcelain"]);
    let entry = format!(
        "worktree {}\nHEAD {base}\nbranch refs/heads/ahelper/r/w1",
        path.display()
    );
    assert!(porcelain.contains(&entry), "{porcelain}");
    assert!(!porcelain.contains("prunable"), "{porcelain}");
    // A prune keeps it.
    git(&f.repo, &["worktree", "prune"]);
    assert!(git(&f.repo, &["worktree", "list", "--porcelain"]).contains(&entry));
    assert_eq!(list_worktrees(&f.repo).unwrap().len(), 2);
    // And it is a working worktree: a commit there lands on its branch.
    write(&path, "src/a.rs", "fn a() { 2 }\n");
    commit_all(&path, "w1", None).unwrap();
    assert_ne!(f.rev("ahelper/r/w1"), base);
}
