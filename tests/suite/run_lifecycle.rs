//! The life of a swarm run after it started (issue 10 item 7, issue 9 items 3 and 9): which run
//! `status` and `logs` show, what `ls` lists, what `clean` removes, a run killed with `kill -9`
//! (interrupted everywhere), and the output formats of `swarm` and `-p --resume`.

use super::support::scripts::*;
use super::support::*;
use ahelper_fake_llm::{FakeLlm, Turn};
use predicates::prelude::*;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn writes_a() -> Vec<Turn> {
    vec![writes("a.txt", "A\n"), Turn::text("done")]
}

fn runs_dir(repo: &TestRepo) -> PathBuf {
    repo.path().join(".ahelper/runs")
}

fn swarm(repo: &TestRepo, server: &FakeLlm, args: &[&str]) -> assert_cmd::Command {
    let mut cmd = ahelper(repo, server, Wire::Anthropic);
    cmd.arg("swarm").args(args);
    cmd
}

/// Runs `swarm "do it" --yes --permission-mode bypass` to a successful end; the run's id.
fn run_to_the_end(repo: &TestRepo, server: &FakeLlm) -> String {
    swarm(
        repo,
        server,
        &["do it", "--yes", "--permission-mode", "bypass"],
    )
    .assert()
    .success();
    last_run(repo)["run_id"].as_str().unwrap().to_string()
}

/// Starts `ahelper swarm "do it" --yes --permission-mode bypass` as a plain child process (so the
/// test can signal it), its output discarded.
fn spawn_swarm(repo: &TestRepo, server: &FakeLlm) -> std::process::Child {
    spawn_swarm_with_output(repo, server, std::process::Stdio::null)
}

/// [`spawn_swarm`] with stdout and stderr made by `output` (`Stdio::piped` to read them).
fn spawn_swarm_with_output(
    repo: &TestRepo,
    server: &FakeLlm,
    output: fn() -> std::process::Stdio,
) -> std::process::Child {
    ahelper_process(repo, server, Wire::Anthropic)
        .args(["swarm", "do it", "--yes", "--permission-mode", "bypass"])
        .stdin(std::process::Stdio::null())
        .stdout(output())
        .stderr(output())
        .spawn()
        .unwrap()
}

/// [`spawn_swarm`], waiting until worker w1 is `running`.
fn spawn_until_worker_runs(repo: &TestRepo, server: &FakeLlm) -> std::process::Child {
    let mut child = spawn_swarm(repo, server);
    // `running` is recorded before the worker's worktree is made; its first model request
    // (after the coordinator's plan) comes after it.
    if !worker_runs_within(repo, Duration::from_secs(90))
        || !requests_within(server, 2)
        || !worker_branch_within(repo)
    {
        let _ = child.kill();
        let _ = child.wait();
        panic!("the worker never started");
    }
    child
}

