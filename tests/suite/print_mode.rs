//! End-to-end tests of `ahelper -p` against the fake LLM server in temporary git repositories.

use super::support::scripts::*;
use super::support::*;
use ahelper_fake_llm::{Conversation, Fault, FaultKind, Script, Turn};
use predicates::prelude::*;
use serde_json::{Value, json};

const LIB: &str = "pub fn old_name() -> u32 {\n    41\n}\n";

fn five_step_script() -> Script {
    agent([
        Turn::tool_call("list_dir", json!({"path": "."})).with_text("Let me look around."),
        Turn::tool_call("read_file", json!({"path": "src/lib.rs"})),
        Turn::tool_call(
            "edit_file",
            json!({"path": "src/lib.rs", "old_string": "old_name", "new_string": "new_name"}),
        ),
        runs("grep -c new_name src/lib.rs"),
        Turn::text("Renamed `old_name` to `new_name`; grep finds it once.").with_usage(50, 12),
    ])
}

fn check_five_steps(wire: Wire) {
    let repo = repo_with(&[("src/lib.rs", LIB), ("README.md", "# demo\n")]);
    repo.write(
        ".ahelper/config.toml",
        "[permissions]\nmode = \"accept-edits\"\nallow = [\"run_command(grep:*)\"]\n",
    );
    let server = start(five_step_script());
    let result = json_stdout_of(ahelper(&repo, &server, wire).args([
        "--trust-project",
        "-p",
        "rename old_name to new_name",
        "--output-format",
        "json",
    ]));
    assert_eq!(result["type"], "result");
    assert_eq!(result["is_error"], false);
    assert_eq!(result["stop_reason"], "completed");
    assert_eq!(result["num_turns"], 5);
    assert!(result["result"].as_str().unwrap().contains("new_name"));

    // the file really changed, bytes otherwise kept
    assert_eq!(repo.file("src/lib.rs"), LIB.replace("old_name", "new_name"));

    // the model saw every tool result
    let requests = server.model_requests();
    assert_eq!(requests.len(), 5);
    let last = requests.last().unwrap().body.to_string();
    assert!(
        last.contains("README.md"),
        "list_dir result reached the model"
    );
    assert!(last.contains("41"), "read_file result reached the model");
    assert!(
        last.contains("\\n1")
            || last.contains("1\\n")
            || last.contains("[exit code: 0]")
            || last.contains("\"1"),
        "{last}"
    );

    // the transcript holds every step, and never the key
    let lines = session_lines(&repo);
    let types: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    for t in [
        "session_start",
        "user_message",
        "assistant_message",
        "tool_call",
        "tool_result",
        "usage",
        "stop",
    ] {
        assert!(types.contains(&t), "transcript lacks {t}: {types:?}");
    }
    let tool_calls: Vec<&str> = lines
        .iter()
        .filter(|l| l["type"] == "tool_call")
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        tool_calls,
        ["list_dir", "read_file", "edit_file", "run_command"]
    );
    assert!(
        lines
            .iter()
            .all(|l| !l.to_string().contains("sk-test-secret"))
    );
    assert!(lines.iter().all(|l| l.get("ts").is_some()));
    // .ahelper is excluded from git, and the user's files stay clean
    let status = repo.git(&["status", "--porcelain"]);
    assert_eq!(status.trim(), "M src/lib.rs", "{status}");
}

/// The five steps in either wire format; stderr names the format of a failing case.
#[test]
fn print_mode_lists_reads_edits_runs_and_answers() {
    for wire in [Wire::Anthropic, Wire::OpenAi] {
        eprintln!("case: the {wire:?} wire format");
        check_five_steps(wire);
    }
}

/// A repository whose `a.txt` says hello, and a model that reads it and says so.
fn a_model_reading_hello() -> (TestRepo, ahelper_fake_llm::FakeLlm) {
    let repo = repo_with(&[("a.txt", "hello\n")]);
    let server = start(agent([
        Turn::tool_call("read_file", json!({"path": "a.txt"})),
        Turn::text("The file says hello."),
    ]));
    (repo, server)
}

