//! The REPL through a real pseudo-terminal (tmux, driven from the test; `.ci/run` installs it):
//! Ctrl-C at a permission question, keys typed during a turn, `/clear`, `/resume`,
//! `--continue`, `/status`, `/diff`, `/tools` and the diff preview of write permission
//! questions (issue 10 item 5).

use super::support::scripts::*;
use super::support::tmux::Tmux;
use super::support::*;
use ahelper_fake_llm::{Conversation, FakeLlm, Script, Turn};
use serde_json::json;
use std::time::{Duration, Instant};

/// The body of model request `index` (0-based), once it has come (up to 60 s).
fn request_body(server: &FakeLlm, index: usize) -> String {
    wait_for_requests(server, index + 1);
    server.model_requests()[index].body.to_string()
}

/// Waits until the fake model has received `n` requests.
#[track_caller]
fn wait_for_requests(server: &FakeLlm, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while server.model_requests().len() < n {
        assert!(Instant::now() < deadline, "the model never got request {n}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Ctrl-C at a permission question cancels the turn (no y/n/a/d insisted on); the question
/// shows a diff of the write.
#[test]
fn ctrl_c_at_a_permission_question_cancels_the_turn() {
    let repo = repo_with(&[("a.txt", "old line\n")]);
    let server = start(
        Script::new()
            .with_conversation(Conversation::new().turn(Turn::tool_call(
                "write_file",
                json!({"path": "a.txt", "content": "new line\n"}),
            )))
            .with_fallback_text("after"),
    );
    let tmux = Tmux::start(&repo, &server, &[]);
    tmux.wait_for("Type /help");
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
}

/// Keys typed while the model works are not echoed into the answer and are waiting in the
/// next prompt.
#[test]
fn input_typed_during_a_turn_is_kept_for_the_next_prompt() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    // Every request of the session is the conversation's first turn (no tool results).
    let server = start(Script::new().with_conversation(
        Conversation::new().turn(Turn::text("slow answer").with_delay_ms(3_000)),
    ));
    let tmux = Tmux::start(&repo, &server, &[]);
    tmux.wait_for("Type /help");
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
    let repo = repo_with(&[("a.txt", "a\n")]);
    let server =
        start(Script::new().with_conversation(Conversation::new().turn(Turn::text("noted"))));
    let tmux = Tmux::start(&repo, &server, &[]);
    tmux.wait_for("Type /help");
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
    let repo = repo_with(&[("a.txt", "a\n")]);
    let server =
        start(agent([writes("a.txt", "changed\n"), Turn::text("done")]).with_fallback_text("ok"));
    let tmux = Tmux::start(&repo, &server, &["--permission-mode", "bypass"]);
    tmux.wait_for("Type /help");
    tmux.line("/tools");
    tmux.wait_for("write_file");
    // Every tool line is printed at once; give the terminal a moment to show the last ones.
    std::thread::sleep(Duration::from_millis(500));
    let screen = tmux.screen();
    let tool_lines: Vec<&str> = screen
        .lines()
        .skip_while(|l| !l.contains("/tools"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .collect();
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
    let server = start(Script::new().with_conversation(
        Conversation::new().turn(Turn::text("never seen").with_delay_ms(20_000)),
    ));
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
    let repo = repo_with(&[("a.txt", "a\n")]);
    let plan = json!({"summary": "one part", "subtasks": [{"id": "s1", "title": "Update a",
        "instructions": "Write A into a.txt.", "scope": ["a.txt"]}]});
    let server = start(
        coordinator(Turn::text(plan.to_string()))
            .with_conversation(worker(
                "s1",
                [writes("a.txt", "A\n"), Turn::text("wrote A")],
            ))
            .with_conversation(Conversation::new().turn(Turn::text("noted"))),
    );
    let tmux = Tmux::start(&repo, &server, &["--permission-mode", "bypass"]);
    tmux.wait_for("Type /help");
    tmux.line("/swarm update a.txt");
    tmux.wait_for("[y]es");
    tmux.type_text("y");
    tmux.press("Enter");
    let screen = tmux.wait_for("goes to the model with your next prompt");
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
    let repo = repo_with(&[("a.txt", "a\n")]);
    let plan = json!({"summary": "one part", "subtasks": [{"id": "s1", "title": "Update a",
        "instructions": "Write A into a.txt.", "scope": ["a.txt"]}]});
    let server = start(
        Script::new()
            .with_conversation(
                Conversation::new()
                    .matching("You are the coordinator of a swarm")
                    .turn(Turn::text(plan.to_string())),
            )
            .with_conversation(
                Conversation::new()
                    .matching("Your subtask `s1`")
                    .turn(Turn::tool_call(
                        "write_file",
                        json!({"path": "a.txt", "content": "A\n"}),
                    ))
                    .turn(Turn::text("wrote A")),
            ),
    );
    let tmux = Tmux::start(&repo, &server, &["--permission-mode", "bypass"]);
    tmux.wait_for("Type /help");
    tmux.line("/model chosen-in-repl");
    tmux.wait_for("Model set to chosen-in-repl");
    tmux.line("/swarm update a.txt");
    tmux.wait_for("[y]es");
    tmux.type_text("y");
    tmux.press("Enter");
    tmux.wait_for("goes to the model with your next prompt");
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
    let repo = repo_with(&[("a.txt", "a\n")]);
    let plan = json!({"summary": "one part", "subtasks": [{"id": "s1", "title": "Update a",
        "instructions": "Write A into a.txt.", "scope": ["a.txt"]}]});
    let server = start(
        coordinator(Turn::text(plan.to_string())).with_conversation(worker(
            "s1",
            [writes("a.txt", "A\n"), Turn::text("wrote A")],
        )),
    );
    let tmux = Tmux::start(&repo, &server, &["--permission-mode", "bypass"]);
    tmux.wait_for("Type /help");
    tmux.line("/swarm update a.txt");
    tmux.wait_for("[y]es");
    tmux.type_text("y");
    tmux.press("Enter");
    tmux.wait_for("goes to the model with your next prompt");
    tmux.wait_ready();
    let pane = tmux
        .run(&["display-message", "-p", "#{pane_pid}"])
        .output()
        .unwrap();
    let pid: u32 = String::from_utf8_lossy(&pane.stdout)
        .trim()
        .parse()
        .expect("tmux names the pane's process");
    assert!(std::path::Path::new(&format!("/proc/{pid}")).exists());
    drop(tmux);
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::path::Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|s| s.split(' ').nth(2) == Some("Z"))
    {
        assert!(
            Instant::now() < deadline,
            "the REPL {pid} still runs 60 s after its terminal closed"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
