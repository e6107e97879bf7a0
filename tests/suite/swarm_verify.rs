//! End-to-end tests of a verified swarm run (issue 7): the built binary, the fake model playing
//! the scenario scripts of `suite/support/pyproject.rs` (it decides by what is on disk in each
//! agent's working directory), temporary git repositories verified with the real
//! `python3 -m unittest`.

use super::support::pyproject::*;
use super::support::*;
use ahelper_fake_llm::FakeLlm;
use serde_json::Value;
use std::path::Path;

/// Writes the repository's `.ahelper/config.toml` (its `swarm.verify` applies only with
/// `--trust-project`: a project's verification command is a command ahelper runs).
fn config(repo: &TestRepo, command: &str, timeout_s: u64, fix_rounds: u32, fix_attempts: u32) {
    repo.write(
        ".ahelper/config.toml",
        &format!(
            "[swarm]\nverify = \"{}\"\nverify_timeout_s = {timeout_s}\nworker_fix_rounds = {fix_rounds}\nmerge_fix_attempts = {fix_attempts}\n",
            command.replace('\\', "\\\\").replace('"', "\\\"")
        ),
    );
}

/// Runs `ahelper swarm --trust-project <task> --yes --permission-mode bypass extra…` against
/// `server` (up to 300 s); (exit code, stdout, stderr).
fn swarm_run(
    repo: &TestRepo,
    server: &FakeLlm,
    task: &str,
    extra: &[&str],
) -> (i32, String, String) {
    let args = ["swarm", "--trust-project", task, "--yes"];
    outcome_of(
        ahelper(repo, server, Wire::Anthropic)
            .args(args)
            .args(["--permission-mode", "bypass"])
            .args(extra)
            .timeout(std::time::Duration::from_secs(300)),
    )
}

/// Runs `ahelper swarm --trust-project "do the task" --yes --permission-mode bypass` with the
/// scenario `script_name`; (exit code, stdout, stderr).
fn run_swarm(repo: &TestRepo, script_name: &str) -> (i32, String, String) {
    swarm_run(repo, &start(script(script_name)), "do the task", &[])
}

/// `ahelper swarm resume <run_id> --trust-project`: (exit code, stdout, stderr).
fn resume(repo: &TestRepo, server: &FakeLlm, run_id: &str) -> (i32, String, String) {
    outcome_of(ahelper(repo, server, Wire::Anthropic).args([
        "swarm",
        "resume",
        run_id,
        "--trust-project",
    ]))
}

/// Runs the scenario `script_name` as [`run_swarm`] does, checks that it exits with `code`, and
/// returns (stdout, stderr, the run's record).
fn run_scenario(repo: &TestRepo, script_name: &str, code: i32) -> (String, String, Value) {
    let (exit, stdout, stderr) = run_swarm(repo, script_name);
    assert_eq!(exit, code, "stdout:\n{stdout}\nstderr:\n{stderr}");
    (stdout, stderr, last_run(repo))
}

/// Writes the `python3 -m unittest` verification config (120 s, default fix rounds), then runs
/// the scenario `script_name` as [`run_scenario`] does.
fn run_verified_scenario(repo: &TestRepo, script_name: &str, code: i32) -> (String, String, Value) {
    write_verify_config(repo, UNITTEST, 120);
    run_scenario(repo, script_name, code)
}

/// Runs the scenario `script_name` on the calculator repository verified by
/// `python3 -m unittest` (120 s) with two worker fix rounds and one merge fix attempt, and
/// checks that it exits with `code`; (the repository, the run's record).
fn with_two_fix_rounds(script_name: &str, code: i32) -> (TestRepo, Value) {
    let repo = calc_repo();
    config(&repo, UNITTEST, 120, 2, 1);
    let (_, _, run) = run_scenario(&repo, script_name, code);
    (repo, run)
}

/// The calculator repository verified by `verify` (120 s) and the semantic-conflict scenario.
fn semantic_conflict_verified_by(verify: &str) -> (TestRepo, FakeLlm) {
    let repo = calc_repo();
    write_verify_config(&repo, verify, 120);
    (repo, start(script("swarm-semantic-conflict")))
}

