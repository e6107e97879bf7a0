//! The agent loop.
//!
//! An [`Agent`] is made with [`AgentBuilder`]. Each turn: compact the history into a summary
//! when it nears the context window (`compact.rs`), stream the reply (`turn.rs`), run the tool
//! calls through the permission gate ([`gate`]), consecutive read-only calls concurrently
//! (`calls.rs`), feed the results back (failures as `is_error` results the model can act on),
//! repeat until the model stops calling tools or a limit is hit. Stop reasons:
//! [`AgentStopReason`]. `docs/architecture.md` places the loop in a swarm run.

mod builder;
mod calls;
mod compact;
pub mod context;
pub mod gate;
mod hooked;
pub mod prompt;
mod turn;
mod workspace;

pub use builder::AgentBuilder;
pub use compact::{COMPACTION_SYSTEM_PROMPT, CompactionError, CompactionReport};
pub use workspace::{WorkspaceReady, workspace_ready_channel};

use crate::config::AgentLimits;
use crate::hooks::{HookEvent, Hooks};
use crate::model::{
    ContentBlock, Message, ModelClient, ModelError, ProviderSettings, Role, StopReason, Usage,
};
use crate::tools::{ToolContext, ToolRegistry, truncate_middle};
use crate::transcript::{TranscriptEntry, TranscriptWriter};
use calls::TurnResults;
use gate::PermissionGate;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use tokio_util::sync::CancellationToken;
use turn::{InvalidCall, TurnFailure, TurnReply};

/// Limits of one agent.
#[derive(Debug, Clone)]
pub struct AgentSettings {
    /// Model turns per prompt (default 40).
    pub max_turns: u32,
    /// Identical consecutive tool calls (same name and arguments) that stop the loop (default 3).
    pub repeat_limit: u32,
    /// Tool result cap in characters (default 30,000); longer results keep their first 60% and
    /// their tail around a marker.
    pub max_tool_output_chars: usize,
    /// Time limit of one file-tool call (default [`crate::tools::DEFAULT_FILE_TOOL_TIMEOUT`]).
    pub file_tool_timeout: std::time::Duration,
    /// Output tokens requested per turn (reserved in the context budget).
    pub max_output_tokens: u32,
    /// Model context window in tokens.
    pub context_window: u32,
    /// Stop with [`AgentStopReason::TokenBudget`] once input + output tokens reach this.
    pub token_budget: Option<u64>,
    /// Stop with [`AgentStopReason::TimeLimit`] at this instant.
    pub deadline: Option<tokio::time::Instant>,
    /// The user's hooks ([`crate::hooks`]).
    pub hooks: Hooks,
    /// Fraction of the context window at which the history is compacted (default 0.8).
    pub compact_threshold: f64,
}

impl Default for AgentSettings {
    fn default() -> Self {
        AgentSettings {
            max_turns: 40,
            repeat_limit: 3,
            max_tool_output_chars: 30_000,
            file_tool_timeout: crate::tools::DEFAULT_FILE_TOOL_TIMEOUT,
            max_output_tokens: crate::config::DEFAULT_MAX_OUTPUT_TOKENS,
            context_window: crate::config::ANTHROPIC_DEFAULT_CONTEXT_WINDOW,
            token_budget: None,
            deadline: None,
            hooks: Hooks::default(),
            compact_threshold: crate::config::DEFAULT_COMPACT_THRESHOLD,
        }
    }
}

impl AgentSettings {
    /// The `[agent]` limits with the provider's output-token limit and context window (the
    /// defaults of [`AgentSettings::default`] when there is no provider, e.g. a test client).
    pub fn new(limits: &AgentLimits, provider: Option<&ProviderSettings>) -> Self {
        let defaults = AgentSettings::default();
        AgentSettings {
            max_turns: limits.max_turns,
            repeat_limit: limits.repeat_limit,
            max_tool_output_chars: limits.max_tool_output_chars,
            file_tool_timeout: limits.file_tool_timeout,
            max_output_tokens: provider.map_or(defaults.max_output_tokens, |p| p.max_output_tokens),
            context_window: provider.map_or(defaults.context_window, |p| p.context_window),
            hooks: Hooks::new(limits.hooks.clone()),
            compact_threshold: limits.compact_threshold,
            ..defaults
        }
    }
}

