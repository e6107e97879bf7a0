//! OpenAI-compatible Chat Completions provider (`POST {base_url}/chat/completions`, streaming).
//!
//! Request format: <https://platform.openai.com/docs/api-reference/chat/create>; stream chunks:
//! <https://platform.openai.com/docs/api-reference/chat-streaming>. Works with OpenAI, Ollama,
//! vLLM, llama.cpp server, LM Studio, OpenRouter, DeepSeek… including their known deviations:
//! `tool_calls` deltas without `index` or with `index: 0` for every parallel call (Ollama),
//! `arguments` sent as a JSON object, tool calls with `finish_reason: "stop"`, `{"error": …}`
//! objects inside a 200 stream, SSE comment keep-alives.

use super::http::{HttpTransport, parse_reply_json, secret_header};
use super::sse::{Flow, WireDecoder, decode_sse, truncate_bytes};
use super::tool_args::{TRUNCATED_BY_MAX_TOKENS, validate_arguments};
use super::types::{
    ContentBlock, ModelClient, ModelError, ModelEvent, ModelRequest, ModelStream, ProviderSettings,
    Role, StopReason, ToolCall, Usage,
};
use bytes::Bytes;
use eventsource_stream::Event;
use futures::Stream;
use reqwest::header::HeaderMap;
use serde_json::{Map, Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A [`ModelClient`] for OpenAI-compatible Chat Completions with native tool calls, retries
/// ([`crate::model::retry`]) and an idle timeout (`settings.idle_timeout_ms`).
#[derive(Debug, Clone)]
pub struct OpenAiClient {
    settings: ProviderSettings,
    transport: HttpTransport,
    /// Numbers for `call_local_<n>` ids, shared by all turns of this client so ids stay unique
    /// within a conversation.
    local_ids: LocalIds,
}

impl OpenAiClient {
    /// A client for `settings` (`kind` is not checked; `base_url` already includes `/v1` when the
    /// server needs it). No network traffic happens until [`ModelClient::stream`].
    pub fn new(settings: ProviderSettings) -> Self {
        let transport = HttpTransport::new(&settings);
        OpenAiClient {
            settings,
            transport,
            local_ids: LocalIds::default(),
        }
    }

    /// The settings this client was built with.
    pub fn settings(&self) -> &ProviderSettings {
        &self.settings
    }

    fn headers(&self) -> Result<HeaderMap, ModelError> {
        let mut headers = HeaderMap::new();
        if !self.settings.api_key.0.is_empty() {
            headers.insert(
                reqwest::header::AUTHORIZATION,
                secret_header(&format!("Bearer {}", self.settings.api_key.0))?,
            );
        }
        Ok(headers)
    }
}

impl ModelClient for OpenAiClient {
    fn stream(&self, request: ModelRequest) -> ModelStream {
        let body = request_body(&request, &self.settings);
        let ids = self.local_ids.clone();
        self.transport.stream_with_retries(
            &self.settings,
            "/chat/completions",
            self.headers(),
            &body,
            move |bytes| decode_sse(bytes, OpenAiDecoder::new(ids.clone())),
            parse_openai_response,
        )
    }

    fn describe(&self) -> String {
        format!("openai {}", self.settings.model)
    }
}

/// The JSON body of a streaming Chat Completions request.
///
/// Shape: `{model, messages, stream: true, stream_options: {include_usage: true}, max_tokens,
/// tools?}`; model and token limit from `request`, falling back to `settings` when empty/zero.
/// Messages: the system prompt first (`role: system`); a user message's tool results become
/// `role: tool` messages (`tool_call_id`, text content; `is_error` results are prefixed with
/// `Error: `) followed by its text as one `role: user` message; an assistant message becomes
/// `{role: assistant, content, tool_calls: [{id, type: function, function: {name, arguments:
/// "<JSON string>"}}]}` (`content` null when there is no text). Tools are sent as
/// `{type: function, function: {name, description, parameters}}`.
pub fn request_body(request: &ModelRequest, settings: &ProviderSettings) -> Value {
    let (model, max_tokens) = super::http::model_and_limit(request, settings);
    let mut messages = Vec::new();
    if !request.system.is_empty() {
        messages.push(json!({"role": "system", "content": request.system}));
    }
    for message in &request.messages {
        let text = message.text();
        match message.role {
            Role::User => {
                for block in &message.content {
                    if let ContentBlock::ToolResult {
                        tool_use_id,
                        content,
                        is_error,
                    } = block
                    {
                        let content = if *is_error && !content.starts_with("Error") {
                            format!("Error: {content}")
                        } else {
                            content.clone()
                        };
                        messages.push(
                            json!({"role": "tool", "tool_call_id": tool_use_id, "content": content}),
                        );
                    }
                }
                let has_results = message
                    .content
                    .iter()
                    .any(|b| matches!(b, ContentBlock::ToolResult { .. }));
                if !text.is_empty() || !has_results {
                    messages.push(json!({"role": "user", "content": text}));
                }
            }
            Role::Assistant => {
                let calls: Vec<Value> = message
                    .content
                    .iter()
                    .filter_map(|b| match b {
                        ContentBlock::ToolUse { id, name, input } => Some(json!({
                            "id": id,
                            "type": "function",
                            "function": {"name": name, "arguments": input.to_string()},
                        })),
                        _ => None,
                    })
                    .collect();
                let mut m = Map::new();
                m.insert("role".into(), json!("assistant"));
                if calls.is_empty() {
                    m.insert("content".into(), json!(text));
                } else {
                    m.insert(
                        "content".into(),
                        if text.is_empty() {
                            Value::Null
                        } else {
                            json!(text)
                        },
                    );
                    m.insert("tool_calls".into(), Value::Array(calls));
                }
                messages.push(Value::Object(m));
            }
        }
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("messages".into(), Value::Array(messages));
    body.insert("stream".into(), json!(true));
    body.insert("stream_options".into(), json!({"include_usage": true}));
    body.insert("max_tokens".into(), json!(max_tokens));
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name, "description": t.description, "parameters": t.input_schema
                }})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    Value::Object(body)
}

