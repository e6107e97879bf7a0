//! Scripts for the fake model that many end-to-end tests play: a coordinator that plans
//! subtasks, the workers that carry them out, and a single agent that makes a few tool calls.

use ahelper_fake_llm::{Conversation, Script, Turn};
use serde_json::{Value, json};

/// The start of the coordinator's system prompt: the conversation that plans a swarm run.
pub const COORDINATOR: &str = "You are the coordinator of a swarm";

/// A script whose coordinator plans `subtasks` (see [`subtask`]); add one [`worker`] per subtask.
pub fn plan(subtasks: Value) -> Script {
    coordinator(plan_turn(subtasks))
}

/// A script whose coordinator answers with `turn` (a plan, or a reply that is not one); add the
/// workers.
pub fn coordinator(turn: Turn) -> Script {
    Script::new().with_conversation(Conversation::new().matching(COORDINATOR).turn(turn))
}

/// The coordinator's reply: a plan (`{"summary", "subtasks"}`) holding `subtasks`.
pub fn plan_turn(subtasks: Value) -> Turn {
    Turn::text(json!({"summary": "split by file", "subtasks": subtasks}).to_string())
}

/// Subtask `id` ("Work on <id>", "Do <id>.") scoped to the one path `scope`.
pub fn subtask(id: &str, scope: &str) -> Value {
    json!({"id": id, "title": format!("Work on {id}"), "instructions": format!("Do {id}."), "scope": [scope]})
}

/// The conversation of the worker of subtask `id`, playing `turns`.
pub fn worker(id: &str, turns: impl IntoIterator<Item = Turn>) -> Conversation {
    turns.into_iter().fold(
        Conversation::new()
            .named(id)
            .matching(format!("Your subtask `{id}`")),
        Conversation::turn,
    )
}

/// A run of one subtask `s1` on `a.txt` whose worker plays `turns`.
pub fn one_worker(turns: impl IntoIterator<Item = Turn>) -> Script {
    plan(json!([subtask("s1", "a.txt")])).with_conversation(worker("s1", turns))
}

/// A single agent (print mode, the REPL) that plays `turns`, one per model request.
pub fn agent(turns: impl IntoIterator<Item = Turn>) -> Script {
    Script::new().with_conversation(
        turns
            .into_iter()
            .fold(Conversation::new(), Conversation::turn),
    )
}

/// A `write_file` tool call.
pub fn writes(path: &str, content: &str) -> Turn {
    Turn::tool_call("write_file", json!({"path": path, "content": content}))
}

/// A `run_command` tool call.
pub fn runs(command: &str) -> Turn {
    Turn::tool_call("run_command", json!({"command": command}))
}
