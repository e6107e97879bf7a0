//! A permission question withdrawn because a rule added while it waited allows the call (an
//! `a` answer to another worker's question) is recorded as settled by that rule — in the
//! worker's transcript and on the line above the live table — never as the user's answer
//! (issue 10 item 6). Run in a real pseudo-terminal (tmux).

use super::support::tmux::two_questions_in_the_live_view;
use super::support::wait::wait_for_or_show;
use super::support::*;
use serde_json::Value;
use std::time::Duration;

/// The `permission` lines of worker `id`'s transcript in the newest run.
fn permission_lines(repo: &TestRepo, id: &str) -> Vec<Value> {
    let path = worker_transcript(repo, &last_run(repo), id);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["type"] == "permission")
        .collect()
}

#[test]
fn a_question_settled_by_another_answer_is_recorded_as_settled_by_its_rule() {
    let (repo, _server, tmux) = two_questions_in_the_live_view(140);
    // both questions wait before the first is answered
    let both_wait = || {
        let screen = tmux.screen();
        ["w1 ", "w2 "].iter().all(|w| {
            screen
                .lines()
                .rev()
                .find(|l| l.starts_with(w))
                .is_some_and(|l| l.contains("waiting for permission"))
        })
    };
    wait_for_or_show(
        "both workers to wait for permission",
        Duration::from_secs(60),
        both_wait,
        || tmux.screen(),
    );
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
