//! The REPL through a real pseudo-terminal (tmux, driven from the test; `.ci/run` installs it):
//! Ctrl-C at a permission question, keys typed during a turn, `/clear`, `/resume`,
//! `--continue`, `/status`, `/diff`, `/tools` and the diff preview of write permission
//! questions (issue 10 item 5); no `-p` memory holder in the REPL.

use super::support::scripts::*;
use super::support::tmux::{Tmux, indented_lines_after, repl_idle_after_a_swarm, repl_with};
use super::support::wait::wait_for;
use super::support::*;
use ahelper_fake_llm::{Conversation, FakeLlm, Turn};
use std::time::Duration;

/// The body of model request `index` (0-based), once it has come (up to 60 s).
fn request_body(server: &FakeLlm, index: usize) -> String {
    wait_for_requests(server, index + 1);
    server.model_requests()[index].body.to_string()
}

/// Waits until the fake model has received `n` requests.
#[track_caller]
fn wait_for_requests(server: &FakeLlm, n: usize) {
    wait_for(
        &format!("request {n} to the model"),
        Duration::from_secs(60),
        || server.model_requests().len() >= n,
    );
}

/// Ctrl-C at a permission question cancels the turn (no y/n/a/d insisted on); the question
/// shows a diff of the write.
#[test]
fn ctrl_c_at_a_permission_question_cancels_the_turn() {
    let script = agent([writes("a.txt", "new line\n")]).with_fallback_text("after");
    let (repo, _server, tmux) = repl_with(&[("a.txt", "old line\n")], script, &[]);
    tmux.line("change a.txt");
    let screen = tmux.wait_for("Allow write_file");
    assert!(
        screen.contains("-old line") && screen.contains("+new line"),
        "{screen}"
    );
    tmux.press("C-c");
    let screen = tmux.wait_for("[cancelled");
    assert!(!screen.contains("Please answer"), "{screen}");
    assert_eq!(repo.file("a.txt"), "old line\n");
    tmux.line("/status");
    let screen = tmux.wait_for("Tokens:");
    assert!(screen.contains("Mode:       default"), "{screen}");
    // The `-p` memory holder is for one-shot runs only; the watchdog is everyone's.
    let children = child_names(tmux.pane_pid());
    assert!(
        children.iter().any(|c| c == "ahelper-reaper")
            && !children.iter().any(|c| c == "ahelper-memory"),
        "{children:?}"
    );
}

/// Keys typed while the model works are not echoed into the answer and are waiting in the
/// next prompt.
#[test]
fn input_typed_during_a_turn_is_kept_for_the_next_prompt() {
    // Every request of the session is the conversation's first turn (no tool results).
    let script = agent([Turn::text("slow answer").with_delay_ms(3_000)]);
    let (_repo, server, tmux) = repl_with(&[("a.txt", "a\n")], script, &[]);
    tmux.line("first question");
    wait_for_requests(&server, 1);
    tmux.type_text("typed early");
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !tmux.screen().contains("typed early"),
        "echoed during the turn:\n{}",
        tmux.screen()
    );
    let screen = tmux.wait_for("[completed");
    let screen = if screen.contains("typed early") {
        screen
    } else {
        tmux.wait_for("typed early")
    };
    let answer_at = screen.find("slow answer").unwrap();
    let typed_at = screen.find("typed early").unwrap();
    assert!(typed_at > answer_at, "{screen}");
    tmux.press("Enter");
    let second = request_body(&server, 1);
    assert!(second.contains("typed early"), "{second}");
}