/// `python3 -m unittest` on `rev` of the repository, in a fresh worktree: (passed, output).
fn unittest_at(repo: &TestRepo, rev: &str) -> (bool, String) {
    let dir = repo
        .dir
        .path()
        .join(format!("check-{}", rev.replace('/', "-")));
    repo.git(&[
        "worktree",
        "add",
        "-q",
        "--detach",
        dir.to_str().unwrap(),
        rev,
    ]);
    let out = std::process::Command::new("python3")
        .args(["-m", "unittest"])
        .current_dir(&dir)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.success(), text)
}

fn last_line(stdout: &str) -> &str {
    stdout.trim_end().lines().last().unwrap_or("")
}

fn branch_exists(repo: &TestRepo, branch: &str) -> bool {
    std::process::Command::new("git")
        .args([
            "rev-parse",
            "--verify",
            "-q",
            &format!("refs/heads/{branch}"),
        ])
        .current_dir(repo.path())
        .status()
        .unwrap()
        .success()
}

/// Worker `id`'s transcript in `run` (empty when it has none).
fn transcript(repo: &TestRepo, run: &Value, id: &str) -> String {
    std::fs::read_to_string(worker_transcript(repo, run, id)).unwrap_or_default()
}

#[test]
fn a_semantic_conflict_between_green_branches_is_caught_and_fixed() {
    let repo = calc_repo();
    let (stdout, _, run) = run_verified_scenario(&repo, "swarm-semantic-conflict", 0);
    let integration = run["integration_branch"].as_str().unwrap();
    // both merged; the integration branch passes the project's tests
    assert_eq!(worker_record(&run, "w1")["status"], "merged");
    assert_eq!(worker_record(&run, "w2")["status"], "merged");
    let (passed, output) = unittest_at(&repo, integration);
    assert!(passed, "{output}");
    let report = repo.git(&["show", &format!("{integration}:report.py")]);
    assert!(
        report.contains("calc.plus") && !report.contains("calc.add"),
        "{report}"
    );
    // the fixer did it, in its own worktree and branch, with a transcript
    let helpers = run["helpers"].as_array().unwrap();
    assert_eq!(helpers.len(), 1, "{helpers:#?}");
    assert_eq!(helpers[0]["id"], "fix-1");
    assert_eq!(helpers[0]["worker"], "w2");
    assert_eq!(helpers[0]["merged"], true);
    assert!(transcript(&repo, &run, "fix-1").contains("run_command"));
    // merged with its worker: its worktree and branch went with the worker's
    assert!(!Path::new(helpers[0]["worktree"].as_str().unwrap()).exists());
    assert!(!branch_exists(
        &repo,
        helpers[0]["branch"].as_str().unwrap()
    ));
    // the synthesis and every worker's own summary are printed; the last lines state verification
    assert!(
        stdout.contains("Renamed calc.add to calc.plus and added report.total"),
        "{stdout}"
    );
    assert!(stdout.contains("Renamed calc.add to calc.plus in calc.py and test_calc.py."));
    assert!(stdout.contains("Added report.py (total sums with calc.add) and test_report.py."));
    assert!(stdout.contains("it now calls calc.plus"), "{stdout}");
    assert!(
        stdout.contains("integration branch verified: python3 -m unittest passed"),
        "{stdout}"
    );
    assert!(
        last_line(&stdout).starts_with("Result: success"),
        "{stdout}"
    );
    assert!(run["synthesis"].as_str().unwrap().contains("fixer adapted"));
    // the user's checkout is untouched
    assert_eq!(repo.file("calc.py"), CALC);
    // swarm logs shows the fixer's and the coordinator's transcripts
    let server = start(script("swarm-semantic-conflict"));
    let run_id = run["run_id"].as_str().unwrap();
    for who in ["fix-1", "coordinator"] {
        ahelper(&repo, &server, Wire::Anthropic)
            .args(["swarm", "logs", run_id, who])
            .assert()
            .success();
    }
    // swarm status keeps the synthesis; clean removes the verification and fixer worktrees
    let status = ahelper(&repo, &server, Wire::Anthropic)
        .args(["swarm", "status", run_id])
        .output()
        .unwrap();
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(status.contains("fixer adapted"), "{status}");
    assert!(status.contains("verification worktree"), "{status}");
    ahelper(&repo, &server, Wire::Anthropic)
        .args(["swarm", "clean", run_id])
        .assert()
        .success();
    let worktrees = repo.git(&["worktree", "list"]);
    assert!(!worktrees.contains("ahelper/worktrees"), "{worktrees}");
    assert!(!branch_exists(
        &repo,
        helpers[0]["branch"].as_str().unwrap()
    ));
}

