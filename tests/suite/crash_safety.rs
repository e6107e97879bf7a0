//! Crash safety, second pass (issue 37): what a `kill -9` or a second process leaves behind
//! never reaches the integration branch — an interrupted write's temp file, a run driven by
//! two resumes at once, a stale ref lock — and outages are named for what they are.

use super::support::scripts::*;
use super::support::*;
use ahelper_fake_llm::{FakeLlm, Fault, FaultKind, Turn};
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

/// A run of one worker (`s1` writes `A` into `a.txt`, then answers after `delay_ms`) killed
/// with `kill -9` once the write is in its worktree; the run's id.
fn killed_after_the_write(repo: &TestRepo, server: &FakeLlm) -> String {
    let mut child = spawn_swarm(repo, server);
    wait_for_run(&mut child, repo, |run| {
        run["workers"][0]["status"] == "running" && holds(&worktree_of(run, 0), "a.txt", "A\n")
    });
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    last_run(repo)["run_id"].as_str().unwrap().to_string()
}

/// Issue 37 (found by `scripts/chaos-kill9.sh`): a run killed between registering a worker's
/// worktree and recording ahelper's marker for it leaves a worktree on the worker's branch
/// without a marker; resume re-records the marker and the worker's work is committed and
/// merged (it was refused — "only commits in linked worktrees created by ahelper" — on every
/// resume, so the run never finished).
#[test]
fn resume_commits_in_a_worktree_whose_marker_a_kill_cut() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let server = start(slow_writer(2_000));
    let id = killed_after_the_write(&repo, &server);
    // What a kill between `git worktree add` and the marker's write leaves: no marker.
    let markers = repo.path().join(".git/ahelper/worktrees");
    for entry in std::fs::read_dir(&markers).unwrap() {
        std::fs::remove_file(entry.unwrap().path()).unwrap();
    }
    swarm(
        &repo,
        &server,
        &["resume", &id, "--permission-mode", "bypass"],
    )
    .assert()
    .success();
    let run = last_run(&repo);
    assert_eq!(run["workers"][0]["status"], "merged", "{run:#}");
    assert_eq!(run["status"], "finished", "{run:#}");
    let integration = run["integration_branch"].as_str().unwrap();
    assert_eq!(repo.git(&["show", &format!("{integration}:a.txt")]), "A\n");
}

/// Issue 37 (found by `scripts/chaos-kill9.sh`): a run killed after a spare worktree was moved
/// to a worker's path but before its HEAD was pointed at the worker's branch (detached, no
/// marker) — resume checks the branch out there and the worker's work is merged (resume
/// refused the path as "already exists", on every resume).
#[test]
fn resume_finishes_a_spare_a_kill_left_detached_at_a_workers_path() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let server = start(one_worker([
        writes("a.txt", "A\n").with_delay_ms(3_000),
        Turn::text("s1 done"),
    ]));
    let mut child = spawn_swarm(&repo, &server);
    wait_for_run(&mut child, &repo, |run| {
        run["workers"][0]["status"] == "running" && worktree_of(run, 0).join(".git").exists()
    });
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let run = last_run(&repo);
    let worktree = worktree_of(&run, 0);
    // What the kill inside the spare's recycling leaves: HEAD detached, no marker.
    let head = repo
        .git(&["-C", worktree.to_str().unwrap(), "rev-parse", "HEAD"])
        .trim()
        .to_owned();
    repo.git(&[
        "-C",
        worktree.to_str().unwrap(),
        "checkout",
        "-q",
        "--detach",
        &head,
    ]);
    for entry in std::fs::read_dir(repo.path().join(".git/ahelper/worktrees")).unwrap() {
        std::fs::remove_file(entry.unwrap().path()).unwrap();
    }
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
    assert_eq!(repo.git(&["show", &format!("{integration}:a.txt")]), "A\n");
}

/// `s1` writes `A` into `a.txt`, then says it is done after `delay_ms`.
fn slow_writer(delay_ms: u64) -> ahelper_fake_llm::Script {
    one_worker([
        writes("a.txt", "A\n"),
        Turn::text("s1 done").with_delay_ms(delay_ms),
    ])
}

/// The subjects of the integration branch's commits that merge worker `id`.
fn merges_of(repo: &TestRepo, run: &Value, id: &str) -> usize {
    let integration = run["integration_branch"].as_str().unwrap();
    repo.git(&["log", "--format=%s", integration])
        .lines()
        .filter(|l| l.starts_with(&format!("Merge {id} (")))
        .count()
}