/// Parses a Chat Completions SSE response body into model events, without HTTP.
///
/// `bytes` is the raw body in chunks of any size (the result does not depend on the split).
/// The stream yields [`ModelEvent::TextDelta`] as text arrives (empty `content` is skipped),
/// [`ModelEvent::Usage`] when a chunk carries `usage`, then — at `data: [DONE]`, or at end of
/// input after a `finish_reason` — one [`ModelEvent::ToolCall`] or [`ModelEvent::InvalidToolCall`]
/// per assembled tool call, then [`ModelEvent::Stop`]: `ToolUse` whenever there are tool calls
/// (whatever `finish_reason` said) except `MaxTokens` for `finish_reason: "length"`.
/// Calls without an id get `call_local_<n>` (n from 1 for each call of this stream).
///
/// Errors: `data: {"error": …}` → [`ModelError::Api`] (retryable unless its type says
/// otherwise); a stream ending with neither `[DONE]` nor a `finish_reason` →
/// [`ModelError::Incomplete`]; a chunk that is not JSON → [`ModelError::Decode`]; transport
/// errors as converted by `Into<ModelError>`.
pub fn parse_openai_stream<S, E>(bytes: S) -> ModelStream
where
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: Into<ModelError> + Send + 'static,
{
    decode_sse(bytes, OpenAiDecoder::new(LocalIds::default()))
}

