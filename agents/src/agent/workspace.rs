//! A workspace still being made while the agent's first model request is in flight (a swarm
//! worker's worktree): tool calls and hooks wait for it ([`super::AgentBuilder::workspace_ready`]).

use super::{Agent, AgentStopReason, LoopStop};
use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use tokio_util::sync::CancellationToken;

/// Resolves once the agent's workspace exists; `Err(reason)`: it never will.
pub type WorkspaceReady = Shared<BoxFuture<'static, Result<(), String>>>;

/// Who makes the workspace says through the sender when it is there (`Ok(())`) or why it
/// cannot be (`Err(reason)`); a sender dropped without a word counts as `Err`.
pub fn workspace_ready_channel() -> (
    tokio::sync::oneshot::Sender<Result<(), String>>,
    WorkspaceReady,
) {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let ready = rx
        .map(|said| said.unwrap_or_else(|_| Err("its maker ended without a word".into())))
        .boxed()
        .shared();
    (tx, ready)
}

impl Agent {
    /// Waits until the workspace exists (at once when it was never pending or is there
    /// already). A workspace that cannot be made, or `cancel` while waiting, stops the loop.
    pub(super) async fn wait_for_workspace(
        &mut self,
        cancel: &CancellationToken,
    ) -> Option<LoopStop> {
        let ready = self.workspace_ready.clone()?;
        let made = tokio::select! {
            made = ready => made,
            () = cancel.cancelled() => return Some(LoopStop::new(AgentStopReason::Cancelled, None)),
        };
        match made {
            Ok(()) => {
                self.workspace_ready = None;
                None
            }
            Err(reason) => Some(LoopStop::new(
                AgentStopReason::Error,
                Some(format!("the workspace could not be made: {reason}")),
            )),
        }
    }

    /// Whether the workspace exists, waiting for it while it is being made (hooks run there).
    pub(super) async fn workspace_exists(&self) -> bool {
        match self.workspace_ready.clone() {
            Some(ready) => ready.await.is_ok(),
            None => true,
        }
    }
}
