//! Worktree create / resume / list / remove / prune, and the swarm.md cases of this layer.

use std::fs;
use std::path::PathBuf;
use std::sync::Arc;

use super::support::{Fixture, UserState, git, read, write};
use ahelper_worktrees::{
    GitError, GitOwner, create_worktree, ensure_excluded, list_worktrees, prune_worktrees,
    remove_worktree, resume_worktree,
};

#[test]
fn create_worktree_on_new_branch_at_base_s04() {
    let f = Fixture::new();
    let lock = f.lock();
    let before = UserState::capture(&f.repo);
    let base = f.head();
    let path = f.wt("run1/w1");
    let info = create_worktree(&lock, &f.repo, &path, "ahelper/run1/w1", base).unwrap();
    assert_eq!(info.path, path);
    assert_eq!(info.branch.as_deref(), Some("ahelper/run1/w1"));
    assert_eq!(info.head, Some(base));
    assert!(!info.is_main && info.is_ours());
    let marker = info.marker.unwrap();
    assert_eq!(marker.base, base);
    assert_eq!(marker.branch, "ahelper/run1/w1");
    assert_eq!(read(&path, "src/a.rs"), "fn a() {}\n");
    assert_eq!(git(&path, &["rev-parse", "HEAD"]), base.to_string());
    assert_eq!(
        git(&path, &["symbolic-ref", "--short", "HEAD"]),
        "ahelper/run1/w1"
    );
    assert_eq!(
        git(&path, &["status", "--porcelain"]),
        "",
        "no marker inside the worktree"
    );
    assert_eq!(UserState::capture(&f.repo), before);

    let listed = list_worktrees(&f.repo).unwrap();
    assert_eq!(listed.len(), 2);
    assert!(listed[0].is_main && listed[0].branch.as_deref() == Some("main"));
    assert_eq!(listed[1].path, path);
    assert!(listed[1].is_ours());
    // a worktree made by someone else is listed but not ours
    let theirs = f.git_worktree("manual", "manual");
    let listed = list_worktrees(&f.repo).unwrap();
    let manual = listed.iter().find(|w| w.path == theirs).unwrap();
    assert!(!manual.is_ours());
}

#[test]
fn create_from_an_older_base_commit() {
    let f = Fixture::new();
    let old = f.head();
    write(&f.repo, "src/a.rs", "fn a() { 2 }\n");
    git(&f.repo, &["commit", "-qam", "second"]);
    let info = create_worktree(&f.lock(), &f.repo, &f.wt("w"), "ahelper/r/w", old).unwrap();
    assert_eq!(info.head, Some(old));
    assert_eq!(read(&f.wt("w"), "src/a.rs"), "fn a() {}\n");
}

#[test]
fn s01_branch_checked_out_elsewhere_names_the_owner() {
    let f = Fixture::new();
    let lock = f.lock();
    let leftover = f.git_worktree("leftover", "feat/x");
    let err = create_worktree(&lock, &f.repo, &f.wt("new"), "feat/x", f.head()).unwrap_err();
    match &err {
        GitError::BranchCheckedOut { branch, path, ours } => {
            assert_eq!(branch, "feat/x");
            assert_eq!(path, &leftover);
            assert!(!ours);
        }
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains(leftover.to_str().unwrap()));
    assert!(!f.wt("new").exists());
    // the main checkout's branch counts too
    let err = create_worktree(&lock, &f.repo, &f.wt("new"), "main", f.head()).unwrap_err();
    assert!(
        matches!(err, GitError::BranchCheckedOut { ref path, .. } if *path == f.repo),
        "{err:?}"
    );
    // and one of ours is reported as ours
    create_worktree(&lock, &f.repo, &f.wt("a"), "ahelper/r/a", f.head()).unwrap();
    let err = create_worktree(&lock, &f.repo, &f.wt("b"), "ahelper/r/a", f.head()).unwrap_err();
    assert!(
        matches!(err, GitError::BranchCheckedOut { ours: true, .. }),
        "{err:?}"
    );
}

