//! The swarm: a coordinator plans a task into subtasks and runs isolated workers in parallel,
//! each in its own git worktree and branch, then merges their branches into one integration
//! branch (`docs/architecture.md` describes the data flow).

pub mod coordinator;
pub mod events;
pub mod plan;
pub mod roles;
pub mod run;
pub mod scheduler;
pub mod state;
pub mod worker;

pub use run::{
    PreparedRun, RunIo, RunOptions, SwarmError, execute, final_summary, plan, prepare_run,
};

/// `tool main-argument`, for the status table's "last action" column.
pub fn describe_action(name: &str, input: &serde_json::Value) -> String {
    let main = ["path", "command", "pattern"]
        .iter()
        .find_map(|k| input.get(*k).and_then(serde_json::Value::as_str))
        .unwrap_or("");
    let main: String = main.lines().next().unwrap_or("").chars().take(60).collect();
    if main.is_empty() {
        name.to_string()
    } else {
        format!("{name} {main}")
    }
}