#[test]
fn text_output_prints_the_answer_and_stream_json_prints_events() {
    let (repo, server) = a_model_reading_hello();
    ahelper(&repo, &server, Wire::Anthropic)
        .args(["-p", "what does a.txt say"])
        .assert()
        .success()
        .stdout(predicate::eq("The file says hello.\n"));
    let out = stdout_of(ahelper(&repo, &server, Wire::OpenAi).args([
        "-p",
        "what does a.txt say",
        "--output-format",
        "stream-json",
    ]));
    let events: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("every line is JSON"))
        .collect();
    assert_eq!(events.first().unwrap()["subtype"], "init");
    assert_eq!(events.last().unwrap()["type"], "result");
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "tool_call_started" && e["name"] == "read_file")
    );
    assert!(events.iter().any(|e| e["type"] == "text_delta"));
}

#[test]
fn no_model_configured_exits_2_naming_the_settings() {
    let repo = repo_with(&[("a.txt", "x")]);
    let mut cmd = assert_cmd::Command::cargo_bin("ahelper").unwrap();
    cmd.current_dir(repo.path())
        .env_clear()
        .env("HOME", repo.home())
        .env("PATH", std::env::var("PATH").unwrap())
        .args(["-p", "hi"]);
    assert_usage_error(
        &mut cmd,
        &["ANTHROPIC_API_KEY", "OPENAI_BASE_URL", "api_key_env"],
    );
}

#[test]
fn bad_config_and_bad_flags_get_clear_errors() {
    let repo = repo_with(&[("a.txt", "x")]);
    let server = start(Script::new());
    repo.write(
        ".ahelper/config.toml",
        "model = \"m\"\n[permissions]\nmood = \"plan\"\n",
    );
    let usage_error = |args: &[&str], texts: &[&str]| {
        assert_usage_error(ahelper(&repo, &server, Wire::Anthropic).args(args), texts);
    };
    usage_error(&["-p", "hi"], &[".ahelper/config.toml", "mood", "line 3"]);
    repo.write(
        ".ahelper/config.toml",
        "[permissions]\nallow = [\"run_command(git diff*)\"]\n",
    );
    usage_error(&["-p", "hi"], &["permissions.allow"]);
    usage_error(&["--output-format", "yaml", "-p", "hi"], &["yaml"]);
}

#[test]
fn non_interactive_edit_is_denied_at_once_and_the_model_is_told() {
    let repo = repo_with(&[("a.txt", "x\n")]);
    let server = start(agent([
        writes("b.txt", "new"),
        runs("touch c.txt"),
        Turn::text("I could not write the file."),
    ]));
    let started = std::time::Instant::now();
    ahelper(&repo, &server, Wire::Anthropic)
        .args(["-p", "write b.txt"])
        .assert()
        .success();
    assert!(
        started.elapsed().as_secs() < 30,
        "no hang waiting for a prompt"
    );
    assert!(!repo.path().join("b.txt").exists());
    assert!(!repo.path().join("c.txt").exists());
    let req = server.model_requests()[1].body.to_string();
    assert!(req.contains("non-interactive"), "{req}");
}

#[test]
fn retries_after_429_and_tells_the_user() {
    let repo = repo_with(&[("a.txt", "x\n")]);
    let server = start(agent([
        Turn::text("fine").with_fault(Fault::new(FaultKind::Http429).retry_after(1))
    ]));
    ahelper(&repo, &server, Wire::Anthropic)
        .args(["-p", "hi"])
        .assert()
        .success()
        .stdout("fine\n")
        .stderr(predicate::str::contains("retrying in 1 s (attempt 2/5)"));
    assert_eq!(server.model_requests().len(), 2);
}

