//! Warm cargo seed: a Rust checkout's dependency artifacts copied into new worktrees' own
//! `target/debug` (fake artifact files; no real cargo build).

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use super::support::{Fixture, git, read, write};
use ahelper_worktrees::{
    CargoSeedReport, IncludeLimits, NoSeedReason, SkipReason, list_cargo_seed, list_included,
    seed_cargo_target,
};

/// A Rust repository (package `my-app` with a workspace member `tool`) ignoring `/target`, its
/// `target/debug` holding fake artifacts of the own crates and of the dependencies `serde` and
/// `serde_derive`.
fn rust_fixture() -> Fixture {
    let f = Fixture::new();
    write(
        &f.repo,
        "Cargo.toml",
        "[package]\nname = \"my-app\"\nversion = \"0.1.0\"\n\n[workspace]\nmembers = [\"tool\"]\n",
    );
    write(
        &f.repo,
        "tool/Cargo.toml",
        "[package]\nname = \"tool\"\nversion = \"0.1.0\"\n\n[lib]\nname = \"toolkit\"\n",
    );
    git(&f.repo, &["add", "."]);
    git(&f.repo, &["commit", "-qm", "crates"]);
    for (rel, text) in [
        ("deps/libserde-1a2b.rlib", "serde rlib"),
        ("deps/libserde-1a2b.rmeta", "serde rmeta"),
        ("deps/serde-1a2b.d", "serde dep-info"),
        ("deps/libserde_derive-3c4d.so", "proc macro"),
        ("deps/libmy_app-5e6f.rlib", "own library"),
        ("deps/my_app-5e6f.d", "own dep-info"),
        ("deps/libtoolkit-7a8b.rlib", "own member library"),
        ("deps/my_app-9c0d", "own test binary"),
        ("build/serde-2b3c/out/generated.rs", "build script output"),
        ("build/my-app-4d5e/out/own.rs", "own build script output"),
        (".fingerprint/serde-1a2b/lib-serde", "fingerprint"),
        (".fingerprint/my-app-5e6f/lib-my_app", "own fingerprint"),
        (
            ".fingerprint/tool-7a8b/lib-toolkit",
            "own member fingerprint",
        ),
        ("incremental/my_app-1/s-x/query-cache.bin", "incremental"),
        ("my-app", "uplifted binary"),
    ] {
        write(&f.repo, &format!("target/debug/{rel}"), text);
    }
    f
}

fn seed_into(f: &Fixture, wt: &Path, limits: IncludeLimits) -> Option<CargoSeedReport> {
    let seed = list_cargo_seed(&f.repo, &list_included(&f.repo).unwrap()).unwrap();
    seed_cargo_target(&seed, wt, limits).unwrap()
}

/// Every file and symlink under `dir`, relative, sorted.
fn files_under(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(path) = stack.pop() {
        for entry in fs::read_dir(&path).unwrap() {
            let entry = entry.unwrap();
            if entry.file_type().unwrap().is_dir() {
                stack.push(entry.path());
            } else {
                let rel = entry.path().strip_prefix(dir).unwrap().to_path_buf();
                found.push(rel.to_string_lossy().into_owned());
            }
        }
    }
    found.sort();
    found
}

