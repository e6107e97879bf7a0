//! Tools the model may call: the [`Tool`] trait, the per-call [`ToolContext`] and the
//! [`ToolRegistry`].
//!
//! Built-in tools are data plus one function: [`catalog`] says what the model is shown of each
//! (arguments, name, description, kind, permission subject, example), [`BuiltinTool`] what a
//! call does, and one generic [`Tool`] implementation joins the two.
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

pub mod catalog;
pub mod files;
pub mod search;
pub mod shell;

use catalog::ToolArgs;

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
/// plus the id of the worker that owns this context (`docs/architecture.md`, "Where state lives").
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
    /// Canonical (realpath) workspace root; file tools never touch anything outside it and
    /// `added_dirs`.
    pub workspace_root: PathBuf,
    /// Directories added with `--add-dir` (canonical): further roots the file tools accept
    /// paths in and commands may run in, protected paths inside them refused as in the
    /// workspace. Empty unless set.
    pub added_dirs: Vec<PathBuf>,
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
    /// agent loop applies it to every tool result, event, streamed text and outcome, and
    /// [`crate::agent::AgentBuilder`] gives it to the agent's transcript writer.
    pub redactor: crate::redact::Redactor,
    /// The `read_file` deny rules in force (set by the agent before each batch of calls): the
    /// `grep` and `glob` tools skip the files they cover, symbolic links resolved (see
    /// [`crate::permissions::read_denied`]).
    pub read_deny: Vec<crate::permissions::PermissionRule>,
    /// Time limit of one call of a file tool (`read_file`, `write_file`, `edit_file`,
    /// `list_dir`, `glob`, `grep`; default [`DEFAULT_FILE_TOOL_TIMEOUT`], set from
    /// `agent.file_tool_timeout_s`): past it the call fails with a message naming the limit,
    /// and its work is told to stop (its cancellation token fires).
    pub file_tool_timeout: std::time::Duration,
}

/// Default time limit of one file-tool call: 60 seconds.
pub const DEFAULT_FILE_TOOL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

impl ToolContext {
    /// A context for `workspace_root` (canonicalised) with cwd = root and default limits.
    ///
    /// # Errors
    /// [`WorkspaceError`] when the root does not exist or cannot be canonicalised.
    pub fn new(workspace_root: &Path) -> Result<Self, WorkspaceError> {
        let root = std::fs::canonicalize(workspace_root).map_err(|source| WorkspaceError {
            path: workspace_root.to_path_buf(),
            source,
        })?;
        Ok(ToolContext::at_canonical_root(root))
    }

    /// A context for `root`, already canonical (or the canonical parent of a root to be), with
    /// cwd = root and default limits.
    fn at_canonical_root(root: PathBuf) -> Self {
        ToolContext {
            cwd: root.clone(),
            workspace_root: root,
            added_dirs: Vec::new(),
            env: BTreeMap::new(),
            cancel: CancellationToken::new(),
            claims: None,
            max_output_chars: DEFAULT_MAX_OUTPUT_CHARS,
            command_sandbox: None,
            redactor: crate::redact::Redactor::default(),
            read_deny: Vec::new(),
            file_tool_timeout: DEFAULT_FILE_TOOL_TIMEOUT,
        }
    }

    /// A context for a workspace root that does not exist yet (a worktree still being made):
    /// its parent directory canonicalised (and created when missing), its last component as
    /// given. The caller must not run a tool before the directory is there, and must check
    /// that it was made at this path (a symlink put there would change what it resolves to).
    ///
    /// # Errors
    /// [`WorkspaceError`] when `root` has no parent or last component, or the parent cannot be
    /// created or canonicalised.
    pub fn for_root_to_be(root: &Path) -> Result<Self, WorkspaceError> {
        let error = |source| WorkspaceError {
            path: root.to_path_buf(),
            source,
        };
        let (Some(parent), Some(name)) = (root.parent(), root.file_name()) else {
            let reason = "it has no parent directory or no name";
            return Err(error(std::io::Error::other(reason)));
        };
        std::fs::create_dir_all(parent).map_err(error)?;
        let parent = std::fs::canonicalize(parent).map_err(error)?;
        Ok(ToolContext::at_canonical_root(parent.join(name)))
    }

    /// Resolves a path the model gave, relative to this call's cwd, inside the workspace or an
    /// added directory ([`crate::sandbox::resolve_in_roots`]). A write inside one of the user's
    /// protected directories (those of [`Self::command_sandbox`]) is refused as well.
    ///
    /// # Errors
    /// The [`crate::sandbox::SandboxError`] of a refused path
    /// ([`crate::sandbox::SandboxError::Protected`] for a protected user directory).
    pub fn resolve(
        &self,
        requested: &str,
        access: crate::sandbox::Access,
    ) -> Result<crate::sandbox::ResolvedPath, crate::sandbox::SandboxError> {
        let resolved = crate::sandbox::resolve_in_roots(
            &self.workspace_root,
            &self.added_dirs,
            &self.cwd,
            requested,
            access,
        )?;
        if access == crate::sandbox::Access::Write {
            self.check_user_dirs(requested, &resolved)?;
        }
        Ok(resolved)
    }