#[test]
fn s02_existing_branch_at_base_without_worktree_is_used() {
    let f = Fixture::new();
    git(&f.repo, &["branch", "tmp"]);
    let info = create_worktree(&f.lock(), &f.repo, &f.wt("tmp"), "tmp", f.head()).unwrap();
    assert_eq!(info.branch.as_deref(), Some("tmp"));
    assert_eq!(info.head, Some(f.head()));
}

#[test]
fn s32_existing_branch_with_other_commits_is_never_reset() {
    let f = Fixture::new();
    let base = f.head();
    git(&f.repo, &["switch", "-q", "-c", "ahelper/old/w1"]);
    write(&f.repo, "src/a.rs", "fn a() { old run }\n");
    git(&f.repo, &["commit", "-qam", "old run work"]);
    let old_tip = f.head();
    git(&f.repo, &["switch", "-q", "main"]);
    let err = create_worktree(&f.lock(), &f.repo, &f.wt("w1"), "ahelper/old/w1", base).unwrap_err();
    assert!(matches!(err, GitError::BranchExists { .. }), "{err:?}");
    assert!(err.to_string().contains("never reset"), "{err}");
    assert_eq!(f.rev("ahelper/old/w1"), old_tip);
    assert!(!f.wt("w1").exists());

    // resume_worktree takes the branch as it is
    let info = resume_worktree(&f.lock(), &f.repo, &f.wt("w1"), "ahelper/old/w1").unwrap();
    assert_eq!(info.head, Some(old_tip));
    assert_eq!(read(&f.wt("w1"), "src/a.rs"), "fn a() { old run }\n");
    let err = resume_worktree(&f.lock(), &f.repo, &f.wt("w2"), "nope").unwrap_err();
    assert!(matches!(err, GitError::BranchNotFound { .. }), "{err:?}");
}

#[test]
fn s04_stale_directory_is_not_reused_and_bad_inputs_are_refused() {
    let f = Fixture::new();
    let lock = f.lock();
    write(&f.wt("run/w1"), "stale.txt", "from a previous run");
    let err =
        create_worktree(&lock, &f.repo, &f.wt("run/w1"), "ahelper/run/w1", f.head()).unwrap_err();
    assert!(
        matches!(err, GitError::WorktreePathExists { .. }),
        "{err:?}"
    );
    assert!(
        git(&f.repo, &["branch", "--list", "ahelper/*"]).is_empty(),
        "no branch left behind"
    );
    // an empty directory is fine
    fs::create_dir_all(f.wt("run/w2")).unwrap();
    create_worktree(&lock, &f.repo, &f.wt("run/w2"), "ahelper/run/w2", f.head()).unwrap();

    let err = create_worktree(&lock, &f.repo, &f.wt("x"), "bad..name", f.head()).unwrap_err();
    assert!(matches!(err, GitError::InvalidBranchName { .. }), "{err:?}");
    let err = create_worktree(&lock, &f.repo, &f.wt("x"), "-f", f.head()).unwrap_err();
    assert!(matches!(err, GitError::InvalidBranchName { .. }), "{err:?}");
    let missing =
        ahelper_worktrees::Oid::from_str("1234567890123456789012345678901234567890").unwrap();
    let err = create_worktree(&lock, &f.repo, &f.wt("x"), "ahelper/run/x", missing).unwrap_err();
    assert!(matches!(err, GitError::CommitNotFound { .. }), "{err:?}");
    assert!(!f.wt("x").exists());
}

