//! [`AgentBuilder`]: the one way to make an [`Agent`].
//!
//! A REPL session ([`crate::session`]), the swarm coordinator and every swarm worker build their
//! agent here: the tools, the permission gate, the system prompt (from the tool context, the
//! tools and the role instructions), the limits, an optional resumed history, and the
//! transcript with its `session_start` line. Known secret values are redacted by the redactor
//! the tool context carries ([`ToolContext::redactor`]): from tool results, events, the outcome
//! and every transcript line.

use super::WorkspaceReady;
use super::gate::PermissionGate;
use super::prompt::{
    InstructionsSource, ProjectInstructions, SystemPrompt, SystemPromptParams,
    build_system_prompt_parts,
};
use super::{Agent, AgentSettings};
use crate::hooks::HookEvent;
use crate::model::{Message, ModelClient, Usage};
use crate::tools::{ToolContext, ToolRegistry};
use crate::transcript::{TranscriptEntry, TranscriptError, TranscriptWriter};
use std::path::PathBuf;
use std::sync::Arc;

/// Builds an [`Agent`].
///
/// ```no_run
/// # use ahelper_agents::agent::{Agent, AgentSettings, gate::{PermissionGate, RulePersistence}};
/// # use ahelper_agents::tools::{ToolContext, ToolRegistry};
/// # fn demo(client: std::sync::Arc<dyn ahelper_agents::model::ModelClient>, gate: PermissionGate)
/// #     -> Result<(), Box<dyn std::error::Error>> {
/// let agent = Agent::builder(client, "claude-sonnet-4-5", ToolContext::new(".".as_ref())?, gate)
///     .tools(ToolRegistry::standard())
///     .role_instructions("You review code.")
///     .settings(AgentSettings::default())
///     .transcript(".ahelper/sessions/x.jsonl".into(), "x".into())
///     .build()?;
/// # Ok(()) }
/// ```
pub struct AgentBuilder {
    client: Arc<dyn ModelClient>,
    model: String,
    tool_context: ToolContext,
    gate: PermissionGate,
    tools: ToolRegistry,
    role_instructions: Option<String>,
    system_prompt: Option<String>,
    appended_system_prompt: Option<String>,
    settings: AgentSettings,
    history: Vec<Message>,
    transcript: Option<(PathBuf, String)>,
    stop_event: HookEvent,
    project_instructions: Option<Option<ProjectInstructions>>,
    workspace_ready: Option<WorkspaceReady>,
}

impl Agent {
    /// Starts building an agent of `model` through `client`, whose tool calls run in
    /// `tool_context` and are decided by `gate`. Defaults: no tools, [`AgentSettings::default`],
    /// empty history, no transcript, the standard system prompt without role instructions.
    pub fn builder(
        client: Arc<dyn ModelClient>,
        model: impl Into<String>,
        tool_context: ToolContext,
        gate: PermissionGate,
    ) -> AgentBuilder {
        AgentBuilder {
            client,
            model: model.into(),
            tool_context,
            gate,
            tools: ToolRegistry::new(),
            role_instructions: None,
            system_prompt: None,
            appended_system_prompt: None,
            settings: AgentSettings::default(),
            history: Vec::new(),
            transcript: None,
            stop_event: HookEvent::Stop,
            project_instructions: None,
            workspace_ready: None,
        }
    }
}

impl AgentBuilder {
    /// The tools offered to the model (e.g. `ToolRegistry::standard().select(&role.tools)`).
    pub fn tools(mut self, tools: ToolRegistry) -> Self {
        self.tools = tools;
        self
    }

    /// The project instructions of the system prompt, read already (`None`: the project has
    /// none) instead of from the workspace root at [`AgentBuilder::build`] — for a workspace
    /// that is still being made ([`AgentBuilder::workspace_ready`]).
    pub fn project_instructions(mut self, instructions: Option<ProjectInstructions>) -> Self {
        self.project_instructions = Some(instructions);
        self
    }

    /// The workspace is still being made: the first model request goes out at once, and no
    /// tool call runs (and no stop hook) before `ready` says it is there. `Err(reason)`, or a
    /// sender dropped without an answer, ends the loop with [`super::AgentStopReason::Error`].
    pub fn workspace_ready(mut self, ready: WorkspaceReady) -> Self {
        self.workspace_ready = Some(ready);
        self
    }

