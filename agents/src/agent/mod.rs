//! The agent loop.
//!
//! Each turn: build the request within the context-window budget ([`context::fit_history`]),
//! stream the reply, run the tool calls (consecutive read-only calls concurrently), feed the
//! results back (failures as `is_error` results the model can act on), repeat until the model
//! stops calling tools or a limit is hit. Stop reasons: [`AgentStopReason`].

pub mod context;
pub mod gate;
pub mod prompt;

use crate::model::{
    ContentBlock, Message, ModelClient, ModelError, ModelEvent, ModelRequest, Role, StopReason,
    ToolCall, Usage,
};
use crate::tools::{Tool, ToolContext, ToolKind, ToolRegistry, truncate_middle};
use crate::transcript::{TranscriptEntry, TranscriptWriter};
use futures::StreamExt;
use gate::{GateOutcome, PermissionGate};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

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
    /// Output tokens requested per turn (reserved in the context budget).
    pub max_output_tokens: u32,
    /// Model context window in tokens.
    pub context_window: u32,
    /// Stop with [`AgentStopReason::TokenBudget`] once input + output tokens reach this.
    pub token_budget: Option<u64>,
    /// Stop with [`AgentStopReason::TimeLimit`] at this instant.
    pub deadline: Option<tokio::time::Instant>,
}

impl Default for AgentSettings {
    fn default() -> Self {
        AgentSettings {
            max_turns: 40,
            repeat_limit: 3,
            max_tool_output_chars: 30_000,
            max_output_tokens: 8_192,
            context_window: 200_000,
            token_budget: None,
            deadline: None,
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
    },
    /// Usage after a turn.
    Usage {
        /// This turn.
        turn: Usage,
        /// Total so far.
        total: Usage,
    },
    /// The loop stopped.
    Finished {
        /// The outcome.
        outcome: AgentOutcome,
    },
}

/// One agent: a model client, tools bound to a workspace, a permission gate, a history.
pub struct Agent {
    /// The model.
    pub client: Arc<dyn ModelClient>,
    /// Model name sent with requests.
    pub model: String,
    /// Tools offered.
    pub tools: ToolRegistry,
    /// Permission gate.
    pub gate: PermissionGate,
    /// Workspace, cwd, env and limits of tool calls.
    pub tool_context: ToolContext,
    /// System prompt.
    pub system_prompt: String,
    /// Limits.
    pub settings: AgentSettings,
    /// Transcript, when kept.
    pub transcript: Option<TranscriptWriter>,
    /// Where progress events go.
    pub events: Option<UnboundedSender<AgentEvent>>,
    /// Conversation so far.
    pub history: Vec<Message>,
    /// Tokens used by every prompt of this agent.
    pub total_usage: Usage,
    local_ids: u64,
}

struct TurnReply {
    text: String,
    calls: Vec<ToolCall>,
    invalid: Vec<(String, String, String)>,
    usage: Usage,
    stop: Option<StopReason>,
}

enum TurnFailure {
    Cancelled,
    TimeLimit,
    Model(ModelError),
}

impl Agent {
    /// An agent with an empty history.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        client: Arc<dyn ModelClient>,
        model: String,
        tools: ToolRegistry,
        gate: PermissionGate,
        tool_context: ToolContext,
        system_prompt: String,
        settings: AgentSettings,
    ) -> Self {
        Agent {
            client,
            model,
            tools,
            gate,
            tool_context,
            system_prompt,
            settings,
            transcript: None,
            events: None,
            history: Vec::new(),
            total_usage: Usage::default(),
            local_ids: 0,
        }
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
        let user = Message::user_text(prompt);
        self.record(TranscriptEntry::UserMessage {
            message: user.clone(),
        });
        self.history.push(user);
        self.continue_run(cancel).await
    }

