//! Building a ready-to-run [`Agent`] from a resolved [`Config`]: model client (with the text
//! tool protocol when configured), tools bound to the workspace, permission gate, system prompt
//! and transcript.

use crate::agent::gate::{PermissionGate, RulePersistence};
use crate::agent::prompt::{SystemPromptParams, build_system_prompt};
use crate::agent::{Agent, AgentSettings};
use crate::config::{Config, ConfigError};
use crate::model::{ModelClient, ProviderSettings, ToolProtocol};
use crate::permissions::{PermissionMode, Prompter};
use crate::tools::{ToolContext, ToolRegistry};
use crate::transcript::{TranscriptEntry, TranscriptError, TranscriptWriter};
use std::path::PathBuf;
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
    #[error("workspace {path}: {source}")]
    Workspace {
        /// The path.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
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
}

impl Session {
    /// Builds the session for `config`.
    ///
    /// # Errors
    /// No usable model, transcript I/O, workspace problems.
    pub fn start(config: &Config, options: SessionOptions) -> Result<Session, SessionError> {
        let (client, model, provider_settings) = match options.client_override {
            Some(c) => (c, "override".to_string(), None),
            None => {
                let p = config.provider()?.clone();
                (model_client(&p), p.model.clone(), Some(p))
            }
        };
        let root = config.workspace_root.clone();
        let mut tool_context =
            ToolContext::new(&root).map_err(|source| SessionError::Workspace {
                path: root.clone(),
                source,
            })?;
        // Probed once per session; an unavailable landlock is logged here (the UI can show
        // `command_sandbox.note()` and `.summary()` from the agent's tool context).
        tool_context.command_sandbox = Some(Arc::new(crate::sandbox_os::CommandSandbox::new(
            &config.sandbox,
            &tool_context.workspace_root,
        )));
        tool_context.redactor = config.redactor.clone();
        let mut tools = ToolRegistry::standard();
        if config.permissions.mode == PermissionMode::Plan {
            tools = tools.read_only();
        }
        let system_prompt = build_system_prompt(&SystemPromptParams {
            workspace_root: &tool_context.workspace_root,
            cwd: &tool_context.cwd,
            date: chrono::Local::now().format("%Y-%m-%d").to_string(),
            role_instructions: None,
            tools: &tools,
        });
        let gate = PermissionGate::new(
            Arc::new(RwLock::new(config.permissions.clone())),
            options.prompter,
            RulePersistence::ProjectConfig(root.clone()),
        );
        let settings = AgentSettings {
            max_turns: config.agent.max_turns,
            repeat_limit: config.agent.repeat_limit,
            max_tool_output_chars: config.agent.max_tool_output_chars,
            max_output_tokens: provider_settings
                .as_ref()
                .map_or(8_192, |p| p.max_output_tokens),
            context_window: provider_settings
                .as_ref()
                .map_or(200_000, |p| p.context_window),
            token_budget: None,
            deadline: None,
        };
        let describe = client.describe();
        let mut agent = Agent::new(
            client,
            model,
            tools,
            gate,
            tool_context,
            system_prompt,
            settings,
        );

        let resumed = if options.resume.is_some() || options.continue_latest {
            Some(crate::transcript::find_session(
                &root,
                options.resume.as_deref(),
            )?)
        } else {
            None
        };
        let (id, transcript_path) = match resumed {
            Some(path) => {
                let lines = crate::transcript::read_transcript(&path)?;
                agent.history = crate::transcript::history_from_transcript(&lines);
                let id = path
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                (id, path)
            }
            None => {
                let id = uuid::Uuid::now_v7().to_string();
                let path = crate::transcript::sessions_dir(&root).join(format!("{id}.jsonl"));
                (id, path)
            }
        };
        // ahelper's own files never show up in the user's `git status` (info/exclude, never
        // .gitignore).
        if ahelper_worktrees::RepoInfo::discover(&root).is_ok()
            && let Err(e) = ahelper_worktrees::ensure_excluded(&root, ".ahelper/")
        {
            tracing::warn!(error = %e, "could not add .ahelper/ to .git/info/exclude");
        }
        let mut writer =
            TranscriptWriter::open(&transcript_path)?.with_redactor(config.redactor.clone());
        writer.append(TranscriptEntry::SessionStart {
            session_id: id.clone(),
            workspace: root.display().to_string(),
            model: describe,
        })?;
        agent.transcript = Some(writer);
        Ok(Session {
            id,
            agent,
            transcript_path,
        })
    }
}
