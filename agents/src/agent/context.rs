//! Context-window budget: which messages of the history are sent with the next request.
//!
//! Token counts are estimated at 4 characters per token (plus a small per-block overhead), the
//! usual rule of thumb for English and code with BPE tokenizers; the estimate only has to keep
//! requests under the window, not be exact.

use crate::model::{ContentBlock, Message, Role};

/// Estimated tokens of a text, at 4 characters per token (rounded up).
pub fn estimate_text_tokens(text: &str) -> usize {
    text.len().div_ceil(4)
}

/// Estimated tokens of one message (content plus 4 tokens of framing per block).
pub fn estimate_message_tokens(message: &Message) -> usize {
    message
        .content
        .iter()
        .map(|block| {
            4 + match block {
                ContentBlock::Text { text } => estimate_text_tokens(text),
                ContentBlock::ToolUse { name, input, .. } => {
                    estimate_text_tokens(name) + estimate_text_tokens(&input.to_string())
                }
                ContentBlock::ToolResult { content, .. } => estimate_text_tokens(content),
            }
        })
        .sum()
}

/// Marker text inserted where older messages were dropped.
pub const DROPPED_MARKER: &str = "[Earlier turns of this conversation were dropped to fit the context window. \
The task is above; continue from the newest messages below. Re-read files if you need their content.]";

/// Chooses the messages to send so that their estimated size is at most `budget_tokens`.
///
/// The newest messages are kept, the oldest turns dropped first. The first user message (the
/// task) is always kept; when anything after it is dropped, a user-side marker
/// ([`DROPPED_MARKER`]) is appended to it. The kept tail always starts at an assistant message,
/// so a tool result is never separated from its tool call. If even the newest turn does not fit,
/// it is sent anyway (the provider will then report the overflow).
pub fn fit_history(history: &[Message], budget_tokens: usize) -> Vec<Message> {
    let total: usize = history.iter().map(estimate_message_tokens).sum();
    if total <= budget_tokens || history.len() <= 2 {
        return history.to_vec();
    }
    let first = &history[0];
    let first_tokens = estimate_message_tokens(first) + estimate_text_tokens(DROPPED_MARKER) + 4;
    let mut start = history.len();
    let mut used = first_tokens;
    // Candidate cut points: indices of assistant messages after the first message.
    let mut best: Option<usize> = None;
    while start > 1 {
        start -= 1;
        used += estimate_message_tokens(&history[start]);
        if history[start].role == Role::Assistant {
            if used <= budget_tokens || best.is_none() {
                best = Some(start);
            }
            if used > budget_tokens {
                break;
            }
        }
    }
    let Some(cut) = best else {
        return history.to_vec();
    };
    if cut <= 1 {
        return history.to_vec();
    }
    let mut kept = Vec::with_capacity(history.len() - cut + 1);
    let mut head = first.clone();
    head.content.push(ContentBlock::text(DROPPED_MARKER));
    kept.push(head);
    kept.extend_from_slice(&history[cut..]);
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn turn(i: usize, size: usize) -> [Message; 2] {
        [
            Message {
                role: Role::Assistant,
                content: vec![ContentBlock::ToolUse {
                    id: format!("c{i}"),
                    name: "read_file".into(),
                    input: json!({"path": format!("f{i}")}),
                }],
            },
            Message {
                role: Role::User,
                content: vec![ContentBlock::ToolResult {
                    tool_use_id: format!("c{i}"),
                    content: "x".repeat(size),
                    is_error: false,
                }],
            },
        ]
    }

    #[test]
    fn keeps_everything_within_budget() {
        let mut h = vec![Message::user_text("task")];
        h.extend(turn(0, 100));
        assert_eq!(fit_history(&h, 10_000), h);
    }

    #[test]
    fn drops_oldest_turns_and_keeps_pairs() {
        let mut h = vec![Message::user_text("task")];
        for i in 0..10 {
            h.extend(turn(i, 4_000));
        }
        let kept = fit_history(&h, 3_500);
        assert!(kept.len() < h.len());
        assert_eq!(kept[0].content[0], ContentBlock::text("task"));
        assert_eq!(kept[0].content[1], ContentBlock::text(DROPPED_MARKER));
        assert_eq!(kept[1].role, Role::Assistant);
        // every tool result follows its call
        for w in kept.windows(2) {
            if let Some(ContentBlock::ToolResult { tool_use_id, .. }) = w[1].content.first() {
                assert!(
                    matches!(&w[0].content[0], ContentBlock::ToolUse { id, .. } if id == tool_use_id)
                );
            }
        }
        assert_eq!(kept.last(), h.last());
        let size: usize = kept.iter().map(estimate_message_tokens).sum();
        assert!(size <= 3_500, "{size}");
    }

    #[test]
    fn newest_turn_always_sent() {
        let mut h = vec![Message::user_text("task")];
        h.extend(turn(0, 40_000));
        h.extend(turn(1, 40_000));
        let kept = fit_history(&h, 100);
        assert_eq!(kept.len(), 3);
        assert_eq!(kept.last(), h.last());
    }
}
