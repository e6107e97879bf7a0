//! `SIGTERM` at the REPL's idle prompt after a `/swarm`: the swarm's live view installed
//! ahelper's signal handlers (tokio never removes one), which swallowed the signal at the
//! prompt; the REPL now gives it back its default action outside a swarm.

use super::support::scripts::*;
use super::support::tmux::Tmux;
use super::support::*;
use ahelper_fake_llm::Turn;
use serde_json::json;
use std::time::{Duration, Instant};

/// `kill -TERM` of a REPL idling at its prompt after a finished `/swarm` ends it, as it does
/// before any `/swarm`.
#[test]
fn sigterm_at_the_prompt_after_a_swarm_ends_the_repl() {
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
    let pid: i32 = String::from_utf8_lossy(&pane.stdout)
        .trim()
        .parse()
        .expect("tmux names the pane's process");
    // SAFETY: sending a signal to the REPL this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| s.split(' ').nth(2) != Some("Z"))
    {
        assert!(
            Instant::now() < deadline,
            "the REPL {pid} still runs 60 s after SIGTERM at its prompt"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