    /// Runs the loop on the current history (its last message must be from the user).
    pub async fn continue_run(&mut self, cancel: &CancellationToken) -> AgentOutcome {
        let mut usage = Usage::default();
        let mut turns = 0u32;
        let mut tool_calls = 0u32;
        let mut last_call: Option<(String, String)> = None;
        let mut repeat_count = 0u32;
        let (stop_reason, error) = loop {
            if cancel.is_cancelled() {
                break (AgentStopReason::Cancelled, None);
            }
            if self.deadline_passed() {
                break (
                    AgentStopReason::TimeLimit,
                    Some("wall-clock limit reached".into()),
                );
            }
            if turns >= self.settings.max_turns {
                break (
                    AgentStopReason::MaxTurns,
                    Some(format!(
                        "stopped after {} turns (max_turns)",
                        self.settings.max_turns
                    )),
                );
            }
            turns += 1;
            self.emit(AgentEvent::TurnStarted { turn: turns });
            let reply = match self.stream_turn(cancel).await {
                Ok(r) => r,
                Err(TurnFailure::Cancelled) => break (AgentStopReason::Cancelled, None),
                Err(TurnFailure::TimeLimit) => {
                    break (
                        AgentStopReason::TimeLimit,
                        Some("wall-clock limit reached".into()),
                    );
                }
                Err(TurnFailure::Model(e)) => {
                    let message = e.to_string();
                    self.record(TranscriptEntry::Error {
                        message: message.clone(),
                    });
                    break (AgentStopReason::Error, Some(message));
                }
            };
            usage.add(reply.usage);
            self.total_usage.add(reply.usage);
            self.record(TranscriptEntry::Usage {
                turn: reply.usage,
                total: self.total_usage,
            });
            self.emit(AgentEvent::Usage {
                turn: reply.usage,
                total: self.total_usage,
            });

            let mut content = Vec::new();
            if !reply.text.is_empty() {
                content.push(ContentBlock::text(reply.text.clone()));
            }
            for call in &reply.calls {
                content.push(ContentBlock::ToolUse {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    input: call.input.clone(),
                });
            }
            for (id, name, _) in &reply.invalid {
                content.push(ContentBlock::ToolUse {
                    id: id.clone(),
                    name: if name.is_empty() {
                        "invalid".into()
                    } else {
                        name.clone()
                    },
                    input: Value::Object(Default::default()),
                });
            }
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

            if reply.calls.is_empty() && reply.invalid.is_empty() {
                let error = (reply.stop == Some(StopReason::MaxTokens)).then(|| {
                    "the answer was cut off by the output-token limit (max_output_tokens)"
                        .to_string()
                });
                break (AgentStopReason::Completed, error);
            }

            // Repeated-call detection over the sequence of calls.
            let mut repeated_at: Option<usize> = None;
            for (i, call) in reply.calls.iter().enumerate() {
                let key = (call.name.clone(), canonical_json(&call.input));
                if last_call.as_ref() == Some(&key) {
                    repeat_count += 1;
                } else {
                    last_call = Some(key);
                    repeat_count = 1;
                }
                if repeat_count >= self.settings.repeat_limit && repeated_at.is_none() {
                    repeated_at = Some(i);
                }
            }
            // Invalid calls (not run) count too: a model that keeps writing the same unusable
            // call would otherwise burn every remaining turn on the same error.
            let mut repeated_invalid = false;
            for (_, name, message) in &reply.invalid {
                let key = (format!("invalid:{name}"), message.clone());
                if last_call.as_ref() == Some(&key) {
                    repeat_count += 1;
                } else {
                    last_call = Some(key);
                    repeat_count = 1;
                }
                if repeat_count >= self.settings.repeat_limit {
                    repeated_invalid = true;
                }
            }
            tool_calls += (reply.calls.len() + reply.invalid.len()) as u32;
            let (results, cancelled) = self
                .execute_calls(&reply.calls, &reply.invalid, repeated_at, cancel)
                .await;
            self.history.push(Message {
                role: Role::User,
                content: results,
            });
            if cancelled {
                break (AgentStopReason::Cancelled, None);
            }
            if repeated_invalid && repeated_at.is_none() {
                break (
                    AgentStopReason::RepeatedCall,
                    Some(format!(
                        "the model wrote the same unusable tool call {} times in a row; the error it got: {}",
                        self.settings.repeat_limit,
                        reply
                            .invalid
                            .last()
                            .map(|(_, _, m)| truncate_middle(m, 300))
                            .unwrap_or_default()
                    )),
                );
            }
            if repeated_at.is_some() {
                break (
                    AgentStopReason::RepeatedCall,
                    Some(format!(
                        "the model made the same tool call with the same arguments {} times in a row",
                        self.settings.repeat_limit
                    )),
                );
            }
            if let Some(budget) = self.settings.token_budget
                && self.total_usage.input_tokens + self.total_usage.output_tokens >= budget
            {
                break (
                    AgentStopReason::TokenBudget,
                    Some(format!("token budget of {budget} used up")),
                );
            }
        };
        let final_text = self
            .history
            .iter()
            .rev()
            .find(|m| m.role == Role::Assistant)
            .map(Message::text)
            .unwrap_or_default();
        self.record(TranscriptEntry::Stop {
            reason: stop_reason.as_str().into(),
            turns,
        });
        let outcome = self.tool_context.redactor.redact_serde(AgentOutcome {
            stop_reason,
            final_text,
            turns,
            usage,
            tool_calls,
            error,
        });
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

    async fn stream_turn(&mut self, cancel: &CancellationToken) -> Result<TurnReply, TurnFailure> {
        let tool_specs = self.tools.specs();
        let overhead = context::estimate_text_tokens(&self.system_prompt)
            + tool_specs
                .iter()
                .map(|t| {
                    context::estimate_text_tokens(&t.description)
                        + context::estimate_text_tokens(&t.input_schema.to_string())
                })
                .sum::<usize>();
        let budget = (self.settings.context_window as usize)
            .saturating_sub(self.settings.max_output_tokens as usize)
            .saturating_sub(overhead);
        let request = ModelRequest {
            model: self.model.clone(),
            system: self.system_prompt.clone(),
            messages: context::fit_history(&self.history, budget),
            tools: tool_specs,
            max_output_tokens: self.settings.max_output_tokens,
        };
        let mut stream = self.client.stream(request);
        let mut reply = TurnReply {
            text: String::new(),
            calls: vec![],
            invalid: vec![],
            usage: Usage::default(),
            stop: None,
        };
        let deadline = self.settings.deadline;
        // Streamed text is redacted as it goes; a value split across deltas is held back.
        let mut shown = self.tool_context.redactor.stream();
        loop {
            let next = tokio::select! {
                biased;
                _ = cancel.cancelled() => return Err(TurnFailure::Cancelled),
                _ = sleep_until_opt(deadline) => return Err(TurnFailure::TimeLimit),
                item = stream.next() => item,
            };
            let Some(item) = next else {
                if reply.stop.is_some() {
                    self.emit_text(shown.finish_str());
                    return Ok(reply);
                }
                return Err(TurnFailure::Model(ModelError::Incomplete(
                    "the stream ended without a stop event".into(),
                )));
            };
            match item {
                Err(e) => return Err(TurnFailure::Model(e)),
                Ok(ModelEvent::TextDelta { text }) => {
                    if !text.is_empty() {
                        reply.text.push_str(&text);
                        self.emit_text(shown.push_str(&text));
                    }
                }
                Ok(ModelEvent::ToolCall(mut call)) => {
                    if call.id.is_empty() {
                        call.id = self.next_local_id();
                    }
                    reply.calls.push(call);
                }
                Ok(ModelEvent::InvalidToolCall {
                    id,
                    name,
                    raw_arguments,
                    error,
                }) => {
                    let id = if id.is_empty() {
                        self.next_local_id()
                    } else {
                        id
                    };
                    let raw = truncate_middle(&raw_arguments, 500);
                    reply.invalid.push((
                        id,
                        name,
                        format!(
                            "{error}\nThe call was not executed. Raw arguments received: {raw}"
                        ),
                    ));
                }
                Ok(ModelEvent::Usage(u)) => reply.usage = u,
                Ok(ModelEvent::Retry {
                    attempt,
                    max_attempts,
                    delay_ms,
                    reason,
                }) => {
                    reply = TurnReply {
                        text: String::new(),
                        calls: vec![],
                        invalid: vec![],
                        usage: Usage::default(),
                        stop: None,
                    };
                    shown = self.tool_context.redactor.stream();
                    self.record(TranscriptEntry::Retry {
                        attempt,
                        max_attempts,
                        delay_ms,
                        reason: reason.clone(),
                    });
                    self.emit(AgentEvent::Retry {
                        attempt,
                        max_attempts,
                        delay_ms,
                        reason,
                    });
                }
                Ok(ModelEvent::Stop { reason }) => {
                    reply.stop = Some(reason);
                }
            }
        }
    }

    /// Runs the calls of one turn in order; consecutive allowed read-only calls run
    /// concurrently. Returns the tool-result blocks (one per call, in call order) and whether the
    /// run was cancelled meanwhile.
    async fn execute_calls(
        &mut self,
        calls: &[ToolCall],
        invalid: &[(String, String, String)],
        repeated_at: Option<usize>,
        cancel: &CancellationToken,
    ) -> (Vec<ContentBlock>, bool) {
        let mut results: Vec<Option<(String, String, bool, u64)>> = vec![None; calls.len()];
        let mut batch: Vec<usize> = Vec::new();
        let mut cancelled = false;
        for (i, call) in calls.iter().enumerate() {
            self.record(TranscriptEntry::ToolCall {
                id: call.id.clone(),
                name: call.name.clone(),
                input: call.input.clone(),
            });
            if cancel.is_cancelled() {
                cancelled = true;
                results[i] = Some((
                    call.name.clone(),
                    "Cancelled by the user before this call ran.".into(),
                    true,
                    0,
                ));
                continue;
            }
            if repeated_at.is_some_and(|r| i >= r) {
                results[i] = Some((
                    call.name.clone(),
                    format!(
                        "Not run: this is the same call with the same arguments as the previous {} calls. \
                         The loop is stopping; the earlier results above still apply.",
                        self.settings.repeat_limit - 1
                    ),
                    true,
                    0,
                ));
                continue;
            }
            let Some(tool) = self.tools.get(&call.name).cloned() else {
                results[i] = Some((
                    call.name.clone(),
                    format!(
                        "Unknown tool `{}`. Available tools: {}.",
                        call.name,
                        self.tools.names().join(", ")
                    ),
                    true,
                    0,
                ));
                continue;
            };
            let outcome = self
                .gate
                .check(tool.as_ref(), &call.input, &self.tool_context)
                .await;
            if let GateOutcome::Denied { reason, answer } = &outcome {
                self.record(TranscriptEntry::Permission {
                    tool_use_id: call.id.clone(),
                    decision: answer.map(answer_name).unwrap_or("deny").into(),
                    reason: reason.clone(),
                });
                self.emit(AgentEvent::PermissionDenied {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    input: call.input.clone(),
                    reason: reason.clone(),
                });
                results[i] = Some((call.name.clone(), reason.clone(), true, 0));
                continue;
            }
            if let GateOutcome::Allowed {
                answer: Some(answer),
            } = &outcome
            {
                self.record(TranscriptEntry::Permission {
                    tool_use_id: call.id.clone(),
                    decision: answer_name(*answer).into(),
                    reason: "user answered".into(),
                });
            }
            if tool.kind() == ToolKind::Read {
                batch.push(i);
                continue;
            }
            cancelled |= self
                .run_batch(calls, &mut batch, &mut results, cancel)
                .await;
            batch.push(i);
            cancelled |= self
                .run_batch(calls, &mut batch, &mut results, cancel)
                .await;
        }
        cancelled |= self
            .run_batch(calls, &mut batch, &mut results, cancel)
            .await;

        let mut blocks = Vec::with_capacity(calls.len() + invalid.len());
        for (call, result) in calls.iter().zip(results) {
            let (name, content, is_error, duration_ms) = result.unwrap_or_else(|| {
                (
                    call.name.clone(),
                    "Cancelled before this call ran.".into(),
                    true,
                    0,
                )
            });
            // Redacted before the cut, so that no cut leaves part of a secret value behind.
            let content = truncate_middle(
                &self.tool_context.redactor.redact(&content),
                self.settings.max_tool_output_chars,
            );
            self.record(TranscriptEntry::ToolResult {
                tool_use_id: call.id.clone(),
                name: name.clone(),
                content: content.clone(),
                is_error,
                duration_ms,
            });
            self.emit(AgentEvent::ToolCallFinished {
                id: call.id.clone(),
                name,
                content: content.clone(),
                is_error,
                duration_ms,
            });
            blocks.push(ContentBlock::ToolResult {
                tool_use_id: call.id.clone(),
                content,
                is_error,
            });
        }
        for (id, name, error) in invalid {
            let error = &self.tool_context.redactor.redact(error).into_owned();
            self.record(TranscriptEntry::ToolResult {
                tool_use_id: id.clone(),
                name: name.clone(),
                content: error.clone(),
                is_error: true,
                duration_ms: 0,
            });
            self.emit(AgentEvent::ToolCallFinished {
                id: id.clone(),
                name: name.clone(),
                content: error.clone(),
                is_error: true,
                duration_ms: 0,
            });
            blocks.push(ContentBlock::ToolResult {
                tool_use_id: id.clone(),
                content: error.clone(),
                is_error: true,
            });
        }
        (blocks, cancelled || cancel.is_cancelled())
    }

    /// Runs the calls at `batch` concurrently and stores their results; empties the batch.
    /// Returns true when cancelled.
    async fn run_batch(
        &self,
        calls: &[ToolCall],
        batch: &mut Vec<usize>,
        results: &mut [Option<(String, String, bool, u64)>],
        cancel: &CancellationToken,
    ) -> bool {
        if batch.is_empty() {
            return false;
        }
        let indices = std::mem::take(batch);
        let mut ctx = self.tool_context.clone();
        ctx.cancel = cancel.child_token();
        ctx.max_output_chars = self.settings.max_tool_output_chars;
        let futures = indices.iter().map(|&i| {
            let call = &calls[i];
            let tool: Option<Arc<dyn Tool>> = self.tools.get(&call.name).cloned();
            let ctx = &ctx;
            self.emit(AgentEvent::ToolCallStarted {
                id: call.id.clone(),
                name: call.name.clone(),
                input: call.input.clone(),
            });
            async move {
                let started = Instant::now();
                let outcome = match tool {
                    Some(tool) => tool.call(call.input.clone(), ctx).await,
                    None => Err(crate::tools::ToolError::new("unknown tool")),
                };
                let ms = started.elapsed().as_millis() as u64;
                match outcome {
                    Ok(out) => (call.name.clone(), out.content, out.is_error, ms),
                    Err(e) => (call.name.clone(), e.to_string(), true, ms),
                }
            }
        });
        let outputs = tokio::select! {
            outputs = futures::future::join_all(futures) => outputs,
            _ = cancel.cancelled() => {
                ctx.cancel.cancel();
                for &i in &indices {
                    results[i] = Some((calls[i].name.clone(), "Cancelled by the user while running.".into(), true, 0));
                }
                return true;
            }
        };
        for (&i, out) in indices.iter().zip(outputs) {
            results[i] = Some(out);
        }
        false
    }
}

fn answer_name(answer: crate::permissions::PromptAnswer) -> &'static str {
    use crate::permissions::PromptAnswer::*;
    match answer {
        AllowOnce => "allow",
        Deny => "deny",
        AllowAlways => "allow_always",
        DenyAlways => "deny_always",
    }
}

async fn sleep_until_opt(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
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