#[test]
fn s31_worktree_inside_checkout_only_under_an_ignored_dir() {
    let f = Fixture::new();
    let lock = f.lock();
    let inside = f.repo.join("wt/w1");
    let err = create_worktree(&lock, &f.repo, &inside, "ahelper/r/w1", f.head()).unwrap_err();
    assert!(
        matches!(err, GitError::WorktreeInsideCheckout { .. }),
        "{err:?}"
    );
    let err = create_worktree(
        &lock,
        &f.repo,
        &f.repo.join(".git/wt"),
        "ahelper/r/w1",
        f.head(),
    )
    .unwrap_err();
    assert!(
        matches!(err, GitError::WorktreeInsideCheckout { .. }),
        "{err:?}"
    );

    ensure_excluded(&f.repo, ".ahelper/").unwrap();
    let under = f.repo.join(".ahelper/worktrees/w1");
    create_worktree(&lock, &f.repo, &under, "ahelper/r/w1", f.head()).unwrap();
    assert_eq!(git(&f.repo, &["status", "--porcelain"]), "");
}

#[test]
fn remove_clean_worktree_keeps_branch_and_reports_state() {
    let f = Fixture::new();
    let lock = f.lock();
    let path = f.worker(&lock, "r/w1");
    let removed = remove_worktree(&lock, &f.repo, &f.wt_base, &path, false).unwrap();
    assert!(removed.directory_removed && !removed.orphan);
    assert_eq!(removed.branch.as_deref(), Some("ahelper/r/w1"));
    assert_eq!(removed.head, Some(f.head()));
    assert!(!path.exists());
    assert_eq!(f.rev("ahelper/r/w1"), f.head(), "branch kept");
    assert_eq!(list_worktrees(&f.repo).unwrap().len(), 1);
    // Its files were renamed aside under the lock and deleted after it: nothing is left next
    // to it, and git's admin entry is gone (no stale registration to prune).
    let left: Vec<_> = fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    assert_eq!(
        git(&f.repo, &["worktree", "list", "--porcelain"])
            .matches("worktree ")
            .count(),
        1
    );
    // the branch can get a new worktree again
    create_worktree(&lock, &f.repo, &path, "ahelper/r/w1", f.head()).unwrap();
}

#[test]
fn remove_refuses_dirty_worktree_unless_forced() {
    let f = Fixture::new();
    let path = f.worker_with(
        "r/w1",
        &[
            ("src/a.rs", "changed"),
            ("new.txt", "new"),
            ("target/ignored.bin", "ignored files do not count"),
        ],
    );
    let lock = f.lock();
    let err = remove_worktree(&lock, &f.repo, &f.wt_base, &path, false).unwrap_err();
    match &err {
        GitError::WorktreeDirty { paths, .. } => assert_eq!(paths, &vec!["new.txt", "src/a.rs"]),
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("--force"));
    assert!(path.join("new.txt").exists());
    let removed = remove_worktree(&lock, &f.repo, &f.wt_base, &path, true).unwrap();
    assert!(removed.directory_removed);
    assert!(!path.exists());
}

#[test]
fn remove_refuses_locked_worktree_even_forced() {
    let f = Fixture::new();
    let lock = f.lock();
    let path = f.worker(&lock, "r/w1");
    git(
        &f.repo,
        &[
            "worktree",
            "lock",
            "--reason",
            "worker alive",
            path.to_str().unwrap(),
        ],
    );
    let err = remove_worktree(&lock, &f.repo, &f.wt_base, &path, true).unwrap_err();
    assert!(matches!(err, GitError::WorktreeLocked { .. }), "{err:?}");
    assert!(err.to_string().contains("worker alive"), "{err}");
    assert!(path.exists());
}

