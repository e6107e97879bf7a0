//! Project instructions: `AGENTS.md`, else Claude Code's `CLAUDE.md`, at the workspace root only.

use super::support::*;
use ahelper_fake_llm::{Conversation, Script, Turn};

fn system_prompt_seen(repo: &TestRepo) -> String {
    let server = start(Script::new().with_conversation(Conversation::new().turn(Turn::text("ok"))));
    ahelper(repo, &server, Wire::Anthropic)
        .args(["-p", "hello"])
        .assert()
        .success();
    let requests = server.model_requests();
    requests[0].body["system"].to_string()
}

/// Asserts that `ahelper -p` in a repository of `files` tells the model every text of `seen`
/// in its system prompt, and none of `unseen`.
#[track_caller]
fn assert_system_prompt(files: &[(&str, &str)], seen: &[&str], unseen: &[&str]) {
    let system = system_prompt_seen(&repo_with(files));
    for text in seen {
        assert!(system.contains(text), "{text:?} is not in {system}");
    }
    for text in unseen {
        assert!(!system.contains(text), "{text:?} is in {system}");
    }
}

#[test]
fn claude_md_is_read_when_there_is_no_agents_md() {
    assert_system_prompt(
        &[("CLAUDE.md", "Always answer in haiku.\n")],
        &[
            "Project instructions (CLAUDE.md)",
            "Always answer in haiku.",
        ],
        &[],
    );
}

#[test]
fn agents_md_wins_over_claude_md() {
    assert_system_prompt(
        &[
            ("CLAUDE.md", "CLAUDE RULES\n"),
            ("AGENTS.md", "AGENTS RULES\n"),
        ],
        &["Project instructions (AGENTS.md)", "AGENTS RULES"],
        &["CLAUDE RULES"],
    );
}

#[test]
fn claude_md_in_a_subdirectory_is_not_read() {
    assert_system_prompt(
        &[("sub/CLAUDE.md", "NESTED RULES\n"), ("a.txt", "a\n")],
        &[],
        &["NESTED RULES"],
    );
}