#[test]
fn model_error_after_retries_fails_with_exit_1_and_is_recorded() {
    let repo = repo_with(&[("a.txt", "x\n")]);
    repo.write(
        ".ahelper/config.toml",
        "[retry]\nmax_attempts = 2\nbase_delay_ms = 10\n",
    );
    let server = start(
        Script::new().with_conversation(
            Conversation::new()
                .turn(Turn::text("never").with_fault(Fault::new(FaultKind::Http500).times(10))),
        ),
    );
    ahelper(&repo, &server, Wire::OpenAi)
        .args(["-p", "hi"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("500"));
    assert_eq!(server.model_requests().len(), 2);
    let lines = session_lines(&repo);
    assert!(lines.iter().any(|l| l["type"] == "error"));
    assert!(lines.iter().any(|l| l["type"] == "retry"));
}

#[test]
fn resume_and_continue_pick_the_session_up() {
    let (repo, server, id) = session_remembering_banana();
    let second = last_request_after(&repo, &server, &["-p", "what word?", "--resume", &id]);
    assert!(
        second.contains("banana") && second.contains("first answer"),
        "{second}"
    );
    let third = last_request_after(&repo, &server, &["-p", "and now?", "--continue"]);
    assert!(
        third.contains("banana") && third.contains("what word?"),
        "{third}"
    );
    assert_usage_error(
        ahelper(&repo, &server, Wire::Anthropic).args(["-p", "x", "--resume", "no-such-session"]),
        &["no-such-session"],
    );
}

/// What `-p` writes is all there once it exits (issue 11 item 1: it exits at once after the
/// last model event, without a log thread to wait for): the transcript ends with the final
/// answer, and the log file (written by the threads that log, `O_APPEND`) holds every run's
/// records whole, one per line.
#[test]
fn transcript_and_log_are_complete_when_print_mode_exits() {
    let (repo, server) = a_model_reading_hello();
    for _ in 0..2 {
        let out = stdout_of(
            ahelper(&repo, &server, Wire::Anthropic)
                .env("AHELPER_LOG", "info")
                .args(["-p", "what does a.txt say", "--output-format", "json"]),
        );
        let result: Value = serde_json::from_str(out.trim()).expect("one JSON result");
        let transcript =
            std::fs::read_to_string(result["transcript"].as_str().expect("transcript path"))
                .unwrap();
        assert!(transcript.ends_with('\n'), "{transcript}");
        let last_message = transcript
            .lines()
            .rfind(|l| l.contains("The file says hello."))
            .expect("the final answer is in the transcript");
        serde_json::from_str::<Value>(last_message).expect("a whole JSON line");
    }
    let log = std::fs::read_to_string(repo.home().join("state/ahelper/logs/ahelper.log"))
        .expect("the log file is written");
    assert!(log.ends_with('\n'), "{log}");
    assert_eq!(
        log.lines()
            .filter(|l| l.contains("process hardened"))
            .count(),
        2,
        "one record per run, each whole on its line:\n{log}"
    );
}

/// `-p` ends the process right after its answer (issue 11 item 1: no runtime teardown, no
/// drops): nothing of a long answer is cut short. A ~1 MB answer (far more than a pipe holds,
/// so the writes wait on the reader) after a tool call (the blocking pool's thread is alive at
/// exit) reaches the reader whole in every output format, and the transcript ends with the
/// whole answer and the stop line.
#[test]
fn a_long_answer_is_whole_on_a_pipe_and_in_the_transcript_at_exit() {
    let answer: String = (0..40_000)
        .map(|i| format!("line {i:05} of the answer\n"))
        .collect();
    let repo = repo_with(&[("a.txt", "hello\n")]);
    let server = start(agent([
        Turn::tool_call("read_file", json!({"path": "a.txt"})),
        Turn::text(answer.clone()),
    ]));
    for format in ["text", "json", "stream-json"] {
        let out = ahelper_process(&repo, &server, Wire::Anthropic)
            .args(["-p", "answer at length", "--output-format", format])
            .stdin(std::process::Stdio::null())
            .output()
            .expect("ahelper runs");
        assert!(out.status.success(), "{format}: {out:?}");
        let stdout = String::from_utf8(out.stdout).expect("stdout is UTF-8");
        let printed = if format == "text" {
            stdout
        } else {
            let last = stdout.lines().last().expect("a result line");
            let result: Value = serde_json::from_str(last).expect("the result line is whole");
            assert_eq!(result["type"], "result", "{format}");
            result["result"].as_str().expect("the answer").to_string()
        };
        assert_eq!(
            printed.trim_end(),
            answer.trim_end(),
            "{format}: the answer, whole"
        );
        assert_transcript_ends_with(&repo, &answer);
    }
}

/// The newest session transcript of `repo` holds the final answer `answer` whole, then the stop
/// line as its last line.
fn assert_transcript_ends_with(repo: &TestRepo, answer: &str) {
    let newest = ahelper_agents::transcript::list_sessions(&repo.path())
        .pop()
        .expect("a session transcript");
    let text = std::fs::read_to_string(&newest).unwrap();
    assert!(text.ends_with('\n'), "the last line is whole");
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("every line is whole JSON"))
        .collect();
    assert_eq!(
        lines.last().unwrap()["type"],
        "stop",
        "ends with the stop line"
    );
    let final_message = lines
        .iter()
        .rfind(|l| l["type"] == "assistant_message")
        .expect("the final answer is in the transcript");
    assert_eq!(
        final_message["message"]["content"][0]["text"]
            .as_str()
            .map(str::trim_end),
        Some(answer.trim_end()),
        "the transcript holds the whole answer"
    );
}
