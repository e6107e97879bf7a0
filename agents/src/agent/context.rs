//! Context-window budget: when the history must be compacted, and where it is cut.
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

/// Whether the history must be compacted before the next request: its size — the larger of
/// the provider's reported tokens of the last turn (`reported`, input + output) and the estimate
/// of `history` plus `overhead` (system prompt and tool specs) — reached `threshold` (a fraction,
/// e.g. 0.8) of `context_window` tokens.
pub fn needs_compaction(
    history: &[Message],
    overhead: usize,
    reported: Option<u64>,
    context_window: u32,
    threshold: f64,
) -> bool {
    let estimate = overhead + history.iter().map(estimate_message_tokens).sum::<usize>();
    let size = (reported.unwrap_or(0) as usize).max(estimate);
    size as f64 >= threshold * f64::from(context_window)
}

/// Where to cut the history for a compaction: the index of the last assistant message.
/// Messages before it are summarised; it and everything after it — the last turn, its tool
/// calls with their tool results, and a prompt waiting for an answer — are kept, so a tool
/// result is never separated from its call. `None` when fewer than two messages precede it
/// (summarising the task or an earlier summary alone gains nothing).
pub fn compaction_cut(history: &[Message]) -> Option<usize> {
    history
        .iter()
        .rposition(|m| m.role == Role::Assistant)
        .filter(|&i| i >= 2)
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
    fn cut_keeps_the_last_turn_with_its_results() {
        let mut h = vec![Message::user_text("task")];
        for i in 0..3 {
            h.extend(turn(i, 100));
        }
        let cut = compaction_cut(&h).unwrap();
        assert_eq!(cut, 5);
        assert_eq!(h[cut].role, Role::Assistant);
        assert!(matches!(
            h[cut + 1].content[0],
            ContentBlock::ToolResult { .. }
        ));
        assert_eq!(compaction_cut(&h[..1]), None);
        assert_eq!(
            compaction_cut(&h[..3]),
            None,
            "only the task before the last turn"
        );
        h.push(Message::user_text("next prompt"));
        assert_eq!(compaction_cut(&h), Some(5));
    }

    #[test]
    fn compaction_is_needed_at_the_threshold() {
        let h = vec![Message::user_text("task")];
        assert!(!needs_compaction(&h, 100, Some(700), 1_000, 0.8));
        assert!(needs_compaction(&h, 100, Some(800), 1_000, 0.8));
        assert!(needs_compaction(&h, 900, None, 1_000, 0.8));
    }
}