/// Why the agent loop stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentStopReason {
    /// The model answered without calling tools.
    Completed,
    /// `max_turns` reached.
    MaxTurns,
    /// The same call with the same arguments `repeat_limit` times in a row.
    RepeatedCall,
    /// The token budget is used up.
    TokenBudget,
    /// The wall-clock limit passed.
    TimeLimit,
    /// Cancelled (Ctrl-C or a swarm cancel).
    Cancelled,
    /// The model request failed after retries, or another error.
    Error,
}

impl AgentStopReason {
    /// The snake_case name (`completed`, `max_turns`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            AgentStopReason::Completed => "completed",
            AgentStopReason::MaxTurns => "max_turns",
            AgentStopReason::RepeatedCall => "repeated_call",
            AgentStopReason::TokenBudget => "token_budget",
            AgentStopReason::TimeLimit => "time_limit",
            AgentStopReason::Cancelled => "cancelled",
            AgentStopReason::Error => "error",
        }
    }
}

/// What one prompt produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentOutcome {
    /// Why it stopped.
    pub stop_reason: AgentStopReason,
    /// Text of the last assistant message.
    pub final_text: String,
    /// Turns used.
    pub turns: u32,
    /// Tokens used by this prompt.
    pub usage: Usage,
    /// Tool calls made.
    pub tool_calls: u32,
    /// Error message when `stop_reason` is `error` (or a limit explanation).
    pub error: Option<String>,
    /// The model error that stopped the loop, when one did (typed, so callers can tell a
    /// refused key from an outage). Not serialised: `error` holds its text.
    #[serde(skip)]
    pub model_error: Option<ModelError>,
}

/// Progress of an agent, for whoever renders it. Serialisable for `--output-format stream-json`
/// and for swarm workers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AgentEvent {
    /// A model request is starting.
    TurnStarted {
        /// 1-based turn number within this prompt.
        turn: u32,
    },
    /// Assistant text as it streams.
    TextDelta {
        /// Text piece.
        text: String,
    },
    /// The request is retried; text streamed since the turn started is void.
    Retry {
        /// Attempt about to start.
        attempt: u32,
        /// Attempts allowed.
        max_attempts: u32,
        /// Delay in ms.
        delay_ms: u64,
        /// Cause.
        reason: String,
    },
    /// A tool call is about to run (after permission).
    ToolCallStarted {
        /// Call id.
        id: String,
        /// Tool name.
        name: String,
        /// Arguments.
        input: Value,
    },
    /// A tool call finished (or was refused).
    ToolCallFinished {
        /// Call id.
        id: String,
        /// Tool name.
        name: String,
        /// Result text (truncated as sent to the model).
        content: String,
        /// Failure or refusal.
        is_error: bool,
        /// Duration in ms.
        duration_ms: u64,
    },
    /// A tool call was refused by the permission rules or the user (it was not run).
    PermissionDenied {
        /// Call id.
        id: String,
        /// Tool name.
        name: String,
        /// Arguments.
        input: Value,
        /// The reason sent to the model.
        reason: String,
        /// The allow rule that would let such a call run, e.g. `run_command(cargo test:*)`;
        /// `None` when a deny rule, a protected path, the mode or a hook refused it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        allow_rule: Option<String>,
    },
    /// Usage after a turn.
    Usage {
        /// This turn.
        turn: Usage,
        /// Total so far.
        total: Usage,
    },
    /// A hook failed without blocking (exit code other than 0 and 2, timeout), or blocked a
    /// prompt: shown to the user.
    HookMessage {
        /// The event (`PreToolUse`, …).
        event: String,
        /// The hook's command line.
        command: String,
        /// What happened.
        message: String,
    },
    /// Older turns were replaced by a summary ([`Agent::compact`]).
    Compacted {
        /// Messages replaced.
        summarised_messages: usize,
        /// Messages kept after the summary.
        kept_messages: usize,
    },
    /// The loop stopped.
    Finished {
        /// The outcome.
        outcome: AgentOutcome,
    },
}

impl AgentEvent {
    /// For [`AgentEvent::Retry`]: `"<reason>; retrying in <s> s (attempt <n>/<max>)"`, the delay
    /// rounded up to whole seconds. `None` for other events.
    pub fn retry_message(&self) -> Option<String> {
        match self {
            AgentEvent::Retry {
                attempt,
                max_attempts,
                delay_ms,
                reason,
            } => Some(format!(
                "{reason}; retrying in {} s (attempt {attempt}/{max_attempts})",
                delay_ms.div_ceil(1000)
            )),
            _ => None,
        }
    }
}