/// Whether worker w1's recorded branch exists within 90 s (a loaded machine may record the
/// worker running before its worktree and branch are made).
fn worker_branch_within(repo: &TestRepo) -> bool {
    let deadline = Instant::now() + Duration::from_secs(90);
    while Instant::now() < deadline {
        let run = last_run(repo);
        // Not `has_branch`: git may fail while the worktree's admin files are half written.
        let made = |branch: &str| {
            std::process::Command::new("git")
                .arg("-C")
                .arg(repo.path())
                .args(["rev-parse", "--verify", "--quiet"])
                .arg(format!("refs/heads/{branch}"))
                .output()
                .is_ok_and(|o| o.status.success())
        };
        if run["workers"][0]["branch"].as_str().is_some_and(made) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// Whether `server` has had `count` model requests within 90 s.
fn requests_within(server: &FakeLlm, count: usize) -> bool {
    let deadline = Instant::now() + Duration::from_secs(90);
    while Instant::now() < deadline {
        if server.model_request_count() >= count {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// Whether worker w1 of the newest run is `running` before `limit` passes.
fn worker_runs_within(repo: &TestRepo, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        let running = std::fs::read_dir(runs_dir(repo)).is_ok_and(|mut d| d.next().is_some())
            && std::panic::catch_unwind(|| last_run(repo))
                .is_ok_and(|r| r["workers"][0]["status"] == "running");
        if running {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// issue 9.3: after `kill -9` the run is `interrupted` in `ls` and `status` (every in-flight
/// worker too), the next `swarm` names it with the commands to resume or clean it; issue 9.9:
/// `ls` never shows an integration branch that is gone, and `clean` says why it keeps a branch
/// without git's hint; `clean --purge` removes the record.
#[test]
fn a_killed_swarm_is_interrupted_in_ls_status_and_the_next_run() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    // The worker's model answers slowly: the run is killed while it waits.
    let mut turns = writes_a();
    turns[0] = turns[0].clone().with_delay_ms(10_000);
    let server = start(one_worker(turns));
    let mut child = spawn_until_worker_runs(&repo, &server);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let run = last_run(&repo);
    let id = run["run_id"].as_str().unwrap().to_string();
    assert_eq!(run["status"], "running", "the record still says running");

    let ls = stdout_of(&mut swarm(&repo, &server, &["ls"]));
    assert!(ls.contains(&id) && ls.contains("interrupted"), "{ls}");
    let status = stdout_of(&mut swarm(&repo, &server, &["status"]));
    assert!(
        status.contains(&format!("Run: {id} (interrupted)")),
        "{status}"
    );
    assert!(
        status.contains(&format!("ahelper swarm resume {id}")),
        "{status}"
    );
    let w1 = status.lines().find(|l| l.starts_with("w1")).unwrap();
    assert!(w1.contains("interrupted"), "{status}");
    assert!(!status.contains("starting"), "{status}");
    assert!(
        status.contains(" · interrupted · "),
        "the totals line: {status}"
    );

    swarm(&repo, &server, &["another task", "--plan-only"])
        .assert()
        .success()
        .stderr(predicate::str::contains(format!(
            "Run {id} was interrupted"
        )))
        .stderr(predicate::str::contains(format!(
            "`ahelper swarm resume {id}`, or remove it with `ahelper swarm clean {id}`"
        )));

    // The integration branch deleted by hand: `ls` does not list it, `clean` keeps the
    // worker's branch and says why.
    let integration = run["integration_branch"].as_str().unwrap();
    repo.git(&["branch", "-D", integration]);
    let ls = stdout_of(&mut swarm(&repo, &server, &["ls"]));
    let line = ls.lines().find(|l| l.starts_with(&id)).unwrap();
    assert!(
        line.contains("(deleted)") && !line.contains(integration),
        "{ls}"
    );
    let clean = swarm(&repo, &server, &["clean", &id])
        .assert()
        .code(1)
        .get_output()
        .stdout
        .clone();
    let clean = String::from_utf8(clean).unwrap();
    assert!(
        clean.contains(&format!(
            "the integration branch {integration} no longer exists"
        )),
        "{clean}"
    );
    assert!(!clean.contains("git branch --list"), "{clean}");
    swarm(&repo, &server, &["clean", &id, "--force", "--purge"])
        .assert()
        .success()
        .stdout(predicate::str::contains("removed the run's record"));
    assert!(!runs_dir(&repo).join(&id).exists());
}

/// issue 9.3: a record whose pid is alive but belongs to another process (its start time
/// differs) is interrupted, not active: a new run is not refused and `resume` continues it.
/// issue 10.7: `--plan-only` says how to start the saved plan, and that command works.
#[test]
fn a_run_whose_pid_is_another_process_is_interrupted_and_resumes() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let server = start(one_worker(writes_a()));
    swarm(&repo, &server, &["do it", "--plan-only"])
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "start it with `ahelper swarm resume ",
        ));
    let mut run = last_run(&repo);
    let id = run["run_id"].as_str().unwrap().to_string();
    // This test process is alive, but it is not the one that ran the swarm.
    run["status"] = json!("running");
    run["pid"] = json!(std::process::id());
    run["pid_start_time"] = json!(1);
    // What the earlier process had done (issue 9.9: resume counts the whole run).
    run["workers"][0]["turns"] = json!(3);
    run["workers"][0]["tool_calls"] = json!(2);
    run["workers"][0]["usage"] = json!({"input_tokens": 1000, "output_tokens": 500});
    std::fs::write(runs_dir(&repo).join(&id).join("run.json"), run.to_string()).unwrap();
    let ls = stdout_of(&mut swarm(&repo, &server, &["ls"]));
    assert!(ls.contains("interrupted"), "{ls}");
    swarm(
        &repo,
        &server,
        &["resume", &id[..8], "--permission-mode", "bypass"],
    )
    .assert()
    .success()
    .stderr(predicate::str::contains(format!(
        "Resuming interrupted run {id}"
    )));
    let run = last_run(&repo);
    assert_eq!(run["status"], "finished");
    let w1 = &run["workers"][0];
    assert_eq!(w1["status"], "merged");
    assert_eq!(w1["turns"], 5, "3 earlier turns and 2 resumed: {w1}");
    assert_eq!(w1["tool_calls"], 3, "{w1}");
    assert!(w1["usage"]["input_tokens"].as_u64().unwrap() > 1000, "{w1}");
}

/// issue 10.7: `status` and `logs` default to the latest run (`logs w1` is its worker);
/// `ls` hides cleaned runs and `--all` shows them.
#[test]
fn status_and_logs_default_to_the_latest_run_and_ls_hides_cleaned_runs() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let server = start(one_worker(writes_a()));
    swarm(&repo, &server, &["status"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("no swarm runs"));
    let id = run_to_the_end(&repo, &server);
    let status = stdout_of(&mut swarm(&repo, &server, &["status"]));
    assert!(
        status.contains(&format!("Run: {id} (finished)")),
        "{status}"
    );
    let logs = stdout_of(&mut swarm(&repo, &server, &["logs"]));
    assert!(
        logs.contains("split by file"),
        "the coordinator's plan: {logs}"
    );
    let worker_logs = stdout_of(&mut swarm(&repo, &server, &["logs", "w1"]));
    assert!(worker_logs.contains("write_file"), "{worker_logs}");
    // the README's other transcript names work alone too
    let coordinator = stdout_of(&mut swarm(&repo, &server, &["logs", "coordinator"]));
    assert_eq!(coordinator, logs);

    swarm(&repo, &server, &["clean", &id, "--force"])
        .assert()
        .success()
        .stdout(predicate::str::contains("--purge"));
    let ls = stdout_of(&mut swarm(&repo, &server, &["ls"]));
    assert!(!ls.contains(&id), "{ls}");
    let all = stdout_of(&mut swarm(&repo, &server, &["ls", "--all"]));
    let line = all.lines().find(|l| l.starts_with(&id)).unwrap();
    assert!(
        line.contains("cleaned") && line.contains("(deleted)"),
        "{all}"
    );
    swarm(&repo, &server, &["clean", &id, "--purge"])
        .assert()
        .success();
    assert!(!runs_dir(&repo).join(&id).exists());
}

/// issue 10.7/10.8: `swarm --output-format json` is refused with the formats it accepts, and
/// `stream-json` events carry the same `type` key as `-p`'s.
#[test]
fn swarm_output_formats_match_their_help_and_share_the_envelope_key() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let server = start(one_worker(writes_a()));
    swarm(&repo, &server, &["do it", "--output-format", "json"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "possible values: text, stream-json",
        ));
    let help = stdout_of(&mut swarm(&repo, &server, &["--help"]));
    assert!(
        help.contains("- text:") && help.contains("- stream-json:") && !help.contains("- json:"),
        "{help}"
    );
    let out = stdout_of(&mut swarm(
        &repo,
        &server,
        &[
            "do it",
            "--yes",
            "--permission-mode",
            "bypass",
            "--output-format",
            "stream-json",
        ],
    ));
    let events: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(events.iter().all(|e| e["type"].is_string()), "{out}");
    assert!(events.iter().any(|e| e["type"] == "run_finished"), "{out}");
}

/// issue 10.7: `-p --resume` takes a unique prefix of the session id, like run ids.
#[test]
fn print_resume_accepts_a_unique_session_id_prefix() {
    let (repo, server, id) = session_remembering_banana();
    let out = stdout_of(ahelper(&repo, &server, Wire::Anthropic).args([
        "-p",
        "what word?",
        "--resume",
        &id[..13],
        "--output-format",
        "json",
    ]));
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()["session_id"],
        id
    );
    assert!(
        server.model_requests()[1]
            .body
            .to_string()
            .contains("banana")
    );
}

/// The heading of the coordinator's closing (synthesis) prompt.
const SYNTHESIS: &str = "# Swarm run finished: write the summary";

/// Three subtasks: w1 (`a.txt`, and README.md) and w2 (`b.txt`) merge, w3 retitles README.md
/// too and conflicts with w1; the coordinator's closing turn answers after `closing_delay_ms`.
fn merged_and_conflicted(closing_delay_ms: u64) -> ahelper_fake_llm::Script {
    use ahelper_fake_llm::Conversation;
    let coordinator = Conversation::new()
        .matching(COORDINATOR)
        .turn(plan_turn(json!([
            subtask("s1", "a.txt"),
            subtask("s2", "b.txt"),
            subtask("s3", "c.txt"),
        ])));
    ahelper_fake_llm::Script::new()
        .with_conversation(
            Conversation::new()
                .named("synthesis")
                .matching(SYNTHESIS)
                .turn(Turn::text("w1 and w2 merged; w3 conflicts").with_delay_ms(closing_delay_ms)),
        )
        .with_conversation(coordinator)
        .with_conversation(worker(
            "s1",
            [
                writes("a.txt", "A\n"),
                runs("printf 'title by w1\\n' > README.md"),
                done("s1"),
            ],
        ))
        .with_conversation(worker("s2", [writes("b.txt", "B\n"), done("s2")]))
        .with_conversation(worker(
            "s3",
            [runs("printf 'title by w3\\n' > README.md"), done("s3")],
        ))
}

/// Starts the run of [`merged_and_conflicted`] as a plain child process (its output made by
/// `output`) and waits until the coordinator's closing request reached the model.
fn spawn_until_closing_turn(
    repo: &TestRepo,
    server: &FakeLlm,
    output: fn() -> std::process::Stdio,
) -> std::process::Child {
    let mut child = spawn_swarm_with_output(repo, server, output);
    let deadline = Instant::now() + Duration::from_secs(90);
    while !server
        .model_requests()
        .iter()
        .any(|r| r.body.to_string().contains(SYNTHESIS))
    {
        if Instant::now() > deadline || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the run never reached its closing turn");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

/// Two subtasks (`a.txt`, `b.txt`) that both merge; the closing turn answers after
/// `closing_delay_ms`.
fn both_merged(closing_delay_ms: u64) -> ahelper_fake_llm::Script {
    use ahelper_fake_llm::Conversation;
    let coordinator = Conversation::new()
        .matching(COORDINATOR)
        .turn(plan_turn(json!([
            subtask("s1", "a.txt"),
            subtask("s2", "b.txt")
        ])));
    ahelper_fake_llm::Script::new()
        .with_conversation(
            Conversation::new()
                .named("synthesis")
                .matching(SYNTHESIS)
                .turn(Turn::text("both merged").with_delay_ms(closing_delay_ms)),
        )
        .with_conversation(coordinator)
        .with_conversation(worker("s1", [writes("a.txt", "A\n"), done("s1")]))
        .with_conversation(worker("s2", [writes("b.txt", "B\n"), done("s2")]))
}

/// Waits until `run.json` shows every merge of [`merged_and_conflicted`] (w1 and w2 merged, w3
/// in conflict).
fn wait_for_the_merges_on_disk(repo: &TestRepo) {
    wait_for_statuses_on_disk(repo, &["merged", "merged", "conflict"]);
    // The queue removes a merged worker's worktree and branch after recording it merged: wait
    // for that too, so the kill lands in the closing turn and not in that removal.
    let deadline = Instant::now() + Duration::from_secs(10);
    let run = last_run(repo);
    let exists = |i: usize| {
        let branch = run["workers"][i]["branch"]
            .as_str()
            .unwrap_or("")
            .to_string();
        std::process::Command::new("git")
            .arg("-C")
            .arg(repo.path())
            .args(["rev-parse", "--verify", "--quiet"])
            .arg(format!("refs/heads/{branch}"))
            .output()
            .is_ok_and(|o| o.status.success())
    };
    while (exists(0) || exists(1)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits until `run.json` shows the workers in `expected`. The coordinator hands the record to
/// its saver before the closing turn starts, but the saver writes it in the background: the
/// file may be one save behind for a few ms.
fn wait_for_statuses_on_disk(repo: &TestRepo, expected: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let statuses = || {
        let run = last_run(repo);
        (0..expected.len())
            .map(|i| {
                run["workers"][i]["status"]
                    .as_str()
                    .unwrap_or("")
                    .to_string()
            })
            .collect::<Vec<_>>()
    };
    while statuses() != expected && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The worktree path and branch of worker `index` of `run`.
fn worktree_and_branch(run: &Value, index: usize) -> (PathBuf, String) {
    let w = &run["workers"][index];
    (
        PathBuf::from(w["worktree"].as_str().unwrap()),
        w["branch"].as_str().unwrap().to_string(),
    )
}

/// Whether `branch` exists in `repo`.
fn has_branch(repo: &TestRepo, branch: &str) -> bool {
    !repo.git(&["branch", "--list", branch]).trim().is_empty()
}

/// Asserts that w1's and w2's worktrees and branches are gone, git lists no worktree of theirs,
/// nothing was left aside in the base dir, and w3's (the conflict) branch is kept, with its
/// worktree when `worktree_kept` (`swarm clean` removes a clean worktree whose commits its
/// branch keeps).
fn assert_merged_gone_conflict_kept(repo: &TestRepo, run: &Value, worktree_kept: bool) {
    assert_eq!(run["workers"][0]["status"], "merged", "{run:#}");
    assert_eq!(run["workers"][1]["status"], "merged", "{run:#}");
    assert_eq!(run["workers"][2]["status"], "conflict", "{run:#}");
    let listed = repo.git(&["worktree", "list", "--porcelain"]);
    for i in 0..2 {
        let (worktree, branch) = worktree_and_branch(run, i);
        assert!(!worktree.exists(), "{} is left", worktree.display());
        assert!(!has_branch(repo, &branch), "{branch} is left");
        assert!(
            !listed.contains(worktree.to_str().unwrap()),
            "git still lists {}: {listed}",
            worktree.display()
        );
    }
    let (worktree, branch) = worktree_and_branch(run, 2);
    assert_eq!(worktree.exists(), worktree_kept, "the conflicted worktree");
    assert!(has_branch(repo, &branch), "the conflicted branch is kept");
    let base = worktree.parent().unwrap();
    let leftovers: Vec<String> = std::fs::read_dir(base)
        .into_iter()
        .flatten()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(".removing-") || name.starts_with(".spare-"))
        .collect();
    assert!(leftovers.is_empty(), "left in the base dir: {leftovers:?}");
}

/// Runs [`merged_and_conflicted`] (closing turn at once) to its end (exit 1: w3 conflicts);
/// the repository, the model and the run's record.
fn run_merged_and_conflicted() -> (TestRepo, FakeLlm, Value) {
    let repo = repo_with(&[("README.md", "title\n"), ("a.txt", "a\n"), ("b.txt", "b\n")]);
    let server = start(merged_and_conflicted(0));
    swarm(
        &repo,
        &server,
        &["do it", "--yes", "--permission-mode", "bypass"],
    )
    .assert()
    .code(1);
    let run = last_run(&repo);
    (repo, server, run)
}

/// issue 11.3: after the run (the final record written in the background, the process exiting
/// without waiting for idle threads) merged workers' worktrees and branches are gone and the
/// conflicted worker's are kept.
#[test]
fn merged_work_is_removed_by_the_end_of_the_run_and_a_conflict_is_kept() {
    let (repo, _server, run) = run_merged_and_conflicted();
    assert_eq!(run["status"], "finished", "{run:#}");
    assert_eq!(
        run["synthesis"], "w1 and w2 merged; w3 conflicts",
        "{run:#}"
    );
    assert_merged_gone_conflict_kept(&repo, &run, true);
}

/// A run whose final record cannot be written (its `run.json` replaced by a directory while the
/// closing turn waits) does not report a success that `swarm status` would contradict: a note
/// and the result say why, and the exit status is 1 (130 for a run cancelled then: it stays
/// cancelled, its reason kept). Once the file can be
/// written again, the run shows as interrupted and `resume` records its end.
#[test]
fn a_run_whose_end_cannot_be_recorded_does_not_report_success() {
    for ctrl_c in [false, true] {
        let repo = repo_with(&[("a.txt", "a\n"), ("b.txt", "b\n")]);
        let server = start(both_merged(if ctrl_c { 60_000 } else { 1_500 }));
        let child = spawn_until_closing_turn(&repo, &server, std::process::Stdio::piped);
        wait_for_statuses_on_disk(&repo, &["merged", "merged"]);
        let id = last_run(&repo)["run_id"].as_str().unwrap().to_string();
        let record = runs_dir(&repo).join(&id).join("run.json");
        let aside = record.with_extension("aside");
        std::fs::rename(&record, &aside).unwrap();
        std::fs::create_dir(&record).unwrap();
        std::fs::write(record.join("in-the-way"), "").unwrap();
        if ctrl_c {
            // SAFETY: signalling our own child process.
            unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        }
        let out = child.wait_with_output().unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(
            stdout.contains("note: could not record the run's end: "),
            "{stdout}\n{stderr}"
        );
        assert!(!stdout.contains("Result: success"), "{stdout}");
        if ctrl_c {
            // A cancelled run stays cancelled: 130 and its reason.
            assert_eq!(out.status.code(), Some(130), "{stdout}\n{stderr}");
            assert!(
                stdout.contains("Result: cancelled — cancelled by the user (Ctrl-C)"),
                "{stdout}"
            );
        } else {
            assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
            assert!(
                stdout.contains("Result: FAILED — the run's end could not be recorded: "),
                "{stdout}"
            );
            assert!(
                stdout.contains(&format!("`ahelper swarm resume {id}` records its end")),
                "{stdout}"
            );
        }
        std::fs::remove_dir_all(&record).unwrap();
        std::fs::rename(&aside, &record).unwrap();
        let status = stdout_of(&mut swarm(&repo, &server, &["status", &id]));
        assert!(status.contains("interrupted"), "{status}");
        let server = start(both_merged(0));
        swarm(&repo, &server, &["resume", &id])
            .assert()
            .success()
            .stdout(predicate::str::contains("Result: success"));
        let run = last_run(&repo);
        assert_eq!(run["status"], "finished", "{run:#}");
        assert_eq!(run["synthesis"], "both merged", "{run:#}");
    }
}

/// Ctrl-C (`SIGINT`) or `SIGTERM` while the closing turn waits for a model that answers only
/// after 60 s: the turn is cut short and the run ends promptly as cancelled (exit status 130,
/// the summary says so, `run.json` too), the merged work removed, the conflicted worker's
/// branch and worktree, the integration branch and the transcripts kept; `logs` shows the run
/// and `resume` writes the summary (issue 11.3: the removals still finish).
#[test]
fn ctrl_c_or_sigterm_during_the_closing_turn_cancels_the_run_promptly() {
    let signals = [
        (libc::SIGINT, "Ctrl-C", "cancelled by the user (Ctrl-C)"),
        (libc::SIGTERM, "SIGTERM", "stopped by SIGTERM"),
    ];
    for (signal, name, reason) in signals {
        let repo = repo_with(&[("README.md", "title\n"), ("a.txt", "a\n"), ("b.txt", "b\n")]);
        let server = start(merged_and_conflicted(60_000));
        let child = spawn_until_closing_turn(&repo, &server, std::process::Stdio::piped);
        let signalled = Instant::now();
        // SAFETY: signalling our own child process.
        unsafe { libc::kill(child.id() as i32, signal) };
        let out = child.wait_with_output().unwrap();
        // Far below the model's 60 s: the process did not wait for the reply.
        assert!(signalled.elapsed() < Duration::from_secs(40), "{name}");
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert_eq!(out.status.code(), Some(130), "{name}: {stdout}\n{stderr}");
        assert!(
            stderr.contains(&format!("ahelper: {name} — cancelling run")),
            "{stderr}"
        );
        let run = last_run(&repo);
        let id = run["run_id"].as_str().unwrap().to_string();
        assert!(
            stdout.contains(&format!(
                "Result: cancelled — {reason}; resume with `ahelper swarm resume {id}`."
            )),
            "{name}: {stdout}"
        );
        assert_eq!(run["status"], "cancelled", "{name}: {run:#}");
        assert_eq!(run["error"], reason, "{name}: {run:#}");
        assert!(run["synthesis"].is_null(), "{name}: {run:#}");
        assert_merged_gone_conflict_kept(&repo, &run, true);
        let integration = run["integration_branch"].as_str().unwrap();
        assert!(
            has_branch(&repo, integration),
            "{name}: the integration branch"
        );
        assert!(
            stdout_of(&mut swarm(&repo, &server, &["ls"])).contains("cancelled"),
            "{name}"
        );
        let logs = stdout_of(&mut swarm(&repo, &server, &["logs", &id]));
        assert!(logs.contains("split by file"), "{name}: {logs}");
        let w1 = stdout_of(&mut swarm(&repo, &server, &["logs", &id, "w1"]));
        assert!(w1.contains("write_file"), "{name}: {w1}");
        // Every worker ended: `resume` runs the closing turn (a model that answers at once).
        let server = start(merged_and_conflicted(0));
        swarm(&repo, &server, &["resume", &id])
            .assert()
            .code(1)
            .stderr(predicate::str::contains(
                "every worker has ended; the coordinator writes the run's summary",
            ))
            .stdout(predicate::str::contains("Result: FAILED — "));
        let run = last_run(&repo);
        assert_eq!(run["status"], "finished", "{name}: {run:#}");
        assert_eq!(
            run["synthesis"], "w1 and w2 merged; w3 conflicts",
            "{name}: {run:#}"
        );
    }
}

/// issue 11.3: a run killed while the closing turn waits for the model, with removals
/// under way or done — `kill -9`, or `SIGTERM` twice (the first cancels the run, the second
/// makes ahelper exit at once, unless the cancelled run ended first): the record names every
/// worktree and branch left, and `swarm clean` removes the merged ones and keeps the
/// conflicted worker's branch.
#[test]
fn a_run_killed_during_the_closing_turn_leaves_nothing_clean_does_not_find() {
    for kill in [Kill::SigtermTwice, Kill::Sigkill] {
        let repo = repo_with(&[("README.md", "title\n"), ("a.txt", "a\n"), ("b.txt", "b\n")]);
        let server = start(merged_and_conflicted(30_000));
        let mut child = spawn_until_closing_turn(&repo, &server, std::process::Stdio::null);
        wait_for_the_merges_on_disk(&repo);
        let expected = match kill {
            Kill::SigtermTwice => {
                // SAFETY: signalling our own child process.
                unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
                std::thread::sleep(Duration::from_millis(20));
                unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
                &["running", "cancelled"][..]
            }
            Kill::Sigkill => {
                child.kill().unwrap();
                &["running"][..]
            }
        };
        child.wait().unwrap();
        let run = last_run(&repo);
        assert!(
            expected.iter().any(|s| run["status"] == *s),
            "{kill:?}: {expected:?}: {run:#}"
        );
        let id = run["run_id"].as_str().unwrap().to_string();
        // The conflicted branch has unmerged commits: `clean` keeps it and says so (exit 1).
        swarm(&repo, &server, &["clean", &id]).assert().code(1);
        assert_merged_gone_conflict_kept(&repo, &run, false);
    }
}

/// How a test ends a run.
#[derive(Debug, Clone, Copy)]
enum Kill {
    /// `SIGTERM`, then `SIGTERM` again: ahelper exits at once.
    SigtermTwice,
    /// `kill -9`.
    Sigkill,
}

/// A run killed while the coordinator plans has no plan and no integration branch: `ls` shows
/// `(none)` for the branch, and `status` and the next run say to start a new run and clean this
/// one — not to resume it (`resume` refuses a run without a plan).
#[test]
fn a_swarm_killed_while_planning_is_not_offered_for_resume() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    // 10 s: the `--plan-only` run below waits for this plan too.
    let (server, mut child) = spawn_while_planning(&repo, std::process::Stdio::null, 10_000);
    child.kill().unwrap(); // SIGKILL, while the plan is awaited
    child.wait().unwrap();
    let run = last_run(&repo);
    let id = run["run_id"].as_str().unwrap().to_string();
    assert_eq!(run["status"], "planning", "{run}");

    assert_planless(
        (&repo, &server, &id),
        "interrupted",
        "It stopped while planning and has no plan to resume",
    );
    swarm(&repo, &server, &["resume", &id])
        .assert()
        .failure()
        .stderr(predicate::str::contains("has no plan"));
    swarm(&repo, &server, &["another task", "--plan-only"])
        .assert()
        .success()
        .stderr(predicate::str::contains(format!(
            "Run {id} was interrupted"
        )))
        .stderr(predicate::str::contains("start a new run"))
        .stderr(predicate::str::contains(format!("swarm resume {id}")).not());
    swarm(&repo, &server, &["clean", &id]).assert().success();
}

/// `swarm clean` from a shell whose `XDG_STATE_HOME` differs from the run's (the worktrees
/// were made under the old one): the run's worktrees and base directory are still removed —
/// the base comes from the record, not from today's environment.
#[test]
fn clean_finds_the_worktrees_where_the_run_made_them() {
    let (repo, server, run) = run_merged_and_conflicted();
    let id = run["run_id"].as_str().unwrap().to_string();
    let (worktree, _) = worktree_and_branch(&run, 2);
    assert!(worktree.exists());
    let elsewhere = tempfile::tempdir().unwrap();
    swarm(&repo, &server, &["clean", &id, "--force"])
        .env("XDG_STATE_HOME", elsewhere.path())
        .assert()
        .success();
    assert!(!worktree.exists(), "{} is left", worktree.display());
    assert!(!worktree.parent().unwrap().exists(), "the base dir is left");
}

/// A planted or edited `run.json` (`.ahelper/runs/` is in the repository, so a clone can
/// bring one) cannot point `swarm clean --all --force` at a directory outside the run's: a
/// worker id that is a path, or a record that names another run than its directory's, makes
/// the record unreadable (named, skipped), and the directory it aimed at stays.
#[test]
fn a_planted_record_cannot_make_clean_delete_elsewhere() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let server = start(one_worker(writes_a()));
    let id = run_to_the_end(&repo, &server);
    let record = runs_dir(&repo).join(&id).join("run.json");
    let good: Value = serde_json::from_str(&std::fs::read_to_string(&record).unwrap()).unwrap();
    let victim = repo.path().parent().unwrap().join("victim");
    std::fs::create_dir_all(victim.join("inside")).unwrap();
    let traversal = format!("w1/../../../../../../../../..{}", victim.display());
    let mut planted = good.clone();
    planted["workers"][0]["id"] = json!(traversal);
    planted["workers"][0]["worktree"] = json!("x/b/w1");
    let mut renamed = good.clone();
    renamed["run_id"] = json!("01a00000-0000-7000-8000-000000000000");
    for (bad, says) in [
        (planted, "is not a plain name"),
        (renamed, "but it is in the directory of run"),
    ] {
        std::fs::write(&record, bad.to_string()).unwrap();
        swarm(&repo, &server, &["clean", "--all", "--force"])
            .assert()
            .code(1)
            .stderr(predicate::str::contains(format!("skip {id}: ")))
            .stderr(predicate::str::contains(says));
        assert!(victim.join("inside").is_dir(), "{says}");
    }
}

/// `resume` of a finished run whose integration branch was deleted since: nothing left to do,
/// and it says the branch is gone rather than only repeating the recorded summary.
#[test]
fn resume_of_a_finished_run_says_when_its_integration_branch_is_gone() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let server = start(one_worker(writes_a()));
    let id = run_to_the_end(&repo, &server);
    let branch = format!("ahelper/{id}/integration");
    repo.git(&["branch", "-D", &branch]);
    swarm(&repo, &server, &["resume", &id])
        .assert()
        .success()
        .stderr(predicate::str::contains("has nothing left to do"))
        .stderr(predicate::str::contains(format!(
            "Its integration branch {branch} no longer exists"
        )));
}

/// Ctrl-C while the coordinator plans: the run ends `cancelled` (exit status 130, the reason
/// in its record), not "could not produce a valid plan" (exit status 1, `failed`); `status`
/// says to start a new run, not to resume it.
#[test]
fn ctrl_c_while_planning_cancels_the_run() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let (server, child) = spawn_while_planning(&repo, std::process::Stdio::piped, 30_000);
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    let run = last_run(&repo);
    let id = run["run_id"].as_str().unwrap().to_string();
    assert!(
        stderr.contains(&format!(
            "run {id} cancelled by the user (Ctrl-C) while the coordinator was planning; nothing was started"
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("valid plan"), "{stderr}");
    assert_eq!(run["status"], "cancelled", "{run}");
    assert_eq!(run["error"], "cancelled by the user (Ctrl-C)", "{run}");
    assert_planless(
        (&repo, &server, &id),
        "cancelled",
        "It ended while planning (cancelled by the user (Ctrl-C))",
    );
}

/// Starts `swarm` (output made by `output`) against a coordinator whose plan takes
/// `plan_delay_ms`, and returns once the planning request reached the model.
fn spawn_while_planning(
    repo: &TestRepo,
    output: fn() -> std::process::Stdio,
    plan_delay_ms: u64,
) -> (FakeLlm, std::process::Child) {
    let slow_plan = plan_turn(json!([subtask("s1", "a.txt")])).with_delay_ms(plan_delay_ms);
    let server = start(coordinator(slow_plan).with_conversation(worker("s1", writes_a())));
    let child = spawn_swarm_with_output(repo, &server, output);
    let deadline = Instant::now() + Duration::from_secs(60);
    while server.model_requests().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    (server, child)
}

/// Run `id`, which ended before it had a plan: `ls` shows it in `state` with no integration
/// branch (`(none)`), and `status` gives `advice` and says to clean it, not to resume it.
fn assert_planless((repo, server, id): (&TestRepo, &FakeLlm, &str), state: &str, advice: &str) {
    let ls = stdout_of(&mut swarm(repo, server, &["ls"]));
    let line = ls.lines().find(|l| l.starts_with(id)).unwrap();
    assert!(line.contains(state) && line.contains("(none)"), "{ls}");
    let status = stdout_of(&mut swarm(repo, server, &["status", id]));
    assert!(
        status.contains(advice)
            && status.contains(&format!("`ahelper swarm clean {id}`"))
            && !status.contains("swarm resume"),
        "{status}"
    );
}

/// A run whose record cannot be read does not vanish: `ls` lists it as `unreadable` and says why
/// on stderr; `status`, `resume` and `clean` of its id, and `status` of the latest run, say
/// that its record is not valid instead of "no run matches" (or showing an older run); `clean
/// --all` skips it and says so.
#[test]
fn a_run_with_an_unreadable_record_is_listed_and_named() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let server = start(one_worker(writes_a()));
    let id = run_to_the_end(&repo, &server);
    let record = runs_dir(&repo).join(&id).join("run.json");
    let text = std::fs::read_to_string(&record).unwrap();
    std::fs::write(&record, &text[..text.len() / 2]).unwrap();

    let not_valid = format!("{} is not a valid run record", record.display());
    let out = swarm(&repo, &server, &["ls"]).output().unwrap();
    assert!(out.status.success());
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    let line = stdout.lines().find(|l| l.starts_with(&id)).unwrap();
    assert!(line.contains("unreadable"), "{stdout}");
    assert!(stderr.contains(&not_valid), "{stderr}");
    for command in [
        &["status", &id[..13]][..],
        &["status"],
        &["resume", &id],
        &["clean", &id],
    ] {
        swarm(&repo, &server, command)
            .assert()
            .failure()
            .stderr(predicate::str::contains(&not_valid))
            .stderr(predicate::str::contains("no run matches").not());
    }
    // `clean --all` names it, keeps its directory and says something was kept (exit 1).
    swarm(&repo, &server, &["clean", "--all"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(format!("skip {id}: {not_valid}")));
    assert!(record.exists());
}

/// `swarm clean --force` deletes only the run's own branches (`ahelper/<run>/…`): a user's
/// branch named as a worker's in an edited (or planted) `run.json` is kept and named.
#[test]
fn clean_never_deletes_a_branch_that_is_not_the_runs() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let server = start(one_worker(writes_a()));
    let id = run_to_the_end(&repo, &server);
    repo.git(&["branch", "userwork"]);
    let record = runs_dir(&repo).join(&id).join("run.json");
    let mut run: Value = serde_json::from_str(&std::fs::read_to_string(&record).unwrap()).unwrap();
    run["workers"][0]["branch"] = json!("userwork");
    std::fs::write(&record, run.to_string()).unwrap();
    // Something asked for was kept: exit 1.
    let out = swarm(&repo, &server, &["clean", &id, "--force"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let out = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.contains("kept branch userwork") && out.contains("not one of the run's branches"),
        "{out}"
    );
    assert_eq!(
        repo.git(&["branch", "--list", "userwork"]).trim(),
        "userwork"
    );
}

/// A mistyped subcommand is not a paid run: without a terminal it is refused with the
/// suggestion, and nothing is planned (issue 31 item 6).
#[test]
fn a_one_word_task_close_to_a_subcommand_is_refused_without_a_terminal() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let server = start(one_worker(writes_a()));
    swarm(&repo, &server, &["stauts"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "it looks like the subcommand `status` mistyped; run `ahelper swarm status`",
        ));
    assert!(server.model_requests().is_empty(), "no model request");
    assert!(!runs_dir(&repo).exists(), "no run");
}

/// A run that never started leaves nothing `swarm clean` keeps (issue 31 item 6).
#[test]
fn a_run_that_never_started_is_cleaned_without_force() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let server = start(one_worker(writes_a()));
    swarm(
        &repo,
        &server,
        &["do it", "--plan-only", "--verify", "true"],
    )
    .assert()
    .success();
    let id = last_run(&repo)["run_id"].as_str().unwrap().to_string();
    let out = swarm(&repo, &server, &["clean", &id])
        .assert()
        .get_output()
        .clone();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!stdout.contains("kept branch"), "{stdout}");
    let branches = repo.git(&["branch", "--list", &format!("ahelper/{id}/*")]);
    assert!(branches.trim().is_empty(), "{branches}");
}

