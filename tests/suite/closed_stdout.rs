//! `ahelper … | head -1`: a stdout closed by the reader is not an error. The binary stops
//! printing, finishes the work and exits with the status the work earned — no panic, no 101.
//! A stdout that fails otherwise (a full disk: `/dev/full`) fails `-p` and `swarm` with exit
//! code 74 and a line on stderr naming the transcript, or the run, that keeps the output; and
//! `swarm ls`, `swarm status` and `swarm logs`, whose output is their result, with 74 too.

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

/// `-p go` with edits accepted, printed as `format`.
fn print_args(format: &str) -> [&str; 6] {
    [
        "-p",
        "go",
        "--permission-mode",
        "accept-edits",
        "--output-format",
        format,
    ]
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
        let (code, stderr) = run_with_closed_stdout(&repo, &server, &print_args(format));
        assert_eq!(code, 0, "{format}: {stderr}");
        assert!(
            !stderr.contains("panicked") && !stderr.contains("internal error"),
            "{format}: {stderr}"
        );
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
    assert!(
        !stderr.contains("panicked") && !stderr.contains("internal error"),
        "{stderr}"
    );
    let record = last_run(&repo);
    assert_eq!(record["status"], "finished", "{record}");
    let integration = record["integration_branch"].as_str().unwrap();
    assert_eq!(repo.git(&["show", &format!("{integration}:a.txt")]), "A\n");
    for command in [
        &["swarm", "ls"][..],
        &["swarm", "status"],
        &["swarm", "logs", "w1"],
    ] {
        let (code, stderr) = run_with_closed_stdout(&repo, &server, command);
        assert_eq!(code, 0, "{command:?}: {stderr}");
        assert!(
            !stderr.contains("panicked") && !stderr.contains("internal error"),
            "{command:?}: {stderr}"
        );
    }
}

/// Runs `ahelper args…` in `repo` against `server` with stdout on `/dev/full` (every write fails
/// with `ENOSPC`); returns its exit code and stderr.
fn run_with_full_stdout(repo: &TestRepo, server: &FakeLlm, args: &[&str]) -> (i32, String) {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = ahelper_process(repo, server, Wire::Anthropic)
        .env_remove("AHELPER_LOG")
        .args(args)
        .stdin(Stdio::null())
        .stdout(full)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The transcript path named by the lost-output line of `stderr`.
fn transcript_named_in(stderr: &str) -> std::path::PathBuf {
    let line = stderr
        .lines()
        .find(|l| l.starts_with("ahelper: could not write the answer to standard output: "))
        .unwrap_or_else(|| panic!("no lost-output line in {stderr}"));
    let rest = line.split(" kept in the transcript at ").nth(1).unwrap();
    rest.split(" (").next().unwrap().into()
}

#[test]
fn print_mode_with_a_full_stdout_fails_and_says_where_the_answer_is() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let server = start(agent([
        writes("notes.txt", "notes\n"),
        Turn::text("the answer is 42"),
    ]));
    for format in ["text", "json", "stream-json"] {
        let (code, stderr) = run_with_full_stdout(&repo, &server, &print_args(format));
        assert_eq!(code, 74, "{format}: {stderr}");
        assert!(
            stderr.contains("No space left on device"),
            "{format}: {stderr}"
        );
        assert_eq!(
            stderr.matches("could not write").count(),
            1,
            "{format}: one line: {stderr}"
        );
        assert!(
            !stderr.contains("panicked") && !stderr.contains("internal error"),
            "{format}: {stderr}"
        );
        // the transcript it names keeps the whole run: the answer and the stop line
        let transcript = std::fs::read_to_string(transcript_named_in(&stderr)).unwrap();
        assert!(transcript.contains("the answer is 42"), "{format}");
        let last: serde_json::Value =
            serde_json::from_str(transcript.lines().last().unwrap()).unwrap();
        assert_eq!(last["type"], "stop", "{format}: {transcript}");
    }
    assert_eq!(repo.file("notes.txt"), "notes\n");
}

#[test]
fn swarm_with_a_full_stdout_fails_and_names_the_kept_run() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let server = start(one_worker([writes("a.txt", "A\n"), Turn::text("done")]));
    for format in ["text", "stream-json"] {
        let (code, stderr) = run_with_full_stdout(
            &repo,
            &server,
            &[
                "swarm",
                "task",
                "--yes",
                "--permission-mode",
                "bypass",
                "--output-format",
                format,
            ],
        );
        assert_eq!(code, 74, "{format}: {stderr}");
        let record = last_run(&repo);
        assert_eq!(record["status"], "finished", "{record}");
        let run_id = record["run_id"].as_str().unwrap();
        assert!(
            stderr.contains(
                "could not write the swarm's output to standard output: No space left on device"
            ) && stderr.contains(&format!("`ahelper swarm status {run_id}`")),
            "{format}: {stderr}"
        );
        assert!(
            !stderr.contains("panicked") && !stderr.contains("internal error"),
            "{format}: {stderr}"
        );
    }
    // the commands that show the kept run fail the same way when their output is lost
    let listings: [&[&str]; 4] = [
        &["swarm", "ls"],
        &["swarm", "status"],
        &["swarm", "logs", "w1"],
        &["swarm", "logs", "w1", "--json"],
    ];
    for command in listings {
        let (code, stderr) = run_with_full_stdout(&repo, &server, command);
        assert_eq!(code, 74, "{command:?}: {stderr}");
        assert_eq!(
            stderr.trim(),
            "ahelper: could not write to standard output: No space left on device (os error 28)",
            "{command:?}"
        );
    }
}