    /// Refuses a write inside one of the user's protected directories (ahelper's config and
    /// state, `~/.local/bin`, `~/.config/systemd`…: [`crate::sandbox_os::CommandSandbox::protected_dirs`])
    /// in every mode: writing them would change ahelper's own rules or run code later.
    fn check_user_dirs(
        &self,
        requested: &str,
        resolved: &crate::sandbox::ResolvedPath,
    ) -> Result<(), crate::sandbox::SandboxError> {
        let Some(sandbox) = &self.command_sandbox else {
            return Ok(());
        };
        let root = resolved
            .added_root
            .as_deref()
            .unwrap_or(&self.workspace_root);
        // A root inside a protected directory (a swarm worker's worktree in ahelper's state
        // directory) is the agent's own: the directory protects what lies beside it.
        let hit = sandbox
            .protected_dirs()
            .iter()
            .map(|d| crate::sandbox_os::binds::canonical_best(d))
            .find(|d| resolved.physical.starts_with(d) && !root.starts_with(d));
        match hit {
            Some(dir) => Err(crate::sandbox::SandboxError::Protected {
                requested: requested.to_string(),
                relative: resolved.physical.clone(),
                reason: user_dir_reason(&dir),
            }),
            None => Ok(()),
        }
    }
}

/// Why a protected user directory ([`ToolContext::check_user_dirs`]) is protected.
fn user_dir_reason(dir: &Path) -> &'static str {
    let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
    match name {
        "ahelper" => {
            "it is in ahelper's own configuration or state directory (user config, trusted \
             projects, MCP approvals)"
        }
        "bin" => "`~/.local/bin` is on PATH: a program there runs in place of the one meant",
        "systemd" | "autostart" => {
            "systemd user units and autostart entries run programs on their own"
        }
        _ => "git's user configuration runs code in every git command",
    }
}

/// A directory that cannot be a workspace (missing, unreadable).
#[derive(Debug, thiserror::Error)]
#[error("workspace {path}: {source}")]
pub struct WorkspaceError {
    /// The directory.
    pub path: PathBuf,
    /// Why it cannot be resolved.
    pub source: std::io::Error,
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
    /// Model tokens the call itself spent (a sub-agent's requests, [`crate::subagent`]); the
    /// calling agent adds them to its usage. Zero for other tools.
    pub usage: crate::model::Usage,
}

impl ToolOutput {
    /// A successful output.
    pub fn ok(content: impl Into<String>) -> Self {
        ToolOutput {
            content: content.into(),
            is_error: false,
            usage: crate::model::Usage::default(),
        }
    }
}

/// A tool call that could not be carried out. As codex-rs's `FunctionCallError`, it separates
/// what the model is told from what ends the loop.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ToolError {
    /// The call failed in a way the model can act on (bad arguments, a path outside the
    /// workspace, a missing file, a file claimed by another worker, …): sent back as an
    /// `is_error` tool result, and the loop goes on.
    #[error("{0}")]
    RespondToModel(String),
    /// The tool cannot work in this agent's environment (the command sandbox cannot be set up,
    /// the workspace is gone): no other call could succeed and only the user can fix it. The
    /// message is still the call's result (the history stays valid), and the loop stops with
    /// [`crate::agent::AgentStopReason::Error`].
    #[error("{0}")]
    Fatal(String),
}

impl ToolError {
    /// An error the model is told about (the common case).
    pub fn new(message: impl Into<String>) -> Self {
        ToolError::RespondToModel(message.into())
    }

    /// An error that stops the agent loop.
    pub fn fatal(message: impl Into<String>) -> Self {
        ToolError::Fatal(message.into())
    }

    /// The message (what the model reads as the call's result).
    pub fn message(&self) -> &str {
        match self {
            ToolError::RespondToModel(m) | ToolError::Fatal(m) => m,
        }
    }

    /// Whether it stops the agent loop.
    pub fn is_fatal(&self) -> bool {
        matches!(self, ToolError::Fatal(_))
    }
}

impl From<crate::sandbox::SandboxError> for ToolError {
    fn from(e: crate::sandbox::SandboxError) -> Self {
        ToolError::RespondToModel(e.to_string())
    }
}

/// A tool the model may call.
#[async_trait::async_trait]
pub trait Tool: Send + Sync {
    /// Name the model uses.
    fn name(&self) -> &str;
    /// When to use it and what it returns.
    fn description(&self) -> &str;
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
    /// [`ToolError::RespondToModel`] with a message the model can act on (bad arguments, path
    /// outside the workspace, file not found, …); [`ToolError::Fatal`] when the tool cannot work
    /// here at all.
    async fn call(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError>;
    /// Whether the tool is offered to the model now (`false` once the MCP server behind it has
    /// stopped; a call still gets a message saying why). Built-in tools always are.
    fn is_available(&self) -> bool {
        true
    }
}

/// A built-in tool: the arguments it takes (which carry its [`catalog::BuiltinSpec`]) and what a
/// call does. Every built-in tool is a [`Tool`] through this trait.
pub trait BuiltinTool: Send + Sync {
    /// Its arguments.
    type Args: ToolArgs;

