//! `ahelper … | head -1`: a stdout closed by the reader is not an error. The binary stops
//! printing, finishes the work and exits with the status the work earned — no panic, no 101.

use super::support::git::GIT_ENV;
use super::support::*;
use ahelper_fake_llm::{Conversation, FakeLlm, Script, Turn};
use serde_json::{Value, json};
use std::process::{Command, Stdio};

/// Runs `ahelper args…` in `repo` against `server` with a stdout pipe whose reading end is closed
/// before the program writes; returns its exit code and stderr.
fn run_with_closed_stdout(repo: &TestRepo, server: &FakeLlm, args: &[&str]) -> (i32, String) {
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("ahelper"))
        .args(args)
        .current_dir(repo.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", repo.home())
        .env("XDG_CONFIG_HOME", repo.home().join("config"))
        .env("XDG_STATE_HOME", repo.home().join("state"))
        .envs(GIT_ENV)
        .env("ANTHROPIC_API_KEY", "sk-test-secret-key-123")
        .env("ANTHROPIC_BASE_URL", server.base_url())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn print_mode_with_a_closed_stdout_finishes_cleanly() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let long_answer = "line\n".repeat(10_000);
    let server = start(
        Script::new().with_conversation(
            Conversation::new()
                .turn(Turn::tool_call(
                    "write_file",
                    json!({"path": "notes.txt", "content": "notes\n"}),
                ))
                .turn(Turn::text(long_answer)),
        ),
    );
    for format in ["text", "json", "stream-json"] {
        let (code, stderr) = run_with_closed_stdout(
            &repo,
            &server,
            &[
                "-p",
                "go",
                "--permission-mode",
                "accept-edits",
                "--output-format",
                format,
            ],
        );
        assert_eq!(code, 0, "{format}: {stderr}");
        assert!(!stderr.contains("panicked"), "{format}: {stderr}");
        assert!(!stderr.contains("Broken pipe"), "{format}: {stderr}");
    }
    assert_eq!(repo.file("notes.txt"), "notes\n");
    // the transcript is complete: it ends with the stop line
    let lines = session_lines(&repo);
    assert!(
        lines.iter().filter(|l| l["type"] == "stop").count() >= 3,
        "{lines:?}"
    );
}

#[test]
fn swarm_with_a_closed_stdout_finishes_the_run() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let plan = json!({"summary": "one file", "subtasks": [
        {"id": "s1", "title": "Work on a", "instructions": "Do it.", "scope": ["a.txt"]}
    ]});
    let server = start(
        Script::new()
            .with_conversation(
                Conversation::new()
                    .matching("You are the coordinator of a swarm")
                    .turn(Turn::text(plan.to_string())),
            )
            .with_conversation(
                Conversation::new()
                    .matching("Your subtask `s1`")
                    .turn(Turn::tool_call(
                        "write_file",
                        json!({"path": "a.txt", "content": "A\n"}),
                    ))
                    .turn(Turn::text("done")),
            ),
    );
    let (code, stderr) = run_with_closed_stdout(
        &repo,
        &server,
        &["swarm", "task", "--yes", "--permission-mode", "bypass"],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let runs = repo.path().join(".ahelper/runs");
    let run_dir = std::fs::read_dir(runs)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let record: Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(record["status"], "finished", "{record}");
    let integration = record["integration_branch"].as_str().unwrap();
    assert_eq!(repo.git(&["show", &format!("{integration}:a.txt")]), "A\n");
    let (code, stderr) = run_with_closed_stdout(&repo, &server, &["swarm", "ls"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}
