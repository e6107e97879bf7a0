//! Running the tool calls of one turn: the permission gate, consecutive read-only calls run
//! concurrently, results recorded and fed back in call order.

use super::gate::GateOutcome;
use super::hooked::PreToolDecision;
use super::turn::InvalidCall;
use super::{Agent, AgentEvent};
use crate::model::{ContentBlock, ToolCall, Usage};
use crate::permissions::PromptAnswer;
use crate::tools::{Tool, ToolKind, truncate_middle};
use crate::transcript::TranscriptEntry;
use std::sync::Arc;
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// What one tool call produced (or why it did not run).
#[derive(Debug, Clone)]
pub(super) struct CallResult {
    /// Tool name.
    name: String,
    /// Text for the model (not yet cut to `max_tool_output_chars`).
    content: String,
    /// A failure or refusal.
    is_error: bool,
    /// Time the tool ran, in ms (0 when it did not run).
    duration_ms: u64,
    /// The tool reported a [`crate::tools::ToolError::Fatal`] error: the loop stops.
    fatal: bool,
    /// The tool ran (`PostToolUse` hooks run only then).
    ran: bool,
    /// Tokens the call spent itself (a sub-agent's).
    usage: Usage,
}

impl CallResult {
    /// A call that was not run, with the reason the model reads.
    fn not_run(name: &str, reason: impl Into<String>) -> Self {
        CallResult {
            name: name.to_string(),
            content: reason.into(),
            is_error: true,
            duration_ms: 0,
            fatal: false,
            ran: false,
            usage: Usage::default(),
        }
    }
}

/// The tool-result blocks of one turn (one per call, in call order, then the invalid calls),
/// whether the turn was cancelled meanwhile, and the first fatal tool error
/// (`<tool>: <message>`).
pub(super) struct TurnResults {
    pub blocks: Vec<ContentBlock>,
    pub cancelled: bool,
    pub fatal: Option<String>,
    /// Tokens the calls spent themselves (sub-agents), to add to the agent's usage.
    pub usage: Usage,
}

/// Whether a call may run, decided before it runs.
enum Admission {
    /// Run it; read-only calls may join a concurrent batch.
    Run(ToolKind),
    /// Settled without running (repeated, unknown tool, refused).
    Settled(CallResult),
}