/// On a terminal a one-word task close to a subcommand asks first; `n` starts nothing.
#[test]
fn a_one_word_task_close_to_a_subcommand_asks_on_a_terminal() {
    use super::support::tmux::Tmux;
    let repo = repo_with(&[("a.txt", "a\n")]);
    let server = start(one_worker(writes_a()));
    let tmux = Tmux::start_then(&repo, &server, &["swarm", "stauts"], Some("echo exit=$?"));
    tmux.wait_for("`stauts` looks like the subcommand `status` mistyped");
    tmux.type_text("n");
    tmux.press("Enter");
    let screen = tmux.wait_for("exit=");
    assert!(
        screen.contains("Not started. For the subcommand: `ahelper swarm status`."),
        "{screen}"
    );
    assert!(server.model_requests().is_empty(), "no model request");
    assert!(!runs_dir(&repo).exists(), "no run");
}

/// `swarm logs w1 --follow` while the run plans waits for the plan, saying so, then follows
/// the worker (issue 31 item 7).
#[test]
fn logs_follow_of_a_worker_waits_for_the_plan() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let plan = plan_turn(json!([subtask("s1", "a.txt")])).with_delay_ms(3000);
    let server = start(coordinator(plan).with_conversation(worker("s1", writes_a())));
    let mut child = spawn_swarm(&repo, &server);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !(std::fs::read_dir(runs_dir(&repo)).is_ok_and(|mut d| d.next().is_some())
        && std::panic::catch_unwind(|| last_run(&repo)).is_ok_and(|r| r["status"] == "planning"))
    {
        assert!(Instant::now() < deadline, "the run never planned");
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = swarm(&repo, &server, &["logs", "w1", "--follow"])
        .timeout(Duration::from_secs(120))
        .assert()
        .success()
        .get_output()
        .clone();
    assert!(child.wait().unwrap().success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("is still planning; waiting for its plan to follow w1"),
        "{stderr}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("a.txt"),
        "the worker's transcript: {stdout}"
    );
}