/// One agent: a model client, tools bound to a workspace, a permission gate, a history.
///
/// Built with [`AgentBuilder`] (the one way to make an agent: a REPL session, a swarm
/// coordinator and a swarm worker all go through it). The fields are private: the loop is the
/// only code that changes the history, the usage and the transcript.
pub struct Agent {
    client: Arc<dyn ModelClient>,
    model: String,
    tools: ToolRegistry,
    gate: PermissionGate,
    tool_context: ToolContext,
    system_prompt: String,
    /// Bytes of [`Self::system_prompt`] shared with the run's other agents of the same role
    /// (`prompt::SystemPrompt::shared_len`); 0 for a prompt given whole.
    system_shared_len: usize,
    settings: AgentSettings,
    transcript: Option<TranscriptWriter>,
    events: Option<UnboundedSender<AgentEvent>>,
    history: Vec<Message>,
    total_usage: Usage,
    local_ids: u64,
    /// The session's hooks, with its id and transcript path.
    hooks: Hooks,
    /// `Stop` for a session or coordinator, `SubagentStop` for a swarm worker.
    stop_event: HookEvent,
    /// `SessionStart` hooks have run.
    session_started: bool,
    /// Input + output tokens the provider reported for the last turn (reset by a compaction).
    last_reported_tokens: Option<u64>,
    /// Text added to the next prompt's user message ([`Agent::add_context`]).
    pending_context: Vec<String>,
    /// The workspace while it is still being made ([`AgentBuilder::workspace_ready`]).
    workspace_ready: Option<WorkspaceReady>,
}

/// Why the loop stopped, and the explanation that goes into [`AgentOutcome::error`].
struct LoopStop {
    reason: AgentStopReason,
    error: Option<String>,
    /// The model error that stopped the loop, kept typed for callers (see
    /// [`AgentOutcome::model_error`]).
    model_error: Option<ModelError>,
}

impl LoopStop {
    fn new(reason: AgentStopReason, error: Option<String>) -> Self {
        LoopStop {
            reason,
            error,
            model_error: None,
        }
    }

    fn time_limit() -> Self {
        LoopStop::new(
            AgentStopReason::TimeLimit,
            Some("wall-clock limit reached".into()),
        )
    }
}

/// Counters of one prompt (one call of [`Agent::continue_run`]).
#[derive(Default)]
struct PromptProgress {
    usage: Usage,
    turns: u32,
    tool_calls: u32,
    repeats: RepeatTracker,
    /// A `Stop` hook already made the agent go on during this prompt.
    stop_hook_active: bool,
}

/// Detects the same call (same tool, same arguments) made again and again, across turns.
#[derive(Default)]
struct RepeatTracker {
    last: Option<(String, String)>,
    count: u32,
}

impl RepeatTracker {
    /// Counts `key`; true once it has been seen `limit` times in a row.
    fn observe(&mut self, key: (String, String), limit: u32) -> bool {
        if self.last.as_ref() == Some(&key) {
            self.count += 1;
        } else {
            self.last = Some(key);
            self.count = 1;
        }
        self.count >= limit
    }
}

/// What the repeat check found in one turn's calls.
struct Repeats {
    /// Index of the first valid call that reached the limit; it and the calls after it are not
    /// run.
    first_repeated: Option<usize>,
    /// An invalid call (not run) reached the limit.
    invalid_repeated: bool,
}

impl Agent {
    /// The model client.
    pub fn client(&self) -> &Arc<dyn ModelClient> {
        &self.client
    }

    /// Model name sent with requests.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// Switches the model name for later requests (same client and provider).
    pub fn set_model(&mut self, model: impl Into<String>) {
        self.model = model.into();
    }

    /// The tools offered to the model.
    pub fn tools(&self) -> &ToolRegistry {
        &self.tools
    }

    /// Workspace root, cwd, environment and limits of this agent's tool calls.
    pub fn tool_context(&self) -> &ToolContext {
        &self.tool_context
    }

    /// The permission gate (its policy is shared: changing the mode applies to later calls).
    pub fn gate(&self) -> &PermissionGate {
        &self.gate
    }

    /// The limits.
    pub fn settings(&self) -> &AgentSettings {
        &self.settings
    }

    /// The system prompt sent with every request.
    pub fn system_prompt(&self) -> &str {
        &self.system_prompt
    }

    /// The conversation so far.
    pub fn history(&self) -> &[Message] {
        &self.history
    }

