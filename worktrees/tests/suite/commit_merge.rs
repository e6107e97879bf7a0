//! commit_all, diff_stats, branches, merge_into, apply_to_current.

use std::fs;
use std::path::{Path, PathBuf};

use super::support::{Fixture, UserState, git, read, write};
use ahelper_worktrees::{
    ApplyOutcome, GitError, GitOwner, HazardKind, HazardLimits, Identity, MergeOutcome, Oid,
    RepoLock, apply_to_current, branch_tip, commit_all, commit_and_measure, create_branch,
    create_worktree, delete_branch, diff_stats, merge_into, resolve_commit, scan_hazards,
    unmerged_commits,
};

/// Creates worker worktree `w` of run `r` at HEAD, writes `files`, commits; returns (path, commit).
fn worker(f: &Fixture, lock: &RepoLock, w: &str, files: &[(&str, &str)]) -> (PathBuf, Oid) {
    let path = f.wt(&format!("r/{w}"));
    create_worktree(lock, &f.repo, &path, &format!("ahelper/r/{w}"), f.head()).unwrap();
    for (rel, content) in files {
        write(&path, rel, content);
    }
    let id = commit_all(&path, &format!("{w}: work"), None)
        .unwrap()
        .unwrap();
    (path, id)
}

#[test]
fn commit_all_stages_everything_respecting_gitignore() {
    let f = Fixture::new();
    let lock = f.lock();
    let path = f.worker(&lock, "r/w1");
    assert_eq!(
        commit_all(&path, "nothing", None).unwrap(),
        None,
        "nothing changed"
    );

    write(&path, "src/a.rs", "fn a() { 1 }\n");
    fs::remove_file(path.join("src/b.rs")).unwrap();
    write(&path, "src/new.rs", "fn new() {}\n");
    write(&path, "debug.log", "ignored by .gitignore\n");
    write(&path, "target/out", "ignored dir\n");
    let id = commit_all(&path, "w1: edit a, delete b, add new", None)
        .unwrap()
        .unwrap();

    assert_eq!(git(&path, &["rev-parse", "HEAD"]), id.to_string());
    assert_eq!(
        f.rev("ahelper/r/w1"),
        id,
        "committed on the worktree's branch"
    );
    assert_eq!(f.rev("main"), f.head());
    assert_eq!(
        git(&path, &["status", "--porcelain"]),
        "",
        "worktree index refreshed"
    );
    let changed = git(&path, &["show", "--name-status", "--format=", "HEAD"]);
    assert_eq!(changed, "M\tsrc/a.rs\nD\tsrc/b.rs\nA\tsrc/new.rs");
    assert_eq!(
        git(&path, &["log", "-1", "--format=%s|%an <%ae>"]),
        "w1: edit a, delete b, add new|Test User <test@example.com>"
    );
    assert_eq!(commit_all(&path, "again", None).unwrap(), None);

    let stats = diff_stats(&f.repo, f.head(), id).unwrap();
    assert_eq!(
        stats.files_changed,
        vec!["src/a.rs", "src/b.rs", "src/new.rs"]
    );
    assert_eq!((stats.insertions, stats.deletions), (2, 2));
}