/// Converts a whole non-streaming Chat Completions reply (`{choices: [{message, finish_reason}],
/// usage}` or `{error}`) into the events a stream of it would give.
///
/// Errors (as the last item): [`ModelError::Decode`] for a body that is not such JSON,
/// [`ModelError::Api`] for an error object.
pub fn parse_openai_response(body: &[u8]) -> Vec<Result<ModelEvent, ModelError>> {
    let reply = match parse_reply_json(body) {
        Ok(v) => v,
        Err(why) => return vec![Err(decode_error(why))],
    };
    if let Some(error) = reply.get("error").filter(|e| !e.is_null()) {
        return vec![Err(api_error(error))];
    }
    let mut decoder = OpenAiDecoder::new(LocalIds::default());
    let mut out = Vec::new();
    let Some(choice) = first_choice(&reply) else {
        return vec![Err(ModelError::not_an_endpoint(format!(
            "a JSON reply without \"choices\": {}",
            truncate_bytes(&reply.to_string(), 200)
        )))];
    };
    let message = &choice["message"];
    if let Some(text) = message["content"].as_str().filter(|t| !t.is_empty()) {
        out.push(ModelEvent::TextDelta { text: text.into() });
    }
    for call in message["tool_calls"].as_array().into_iter().flatten() {
        decoder.apply_tool_call_delta(call);
    }
    decoder.finish_reason = choice["finish_reason"]
        .as_str()
        .map(str::to_string)
        .or(Some("stop".to_string()));
    if let Some(usage) = usage_of(&reply) {
        out.push(ModelEvent::Usage(usage));
    }
    decoder.finish(&mut out);
    out.into_iter().map(Ok).collect()
}

/// Generator of `call_local_<n>` ids (n = 1, 2, …), shared by clones.
#[derive(Debug, Clone, Default)]
struct LocalIds(Arc<AtomicU64>);

impl LocalIds {
    fn next(&self) -> String {
        format!("call_local_{}", self.0.fetch_add(1, Ordering::Relaxed) + 1)
    }
}

/// A tool call being assembled from deltas.
#[derive(Debug, Default)]
struct PendingCall {
    index: Option<u64>,
    id: Option<String>,
    name: String,
    arguments: String,
}

impl PendingCall {
    /// Its arguments so far form one complete JSON value.
    fn is_complete(&self) -> bool {
        !self.arguments.trim().is_empty()
            && serde_json::from_str::<serde::de::IgnoredAny>(&self.arguments).is_ok()
    }
}

/// State machine over the chunks of one Chat Completions stream.
#[derive(Debug)]
struct OpenAiDecoder {
    calls: Vec<PendingCall>,
    finish_reason: Option<String>,
    ids: LocalIds,
    text_bytes: usize,
}

fn decode_error(what: impl std::fmt::Display) -> ModelError {
    ModelError::Decode(format!("OpenAI-compatible stream: {what}"))
}

/// `{"error": …}` (object with `message`, `type`/`code`, or a bare string) as an API error.
fn api_error(error: &Value) -> ModelError {
    let kind = error
        .get("type")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .or_else(|| match error.get("code") {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Number(n)) => Some(n.to_string()),
            _ => None,
        })
        .unwrap_or_else(|| "api_error".to_string());
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .or(error.as_str())
        .map(str::to_string)
        .unwrap_or_else(|| truncate_bytes(&error.to_string(), 2_000));
    ModelError::Api { kind, message }
}

/// The choice with `index: 0` (or the first one).
fn first_choice(chunk: &Value) -> Option<&Value> {
    let choices = chunk.get("choices")?.as_array()?;
    choices
        .iter()
        .find(|c| c.get("index").and_then(Value::as_u64) == Some(0))
        .or(choices.first())
}

fn usage_of(chunk: &Value) -> Option<Usage> {
    let usage = chunk.get("usage").filter(|u| u.is_object())?;
    Some(Usage {
        input_tokens: usage["prompt_tokens"].as_u64().unwrap_or(0),
        output_tokens: usage["completion_tokens"].as_u64().unwrap_or(0),
        cache_read_tokens: usage["prompt_tokens_details"]["cached_tokens"]
            .as_u64()
            .unwrap_or(0),
        cache_write_tokens: 0,
    })
}

impl OpenAiDecoder {
    fn new(ids: LocalIds) -> Self {
        OpenAiDecoder {
            calls: Vec::new(),
            finish_reason: None,
            ids,
            text_bytes: 0,
        }
    }

