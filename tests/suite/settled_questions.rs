//! A permission question withdrawn because a rule added while it waited allows the call (an
//! `a` answer to another worker's question) is recorded as settled by that rule — in the
//! worker's transcript and on the line above the live table — never as the user's answer
//! (issue 10 item 6). Run in a real pseudo-terminal (tmux).

use super::support::scripts::{COORDINATOR, plan_turn, subtask};
use super::support::tmux::Tmux;
use super::support::*;
use ahelper_fake_llm::{Conversation, Script, Turn};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// The worker of subtask `id`: runs `command`, then says it is done.
fn runs(id: &str, command: &str) -> Conversation {
    Conversation::new()
        .named(id)
        .matching(format!("Your subtask `{id}`"))
        .turn(Turn::tool_call("run_command", json!({"command": command})))
        .turn(Turn::text(format!("{id} done")))
}

/// The `permission` lines of worker `id`'s transcript in the newest run.
fn permission_lines(repo: &TestRepo, id: &str) -> Vec<Value> {
    let run = last_run(repo);
    let path = repo
        .path()
        .join(".ahelper/runs")
        .join(run["run_id"].as_str().unwrap())
        .join("workers")
        .join(format!("{id}.jsonl"));
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["type"] == "permission")
        .collect()
}

#[test]
fn a_question_settled_by_another_answer_is_recorded_as_settled_by_its_rule() {
    let script = Script::new()
        .with_conversation(
            Conversation::new()
                .matching(COORDINATOR)
                .turn(plan_turn(json!([
                    subtask("s1", "a.txt"),
                    subtask("s2", "b.txt")
                ]))),
        )
        .with_conversation(runs("s1", "sed -i s/a/A/ a.txt"))
        .with_conversation(runs("s2", "sed -i s/b/B/ b.txt"));
    let repo = repo_with(&[("a.txt", "a\n"), ("b.txt", "b\n")]);
    let server = start(script);
    let args = [
        "swarm",
        "upper",
        "--yes",
        "--permission-mode",
        "accept-edits",
    ];
    let tmux = Tmux::start_sized(&repo, &server, &args, 140);
    // both questions wait before the first is answered
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let screen = tmux.screen();
        let waiting = ["w1 ", "w2 "].iter().all(|w| {
            screen
                .lines()
                .rev()
                .find(|l| l.starts_with(w))
                .is_some_and(|l| l.contains("waiting for permission"))
        });
        if waiting {
            break;
        }
        assert!(Instant::now() < deadline, "both never waited:\n{screen}");
        std::thread::sleep(Duration::from_millis(100));
    }
    tmux.type_text("a");
    let screen = tmux.wait_for("Integration branch:");
    assert!(screen.contains("2 merged"), "{screen}");
    assert!(
        screen.contains("by the rule `run_command(sed -i:*)` (added while it waited; not asked)"),
        "{screen}"
    );
    let mut decisions: Vec<(String, String)> = ["w1", "w2"]
        .iter()
        .flat_map(|w| permission_lines(&repo, w))
        .map(|v| {
            (
                v["decision"].as_str().unwrap().to_string(),
                v["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    decisions.sort();
    assert_eq!(decisions.len(), 2, "{decisions:?}");
    assert_eq!(decisions[0].0, "allow_always", "{decisions:?}");
    assert_eq!(decisions[0].1, "user answered", "{decisions:?}");
    assert_eq!(decisions[1].0, "allowed_by_rule", "{decisions:?}");
    assert!(
        decisions[1]
            .1
            .contains("settled by the rule `run_command(sed -i:*)`")
            && decisions[1].1.contains("not answered by the user"),
        "{decisions:?}"
    );
}
