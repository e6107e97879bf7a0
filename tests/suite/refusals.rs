//! Refused tool calls in `ahelper -p` are never silent: a line per refusal on stderr naming the
//! call, the reason and what would allow it, a closing count, `permission_denials` in the JSON
//! result and a `permission_denied` event in stream-json.

use super::support::scripts::*;
use super::support::*;
use ahelper_fake_llm::{FakeLlm, Script, Turn};
use serde_json::{Value, json};
use std::process::Output;

/// A model that writes `notes.txt` and then claims it did, whatever happened.
fn writes_notes() -> Script {
    agent([
        writes("notes.txt", "notes\n"),
        Turn::text("Finished: wrote notes.txt with your notes."),
    ])
}

/// A repository with `a.txt` and a fake model playing [`writes_notes`].
fn notes_fixture() -> (TestRepo, FakeLlm) {
    (repo_with(&[("a.txt", "a\n")]), start(writes_notes()))
}

/// `ahelper -p "write my notes" args…` in `repo` against `server`; asserts success.
fn write_my_notes(repo: &TestRepo, server: &FakeLlm, args: &[&str]) -> Output {
    ahelper(repo, server, Wire::Anthropic)
        .args(["-p", "write my notes"])
        .args(args)
        .assert()
        .success()
        .get_output()
        .clone()
}

const REFUSAL: &str = "ahelper: refused write_file(notes.txt): needs approval";
const ALLOW: &str =
    "to allow it: --allowedTools 'write_file(notes.txt)' or --permission-mode accept-edits";

#[test]
fn a_refused_write_is_reported_on_stderr_with_what_would_allow_it() {
    let (repo, server) = notes_fixture();
    for verbose in [false, true] {
        let mut cmd = ahelper(&repo, &server, Wire::Anthropic);
        cmd.args(["-p", "write my notes"]);
        if verbose {
            cmd.arg("-v");
        }
        let out = cmd.assert().success().get_output().clone();
        let stderr = String::from_utf8(out.stderr).unwrap();
        let line = stderr
            .lines()
            .find(|l| l.starts_with(REFUSAL))
            .unwrap_or_else(|| panic!("no refusal line (verbose {verbose}):\n{stderr}"));
        assert!(line.ends_with(ALLOW), "{line}");
        assert!(!line.contains('…'), "the refusal line is not cut: {line}");
        assert_eq!(
            stderr.lines().last().unwrap_or(""),
            "ahelper: 1 tool call was refused (listed above) and did not run; the answer may \
             describe work that was not done. The exit status only says the model finished.",
            "{stderr}"
        );
        assert_eq!(stderr.matches("write_file").count(), 2, "{stderr}");
        assert!(!repo.path().join("notes.txt").exists());
    }
}

#[test]
fn json_results_list_permission_denials() {
    let (repo, server) = notes_fixture();
    let out = write_my_notes(&repo, &server, &["--output-format", "json"]);
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    let denials = result["permission_denials"].as_array().unwrap();
    assert_eq!(denials.len(), 1, "{result}");
    assert_eq!(denials[0]["tool_name"], "write_file");
    assert_eq!(denials[0]["tool_input"]["path"], "notes.txt");
    assert!(!denials[0]["tool_use_id"].as_str().unwrap().is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains(REFUSAL));

    let out = write_my_notes(&repo, &server, &["--output-format", "stream-json"]);
    let events: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let denied: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "permission_denied")
        .collect();
    assert_eq!(denied.len(), 1, "{events:?}");
    assert_eq!(denied[0]["name"], "write_file");
    let last = events.last().unwrap();
    assert_eq!(last["type"], "result");
    assert_eq!(
        last["permission_denials"][0]["tool_input"]["path"],
        "notes.txt"
    );
}

#[test]
fn an_allowed_run_lists_no_denials() {
    let (repo, server) = notes_fixture();
    let out = write_my_notes(
        &repo,
        &server,
        &[
            "--output-format",
            "json",
            "--permission-mode",
            "accept-edits",
        ],
    );
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["permission_denials"], json!([]));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("refused"));
    assert_eq!(repo.file("notes.txt"), "notes\n");
}