    /// Adds `text` to the user message of the next prompt (after the prompt, as its own text
    /// block), so the model learns what happened outside the conversation — e.g. the outcome of
    /// a swarm the user ran from the REPL. It reaches the transcript with that message.
    pub fn add_context(&mut self, text: impl Into<String>) {
        self.pending_context.push(text.into());
    }

    /// Forgets the conversation (the transcript keeps it).
    pub fn clear_history(&mut self) {
        self.history.clear();
    }

    /// Tokens used by every prompt of this agent.
    pub fn total_usage(&self) -> Usage {
        self.total_usage
    }

    /// Sends progress events to a new channel until [`Agent::unsubscribe`] (or another
    /// `subscribe`); the receiver ends when the sender is dropped.
    pub fn subscribe(&mut self) -> UnboundedReceiver<AgentEvent> {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        self.events = Some(tx);
        rx
    }

    /// Stops sending progress events, which ends the subscriber's receiver.
    pub fn unsubscribe(&mut self) {
        self.events = None;
    }

    /// Sends `event` with known secret values redacted ([`crate::redact`]).
    fn emit(&self, event: AgentEvent) {
        if let Some(tx) = &self.events {
            let _ = tx.send(self.tool_context.redactor.redact_serde(event));
        }
    }

    /// Emits streamed text that the turn's stream redactor has settled (nothing when empty).
    fn emit_text(&self, text: String) {
        if !text.is_empty() {
            self.emit(AgentEvent::TextDelta { text });
        }
    }

    fn record(&mut self, entry: TranscriptEntry) {
        if let Some(t) = &mut self.transcript
            && let Err(e) = t.append(entry)
        {
            tracing::error!(error = %e, "transcript write failed");
        }
    }

    /// Runs the loop for one user prompt until the model stops calling tools, a limit is hit or
    /// `cancel` fires. The history keeps everything (also after a cancel), so a later prompt
    /// continues the conversation.
    pub async fn run(&mut self, prompt: &str, cancel: &CancellationToken) -> AgentOutcome {
        let mut context: Vec<String> = self.start_session().await.into_iter().collect();
        let submitted = self.prompt_hooks(prompt).await;
        if let Some(reason) = submitted.block_reason() {
            let stop = LoopStop::new(
                AgentStopReason::Error,
                Some(format!(
                    "prompt blocked by a UserPromptSubmit hook: {reason}"
                )),
            );
            return self.finish(PromptProgress::default(), stop);
        }
        context.extend(submitted.additional_context(true));
        context.append(&mut self.pending_context);
        let mut user = Message::user_text(prompt);
        for text in context {
            user.content.push(ContentBlock::Text { text });
        }
        self.record(TranscriptEntry::UserMessage {
            message: user.clone(),
        });
        self.history.push(user);
        self.continue_run(cancel).await
    }

    /// Runs the loop on the current history (its last message must be from the user).
    ///
    /// Each turn: check the limits → stream the reply → record the assistant message → stop if
    /// it called no tools → check for repeated calls → run the calls and feed their results
    /// back → check the limits again.
    pub async fn continue_run(&mut self, cancel: &CancellationToken) -> AgentOutcome {
        let mut progress = PromptProgress::default();
        let stop = loop {
            if let Some(stop) = self.limit_before_turn(progress.turns, cancel) {
                break stop;
            }
            if let Some(stop) = self.compact_if_needed(&mut progress, cancel).await {
                break stop;
            }
            progress.turns += 1;
            self.emit(AgentEvent::TurnStarted {
                turn: progress.turns,
            });
            let reply = match self.stream_turn(cancel).await {
                Ok(reply) => reply,
                Err(failure) => break self.turn_failed(failure),
            };
            self.account_usage(&mut progress, reply.usage);
            self.last_reported_tokens = Some(reply.usage.input_tokens + reply.usage.output_tokens);
            self.record_assistant_message(&reply);
            if let Some(stop) = self.wait_for_workspace(cancel).await {
                break stop;
            }
            if reply.calls.is_empty() && reply.invalid.is_empty() {
                match self.stop_hooks(progress.stop_hook_active).await {
                    Some(reason) => {
                        progress.stop_hook_active = true;
                        self.history.push(Message::user_text(&reason));
                        continue;
                    }
                    None => break completed(reply.stop),
                }
            }
            let repeats = self.find_repeats(&mut progress.repeats, &reply);
            progress.tool_calls += (reply.calls.len() + reply.invalid.len()) as u32;
            let mut results = self
                .execute_calls(&reply.calls, &reply.invalid, repeats.first_repeated, cancel)
                .await;
            if results.usage != Usage::default() {
                // Sub-agents' tokens count in this agent's usage and budget.
                self.account_usage(&mut progress, results.usage);
            }
            self.history.push(Message {
                role: Role::User,
                content: std::mem::take(&mut results.blocks),
            });
            if let Some(stop) = self.limit_after_turn(&results, &repeats, &reply) {
                break stop;
            }
        };
        self.finish(progress, stop)
    }

