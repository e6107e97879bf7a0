//! `SIGTERM` at the REPL's idle prompt after a `/swarm`: the swarm's live view installed
//! ahelper's signal handlers (tokio never removes one), which swallowed the signal at the
//! prompt; the REPL now gives it back its default action outside a swarm.

use super::support::tmux::{process_ended, repl_idle_after_a_swarm};
use super::support::wait::wait_for;
use std::time::Duration;

/// `kill -TERM` of a REPL idling at its prompt after a finished `/swarm` ends it, as it does
/// before any `/swarm`.
#[test]
fn sigterm_at_the_prompt_after_a_swarm_ends_the_repl() {
    let (_repo, _server, tmux) = repl_idle_after_a_swarm();
    let pid = tmux.pane_pid();
    // SAFETY: sending a signal to the REPL this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    wait_for(
        &format!("the REPL {pid} to end after SIGTERM at its prompt"),
        Duration::from_secs(60),
        || process_ended(pid),
    );
}