impl Agent {
    /// Runs the calls of one turn in order; consecutive allowed read-only calls run
    /// concurrently. Calls from `first_repeated` on are not run (the loop is stopping).
    pub(super) async fn execute_calls(
        &mut self,
        calls: &[ToolCall],
        invalid: &[InvalidCall],
        first_repeated: Option<usize>,
        cancel: &CancellationToken,
    ) -> TurnResults {
        let mut results: Vec<Option<CallResult>> = vec![None; calls.len()];
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
                results[i] = Some(CallResult::not_run(
                    &call.name,
                    "Cancelled by the user before this call ran.",
                ));
                continue;
            }
            let repeated = first_repeated.is_some_and(|r| i >= r);
            match self.admit(call, repeated).await {
                Admission::Settled(result) => results[i] = Some(result),
                Admission::Run(ToolKind::Read) => batch.push(i),
                Admission::Run(_) => {
                    // A call that changes the world runs alone, after the reads before it.
                    cancelled |= self
                        .run_batch(calls, &mut batch, &mut results, cancel)
                        .await;
                    batch.push(i);
                    cancelled |= self
                        .run_batch(calls, &mut batch, &mut results, cancel)
                        .await;
                }
            }
        }
        cancelled |= self
            .run_batch(calls, &mut batch, &mut results, cancel)
            .await;
        let mut blocks = Vec::with_capacity(calls.len() + invalid.len());
        let mut fatal = None;
        let mut usage = Usage::default();
        for (call, result) in calls.iter().zip(results) {
            let mut result = result.unwrap_or_else(|| {
                CallResult::not_run(&call.name, "Cancelled before this call ran.")
            });
            usage.add(result.usage);
            if result.fatal && fatal.is_none() {
                fatal = Some(format!("{}: {}", result.name, result.content));
            }
            if result.ran
                && let Some(note) = self
                    .post_tool_hooks(call, &result.content, result.is_error)
                    .await
            {
                result.content = format!("{}\n\n{note}", result.content);
            }
            // Redacted before the cut, so that no cut leaves part of a secret value behind.
            result.content = truncate_middle(
                &self.tool_context.redactor.redact(&result.content),
                self.settings.max_tool_output_chars,
            );
            blocks.push(self.deliver(&call.id, result));
        }
        for call in invalid {
            let result = CallResult::not_run(&call.name, call.message.clone());
            blocks.push(self.deliver(&call.id, result));
        }
        TurnResults {
            blocks,
            cancelled: cancelled || cancel.is_cancelled(),
            fatal,
            usage,
        }
    }

    /// Decides whether `call` runs: not when it repeats, names an unknown tool or is refused by
    /// the permission gate (the refusal is recorded and announced).
    async fn admit(&mut self, call: &ToolCall, repeated: bool) -> Admission {
        if repeated {
            return Admission::Settled(CallResult::not_run(
                &call.name,
                format!(
                    "Not run: this is the same call with the same arguments as the previous {} calls. \
                     The loop is stopping; the earlier results above still apply.",
                    self.settings.repeat_limit - 1
                ),
            ));
        }
        let Some(tool) = self.tools.get(&call.name).cloned() else {
            return Admission::Settled(CallResult::not_run(
                &call.name,
                format!(
                    "Unknown tool `{}`. Available tools: {}.",
                    call.name,
                    self.tools.names().join(", ")
                ),
            ));
        };
        let hook_permission = match self.pre_tool_hooks(call).await {
            PreToolDecision::Block(reason) => {
                let refused = Refused {
                    reason,
                    decision: "deny (PreToolUse hook)",
                    allow_rule: None,
                };
                return Admission::Settled(self.refuse(call, refused));
            }
            PreToolDecision::Proceed(permission) => permission,
        };
        match self
            .gate
            .check_with_hook(
                tool.as_ref(),
                &call.input,
                &self.tool_context,
                hook_permission,
            )
            .await
        {
            GateOutcome::Denied {
                reason,
                answer,
                allow_rule,
            } => Admission::Settled(self.refuse(
                call,
                Refused {
                    reason,
                    decision: answer.map(answer_name).unwrap_or("deny"),
                    allow_rule,
                },
            )),
            GateOutcome::Allowed { answer, settled_by } => {
                if let Some(answer) = answer {
                    let reason = match settled_by {
                        Some(rule) => format!(
                            "settled by the rule `{rule}`, added while the question waited (not \
                             answered by the user)"
                        ),
                        None => "user answered".into(),
                    };
                    self.record(TranscriptEntry::Permission {
                        tool_use_id: call.id.clone(),
                        decision: answer_name(answer).into(),
                        reason,
                    });
                }
                Admission::Run(tool.kind())
            }
        }
    }

    /// Records and announces a refused call; returns its result (`reason` for the model).
    fn refuse(&mut self, call: &ToolCall, refused: Refused) -> CallResult {
        let Refused {
            reason,
            decision,
            allow_rule,
        } = refused;
        self.record(TranscriptEntry::Permission {
            tool_use_id: call.id.clone(),
            decision: decision.into(),
            reason: reason.clone(),
        });
        self.emit(AgentEvent::PermissionDenied {
            id: call.id.clone(),
            name: call.name.clone(),
            input: call.input.clone(),
            reason: reason.clone(),
            allow_rule,
        });
        CallResult::not_run(&call.name, reason)
    }

    /// Records and announces one result; returns its tool-result block.
    fn deliver(&mut self, id: &str, result: CallResult) -> ContentBlock {
        let CallResult {
            name,
            content,
            is_error,
            duration_ms,
            ..
        } = result;
        self.record(TranscriptEntry::ToolResult {
            tool_use_id: id.to_string(),
            name: name.clone(),
            content: content.clone(),
            is_error,
            duration_ms,
        });
        self.emit(AgentEvent::ToolCallFinished {
            id: id.to_string(),
            name,
            content: content.clone(),
            is_error,
            duration_ms,
        });
        ContentBlock::ToolResult {
            tool_use_id: id.to_string(),
            content,
            is_error,
        }
    }

    /// Runs the calls at `batch` concurrently and stores their results; empties the batch.
    /// Returns true when cancelled.
    async fn run_batch(
        &self,
        calls: &[ToolCall],
        batch: &mut Vec<usize>,
        results: &mut [Option<CallResult>],
        cancel: &CancellationToken,
    ) -> bool {
        if batch.is_empty() {
            return false;
        }
        let indices = std::mem::take(batch);
        let mut ctx = self.tool_context.clone();
        ctx.read_deny = self.gate.read_deny_rules();
        ctx.cancel = cancel.child_token();
        ctx.max_output_chars = self.settings.max_tool_output_chars;
        ctx.file_tool_timeout = self.settings.file_tool_timeout;
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
                let duration_ms = started.elapsed().as_millis() as u64;
                let (content, is_error, fatal, usage) = match outcome {
                    Ok(out) => (out.content, out.is_error, false, out.usage),
                    Err(e) => (e.to_string(), true, e.is_fatal(), Usage::default()),
                };
                CallResult {
                    name: call.name.clone(),
                    content,
                    is_error,
                    duration_ms,
                    fatal,
                    ran: true,
                    usage,
                }
            }
        });
        let outputs = tokio::select! {
            outputs = futures::future::join_all(futures) => outputs,
            _ = cancel.cancelled() => {
                ctx.cancel.cancel();
                for &i in &indices {
                    results[i] = Some(CallResult::not_run(
                        &calls[i].name,
                        "Cancelled by the user while running.",
                    ));
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

fn answer_name(answer: PromptAnswer) -> &'static str {
    match answer {
        PromptAnswer::AllowOnce => "allow",
        PromptAnswer::Deny => "deny",
        PromptAnswer::AllowAlways => "allow_always",
        PromptAnswer::DenyAlways => "deny_always",
        PromptAnswer::AllowedByRule => "allowed_by_rule",
    }
}

/// Why a call was refused: the reason for the model, the transcript's decision name and the
/// allow rule that would let it run (see [`crate::agent::gate::GateOutcome::Denied`]).
struct Refused {
    reason: String,
    decision: &'static str,
    allow_rule: Option<String>,
}
