//! `ahelper … | head -1`: a stdout closed by the reader is not an error. The binary stops
//! printing, finishes the work and exits with the status the work earned — no panic, no 101.

use super::support::scripts::*;
use super::support::*;
use ahelper_fake_llm::{FakeLlm, Turn};
use std::process::Stdio;

/// Runs `ahelper args…` in `repo` against `server` with a stdout pipe whose reading end is closed
/// before the program writes; returns its exit code and stderr.
fn run_with_closed_stdout(repo: &TestRepo, server: &FakeLlm, args: &[&str]) -> (i32, String) {
    let mut child = ahelper_process(repo, server, Wire::Anthropic)
        .env_remove("AHELPER_LOG")
        .args(args)
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
    let server = start(agent([
        writes("notes.txt", "notes\n"),
        Turn::text(long_answer),
    ]));
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
    let server = start(one_worker([writes("a.txt", "A\n"), Turn::text("done")]));
    let (code, stderr) = run_with_closed_stdout(
        &repo,
        &server,
        &["swarm", "task", "--yes", "--permission-mode", "bypass"],
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let record = last_run(&repo);
    assert_eq!(record["status"], "finished", "{record}");
    let integration = record["integration_branch"].as_str().unwrap();
    assert_eq!(repo.git(&["show", &format!("{integration}:a.txt")]), "A\n");
    let (code, stderr) = run_with_closed_stdout(&repo, &server, &["swarm", "ls"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}