/// A worker's end in one pass: the commit, the branch tip, and the same diff stats and hazards
/// as [`diff_stats`] and [`scan_hazards`] from the start commit.
#[test]
fn commit_and_measure_matches_commit_all_diff_stats_and_scan_hazards() {
    let f = Fixture::new();
    let lock = f.lock();
    let path = f.worker(&lock, "r/w1");
    let limits = HazardLimits::default();
    let untouched = commit_and_measure(&path, f.head(), "nothing", &limits).unwrap();
    assert_eq!(untouched.tip, f.head());
    assert!(!untouched.committed);
    assert_eq!(untouched.stats, Default::default());
    assert!(untouched.hazards.is_empty());

    write(&path, "src/a.rs", "fn a() { 1 }\n");
    fs::remove_file(path.join("src/b.rs")).unwrap();
    write(&path, "sub/.envrc", "export X=1\n");
    write(&path, "debug.log", "ignored by .gitignore\n");
    let measured = commit_and_measure(&path, f.head(), "w1: work", &limits).unwrap();
    assert!(measured.committed);
    assert_eq!(measured.tip, f.rev("ahelper/r/w1"), "the branch tip");
    assert_eq!(
        git(&path, &["status", "--porcelain"]),
        "",
        "index refreshed"
    );
    let stats = diff_stats(&f.repo, f.head(), measured.tip).unwrap();
    assert_eq!(measured.stats, stats);
    assert_eq!(
        stats.files_changed,
        vec!["src/a.rs", "src/b.rs", "sub/.envrc"]
    );
    let hazards = scan_hazards(&f.repo, f.head(), measured.tip, &limits).unwrap();
    assert_eq!(measured.hazards, hazards);
    assert_eq!(hazards.len(), 1);
    assert_eq!(hazards[0].path, "sub/.envrc");
    assert_eq!(hazards[0].kind, HazardKind::AutoRun);

    // Nothing new: no commit, but the branch is still measured against the start.
    let again = commit_and_measure(&path, f.head(), "again", &limits).unwrap();
    assert!(!again.committed);
    assert_eq!(
        (again.tip, again.stats, again.hazards),
        (measured.tip, stats, hazards)
    );
    assert!(matches!(
        commit_and_measure(&f.repo, f.head(), "no", &limits),
        Err(GitError::InvalidWorktreePath { .. })
    ));
}

#[test]
fn commit_all_uses_given_identity() {
    let f = Fixture::new();
    let path = f.worker_with("r/w1", &[("x.txt", "x\n")]);
    let who = Identity {
        name: "Worker One".into(),
        email: "w1@ahelper.invalid".into(),
    };
    commit_all(&path, "x", Some(&who)).unwrap().unwrap();
    assert_eq!(
        git(&path, &["log", "-1", "--format=%an <%ae>|%cn"]),
        "Worker One <w1@ahelper.invalid>|Worker One"
    );
}

/// Runs only in a child process whose HOME has no git identity (see the test below).
#[test]
fn fallback_identity_child() {
    if std::env::var_os("AHELPER_TEST_NO_IDENTITY").is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().canonicalize().unwrap().join("repo");
    fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    write(&repo, "a.txt", "a\n");
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-qm", "init"]);
    let lock = GitOwner::new().lock_for(&repo).unwrap();
    let base = resolve_commit(&repo, "HEAD").unwrap();
    let wt = tmp.path().canonicalize().unwrap().join("wt/w");
    create_worktree(&lock, &repo, &wt, "ahelper/r/w", base).unwrap();
    write(&wt, "b.txt", "b\n");
    commit_all(&wt, "b", None).unwrap().unwrap();
    assert_eq!(
        git(&wt, &["log", "-1", "--format=%an <%ae>"]),
        "ahelper <ahelper@localhost>"
    );
}

#[test]
fn commit_all_falls_back_to_ahelper_identity_when_git_has_none() {
    let home = tempfile::tempdir().unwrap();
    // The test's name as libtest knows it: the module path without the crate name.
    let (_, module) = module_path!().split_once("::").unwrap();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            &format!("{module}::fallback_identity_child"),
            "--exact",
            "--nocapture",
        ])
        .env("AHELPER_TEST_NO_IDENTITY", "1")
        .env("HOME", home.path())
        .env("XDG_CONFIG_HOME", home.path())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("GIT_AUTHOR_NAME")
        .env_remove("GIT_AUTHOR_EMAIL")
        .env_remove("GIT_COMMITTER_NAME")
        .env_remove("GIT_COMMITTER_EMAIL")
        .env_remove("EMAIL")
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("1 passed"), "{stdout}");
}

#[test]
fn commit_all_refuses_the_users_checkout_and_foreign_worktrees() {
    let f = Fixture::new();
    f.make_dirty();
    let before = UserState::capture(&f.repo);
    let err = commit_all(&f.repo, "no", None).unwrap_err();
    assert!(
        matches!(err, GitError::InvalidWorktreePath { .. }),
        "{err:?}"
    );
    let foreign = f.git_worktree("foreign", "foreign");
    write(&foreign, "x", "x");
    let err = commit_all(&foreign, "no", None).unwrap_err();
    assert!(
        matches!(err, GitError::InvalidWorktreePath { .. }),
        "{err:?}"
    );
    assert_eq!(UserState::capture(&f.repo), before);
}

