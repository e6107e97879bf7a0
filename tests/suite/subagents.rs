//! The `agent` tool (Claude Code's Task/sub-agent tool) through the built binary: two sub-agents
//! of one response run at the same time, their replies come back as tool results, their
//! transcripts are kept beside the session's, `SubagentStop` fires, their tokens count in the
//! parent's usage, permissions are the parent's, and `isolation: "worktree"` keeps the
//! sub-agent's work on its own branch.

use super::support::sandbox::{Needs, require_sandbox};
use super::support::scripts::{runs, writes};
use super::support::*;
use ahelper_fake_llm::{Conversation, FakeLlm, RecordedRequest, Script, Turn};
use serde_json::{Value, json};

const PARENT: &str = "Survey the repository with two helpers.";

/// A command that leaves `mine` and waits (up to 60 s) for `theirs`: it succeeds only when the
/// other sub-agent runs at the same time.
fn rendezvous(mine: &str, theirs: &str) -> String {
    format!(
        "touch {mine}; for i in $(seq 600); do [ -e {theirs} ] && break; sleep 0.1; done; test -e {theirs} && echo met {theirs}"
    )
}

/// A sub-agent conversation: matched by its prompt, one command, then its reply.
fn child(prompt_marker: &str, command: &str, reply: &str) -> Conversation {
    Conversation::new()
        .named(prompt_marker)
        .matching(prompt_marker)
        .turn(Turn::tool_call("run_command", json!({"command": command})).with_usage(1000, 100))
        .turn(Turn::text(reply).with_usage(1000, 100))
}

/// The parent: two `agent` calls in one response, then its answer.
fn two_children_script() -> Script {
    let calls = [
        ("left half", "Child one: meet child two."),
        ("right half", "Child two: meet child one."),
    ]
    .into_iter()
    .fold(Turn::new(), |turn, (description, prompt)| {
        turn.with_tool_call(
            "agent",
            json!({"description": description, "prompt": prompt}),
        )
    })
    .with_usage(10, 1);
    Script::new()
        .with_conversation(child(
            "Child one:",
            &rendezvous("one.flag", "two.flag"),
            "child one finished",
        ))
        .with_conversation(child(
            "Child two:",
            &rendezvous("two.flag", "one.flag"),
            "child two finished",
        ))
        .with_conversation(
            Conversation::new()
                .named("parent")
                .matching(PARENT)
                .turn(calls)
                .turn(Turn::text("Both halves surveyed.").with_usage(10, 1)),
        )
}

/// The parent makes one `agent` call with `call` (its description, prompt, …), then answers
/// `answer`; the sub-agent it starts (its prompt begins "Child one:") plays `child_turns`.
fn one_child_script(
    child_turns: impl IntoIterator<Item = Turn>,
    call: Value,
    answer: &str,
) -> Script {
    let child = child_turns.into_iter().fold(
        Conversation::new().matching("Child one:"),
        Conversation::turn,
    );
    Script::new().with_conversation(child).with_conversation(
        Conversation::new()
            .matching(PARENT)
            .turn(Turn::tool_call("agent", call))
            .turn(Turn::text(answer)),
    )
}

fn requests_of(server: &FakeLlm, marker: &str) -> Vec<RecordedRequest> {
    server
        .model_requests()
        .into_iter()
        .filter(|r| {
            r.body["messages"][0].to_string().contains(marker)
                || r.body["system"].to_string().contains(marker)
        })
        .collect()
}

/// Writes the user config (`$XDG_CONFIG_HOME/ahelper/config.toml`).
fn user_config(repo: &TestRepo, text: &str) {
    let dir = repo.home().join("config/ahelper");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.toml"), text).unwrap();
}

#[test]
fn two_agent_calls_of_one_response_run_at_once_and_answer_as_tool_results() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let marks = repo.root().join("marks");
    std::fs::create_dir_all(&marks).unwrap();
    user_config(
        &repo,
        &format!(
            "[[hooks.SubagentStop]]\nhooks = [{{ type = \"command\", command = \"cat > {0}/stop-$$.json\" }}]\n",
            marks.display()
        ),
    );
    let server = start(two_children_script());
    let out = ahelper(&repo, &server, Wire::Anthropic)
        .args(["-p", PARENT, "--output-format", "json"])
        .args(["--permission-mode", "bypass"])
        .assert()
        .success()
        .get_output()
        .clone();
    let result: Value = serde_json::from_slice(&out.stdout).expect("one JSON result");
    assert_eq!(result["result"], "Both halves surveyed.", "{result}");
    // Both sub-agents ran at once: each command waited for the other's file.
    let parent = requests_of(&server, PARENT);
    let last = parent.last().unwrap().body.to_string();
    assert!(last.contains("child one finished"), "{last}");
    assert!(last.contains("child two finished"), "{last}");
    assert!(last.contains("[sub-agent "), "{last}");
    assert!(!last.contains("\"is_error\":true"), "{last}");
    for marker in ["Child one:", "Child two:"] {
        let child = requests_of(&server, marker);
        let seen = child.last().unwrap().body.to_string();
        assert!(
            seen.contains("met "),
            "{marker} did not meet the other: {seen}"
        );
        // Its own context window (the parent's conversation is not in it), the default
        // read-mostly role, and no way to start further agents.
        assert!(!seen.contains(PARENT), "{seen}");
        let tools = tool_names(&child[0]);
        assert!(tools.contains(&"run_command".to_string()), "{tools:?}");
        assert!(!tools.contains(&"agent".to_string()), "{tools:?}");
        assert!(!tools.contains(&"write_file".to_string()), "{tools:?}");
    }
    assert!(tool_names(&parent[0]).contains(&"agent".to_string()));
    // Their tokens count in the parent's usage: 2 × 2 × (1000 + 100) + 2 × (10 + 1).
    assert_eq!(result["usage"]["input_tokens"], 4020, "{result}");
    assert_eq!(result["usage"]["output_tokens"], 402, "{result}");
    // Their transcripts are kept beside the session's and named in the results.
    let session = result["session_id"].as_str().unwrap();
    let dir = repo
        .path()
        .join(format!(".ahelper/sessions/{session}/agents"));
    let transcripts: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert_eq!(transcripts.len(), 2, "{}", dir.display());
    for entry in transcripts {
        let path = entry.unwrap().path();
        assert!(last.contains(&path.display().to_string()), "{last}");
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.contains(&format!("\"session_id\":\"{session}/")),
            "{text}"
        );
    }
    // one file per hook run: the two hooks run at once, and appends to one file interleave
    let events: Vec<Value> = std::fs::read_dir(&marks)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("stop-")
        })
        .map(|p| serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap())
        .collect();
    assert_eq!(events.len(), 2, "SubagentStop ran twice: {events:?}");
    assert!(
        events
            .iter()
            .all(|e| e["hook_event_name"] == "SubagentStop")
    );
}

