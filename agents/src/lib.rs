//! `ahelper-agents`: the agent runtime of ahelper.
//!
//! Layout (see `DESIGN.md` §2): [`model`] talks to LLM providers, [`tools`] are what the model may
//! call, [`sandbox`] keeps file tools inside the workspace, [`sandbox_os`] confines commands with
//! landlock, [`permissions`] decides whether a tool call may run, [`agent`] is the agent loop, [`transcript`] writes append-only JSONL transcripts,
//! [`config`] resolves layered configuration, [`swarm`] runs many agents in parallel and
//! [`verify`] runs the project's tests on a worktree and compares the result with the base.
//!
//! This crate has no terminal code: user interaction goes through the [`permissions::Prompter`]
//! trait and the [`agent::AgentEvent`] channel.

pub mod agent;
pub mod config;
pub mod model;
pub mod permissions;
pub mod sandbox;
pub mod sandbox_os;
pub mod session;
pub mod swarm;
pub mod tools;
pub mod transcript;
pub mod verify;
