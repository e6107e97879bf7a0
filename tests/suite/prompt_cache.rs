//! Prompts laid out for prompt caching (issue 32): the part of every request that is the same
//! for all workers of a run — tool definitions, who the agent is, rules, role — comes first and
//! ends at a cache breakpoint; each worker's own facts (its worktree, the date) come after it.

use super::support::scripts::*;
use super::support::*;
use serde_json::Value;

/// The Anthropic cache prefix of a request up to its last system breakpoint (tools, then the
/// system blocks through the one with `cache_control`), as JSON text; and the rest of the
/// system prompt.
fn cached_prefix(body: &Value) -> (String, String) {
    let system = body["system"].as_array().expect("system blocks");
    let last = system
        .iter()
        .rposition(|block| block.get("cache_control").is_some())
        .expect("a cache breakpoint in the system prompt");
    let prefix = format!(
        "{}{}",
        serde_json::to_string(&body["tools"]).unwrap(),
        serde_json::to_string(&system[..=last]).unwrap()
    );
    (prefix, serde_json::to_string(&system[last + 1..]).unwrap())
}

#[test]
fn two_workers_first_requests_are_byte_identical_up_to_the_shared_breakpoint() {
    let script = plan_files(&["a.txt", "b.txt"])
        .with_conversation(worker("s1", [was_here("s1", "a.txt"), done("s1")]))
        .with_conversation(worker("s2", [was_here("s2", "b.txt"), done("s2")]));
    let repo = repo_with(&[("a.txt", "a\n"), ("b.txt", "b\n")]);
    let server = start(script);
    let mut cmd = ahelper(&repo, &server, Wire::Anthropic);
    cmd.args([
        "swarm",
        "edit both",
        "--yes",
        "--permission-mode",
        "accept-edits",
    ])
    .assert()
    .success();
    let firsts: Vec<Value> = server
        .requests()
        .into_iter()
        .map(|r| r.body)
        .filter(|b| {
            b["messages"].as_array().is_some_and(|m| m.len() == 1)
                && b["messages"][0].to_string().contains("Your subtask `")
        })
        .collect();
    assert_eq!(firsts.len(), 2, "one first request per worker");
    let (shared_1, own_1) = cached_prefix(&firsts[0]);
    let (shared_2, own_2) = cached_prefix(&firsts[1]);
    assert_eq!(shared_1, shared_2, "the cached prefixes differ");
    assert!(shared_1.contains("# Rules"), "{shared_1}");
    assert!(!shared_1.contains("Workspace root"), "{shared_1}");
    assert_ne!(own_1, own_2, "each worker's own part names its worktree");
    assert!(own_1.contains("Workspace root"), "{own_1}");
}