#[test]
fn a_fixer_that_fails_leaves_the_branch_unmerged_and_the_run_fails() {
    let repo = calc_repo();
    let (stdout, _, run) = run_verified_scenario(&repo, "swarm-semantic-conflict-fixer-fails", 1);
    let w2 = worker_record(&run, "w2");
    assert_eq!(w2["status"], "verify_failed", "{w2:#}");
    assert!(
        w2["verify_output"].as_str().unwrap().contains("calc"),
        "{w2:#}"
    );
    assert!(w2["verification"].as_str().unwrap().contains("test_report"));
    // nothing is lost: its branch is kept; the integration branch has only w1 and is green
    assert!(branch_exists(&repo, w2["branch"].as_str().unwrap()));
    let integration = run["integration_branch"].as_str().unwrap();
    assert!(unittest_at(&repo, integration).0);
    assert!(
        repo.git(&["ls-tree", "--name-only", integration])
            .lines()
            .all(|f| f != "report.py")
    );
    // two fixer attempts (merge_fix_attempts defaults to 2)
    assert_eq!(run["helpers"].as_array().unwrap().len(), 2);
    assert!(stdout.contains("verify failed"), "{stdout}");
    // the status lines say which attempt is under way
    assert!(stdout.contains("[w2] fixing 1/2"), "{stdout}");
    assert!(stdout.contains("[w2] fixing 2/2"), "{stdout}");
    let last = last_line(&stdout);
    assert!(last.starts_with("Result: FAILED"), "{stdout}");
    assert!(last.contains("w2 verify failed"), "{last}");
}

#[test]
fn a_test_failing_at_the_base_is_named_as_pre_existing_and_blocks_nothing() {
    let repo = calc_repo_failing_at_base();
    let (stdout, stderr, run) = run_verified_scenario(&repo, "swarm-failing-at-base", 0);
    assert_eq!(worker_record(&run, "w1")["status"], "merged");
    // announced when the baseline ends, among the run's events
    assert!(
        stdout.contains("fails at the base commit"),
        "{stdout}\n{stderr}"
    );
    assert!(stdout.contains(TEST_LEGACY_NAME), "{stdout}");
    let lines: Vec<&str> = stdout.trim_end().lines().collect();
    let verification = lines[lines.len() - 2];
    assert_eq!(
        verification,
        format!(
            "integration branch verified: python3 -m unittest passed (1 failure already at the base: {TEST_LEGACY_NAME})"
        )
    );
    assert!(run["helpers"].as_array().unwrap().is_empty());
}

#[test]
fn a_hanging_verification_is_killed_at_its_timeout() {
    let repo = calc_repo();
    // 10 s: the baseline runs beside the workers and their verifications; on a loaded machine
    // a trivial `python3 -m unittest` alone takes seconds.
    config(&repo, UNITTEST, 10, 0, 1);
    let started = std::time::Instant::now();
    let (code, stdout, stderr) = run_swarm(&repo, "swarm-hanging-test");
    assert_eq!(code, 1, "stdout:\n{stdout}\nstderr:\n{stderr}");
    // an hour-long test did not hold the run: every verification stopped at 10 s
    assert!(started.elapsed().as_secs() < 240, "{:?}", started.elapsed());
    let run = last_run(&repo);
    let slow = worker_record(&run, "w1");
    assert_eq!(slow["status"], "verify_failed", "{slow:#}");
    assert!(
        slow["verification"].as_str().unwrap().contains("timed out"),
        "{slow:#}"
    );
    assert!(
        slow["report"]["verification"]
            .as_str()
            .unwrap()
            .contains("timed out")
    );
    assert_eq!(worker_record(&run, "w2")["status"], "merged");
    assert!(last_line(&stdout).contains("w1 verify failed"), "{stdout}");
}

#[test]
fn a_missing_verify_program_fails_before_anything_starts() {
    let (repo, server) = semantic_conflict_verified_by(MISSING_VERIFY);
    assert_usage_error(
        ahelper(&repo, &server, Wire::Anthropic).args([
            "swarm",
            "do the task",
            "--yes",
            "--trust-project",
        ]),
        &["no-such-test-runner", "cannot start"],
    );
    // nothing was created: no run, no worktree, no branch, no model request
    assert!(!repo.path().join(".ahelper/runs").exists());
    assert_eq!(repo.git(&["worktree", "list"]).lines().count(), 1);
    assert_eq!(repo.git(&["branch", "--list"]).lines().count(), 1);
    assert!(server.requests().is_empty());
    assert!(!Path::new(&repo.home().join("state/ahelper/worktrees")).exists());
}

