//! One turn: build the request within the context-window budget, stream the reply, collect its
//! text, tool calls and invalid tool calls.

use super::{Agent, AgentEvent, context};
use crate::model::{
    ContentBlock, ModelError, ModelEvent, ModelRequest, StopReason, ToolCall, Usage,
};
use crate::redact::StreamRedactor;
use crate::tools::truncate_middle;
use crate::transcript::TranscriptEntry;
use futures::StreamExt;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// A tool call the model wrote but that cannot be run (unparsable arguments, a call inside a
/// code fence, …). It is answered with an error result and never executed.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct InvalidCall {
    /// Call id (generated when the model gave none).
    pub id: String,
    /// Tool name as written; may be empty.
    pub name: String,
    /// What the model is told: the parser's error and the raw arguments.
    pub message: String,
}

impl InvalidCall {
    /// The tool-use block that stands for it in the assistant message (`invalid` when the
    /// name is empty; the arguments are not kept).
    pub fn as_tool_use(&self) -> ContentBlock {
        ContentBlock::ToolUse {
            id: self.id.clone(),
            name: if self.name.is_empty() {
                "invalid".into()
            } else {
                self.name.clone()
            },
            input: Value::Object(Default::default()),
        }
    }
}

/// Everything one streamed reply produced.
#[derive(Default)]
pub(super) struct TurnReply {
    pub text: String,
    pub calls: Vec<ToolCall>,
    pub invalid: Vec<InvalidCall>,
    pub usage: Usage,
    pub stop: Option<StopReason>,
}

/// Why a turn produced no reply.
pub(super) enum TurnFailure {
    Cancelled,
    TimeLimit,
    Model(ModelError),
}

impl Agent {
    /// Streams one reply. A retry announced by the client voids what streamed before it.
    /// Streamed text reaches the subscriber redacted as it goes ([`crate::redact`]): a secret
    /// value split across deltas is held back until it is settled.
    pub(super) async fn stream_turn(
        &mut self,
        cancel: &CancellationToken,
    ) -> Result<TurnReply, TurnFailure> {
        let mut stream = self.client.stream(self.next_request());
        let mut reply = TurnReply::default();
        let mut shown = self.tool_context.redactor.stream();
        let deadline = self.settings.deadline;
        loop {
            let next = tokio::select! {
                biased;
                _ = cancel.cancelled() => return Err(TurnFailure::Cancelled),
                _ = sleep_until_opt(deadline) => return Err(TurnFailure::TimeLimit),
                item = stream.next() => item,
            };
            match next {
                None if reply.stop.is_some() => {
                    self.emit_text(shown.finish_str());
                    return Ok(reply);
                }
                None => {
                    return Err(TurnFailure::Model(ModelError::Incomplete(
                        "the stream ended without a stop event".into(),
                    )));
                }
                Some(Err(e)) => return Err(TurnFailure::Model(e)),
                Some(Ok(event)) => self.take_event(&mut reply, &mut shown, event),
            }
        }
    }

    /// The request for the next turn: the newest history that fits the context window after
    /// the output reserve and the system prompt and tool specs.
    fn next_request(&self) -> ModelRequest {
        ModelRequest {
            model: self.model.clone(),
            system: self.system_prompt.clone(),
            system_shared_len: self.system_shared_len,
            messages: self.history.clone(),
            tools: self.tools.specs(),
            max_output_tokens: self.settings.max_output_tokens,
        }
    }

    /// Estimated tokens of what every request carries besides the history: the system prompt,
    /// the tool specs and the output reserve.
    pub(super) fn request_overhead(&self) -> usize {
        context::estimate_text_tokens(&self.system_prompt)
            + self
                .tools
                .specs()
                .iter()
                .map(|t| {
                    context::estimate_text_tokens(&t.description)
                        + context::estimate_text_tokens(&t.input_schema.to_string())
                })
                .sum::<usize>()
            + self.settings.max_output_tokens as usize
    }

    /// Adds one stream event to the reply; `shown` is the turn's stream redactor for the text
    /// the subscriber sees.
    fn take_event(&mut self, reply: &mut TurnReply, shown: &mut StreamRedactor, event: ModelEvent) {
        match event {
            ModelEvent::TextDelta { text } => {
                if !text.is_empty() {
                    reply.text.push_str(&text);
                    self.emit_text(shown.push_str(&text));
                }
            }
            ModelEvent::ToolCall(mut call) => {
                if call.id.is_empty() {
                    call.id = self.next_local_id();
                }
                reply.calls.push(call);
            }
            ModelEvent::InvalidToolCall {
                id,
                name,
                raw_arguments,
                error,
            } => {
                let id = if id.is_empty() {
                    self.next_local_id()
                } else {
                    id
                };
                // Redacted before the cut, so that no cut leaves part of a secret value behind.
                let redactor = &self.tool_context.redactor;
                let raw = truncate_middle(&redactor.redact(&raw_arguments), 500);
                reply.invalid.push(InvalidCall {
                    id,
                    name,
                    message: format!(
                        "{}\nThe call was not executed. Raw arguments received: {raw}",
                        redactor.redact(&error)
                    ),
                });
            }
            ModelEvent::Usage(u) => reply.usage = u,
            ModelEvent::Retry {
                attempt,
                max_attempts,
                delay_ms,
                reason,
            } => {
                *reply = TurnReply::default();
                *shown = self.tool_context.redactor.stream();
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
            ModelEvent::Stop { reason } => reply.stop = Some(reason),
        }
    }
}

async fn sleep_until_opt(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}
