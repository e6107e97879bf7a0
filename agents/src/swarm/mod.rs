//! The swarm: a coordinator plans a task into subtasks and runs isolated workers in parallel,
//! each in its own git worktree and branch, then merges their branches into one integration
//! branch (`DESIGN.md` §3, §4, §8).

pub mod events;
pub mod plan;
pub mod roles;
pub mod scheduler;
pub mod state;
