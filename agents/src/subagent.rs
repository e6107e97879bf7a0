//! The `agent` tool: a sub-agent, as Claude Code's Task (agent) tool.
//!
//! The model calls `agent` with a `description` (3–5 words), a `prompt` and optionally a
//! `subagent_type` (a role: built-in `general-purpose` — the default — or `explore`, or any
//! role of [`crate::swarm::roles`], `.ahelper/agents/<name>.md` included) and
//! `isolation: "worktree"`. A child [`Agent`] runs the prompt with:
//!
//! - its own context window (an empty history) and its own transcript,
//!   `.ahelper/sessions/<parent session>/agents/<agent id>.jsonl`, named in the tool result;
//! - the role's tools out of the parent's (MCP tools by an `mcp__…` entry; read-only ones only
//!   in plan mode), never `agent` itself: a sub-agent cannot start further agents;
//! - the parent's permission gate (same policy, prompter and persistence), command sandbox,
//!   environment, limits and hooks — its end runs the `SubagentStop` hooks;
//! - with `isolation: "worktree"`: its own git worktree on a new branch `ahelper/agent/<id>`
//!   under `.ahelper/worktrees/<id>` (as Claude Code keeps them under `.claude/worktrees/`), its
//!   changes committed there at the end; worktree and branch are kept and named in the result.
//!
//! Its final text (cut to [`MAX_RESULT_CHARS`]) is the tool result; its tokens come back in
//! [`ToolOutput::usage`] and count in the parent's usage. The tool is of kind
//! [`ToolKind::Read`]: calling it needs no permission of its own (each of the sub-agent's calls
//! is decided by the gate), and several `agent` calls of one response run concurrently.

use crate::agent::gate::PermissionGate;
use crate::agent::{Agent, AgentOutcome, AgentSettings, AgentStopReason};
use crate::mcp::hub::role_offers;
use crate::model::ModelClient;
use crate::permissions::PermissionMode;
use crate::swarm::roles::{RoleDefinition, load_role};
use crate::tools::catalog::{BuiltinSpec, ToolArgs};
use crate::tools::{BuiltinTool, ToolContext, ToolError, ToolKind, ToolOutput, ToolRegistry};
use ahelper_worktrees as git;
use schemars::JsonSchema;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The tool's name, as the model calls it.
pub const AGENT_TOOL: &str = "agent";

/// The role a sub-agent gets when the call names none.
pub const DEFAULT_SUBAGENT_TYPE: &str = "general-purpose";

/// Longest sub-agent reply handed back to the parent, in characters (the middle is cut).
pub const MAX_RESULT_CHARS: usize = 20_000;

/// Arguments of an `agent` call.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentArgs {
    /// A short (3-5 word) description of the task, shown to the user.
    description: String,
    /// The task for the sub-agent: everything it needs to know, since it does not see this
    /// conversation. It answers with one final reply.
    prompt: String,
    /// The role of the sub-agent: `general-purpose` (default: reads, searches, runs
    /// commands), `explore` (read-only), or a project role from `.ahelper/agents/<name>.md`.
    #[serde(default)]
    subagent_type: Option<String>,
    /// `worktree`: run the sub-agent in its own git worktree on a new branch, so that its
    /// edits do not touch this checkout; the branch is kept and named in the result.
    #[serde(default)]
    isolation: Option<Isolation>,
}

/// Where a sub-agent works.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Isolation {
    /// Its own git worktree and branch.
    Worktree,
}

const SHAPE: &str = r#"{"description": "find the parser", "prompt": "Where is …? Answer with paths.", "subagent_type": "explore"}"#;

/// `agent`: a sub-agent on a self-contained task.
impl ToolArgs for AgentArgs {
    const SPEC: BuiltinSpec = BuiltinSpec {
        name: AGENT_TOOL,
        description: "Starts a sub-agent with its own context window on a self-contained task (research across \
            many files, a bounded change, a question whose exploration would fill this conversation) \
            and returns its final reply. Give it everything it needs in `prompt`: it does not see this \
            conversation. Several `agent` calls in one response run at the same time. The sub-agent \
            works under the same permissions; it cannot start further agents. `subagent_type`: \
            `general-purpose` (default) or `explore` (read-only). `isolation: \"worktree\"` gives it \
            its own git worktree and branch (kept; the result names them).",
        kind: ToolKind::Read,
        subject: None,
        example: SHAPE,
    };
}

