//! Tools the model may call: the [`Tool`] trait, the per-call [`ToolContext`] and the
//! [`ToolRegistry`].
//!
//! Every call receives its workspace root and cwd in the [`ToolContext`]; no tool reads the
//! process's current directory.

use crate::model::ToolSpec;
use dashmap::DashMap;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

pub mod files;
pub mod search;
pub mod shell;

/// What a tool does to the world; drives permission defaults and parallel execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    /// Only reads files (may run concurrently with other reads).
    Read,
    /// Creates or changes files in the workspace.
    Edit,
    /// Runs a program.
    Execute,
}

/// The run-wide file-claims map of a swarm (path relative to the workspace root → worker id),
/// plus the id of the worker that owns this context. See `DESIGN.md` §8.
#[derive(Debug, Clone)]
pub struct FileClaims {
    /// Shared map owned by the run.
    pub map: Arc<DashMap<PathBuf, String>>,
    /// Worker id of the holder of this handle.
    pub owner: String,
}

impl FileClaims {
    /// Claims `relative_path` for [`FileClaims::owner`].
    ///
    /// # Errors
    /// Returns the id of the other worker when the path is already claimed by someone else.
    pub fn claim(&self, relative_path: &Path) -> Result<(), String> {
        let entry = self
            .map
            .entry(relative_path.to_path_buf())
            .or_insert_with(|| self.owner.clone());
        if *entry == self.owner {
            Ok(())
        } else {
            Err(entry.clone())
        }
    }
}

/// Everything a tool call may depend on besides its arguments. Cheap to clone.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// Canonical (realpath) workspace root; file tools never touch anything outside it.
    pub workspace_root: PathBuf,
    /// Directory relative paths are resolved against and commands run in (inside the root).
    pub cwd: PathBuf,
    /// Extra environment variables for child processes (e.g. `AHELPER_RUN_ID`).
    pub env: BTreeMap<String, String>,
    /// Cancelled when the turn is cancelled; long tools must stop promptly.
    pub cancel: CancellationToken,
    /// Swarm file claims; `None` outside a swarm.
    pub claims: Option<FileClaims>,
    /// Largest tool output handed back, in characters (default 30,000); see
    /// [`truncate_middle`].
    pub max_output_chars: usize,
    /// OS sandbox (landlock) for `run_command` children; `None` = commands run unconfined
    /// (the permission rule checks still apply). See [`crate::sandbox_os`].
    pub command_sandbox: Option<Arc<crate::sandbox_os::CommandSandbox>>,
    /// Secret values scrubbed from command output as it streams (see [`crate::redact`]); the
    /// agent loop applies it to every tool result too.
    pub redactor: crate::redact::Redactor,
}

impl ToolContext {
    /// A context for `workspace_root` (canonicalised) with cwd = root and default limits.
    ///
    /// # Errors
    /// Fails when the root does not exist or cannot be canonicalised.
    pub fn new(workspace_root: &Path) -> std::io::Result<Self> {
        let root = std::fs::canonicalize(workspace_root)?;
        Ok(ToolContext {
            cwd: root.clone(),
            workspace_root: root,
            env: BTreeMap::new(),
            cancel: CancellationToken::new(),
            claims: None,
            max_output_chars: DEFAULT_MAX_OUTPUT_CHARS,
            command_sandbox: None,
            redactor: crate::redact::Redactor::default(),
        })
    }
}

/// Default cap on a tool result, in characters.
pub const DEFAULT_MAX_OUTPUT_CHARS: usize = 30_000;

/// Result of a successful tool call: text for the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// What the model reads.
    pub content: String,
    /// True when the tool ran but the outcome is a failure the model should act on
    /// (e.g. a command exited non-zero).
    pub is_error: bool,
}

impl ToolOutput {
    /// A successful output.
    pub fn ok(content: impl Into<String>) -> Self {
        ToolOutput {
            content: content.into(),
            is_error: false,
        }
    }
}

/// A tool call that could not be carried out; the message is sent back as an `is_error` result.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct ToolError(pub String);

impl ToolError {
    /// Builds an error from anything printable.
    pub fn new(message: impl Into<String>) -> Self {
        ToolError(message.into())
    }
}