    /// Adds one entry of a `delta.tool_calls` array.
    ///
    /// The call it belongs to is found by `index` and `id`: a new non-empty id at an index whose
    /// call is complete and has a different id starts a new call (Ollama sends index 0 for every
    /// parallel call); without an index, an id starts a new call unless a call with that id
    /// exists, and no id continues the last call.
    fn apply_tool_call_delta(&mut self, delta: &Value) {
        let id = delta
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty());
        let index = delta.get("index").and_then(Value::as_u64);
        let existing = match (index, id) {
            (Some(i), _) => self
                .calls
                .iter()
                .rposition(|c| c.index == Some(i))
                .filter(|&pos| {
                    let c = &self.calls[pos];
                    let other_id = matches!((&c.id, id), (Some(old), Some(new)) if old != new);
                    !(other_id && c.is_complete())
                }),
            (None, Some(id)) => self.calls.iter().rposition(|c| c.id.as_deref() == Some(id)),
            (None, None) => self.calls.len().checked_sub(1),
        };
        let pos = existing.unwrap_or_else(|| {
            self.calls.push(PendingCall {
                index,
                ..PendingCall::default()
            });
            self.calls.len() - 1
        });
        let call = &mut self.calls[pos];
        if call.id.is_none() {
            call.id = id.map(str::to_string);
        }
        let function = &delta["function"];
        if let Some(name) = function
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
        {
            if call.name.is_empty() {
                call.name = name.to_string();
            } else if call.name != name {
                // Some servers stream the name in pieces.
                call.name.push_str(name);
            }
        }
        match function.get("arguments") {
            Some(Value::String(piece)) => call.arguments.push_str(piece),
            Some(Value::Null) | None => {}
            // Arguments sent as a JSON value (Ollama-origin): accept as is.
            Some(value) => call.arguments = value.to_string(),
        }
    }

    /// Emits the assembled tool calls and the stop event.
    fn finish(&mut self, out: &mut Vec<ModelEvent>) {
        let length = self.finish_reason.as_deref() == Some("length");
        let calls = std::mem::take(&mut self.calls);
        let count = calls.len();
        for (n, call) in calls.into_iter().enumerate() {
            let id = call.id.unwrap_or_else(|| self.ids.next());
            let is_last = n + 1 == count;
            let result = if call.name.is_empty() {
                Err(if length {
                    TRUNCATED_BY_MAX_TOKENS.to_string()
                } else {
                    "this tool call has no tool name; the call was not executed. Send it again \
                     with the name of one of the offered tools."
                        .to_string()
                })
            } else {
                validate_arguments(&call.arguments, None, length && is_last).map_err(|e| {
                    if length {
                        TRUNCATED_BY_MAX_TOKENS.to_string()
                    } else {
                        e
                    }
                })
            };
            out.push(match result {
                Ok(input) => ModelEvent::ToolCall(ToolCall {
                    id,
                    name: call.name,
                    input,
                }),
                Err(error) => ModelEvent::InvalidToolCall {
                    id,
                    name: call.name,
                    raw_arguments: call.arguments,
                    error,
                },
            });
        }
        let reason = match self.finish_reason.as_deref() {
            Some("length") => StopReason::MaxTokens,
            _ if count > 0 => StopReason::ToolUse,
            Some("stop") | None => StopReason::EndTurn,
            Some("tool_calls") | Some("function_call") => StopReason::ToolUse,
            Some(other) => StopReason::Other(other.to_string()),
        };
        out.push(ModelEvent::Stop { reason });
    }
}