/// What a sub-agent inherits from the session that offers the `agent` tool.
#[derive(Clone)]
pub struct SubagentLauncher {
    /// The parent's model client.
    pub client: Arc<dyn ModelClient>,
    /// Model name.
    pub model: String,
    /// The parent's gate: its policy (mode, rules, `a`/`d` answers) is shared.
    pub gate: PermissionGate,
    /// The parent's tools (the sub-agent gets its role's share of them).
    pub tools: ToolRegistry,
    /// The parent's limits and hooks.
    pub settings: AgentSettings,
    /// The parent's session id (its transcript's stem).
    pub parent_session: String,
    /// Directory of the parent's sub-agent transcripts
    /// (`.ahelper/sessions/<parent session>/agents`).
    pub transcripts: PathBuf,
    /// Serialises worktree creation per repository.
    pub git: Arc<git::GitOwner>,
}

/// The `agent` tool.
pub struct AgentTool {
    launcher: SubagentLauncher,
}

impl AgentTool {
    /// The tool for a session described by `launcher`.
    pub fn new(launcher: SubagentLauncher) -> Self {
        AgentTool { launcher }
    }
}

impl BuiltinTool for AgentTool {
    type Args = AgentArgs;

    async fn run(&self, args: AgentArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let role_name = args
            .subagent_type
            .clone()
            .unwrap_or_else(|| DEFAULT_SUBAGENT_TYPE.to_string());
        let role = load_role(&ctx.workspace_root, &role_name).map_err(|e| {
            ToolError::new(format!(
                "{e}. Use `general-purpose`, `explore`, or a role defined in .ahelper/agents/."
            ))
        })?;
        let id = short_id();
        let place = match args.isolation {
            None => Place::Shared(ctx.clone()),
            Some(Isolation::Worktree) => self.isolated_place(&id, ctx).await?,
        };
        let mut agent = self.build_agent(&id, &args, &role, place.context())?;
        let outcome = agent.run(&args.prompt, &ctx.cancel).await;
        let kept = match &place {
            Place::Shared(_) => None,
            Place::Worktree { worktree, .. } => Some(commit_worktree(worktree, &args).await),
        };
        Ok(ToolOutput {
            content: render_result(&SubagentReport {
                id: &id,
                role: &role.name,
                outcome: &outcome,
                transcript: &self.transcript_path(&id),
                place: &place,
                kept: kept.as_ref(),
            }),
            is_error: outcome.stop_reason != AgentStopReason::Completed,
            usage: outcome.usage,
        })
    }
}

/// Where a sub-agent runs.
enum Place {
    /// In the parent's workspace, with the parent's tool context.
    Shared(ToolContext),
    /// In its own worktree.
    Worktree {
        /// The worktree's tool context.
        context: ToolContext,
        /// The worktree.
        worktree: PathBuf,
        /// Its branch.
        branch: String,
    },
}

impl Place {
    fn context(&self) -> ToolContext {
        match self {
            Place::Shared(context) | Place::Worktree { context, .. } => context.clone(),
        }
    }
}

/// What committing an isolated sub-agent's worktree gave.
#[derive(Debug)]
enum KeptWork {
    /// Its changes are this commit on its branch.
    Committed(git::Oid),
    /// It changed nothing.
    NoChanges,
    /// The commit failed; the changes are left uncommitted in the worktree.
    Failed(String),
}

impl AgentTool {
    fn transcript_path(&self, id: &str) -> PathBuf {
        self.launcher.transcripts.join(format!("{id}.jsonl"))
    }

    /// The child agent: the role's share of the parent's tools, the parent's gate (prompts
    /// labelled with the description), limits and hooks (`SubagentStop` at its end), an empty
    /// history and its own transcript.
    fn build_agent(
        &self,
        id: &str,
        args: &AgentArgs,
        role: &RoleDefinition,
        context: ToolContext,
    ) -> Result<Agent, ToolError> {
        let launcher = &self.launcher;
        let plan_mode = launcher
            .gate
            .policy
            .read()
            .map(|p| p.mode == PermissionMode::Plan)
            .unwrap_or(true);
        let mut tools = role_tools(&launcher.tools, &role.tools);
        if plan_mode {
            tools = tools.read_only();
        }
        let mut gate = launcher.gate.clone();
        gate.requester = Some(format!("agent {id} · {}", args.description));
        let max_turns = launcher.settings.max_turns;
        let settings = AgentSettings {
            max_turns: role.max_turns.map_or(max_turns, |m| m.min(max_turns)),
            ..launcher.settings.clone()
        };
        Agent::builder(
            launcher.client.clone(),
            launcher.model.clone(),
            context,
            gate,
        )
        .tools(tools)
        .role_instructions(role.instructions.clone())
        .subagent()
        .settings(settings)
        .transcript(
            self.transcript_path(id),
            format!("{}/{id}", launcher.parent_session),
        )
        .build()
        .map_err(|e| ToolError::new(format!("cannot start the sub-agent: {e}")))
    }