impl From<crate::sandbox::SandboxError> for ToolError {
    fn from(e: crate::sandbox::SandboxError) -> Self {
        ToolError(e.to_string())
    }
}

/// A tool the model may call.
#[async_trait::async_trait]
pub trait Tool: Send + Sync {
    /// Name the model uses.
    fn name(&self) -> &'static str;
    /// When to use it and what it returns.
    fn description(&self) -> &'static str;
    /// JSON Schema of the arguments (from schemars).
    fn input_schema(&self) -> Value;
    /// Read, edit or execute.
    fn kind(&self) -> ToolKind;
    /// What permission rules match against: the path argument (as given) for file tools, the
    /// command line for `run_command`; `None` when the tool has no such subject.
    fn permission_subject(&self, input: &Value) -> Option<String>;
    /// Runs the call.
    ///
    /// # Errors
    /// [`ToolError`] with a message the model can act on (bad arguments, path outside the
    /// workspace, file not found, …).
    async fn call(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError>;
}

/// The tools of one agent, by name.
#[derive(Clone, Default)]
pub struct ToolRegistry {
    tools: BTreeMap<String, Arc<dyn Tool>>,
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// The standard tools: `read_file`, `write_file`, `edit_file`, `list_dir`, `glob`, `grep`,
    /// `run_command`.
    pub fn standard() -> Self {
        let mut r = Self::new();
        r.register(Arc::new(files::ReadFile));
        r.register(Arc::new(files::WriteFile));
        r.register(Arc::new(files::EditFile));
        r.register(Arc::new(files::ListDir));
        r.register(Arc::new(search::Glob));
        r.register(Arc::new(search::Grep));
        r.register(Arc::new(shell::RunCommand));
        r
    }

    /// Same as [`ToolRegistry::standard`] without the edit and execute tools (plan mode).
    pub fn read_only(&self) -> Self {
        let tools = self
            .tools
            .iter()
            .filter(|(_, t)| t.kind() == ToolKind::Read)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        ToolRegistry { tools }
    }

    /// Adds or replaces a tool.
    pub fn register(&mut self, tool: Arc<dyn Tool>) {
        self.tools.insert(tool.name().to_string(), tool);
    }

    /// Looks a tool up by name.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.get(name)
    }

    /// Tool names in order.
    pub fn names(&self) -> Vec<&str> {
        self.tools.keys().map(String::as_str).collect()
    }

    /// Specs to offer the model.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools
            .values()
            .map(|t| ToolSpec {
                name: t.name().to_string(),
                description: t.description().to_string(),
                input_schema: t.input_schema(),
            })
            .collect()
    }
}

/// Shortens `text` to at most about `max_chars` characters, keeping the first 60% and the tail,
/// with a marker line in between saying how many characters were cut. Text within the limit is
/// returned unchanged. Cuts fall on `char` boundaries.
pub fn truncate_middle(text: &str, max_chars: usize) -> String {
    let total = text.chars().count();
    if total <= max_chars {
        return text.to_string();
    }
    let head_chars = max_chars * 6 / 10;
    let tail_chars = max_chars - head_chars;
    let cut = total - head_chars - tail_chars;
    let head: String = text.chars().take(head_chars).collect();
    let tail: String = text.chars().skip(total - tail_chars).collect();
    format!("{head}\n[… {cut} characters cut from the middle of this output …]\n{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncate_keeps_head_and_tail_with_marker() {
        let text: String = (0..1000)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        let out = truncate_middle(&text, 100);
        assert!(out.starts_with(&text[..60]));
        assert!(out.ends_with(&text[960..]));
        assert!(out.contains("900 characters cut"));
        assert_eq!(truncate_middle("short", 100), "short");
    }

    #[test]
    fn claims_refuse_other_owner() {
        let map = Arc::new(DashMap::new());
        let a = FileClaims {
            map: map.clone(),
            owner: "w1".into(),
        };
        let b = FileClaims {
            map,
            owner: "w2".into(),
        };
        assert!(a.claim(Path::new("src/a.rs")).is_ok());
        assert!(a.claim(Path::new("src/a.rs")).is_ok());
        assert_eq!(b.claim(Path::new("src/a.rs")), Err("w1".to_string()));
    }
}