    /// Compacts the history when it reached the threshold. A failed compaction is recorded and
    /// the turn goes on with the whole history (the provider says if it no longer fits); a
    /// cancelled one stops the loop.
    async fn compact_if_needed(
        &mut self,
        progress: &mut PromptProgress,
        cancel: &CancellationToken,
    ) -> Option<LoopStop> {
        if !self.should_compact() {
            return None;
        }
        match self.compact(None, cancel).await {
            Ok(report) => {
                progress.usage.add(report.usage);
                None
            }
            Err(CompactionError::Cancelled) => {
                Some(LoopStop::new(AgentStopReason::Cancelled, None))
            }
            Err(CompactionError::NothingToCompact) => None,
            Err(e) => {
                tracing::warn!(error = %e, "compaction failed");
                self.record(TranscriptEntry::Error {
                    message: format!("compaction: {e}"),
                });
                None
            }
        }
    }

    /// Cancel, time limit and turn cap, checked before a turn starts.
    fn limit_before_turn(&self, turns: u32, cancel: &CancellationToken) -> Option<LoopStop> {
        if cancel.is_cancelled() {
            return Some(LoopStop::new(AgentStopReason::Cancelled, None));
        }
        if self.deadline_passed() {
            return Some(LoopStop::time_limit());
        }
        (turns >= self.settings.max_turns).then(|| {
            LoopStop::new(
                AgentStopReason::MaxTurns,
                Some(format!(
                    "stopped after {} turns (max_turns)",
                    self.settings.max_turns
                )),
            )
        })
    }

    fn turn_failed(&mut self, failure: TurnFailure) -> LoopStop {
        match failure {
            TurnFailure::Cancelled => LoopStop::new(AgentStopReason::Cancelled, None),
            TurnFailure::TimeLimit => LoopStop::time_limit(),
            TurnFailure::Model(e) => {
                let message = e.to_string();
                self.record(TranscriptEntry::Error {
                    message: message.clone(),
                });
                LoopStop {
                    model_error: Some(e),
                    ..LoopStop::new(AgentStopReason::Error, Some(message))
                }
            }
        }
    }

    fn account_usage(&mut self, progress: &mut PromptProgress, turn: Usage) {
        progress.usage.add(turn);
        self.total_usage.add(turn);
        self.record(TranscriptEntry::Usage {
            turn,
            total: self.total_usage,
        });
        self.emit(AgentEvent::Usage {
            turn,
            total: self.total_usage,
        });
    }

    /// Appends the assistant message of `reply` (text, valid calls, then invalid calls) to the
    /// history and the transcript.
    fn record_assistant_message(&mut self, reply: &TurnReply) {
        let mut content = Vec::new();
        if !reply.text.is_empty() {
            content.push(ContentBlock::text(reply.text.clone()));
        }
        content.extend(reply.calls.iter().map(|call| ContentBlock::ToolUse {
            id: call.id.clone(),
            name: call.name.clone(),
            input: call.input.clone(),
        }));
        content.extend(reply.invalid.iter().map(InvalidCall::as_tool_use));
        if content.is_empty() {
            content.push(ContentBlock::text(""));
        }
        let assistant = Message {
            role: Role::Assistant,
            content,
        };
        self.record(TranscriptEntry::AssistantMessage {
            message: assistant.clone(),
        });
        self.history.push(assistant);
    }

    /// Counts this turn's calls in the repeat tracker. Invalid calls (not run) count too: a
    /// model that keeps writing the same unusable call would otherwise burn every remaining turn
    /// on the same error.
    fn find_repeats(&self, tracker: &mut RepeatTracker, reply: &TurnReply) -> Repeats {
        let limit = self.settings.repeat_limit;
        let mut first_repeated = None;
        for (i, call) in reply.calls.iter().enumerate() {
            let key = (call.name.clone(), canonical_json(&call.input));
            if tracker.observe(key, limit) && first_repeated.is_none() {
                first_repeated = Some(i);
            }
        }
        let mut invalid_repeated = false;
        for invalid in &reply.invalid {
            let key = (format!("invalid:{}", invalid.name), invalid.message.clone());
            invalid_repeated |= tracker.observe(key, limit);
        }
        Repeats {
            first_repeated,
            invalid_repeated,
        }
    }

