//! A worker's start: its worktree made (a spare recycled, or a new one), bound to its tools and
//! prepared ([`super::super::setup`]), its agent built and run — either once the worktree is
//! there, or, when nothing before the first model reply needs the worktree, while it is being
//! made: the first model request goes out at once and the first tool call waits for the
//! worktree ([`crate::agent::AgentBuilder::workspace_ready`]). Workers that start together then
//! no longer queue their first requests behind each other's worktree (the repository's lock
//! serializes those).

use super::{
    WorkerFailure, WorkerSpec, bind_tool_context, build_agent, create_worktree, run_agent,
    start_mcp_servers, uses_mcp_servers,
};
use crate::agent::prompt::{ProjectInstructions, instructions_at_commit};
use crate::agent::{Agent, AgentOutcome, workspace_ready_channel};
use crate::mcp::McpHub;
use crate::swarm::run::RunContext;
use crate::swarm::spares::WorktreeLease;
use crate::swarm::worker::ProgressSink;
use crate::swarm::{GitTaskError, git_task};
use crate::tools::{ToolContext, WorkspaceError};
use ahelper_worktrees as git;
use std::path::PathBuf;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// A worker's agent loop ended, in its worktree.
pub(super) struct Ran {
    pub worktree: PathBuf,
    pub agent: Agent,
    /// Its MCP servers (shut down when the worker ends).
    pub mcp: McpHub,
    /// The flush of its recycled worktree's marker, when one was left to do.
    pub marker: Option<JoinHandle<Result<(), git::GitError>>>,
    pub outcome: AgentOutcome,
}

/// The worktree made and prepared: its path, its tools' context and the marker flush.
type Made = (
    PathBuf,
    ToolContext,
    Option<JoinHandle<Result<(), git::GitError>>>,
);

/// Whether worker `spec` can send its first model request while its worktree is being made:
/// a new worker (not a resumed one), no `[swarm] setup` command (a failing one should cost no
/// model request), no MCP server for its role (they start in the worktree), and project
/// instructions that the start commit's tree tells without a checkout. `Some(instructions)`:
/// it can, with these instructions (`None`: the project has none).
pub(super) async fn early_start(
    run: &RunContext,
    spec: &WorkerSpec,
) -> Option<Option<ProjectInstructions>> {
    if spec.resume || run.worktree_setup.command.is_some() || uses_mcp_servers(run, spec) {
        return None;
    }
    run.start_instructions
        .at(&run.repo_root, spec.start_commit)
        .await
}

/// The project instructions at a start commit, read from the object store once for the
/// workers that start from it together ([`instructions_at_commit`]); the last commit asked for
/// is kept.
#[derive(Default)]
pub struct StartInstructions {
    last: tokio::sync::Mutex<Option<(git::Oid, Option<Option<ProjectInstructions>>)>>,
}

impl StartInstructions {
    /// [`instructions_at_commit`] of `commit` in `repo`; `None` also when they cannot be read
    /// (the worker then starts once its worktree is made).
    async fn at(
        &self,
        repo: &std::path::Path,
        commit: git::Oid,
    ) -> Option<Option<ProjectInstructions>> {
        let mut last = self.last.lock().await;
        if let Some((at, instructions)) = last.as_ref()
            && *at == commit
        {
            return instructions.clone();
        }
        let repo = repo.to_path_buf();
        let read =
            git_task(move || Ok::<_, GitTaskError>(instructions_at_commit(&repo, commit)?)).await;
        let instructions = read
            .inspect_err(|error| tracing::debug!(%error, "project instructions unreadable from the start commit"))
            .ok()
            .flatten();
        *last = Some((commit, instructions.clone()));
        instructions
    }
}

/// The steps of one worker's start, with what they share.
pub(super) struct WorkerSteps<'a> {
    pub run: &'a RunContext,
    pub spec: &'a WorkerSpec,
    pub coordinator: &'a ProgressSink,
    pub cancel: &'a CancellationToken,
}