impl WireDecoder for OpenAiDecoder {
    fn on_event(&mut self, event: &Event, out: &mut Vec<ModelEvent>) -> Result<Flow, ModelError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            self.finish(out);
            return Ok(Flow::Done);
        }
        if data.is_empty() {
            return Ok(Flow::Continue);
        }
        let chunk: Value = serde_json::from_str(data).map_err(|e| {
            ModelError::MalformedEvent(format!(
                "OpenAI-compatible stream: a chunk is not JSON ({e}): {}",
                truncate_bytes(data, 200)
            ))
        })?;
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null()) {
            return Err(api_error(error));
        }
        if let Some(choice) = first_choice(&chunk) {
            let delta = &choice["delta"];
            if let Some(text) = delta
                .get("content")
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
            {
                self.text_bytes += text.len();
                out.push(ModelEvent::TextDelta { text: text.into() });
            }
            for call in delta
                .get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                self.apply_tool_call_delta(call);
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finish_reason = Some(reason.to_string());
            }
        }
        if let Some(usage) = usage_of(&chunk) {
            out.push(ModelEvent::Usage(usage));
        }
        Ok(Flow::Continue)
    }

    fn on_eof(&mut self, out: &mut Vec<ModelEvent>) -> Result<(), ModelError> {
        if self.finish_reason.is_some() {
            self.finish(out);
            return Ok(());
        }
        Err(ModelError::Incomplete(format!(
            "the stream ended with neither [DONE] nor a finish_reason (after {} bytes of text \
             and {} partial tool calls)",
            self.text_bytes,
            self.calls.len()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Message, ProviderKind, ToolSpec};

    async fn parse(text: &str) -> Vec<Result<ModelEvent, ModelError>> {
        crate::model::sse::events_of(parse_openai_stream, text).await
    }

    fn chunk(delta: Value, finish: Option<&str>) -> String {
        format!(
            "data: {}\n\n",
            json!({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        )
    }

    #[tokio::test]
    async fn truncated_by_length_is_reported_as_max_tokens_and_not_executed() {
        let text = chunk(
            json!({"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "write_file", "arguments": "{\"path\": \"a"}}]}),
            None,
        ) + &chunk(json!({}), Some("length"))
            + "data: [DONE]\n\n";
        let got: Vec<_> = parse(&text).await.into_iter().map(Result::unwrap).collect();
        assert_eq!(
            got,
            vec![
                ModelEvent::InvalidToolCall {
                    id: "c1".into(),
                    name: "write_file".into(),
                    raw_arguments: "{\"path\": \"a".into(),
                    error: TRUNCATED_BY_MAX_TOKENS.into(),
                },
                ModelEvent::Stop {
                    reason: StopReason::MaxTokens
                }
            ]
        );
    }

    #[tokio::test]
    async fn no_done_and_no_finish_reason_is_incomplete() {
        let got = parse(&chunk(json!({"content": "Hi"}), None)).await;
        assert_eq!(got[0], Ok(ModelEvent::TextDelta { text: "Hi".into() }));
        assert!(matches!(got[1], Err(ModelError::Incomplete(_))), "{got:?}");
    }

    #[tokio::test]
    async fn finish_reason_without_done_is_complete() {
        let got = parse(&chunk(json!({"content": "Hi"}), Some("stop"))).await;
        assert_eq!(
            got[1],
            Ok(ModelEvent::Stop {
                reason: StopReason::EndTurn
            })
        );
    }

    #[tokio::test]
    async fn malformed_chunk_is_a_malformed_event_quoting_it() {
        let got = parse("data: {\"choices\": [\n\n").await;
        assert!(
            matches!(&got[0], Err(ModelError::MalformedEvent(text)) if text.contains("{\"choices\": [")),
            "{got:?}"
        );
    }

    #[tokio::test]
    async fn parallel_calls_without_index_are_kept_apart_by_id() {
        let text = chunk(
            json!({"tool_calls": [{"id": "a", "function": {"name": "f", "arguments": "{\"x\":"}}]}),
            None,
        ) + &chunk(
            json!({"tool_calls": [{"function": {"arguments": "1}"}}]}),
            None,
        ) + &chunk(
            json!({"tool_calls": [{"id": "b", "function": {"name": "g", "arguments": "{}"}}]}),
            None,
        ) + &chunk(json!({}), Some("tool_calls"))
            + "data: [DONE]\n\n";
        let got: Vec<_> = parse(&text).await.into_iter().map(Result::unwrap).collect();
        assert_eq!(
            got[..2],
            [
                ModelEvent::ToolCall(ToolCall {
                    id: "a".into(),
                    name: "f".into(),
                    input: json!({"x": 1})
                }),
                ModelEvent::ToolCall(ToolCall {
                    id: "b".into(),
                    name: "g".into(),
                    input: json!({})
                }),
            ]
        );
    }

    #[test]
    fn non_streaming_reply_is_converted() {
        let body = json!({
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": "Let me look.",
                "tool_calls": [{"id": "c9", "type": "function",
                    "function": {"name": "read_file", "arguments": "{\"path\":\"a.rs\"}"}}]}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}
        });
        let got: Vec<_> = parse_openai_response(body.to_string().as_bytes())
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(
            got,
            vec![
                ModelEvent::TextDelta {
                    text: "Let me look.".into()
                },
                ModelEvent::Usage(Usage {
                    input_tokens: 10,
                    output_tokens: 3,
                    ..Default::default()
                }),
                ModelEvent::ToolCall(ToolCall {
                    id: "c9".into(),
                    name: "read_file".into(),
                    input: json!({"path": "a.rs"})
                }),
                ModelEvent::Stop {
                    reason: StopReason::ToolUse
                },
            ]
        );
        let err = parse_openai_response(
            br#"{"error": {"message": "bad", "type": "invalid_request_error"}}"#,
        );
        assert!(matches!(&err[0], Err(e @ ModelError::Api { .. }) if !e.is_retryable()));
    }

    fn settings() -> ProviderSettings {
        ProviderSettings {
            model: "gpt-test".into(),
            max_output_tokens: 512,
            context_window: 128_000,
            ..ProviderSettings::for_tests(
                ProviderKind::Openai,
                "http://127.0.0.1:1/v1",
                "sk-openai-secret",
            )
        }
    }

    #[test]
    fn request_body_translates_tool_calls_and_results() {
        let request = ModelRequest {
            model: "override".into(),
            system_shared_len: 0,
            system: "sys".into(),
            messages: [
                Message::tool_round(
                    "read a.rs",
                    "Reading.",
                    &[
                        ("call_1", "read_file", json!({"path": "a.rs"})),
                        ("call_2", "read_file", json!({"path": "b.rs"})),
                    ],
                    &[
                        ("call_1", "fn main() {}", false),
                        ("call_2", "no such file", true),
                    ],
                ),
                vec![Message::assistant_text("Done.")],
            ]
            .concat(),
            tools: vec![ToolSpec {
                name: "read_file".into(),
                description: "Reads a file.".into(),
                input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
            }],
            max_output_tokens: 77,
        };
        let body = request_body(&request, &settings());
        assert_eq!(
            body,
            json!({
                "model": "override",
                "messages": [
                    {"role": "system", "content": "sys"},
                    {"role": "user", "content": "read a.rs"},
                    {"role": "assistant", "content": "Reading.", "tool_calls": [
                        {"id": "call_1", "type": "function",
                         "function": {"name": "read_file", "arguments": "{\"path\":\"a.rs\"}"}},
                        {"id": "call_2", "type": "function",
                         "function": {"name": "read_file", "arguments": "{\"path\":\"b.rs\"}"}}
                    ]},
                    {"role": "tool", "tool_call_id": "call_1", "content": "fn main() {}"},
                    {"role": "tool", "tool_call_id": "call_2", "content": "Error: no such file"},
                    {"role": "assistant", "content": "Done."}
                ],
                "stream": true,
                "stream_options": {"include_usage": true},
                "max_tokens": 77,
                "tools": [{"type": "function", "function": {"name": "read_file",
                    "description": "Reads a file.",
                    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}]
            })
        );
        // The arguments string round-trips to the original input.
        let args = body["messages"][2]["tool_calls"][0]["function"]["arguments"]
            .as_str()
            .unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(args).unwrap(),
            json!({"path": "a.rs"})
        );
    }

    #[test]
    fn debug_output_never_shows_the_key() {
        let client = OpenAiClient::new(settings());
        assert!(!format!("{client:?}").contains("sk-openai-secret"));
        assert_eq!(client.describe(), "openai gpt-test");
    }
}
