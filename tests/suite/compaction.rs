//! Compaction through the binary: a history near the context window is replaced by a summary
//! the model writes in a request without tools; the transcript records it; `--resume` continues
//! from the compacted history.

use super::support::*;
use ahelper_fake_llm::{Conversation, Script, Turn};
use serde_json::json;

const SUMMARY: &str = "SUMMARY-OF-EARLIER-WORK: f1 and f2 were read.";

fn script() -> Script {
    Script::new()
        .with_conversation(
            Conversation::new()
                .named("compaction")
                .matching("You write the summary of a conversation")
                .turn(Turn::text(SUMMARY).with_usage(500, 40)),
        )
        .with_conversation(
            Conversation::new()
                .named("after")
                .matching("SUMMARY-OF-EARLIER-WORK")
                .turn(Turn::text("All three files are read.")),
        )
        .with_conversation(
            Conversation::new()
                .named("main")
                .turn(Turn::tool_call("read_file", json!({"path": "f1.txt"})).with_usage(1_000, 10))
                .turn(Turn::tool_call("read_file", json!({"path": "f2.txt"})).with_usage(2_000, 10))
                .turn(
                    Turn::tool_call("read_file", json!({"path": "f3.txt"}))
                        // the provider reports a history near the window: 0.9 of 100,000
                        .with_usage(90_000, 10),
                )
                .turn(Turn::text(
                    "not reached: the history was compacted before this turn",
                )),
        )
}

fn repo() -> TestRepo {
    let repo = repo_with(&[
        ("f1.txt", "OLD-CONTENT-ONE\n"),
        ("f2.txt", "OLD-CONTENT-TWO\n"),
        ("f3.txt", "RECENT-CONTENT-THREE\n"),
    ]);
    repo.write(".ahelper/config.toml", "context_window = 100000\n");
    repo
}

#[test]
fn a_history_near_the_window_is_compacted_and_resume_continues_from_it() {
    let repo = repo();
    let server = start(script());
    let result = json_stdout_of(ahelper(&repo, &server, Wire::Anthropic).args([
        "-p",
        "ORIGINAL-TASK read the files",
        "--output-format",
        "json",
    ]));
    assert_eq!(result["result"], "All three files are read.");

    let requests = server.model_requests();
    assert_eq!(
        requests.len(),
        5,
        "3 turns, the summary request, the turn after"
    );
    let summary_request = &requests[3].body;
    assert!(
        summary_request["system"]
            .to_string()
            .contains("You write the summary of a conversation")
    );
    assert!(
        summary_request["tools"]
            .as_array()
            .is_none_or(|t| t.is_empty()),
        "the summary request offers no tools: {summary_request}"
    );
    assert!(summary_request.to_string().contains("OLD-CONTENT-ONE"));

    let after = requests[4].body.to_string();
    assert!(after.contains("SUMMARY-OF-EARLIER-WORK"), "{after}");
    assert!(!after.contains("OLD-CONTENT-ONE"), "{after}");
    assert!(!after.contains("OLD-CONTENT-TWO"), "{after}");
    assert!(!after.contains("ORIGINAL-TASK"), "{after}");
    assert!(
        after.contains("RECENT-CONTENT-THREE"),
        "the last turn is kept with its tool result"
    );
    assert!(!requests[4].body["tools"].as_array().unwrap().is_empty());

    let lines = session_lines(&repo);
    let compaction = lines
        .iter()
        .find(|l| l["type"] == "compaction")
        .expect("the transcript records the compaction");
    assert_eq!(compaction["summarised_messages"], 5);
    assert!(
        compaction["summary"]
            .as_str()
            .unwrap()
            .contains("SUMMARY-OF")
    );

    // resume: the first request starts from the compacted history
    let session_id = result["session_id"].as_str().unwrap().to_string();
    ahelper(&repo, &server, Wire::Anthropic)
        .args(["-p", "and now?", "--resume", &session_id])
        .assert()
        .success();
    let requests = server.model_requests();
    let resumed = requests[5].body.to_string();
    assert!(resumed.contains("SUMMARY-OF-EARLIER-WORK"), "{resumed}");
    assert!(resumed.contains("and now?"), "{resumed}");
    assert!(!resumed.contains("OLD-CONTENT-ONE"), "{resumed}");
    assert!(!resumed.contains("ORIGINAL-TASK"), "{resumed}");
}

#[test]
fn an_invalid_threshold_is_refused() {
    let repo = repo();
    repo.write(
        ".ahelper/config.toml",
        "context_window = 100000\n[agent]\ncompact_threshold = 1.5\n",
    );
    let server = start(script());
    ahelper(&repo, &server, Wire::Anthropic)
        .args(["-p", "hi"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("agent.compact_threshold"));
}