#[test]
fn s29_detached_worktree_with_unreachable_commits_is_kept() {
    let f = Fixture::new();
    let lock = f.lock();
    let path = f.worker(&lock, "r/w1");
    git(&path, &["checkout", "-q", "--detach"]);
    write(&path, "src/a.rs", "detached work");
    git(&path, &["commit", "-qam", "work on detached HEAD"]);
    let head = git(&path, &["rev-parse", "HEAD"]);
    let err = remove_worktree(&lock, &f.repo, &f.wt_base, &path, false).unwrap_err();
    assert!(
        matches!(err, GitError::UnreachableCommits { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains(&head));
    // once a branch holds the commit, removal goes through
    git(&path, &["branch", "saved"]);
    let removed = remove_worktree(&lock, &f.repo, &f.wt_base, &path, false).unwrap();
    assert_eq!(removed.branch, None);
    assert_eq!(git(&f.repo, &["rev-parse", "saved"]), head);
}

#[test]
fn s07_orphan_with_marker_is_deleted_foreign_orphan_is_kept() {
    let f = Fixture::new();
    let lock = f.lock();
    let ours = f.worker(&lock, "r/w1");
    let foreign = f.git_worktree("foreign", "foreign");
    // git's admin metadata disappears (e.g. someone ran `rm -rf .git/worktrees`)
    fs::remove_dir_all(f.repo.join(".git/worktrees")).unwrap();
    assert!(ours.join(".git").is_file());

    let removed = remove_worktree(&lock, &f.repo, &f.wt_base, &ours, false).unwrap();
    assert!(removed.orphan && removed.directory_removed);
    assert_eq!(removed.branch.as_deref(), Some("ahelper/r/w1"));
    assert!(!ours.exists());

    let err = remove_worktree(&lock, &f.repo, &f.wt_base, &foreign, true).unwrap_err();
    assert!(matches!(err, GitError::UnsafeRemoval { .. }), "{err:?}");
    assert!(err.to_string().contains("no marker"), "{err}");
    assert!(foreign.join("src/a.rs").exists());
}

#[test]
fn s10_removal_never_touches_main_checkout_git_dir_or_unregistered_dirs() {
    let f = Fixture::new();
    let lock = f.lock();
    let before = UserState::capture(&f.repo);
    create_worktree(&lock, &f.repo, &f.wt("r/w1"), "ahelper/r/w1", f.head()).unwrap();
    let tmp_root = f.tmp.path().canonicalize().unwrap();

    let attempts: Vec<(PathBuf, PathBuf)> = vec![
        (tmp_root.clone(), f.repo.clone()),    // the main worktree itself
        (f.repo.clone(), f.repo.join(".git")), // the common git dir
        (tmp_root.clone(), tmp_root.join("repo")), // ancestor-or-equal of main
        (f.tmp.path().parent().unwrap().to_owned(), tmp_root.clone()), // ancestor of everything
        (f.wt_base.clone(), f.wt_base.clone()), // the base dir itself
        (f.wt_base.clone(), f.wt("r")),        // parent of a worktree, not one
        (f.wt_base.clone(), f.repo.join("src")), // outside the base dir
        (f.repo.clone(), f.repo.join("src")),  // inside main, not a worktree
    ];
    for (base, target) in attempts {
        let err = remove_worktree(&lock, &f.repo, &base, &target, true).unwrap_err();
        assert!(
            matches!(err, GitError::UnsafeRemoval { .. }),
            "{} under {}: {err:?}",
            target.display(),
            base.display()
        );
    }
    // an unregistered plain directory under the base dir
    write(&f.wt("junk"), "file", "keep me");
    let err = remove_worktree(&lock, &f.repo, &f.wt_base, &f.wt("junk"), true).unwrap_err();
    assert!(matches!(err, GitError::UnsafeRemoval { .. }), "{err:?}");
    // a symlink to the main checkout under the base dir
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(&f.repo, f.wt("link")).unwrap();
        let err = remove_worktree(&lock, &f.repo, &f.wt_base, &f.wt("link"), true).unwrap_err();
        assert!(matches!(err, GitError::UnsafeRemoval { .. }), "{err:?}");
    }
    assert!(f.wt("junk/file").exists());
    assert!(f.wt("r/w1/src/a.rs").exists());
    assert!(f.repo.join(".git/HEAD").exists());
    assert_eq!(UserState::capture(&f.repo), before);
}

#[test]
fn prunable_worktree_and_prune_only_ours() {
    let f = Fixture::new();
    let lock = f.lock();
    create_worktree(&lock, &f.repo, &f.wt("r/w1"), "ahelper/r/w1", f.head()).unwrap();
    create_worktree(&lock, &f.repo, &f.wt("r/w2"), "ahelper/r/w2", f.head()).unwrap();
    let foreign = f.git_worktree("foreign", "foreign");
    for p in [f.wt("r/w1"), f.wt("r/w2"), foreign.clone()] {
        fs::remove_dir_all(p).unwrap();
    }
    let listed = list_worktrees(&f.repo).unwrap();
    assert_eq!(listed.iter().filter(|w| w.prunable).count(), 3);

    // removing a registered worktree whose dir is gone prunes just its entry
    let removed = remove_worktree(&lock, &f.repo, &f.wt_base, &f.wt("r/w1"), false).unwrap();
    assert!(removed.directory_removed);
    let pruned = prune_worktrees(&lock, &f.repo).unwrap();
    assert_eq!(pruned, vec![f.wt("r/w2")]);
    let listed = list_worktrees(&f.repo).unwrap();
    assert_eq!(
        listed.len(),
        2,
        "main + the foreign stale entry, which is not ours to prune"
    );
    assert_eq!(listed[1].path, foreign);
}

#[test]
fn s08_concurrent_create_remove_and_prune_are_serialised() {
    let f = Fixture::new();
    let owner = Arc::new(GitOwner::new());
    let base = f.head();
    // pre-create some worktrees to remove concurrently
    {
        let lock = owner.lock_for(&f.repo).unwrap();
        for i in 0..4 {
            create_worktree(
                &lock,
                &f.repo,
                &f.wt(&format!("old/{i}")),
                &format!("ahelper/old/{i}"),
                base,
            )
            .unwrap();
        }
    }
    let mut handles = Vec::new();
    for i in 0..8 {
        let owner = owner.clone();
        let repo = f.repo.clone();
        let wt_base = f.wt_base.clone();
        handles.push(std::thread::spawn(move || {
            // every thread asks the owner for the lock, from different paths of the same repo
            let lock = owner.lock_for(&repo.join("src")).unwrap();
            if i < 4 {
                let path = wt_base.join(format!("new/{i}"));
                create_worktree(&lock, &repo, &path, &format!("ahelper/new/{i}"), base).unwrap();
            } else {
                let path = wt_base.join(format!("old/{}", i - 4));
                remove_worktree(&lock, &repo, &wt_base, &path, false).unwrap();
                prune_worktrees(&lock, &repo).unwrap();
            }
        }));
    }
    for h in handles {
        h.join().unwrap();
    }
    let listed = list_worktrees(&f.repo).unwrap();
    let mut paths: Vec<_> = listed
        .iter()
        .filter(|w| !w.is_main)
        .map(|w| w.path.clone())
        .collect();
    paths.sort();
    let expected: Vec<_> = (0..4).map(|i| f.wt(&format!("new/{i}"))).collect();
    assert_eq!(paths, expected);
    for w in listed.iter().filter(|w| !w.is_main) {
        assert!(!w.prunable && w.is_ours());
        assert_eq!(w.head, Some(base));
    }
    assert_eq!(
        git(&f.repo, &["worktree", "list", "--porcelain"])
            .matches("worktree ")
            .count(),
        5
    );
}

#[test]
fn owner_hands_out_one_lock_per_repository_and_wrong_lock_is_refused() {
    let a = Fixture::new();
    let b = Fixture::new();
    let owner = GitOwner::new();
    let la = owner.lock_for(&a.repo).unwrap();
    let la2 = owner.lock_for(&a.repo.join("src")).unwrap();
    assert!(Arc::ptr_eq(&la, &la2));
    let lb = owner.lock_for(&b.repo).unwrap();
    assert!(!Arc::ptr_eq(&la, &lb));
    let err = create_worktree(&lb, &a.repo, &a.wt("w"), "ahelper/r/w", a.head()).unwrap_err();
    assert!(matches!(err, GitError::WrongLock { .. }), "{err:?}");
    assert!(!a.wt("w").exists());
}

#[test]
fn worktree_creation_runs_post_checkout_hook() {
    // A reason to use the git CLI for `worktree add`: the repository's hooks run.
    let f = Fixture::new();
    let hook = f.repo.join(".git/hooks/post-checkout");
    fs::write(&hook, "#!/bin/sh\necho ran > hook-ran.txt\n").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&hook, fs::Permissions::from_mode(0o755)).unwrap();
        ensure_excluded(&f.repo, "hook-ran.txt").unwrap();
        create_worktree(&f.lock(), &f.repo, &f.wt("w"), "ahelper/r/w", f.head()).unwrap();
        assert_eq!(read(&f.wt("w"), "hook-ran.txt"), "ran\n");
    }
}

