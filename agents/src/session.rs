//! Building a ready-to-run [`Agent`] from a resolved [`Config`]: model client (with the text
//! tool protocol when configured), tools bound to the workspace, permission gate, system prompt
//! and transcript.

use crate::agent::gate::{PermissionGate, RulePersistence};
use crate::agent::{Agent, AgentSettings};
use crate::config::{Config, ConfigError};
use crate::mcp::McpHub;
use crate::model::{Message, ModelClient, ProviderSettings, ToolProtocol};
use crate::permissions::{PermissionMode, Prompter};
use crate::subagent::{AgentTool, SubagentLauncher};
use crate::tools::{ToolContext, ToolRegistry, WorkspaceError};
use crate::transcript::TranscriptError;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

/// Errors while setting a session up.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// Configuration problem (including "no usable model").
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Transcript could not be opened or read.
    #[error(transparent)]
    Transcript(#[from] TranscriptError),
    /// The workspace root is unusable.
    #[error(transparent)]
    Workspace(#[from] WorkspaceError),
}

/// Creates the model client for `settings`: the provider's HTTP client, wrapped in the text tool
/// protocol when `tool_protocol = "text"`.
pub fn model_client(settings: &ProviderSettings) -> Arc<dyn ModelClient> {
    let client = crate::model::build_client(settings);
    match settings.tool_protocol {
        ToolProtocol::Native => client,
        ToolProtocol::Text => Arc::new(crate::model::text_protocol::TextToolProtocol::new(client)),
    }
}

/// A single-agent session: an agent with its transcript in
/// `<workspace>/.ahelper/sessions/<session_id>.jsonl`.
pub struct Session {
    /// UUID v7 of the session (also the transcript's file stem).
    pub id: String,
    /// The agent.
    pub agent: Agent,
    /// Transcript path.
    pub transcript_path: PathBuf,
    /// The session's MCP servers (their tools are in the agent's registry); shut it down when
    /// the session ends ([`McpHub::shutdown`]).
    pub mcp: Arc<McpHub>,
}

/// Options of [`Session::start`].
pub struct SessionOptions {
    /// Who answers permission prompts.
    pub prompter: Arc<dyn Prompter>,
    /// Resume this session id (`--resume`), or the newest session (`--continue`) when
    /// `continue_latest` is set.
    pub resume: Option<String>,
    /// Pick up the most recent session.
    pub continue_latest: bool,
    /// Client to use instead of the configured provider (tests, benchmarks).
    pub client_override: Option<Arc<dyn ModelClient>>,
    /// Text appended to the end of the system prompt (`--append-system-prompt`).
    pub append_system_prompt: Option<String>,
    /// Started MCP servers whose tools the agent gets ([`crate::mcp::McpHub::start`]); an empty
    /// hub for none.
    pub mcp: Arc<McpHub>,
}

impl Session {
    /// Builds the session for `config`: the model client, tools bound to the workspace (read-only
    /// ones in plan mode) with the `agent` tool ([`crate::subagent`]), the permission gate (answers `a`/`d` are saved to the project config),
    /// the history of a resumed session, and the transcript.
    ///
    /// # Errors
    /// No usable model, transcript I/O, workspace problems.
    pub fn start(config: &Config, options: SessionOptions) -> Result<Session, SessionError> {
        let (client, model, provider) = match options.client_override {
            Some(c) => (c, "override".to_string(), None),
            None => {
                let p = config.provider()?.clone();
                (model_client(&p), p.model.clone(), Some(p))
            }
        };
        let root = config.workspace_root.clone();
        let tool_context = session_tool_context(config)?;
        let mut tools = ToolRegistry::standard();
        for tool in options.mcp.tools() {
            tools.register(tool);
        }
        let gate = PermissionGate::new(
            Arc::new(RwLock::new(config.permissions.clone())),
            options.prompter,
            RulePersistence::ProjectConfig {
                root: root.clone(),
                trust_file: config.trust_file.clone(),
            },
        );
        let resume = options.resume.is_some() || options.continue_latest;
        let (id, transcript_path, history) = if resume {
            resumed_transcript(&root, options.resume.as_deref())?
        } else {
            let id = uuid::Uuid::now_v7().to_string();
            let path = crate::transcript::sessions_dir(&root).join(format!("{id}.jsonl"));
            (id, path, Vec::new())
        };
        let settings = AgentSettings::new(&config.agent, provider.as_ref());
        tools.register(Arc::new(AgentTool::new(SubagentLauncher {
            client: client.clone(),
            model: model.clone(),
            gate: gate.clone(),
            tools: tools.clone(),
            settings: settings.clone(),
            parent_session: id.clone(),
            transcripts: crate::transcript::sessions_dir(&root)
                .join(&id)
                .join("agents"),
            git: Arc::new(ahelper_worktrees::GitOwner::new()),
        })));
        if config.permissions.mode == PermissionMode::Plan {
            tools = tools.read_only();
        }
        exclude_ahelper_dir(&root);
        let mut builder = Agent::builder(client, model, tool_context, gate);
        if let Some(text) = options.append_system_prompt {
            builder = builder.append_system_prompt(text);
        }
        let agent = builder
            .tools(tools)
            .settings(settings)
            .history(history)
            .transcript(transcript_path.clone(), id.clone())
            .build()?;
        Ok(Session {
            id,
            agent,
            transcript_path,
            mcp: options.mcp,
        })
    }
}

/// The tool context of a session: the workspace root, with the command sandbox probed once per
/// session (an unavailable landlock is logged here; the UI can show `command_sandbox.note()` and
/// `.summary()` from the agent's tool context).
fn session_tool_context(config: &Config) -> Result<ToolContext, SessionError> {
    let root = &config.workspace_root;
    let mut tool_context = ToolContext::new(root)?;
    tool_context.added_dirs = config.added_dirs.clone();
    tool_context.command_sandbox = Some(Arc::new(crate::sandbox_os::CommandSandbox::new(
        &config.sandbox,
        &tool_context.workspace_root,
    )));
    // Secret values are redacted from tool results, events and the transcript (the builder
    // gives the transcript the same redactor).
    tool_context.redactor = config.redactor.clone();
    Ok(tool_context)
}

/// The session to pick up (`id`, or the newest when `None`): its id, transcript path and the
/// history rebuilt from the transcript.
fn resumed_transcript(
    root: &Path,
    id: Option<&str>,
) -> Result<(String, PathBuf, Vec<Message>), SessionError> {
    let path = crate::transcript::find_session(root, id)?;
    let lines = crate::transcript::read_transcript(&path)?;
    let history = crate::transcript::history_from_transcript(&lines);
    let id = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok((id, path, history))
}

/// ahelper's own files never show up in the user's `git status` (info/exclude, never
/// .gitignore).
fn exclude_ahelper_dir(root: &Path) {
    if ahelper_worktrees::RepoInfo::discover(root).is_ok()
        && let Err(e) = ahelper_worktrees::ensure_excluded(root, ".ahelper/")
    {
        tracing::warn!(error = %e, "could not add .ahelper/ to .git/info/exclude");
    }
}
