//! End-to-end on a full disk (a real tmpfs, filled up): the built binary says "No space left
//! on device" in the user's words at swarm set-up and at session start, and a `write_file`
//! that hits the full disk leaves the original file intact and tells the model why.
//!
//! Mounting needs root (CAP_SYS_ADMIN); without it each test prints why it is skipped.

use super::support::scripts::*;
use super::support::tmpfs::{Tmpfs, fill};
use super::support::*;
use ahelper_fake_llm::{FakeLlm, Script, Turn};
use std::path::PathBuf;

/// A git repository with `a.txt` committed, on a fresh tmpfs of 1 MiB.
fn repo_on_tmpfs() -> Option<(Tmpfs, TestRepo)> {
    let fs = Tmpfs::mount("1m")?;
    let home = tempfile::tempdir().unwrap();
    let repo = TestRepo { dir: home };
    std::fs::create_dir_all(repo.home()).unwrap();
    let root = fs.path();
    git::git(&root, &["init", "-q", "-b", "main"]);
    git::git(&root, &["config", "user.email", "test@example.com"]);
    git::git(&root, &["config", "user.name", "Test"]);
    std::fs::write(root.join("a.txt"), "keep me\n").unwrap();
    git::git(&root, &["add", "-A"]);
    git::git(&root, &["commit", "-q", "-m", "initial"]);
    Some((fs, repo))
}

/// What `ahelper` did in a repository on a full disk.
struct FullDiskRun {
    /// The filled tmpfs the repository is on (mounted while this lives).
    root: PathBuf,
    _fs: Tmpfs,
    server: FakeLlm,
    code: Option<i32>,
    stderr: String,
}

/// Runs `ahelper args…` against a model with no script in a repository on a filled tmpfs, or
/// `None` when no tmpfs can be mounted.
fn run_on_a_full_disk(args: &[&str]) -> Option<FullDiskRun> {
    let (fs, repo) = repo_on_tmpfs()?;
    let root = fs.path();
    // The log file is on the full disk too (made before it filled up, as a log file already
    // there would be): a record that cannot be written is not a line on stderr.
    let state = root.join(".git/state");
    std::fs::create_dir_all(state.join("ahelper/logs")).unwrap();
    std::fs::write(state.join("ahelper/logs/ahelper.log"), "").unwrap();
    fill(&root);
    let server = start(Script::new());
    let out = ahelper(&repo, &server, Wire::Anthropic)
        .current_dir(&root)
        .env("XDG_STATE_HOME", &state)
        .args(args)
        .output()
        .unwrap();
    Some(FullDiskRun {
        root,
        _fs: fs,
        server,
        code: out.status.code(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

#[test]
fn swarm_set_up_on_a_full_disk_says_no_space_left_in_the_users_words() {
    let Some(FullDiskRun {
        root,
        server,
        code,
        stderr,
        ..
    }) = run_on_a_full_disk(&["swarm", "do it", "--yes"])
    else {
        return;
    };
    assert_ne!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("No space left on device") && stderr.contains("Free some disk space"),
        "{stderr}"
    );
    assert!(!stderr.contains("os error 28"), "no raw OS error: {stderr}");
    assert!(!stderr.contains("Unable to write an event"), "{stderr}");
    assert!(server.model_requests().is_empty(), "nothing planned");
    // No temporary or empty record is left behind.
    for run in std::fs::read_dir(root.join(".ahelper/runs"))
        .map(|d| d.flatten().collect::<Vec<_>>())
        .unwrap_or_default()
    {
        for f in std::fs::read_dir(run.path()).unwrap().flatten() {
            let name = f.file_name().to_string_lossy().into_owned();
            assert!(!name.contains(".tmp"), "temp file left: {name}");
            assert!(f.metadata().unwrap().len() > 0, "empty file left: {name}");
        }
    }
}

#[test]
fn a_session_cannot_start_on_a_full_disk_and_says_why() {
    let Some(FullDiskRun { code, stderr, .. }) = run_on_a_full_disk(&["-p", "hi"]) else {
        return;
    };
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("No space left on device: the transcript"),
        "{stderr}"
    );
}

#[test]
fn write_file_hitting_a_full_disk_keeps_the_file_and_the_model_is_told() {
    let Some((fs, repo)) = repo_on_tmpfs() else {
        return;
    };
    let root = fs.path();
    let big = "y".repeat(64 * 1024);
    let server = start(agent([
        runs("head -c 4000000 /dev/zero > filler; true"),
        writes("a.txt", &big),
        Turn::text("The disk is full; nothing was changed."),
    ]));
    let out = ahelper(&repo, &server, Wire::Anthropic)
        .current_dir(&root)
        .args(["-p", "rewrite a.txt", "--permission-mode", "bypass"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(root.join("a.txt")).unwrap(),
        "keep me\n",
        "the original bytes are intact"
    );
    let requests = server.model_requests();
    assert_eq!(requests.len(), 3, "{stderr}");
    let told = requests[2].body.to_string();
    assert!(
        told.contains(
            "No space left on device: `a.txt` could not be written and was left as it was"
        ),
        "{told}"
    );
    let leftovers: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}