/// An untrusted project's `swarm.verify` is not run: ahelper names it in a warning and uses the
/// detected command.
#[test]
fn an_untrusted_project_verify_command_is_not_run() {
    let (repo, server) = semantic_conflict_verified_by(MISSING_VERIFY);
    let (_, stdout, stderr) = outcome_of(
        ahelper(&repo, &server, Wire::Anthropic)
            .args(["swarm", "do the task", "--yes"])
            .args(["--permission-mode", "bypass"])
            .timeout(std::time::Duration::from_secs(300)),
    );
    assert!(!stderr.contains("no-such-test-runner"), "{stderr}");
    assert!(stderr.contains("swarm.verify"), "{stderr}");
    assert!(stderr.contains("ahelper trust"), "{stderr}");
    assert!(
        format!("{stdout}{stderr}").contains("verify: `python3 -m unittest` (detected"),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
}

#[test]
fn the_worker_self_fix_rounds_stop_at_their_bound() {
    let (repo, run) = with_two_fix_rounds("swarm-worker-self-fix-exhausted", 1);
    let w1 = worker_record(&run, "w1");
    assert_eq!(w1["report"]["fix_rounds"], 2, "{w1:#}");
    assert!(
        w1["report"]["verification"]
            .as_str()
            .unwrap()
            .contains("new failure"),
        "{w1:#}"
    );
    let log = transcript(&repo, &run, "w1");
    assert!(log.contains("fix round 1 of 2"));
    assert!(log.contains("fix round 2 of 2"));
    assert!(!log.contains("fix round 3"));
    assert_eq!(w1["status"], "verify_failed");
}

#[test]
fn a_worker_fixes_its_own_tests_in_its_first_fix_round() {
    let (repo, run) = with_two_fix_rounds("swarm-worker-self-fix", 0);
    let w1 = worker_record(&run, "w1");
    assert_eq!(w1["status"], "merged");
    assert_eq!(w1["report"]["fix_rounds"], 1, "{w1:#}");
    assert_eq!(
        w1["report"]["verification"], "python3 -m unittest passed",
        "{w1:#}"
    );
    assert!(unittest_at(&repo, run["integration_branch"].as_str().unwrap()).0);
}

#[test]
fn a_textual_conflict_is_resolved_by_the_merger_and_verified() {
    let repo = calc_repo();
    let (stdout, _, run) = run_verified_scenario(&repo, "swarm-textual-conflict", 0);
    assert_eq!(worker_record(&run, "w1")["status"], "merged");
    assert_eq!(worker_record(&run, "w2")["status"], "merged");
    let helpers = run["helpers"].as_array().unwrap();
    assert_eq!(helpers[0]["id"], "merge-1", "{helpers:#?}");
    assert_eq!(helpers[0]["role"], "merger");
    let integration = run["integration_branch"].as_str().unwrap();
    let calc = repo.git(&["show", &format!("{integration}:calc.py")]);
    assert!(
        calc.contains("def mul") && calc.contains("def sub"),
        "{calc}"
    );
    assert!(!calc.contains("<<<<<<<"), "{calc}");
    // a real merge: both workers' commits are in the integration branch
    for w in ["w1", "w2"] {
        let branch_commit = worker_record(&run, w)["report"]["commit"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            std::process::Command::new("git")
                .args(["merge-base", "--is-ancestor", &branch_commit, integration])
                .current_dir(repo.path())
                .status()
                .unwrap()
                .success()
        );
    }
    let (passed, output) = unittest_at(&repo, integration);
    assert!(passed, "{output}");
    assert!(stdout.contains("integration branch verified"), "{stdout}");
}

#[test]
fn without_a_test_suite_verification_is_off_and_says_so() {
    let repo = repo_with(&[("notes.txt", "a\n")]);
    let server = start(
        ahelper_fake_llm::Script::from_json_str(
            r##"{"conversations": [
            {"match": "# Swarm run finished", "turns": [{"text": "Edited the notes."}]},
            {"match": "You are the coordinator of a swarm", "turns": [{"text": "{\"summary\": \"s\", \"subtasks\": [{\"id\": \"n\", \"title\": \"Edit notes\", \"instructions\": \"Edit notes.txt.\", \"scope\": [\"notes.txt\"]}]}"}]},
            {"match": "Your subtask `n`", "turns": [
                {"tool_calls": [{"name": "write_file", "arguments": {"path": "notes.txt", "content": "b\n"}}]},
                {"text": "Edited notes.txt."}]}
        ]}"##,
        )
        .unwrap(),
    );
    let (code, stdout, _) = swarm_run(&repo, &server, "edit notes", &[]);
    assert_eq!(code, 0, "{stdout}");
    let lines: Vec<&str> = stdout.trim_end().lines().collect();
    assert!(
        lines[lines.len() - 2].starts_with("verification off: no test command found"),
        "{stdout}"
    );
}

