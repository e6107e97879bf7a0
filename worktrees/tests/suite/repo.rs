//! RepoInfo::discover, dirty_paths, ensure_excluded, snapshot_uncommitted.

use std::fs;

use super::support::{Fixture, UserState, git, write};
use ahelper_worktrees::{
    GitError, Head, RepoInfo, dirty_paths, ensure_excluded, snapshot_uncommitted,
};

#[test]
fn discover_reports_root_branch_and_head_from_a_subdirectory() {
    let f = Fixture::new();
    let info = RepoInfo::discover(&f.repo.join("src")).unwrap();
    assert_eq!(info.workdir, f.repo);
    assert_eq!(info.common_dir, f.repo.join(".git"));
    assert_eq!(info.git_dir, f.repo.join(".git"));
    assert!(!info.is_linked_worktree);
    assert_eq!(
        info.head,
        Head::Branch {
            name: "main".into()
        }
    );
    assert_eq!(info.branch(), Some("main"));
    assert_eq!(info.head_commit, f.head());
}

#[test]
fn discover_detached_head() {
    let f = Fixture::new();
    git(&f.repo, &["checkout", "-q", "--detach"]);
    let info = RepoInfo::discover(&f.repo).unwrap();
    assert_eq!(info.head, Head::Detached);
    assert_eq!(info.branch(), None);
    assert_eq!(info.head_commit, f.head());
}

#[test]
fn discover_not_a_repository() {
    let tmp = tempfile::tempdir().unwrap();
    let err = RepoInfo::discover(tmp.path()).unwrap_err();
    assert!(matches!(err, GitError::NotARepository { .. }), "{err:?}");
    assert!(err.to_string().contains("git init"), "{err}");
    let err = RepoInfo::discover(&tmp.path().join("missing")).unwrap_err();
    assert!(matches!(err, GitError::PathNotFound { .. }), "{err:?}");
}

#[test]
fn discover_bare_repository() {
    let tmp = tempfile::tempdir().unwrap();
    git(tmp.path(), &["init", "-q", "--bare", "b.git"]);
    let err = RepoInfo::discover(&tmp.path().join("b.git")).unwrap_err();
    assert!(matches!(err, GitError::BareRepository { .. }), "{err:?}");
    assert!(err.to_string().contains("bare repository"), "{err}");
}

#[test]
fn discover_no_commits_yet() {
    let tmp = tempfile::tempdir().unwrap();
    git(tmp.path(), &["init", "-q", "-b", "trunk"]);
    let err = RepoInfo::discover(tmp.path()).unwrap_err();
    match &err {
        GitError::NoCommits { branch, .. } => assert_eq!(branch, "trunk"),
        other => panic!("{other:?}"),
    }
    assert!(err.to_string().contains("no commits yet"), "{err}");
    assert!(err.to_string().contains("git commit"), "{err}");
}