impl WorkerSteps<'_> {
    /// The worktree made and prepared, then the agent built (with the MCP servers of its role)
    /// and run.
    pub async fn run_once_made(
        &self,
        lease: Option<&mut WorktreeLease>,
    ) -> Result<Ran, WorkerFailure> {
        let (worktree, tool_context, marker) = self.make_worktree(lease, None).await?;
        tracing::debug!(worker = %self.spec.id, "its worktree is set up");
        let mcp = start_mcp_servers(self.run, self.spec, &worktree, &tool_context).await;
        let built = build_agent(self.run, self.spec, tool_context, &mcp, None);
        let mut agent = match built {
            Ok(agent) => agent,
            Err(failure) => {
                mcp.shutdown().await;
                return Err(failure);
            }
        };
        tracing::debug!(worker = %self.spec.id, "its agent is built");
        let outcome = run_agent(
            &mut agent,
            self.run,
            self.spec,
            self.coordinator,
            self.cancel,
        )
        .await;
        Ok(Ran {
            worktree,
            agent,
            mcp,
            marker,
            outcome,
        })
    }

    /// The agent built for the worktree still to be made (with `instructions`) and run while
    /// the worktree is made and prepared: its tool calls wait for that. A worktree that cannot
    /// be made stops the agent at once and fails the worker, as before.
    pub async fn run_while_made(
        &self,
        lease: Option<&mut WorktreeLease>,
        instructions: Option<ProjectInstructions>,
    ) -> Result<Ran, WorkerFailure> {
        let root =
            ToolContext::for_root_to_be(&self.spec.worktree).map_err(WorkerFailure::Workspace)?;
        let tool_context = bind_tool_context(self.run, self.spec, root);
        let (said, ready) = workspace_ready_channel();
        let early = Some((ready, instructions));
        let mut agent = build_agent(
            self.run,
            self.spec,
            tool_context.clone(),
            &McpHub::default(),
            early,
        )?;
        tracing::debug!(worker = %self.spec.id, "its agent is built; its worktree is being made");
        let agent_cancel = self.cancel.child_token();
        let made = async {
            let made = self.make_worktree(lease, Some(tool_context)).await;
            let _ = said.send(made.as_ref().map(|_| ()).map_err(ToString::to_string));
            match &made {
                Ok(_) => tracing::debug!(worker = %self.spec.id, "its worktree is set up"),
                Err(_) => agent_cancel.cancel(),
            }
            made
        };
        let running = run_agent(
            &mut agent,
            self.run,
            self.spec,
            self.coordinator,
            &agent_cancel,
        );
        let (made, outcome) = tokio::join!(made, running);
        let (worktree, _, marker) = made?;
        Ok(Ran {
            worktree,
            agent,
            mcp: McpHub::default(),
            marker,
            outcome,
        })
    }

    /// Step 1: the worktree — the lease's spare recycled into it, else created — bound to the
    /// worker's tools (`early`: the context built before it existed, checked to be its path)
    /// and prepared for a new worktree (`.worktreeinclude`, `[swarm] setup`).
    async fn make_worktree(
        &self,
        lease: Option<&mut WorktreeLease>,
        early: Option<ToolContext>,
    ) -> Result<Made, WorkerFailure> {
        let (run, spec) = (self.run, self.spec);
        let recycled = match lease {
            Some(lease) if !spec.resume => {
                crate::swarm::spares::recycle_into(lease, run, &spec.branch, spec.start_commit)
                    .await
            }
            _ => None,
        };
        let (worktree, created, marker) = match recycled {
            Some((worktree, marker)) => (worktree, true, marker),
            None => {
                let (worktree, created) = create_worktree(run, spec)
                    .await
                    .map_err(WorkerFailure::Worktree)?;
                (worktree, created, None)
            }
        };
        // Flushed while the worker starts; waited for before its commit.
        let marker = marker.map(|m| tokio::task::spawn_blocking(move || m.sync()));
        let tool_context = match early {
            Some(context) => made_where_expected(context, &worktree)?,
            None => {
                let context = ToolContext::new(&worktree).map_err(WorkerFailure::Workspace)?;
                bind_tool_context(run, spec, context)
            }
        };
        if created {
            run.worktree_setup
                .prepare(
                    &run.repo_root,
                    &worktree,
                    &tool_context,
                    &spec.transcript,
                    self.cancel,
                )
                .await
                .map_err(WorkerFailure::Setup)?;
        }
        Ok((worktree, tool_context, marker))
    }
}

/// `context` (built for the worktree before it existed), once the worktree was made at
/// `worktree`: the same directory, else the worker fails (its tools would work elsewhere).
fn made_where_expected(
    context: ToolContext,
    worktree: &std::path::Path,
) -> Result<ToolContext, WorkerFailure> {
    match std::fs::canonicalize(worktree) {
        Ok(real) if real == context.workspace_root => Ok(context),
        Ok(real) => Err(WorkerFailure::Workspace(WorkspaceError {
            path: real,
            source: std::io::Error::other(format!(
                "the worktree was made there, not at {} where its tools were bound",
                context.workspace_root.display()
            )),
        })),
        Err(source) => Err(WorkerFailure::Workspace(WorkspaceError {
            path: worktree.to_path_buf(),
            source,
        })),
    }
}