#[test]
fn a_plan_that_stays_a_chain_over_the_same_files_runs_as_one_worker() {
    let repo = calc_repo();
    let chain = r#"{\"summary\": \"Add mul, then test it.\", \"subtasks\": [{\"id\": \"mul\", \"title\": \"Add calc.mul\", \"instructions\": \"Add mul(a, b) to calc.py.\", \"scope\": [\"calc.py\"]}, {\"id\": \"mul-test\", \"title\": \"Add a test of calc.mul\", \"instructions\": \"Add test_mul to test_calc.py.\", \"scope\": [\"calc.py\", \"test_calc.py\"], \"depends_on\": [\"mul\"]}]}"#;
    let server = start(
        ahelper_fake_llm::Script::from_json_str(&format!(
            r##"{{"conversations": [
            {{"match": "# Swarm run finished", "turns": [{{"text": "Added calc.mul."}}]}},
            {{"match": "You are the coordinator of a swarm", "turn_index": "assistant_messages", "turns": [{{"text": "{chain}"}}, {{"text": "{chain}"}}]}},
            {{"match": "Your subtask `mul`", "turns": [
                {{"tool_calls": [{{"name": "run_command", "arguments": {{"command": "printf '\\n\\ndef mul(a, b):\\n    return a * b\\n' >> calc.py"}}}}]}},
                {{"text": "Added calc.mul."}}]}}
        ]}}"##
        ))
        .unwrap(),
    );
    let (code, stdout, stderr) = swarm_run(&repo, &server, "add mul", &["--verify", UNITTEST]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(
        stdout.contains("running it as one worker"),
        "{stdout}\n{stderr}"
    );
    let run = last_run(&repo);
    let subtasks = run["plan"]["subtasks"].as_array().unwrap();
    assert_eq!(subtasks.len(), 1, "{subtasks:#?}");
    assert_eq!(
        subtasks[0]["scope"],
        serde_json::json!(["calc.py", "test_calc.py"])
    );
    // the re-ask told the coordinator what was wrong
    let reasked = server.model_requests().iter().any(|r| {
        r.body
            .to_string()
            .contains("chain of steps over the same files")
    });
    assert!(reasked);
    assert_eq!(worker_record(&run, "w1")["status"], "merged");
}

#[test]
fn resume_keeps_the_runs_verification_and_runs_its_baseline() {
    let repo = calc_repo();
    let server = start(script("swarm-semantic-conflict"));
    // planned with --verify, nothing started
    ahelper(&repo, &server, Wire::Anthropic)
        .args([
            "swarm",
            "--trust-project",
            "do the task",
            "--plan-only",
            "--permission-mode",
            "bypass",
            "--verify",
            UNITTEST,
        ])
        .assert()
        .success();
    let planned = last_run(&repo);
    assert_eq!(planned["verify"]["command"], UNITTEST, "{planned:#}");
    assert!(planned["baseline"].is_null());
    // resumed without the flag (and no [swarm] verify): the run's own choice is kept
    let run_id = planned["run_id"].as_str().unwrap();
    let (code, stdout, stderr) = resume(&repo, &server, run_id);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    assert!(
        stdout.contains("integration branch verified: python3 -m unittest passed"),
        "{stdout}"
    );
    let run = last_run(&repo);
    assert_eq!(run["baseline"]["outcome"]["outcome"], "passed", "{run:#}");
    assert_eq!(run["helpers"][0]["id"], "fix-1");
}