#[test]
fn commit_all_reports_a_held_index_lock() {
    let f = Fixture::new();
    let lock = f.lock();
    let path = f.worker(&lock, "r/w1");
    let gitdir = PathBuf::from(git(&path, &["rev-parse", "--absolute-git-dir"]));
    fs::write(gitdir.join("index.lock"), "").unwrap();
    write(&path, "x", "x");
    let err = commit_all(&path, "x", None).unwrap_err();
    assert!(matches!(err, GitError::IndexLocked { .. }), "{err:?}");
}

#[test]
fn branches_create_idempotent_never_moved_unmerged_and_delete_safety() {
    let f = Fixture::new();
    let lock = f.lock();
    let base = f.head();
    create_branch(&f.repo, "ahelper/r/integration", base).unwrap();
    create_branch(&f.repo, "ahelper/r/integration", base).unwrap();
    assert_eq!(branch_tip(&f.repo, "ahelper/r/integration").unwrap(), base);
    let (wt, c1) = worker(&f, &lock, "w1", &[("src/a.rs", "fn a() { 1 }\n")]);
    let err = create_branch(&f.repo, "ahelper/r/w1", base).unwrap_err();
    assert!(matches!(err, GitError::BranchExists { .. }), "{err:?}");
    assert_eq!(f.rev("ahelper/r/w1"), c1);

    let unmerged = unmerged_commits(&f.repo, "ahelper/r/w1", "ahelper/r/integration").unwrap();
    assert_eq!(unmerged.len(), 1);
    assert_eq!(unmerged[0].id, c1);
    assert_eq!(unmerged[0].summary, "w1: work");

    // checked out in its worktree → refused even with force
    let err = delete_branch(
        &lock,
        &f.repo,
        "ahelper/r/w1",
        "ahelper/r/integration",
        true,
    )
    .unwrap_err();
    assert!(
        matches!(err, GitError::BranchCheckedOut { ours: true, .. }),
        "{err:?}"
    );
    ahelper_worktrees::remove_worktree(&lock, &f.repo, &f.wt_base, &wt, false).unwrap();
    // unmerged commits → refused, listed
    let err = delete_branch(
        &lock,
        &f.repo,
        "ahelper/r/w1",
        "ahelper/r/integration",
        false,
    )
    .unwrap_err();
    match &err {
        GitError::BranchNotMerged { commits, .. } => assert_eq!(commits[0].id, c1),
        other => panic!("{other:?}"),
    }
    assert!(
        err.to_string().contains("w1: work") && err.to_string().contains("--force"),
        "{err}"
    );
    assert_eq!(f.rev("ahelper/r/w1"), c1);
    // merged → deleted
    assert!(matches!(
        merge_worker(&f.repo, "w1"),
        MergeOutcome::FastForward { .. }
    ));
    let deleted = delete_branch(
        &lock,
        &f.repo,
        "ahelper/r/w1",
        "ahelper/r/integration",
        false,
    )
    .unwrap();
    assert_eq!(deleted.tip, c1);
    assert!(deleted.unmerged.is_empty());
    assert!(git(&f.repo, &["branch", "--list", "ahelper/r/w1"]).is_empty());
    // force deletes an unmerged branch and reports what it had
    git(&f.repo, &["branch", "scratch", &c1.to_string()]);
    git(
        &f.repo,
        &["branch", "-f", "ahelper/r/integration", &base.to_string()],
    );
    let deleted = delete_branch(&lock, &f.repo, "scratch", "ahelper/r/integration", true).unwrap();
    assert_eq!(deleted.unmerged.len(), 1);
}