#[test]
fn seed_copies_dependency_artifacts_only_with_their_times() {
    let f = rust_fixture();
    let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
    fs::File::options()
        .write(true)
        .open(f.repo.join("target/debug/deps/libserde-1a2b.rlib"))
        .unwrap()
        .set_modified(old)
        .unwrap();
    let wt = f.worker(&f.lock(), "w1");
    let report = seed_into(&f, &wt, IncludeLimits::default()).expect("a Rust checkout is seeded");
    assert_eq!(
        files_under(&wt.join("target")),
        [
            "debug/.fingerprint/serde-1a2b/lib-serde",
            "debug/build/serde-2b3c/out/generated.rs",
            "debug/deps/libserde-1a2b.rlib",
            "debug/deps/libserde-1a2b.rmeta",
            "debug/deps/libserde_derive-3c4d.so",
            "debug/deps/serde-1a2b.d",
        ]
    );
    let CargoSeedReport::Seeded { files, skipped, .. } = &report else {
        panic!("{report:?}");
    };
    assert_eq!((*files, skipped.len()), (6, 0), "{report:?}");
    assert!(
        report
            .describe()
            .contains("seeded target/debug with the checkout's dependency artifacts: 6 files"),
        "{}",
        report.describe()
    );
    let copied = wt.join("target/debug/deps/libserde-1a2b.rlib");
    assert_eq!(fs::metadata(&copied).unwrap().modified().unwrap(), old);
    assert_eq!(
        git(&wt, &["status", "--porcelain"]),
        "",
        "target/ stays ignored"
    );
}

#[test]
fn each_worktree_gets_its_own_copy_and_the_checkout_is_untouched() {
    let f = rust_fixture();
    let before = files_under(&f.repo.join("target"));
    let (w1, w2) = (f.worker(&f.lock(), "w1"), f.worker(&f.lock(), "w2"));
    seed_into(&f, &w1, IncludeLimits::default()).unwrap();
    seed_into(&f, &w2, IncludeLimits::default()).unwrap();
    let rel = "target/debug/deps/libserde-1a2b.rlib";
    let inode = |root: &Path| fs::metadata(root.join(rel)).unwrap();
    let (a, b, main) = (inode(&w1), inode(&w2), inode(&f.repo));
    assert_ne!(a.ino(), b.ino(), "two worktrees never share a file");
    assert_ne!(
        a.ino(),
        main.ino(),
        "nothing is hard-linked to the checkout"
    );
    assert_eq!((a.nlink(), b.nlink(), main.nlink()), (1, 1, 1));
    assert!(
        !fs::symlink_metadata(w1.join("target"))
            .unwrap()
            .is_symlink()
    );
    fs::write(w1.join(rel), "rebuilt by worker 1").unwrap();
    assert_eq!(read(&w2, rel), "serde rlib");
    assert_eq!(read(&f.repo, rel), "serde rlib");
    assert_eq!(files_under(&f.repo.join("target")), before);
    // The checkout itself is never a destination.
    assert_eq!(seed_into(&f, &f.repo, IncludeLimits::default()), None);
}

#[test]
fn seed_keeps_an_existing_target_of_a_recycled_worktree() {
    let f = rust_fixture();
    let wt = f.worker(&f.lock(), "w1");
    write(
        &wt,
        "target/debug/deps/libserde-1a2b.rlib",
        "the worktree's own",
    );
    let report = seed_into(&f, &wt, IncludeLimits::default());
    assert_eq!(report, Some(CargoSeedReport::KeptExisting));
    assert_eq!(
        files_under(&wt.join("target")),
        ["debug/deps/libserde-1a2b.rlib"]
    );
    assert_eq!(
        read(&wt, "target/debug/deps/libserde-1a2b.rlib"),
        "the worktree's own"
    );
}

#[test]
fn seed_size_guard_skips_the_whole_set_and_names_it() {
    let f = rust_fixture();
    let wt = f.worker(&f.lock(), "w1");
    let report = seed_into(&f, &wt, IncludeLimits { max_bytes: 20 }).unwrap();
    let CargoSeedReport::Seeded { files, skipped, .. } = &report else {
        panic!("{report:?}");
    };
    assert_eq!(*files, 0);
    assert_eq!(skipped.len(), 1, "{report:?}");
    assert_eq!(skipped[0].path, "target/debug/ (dependency artifacts)");
    assert!(matches!(
        skipped[0].reason,
        SkipReason::TooLarge { remaining: 20, .. }
    ));
    assert!(!wt.join("target").exists(), "no partial target/");
    let line = report.describe();
    assert!(
        line.contains("skipped target/debug/ (dependency artifacts): ")
            && line.contains("over the size guard (20 bytes left"),
        "{line}"
    );
}