#[test]
fn a_merger_that_leaves_the_markers_keeps_both_branches_and_prints_the_commands() {
    let repo = calc_repo();
    write_verify_config(&repo, UNITTEST, 120);
    // the textual-conflict scenario with a merger that gives up
    let mut json: Value = serde_json::from_str(
        &std::fs::read_to_string(script_path("swarm-textual-conflict")).unwrap(),
    )
    .unwrap();
    let merger = json["conversations"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|c| c["name"] == "merger")
        .unwrap();
    merger["turns"] = serde_json::json!([{"text": "I could not resolve calc.py."}]);
    let server = start(ahelper_fake_llm::Script::from_json_str(&json.to_string()).unwrap());
    let (code, stdout, _) = swarm_run(&repo, &server, "do the task", &[]);
    assert_eq!(code, 1, "{stdout}");
    let run = last_run(&repo);
    let w2 = worker_record(&run, "w2");
    assert_eq!(w2["status"], "conflict", "{w2:#}");
    assert_eq!(run["helpers"][0]["id"], "merge-1");
    assert!(branch_exists(&repo, w2["branch"].as_str().unwrap()));
    assert!(
        stdout.contains(&format!("git merge {}", w2["branch"].as_str().unwrap())),
        "{stdout}"
    );
    assert!(last_line(&stdout).contains("w2 conflict"), "{stdout}");
}

#[test]
fn ctrl_c_during_a_verification_stops_at_once_and_resume_merges_the_finished_branch() {
    let repo = calc_repo();
    // The marker lives outside the worktree, where commands may write only when the user's
    // config lists the directory (the shared temp dir is not writable for commands).
    let marks = repo.dir.path().join("marks");
    std::fs::create_dir_all(&marks).unwrap();
    let user_config = repo.home().join("config/ahelper/config.toml");
    std::fs::create_dir_all(user_config.parent().unwrap()).unwrap();
    std::fs::write(
        &user_config,
        format!("[sandbox]\nwritable = [\"{}\"]\n", marks.display()),
    )
    .unwrap();
    let mark = marks.join("verify-started");
    // the first verification of a tree with stats.py (the worker's self-check) hangs until
    // it is stopped; later ones pass
    let verify = format!(
        "python3 -c 'import os, time, unittest; m = \"{}\"; (os.path.exists(\"stats.py\") and not os.path.exists(m)) and (open(m, \"w\").close() or time.sleep(120)); unittest.main(module=None, argv=[\"x\", \"discover\"])'",
        mark.display()
    );
    config(&repo, &verify, 300, 2, 1);
    let server = start(script("swarm-failing-at-base"));
    let child = spawn_ahelper(
        &repo,
        &server,
        &[
            "swarm",
            "do it",
            "--yes",
            "--permission-mode",
            "bypass",
            "--trust-project",
        ],
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !mark.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "no verification started"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let stopped = std::time::Instant::now();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(130),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stopped.elapsed().as_secs() < 60, "{:?}", stopped.elapsed());
    let run = last_run(&repo);
    assert_eq!(worker_record(&run, "w1")["status"], "finished", "{run:#}");
    let worker_requests = |server: &ahelper_fake_llm::FakeLlm| {
        server
            .model_requests()
            .iter()
            .filter(|r| r.body.to_string().contains("Your subtask `stats`"))
            .count()
    };
    let before = worker_requests(&server);
    // resume merges the committed branch through the gate without running the worker again
    let run_id = run["run_id"].as_str().unwrap();
    let (code, stdout, _) = resume(&repo, &server, run_id);
    assert_eq!(code, 0, "{stdout}");
    assert_eq!(worker_record(&last_run(&repo), "w1")["status"], "merged");
    assert_eq!(
        worker_requests(&server),
        before,
        "the worker did not run again"
    );
    assert!(stdout.contains("integration branch verified"), "{stdout}");
}

