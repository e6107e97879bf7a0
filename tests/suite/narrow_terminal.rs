//! Narrow terminals (issue 10 items 5 and 6). The swarm's live view: below 120 columns the
//! table drops its least needed columns and cuts the subtask and last action with `…`, so every
//! row stays on one line; the permission question wraps, its choices never cut. The REPL's
//! `/tools`: one line per tool at any width. Run in a real pseudo-terminal (tmux).

use super::support::scripts::{done, plan, runs_then_done, worker, writes};
use super::support::tmux::{Tmux, accept_edits_swarm, indented_lines_after};
use super::support::*;
use ahelper_fake_llm::Script;
use serde_json::json;

const LONG_TITLE: &str =
    "Rewrite the configuration loader so that every layer is validated before merging";
const COMMAND: &str = "sed -i s/a/A/ a.txt && sed -i s/x/y/ a.txt";

/// Two subtasks, the first with a long title: its worker runs a command that needs the user's
/// approval in `accept-edits`, the other writes `b.txt`.
fn script() -> Script {
    let subtasks = json!([
        {"id": "s1", "title": LONG_TITLE, "instructions": "Do s1.", "scope": ["a.txt"]},
        {"id": "s2", "title": "Short", "instructions": "Do s2.", "scope": ["b.txt"]},
    ]);
    plan(subtasks)
        .with_conversation(runs_then_done("s1", COMMAND))
        .with_conversation(worker("s2", [writes("b.txt", "B\n"), done("s2")]))
}

/// The table's lines on `screen`: its header and the worker rows (ratatui draws them at
/// positions, so the terminal never wraps them; a row longer than the terminal would show as
/// a line longer than `width` in the joined capture).
#[track_caller]
fn table_rows(screen: &str, width: usize) -> Vec<String> {
    let rows: Vec<String> = screen
        .lines()
        .filter(|l| l.starts_with("worker ") || l.starts_with("w1 ") || l.starts_with("w2 "))
        .map(|l| l.trim_end().to_string())
        .collect();
    assert!(rows.len() >= 3, "no table:\n{screen}");
    for row in &rows {
        assert!(
            row.chars().count() <= width,
            "{row:?} is wider than {width}:\n{screen}"
        );
    }
    rows
}

#[test]
fn at_80_columns_the_table_cuts_text_and_the_question_keeps_its_choices() {
    let repo = repo_with(&[("a.txt", "a\n"), ("b.txt", "b\n")]);
    let server = start(script());
    let tmux = accept_edits_swarm(&repo, &server, 80);
    let screen = tmux.wait_for("d = never");
    let rows = table_rows(&screen, 80);
    let header = rows
        .iter()
        .rev()
        .find(|r| r.starts_with("worker "))
        .unwrap();
    assert!(
        header.contains("subtask") && header.contains("state") && header.contains("last action"),
        "{header}"
    );
    let w1 = rows.iter().rev().find(|r| r.starts_with("w1 ")).unwrap();
    assert!(w1.contains("Rewrite the") && w1.contains('…'), "{w1}");
    assert!(w1.contains("waiting for permission"), "{w1}");
    // the question: the choices whole, each on one line; the call named
    let choices = screen.lines().find(|l| l.contains("y = yes once")).unwrap();
    assert!(
        choices.contains("a = always: add `run_command(sed -i:*)` for this run"),
        "{screen}"
    );
    assert!(
        screen.lines().any(|l| l.trim_end().ends_with("d = never")),
        "{screen}"
    );
    assert!(
        screen.contains("Allow run_command sed -i s/a/A/"),
        "{screen}"
    );
    // the totals wrap instead of losing their end
    assert!(screen.contains("workers done "), "{screen}");
    tmux.type_text("y");
    let screen = tmux.wait_for("Integration branch:");
    let rows = table_rows(&screen, 80);
    let w1 = rows.iter().rev().find(|r| r.starts_with("w1 ")).unwrap();
    assert!(w1.contains("merged"), "{screen}");
    drop(tmux);
    // `swarm status` on the same narrow terminal fits its table the same way
    let tmux = Tmux::start_sized(&repo, &server, &["swarm", "status"], 80);
    let screen = tmux.wait_for("workers done 2/2");
    let rows = table_rows(&screen, 80);
    let w1 = rows.iter().find(|r| r.starts_with("w1 ")).unwrap();
    assert!(w1.contains("Rewrite the") && w1.contains('…'), "{screen}");
}

/// `/tools` at 80 columns: one line per tool, each fitted to the terminal, the first sentence
/// of its description whole where it fits (never cut at the `.` of `e.g.`).
#[test]
fn tools_prints_one_line_per_tool_at_80_columns() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let server = start(Script::new().with_fallback_text("ok"));
    let tmux = Tmux::start_sized(&repo, &server, &[], 80);
    tmux.wait_for("Type /help");
    tmux.line("/tools");
    tmux.wait_for("write_file");
    tmux.wait_ready();
    let screen = tmux.screen();
    let lines = indented_lines_after(&screen, "/tools");
    assert_eq!(lines.len(), 8, "{screen}");
    assert!(
        lines.iter().all(|l| l.trim_end().chars().count() <= 80),
        "{screen}"
    );
    let glob = lines.iter().find(|l| l.contains("glob")).unwrap();
    assert!(!glob.trim_end().ends_with("(e.g"), "{screen}");
}