/// `swarm resume` keeps the run's `--allowedTools` and its permission mode, named as users
/// write them (issue 31 item 8).
#[test]
fn resume_keeps_the_runs_allowed_tools_and_names_the_mode() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let server = start(one_worker([
        runs("touch b.txt"),
        writes("a.txt", "A\n"),
        Turn::text("done"),
    ]));
    swarm(
        &repo,
        &server,
        &[
            "do it",
            "--plan-only",
            "--permission-mode",
            "accept-edits",
            "--allowedTools",
            "Bash(touch:*)",
        ],
    )
    .assert()
    .success();
    let id = last_run(&repo)["run_id"].as_str().unwrap().to_string();
    let out = swarm(&repo, &server, &["resume", &id])
        .assert()
        .get_output()
        .clone();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("Using the run's permission mode `accept-edits`"),
        "{stderr}"
    );
    assert!(
        stderr.contains("Using the run's --allowedTools 'run_command(touch:*)'."),
        "{stderr}"
    );
    assert!(!stdout.contains("refused"), "{stdout}");
    let run = last_run(&repo);
    let integration = run["integration_branch"].as_str().unwrap();
    assert_eq!(repo.git(&["show", &format!("{integration}:a.txt")]), "A\n");
    repo.git(&["cat-file", "-e", &format!("{integration}:b.txt")]);
}

/// A rule written into `run.json` by someone else is refused at resume: the rules are sealed
/// outside the repository like the permission mode.
#[test]
fn resume_refuses_rules_added_to_run_json() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let server = start(one_worker(writes_a()));
    swarm(&repo, &server, &["do it", "--plan-only"])
        .assert()
        .success();
    let id = last_run(&repo)["run_id"].as_str().unwrap().to_string();
    let path = runs_dir(&repo).join(&id).join("run.json");
    let mut run: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    run["session_rules"] = json!({"allow": ["run_command"]});
    std::fs::write(&path, run.to_string()).unwrap();
    swarm(&repo, &server, &["resume", &id])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("session_rules"));
}
