//! `.worktreeinclude`: which ignored files a new worktree gets, the symlink and size guards.

use std::fs;
use std::os::unix::fs::PermissionsExt;

use super::support::{Fixture, git, read, write};
use ahelper_worktrees::{
    GitError, IncludeLimits, SkipReason, bring_included, bring_listed, list_included,
};

/// A fixture whose `.gitignore` ignores `target/`, `*.log`, `.env`, `node_modules/` and `gen/`.
fn fixture_with_ignores() -> Fixture {
    let f = Fixture::new();
    write(
        &f.repo,
        ".gitignore",
        "target/\n*.log\n.env\nnode_modules/\ngen/\n",
    );
    git(&f.repo, &["commit", "-qam", "ignores"]);
    f
}

#[test]
fn include_patterns_bring_matched_ignored_files_only() {
    let f = fixture_with_ignores();
    write(
        &f.repo,
        ".worktreeinclude",
        "# secrets and builds\n.env\ntarget/\n!target/debug/incremental/\n*.gen.rs\n",
    );
    write(&f.repo, ".env", "KEY=1\n");
    write(&f.repo, "target/debug/app", "binary");
    fs::set_permissions(
        f.repo.join("target/debug/app"),
        fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    write(&f.repo, "target/debug/incremental/x.bin", "cache");
    write(&f.repo, "gen/deep/a.gen.rs", "// generated\n");
    write(&f.repo, "gen/deep/other.txt", "not matched");
    write(&f.repo, "build.log", "not matched");
    write(
        &f.repo,
        "notes.gen.rs",
        "untracked, not ignored: never brought",
    );
    let wt = f.worker(&f.lock(), "w1");
    let report = bring_included(&f.repo, &wt, IncludeLimits::default()).unwrap();
    assert!(report.has_include_file);
    assert_eq!(read(&wt, ".env"), "KEY=1\n");
    assert_eq!(read(&wt, "target/debug/app"), "binary");
    let mode = fs::metadata(wt.join("target/debug/app"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o755, "permissions are kept");
    assert_eq!(read(&wt, "gen/deep/a.gen.rs"), "// generated\n");
    for absent in [
        "target/debug/incremental/x.bin",
        "gen/deep/other.txt",
        "build.log",
        "notes.gen.rs",
    ] {
        assert!(!wt.join(absent).exists(), "{absent} must not be brought");
    }
    assert_eq!(report.files, 3, "{report:?}");
    assert!(report.skipped.is_empty(), "{report:?}");
    assert_eq!(
        git(&wt, &["status", "--porcelain"]),
        "",
        "brought files stay ignored"
    );
}

#[test]
fn include_keeps_modification_times_and_never_overwrites() {
    let f = fixture_with_ignores();
    write(&f.repo, ".worktreeinclude", "target/\n");
    write(&f.repo, "target/out", "old build");
    let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
    fs::File::options()
        .write(true)
        .open(f.repo.join("target/out"))
        .unwrap()
        .set_modified(old)
        .unwrap();
    let wt = f.worker(&f.lock(), "w1");
    write(&wt, "target/out", "the worktree's own");
    write(&f.repo, "target/other", "x");
    bring_included(&f.repo, &wt, IncludeLimits::default()).unwrap();
    assert_eq!(read(&wt, "target/out"), "the worktree's own");
    fs::remove_file(wt.join("target/out")).unwrap();
    bring_included(&f.repo, &wt, IncludeLimits::default()).unwrap();
    assert_eq!(
        fs::metadata(wt.join("target/out"))
            .unwrap()
            .modified()
            .unwrap(),
        old
    );
}

#[test]
fn include_symlink_never_escapes_the_repository() {
    let f = fixture_with_ignores();
    write(&f.repo, ".worktreeinclude", "node_modules/\n.env\n");
    let outside = f.tmp.path().join("outside-secret");
    fs::write(&outside, "secret").unwrap();
    fs::create_dir_all(f.repo.join("node_modules/pkg")).unwrap();
    write(&f.repo, "node_modules/pkg/index.js", "ok");
    std::os::unix::fs::symlink(&outside, f.repo.join("node_modules/abs")).unwrap();
    std::os::unix::fs::symlink("../../outside-secret", f.repo.join("node_modules/rel")).unwrap();
    std::os::unix::fs::symlink("../.git/config", f.repo.join("node_modules/git")).unwrap();
    std::os::unix::fs::symlink("pkg/index.js", f.repo.join("node_modules/inside")).unwrap();
    std::os::unix::fs::symlink(&outside, f.repo.join(".env")).unwrap();
    let wt = f.worker(&f.lock(), "w1");
    let report = bring_included(&f.repo, &wt, IncludeLimits::default()).unwrap();
    let refused: Vec<&str> = report
        .skipped
        .iter()
        .filter(|s| matches!(s.reason, SkipReason::SymlinkEscapes { .. }))
        .map(|s| s.path.as_str())
        .collect();
    assert_eq!(
        refused,
        [
            ".env",
            "node_modules/abs",
            "node_modules/git",
            "node_modules/rel"
        ]
    );
    for link in [
        ".env",
        "node_modules/abs",
        "node_modules/rel",
        "node_modules/git",
    ] {
        assert!(
            fs::symlink_metadata(wt.join(link)).is_err(),
            "{link} must not exist"
        );
    }
    assert_eq!(read(&wt, "node_modules/inside"), "ok");
    assert_eq!(
        fs::read_link(wt.join("node_modules/inside")).unwrap(),
        std::path::Path::new("pkg/index.js")
    );
    assert!(
        report
            .describe()
            .contains("skipped node_modules/abs: symlink to"),
        "{}",
        report.describe()
    );
}

#[test]
fn include_never_writes_through_a_symlinked_directory_of_the_worktree() {
    let f = fixture_with_ignores();
    write(&f.repo, ".worktreeinclude", "gen/\n");
    write(&f.repo, "gen/a.rs", "x");
    let wt = f.worker(&f.lock(), "w1");
    let elsewhere = f.tmp.path().join("elsewhere");
    fs::create_dir_all(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, wt.join("gen")).unwrap();
    let report = bring_included(&f.repo, &wt, IncludeLimits::default()).unwrap();
    assert_eq!(report.skipped.len(), 1, "{report:?}");
    assert_eq!(report.skipped[0].reason, SkipReason::SymlinkedParent);
    assert!(!elsewhere.join("a.rs").exists());
}

#[test]
fn include_size_guard_skips_whole_entries_and_names_them() {
    let f = fixture_with_ignores();
    write(&f.repo, ".worktreeinclude", ".env\ntarget/\n");
    write(&f.repo, ".env", "K=1\n");
    write(&f.repo, "target/a", &"a".repeat(600));
    write(&f.repo, "target/b", &"b".repeat(600));
    let wt = f.worker(&f.lock(), "w1");
    let report = bring_included(&f.repo, &wt, IncludeLimits { max_bytes: 1_000 }).unwrap();
    assert_eq!(read(&wt, ".env"), "K=1\n");
    assert!(
        !wt.join("target").exists(),
        "a partial target/ is never brought"
    );
    assert_eq!(report.skipped.len(), 1, "{report:?}");
    assert_eq!(report.skipped[0].path, "target/");
    assert_eq!(
        report.skipped[0].reason,
        SkipReason::TooLarge {
            bytes: 1_200,
            remaining: 996
        }
    );
    let line = report.describe();
    let says = "skipped target/: 1200 bytes, over the size guard";
    assert!(line.contains(says), "{line}");
}

#[test]
fn include_without_file_does_nothing_and_bad_pattern_is_an_error() {
    let f = fixture_with_ignores();
    write(&f.repo, ".env", "K=1\n");
    let wt = f.worker(&f.lock(), "w1");
    let report = bring_included(&f.repo, &wt, IncludeLimits::default()).unwrap();
    assert!(!report.has_include_file && report.files == 0);
    assert!(!wt.join(".env").exists());
    write(&f.repo, ".worktreeinclude", "src/[z-a]\n");
    let err = bring_included(&f.repo, &wt, IncludeLimits::default()).unwrap_err();
    assert!(matches!(err, GitError::IncludeFile { .. }), "{err}");
    assert!(
        err.to_string()
            .contains(".worktreeinclude is not a valid include file"),
        "{err}"
    );
}

#[test]
fn one_listing_serves_every_worktree_of_a_run() {
    let f = fixture_with_ignores();
    write(
        &f.repo,
        ".worktreeinclude",
        ".env
target/
",
    );
    write(&f.repo, ".env", "KEY=1\n");
    write(&f.repo, "target/debug/app", "binary");
    let list = list_included(&f.repo).unwrap();
    let (w1, w2) = (f.worker(&f.lock(), "w1"), f.worker(&f.lock(), "w2"));
    let first = bring_listed(&list, &w1, IncludeLimits::default()).unwrap();
    // A file's content is read when it is brought: an edit after the listing is seen.
    write(&f.repo, ".env", "KEY=2\n");
    let second = bring_listed(&list, &w2, IncludeLimits::default()).unwrap();
    assert_eq!((first.files, second.files), (2, 2));
    assert_eq!(read(&w1, ".env"), "KEY=1\n");
    assert_eq!(read(&w2, ".env"), "KEY=2\n");
    assert_eq!(read(&w2, "target/debug/app"), "binary");
}
