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

#[test]
fn claude_md_is_read_when_there_is_no_agents_md() {
    let repo = repo_with(&[("CLAUDE.md", "Always answer in haiku.\n")]);
    let system = system_prompt_seen(&repo);
    assert!(
        system.contains("Project instructions (CLAUDE.md)"),
        "{system}"
    );
    assert!(system.contains("Always answer in haiku."), "{system}");
}

#[test]
fn agents_md_wins_over_claude_md() {
    let repo = repo_with(&[
        ("CLAUDE.md", "CLAUDE RULES\n"),
        ("AGENTS.md", "AGENTS RULES\n"),
    ]);
    let system = system_prompt_seen(&repo);
    assert!(
        system.contains("Project instructions (AGENTS.md)"),
        "{system}"
    );
    assert!(system.contains("AGENTS RULES"), "{system}");
    assert!(!system.contains("CLAUDE RULES"), "{system}");
}

#[test]
fn claude_md_in_a_subdirectory_is_not_read() {
    let repo = repo_with(&[("sub/CLAUDE.md", "NESTED RULES\n"), ("a.txt", "a\n")]);
    let system = system_prompt_seen(&repo);
    assert!(!system.contains("NESTED RULES"), "{system}");
}