/// Issue 37.2: two `swarm resume` of one interrupted run started together: exactly one runs
/// it, the other is refused naming the first's pid; the worker's work is on the integration
/// branch once; a third resume has nothing left to do.
#[test]
fn two_resumes_started_together_one_runs_the_other_names_it() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let server = start(slow_writer(2_000));
    let id = killed_after_the_write(&repo, &server);
    let resume = || {
        ahelper_process(&repo, &server, Wire::Anthropic)
            .args(["swarm", "resume", &id, "--permission-mode", "bypass"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (first, second) = (resume(), resume());
    let pids = [first.id(), second.id()];
    let outputs = [first, second].map(|c| c.wait_with_output().unwrap());
    let ok: Vec<usize> = (0..2).filter(|&i| outputs[i].status.success()).collect();
    let stderr = |i: usize| String::from_utf8_lossy(&outputs[i].stderr).into_owned();
    assert_eq!(
        ok.len(),
        1,
        "exactly one runs: {} / {}",
        stderr(0),
        stderr(1)
    );
    let (winner, loser) = (ok[0], 1 - ok[0]);
    assert!(
        stderr(loser).contains(&format!(
            "being driven by another ahelper process (pid {})",
            pids[winner]
        )),
        "{}",
        stderr(loser)
    );
    let run = last_run(&repo);
    assert_eq!(run["workers"][0]["status"], "merged", "{run:#}");
    assert_eq!(run["status"], "finished", "{run:#}");
    let integration = run["integration_branch"].as_str().unwrap();
    assert_eq!(repo.git(&["show", &format!("{integration}:a.txt")]), "A\n");
    assert!(
        merges_of(&repo, &run, "w1") <= 1,
        "{}",
        repo.git(&["log", "--oneline", integration])
    );
    let tip = repo.git(&["rev-parse", integration]);
    swarm(&repo, &server, &["resume", &id])
        .assert()
        .success()
        .stderr(predicates::str::contains("has nothing left to do"));
    assert_eq!(
        repo.git(&["rev-parse", integration]),
        tip,
        "the third resume moved nothing"
    );
}

/// Issue 37.2: a worker whose branch is on the integration branch though the record says it
/// failed (a process killed between the merge and the record) is recorded merged by resume,
/// not run or merged again.
#[test]
fn resume_records_a_merge_it_finds_on_the_integration_branch() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let server = start(slow_writer(0));
    swarm(
        &repo,
        &server,
        &["do it", "--yes", "--permission-mode", "bypass"],
    )
    .assert()
    .success();
    let mut run = last_run(&repo);
    let id = run["run_id"].as_str().unwrap().to_string();
    let integration = run["integration_branch"].as_str().unwrap().to_string();
    // The worker's branch as it was merged, and a record that lost the merge.
    let branch = run["workers"][0]["branch"].as_str().unwrap().to_string();
    // (one worker on a fresh integration branch: merged as a fast-forward, so its tip)
    repo.git(&["branch", &branch, &integration]);
    run["workers"][0]["status"] = "failed".into();
    run["status"] = "failed".into();
    let record = repo.path().join(".ahelper/runs").join(&id).join("run.json");
    std::fs::write(record, run.to_string()).unwrap();
    let requests = server.requests().len();
    let tip = repo.git(&["rev-parse", &integration]);
    swarm(
        &repo,
        &server,
        &["resume", &id, "--permission-mode", "bypass"],
    )
    .assert()
    .success()
    .stderr(predicates::str::contains(
        "Already on the integration branch, recorded merged without running again: w1.",
    ));
    let run = last_run(&repo);
    assert_eq!(run["workers"][0]["status"], "merged", "{run:#}");
    assert_eq!(
        repo.git(&["rev-parse", &integration]),
        tip,
        "nothing merged again"
    );
    let worker_requests = server.requests()[requests..]
        .iter()
        .filter(|r| r.body.to_string().contains("Your subtask `s1`"))
        .count();
    assert_eq!(worker_requests, 0, "the worker did not run again");
}

/// Issue 37.3: a ref lock left on the run's integration branch by a crash: resume removes it
/// with a note naming it, and the run merges.
#[test]
fn resume_removes_a_stale_lock_on_the_runs_integration_branch() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let server = start(slow_writer(2_000));
    let id = killed_after_the_write(&repo, &server);
    let run = last_run(&repo);
    let integration = run["integration_branch"].as_str().unwrap();
    let lock = repo
        .path()
        .join(".git/refs/heads")
        .join(format!("{integration}.lock"));
    std::fs::write(&lock, "").unwrap();
    swarm(
        &repo,
        &server,
        &["resume", &id, "--permission-mode", "bypass"],
    )
    .assert()
    .success()
    .stderr(predicates::str::contains(format!(
        "Removed the stale ref lock {}",
        lock.display()
    )));
    let run = last_run(&repo);
    assert_eq!(run["workers"][0]["status"], "merged", "{run:#}");
    assert_eq!(repo.git(&["show", &format!("{integration}:a.txt")]), "A\n");
}

/// Issue 37.5: one malformed frame in a worker's reply stream (a proxy that corrupts it) is
/// retried like a dropped stream: the worker does its work and merges.
#[test]
fn one_malformed_frame_in_a_workers_stream_is_retried() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let corrupt = Fault::new(FaultKind::MalformedLine);
    let server = start(one_worker([
        writes("a.txt", "A\n").with_fault(corrupt),
        Turn::text("s1 done"),
    ]));
    swarm(
        &repo,
        &server,
        &["do it", "--yes", "--permission-mode", "bypass"],
    )
    .assert()
    .success();
    let run = last_run(&repo);
    assert_eq!(run["workers"][0]["status"], "merged", "{run:#}");
    let integration = run["integration_branch"].as_str().unwrap();
    assert_eq!(repo.git(&["show", &format!("{integration}:a.txt")]), "A\n");
    let faulted = server
        .requests()
        .iter()
        .filter(|r| r.fault.is_some())
        .count();
    assert_eq!(
        faulted, 1,
        "the corrupted reply was sent once, then retried"
    );
}

/// Issue 37.6: the provider down when a swarm starts: the error says the provider could not be
/// reached while planning, at which URL — not that the coordinator made no valid plan.
#[test]
fn a_provider_down_at_start_is_named() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let server = start(slow_writer(0));
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let out = swarm(&repo, &server, &["do it", "--yes"])
        .env("ANTHROPIC_BASE_URL", &url)
        .assert()
        .code(1)
        .get_output()
        .stderr
        .clone();
    let stderr = String::from_utf8_lossy(&out);
    assert!(
        stderr.contains(&format!(
            "could not reach the model provider at {url} while planning: connection"
        )),
        "{stderr}"
    );
    assert!(
        !stderr.contains("could not produce a valid plan"),
        "{stderr}"
    );
    assert!(server.model_requests().is_empty());
}