    /// A new worktree and branch for the sub-agent at the parent's `HEAD`, with a tool context
    /// (and command sandbox) rooted there.
    async fn isolated_place(&self, id: &str, ctx: &ToolContext) -> Result<Place, ToolError> {
        let root = ctx.workspace_root.clone();
        let owner = self.launcher.git.clone();
        let branch = format!("ahelper/agent/{id}");
        let worktree = root.join(".ahelper").join("worktrees").join(id);
        let (b, w) = (branch.clone(), worktree.clone());
        let created = tokio::task::spawn_blocking(move || {
            let repo = git::RepoInfo::discover(&root)?.workdir;
            let lock = owner.lock_for(&repo)?;
            let _ = git::ensure_excluded(&repo, ".ahelper/");
            let head = git::resolve_commit(&repo, "HEAD")?;
            git::create_worktree(&lock, &repo, &w, &b, head)
        })
        .await
        .map_err(|e| ToolError::new(format!("the worktree task failed: {e}")))?
        .map_err(|e| {
            ToolError::new(format!(
                "cannot give the sub-agent its own worktree: {e}. Call `agent` without `isolation` \
                 to run it in this checkout."
            ))
        })?;
        let mut context = ToolContext::new(&created.path)
            .map_err(|e| ToolError::new(format!("the new worktree is unusable: {e}")))?;
        context.env = ctx.env.clone();
        context.redactor = ctx.redactor.clone();
        context.max_output_chars = ctx.max_output_chars;
        context.read_deny = ctx.read_deny.clone();
        context.added_dirs = ctx.added_dirs.clone();
        if let Some(sandbox) = &ctx.command_sandbox {
            let sandbox = isolated_sandbox(sandbox, &ctx.workspace_root, &context.workspace_root);
            context.command_sandbox = Some(Arc::new(sandbox));
        }
        Ok(Place::Worktree {
            context,
            worktree: created.path,
            branch,
        })
    }
}

/// The tools of `parent` that a role with `role_tools` gets: the built-in ones it names, the
/// MCP ones it names or covers (`mcp__*`), never `agent`.
pub fn role_tools(parent: &ToolRegistry, role_tools: &[String]) -> ToolRegistry {
    let mut tools = parent.select(role_tools);
    for name in parent.names() {
        if name.starts_with("mcp__")
            && role_offers(role_tools, name)
            && let Some(tool) = parent.get(name)
        {
            tools.register(tool.clone());
        }
    }
    tools.without(AGENT_TOOL)
}

/// Commits what an isolated sub-agent changed in its worktree.
async fn commit_worktree(worktree: &Path, args: &AgentArgs) -> KeptWork {
    let worktree = worktree.to_path_buf();
    let message = format!("ahelper agent: {}", args.description.trim());
    let done =
        tokio::task::spawn_blocking(move || git::commit_all(&worktree, &message, None)).await;
    match done {
        Ok(Ok(Some(commit))) => KeptWork::Committed(commit),
        Ok(Ok(None)) => KeptWork::NoChanges,
        Ok(Err(e)) => KeptWork::Failed(e.to_string()),
        Err(e) => KeptWork::Failed(e.to_string()),
    }
}

/// Everything the tool result says about one sub-agent.
struct SubagentReport<'a> {
    id: &'a str,
    role: &'a str,
    outcome: &'a AgentOutcome,
    transcript: &'a Path,
    place: &'a Place,
    kept: Option<&'a KeptWork>,
}

