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

/// A coordinator that plans one subtask per file of `files` (`s1`, `s2`, …; see [`subtask`]).
pub fn plan_files(files: &[&str]) -> Script {
    let subtasks = files
        .iter()
        .enumerate()
        .map(|(i, f)| subtask(&format!("s{}", i + 1), f))
        .collect();
    plan(Value::Array(subtasks))
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

/// The worker of subtask `id`: runs `command`, then says it is done ([`done`]).
pub fn runs_then_done(id: &str, command: &str) -> Conversation {
    worker(id, [runs(command), done(id)])
}

/// The last turn of the worker of subtask `id`: "<id> done".
pub fn done(id: &str) -> Turn {
    Turn::text(format!("{id} done"))
}

/// The write of the worker of subtask `id`: "<id> was here" into `file`.
pub fn was_here(id: &str, file: &str) -> Turn {
    writes(file, &format!("{id} was here\n"))
}

/// Two subtasks, `s1` on `a.txt` and `s2` on `b.txt`, whose workers each run a `sed -i` (a
/// command that needs the user's approval in `accept-edits`) that upper-cases their file.
pub fn two_sed_workers() -> Script {
    plan_files(&["a.txt", "b.txt"])
        .with_conversation(runs_then_done("s1", "sed -i s/a/A/ a.txt"))
        .with_conversation(runs_then_done("s2", "sed -i s/b/B/ b.txt"))
}

/// The one-subtask plan the REPL tests' `/swarm update a.txt` gets: `s1` writes `A` into `a.txt`.
pub fn update_a() -> Script {
    let plan = json!({"summary": "one part", "subtasks": [{"id": "s1", "title": "Update a",
        "instructions": "Write A into a.txt.", "scope": ["a.txt"]}]});
    coordinator(Turn::text(plan.to_string())).with_conversation(worker(
        "s1",
        [writes("a.txt", "A\n"), Turn::text("wrote A")],
    ))
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