    /// Carries out a call whose arguments have been parsed.
    fn run(
        &self,
        args: Self::Args,
        ctx: &ToolContext,
    ) -> impl std::future::Future<Output = Result<ToolOutput, ToolError>> + Send;
}

#[async_trait::async_trait]
impl<T: BuiltinTool> Tool for T {
    fn name(&self) -> &'static str {
        T::Args::SPEC.name
    }
    fn description(&self) -> &'static str {
        T::Args::SPEC.description
    }
    fn input_schema(&self) -> Value {
        catalog::schema_of::<T::Args>()
    }
    fn kind(&self) -> ToolKind {
        T::Args::SPEC.kind
    }
    fn permission_subject(&self, input: &Value) -> Option<String> {
        let key = T::Args::SPEC.subject?;
        input.get(key).and_then(Value::as_str).map(str::to_string)
    }
    async fn call(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let args = T::Args::parse(input)?;
        self.run(args, ctx).await
    }
}

/// A built-in tool that works on tokio's blocking pool (file reads, writes and walks): the
/// function that carries out a call. A call that takes longer than
/// [`ToolContext::file_tool_timeout`] fails with a message naming that limit, and the
/// cancellation token of its context fires so that the work stops at its next check.
pub struct Blocking<A>(pub fn(&A, &ToolContext) -> Result<ToolOutput, ToolError>);

impl<A: ToolArgs> BuiltinTool for Blocking<A> {
    type Args = A;

    async fn run(&self, args: A, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let (work, mut ctx) = (self.0, ctx.clone());
        let stop = ctx.cancel.child_token();
        ctx.cancel = stop.clone();
        let limit = ctx.file_tool_timeout;
        let job = tokio::task::spawn_blocking(move || work(&args, &ctx));
        match tokio::time::timeout(limit, job).await {
            Ok(joined) => {
                joined.map_err(|e| ToolError::new(format!("{} failed: {e}", A::SPEC.name)))?
            }
            Err(_) => {
                stop.cancel();
                Err(ToolError::new(format!(
                    "{} did not finish within the time limit of file tools ({} s, \
                     agent.file_tool_timeout_s) and was stopped; narrow the path, pattern or \
                     range, or use run_command for long work",
                    A::SPEC.name,
                    limit.as_secs_f64()
                )))
            }
        }
    }
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
        r.register(Arc::new(Blocking(files::read_file)));
        r.register(Arc::new(Blocking(files::write_file)));
        r.register(Arc::new(Blocking(files::edit_file)));
        r.register(Arc::new(Blocking(files::list_dir)));
        r.register(Arc::new(Blocking(search::glob)));
        r.register(Arc::new(Blocking(search::grep)));
        r.register(Arc::new(shell::RunCommand));
        r
    }

    /// The read-only tools of this registry (plan mode, the swarm coordinator).
    pub fn read_only(&self) -> Self {
        let tools = self
            .tools
            .iter()
            .filter(|(_, t)| t.kind() == ToolKind::Read)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        ToolRegistry { tools }
    }

    /// The tools of this registry whose names are in `names` (a role's tool list); names it
    /// does not have are left out.
    pub fn select(&self, names: &[String]) -> Self {
        let tools = self
            .tools
            .iter()
            .filter(|(name, _)| names.contains(name))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        ToolRegistry { tools }
    }

    /// This registry without the tool `name`.
    pub fn without(mut self, name: &str) -> Self {
        self.tools.remove(name);
        self
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

    /// Specs to offer the model (tools that are not available now are left out).
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools
            .values()
            .filter(|t| t.is_available())
            .map(|t| ToolSpec {
                name: t.name().to_string(),
                description: t.description().to_string(),
                input_schema: t.input_schema(),
            })
            .collect()
    }
}

pub use crate::text::truncate_middle;

/// One line naming a tool call: the tool and its main argument (`command`, `path`, `pattern` or
/// `file_path`, else the arguments as JSON), the argument's first line cut to `max_chars`
/// characters with `…` (e.g. `run_command cargo test…`). Used by the terminal renderer and the
/// swarm's "last action" column.
pub fn describe_call(name: &str, input: &Value, max_chars: usize) -> String {
    let main = ["command", "path", "pattern", "file_path"]
        .iter()
        .find_map(|k| input.get(*k).and_then(Value::as_str))
        .map(str::to_string)
        .unwrap_or_else(|| {
            let s = input.to_string();
            if s == "{}" { String::new() } else { s }
        });
    let main = crate::text::first_line_clipped(&main, max_chars);
    if main.is_empty() {
        name.to_string()
    } else {
        format!("{name} {main}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_description_uses_main_argument() {
        use serde_json::json;
        assert_eq!(
            describe_call("read_file", &json!({"path": "src/lib.rs"}), 100),
            "read_file src/lib.rs"
        );
        assert_eq!(
            describe_call("run_command", &json!({"command": "ls\nrm x"}), 100),
            "run_command ls…"
        );
        assert_eq!(describe_call("list_dir", &json!({}), 100), "list_dir");
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
