//! The format-neutral answer to one request, and helpers shared by both wire formats.

use bytes::Bytes;
use serde_json::Value;

use crate::script::{ToolCall, Turn, Usage};

/// What the request asked for, extracted by a wire format's `inspect`.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Inspection {
    /// System prompt text (all text parts joined).
    pub system: String,
    /// Text of the first user message (all text parts joined).
    pub first_user: String,
    /// Anthropic `tool_result` blocks / OpenAI `role: tool` messages.
    pub tool_results: usize,
    /// Messages with `role: assistant`.
    pub assistant_messages: usize,
    /// `"stream": true`.
    pub stream: bool,
    /// OpenAI `stream_options.include_usage`.
    pub include_usage: bool,
    /// The requested model.
    pub model: Option<String>,
}

/// A turn made concrete for one request.
#[derive(Debug, Clone)]
pub(crate) struct Reply {
    /// Request serial number (1-based), used to build ids.
    pub serial: u64,
    pub model: String,
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    /// Stop reason override, either vocabulary.
    pub stop_reason: Option<String>,
    pub usage: Usage,
    /// Unix time, seconds.
    pub created: u64,
}

impl Reply {
    pub fn new(serial: u64, model: String, turn: &Turn, request_bytes: usize) -> Self {
        let text = turn.text.clone().unwrap_or_default();
        let output_bytes = text.len()
            + turn
                .tool_calls
                .iter()
                .map(|c| c.name.len() + c.arguments.to_string().len())
                .sum::<usize>();
        let usage = turn.usage.unwrap_or(Usage {
            input_tokens: (request_bytes as u64 / 4).max(1),
            output_tokens: (output_bytes as u64 / 4).max(1),
            ..Usage::default()
        });
        let created = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        Self {
            serial,
            model,
            text,
            tool_calls: turn.tool_calls.clone(),
            stop_reason: turn.stop_reason.clone(),
            usage,
            created,
        }
    }

    /// The tool call id: the scripted one, or `{prefix}fake{serial}_{index}`.
    pub fn tool_call_id(&self, index: usize, prefix: &str) -> String {
        self.tool_calls[index]
            .id
            .clone()
            .unwrap_or_else(|| format!("{prefix}fake{:06}_{index}", self.serial))
    }
}

/// Splits text into word-like pieces (`"Hello"`, `" big"`, `" world"`), as token streams do.
pub(crate) fn split_words(text: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut prev_space = true;
    for (i, ch) in text.char_indices() {
        let space = ch.is_whitespace();
        if space && !prev_space && i > start {
            pieces.push(&text[start..i]);
            start = i;
        }
        prev_space = space;
    }
    if start < text.len() {
        pieces.push(&text[start..]);
    }
    pieces
}

/// Splits a JSON text into pieces of at most 7 characters, so keys and values are cut
/// mid-token the way real providers stream tool arguments.
pub(crate) fn split_json(json: &str) -> Vec<&str> {
    const PIECE_CHARS: usize = 7;
    let mut pieces = Vec::new();
    let mut start = 0;
    for (count, (i, _)) in json.char_indices().enumerate() {
        if count > 0 && count % PIECE_CHARS == 0 {
            pieces.push(&json[start..i]);
            start = i;
        }
    }
    if start < json.len() {
        pieces.push(&json[start..]);
    }
    pieces
}

/// One SSE event: optional `event:` line, one `data:` line, blank line.
pub(crate) fn sse_event(event: Option<&str>, data: &Value) -> Bytes {
    let mut out = String::new();
    if let Some(event) = event {
        out.push_str("event: ");
        out.push_str(event);
        out.push('\n');
    }
    out.push_str("data: ");
    out.push_str(&data.to_string());
    out.push_str("\n\n");
    Bytes::from(out)
}

