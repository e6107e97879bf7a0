//! What the summary, `swarm status` and the table say about a worker (issue 9 item 9): edits
//! outside the subtask's declared scope (made through `run_command`) are reported per worker,
//! and the "last action" column says what the worker really did last.

use super::support::scripts::*;
use super::support::*;
use ahelper_fake_llm::{Script, Turn};
use serde_json::json;

/// One subtask with scope `a.txt` whose worker writes it, then writes two more files with a
/// shell command.
fn edits_outside_its_scope() -> Script {
    let plan = json!({"summary": "one file", "subtasks": [
        {"id": "s1", "title": "Write a", "instructions": "Write a.txt.", "scope": ["a.txt"]}
    ]});
    coordinator(Turn::text(plan.to_string())).with_conversation(worker(
        "s1",
        [
            writes("a.txt", "A\n"),
            runs("echo x > other.txt && mkdir -p docs && echo y > docs/n.md"),
            Turn::text("done"),
        ],
    ))
}

/// issue 9.9: the files a worker's branch changes outside its declared scope are named in the
/// summary, in `swarm status` and in its report; a merged worker's last action is its merge,
/// not "waiting for the model".
#[test]
fn edits_outside_the_scope_are_reported_and_the_last_action_is_the_merge() {
    let repo = repo_with(&[("README.md", "readme\n")]);
    let server = start(edits_outside_its_scope());
    let summary = stdout_of(
        ahelper(&repo, &server, Wire::Anthropic)
            .args(["swarm", "do it", "--yes"])
            .args(["--permission-mode", "bypass"]),
    );
    let line = summary
        .lines()
        .find(|l| l.contains("edited outside its scope (a.txt): "))
        .unwrap_or_else(|| panic!("{summary}"));
    assert!(
        line.contains("other.txt") && line.contains("docs/n.md") && !line.contains("a.txt:"),
        "{line}"
    );
    let run = last_run(&repo);
    let w1 = &run["workers"][0];
    assert_eq!(w1["status"], "merged");
    let mut outside: Vec<&str> = w1["report"]["out_of_scope"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    outside.sort();
    assert_eq!(outside, ["docs/n.md", "other.txt"]);
    let action = w1["last_action"].as_str().unwrap();
    assert!(action.starts_with("merged as "), "{action}");

    let status = stdout_of(ahelper(&repo, &server, Wire::Anthropic).args(["swarm", "status"]));
    let row = status.lines().find(|l| l.starts_with("w1")).unwrap();
    for (shown, text) in [
        (row.contains("merged as "), "the merge in w1's row"),
        (
            !status.contains("waiting for the model"),
            "no worker waiting",
        ),
        (
            status.contains("edited outside its scope (a.txt): "),
            "the edits outside the scope",
        ),
    ] {
        assert!(shown, "{text}:\n{status}");
    }
}