    /// Cancel, a fatal tool error, repeated calls and the token budget, checked after the calls
    /// ran.
    fn limit_after_turn(
        &mut self,
        results: &TurnResults,
        repeats: &Repeats,
        reply: &TurnReply,
    ) -> Option<LoopStop> {
        let limit = self.settings.repeat_limit;
        if results.cancelled {
            return Some(LoopStop::new(AgentStopReason::Cancelled, None));
        }
        if let Some(fatal) = &results.fatal {
            let message = format!("a tool cannot work here: {fatal}");
            self.record(TranscriptEntry::Error {
                message: message.clone(),
            });
            return Some(LoopStop::new(AgentStopReason::Error, Some(message)));
        }
        if repeats.invalid_repeated && repeats.first_repeated.is_none() {
            let last_error = reply
                .invalid
                .last()
                .map(|c| truncate_middle(&c.message, 300))
                .unwrap_or_default();
            return Some(LoopStop::new(
                AgentStopReason::RepeatedCall,
                Some(format!(
                    "the model wrote the same unusable tool call {limit} times in a row; the error it got: {last_error}"
                )),
            ));
        }
        if repeats.first_repeated.is_some() {
            return Some(LoopStop::new(
                AgentStopReason::RepeatedCall,
                Some(format!(
                    "the model made the same tool call with the same arguments {limit} times in a row"
                )),
            ));
        }
        let budget = self.settings.token_budget?;
        (self.total_usage.input_tokens + self.total_usage.output_tokens >= budget).then(|| {
            LoopStop::new(
                AgentStopReason::TokenBudget,
                Some(format!("token budget of {budget} used up")),
            )
        })
    }

    /// Records the stop, tells the subscriber and builds the outcome.
    fn finish(&mut self, progress: PromptProgress, stop: LoopStop) -> AgentOutcome {
        let final_text = self
            .history
            .iter()
            .rev()
            .find(|m| m.role == Role::Assistant)
            .map(Message::text)
            .unwrap_or_default();
        self.record(TranscriptEntry::Stop {
            reason: stop.reason.as_str().into(),
            turns: progress.turns,
        });
        // The typed model error is not serialised, so it is put back after the redaction
        // round trip (its text was scrubbed of the key where it was made).
        let mut outcome = self.tool_context.redactor.redact_serde(AgentOutcome {
            stop_reason: stop.reason,
            final_text,
            turns: progress.turns,
            usage: progress.usage,
            tool_calls: progress.tool_calls,
            error: stop.error,
            model_error: None,
        });
        outcome.model_error = stop.model_error;
        self.emit(AgentEvent::Finished {
            outcome: outcome.clone(),
        });
        outcome
    }

    fn deadline_passed(&self) -> bool {
        self.settings
            .deadline
            .is_some_and(|d| tokio::time::Instant::now() >= d)
    }

    fn next_local_id(&mut self) -> String {
        self.local_ids += 1;
        format!("call_{}_{}", uuid::Uuid::now_v7().simple(), self.local_ids)
    }
}

/// The model answered without calling tools. A reply cut at the output-token limit is still
/// `completed`, with an explanation.
fn completed(stop: Option<StopReason>) -> LoopStop {
    let error = (stop == Some(StopReason::MaxTokens)).then(|| {
        "the answer was cut off by the output-token limit (max_output_tokens)".to_string()
    });
    LoopStop::new(AgentStopReason::Completed, error)
}

/// JSON text with object keys sorted, for comparing tool arguments.
fn canonical_json(value: &Value) -> String {
    fn sort(v: &Value) -> Value {
        match v {
            Value::Object(map) => {
                let mut entries: Vec<_> = map.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                Value::Object(
                    entries
                        .into_iter()
                        .map(|(k, v)| (k.clone(), sort(v)))
                        .collect(),
                )
            }
            Value::Array(items) => Value::Array(items.iter().map(sort).collect()),
            other => other.clone(),
        }
    }
    sort(value).to_string()
}

#[cfg(test)]
mod tests;