#[test]
fn merge_three_disjoint_workers_into_integration_branch() {
    let f = Fixture::new();
    f.make_dirty();
    let before = UserState::capture(&f.repo);
    let lock = f.lock();
    let base = f.head();
    create_branch(&f.repo, "ahelper/r/integration", base).unwrap();
    let (_, c1) = worker(&f, &lock, "w1", &[("src/a.rs", "fn a() { 1 }\n")]);
    let (_, c2) = worker(&f, &lock, "w2", &[("src/b.rs", "fn b() { 2 }\n")]);
    let (_, _c3) = worker(&f, &lock, "w3", &[("docs/new.md", "three\n")]);

    let o1 = merge_worker(&f.repo, "w1");
    assert_eq!(o1, MergeOutcome::FastForward { commit: c1 });
    let o2 = merge_worker(&f.repo, "w2");
    let MergeOutcome::Merged { commit: m2 } = o2 else {
        panic!("{o2:?}")
    };
    let o3 = merge_worker(&f.repo, "w3");
    let MergeOutcome::Merged { commit: m3 } = o3 else {
        panic!("{o3:?}")
    };
    assert_eq!(f.rev("ahelper/r/integration"), m3);
    assert_eq!(
        git(
            &f.repo,
            &["rev-parse", &format!("{m2}^1"), &format!("{m2}^2")]
        ),
        format!("{c1}\n{c2}")
    );
    assert_eq!(
        git(&f.repo, &["log", "-1", "--format=%s", &m3.to_string()]),
        "merge w3"
    );
    for (file, content) in [
        ("src/a.rs", "fn a() { 1 }"),
        ("src/b.rs", "fn b() { 2 }"),
        ("docs/new.md", "three"),
    ] {
        assert_eq!(
            git(&f.repo, &["show", &format!("ahelper/r/integration:{file}")]),
            content
        );
    }
    // merging again is a no-op
    assert_eq!(
        merge_into(
            &f.repo,
            "ahelper/r/integration",
            "ahelper/r/w1",
            "again",
            None
        )
        .unwrap(),
        MergeOutcome::UpToDate { commit: m3 }
    );
    let stats = diff_stats(&f.repo, base, m3).unwrap();
    assert_eq!(
        stats.files_changed,
        vec!["docs/new.md", "src/a.rs", "src/b.rs"]
    );
    assert_eq!((stats.insertions, stats.deletions), (3, 2));
    assert_eq!(
        UserState::capture(&f.repo),
        before,
        "user's checkout untouched"
    );
}

#[test]
fn s14_s16_conflict_is_reported_and_leaves_every_ref_untouched() {
    let f = Fixture::new();
    let lock = f.lock();
    // S16: the user has feature/y checked out; the merge targets the explicit integration branch
    git(&f.repo, &["switch", "-q", "-c", "feature/y"]);
    let before = UserState::capture(&f.repo);
    let base = f.head();
    create_branch(&f.repo, "ahelper/r/integration", base).unwrap();
    let (_, c1) = worker(
        &f,
        &lock,
        "w1",
        &[("README.md", "# demo\n\n## Worker one section\n")],
    );
    let (_, c2) = worker(
        &f,
        &lock,
        "w2",
        &[("README.md", "# demo\n\n## Worker two section\n")],
    );
    merge_worker(&f.repo, "w1");
    let refs_before = git(
        &f.repo,
        &["for-each-ref", "--format=%(refname) %(objectname)"],
    );

    let outcome = merge_worker(&f.repo, "w2");
    let MergeOutcome::Conflict { files } = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(files.len(), 1);
    assert_eq!(files[0].path, "README.md");
    let ours = files[0].ours.unwrap();
    let theirs = files[0].theirs.unwrap();
    assert!(git(&f.repo, &["cat-file", "-p", &ours.to_string()]).contains("Worker one"));
    assert!(git(&f.repo, &["cat-file", "-p", &theirs.to_string()]).contains("Worker two"));
    assert!(files[0].ancestor.is_some());

    assert_eq!(
        git(
            &f.repo,
            &["for-each-ref", "--format=%(refname) %(objectname)"]
        ),
        refs_before
    );
    assert_eq!(f.rev("ahelper/r/integration"), c1);
    assert_eq!(
        f.rev("ahelper/r/w2"),
        c2,
        "the conflicting worker branch is intact"
    );
    assert_eq!(UserState::capture(&f.repo), before);
    assert!(!f.repo.join(".git/MERGE_HEAD").exists());
    // a serialised outcome carries both sides
    let json = serde_json::to_string(&MergeOutcome::Conflict { files }).unwrap();
    assert!(
        json.contains("\"outcome\":\"conflict\"") && json.contains(&theirs.to_string()),
        "{json}"
    );
}

#[test]
fn s16_merge_into_a_checked_out_branch_is_refused() {
    let f = Fixture::new();
    let lock = f.lock();
    let before = UserState::capture(&f.repo);
    let (_, _) = worker(&f, &lock, "w1", &[("src/a.rs", "x\n")]);
    let err = merge_into(&f.repo, "main", "ahelper/r/w1", "m", None).unwrap_err();
    match &err {
        GitError::MergeTargetCheckedOut { path, .. } => assert_eq!(path, &f.repo),
        other => panic!("{other:?}"),
    }
    assert_eq!(UserState::capture(&f.repo), before);
    let err = merge_into(&f.repo, "missing", "ahelper/r/w1", "m", None).unwrap_err();
    assert!(matches!(err, GitError::BranchNotFound { .. }), "{err:?}");
}