/// The tool result: the sub-agent's final reply (bounded), then one line on how it ended, its
/// transcript and, when isolated, its worktree, branch and commit.
fn render_result(report: &SubagentReport<'_>) -> String {
    let outcome = report.outcome;
    let mut text = crate::tools::truncate_middle(outcome.final_text.trim(), MAX_RESULT_CHARS);
    if text.is_empty() {
        text = "(the sub-agent gave no final reply)".to_string();
    }
    let mut footer = format!(
        "[sub-agent {} ({}): {}, {} turns, {} tool calls, {} tokens; transcript {}",
        report.id,
        report.role,
        outcome.stop_reason.as_str(),
        outcome.turns,
        outcome.tool_calls,
        outcome.usage.input_tokens + outcome.usage.output_tokens,
        report.transcript.display()
    );
    if let Some(error) = &outcome.error {
        footer.push_str(&format!("; {error}"));
    }
    if let Place::Worktree {
        worktree, branch, ..
    } = report.place
    {
        let kept = match report.kept {
            Some(KeptWork::Committed(commit)) => {
                format!("its changes are commit {:.12}", commit.to_string())
            }
            Some(KeptWork::NoChanges) | None => "no changes".to_string(),
            Some(KeptWork::Failed(e)) => {
                format!("the commit failed ({e}); its changes are uncommitted there")
            }
        };
        footer.push_str(&format!(
            "; worktree {} on branch {branch} (kept): {kept}",
            worktree.display()
        ));
    }
    footer.push(']');
    format!("{text}\n\n{footer}")
}

/// A short unique id (12 hex digits of a UUID v7: time-ordered).
fn short_id() -> String {
    let full = uuid::Uuid::now_v7().simple().to_string();
    // The last digits are random; the first ones are the time.
    format!("{}{}", &full[4..12], &full[28..32])
}

/// The parent's command sandbox re-rooted at an isolated sub-agent's `worktree`, with reads
/// confined as a swarm worker's are: its commands may not read the parent's checkout
/// `parent_root` (the user's uncommitted files, sessions, other sub-agents' worktrees beneath
/// `.ahelper/worktrees/`) except their own worktree (writable, hence readable) and the
/// repository's `.git` (read-only: git in a linked worktree needs it). A writable path of the
/// user's that contains the checkout is dropped (each command has its private temp dir).
fn isolated_sandbox(
    sandbox: &crate::sandbox_os::CommandSandbox,
    parent_root: &std::path::Path,
    worktree: &std::path::Path,
) -> crate::sandbox_os::CommandSandbox {
    let canonical = |p: &std::path::Path| std::fs::canonicalize(p).unwrap_or(p.to_path_buf());
    let mut isolated = sandbox.for_workspace(worktree);
    let checkout = canonical(parent_root);
    let worktree = isolated.workspace_root().to_path_buf();
    isolated
        .writable
        .retain(|w| *w == worktree || !checkout.starts_with(w));
    if !isolated.read_denied.contains(&checkout) {
        isolated.read_denied.push(checkout.clone());
    }
    isolated.readable.push(canonical(&checkout.join(".git")));
    isolated
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::catalog::{parse_args, schema_of};

    fn names(registry: &ToolRegistry) -> Vec<String> {
        registry.names().into_iter().map(str::to_string).collect()
    }

    #[test]
    fn a_subagent_gets_its_roles_tools_and_never_the_agent_tool() {
        let dir = tempfile::tempdir().unwrap();
        let parent = ToolRegistry::standard();
        let role = |name: &str| load_role(dir.path(), name).unwrap().tools;
        // The `agent` tool itself, were a role to name it, is left out.
        let mut with_agent = role("general-purpose");
        with_agent.push(AGENT_TOOL.to_string());
        let general = names(&role_tools(&parent, &with_agent));
        assert_eq!(
            general,
            ["glob", "grep", "list_dir", "read_file", "run_command"]
        );
        let explore = names(&role_tools(&parent, &role("explore")));
        assert_eq!(explore, ["glob", "grep", "list_dir", "read_file"]);
        let worker = names(&role_tools(&parent, &role("worker")));
        assert!(worker.contains(&"write_file".to_string()), "{worker:?}");
    }

    #[test]
    fn the_arguments_follow_claude_codes_shape() {
        let args: AgentArgs = serde_json::from_value(serde_json::json!({
            "description": "find it", "prompt": "Where?", "subagent_type": "explore",
            "isolation": "worktree"
        }))
        .unwrap();
        assert_eq!(args.isolation, Some(Isolation::Worktree));
        assert_eq!(args.subagent_type.as_deref(), Some("explore"));
        let wrong = serde_json::json!({"description": "d", "prompt": "p", "isolation": "vm"});
        assert!(parse_args::<AgentArgs>(AGENT_TOOL, wrong, SHAPE).is_err());
        let schema = schema_of::<AgentArgs>();
        assert_eq!(
            schema["required"],
            serde_json::json!(["description", "prompt"])
        );
    }
}