#[test]
fn a_subagent_is_bound_by_the_parents_permissions() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let server = start(one_child_script(
        [
            runs("touch made-by-child.txt"),
            Turn::text("child one finished"),
        ],
        json!({"description": "make a file", "prompt": "Child one: make it."}),
        "Asked.",
    ));
    // `-p` in the default mode: nobody can answer a question, so the child's command is refused
    // as the parent's own would be.
    ahelper(&repo, &server, Wire::Anthropic)
        .args(["-p", PARENT])
        .assert()
        .success();
    assert!(!repo.path().join("made-by-child.txt").exists());
    let child = requests_of(&server, "Child one:");
    let seen = child.last().unwrap().body.to_string();
    assert!(seen.contains("\"is_error\":true"), "{seen}");
}

#[test]
fn isolation_worktree_keeps_the_subagents_work_on_its_own_branch() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let server = start(one_child_script(
        [
            writes("new.txt", "from the sub-agent\n"),
            Turn::text("wrote new.txt"),
        ],
        json!({"description": "add a file", "prompt": "Child one: add new.txt.",
               "subagent_type": "worker", "isolation": "worktree"}),
        "Added on a branch.",
    ));
    ahelper(&repo, &server, Wire::Anthropic)
        .args(["-p", PARENT, "--permission-mode", "accept-edits"])
        .assert()
        .success();
    assert!(
        !repo.path().join("new.txt").exists(),
        "the user's checkout is untouched"
    );
    let parent = requests_of(&server, PARENT);
    let last = parent.last().unwrap().body.to_string();
    assert!(last.contains("wrote new.txt"), "{last}");
    let branch = last
        .split("on branch ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or_else(|| panic!("the result names the branch: {last}"));
    assert!(branch.starts_with("ahelper/agent/"), "{branch}");
    assert!(last.contains("(kept): its changes are commit "), "{last}");
    assert_eq!(
        repo.git(&["show", &format!("{branch}:new.txt")]),
        "from the sub-agent\n"
    );
    let worktrees = repo.git(&["worktree", "list"]);
    assert!(worktrees.contains(".ahelper/worktrees/"), "{worktrees}");
}

/// Issue 12/15.11: a sub-agent with `isolation: "worktree"` reads as a swarm worker does — its
/// commands cannot read the user's uncommitted files nor another worktree beneath
/// `.ahelper/worktrees/`, while its own worktree and git history stay readable.
#[test]
fn an_isolated_subagent_cannot_read_the_checkout_or_other_worktrees() {
    require_sandbox!(Needs::Landlock);
    let repo = repo_with(&[("a.txt", "committed-a\n")]);
    repo.write("draft.txt", "uncommitted-draft-4f1\n");
    repo.write(".ahelper/worktrees/other/notes.txt", "sibling-notes-9c2\n");
    let probe = "cat ../../../draft.txt; cat ../other/notes.txt; cat a.txt; \
                 git log --format=%s -1; echo probe-done";
    let server = start(one_child_script(
        [runs(probe), Turn::text("probed")],
        json!({"description": "probe", "prompt": "Child one: probe.", "isolation": "worktree"}),
        "Done.",
    ));
    ahelper(&repo, &server, Wire::Anthropic)
        .args(["-p", PARENT, "--permission-mode", "bypass"])
        .assert()
        .success();
    let child = requests_of(&server, "Child one:");
    let seen = child.last().unwrap().body.to_string();
    assert!(seen.contains("probe-done"), "{seen}");
    assert!(
        seen.contains("committed-a"),
        "its own worktree is readable: {seen}"
    );
    assert!(
        !seen.contains("uncommitted-draft-4f1"),
        "the checkout was read: {seen}"
    );
    assert!(
        !seen.contains("sibling-notes-9c2"),
        "another worktree was read: {seen}"
    );
    assert!(seen.contains("Permission denied"), "{seen}");
}
