//! What a swarm tells the user about permissions (issue 10 item 2): refused calls are
//! followed by the exact rules that would allow them (never the mode already in use), and an
//! `a` answer in the live view adds the prefix rule the question showed, so other workers do
//! not ask again for the same program. The live view runs in a real pseudo-terminal (tmux).

use super::support::scripts::*;
use super::support::tmux::{Tmux, two_questions_in_the_live_view};
use super::support::*;
use ahelper_fake_llm::FakeLlm;
use std::time::Duration;

/// A repository with `a.txt` and a server whose one worker (`s1`, on `a.txt`) runs `command`.
fn one_worker_running(command: &str) -> (TestRepo, FakeLlm) {
    let script = plan_files(&["a.txt"]).with_conversation(runs_then_done("s1", command));
    (repo_with(&[("a.txt", "a\n")]), start(script))
}

/// `ahelper swarm <task> --yes --permission-mode accept-edits`.
fn accept_edits_swarm(repo: &TestRepo, server: &FakeLlm, task: &str) -> assert_cmd::Command {
    let mut cmd = ahelper(repo, server, Wire::Anthropic);
    cmd.args(["swarm", task, "--yes", "--permission-mode", "accept-edits"]);
    cmd
}

#[test]
fn refused_commands_are_followed_by_the_rule_that_allows_them_not_the_mode_in_use() {
    let (repo, server) = one_worker_running("cargo test --quiet");
    let out = accept_edits_swarm(&repo, &server, "test it")
        .assert()
        .get_output()
        .clone();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(
            "[w1] refused run_command cargo test --quiet: Permission denied: this run_command call \
             needs the user's approval"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("(the rule `run_command(cargo test:*)` would allow it)"),
        "{stdout}"
    );
    let advice = stdout
        .lines()
        .find(|l| l.starts_with("Refused calls:"))
        .unwrap_or_else(|| panic!("no advice:\n{stdout}"));
    for way in [
        "--allowedTools 'run_command(cargo test:*)'",
        "allow = [\"run_command(cargo test:*)\"]",
        "--permission-mode bypass (this run used accept-edits)",
    ] {
        assert!(advice.contains(way), "{advice}");
    }
    assert!(
        !stdout.contains("--permission-mode accept-edits"),
        "advice names the mode in use:\n{stdout}"
    );
}

#[test]
fn calls_refused_for_good_are_not_advised_as_rules() {
    let (repo, server) = one_worker_running("rm a.txt");
    let out = accept_edits_swarm(&repo, &server, "remove it")
        .args(["--disallowedTools", "run_command(rm:*)"])
        .assert()
        .get_output()
        .clone();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let advice = stdout
        .lines()
        .find(|l| l.starts_with("Refused calls:"))
        .unwrap_or_else(|| panic!("no advice:\n{stdout}"));
    assert!(!advice.contains("--allowedTools"), "{advice}");
    assert!(
        advice.contains("1 call(s) were refused by a deny rule"),
        "{advice}"
    );
}

/// `a` at the first question adds the prefix rule the question showed (`run_command(sed -i:*)`),
/// and the other worker's `sed` runs without a second question; the question wraps to a narrow
/// terminal with its keys whole.
#[test]
fn always_in_the_live_view_adds_the_shown_prefix_rule_for_every_worker() {
    let (repo, _server, tmux) = two_questions_in_the_live_view(70);
    // Both workers ask; which asks first depends on which starts first, so wait for w1's.
    let w1_row = |screen: &str| {
        let row = screen.lines().rev().find(|l| l.starts_with("w1 "));
        row.unwrap_or_default().to_string()
    };
    let screen = tmux.wait_until("w1 waiting for permission under a question", |s| {
        s.contains("d = never") && w1_row(s).contains("waiting for permission")
    });
    assert!(screen.contains("`run_command(sed -i:*)`"), "{screen}");
    let w1 = w1_row(&screen);
    assert!(w1.trim_end().chars().count() <= 70, "{screen}");
    let keys = screen.lines().find(|l| l.contains("d = never")).unwrap();
    assert!(keys.trim_end().chars().count() <= 70, "{screen}");
    tmux.type_text("a");
    let screen = tmux.wait_for("Integration branch:");
    assert!(screen.contains("2 merged"), "{screen}");
    let integration = repo.git(&["branch", "--list", "ahelper/*/integration"]);
    let integration = integration.trim().trim_start_matches("* ");
    assert_eq!(repo.git(&["show", &format!("{integration}:a.txt")]), "A\n");
    assert_eq!(repo.git(&["show", &format!("{integration}:b.txt")]), "B\n");
}

/// The live table says what each worker does now: the command it runs and for how long, then
/// how it ended; files changed by commands count in its `files` column; planning shows the
/// coordinator's turns, tokens and time (issue 10 item 6).
#[test]
fn the_live_table_shows_the_running_command_and_how_workers_ended() {
    let script = plan_files(&["a.txt"]).with_conversation(worker(
        "s1",
        [
            runs("echo A > a.txt && echo B > b2.txt && echo C > c2.txt"),
            runs("sleep 4"),
            done("s1"),
        ],
    ));
    let repo = repo_with(&[("a.txt", "a\n")]);
    let server = start(script);
    let args = ["swarm", "upper", "--yes", "--permission-mode", "bypass"];
    let tmux = Tmux::start_sized(&repo, &server, &args, 160);
    let screen = tmux.wait_for("running `sleep 4` for ");
    assert!(
        screen.contains("[coordinator] planning: turn 1 · tokens "),
        "{screen}"
    );
    let row: Vec<&str> = screen
        .lines()
        .find(|l| l.starts_with("w1 ") && l.contains("running `sleep 4`"))
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!((row[8], row[9]), ("2", "3"), "tools 2, files 3: {row:?}");
    let screen = tmux.wait_for("Integration branch:");
    let row = screen.lines().rev().find(|l| l.starts_with("w1 ")).unwrap();
    assert!(row.contains("merged as "), "{screen}");
}