/// `/clear` starts a new session (the model no longer sees the old conversation); `--continue`
/// shows the last exchange; `/resume` lists sessions and switches by number.
#[test]
fn clear_starts_a_new_session_and_resume_picks_one() {
    let script = agent([Turn::text("noted")]);
    let (repo, server, tmux) = repl_with(&[("a.txt", "a\n")], script, &[]);
    tmux.line("remember banana");
    tmux.wait_for("[completed");
    tmux.line("/clear");
    tmux.wait_for("New session");
    tmux.line("what word?");
    tmux.wait_for_count("[completed", 2);
    let second = request_body(&server, 1);
    assert!(!second.contains("banana"), "{second}");
    tmux.line("/exit");
    drop(tmux);
    let sessions = std::fs::read_dir(repo.path().join(".ahelper/sessions"))
        .unwrap()
        .count();
    assert_eq!(sessions, 2, "/clear wrote a new transcript");

    let tmux = Tmux::start(&repo, &server, &["--continue"]);
    // The exchange is printed right after its heading: wait for it.
    let screen = tmux.wait_for("> what word?");
    assert!(screen.contains("Last exchange:"), "{screen}");
    tmux.line("/resume");
    let screen = tmux.wait_for(" 2. ");
    assert!(screen.contains("remember banana"), "{screen}");
    tmux.line("/resume 2");
    // The last exchange is printed right after the "Resumed session" line: wait for it.
    let screen = tmux.wait_for("> remember banana");
    assert!(screen.contains("Resumed session"), "{screen}");
    tmux.line("and now?");
    let third = request_body(&server, 2);
    assert!(third.contains("banana"), "{third}");
}

/// `/tools` prints one line per tool; `/diff` lists the files written in the session and the
/// workspace's `git diff`.
#[test]
fn tools_and_diff_commands() {
    let script = agent([writes("a.txt", "changed\n"), Turn::text("done")]).with_fallback_text("ok");
    let (_repo, _server, tmux) = repl_with(
        &[("a.txt", "a\n")],
        script,
        &["--permission-mode", "bypass"],
    );
    tmux.line("/tools");
    tmux.wait_for("write_file");
    // Every tool line is printed at once; give the terminal a moment to show the last ones.
    std::thread::sleep(Duration::from_millis(500));
    let screen = tmux.screen();
    let tool_lines = indented_lines_after(&screen, "/tools");
    assert!(tool_lines.len() >= 5, "{screen}");
    assert!(tool_lines.iter().all(|l| l.len() <= 110), "{screen}");
    tmux.line("change a.txt");
    tmux.wait_for("[completed");
    tmux.line("/diff");
    let screen = tmux.wait_for("+changed");
    assert!(
        screen.contains("Files written in this session:") && screen.contains("-a"),
        "{screen}"
    );
}

/// Ctrl-C during a turn cancels it; after `/exit` the terminal echoes as before (the turn's
/// quiet mode is undone).
#[test]
fn ctrl_c_cancels_a_turn_and_the_terminal_is_restored_on_exit() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let server = start(agent([Turn::text("never seen").with_delay_ms(20_000)]));
    let after = "echo \"exit=$?\"; stty -a | tr ' ;' '\\n\\n' | grep -x -- '-\\{0,1\\}echo' | sed 's/^/mode:/'";
    let tmux = Tmux::start_then(&repo, &server, &[], Some(after));
    tmux.wait_for("Type /help");
    tmux.line("slow question");
    wait_for_requests(&server, 1);
    tmux.press("C-c");
    tmux.wait_for("[cancelled");
    tmux.line("/exit");
    let screen = tmux.wait_for("mode:");
    assert!(!screen.contains("never seen"), "{screen}");
    assert!(screen.contains("exit=0"), "{screen}");
    assert!(
        screen.contains("mode:echo"),
        "the terminal no longer echoes:\n{screen}"
    );
}

/// `/swarm <task>` runs a swarm from the session (plan, confirmation, live table, merge) and
/// comes back to the prompt; `/runs` lists the run; the run's outcome reaches the model with the
/// next prompt.
#[test]
fn slash_swarm_runs_a_swarm_and_the_conversation_learns_its_outcome() {
    let script = update_a().with_conversation(Conversation::new().turn(Turn::text("noted")));
    let (repo, server, tmux) = repl_with(
        &[("a.txt", "a\n")],
        script,
        &["--permission-mode", "bypass"],
    );
    let screen = tmux.swarm("update a.txt");
    assert!(
        screen.contains("1 merged") || screen.contains("merged"),
        "{screen}"
    );
    tmux.line("/runs");
    let screen = tmux.wait_for("integration branch");
    assert!(screen.contains("ahelper/"), "{screen}");
    let requests_before = server.model_requests().len();
    tmux.line("what happened?");
    let last = request_body(&server, requests_before);
    assert!(
        last.contains("The user ran `/swarm update a.txt` from this session"),
        "{last}"
    );
    assert!(last.contains("integration branch ahelper/"), "{last}");
    tmux.wait_for("[completed");
    tmux.line("/exit");
    drop(tmux);
    // The user's checkout is untouched; the work is on the integration branch.
    assert_eq!(repo.file("a.txt"), "a\n");
}

