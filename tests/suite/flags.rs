//! Flags where users put them: common flags before or after `swarm`, `ahelper "<prompt>"`, and
//! Claude Code's names (`--dangerously-skip-permissions`, `--allowedTools`, `--disallowedTools`,
//! `--append-system-prompt`).

use super::support::scripts::*;
use super::support::*;
use ahelper_fake_llm::{Script, Turn};
use predicates::prelude::*;
use serde_json::json;

/// A model that writes `notes.txt`, then says so.
fn writes_notes() -> Script {
    agent([
        writes("notes.txt", "notes\n"),
        Turn::text("Wrote notes.txt."),
    ])
}

/// A coordinator that plans one subtask.
fn one_subtask_plan() -> Script {
    plan(json!([subtask("s1", "a.txt")]))
}

#[test]
fn common_flags_work_before_the_subcommand() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let server = start(one_subtask_plan());
    let dir = repo.path().display().to_string();
    // run from elsewhere: -C names the repository
    ahelper(&repo, &server, Wire::Anthropic)
        .current_dir(repo.home())
        .args([
            "--model",
            "model-before",
            "-C",
            &dir,
            "swarm",
            "x",
            "--plan-only",
        ])
        .assert()
        .success()
        .stderr(predicate::str::contains("w1 [s1] Work on s1"));
    assert_eq!(server.model_requests()[0].body["model"], "model-before");
    ahelper(&repo, &server, Wire::Anthropic)
        .current_dir(repo.home())
        .args(["-C", &dir, "swarm", "ls"])
        .assert()
        .success()
        .stdout(predicate::str::contains("planned"));
    ahelper(&repo, &server, Wire::Anthropic)
        .current_dir(repo.home())
        .args(["swarm", "ls", "-C", &dir])
        .assert()
        .success()
        .stdout(predicate::str::contains("planned"));
}

/// Flags that do not go together, or a rule that does not parse, are usage errors that say why.
#[test]
fn misused_flags_are_usage_errors_with_the_reason() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let server = start(writes_notes());
    for (args, reason) in [
        // flags of -p are refused with swarm
        (
            &["-p", "x", "swarm", "ls"],
            "-p/--print belongs to `ahelper -p`",
        ),
        (
            &["-p", "notes", "--allowedTools", "Bash("],
            "invalid permission rule `Bash(`",
        ),
    ] {
        assert_usage_error(
            ahelper(&repo, &server, Wire::Anthropic).args(args),
            &[reason],
        );
    }
}

#[test]
fn a_bare_prompt_without_a_terminal_is_answered_once() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let server = start(agent([Turn::text("x is a letter.")]));
    ahelper(&repo, &server, Wire::Anthropic)
        .arg("explain x")
        .assert()
        .success()
        .stdout("x is a letter.\n")
        .stderr(predicate::str::contains(
            "no terminal for the REPL; answering the prompt once, as `ahelper -p` does",
        ));
    assert!(
        server.model_requests()[0]
            .body
            .to_string()
            .contains("explain x")
    );
}

#[test]
fn dangerously_skip_permissions_is_bypass() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let server = start(writes_notes());
    ahelper(&repo, &server, Wire::Anthropic)
        .args(["-p", "notes", "--dangerously-skip-permissions"])
        .assert()
        .success()
        .stderr(predicate::str::contains("refused").not());
    assert_eq!(repo.file("notes.txt"), "notes\n");
    ahelper(&repo, &server, Wire::Anthropic)
        .args(["-p", "notes", "--dangerously-skip-permissions"])
        .args(["--permission-mode", "plan"])
        .assert()
        .code(2);
}

#[test]
fn allowed_and_disallowed_tools_add_session_rules() {
    let server = start(writes_notes());
    // the flag the refusal line suggests, in ahelper's and Claude Code's spelling
    for flag in [
        ["--allowedTools", "write_file(notes.txt)"],
        ["--allowed-tools", "Read,Write(notes.txt)"],
    ] {
        let repo = repo_with(&[("a.txt", "a\n")]);
        ahelper(&repo, &server, Wire::Anthropic)
            .args(["-p", "notes"])
            .args(flag)
            .assert()
            .success()
            .stderr(predicate::str::contains("refused").not());
        assert_eq!(repo.file("notes.txt"), "notes\n", "{flag:?}");
        assert!(
            !repo.file(".ahelper/config.toml").contains("notes.txt"),
            "session rules are not saved"
        );
    }
    let repo = repo_with(&[("a.txt", "a\n")]);
    ahelper(&repo, &server, Wire::Anthropic)
        .args(["-p", "notes", "--permission-mode", "bypass"])
        .args(["--disallowedTools", "Write"])
        .assert()
        .success()
        .stderr(predicate::str::contains(
            "ahelper: refused write_file(notes.txt): ",
        ));
    assert!(!repo.path().join("notes.txt").exists());
}

#[test]
fn append_system_prompt_reaches_the_model() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let server = start(agent([Turn::text("ok")]));
    ahelper(&repo, &server, Wire::Anthropic)
        .args(["-p", "hi", "--append-system-prompt", "Answer in French."])
        .assert()
        .success();
    let system = server.model_requests()[0].body["system"].to_string();
    assert!(system.contains("Answer in French."), "{system}");
    assert!(system.contains("You are ahelper"), "{system}");
}

/// `--allowedTools` takes several values after one flag, as Claude Code's docs write it, and a
/// prompt or a subcommand after the rules stays a prompt or a subcommand (issue 31 item 5).
#[test]
fn allowed_tools_take_several_values_after_one_flag() {
    let server = start(agent([
        runs("touch ran.txt"),
        writes("notes.txt", "notes\n"),
        Turn::text("Wrote notes.txt."),
    ]));
    let repo = repo_with(&[("a.txt", "a\n")]);
    ahelper(&repo, &server, Wire::Anthropic)
        .args([
            "--allowedTools",
            "Bash(touch:*)",
            "Write(notes.txt)",
            "make notes",
        ])
        .assert()
        .success()
        .stderr(predicate::str::contains("refused").not());
    assert!(repo.path().join("ran.txt").exists());
    assert_eq!(repo.file("notes.txt"), "notes\n");
    assert!(
        server.model_requests()[0]
            .body
            .to_string()
            .contains("make notes"),
        "the last value is the prompt"
    );
    let repo = repo_with(&[("a.txt", "a\n")]);
    let server = start(one_subtask_plan());
    ahelper(&repo, &server, Wire::Anthropic)
        .args([
            "--disallowedTools",
            "Bash(rm:*)",
            "Read",
            "swarm",
            "x",
            "--plan-only",
        ])
        .assert()
        .success()
        .stderr(predicate::str::contains("w1 [s1] Work on s1"));
}
