//! End-to-end tests of preparing a worker's new worktree (issue 11): `.worktreeinclude` brings
//! ignored files of the checkout in, and `[swarm] setup` runs there before the worker starts —
//! the built binary, the fake model, temporary git repositories.

use super::support::*;
use ahelper_fake_llm::{Conversation, Script, Turn};
use serde_json::{Value, json};

const COORDINATOR: &str = "You are the coordinator of a swarm";

/// A repository ignoring `.env` and `build/`, with a `.worktreeinclude` taking `.env` and an
/// ignored `.env` in the checkout; `setup` as `[swarm] setup`.
fn repo_with_setup(setup: &str) -> TestRepo {
    let repo = repo_with(&[
        ("a.txt", "a\n"),
        (".gitignore", ".env\nbuild/\n"),
        (".worktreeinclude", ".env\n"),
    ]);
    repo.write(".env", "TOKEN=from-the-checkout\n");
    repo.write("build/big.bin", "not included\n");
    repo.write(
        ".ahelper/config.toml",
        &format!(
            "[swarm]\nsetup = \"{}\"\n",
            setup.replace('\\', "\\\\").replace('"', "\\\"")
        ),
    );
    repo
}

/// One subtask `s1` on `a.txt`; its worker plays `turns`.
fn one_worker(turns: Vec<Turn>) -> Script {
    let plan = json!({"summary": "one", "subtasks": [{
        "id": "s1", "title": "Work on s1", "instructions": "Do s1.", "scope": ["a.txt"]}]});
    let worker = turns.into_iter().fold(
        Conversation::new()
            .named("s1")
            .matching("Your subtask `s1`"),
        Conversation::turn,
    );
    Script::new()
        .with_conversation(
            Conversation::new()
                .matching(COORDINATOR)
                .turn(Turn::text(plan.to_string())),
        )
        .with_conversation(worker)
}

/// Runs the swarm with the project trusted (its `setup` is a command ahelper runs); (exit code,
/// the run record, worker w1's transcript).
fn run(repo: &TestRepo, script: Script) -> (i32, Value, String) {
    let server = start(script);
    let out = ahelper(repo, &server, Wire::Anthropic)
        .args([
            "swarm",
            "--trust-project",
            "do it",
            "--yes",
            "--permission-mode",
            "bypass",
        ])
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    let runs = repo.path().join(".ahelper/runs");
    let mut ids: Vec<_> = std::fs::read_dir(&runs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    ids.sort();
    let dir = ids.last().unwrap();
    let record =
        serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
    let transcript = std::fs::read_to_string(dir.join("workers/w1.jsonl")).unwrap_or_default();
    (out.status.code().unwrap_or(-1), record, transcript)
}

fn transcript_entry(transcript: &str, kind: &str) -> Value {
    transcript
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == kind)
        .unwrap_or_else(|| panic!("no {kind} line in {transcript}"))
}

#[test]
fn setup_runs_in_each_new_worktree_after_the_included_files_arrive() {
    let repo = repo_with_setup("cat .env > setup-saw.txt; echo \"prepared $AHELPER_WORKER_ID\"");
    let script = one_worker(vec![
        Turn::tool_call(
            "run_command",
            json!({"command": "cp .env worker-saw.txt; ls build 2>&1 | head -1 > build-seen.txt"}),
        ),
        Turn::tool_call("write_file", json!({"path": "a.txt", "content": "A\n"})),
        Turn::text("s1 done"),
    ]);
    let (code, run, transcript) = run(&repo, script);
    assert_eq!(code, 0, "{run:#}");
    assert_eq!(run["workers"][0]["status"], "merged", "{run:#}");
    let integration = run["integration_branch"].as_str().unwrap();
    let show = |file: &str| repo.git(&["show", &format!("{integration}:{file}")]);
    assert_eq!(show("setup-saw.txt"), "TOKEN=from-the-checkout\n");
    assert_eq!(show("worker-saw.txt"), "TOKEN=from-the-checkout\n");
    assert!(
        show("build-seen.txt").contains("No such file"),
        "build/ is not included"
    );
    let include = transcript_entry(&transcript, "worktree_include");
    assert_eq!(include["report"]["files"], 1, "{include}");
    let setup = transcript_entry(&transcript, "setup");
    assert_eq!(setup["outcome"]["outcome"], "passed", "{setup}");
    assert!(
        setup["output"].as_str().unwrap().contains("prepared w1"),
        "{setup}"
    );
    // the ignored .env stays ignored: it is not in the worker's commit
    assert!(
        !repo
            .git(&["ls-tree", "-r", "--name-only", integration])
            .contains(".env\n")
    );
}

#[test]
fn a_failing_setup_fails_its_worker_with_the_exit_status_and_output_tail() {
    let repo = repo_with_setup("echo preparing; echo 'dependency xyz is missing' >&2; exit 3");
    let script = one_worker(vec![
        Turn::tool_call("write_file", json!({"path": "a.txt", "content": "A\n"})),
        Turn::text("s1 done"),
    ]);
    let (code, run, transcript) = run(&repo, script);
    assert_eq!(code, 1, "{run:#}");
    let worker = &run["workers"][0];
    assert_eq!(worker["status"], "failed", "{run:#}");
    let error = worker["report"]["error"].as_str().unwrap();
    assert!(
        error.contains("setup command `echo preparing; echo 'dependency xyz is missing' >&2; exit 3` failed (exit status 3)"),
        "{error}"
    );
    assert!(error.contains("dependency xyz is missing"), "{error}");
    let setup = transcript_entry(&transcript, "setup");
    assert_eq!(setup["outcome"]["exit"]["code"], 3, "{setup}");
    assert!(
        !transcript.contains("Your subtask"),
        "the worker's agent never started: {transcript}"
    );
    assert_eq!(repo.file("a.txt"), "a\n");
}
