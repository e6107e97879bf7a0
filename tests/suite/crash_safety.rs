//! Crash safety, second pass (issue 37): what a `kill -9` or a second process leaves behind
//! never reaches the integration branch — an interrupted write's temp file, a run driven by
//! two resumes at once, a stale ref lock — and outages are named for what they are.

use super::support::scripts::*;
use super::support::*;
use ahelper_fake_llm::{FakeLlm, Turn};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A temp file name of ahelper's atomic writer (`.<name>.ahelper-<uuid>.tmp`).
const LEFTOVER: &str = ".a.txt.ahelper-0190d1b2c3d4e5f60718293a4b5c6d7e.tmp";

fn swarm(repo: &TestRepo, server: &FakeLlm, args: &[&str]) -> assert_cmd::Command {
    let mut cmd = ahelper(repo, server, Wire::Anthropic);
    cmd.arg("swarm").args(args);
    cmd
}

/// Starts `swarm "do it" --yes --permission-mode bypass`, output discarded.
fn spawn_swarm(repo: &TestRepo, server: &FakeLlm) -> std::process::Child {
    ahelper_process(repo, server, Wire::Anthropic)
        .args(["swarm", "do it", "--yes", "--permission-mode", "bypass"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// Waits (up to 90 s) until `ready` holds for the newest run record; panics (killing `child`)
/// otherwise.
fn wait_for_run(child: &mut std::process::Child, repo: &TestRepo, ready: impl Fn(&Value) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(90);
    while Instant::now() < deadline {
        if try_last_run(repo).is_some_and(|r| ready(&r)) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("the run never got there: {:#?}", try_last_run(repo));
}

/// The worktree of worker `index` of `run`.
fn worktree_of(run: &Value, index: usize) -> PathBuf {
    PathBuf::from(run["workers"][index]["worktree"].as_str().unwrap())
}

/// Whether `file` in `dir` holds `content`.
fn holds(dir: &Path, file: &str, content: &str) -> bool {
    std::fs::read_to_string(dir.join(file)).is_ok_and(|t| t == content)
}

/// The files of `branch`, one per line.
fn files_on(repo: &TestRepo, branch: &str) -> String {
    repo.git(&["ls-tree", "-r", "--name-only", branch])
}

/// Issue 37.1: a run killed after its worker wrote, with an atomic write's temp file left in
/// the worker's worktree: resume neither commits nor merges the temp file, and removes it.
#[test]
fn a_temp_file_left_by_a_kill_is_not_merged_by_resume() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let turns = [
        writes("a.txt", "A\n"),
        Turn::text("s1 done").with_delay_ms(2_000),
    ];
    let server = start(one_worker(turns));
    let mut child = spawn_swarm(&repo, &server);
    wait_for_run(&mut child, &repo, |run| {
        run["workers"][0]["status"] == "running" && holds(&worktree_of(run, 0), "a.txt", "A\n")
    });
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let run = last_run(&repo);
    let worktree = worktree_of(&run, 0);
    // What a kill inside the atomic writer leaves: half a file under the temp name.
    std::fs::write(worktree.join(LEFTOVER), "A partial co").unwrap();
    let id = run["run_id"].as_str().unwrap().to_string();
    swarm(
        &repo,
        &server,
        &["resume", &id, "--permission-mode", "bypass"],
    )
    .assert()
    .success();
    let run = last_run(&repo);
    assert_eq!(run["workers"][0]["status"], "merged", "{run:#}");
    let integration = run["integration_branch"].as_str().unwrap();
    let files = files_on(&repo, integration);
    assert!(!files.contains(".ahelper-"), "{files}");
    assert_eq!(repo.git(&["show", &format!("{integration}:a.txt")]), "A\n");
    assert!(!worktree.join(LEFTOVER).exists());
}
