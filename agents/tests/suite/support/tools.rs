//! Tool calls on real directories: a temporary workspace with a [`ToolContext`] and the standard
//! tools.

use ahelper_agents::tools::{ToolContext, ToolError, ToolOutput, ToolRegistry};
use serde_json::Value;
use std::fs;
use std::path::PathBuf;

/// A workspace root `base/ws` in a fresh temporary directory `base` (canonical), with a
/// [`ToolContext`] rooted there and [`ToolRegistry::standard`].
pub struct Workspace {
    _dir: tempfile::TempDir,
    /// The canonical temporary directory; tests put what lies outside the workspace here.
    pub base: PathBuf,
    /// The workspace root (exists, empty).
    pub ws: PathBuf,
    /// The context of every call: workspace root and cwd `ws`.
    pub ctx: ToolContext,
    /// The standard tools.
    pub tools: ToolRegistry,
}

impl Workspace {
    /// An empty workspace in a new temporary directory.
    pub fn new() -> Workspace {
        Workspace::in_dir(tempfile::tempdir().unwrap())
    }

    /// An empty workspace `ws` in `dir`.
    pub fn in_dir(dir: tempfile::TempDir) -> Workspace {
        let base = fs::canonicalize(dir.path()).unwrap();
        let ws = base.join("ws");
        fs::create_dir_all(&ws).unwrap();
        Workspace {
            _dir: dir,
            ctx: ToolContext::new(&ws).unwrap(),
            base,
            ws,
            tools: ToolRegistry::standard(),
        }
    }

    /// Calls `tool` with `input` in [`Workspace::ctx`].
    pub async fn call(&self, tool: &str, input: Value) -> Result<ToolOutput, ToolError> {
        self.call_in(&self.ctx, tool, input).await
    }

    /// Calls `tool` with `input` in `ctx` (a changed copy of [`Workspace::ctx`]).
    pub async fn call_in(
        &self,
        ctx: &ToolContext,
        tool: &str,
        input: Value,
    ) -> Result<ToolOutput, ToolError> {
        self.tools.get(tool).unwrap().call(input, ctx).await
    }

    /// The content of a successful call; panics on a tool error or an error result.
    pub async fn ok(&self, tool: &str, input: Value) -> String {
        match self.call(tool, input.clone()).await {
            Ok(o) => {
                assert!(!o.is_error, "{tool} {input}: {o:?}");
                o.content
            }
            Err(e) => panic!("{tool} {input}: {e}"),
        }
    }

    /// The message of a call that must fail with a tool error.
    pub async fn err(&self, tool: &str, input: Value) -> String {
        match self.call(tool, input.clone()).await {
            Ok(o) => panic!("{tool} {input} should fail, got {o:?}"),
            Err(e) => e.message().to_string(),
        }
    }

    /// Asserts that calling `tool` with `input` fails with a tool error whose message contains
    /// every one of `needles`.
    pub async fn err_says(&self, tool: &str, input: Value, needles: &[&str]) {
        let e = self.err(tool, input.clone()).await;
        for needle in needles {
            assert!(e.contains(needle), "{tool} {input}: {needle:?} not in {e}");
        }
    }

    /// Writes `bytes` to `ws/rel`, creating parent directories.
    pub fn put(&self, rel: &str, bytes: impl AsRef<[u8]>) {
        let p = self.ws.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, bytes).unwrap();
    }

    /// The bytes of `ws/rel`.
    pub fn get(&self, rel: &str) -> Vec<u8> {
        fs::read(self.ws.join(rel)).unwrap()
    }
}

/// `run_command` with `input` (`{"command": …}` and options) in `ctx`; panics on a tool error
/// (a failing command is an [`ToolOutput`] with `is_error`).
pub async fn run_command(ctx: &ToolContext, input: Value) -> ToolOutput {
    ToolRegistry::standard()
        .get("run_command")
        .unwrap()
        .call(input, ctx)
        .await
        .unwrap()
}
