//! `/cost` is the cost of the current session, as `/status` shows its tokens: `/clear` starts a
//! new session at zero (found trying the README as a new user: `/cost` went on counting the
//! cleared session while `/status` said 0 tokens). Run in a real pseudo-terminal (tmux).

use super::support::scripts::agent;
use super::support::tmux::repl_with;
use ahelper_fake_llm::Turn;

#[test]
fn clear_starts_the_cost_of_the_new_session_at_zero() {
    let script = agent([Turn::text("hello there")]).with_fallback_text("ok");
    let (_repo, _server, tmux) = repl_with(&[("a.txt", "a\n")], script, &[]);
    tmux.line("hi");
    tmux.wait_for("hello there");
    tmux.line("/cost");
    let screen = tmux.wait_for("Session cost:");
    let first = screen
        .lines()
        .find(|l| l.starts_with("Session cost:"))
        .unwrap();
    assert!(!first.contains("(0 in / 0 out tokens)"), "{screen}");
    tmux.line("/clear");
    tmux.wait_for("New session");
    tmux.line("/cost");
    let screen = tmux.wait_for_count("Session cost:", 2);
    let second = screen
        .lines()
        .filter(|l| l.starts_with("Session cost:"))
        .nth(1)
        .unwrap();
    assert!(second.contains("(0 in / 0 out tokens)"), "{screen}");
}