#[test]
fn s04_head_not_at_base_after_creation_is_detected_and_undone() {
    // A post-checkout hook that moves the new branch simulates anything that leaves the new worktree
    // somewhere other than the requested base.
    let f = Fixture::new();
    write(&f.repo, "src/a.rs", "fn a() { 2 }\n");
    git(&f.repo, &["commit", "-qam", "second"]);
    let hook = f.repo.join(".git/hooks/post-checkout");
    fs::write(&hook, "#!/bin/sh\ngit reset -q --hard HEAD~1\n").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&hook, fs::Permissions::from_mode(0o755)).unwrap();
        let err =
            create_worktree(&f.lock(), &f.repo, &f.wt("w"), "ahelper/r/w", f.head()).unwrap_err();
        assert!(matches!(err, GitError::BaseMismatch { .. }), "{err:?}");
        assert!(!f.wt("w").exists(), "the bad worktree is removed");
        assert!(
            git(&f.repo, &["branch", "--list", "ahelper/*"]).is_empty(),
            "its branch too"
        );
        assert_eq!(list_worktrees(&f.repo).unwrap().len(), 1);
    }
}

#[test]
fn checkouts_of_new_worktrees_run_in_parallel_outside_the_repo_lock() {
    // w1's post-checkout hook waits until w2 has been created; that can only happen if w1's
    // checkout (and hook) does not hold the repository lock.
    let f = Fixture::new();
    let signals = tempfile::tempdir().unwrap();
    let started = signals.path().join("started");
    let go = signals.path().join("go");
    let hook = f.repo.join(".git/hooks/post-checkout");
    fs::write(
        &hook,
        format!(
            "#!/bin/sh\nif [ \"$(basename \"$PWD\")\" = w1 ]; then\n  touch '{}'\n  i=0\n  while [ ! -f '{}' ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done\n  [ -f '{}' ] || exit 1\nfi\n",
            started.display(),
            go.display(),
            go.display()
        ),
    )
    .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&hook, fs::Permissions::from_mode(0o755)).unwrap();
        let l = f.lock();
        let (repo, w1, base) = (f.repo.clone(), f.wt("w1"), f.head());
        let first = {
            let l = l.clone();
            std::thread::spawn(move || create_worktree(&l, &repo, &w1, "ahelper/r/w1", base))
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !started.exists() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(started.exists(), "w1's checkout hook ran");
        let second = create_worktree(&l, &f.repo, &f.wt("w2"), "ahelper/r/w2", f.head());
        fs::write(&go, "").unwrap();
        second.expect("w2 is created while w1 is still checking out");
        first.join().unwrap().expect("w1 is created");
        assert_eq!(read(&f.wt("w1"), "src/a.rs"), "fn a() {}\n");
        assert_eq!(read(&f.wt("w2"), "src/a.rs"), "fn a() {}\n");
        assert_eq!(list_worktrees(&f.repo).unwrap().len(), 3);
    }
}
