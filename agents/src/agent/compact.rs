//! Compaction: when the history nears the context window (or on `/compact`), the model writes a
//! summary of the older turns in a request without tools, and the summary replaces them. The
//! last turn is kept as it was, with its tool calls and their tool results together
//! ([`context::compaction_cut`]). The transcript records the new history
//! ([`TranscriptEntry::Compaction`]), so a resumed session continues from it.

use super::{Agent, AgentEvent, context};
use crate::model::{ContentBlock, Message, ModelError, ModelEvent, ModelRequest, Role, Usage};
use crate::tools::truncate_middle;
use crate::transcript::TranscriptEntry;
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

/// System prompt of the summary request.
pub const COMPACTION_SYSTEM_PROMPT: &str = "You write the summary of a conversation between a \
user and ahelper, an AI coding assistant working in a software project through tools. The \
assistant will continue the work from your summary alone, without the conversation. Include: the \
user's requests, verbatim where they matter; what was done and found (files read and changed, \
commands run and their results, errors and how they were fixed); decisions taken and why; what \
remains to do. Be concrete: name files, functions and commands. Answer with the summary only.";

/// Longest tool result sent in the summary request, in characters (the bulk of an old history
/// is tool output; its head and tail are what a summary needs).
const SUMMARY_TOOL_RESULT_CHARS: usize = 2_000;

/// What a compaction did.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionReport {
    /// Messages replaced by the summary.
    pub summarised_messages: usize,
    /// Messages kept after the summary (the last turn).
    pub kept_messages: usize,
    /// The summary text.
    pub summary: String,
    /// Tokens of the summary request.
    pub usage: Usage,
}

/// Why a compaction did not happen (the history is then unchanged).
#[derive(Debug, thiserror::Error)]
pub enum CompactionError {
    /// There is no older turn to summarise.
    #[error("nothing to compact yet: there is no turn before the last one to summarise")]
    NothingToCompact,
    /// Cancelled while the summary streamed.
    #[error("compaction cancelled; the conversation is unchanged")]
    Cancelled,
    /// The summary request failed.
    #[error("the summary request failed ({0}); the conversation is unchanged — try /compact again")]
    Model(ModelError),
    /// The model answered with an empty summary.
    #[error("the model wrote an empty summary; the conversation is unchanged")]
    EmptySummary,
}

impl Agent {
    /// True when the history reached the compaction threshold of the context window.
    pub(super) fn should_compact(&self) -> bool {
        context::needs_compaction(
            &self.history,
            self.request_overhead(),
            self.last_reported_tokens,
            self.settings.context_window,
            self.settings.compact_threshold,
        )
    }

    /// Replaces the turns before the last one by a summary the model writes (in a request
    /// without tools), following `instructions` when given (`/compact focus on the tests`).
    ///
    /// # Errors
    /// [`CompactionError`]; the history is then unchanged.
    pub async fn compact(
        &mut self,
        instructions: Option<&str>,
        cancel: &CancellationToken,
    ) -> Result<CompactionReport, CompactionError> {
        let cut =
            context::compaction_cut(&self.history).ok_or(CompactionError::NothingToCompact)?;
        let request = self.summary_request(cut, instructions);
        let (summary, usage) = self.stream_summary(request, cancel).await?;
        let mut history = vec![summary_message(cut, &summary)];
        history.extend_from_slice(&self.history[cut..]);
        self.total_usage.add(usage);
        self.record(TranscriptEntry::Usage {
            turn: usage,
            total: self.total_usage,
        });
        self.record(TranscriptEntry::Compaction {
            summarised_messages: cut,
            summary: summary.clone(),
            history: history.clone(),
        });
        let report = CompactionReport {
            summarised_messages: cut,
            kept_messages: history.len() - 1,
            summary,
            usage,
        };
        self.history = history;
        self.last_reported_tokens = None;
        self.emit(AgentEvent::Compacted {
            summarised_messages: report.summarised_messages,
            kept_messages: report.kept_messages,
        });
        Ok(report)
    }

    /// The summary request: the messages before `cut` (long tool results cut), the request
    /// for a summary appended to the last of them, no tools.
    fn summary_request(&self, cut: usize, instructions: Option<&str>) -> ModelRequest {
        let mut messages: Vec<Message> = self.history[..cut]
            .iter()
            .map(|m| Message {
                role: m.role,
                content: m.content.iter().map(shrink_block).collect(),
            })
            .collect();
        let mut ask = "Write the summary of the conversation above now, as instructed.".to_string();
        if let Some(extra) = instructions.filter(|s| !s.trim().is_empty()) {
            ask.push_str(&format!("\nThe user asks: {}", extra.trim()));
        }
        match messages.last_mut() {
            Some(last) if last.role == Role::User => last.content.push(ContentBlock::text(ask)),
            _ => messages.push(Message::user_text(ask)),
        }
        ModelRequest {
            model: self.model.clone(),
            system_shared_len: 0,
            system: COMPACTION_SYSTEM_PROMPT.into(),
            messages,
            tools: Vec::new(),
            max_output_tokens: self.settings.max_output_tokens,
        }
    }

    /// Streams the summary; a retry voids what streamed before it.
    async fn stream_summary(
        &self,
        request: ModelRequest,
        cancel: &CancellationToken,
    ) -> Result<(String, Usage), CompactionError> {
        let mut stream = self.client.stream(request);
        let (mut text, mut usage, mut stopped) = (String::new(), Usage::default(), false);
        loop {
            let next = tokio::select! {
                biased;
                _ = cancel.cancelled() => return Err(CompactionError::Cancelled),
                item = stream.next() => item,
            };
            match next {
                None => break,
                Some(Err(e)) => return Err(CompactionError::Model(e)),
                Some(Ok(ModelEvent::TextDelta { text: piece })) => text.push_str(&piece),
                Some(Ok(ModelEvent::Usage(u))) => usage = u,
                Some(Ok(ModelEvent::Retry { .. })) => text.clear(),
                Some(Ok(ModelEvent::Stop { .. })) => stopped = true,
                Some(Ok(_)) => {}
            }
        }
        if !stopped {
            return Err(CompactionError::Model(ModelError::Incomplete(
                "the stream ended without a stop event".into(),
            )));
        }
        let summary = self.tool_context.redactor.redact(text.trim()).to_string();
        if summary.is_empty() {
            return Err(CompactionError::EmptySummary);
        }
        Ok((summary, usage))
    }
}

/// The user message that stands for the summarised messages.
fn summary_message(summarised: usize, summary: &str) -> Message {
    Message::user_text(format!(
        "[This conversation was compacted: {summarised} earlier messages were replaced by this \
         summary. Continue from it; re-read files if you need their exact content.]\n\n{summary}"
    ))
}

/// A block as sent in the summary request: tool results cut to their head and tail.
fn shrink_block(block: &ContentBlock) -> ContentBlock {
    match block {
        ContentBlock::ToolResult {
            tool_use_id,
            content,
            is_error,
        } => ContentBlock::ToolResult {
            tool_use_id: tool_use_id.clone(),
            content: truncate_middle(content, SUMMARY_TOOL_RESULT_CHARS),
            is_error: *is_error,
        },
        other => other.clone(),
    }
}