#[test]
fn a_plan_with_two_chains_over_the_same_file_is_re_asked_naming_them_and_the_path() {
    let repo = calc_repo();
    // What a real model planned: parse → parse-use and print → print-use, all on calc.py.
    let subtask = |id: &str, deps: &str| {
        format!(
            r#"{{\"id\": \"{id}\", \"title\": \"Add calc.{id}\", \"instructions\": \"Add {id} to calc.py.\", \"scope\": [\"calc.py\"], \"depends_on\": [{deps}]}}"#
        )
    };
    let two_chains = format!(
        r#"{{\"summary\": \"Two features in calc.py.\", \"subtasks\": [{}, {}, {}, {}]}}"#,
        subtask("parse", ""),
        subtask("parse_use", r#"\"parse\""#),
        subtask("show", ""),
        subtask("show_use", r#"\"show\""#)
    );
    let split = r#"{\"summary\": \"Split by file.\", \"subtasks\": [{\"id\": \"calc\", \"title\": \"Add calc.mul\", \"instructions\": \"Add mul(a, b) to calc.py.\", \"scope\": [\"calc.py\"]}, {\"id\": \"tests\", \"title\": \"Add a test of mul\", \"instructions\": \"Add test_mul.py.\", \"scope\": [\"test_mul.py\"]}]}"#;
    let server = start(
        ahelper_fake_llm::Script::from_json_str(&format!(
            r##"{{"conversations": [
            {{"match": "You are the coordinator of a swarm", "turn_index": "assistant_messages", "turns": [{{"text": "{two_chains}"}}, {{"text": "{split}"}}]}}
        ]}}"##
        ))
        .unwrap(),
    );
    let (code, stdout, stderr) = outcome_of(ahelper(&repo, &server, Wire::Anthropic).args([
        "swarm",
        "add features",
        "--plan-only",
        "--no-verify",
    ]));
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let expected =
        "subtasks `parse` and `show` both change `calc.py` but neither depends on the other";
    assert!(stdout.contains(expected), "{stdout}\n{stderr}");
    // the re-ask sent exactly that to the coordinator
    let requests = server.model_requests();
    assert_eq!(requests.len(), 2);
    assert!(requests[1].body.to_string().contains(expected));
    // the accepted plan is the corrected one
    let run = last_run(&repo);
    let ids: Vec<&str> = run["plan"]["subtasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["calc", "tests"]);
}

/// The verification script of [`workers_start_while_the_baseline_still_runs`]: at the base
/// (where the file `slow-base` exists) it waits until the file named by its argument (a glob:
/// worker w1's `started.txt`, in w1's worktree) exists, at most 60 s, and says whether it saw
/// it; then it runs the project's tests.
const SLOW_VERIFY: &str = r#"import glob, os, sys, time, unittest
if os.path.exists("slow-base"):
    deadline = time.time() + 60
    while not glob.glob(sys.argv[1]) and time.time() < deadline:
        time.sleep(0.1)
    seen = "had started" if glob.glob(sys.argv[1]) else "had not started"
    print("slow baseline: worker w1 " + seen, flush=True)
unittest.main(module=None, argv=["x", "discover"])
"#;

/// Indices of the lines of `runs/<run>/events.jsonl` whose event satisfies `pick`.
fn event_positions(repo: &TestRepo, run: &Value, pick: impl Fn(&Value) -> bool) -> Vec<usize> {
    let path = repo
        .path()
        .join(".ahelper/runs")
        .join(run["run_id"].as_str().unwrap())
        .join("events.jsonl");
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .enumerate()
        .filter(|(_, line)| pick(&line["event"]))
        .map(|(i, _)| i)
        .collect()
}