#[test]
fn seed_never_follows_a_symlink_out_of_the_repository() {
    let f = rust_fixture();
    let outside = f.tmp.path().join("outside-secret");
    fs::write(&outside, "secret").unwrap();
    let deps = f.repo.join("target/debug/deps");
    std::os::unix::fs::symlink(&outside, deps.join("libleak-0a0a.rlib")).unwrap();
    std::os::unix::fs::symlink("../../../../outside-secret", deps.join("librel-0b0b.rlib"))
        .unwrap();
    std::os::unix::fs::symlink("libserde-1a2b.rlib", deps.join("libalias-0c0c.rlib")).unwrap();
    let outside_dir = f.tmp.path().join("outside-dir");
    fs::create_dir_all(&outside_dir).unwrap();
    fs::write(outside_dir.join("x.rs"), "secret").unwrap();
    std::os::unix::fs::symlink(
        &outside_dir,
        f.repo.join("target/debug/build/serde-2b3c/out/ext"),
    )
    .unwrap();
    let wt = f.worker(&f.lock(), "w1");
    let report = seed_into(&f, &wt, IncludeLimits::default()).unwrap();
    let CargoSeedReport::Seeded { skipped, .. } = &report else {
        panic!("{report:?}");
    };
    let refused: Vec<&str> = skipped
        .iter()
        .filter(|s| matches!(s.reason, SkipReason::SymlinkEscapes { .. }))
        .map(|s| s.path.as_str())
        .collect();
    assert_eq!(
        refused,
        [
            "target/debug/build/serde-2b3c/out/ext",
            "target/debug/deps/libleak-0a0a.rlib",
            "target/debug/deps/librel-0b0b.rlib",
        ]
    );
    for absent in [
        "target/debug/deps/libleak-0a0a.rlib",
        "target/debug/deps/librel-0b0b.rlib",
        "target/debug/build/serde-2b3c/out/ext",
    ] {
        assert!(fs::symlink_metadata(wt.join(absent)).is_err(), "{absent}");
    }
    assert_eq!(
        fs::read_link(wt.join("target/debug/deps/libalias-0c0c.rlib")).unwrap(),
        Path::new("libserde-1a2b.rlib")
    );
    assert!(
        report
            .describe()
            .contains("skipped target/debug/deps/libleak-0a0a.rlib: symlink to"),
        "{}",
        report.describe()
    );
}

#[test]
fn seed_does_not_apply_where_the_user_chose_or_nothing_is_built() {
    let f = rust_fixture();
    let applies = |f: &Fixture| {
        list_cargo_seed(&f.repo, &list_included(&f.repo).unwrap())
            .unwrap()
            .applies()
    };
    assert_eq!(applies(&f), Ok(()));
    write(&f.repo, ".worktreeinclude", ".env\ntarget/debug/deps/\n");
    assert_eq!(applies(&f), Err(NoSeedReason::CoveredByInclude));
    fs::remove_file(f.repo.join(".worktreeinclude")).unwrap();

    let plain = Fixture::new();
    write(&plain.repo, "target/debug/deps/libx-1.rlib", "x");
    assert_eq!(applies(&plain), Err(NoSeedReason::NotCargo));

    let linked = rust_fixture();
    let elsewhere = linked.tmp.path().join("elsewhere-target");
    fs::rename(linked.repo.join("target"), &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, linked.repo.join("target")).unwrap();
    assert_eq!(applies(&linked), Err(NoSeedReason::TargetIsSymlink));

    let unbuilt = rust_fixture();
    fs::remove_dir_all(unbuilt.repo.join("target/debug/deps")).unwrap();
    assert_eq!(applies(&unbuilt), Err(NoSeedReason::NothingBuilt));

    let tracked = rust_fixture();
    write(&tracked.repo, ".gitignore", "*.log\n");
    git(&tracked.repo, &["commit", "-qam", "target/ not ignored"]);
    assert_eq!(applies(&tracked), Err(NoSeedReason::TargetNotIgnored));
}