#[test]
fn discover_from_linked_worktree_and_s38_main_worktree_deleted() {
    let f = Fixture::new();
    let linked = f.git_worktree("linked", "side");
    let info = RepoInfo::discover(&linked).unwrap();
    assert!(info.is_linked_worktree);
    assert_eq!(info.workdir, linked);
    assert_eq!(info.common_dir, f.repo.join(".git"));
    assert_eq!(info.branch(), Some("side"));

    // S38: the main worktree (and with it .git) is deleted while the linked one remains.
    fs::remove_dir_all(&f.repo).unwrap();
    let err = RepoInfo::discover(&linked.join(".")).unwrap_err();
    assert!(
        matches!(err, GitError::MainWorktreeMissing { .. }),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(msg.contains("main repository is gone"), "{msg}");
    assert!(msg.contains("worktrees"), "{msg}");
}

#[test]
fn dirty_paths_lists_changes_but_not_ignored_or_ahelper() {
    let f = Fixture::new();
    assert!(dirty_paths(&f.repo).unwrap().is_empty());
    f.make_dirty();
    write(&f.repo, ".ahelper/runs/r1/run.json", "{}");
    write(&f.repo, "newdir/x.txt", "x");
    let dirty = dirty_paths(&f.repo).unwrap();
    assert_eq!(
        dirty,
        vec!["README.md", "newdir/", "notes.txt", "src/b.rs", "src/c.rs"],
        "ignored build.log and .ahelper/ must not be listed"
    );
}

#[test]
fn ensure_excluded_appends_once_to_info_exclude_never_gitignore() {
    let f = Fixture::new();
    let gitignore_before = fs::read(f.repo.join(".gitignore")).unwrap();
    fs::write(
        f.repo.join(".git/info/exclude"),
        "# comment without newline",
    )
    .unwrap();
    assert!(ensure_excluded(&f.repo, ".ahelper/").unwrap());
    assert!(!ensure_excluded(&f.repo, ".ahelper/").unwrap());
    // also from a linked worktree: same common dir, still once
    let linked = f.git_worktree("l", "l");
    assert!(!ensure_excluded(&linked, ".ahelper/").unwrap());
    let exclude = fs::read_to_string(f.repo.join(".git/info/exclude")).unwrap();
    assert_eq!(exclude, "# comment without newline\n.ahelper/\n");
    assert_eq!(
        fs::read(f.repo.join(".gitignore")).unwrap(),
        gitignore_before
    );
    write(&f.repo, ".ahelper/x", "1");
    assert_eq!(git(&f.repo, &["status", "--porcelain"]), "");
}

#[test]
fn ensure_excluded_creates_missing_info_dir() {
    let f = Fixture::new();
    fs::remove_dir_all(f.repo.join(".git/info")).unwrap();
    assert!(ensure_excluded(&f.repo, ".ahelper/").unwrap());
    assert_eq!(
        fs::read_to_string(f.repo.join(".git/info/exclude")).unwrap(),
        ".ahelper/\n"
    );
}

#[test]
fn s28_snapshot_captures_working_tree_without_touching_user_state() {
    let f = Fixture::new();
    f.make_dirty();
    write(&f.repo, ".ahelper/runs/r/run.json", "{}");
    let before = UserState::capture(&f.repo);
    let base = f.head();

    let snap =
        snapshot_uncommitted(&f.repo, base, "refs/ahelper/r1/base", "snapshot", None).unwrap();
    assert_ne!(snap, base);
    assert_eq!(
        UserState::capture(&f.repo),
        before,
        "user's checkout changed"
    );
    assert_eq!(
        git(&f.repo, &["rev-parse", "refs/ahelper/r1/base"]),
        snap.to_string()
    );
    assert_eq!(
        git(&f.repo, &["rev-parse", &format!("{snap}^")]),
        base.to_string()
    );

    let files = git(
        &f.repo,
        &["ls-tree", "-r", "--name-only", &snap.to_string()],
    );
    let files: Vec<&str> = files.lines().collect();
    assert_eq!(
        files,
        vec![
            ".gitignore",
            "README.md",
            "notes.txt",
            "src/a.rs",
            "src/b.rs"
        ]
    );
    assert_eq!(
        git(&f.repo, &["show", &format!("{snap}:README.md")]),
        "# demo\n\nintro\nuser's unsaved line"
    );
    assert_eq!(
        git(&f.repo, &["show", &format!("{snap}:src/b.rs")]),
        "fn b() { /* staged */ }"
    );
    // the user's staged change is still staged, the unstaged ones still unstaged
    assert_eq!(
        git(&f.repo, &["diff", "--cached", "--name-only"]),
        "src/b.rs"
    );
}

#[test]
fn snapshot_of_clean_tree_is_the_base_and_creates_no_ref() {
    let f = Fixture::new();
    let base = f.head();
    let snap =
        snapshot_uncommitted(&f.repo, base, "refs/ahelper/r2/base", "snapshot", None).unwrap();
    assert_eq!(snap, base);
    assert!(git(&f.repo, &["for-each-ref", "refs/ahelper/"]).is_empty());
}

#[test]
fn snapshot_refuses_to_overwrite_an_existing_ref() {
    let f = Fixture::new();
    write(&f.repo, "notes.txt", "x");
    let base = f.head();
    git(
        &f.repo,
        &["update-ref", "refs/ahelper/r3/base", &base.to_string()],
    );
    let err = snapshot_uncommitted(&f.repo, base, "refs/ahelper/r3/base", "s", None).unwrap_err();
    assert!(err.to_string().contains("already exists"), "{err}");
    assert_eq!(
        git(&f.repo, &["rev-parse", "refs/ahelper/r3/base"]),
        base.to_string()
    );
}