#[test]
fn workers_start_while_the_baseline_still_runs() {
    let repo = calc_repo();
    repo.write("slow_verify.py", SLOW_VERIFY);
    repo.write("slow-base", "");
    repo.git(&["add", "."]);
    repo.git(&["commit", "-q", "-m", "a slow baseline"]);
    let started = repo
        .home()
        .join("state/ahelper/worktrees/*/*/w1/started.txt");
    config(
        &repo,
        &format!("python3 slow_verify.py '{}'", started.display()),
        120,
        0,
        0,
    );
    let plan = r#"{\"summary\": \"Add mul.\", \"subtasks\": [{\"id\": \"mul\", \"title\": \"Add calc.mul\", \"instructions\": \"Add mul(a, b) to calc.py.\", \"scope\": [\"calc.py\", \"started.txt\"]}]}"#;
    let server = start(
        ahelper_fake_llm::Script::from_json_str(&format!(
            r##"{{"conversations": [
            {{"match": "# Swarm run finished", "turns": [{{"text": "Added calc.mul."}}]}},
            {{"match": "You are the coordinator of a swarm", "turns": [{{"text": "{plan}"}}]}},
            {{"match": "Your subtask `mul`", "turns": [
                {{"tool_calls": [{{"name": "write_file", "arguments": {{"path": "started.txt", "content": "w1\n"}}}}]}},
                {{"tool_calls": [{{"name": "run_command", "arguments": {{"command": "printf '\\n\\ndef mul(a, b):\\n    return a * b\\n' >> calc.py"}}}}]}},
                {{"text": "Added calc.mul."}}]}}
        ]}}"##
        ))
        .unwrap(),
    );
    let (code, stdout, stderr) = swarm_run(&repo, &server, "add mul", &[]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let run = last_run(&repo);
    assert_eq!(worker_record(&run, "w1")["status"], "merged", "{run:#}");
    // The baseline could only end after worker w1 had made its first model requests (their
    // tool call wrote started.txt): it saw the file, and passed.
    assert_eq!(run["baseline"]["outcome"]["outcome"], "passed", "{run:#}");
    assert!(
        run["baseline"]["output"]
            .as_str()
            .unwrap()
            .contains("slow baseline: worker w1 had started"),
        "{run:#}"
    );
    // and in the run's events, w1's first turn comes before the baseline's announcement
    let first_turn = event_positions(&repo, &run, |e| {
        e["type"] == "worker_turn" && e["worker"] == "w1"
    });
    let baseline = event_positions(&repo, &run, |e| {
        e["type"] == "notice"
            && e["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("baseline:"))
    });
    assert!(
        !first_turn.is_empty() && baseline.len() == 1 && first_turn[0] < baseline[0],
        "w1 turns at {first_turn:?}, baseline at {baseline:?}"
    );
    // the merge was verified against it
    assert!(
        stdout.contains("integration branch verified: python3 slow_verify.py"),
        "{stdout}"
    );
}

/// The sum of the token usage every agent of the run reported (its transcripts' `usage`
/// lines: the coordinator's planning and closing turns, the workers, the fixers and mergers).
fn usage_in_transcripts(repo: &TestRepo, run: &Value) -> (u64, u64) {
    let dir = repo
        .path()
        .join(".ahelper/runs")
        .join(run["run_id"].as_str().unwrap());
    let mut files = vec![dir.join("coordinator.jsonl")];
    for entry in std::fs::read_dir(dir.join("workers")).unwrap() {
        files.push(entry.unwrap().path());
    }
    let (mut input, mut output) = (0, 0);
    for file in files {
        for line in std::fs::read_to_string(file).unwrap().lines() {
            let line: Value = serde_json::from_str(line).unwrap();
            if line["type"] == "usage" {
                input += line["turn"]["input_tokens"].as_u64().unwrap();
                output += line["turn"]["output_tokens"].as_u64().unwrap();
            }
        }
    }
    (input, output)
}

#[test]
fn fixer_tokens_are_counted_as_they_stream_and_once_in_the_totals() {
    let (repo, server) = semantic_conflict_verified_by(UNITTEST);
    let (code, stdout, _) = swarm_run(
        &repo,
        &server,
        "do the task",
        &["--output-format", "stream-json"],
    );
    assert_eq!(code, 0, "{stdout}");
    let events: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let run = last_run(&repo);
    let fixer = &run["helpers"][0];
    assert_eq!(fixer["id"], "fix-1", "{run:#}");
    let merged_worker = fixer["worker"].as_str().unwrap();
    // live: the fixer's usage events come while its merge is under way, before that merge ends
    let fixer_usage: Vec<usize> = (0..events.len())
        .filter(|&i| events[i]["type"] == "usage" && events[i]["agent"] == "fix-1")
        .collect();
    let merged = events
        .iter()
        .position(|e| e["type"] == "merged" && e["worker"] == merged_worker)
        .expect("the fixed merge");
    assert!(
        !fixer_usage.is_empty() && fixer_usage.iter().all(|&i| i < merged),
        "fix-1 usage at {fixer_usage:?}, merge of {merged_worker} at {merged}"
    );
    // the last report is the fixer's whole usage, and the run's total included it then
    let last = &events[*fixer_usage.last().unwrap()];
    assert_eq!(last["total"], fixer["usage"]);
    assert!(last["run_total"]["input_tokens"].as_u64() >= fixer["usage"]["input_tokens"].as_u64());
    // exactly once: the final totals are the sum of what every agent reported
    let finished = events
        .iter()
        .rev()
        .find(|e| e["type"] == "run_finished")
        .expect("run_finished");
    let (input, output) = usage_in_transcripts(&repo, &run);
    assert_eq!(
        (
            finished["record"]["usage"]["input_tokens"]
                .as_u64()
                .unwrap(),
            finished["record"]["usage"]["output_tokens"]
                .as_u64()
                .unwrap()
        ),
        (input, output),
        "{:#}",
        finished["record"]["usage"]
    );
    assert_eq!(run["usage"], finished["record"]["usage"]);
}