    /// Role instructions appended to the system prompt (swarm coordinator, worker).
    pub fn role_instructions(mut self, instructions: impl Into<String>) -> Self {
        self.role_instructions = Some(instructions.into());
        self
    }

    /// Uses `prompt` as the whole system prompt instead of building one (tests, benchmarks).
    pub fn system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.system_prompt = Some(prompt.into());
        self
    }

    /// Text appended to the end of the system prompt, after a blank line
    /// (`--append-system-prompt`).
    pub fn append_system_prompt(mut self, text: impl Into<String>) -> Self {
        self.appended_system_prompt = Some(text.into());
        self
    }

    /// The limits.
    pub fn settings(mut self, settings: AgentSettings) -> Self {
        self.settings = settings;
        self
    }

    /// Starts from this conversation (a resumed session or worker).
    pub fn history(mut self, history: Vec<Message>) -> Self {
        self.history = history;
        self
    }

    /// Appends the conversation to the JSONL transcript at `path` (created with its parent
    /// directories), which starts with a `session_start` line naming `session_id`. Every line
    /// is written through the tool context's redactor ([`ToolContext::redactor`]).
    pub fn transcript(mut self, path: PathBuf, session_id: String) -> Self {
        self.transcript = Some((path, session_id));
        self
    }

    /// Marks the agent as a subagent (a swarm worker): its end runs the `SubagentStop` hooks
    /// instead of `Stop`.
    pub fn subagent(mut self) -> Self {
        self.stop_event = HookEvent::SubagentStop;
        self
    }

    /// Builds the agent.
    ///
    /// # Errors
    /// [`TranscriptError`] when the transcript cannot be opened or its first line written.
    pub fn build(self) -> Result<Agent, TranscriptError> {
        let built = match self.system_prompt {
            Some(prompt) => SystemPrompt {
                text: prompt,
                shared_len: 0,
            },
            None => build_system_prompt_parts(&SystemPromptParams {
                workspace_root: &self.tool_context.workspace_root,
                cwd: &self.tool_context.cwd,
                added_dirs: &self.tool_context.added_dirs,
                date: chrono::Local::now().format("%Y-%m-%d").to_string(),
                role_instructions: self.role_instructions.as_deref(),
                tools: &self.tools,
                instructions: match &self.project_instructions {
                    Some(given) => InstructionsSource::Given(given.as_ref()),
                    None => InstructionsSource::WorkspaceRoot,
                },
            }),
        };
        let (mut system_prompt, system_shared_len) = (built.text, built.shared_len);
        if let Some(text) = &self.appended_system_prompt {
            system_prompt = format!("{}\n\n{}\n", system_prompt.trim_end(), text.trim());
        }
        let (session_id, transcript_path) = match &self.transcript {
            Some((path, id)) => (id.clone(), Some(path.clone())),
            None => (String::new(), None),
        };
        let hooks = self.settings.hooks.clone().for_session(
            session_id,
            transcript_path,
            self.tool_context.workspace_root.clone(),
        );
        let mut gate = self.gate;
        gate.notifier = Some(hooks.clone());
        let transcript = match self.transcript {
            Some((path, session_id)) => {
                let mut writer = TranscriptWriter::open(&path)?
                    .with_redactor(self.tool_context.redactor.clone());
                writer.append(TranscriptEntry::SessionStart {
                    session_id,
                    workspace: self.tool_context.workspace_root.display().to_string(),
                    model: self.client.describe(),
                })?;
                Some(writer)
            }
            None => None,
        };
        Ok(Agent {
            client: self.client,
            model: self.model,
            tools: self.tools,
            gate,
            tool_context: self.tool_context,
            system_prompt,
            system_shared_len,
            settings: self.settings,
            transcript,
            events: None,
            history: self.history,
            total_usage: Usage::default(),
            local_ids: 0,
            hooks,
            stop_event: self.stop_event,
            session_started: false,
            last_reported_tokens: None,
            pending_context: Vec::new(),
            workspace_ready: self.workspace_ready,
        })
    }
}