/// Merges `ahelper/r/<worker>` into `ahelper/r/integration` with the message `merge <worker>`.
fn merge_worker(repo: &Path, worker: &str) -> MergeOutcome {
    let branch = format!("ahelper/r/{worker}");
    let message = format!("merge {worker}");
    merge_into(repo, "ahelper/r/integration", &branch, &message, None).unwrap()
}

/// A fixture with an integration branch `ahelper/r/integration` on top of the user's HEAD that
/// has worker `w1`'s `files` (path, content); returns it and the branch tip.
fn integration(files: &[(&str, &str)]) -> (Fixture, Oid) {
    let f = Fixture::new();
    create_branch(&f.repo, "ahelper/r/integration", f.head()).unwrap();
    worker(&f, &f.lock(), "w1", files);
    merge_worker(&f.repo, "w1");
    let tip = f.rev("ahelper/r/integration");
    (f, tip)
}

fn user_files(repo: &Path) -> (String, String) {
    (read(repo, "README.md"), read(repo, "notes.txt"))
}

#[test]
fn apply_fast_forwards_and_keeps_non_overlapping_dirty_files() {
    let (f, integ) = integration(&[("src/a.rs", "fn a() { applied }\n")]);
    write(&f.repo, "README.md", "user edit\n");
    write(&f.repo, "notes.txt", "untracked\n");
    let outcome = apply_to_current(&f.repo, "ahelper/r/integration", "apply", None).unwrap();
    assert_eq!(outcome, ApplyOutcome::FastForward { commit: integ });
    assert_eq!(f.rev("main"), integ);
    assert_eq!(read(&f.repo, "src/a.rs"), "fn a() { applied }\n");
    assert_eq!(
        user_files(&f.repo),
        ("user edit\n".into(), "untracked\n".into())
    );
    assert_eq!(
        apply_to_current(&f.repo, "ahelper/r/integration", "apply", None).unwrap(),
        ApplyOutcome::UpToDate { commit: integ }
    );
}

#[test]
fn apply_creates_a_merge_when_the_user_moved_on() {
    let (f, integ) = integration(&[("src/a.rs", "fn a() { applied }\n")]);
    write(&f.repo, "src/c.rs", "fn c() { user }\n");
    git(&f.repo, &["commit", "-qam", "user work"]);
    let user_tip = f.head();
    let outcome = apply_to_current(
        &f.repo,
        "ahelper/r/integration",
        "Apply ahelper run r",
        None,
    )
    .unwrap();
    let ApplyOutcome::Merged { commit } = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(f.head(), commit);
    assert_eq!(
        git(&f.repo, &["rev-parse", "HEAD^1", "HEAD^2"]),
        format!("{user_tip}\n{integ}")
    );
    assert_eq!(
        git(&f.repo, &["log", "-1", "--format=%s"]),
        "Apply ahelper run r"
    );
    assert_eq!(read(&f.repo, "src/a.rs"), "fn a() { applied }\n");
    assert_eq!(read(&f.repo, "src/c.rs"), "fn c() { user }\n");
    assert_eq!(git(&f.repo, &["status", "--porcelain"]), "");
}