/// A closed terminal (the tmux server killed while a question waits) stops the run as the first
/// Ctrl-C does — the question is denied, the workers commit `wip` — and ahelper exits instead of
/// polling a dead terminal for ever.
#[test]
fn a_closed_terminal_ends_the_run_instead_of_waiting_for_an_answer() {
    let (repo, server) = one_worker_running("sed -i s/a/A/ a.txt");
    let args = ["swarm", "upper", "--yes", "--permission-mode", "default"];
    let tmux = Tmux::start_sized(&repo, &server, &args, 100);
    tmux.wait_for("d = never");
    let pid = last_run(&repo)["pid"]
        .as_i64()
        .expect("run.json has the pid") as i32;
    tmux.close_then_wait_for_end_of(pid, Duration::from_secs(120));
    assert_ne!(last_run(&repo)["status"], "running", "{}", last_run(&repo));
}

/// A subtask whose only edit was refused changed nothing: the run is not a success (issue 31
/// item 2). The advice names the file relative to the repository (the worker wrote it by a
/// path that is not), and, with no terminal, says a terminal could answer the questions.
#[test]
fn a_subtask_whose_edit_was_refused_fails_the_run_and_the_rule_names_the_repo_path() {
    let script = plan_files(&["a.txt", "b.txt"])
        .with_conversation(worker("s1", [was_here("s1", "a.txt"), done("s1")]))
        .with_conversation(worker("s2", [was_here("s2", "sub/../b.txt"), done("s2")]));
    let repo = repo_with(&[("a.txt", "a\n"), ("b.txt", "b\n")]);
    let server = start(script);
    let mut cmd = ahelper(&repo, &server, Wire::Anthropic);
    cmd.args([
        "swarm",
        "mark them",
        "--yes",
        "--allowedTools",
        "write_file(a.txt)",
    ]);
    let out = cmd.assert().code(1).get_output().clone();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(
            "Result: FAILED — not every subtask merged: w2 no changes (1 call was refused)"
        ),
        "{stdout}"
    );
    let advice = stdout
        .lines()
        .find(|l| l.starts_with("Refused calls:"))
        .unwrap_or_else(|| panic!("no advice:\n{stdout}"));
    assert!(
        advice.contains("--allowedTools 'write_file(b.txt)'"),
        "{advice}"
    );
    assert!(
        advice.contains("run in a terminal to answer the questions"),
        "{advice}"
    );
}

/// A swarm question about an edit shows the real diff of the file in the worker's worktree
/// above the table (issue 31 item 3).
#[test]
fn a_swarm_edit_question_shows_the_diff() {
    let edit = ahelper_fake_llm::Turn::tool_call(
        "edit_file",
        serde_json::json!({"path": "a.txt", "old_string": "two", "new_string": "TWO"}),
    );
    let script = plan_files(&["a.txt"]).with_conversation(worker("s1", [edit, done("s1")]));
    let repo = repo_with(&[("a.txt", "one\ntwo\nthree\n")]);
    let server = start(script);
    let tmux = Tmux::start_sized(&repo, &server, &["swarm", "upper", "--yes"], 120);
    let screen = tmux.wait_for("d = never");
    for expected in [
        "[w1] wants to change:",
        "@@ -1,3 +1,3 @@",
        "-two",
        "+TWO",
        " three",
    ] {
        assert!(screen.contains(expected), "{expected}:\n{screen}");
    }
    tmux.type_text("y");
    tmux.wait_for("Integration branch:");
}

/// The issue's own case: the user answers `n` to a worker's only edit in the live view; the
/// run is not a success, and the advice does not tell them to run in a terminal (issue 31
/// item 2).
#[test]
fn a_no_to_the_only_edit_in_the_live_view_fails_the_run_without_the_terminal_hint() {
    let script = plan_files(&["a.txt"])
        .with_conversation(worker("s1", [was_here("s1", "a.txt"), done("s1")]));
    let repo = repo_with(&[("a.txt", "a\n")]);
    let server = start(script);
    let tmux = Tmux::start_then(
        &repo,
        &server,
        &["swarm", "mark it", "--yes"],
        Some("echo exit=$?"),
    );
    tmux.wait_for("d = never");
    tmux.type_text("n");
    let screen = tmux.wait_for("exit=");
    assert!(
        screen.contains(
            "Result: FAILED — not every subtask merged: w1 no changes (1 call was refused)"
        ),
        "{screen}"
    );
    assert!(screen.contains("exit=1"), "{screen}");
    assert!(screen.contains("Refused calls:"), "{screen}");
    assert!(!screen.contains("run in a terminal"), "{screen}");
}