/// Splits a raw SSE body into events (each ends after a blank line), keeping every byte.
pub(crate) fn split_sse_events(body: &[u8]) -> Vec<Bytes> {
    let mut chunks = Vec::new();
    let mut start = 0;
    let mut line_start = 0;
    for (i, &b) in body.iter().enumerate() {
        if b == b'\n' {
            let line = &body[line_start..i];
            if (line.is_empty() || line == b"\r") && line_start > start {
                chunks.push(Bytes::copy_from_slice(&body[start..=i]));
                start = i + 1;
            }
            line_start = i + 1;
        }
    }
    if start < body.len() {
        chunks.push(Bytes::copy_from_slice(&body[start..]));
    }
    chunks
}

/// Cuts a body into chunks of pseudo-random sizes from 1 to `max` bytes (xorshift64 from
/// `seed`), keeping every byte.
pub(crate) fn split_random(body: &[u8], seed: u64, max: usize) -> Vec<Bytes> {
    let mut state = seed | 1;
    let mut chunks = Vec::new();
    let mut start = 0;
    while start < body.len() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let end = (start + 1 + (state % max.max(1) as u64) as usize).min(body.len());
        chunks.push(Bytes::copy_from_slice(&body[start..end]));
        start = end;
    }
    chunks
}

/// Anthropic stop reason for a scripted override or the default.
pub(crate) fn anthropic_stop_reason(reply: &Reply) -> String {
    match reply.stop_reason.as_deref() {
        Some("stop") => "end_turn".into(),
        Some("length") => "max_tokens".into(),
        Some("tool_calls") => "tool_use".into(),
        Some(other) => other.into(),
        None if reply.tool_calls.is_empty() => "end_turn".into(),
        None => "tool_use".into(),
    }
}

/// OpenAI finish reason for a scripted override or the default.
pub(crate) fn openai_finish_reason(reply: &Reply) -> String {
    match reply.stop_reason.as_deref() {
        Some("end_turn") | Some("stop_sequence") => "stop".into(),
        Some("max_tokens") => "length".into(),
        Some("tool_use") => "tool_calls".into(),
        Some(other) => other.into(),
        None if reply.tool_calls.is_empty() => "stop".into(),
        None => "tool_calls".into(),
    }
}

/// The `messages` array of a request body (both wire formats name it so); empty when missing.
pub(crate) fn messages(body: &Value) -> &[Value] {
    body.get("messages")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

/// Joins the text of a message `content`: a string, or an array of parts with `text`.
pub(crate) fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_keep_every_character() {
        let text = "Hello  big\nworld é!";
        let pieces = split_words(text);
        assert_eq!(pieces, vec!["Hello", "  big", "\nworld", " é!"]);
        assert_eq!(pieces.concat(), text);
    }

    #[test]
    fn json_is_cut_mid_token() {
        let json = r#"{"path":"README.md"}"#;
        let pieces = split_json(json);
        assert!(pieces.len() >= 3);
        assert_eq!(pieces.concat(), json);
        assert!(
            pieces
                .iter()
                .all(|p| serde_json::from_str::<Value>(p).is_err())
        );
    }

    #[test]
    fn random_chunks_are_deterministic_and_byte_exact() {
        let body: Vec<u8> = (0..200u8).collect();
        let chunks = split_random(&body, 7, 16);
        assert_eq!(chunks.concat(), body);
        assert!(chunks.iter().all(|c| (1..=16).contains(&c.len())));
        let sizes: std::collections::HashSet<usize> = chunks.iter().map(Bytes::len).collect();
        assert!(sizes.len() > 3, "sizes vary: {sizes:?}");
        assert_eq!(split_random(&body, 7, 16), chunks);
        assert_ne!(split_random(&body, 8, 16), chunks);
    }

    #[test]
    fn sse_events_split_at_blank_lines_byte_exact() {
        let body = b"event: a\ndata: 1\n\ndata: 2\r\n\r\n: comment\n\ndata: tail";
        let chunks = split_sse_events(body);
        assert_eq!(chunks.len(), 4);
        assert_eq!(chunks.concat(), body.to_vec());
        assert_eq!(&chunks[1][..], b"data: 2\r\n\r\n");
    }
}
