//! `ahelper-agents`: the agent runtime of ahelper.
//!
//! Layout (`docs/architecture.md` walks through it): [`model`] talks to LLM providers, [`tools`]
//! are what the model may call, [`sandbox`] keeps file tools inside the workspace,
//! [`sandbox_os`] confines commands with landlock, [`permissions`] decides whether a tool call
//! may run, [`agent`] is the agent loop (built with [`agent::AgentBuilder`]), [`session`] is a
//! single-agent session, [`transcript`] writes append-only JSONL transcripts, [`config`]
//! resolves layered configuration, [`text`] shortens text, [`swarm`] runs many agents in
//! parallel and [`verify`] runs the project's tests on a worktree and compares the result with
//! the base. [`hardening`] keeps provider keys out of reach of the commands the model runs, and
//! [`redact`] scrubs known secret values from everything ahelper outputs.
//!
//! This crate has no terminal code and prints nothing: user interaction goes through the
//! [`permissions::Prompter`] trait, the [`agent::AgentEvent`] channel and the swarm's events;
//! the binary renders them.

#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod agent;
pub mod atomic_write;
pub mod command_temp;
pub mod config;
pub mod config_ranges;
pub mod hardening;
pub mod hooks;
pub mod mcp;
pub mod model;
pub mod permissions;
pub mod pricing;
pub mod process_sweep;
pub mod project_trust;
pub mod redact;
pub mod sandbox;
pub mod sandbox_os;
pub mod session;
pub mod subagent;
pub mod swarm;
pub mod text;
pub mod tools;
pub mod transcript;
pub mod verify;