/// `/swarm` after `/model NAME`: the coordinator and the worker of the run ask for the model
/// chosen in the session, not the configured one.
#[test]
fn slash_swarm_uses_the_model_chosen_with_slash_model() {
    let (_repo, server, tmux) = repl_with(
        &[("a.txt", "a\n")],
        update_a(),
        &["--permission-mode", "bypass"],
    );
    tmux.line("/model chosen-in-repl");
    tmux.wait_for("Model set to chosen-in-repl");
    tmux.swarm("update a.txt");
    tmux.line("/exit");
    drop(tmux);
    let requests = server.model_requests();
    let models: Vec<&str> = requests
        .iter()
        .map(|r| r.body["model"].as_str().unwrap_or(""))
        .collect();
    // the coordinator's plan, then the worker's two turns
    assert!(requests.len() >= 3, "{models:?}");
    assert!(
        models.iter().all(|m| *m == "chosen-in-repl"),
        "every request of the run names the chosen model: {models:?}"
    );
}

/// A REPL whose terminal closes while it waits at its prompt — after a `/swarm`, whose live
/// view installed ahelper's `SIGHUP` handler, so the signal no longer ends it — exits instead
/// of reading end-of-file from the closed terminal forever (it spun a core before).
#[test]
fn a_closed_terminal_ends_the_repl_waiting_at_its_prompt() {
    let (_repo, _server, tmux) = repl_idle_after_a_swarm();
    let pid = tmux.pane_pid();
    tmux.close_then_wait_for_end_of(pid, Duration::from_secs(60));
}

/// `/model` after a switch names the model in use and the provider alone; `/permissions`
/// names the mode as users write it (issue 31 item 8).
#[test]
fn model_and_permissions_show_what_is_in_use_in_users_names() {
    let (_repo, _server, tmux) = repl_with(
        &[("a.txt", "a\n")],
        agent([Turn::text("hi")]),
        &["--permission-mode", "accept-edits"],
    );
    tmux.line("/model other-model");
    tmux.line("/model");
    tmux.wait_for("Model: other-model (provider anthropic)");
    tmux.line("/permissions");
    let screen = tmux.wait_for("Mode: accept-edits");
    assert!(!screen.contains("AcceptEdits"), "{screen}");
}

/// A permission question is answered by one key, without Enter, as in Claude Code and Codex
/// (issue 31 item 4); the prompt after the turn is empty (the key went nowhere else).
#[test]
fn a_permission_question_is_answered_by_one_key() {
    let script = agent([writes("a.txt", "new line\n"), Turn::text("written")]);
    let (repo, _server, tmux) = repl_with(&[("a.txt", "old line\n")], script, &[]);
    tmux.line("change a.txt");
    tmux.wait_for("Allow write_file");
    tmux.type_text("y");
    tmux.wait_for("written");
    assert_eq!(repo.file("a.txt"), "new line\n");
    tmux.wait_ready();
}

/// An edit question shows the real file diff: the right line numbers in the hunk header, the
/// file's own context and indentation, no false "No newline" (issue 31 item 3).
#[test]
fn an_edit_question_shows_the_real_file_diff() {
    let edit = Turn::tool_call(
        "edit_file",
        serde_json::json!({"path": "m.py", "old_string": "    b()", "new_string": "    c()"}),
    );
    let script = agent([edit, Turn::text("edited")]);
    let file = "def f():\n    a()\n    b()\n    d()\n";
    let (repo, _server, tmux) = repl_with(&[("m.py", file)], script, &[]);
    tmux.line("change m.py");
    let screen = tmux.wait_for("Allow edit_file");
    for expected in [
        "@@ -1,4 +1,4 @@",
        "   def f():",
        "-    b()",
        "+    c()",
        "     d()",
    ] {
        assert!(screen.contains(expected), "{expected}:\n{screen}");
    }
    assert!(!screen.contains("No newline"), "{screen}");
    tmux.type_text("y");
    tmux.wait_for("edited");
    assert_eq!(repo.file("m.py"), "def f():\n    a()\n    c()\n    d()\n");
}