#[test]
fn apply_refuses_overlapping_dirty_files_conflicts_and_detached_head() {
    let (f, _) = integration(&[
        ("src/a.rs", "fn a() { applied }\n"),
        ("notes.txt", "from worker\n"),
    ]);
    write(&f.repo, "src/a.rs", "fn a() { user's unsaved }\n");
    write(&f.repo, "notes.txt", "user's untracked notes\n");
    let before = UserState::capture(&f.repo);
    let err = apply_to_current(&f.repo, "ahelper/r/integration", "apply", None).unwrap_err();
    match &err {
        GitError::DirtyOverlap { paths, .. } => assert_eq!(paths, &vec!["notes.txt", "src/a.rs"]),
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("git stash"), "{err}");
    assert_eq!(UserState::capture(&f.repo), before);

    // a committed conflicting change → ApplyConflict, nothing changed
    fs::remove_file(f.repo.join("notes.txt")).unwrap();
    git(&f.repo, &["commit", "-qam", "user changes a.rs"]);
    let before = UserState::capture(&f.repo);
    let err = apply_to_current(&f.repo, "ahelper/r/integration", "apply", None).unwrap_err();
    match &err {
        GitError::ApplyConflict { files, .. } => assert_eq!(files, &vec!["src/a.rs"]),
        other => panic!("{other:?}"),
    }
    assert_eq!(UserState::capture(&f.repo), before);
    assert!(!f.repo.join(".git/MERGE_HEAD").exists());

    git(&f.repo, &["checkout", "-q", "--detach"]);
    let err = apply_to_current(&f.repo, "ahelper/r/integration", "apply", None).unwrap_err();
    assert!(matches!(err, GitError::DetachedHead { .. }), "{err:?}");
}

#[test]
fn s28_users_dirty_checkout_is_byte_identical_after_a_whole_run() {
    let f = Fixture::new();
    f.make_dirty();
    let before = UserState::capture(&f.repo);
    let owner = GitOwner::new();
    let lock = owner.lock_for(&f.repo).unwrap();
    let info = ahelper_worktrees::RepoInfo::discover(&f.repo).unwrap();
    ahelper_worktrees::ensure_excluded(&f.repo, ".ahelper/").unwrap();
    write(&f.repo, ".ahelper/runs/r/run.json", "{}");
    let dirty = ahelper_worktrees::dirty_paths(&f.repo).unwrap();
    assert_eq!(
        dirty,
        vec!["README.md", "notes.txt", "src/b.rs", "src/c.rs"]
    );
    let base = ahelper_worktrees::snapshot_uncommitted(
        &f.repo,
        info.head_commit,
        "refs/ahelper/r/base",
        "ahelper: uncommitted changes",
        None,
    )
    .unwrap();
    create_branch(&f.repo, "ahelper/r/integration", base).unwrap();
    let mut paths = Vec::new();
    for (i, file) in ["src/a.rs", "docs/x.md"].iter().enumerate() {
        let path = f.wt(&format!("r/w{i}"));
        create_worktree(&lock, &f.repo, &path, &format!("ahelper/r/w{i}"), base).unwrap();
        assert_eq!(
            read(&path, "notes.txt"),
            "user's untracked notes\n",
            "snapshot included"
        );
        write(&path, file, "worker\n");
        commit_all(&path, "work", None).unwrap().unwrap();
        merge_into(
            &f.repo,
            "ahelper/r/integration",
            &format!("ahelper/r/w{i}"),
            "merge",
            None,
        )
        .unwrap();
        paths.push(path);
    }
    for (i, p) in paths.iter().enumerate() {
        ahelper_worktrees::remove_worktree(&lock, &f.repo, &f.wt_base, p, false).unwrap();
        delete_branch(
            &lock,
            &f.repo,
            &format!("ahelper/r/w{i}"),
            "ahelper/r/integration",
            false,
        )
        .unwrap();
    }
    ahelper_worktrees::prune_worktrees(&lock, &f.repo).unwrap();
    assert_eq!(UserState::capture(&f.repo), before);
}

#[test]
fn nesting_branch_names_are_refused_with_a_clear_error() {
    let f = Fixture::new();
    let lock = f.lock();
    assert_eq!(
        ahelper_worktrees::integration_branch("r1"),
        "ahelper/r1/integration"
    );
    assert_eq!(
        ahelper_worktrees::worker_branch("r1", "w1"),
        "ahelper/r1/w1"
    );
    create_branch(&f.repo, "ahelper/r1", f.head()).unwrap();
    let err = create_worktree(&lock, &f.repo, &f.wt("w"), "ahelper/r1/w1", f.head()).unwrap_err();
    assert!(
        matches!(err, GitError::BranchNameConflict { ref existing, .. } if existing == "ahelper/r1"),
        "{err:?}"
    );
    create_branch(&f.repo, "ahelper/r2/w1", f.head()).unwrap();
    let err = create_branch(&f.repo, "ahelper/r2", f.head()).unwrap_err();
    assert!(
        matches!(err, GitError::BranchNameConflict { ref existing, .. } if existing == "ahelper/r2/w1"),
        "{err:?}"
    );
    assert!(!f.wt("w").exists());
}
