//! Anthropic Messages API provider (`POST {base_url}/v1/messages`, streaming).
//!
//! Request format: <https://docs.anthropic.com/en/api/messages>. Stream format:
//! <https://docs.anthropic.com/en/docs/build-with-claude/streaming> — `message_start`,
//! `content_block_start`, `content_block_delta` (`text_delta`, `input_json_delta`),
//! `content_block_stop`, `message_delta` (cumulative usage, `stop_reason`), `message_stop`,
//! `ping`, `error`; unknown events are ignored.
//!
//! Our [`ContentBlock`]s are the Messages API's content blocks, so requests map 1:1.

use super::http::{HttpTransport, parse_reply_json, secret_header};
use super::sse::{Flow, WireDecoder, decode_sse};
use super::tool_args::{check_object, validate_arguments};
use super::types::{
    ContentBlock, Message, ModelClient, ModelError, ModelEvent, ModelRequest, ModelStream,
    ProviderSettings, Role, StopReason, ToolCall, Usage,
};
use bytes::Bytes;
use eventsource_stream::Event;
use futures::Stream;
use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// The `anthropic-version` header value sent with every request.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// A [`ModelClient`] for the Anthropic Messages API with native tool calls, retries
/// ([`crate::model::retry`]) and an idle timeout (`settings.idle_timeout_ms`).
#[derive(Debug, Clone)]
pub struct AnthropicClient {
    settings: ProviderSettings,
    transport: HttpTransport,
}

impl AnthropicClient {
    /// A client for `settings` (`kind` is not checked). No network traffic happens until
    /// [`ModelClient::stream`].
    pub fn new(settings: ProviderSettings) -> Self {
        let transport = HttpTransport::new(&settings);
        AnthropicClient {
            settings,
            transport,
        }
    }

    /// The settings this client was built with.
    pub fn settings(&self) -> &ProviderSettings {
        &self.settings
    }

    fn headers(&self) -> Result<HeaderMap, ModelError> {
        let mut headers = HeaderMap::new();
        headers.insert(
            "anthropic-version",
            HeaderValue::from_static(ANTHROPIC_VERSION),
        );
        if !self.settings.api_key.0.is_empty() {
            headers.insert("x-api-key", secret_header(&self.settings.api_key.0)?);
        }
        Ok(headers)
    }
}

impl ModelClient for AnthropicClient {
    fn stream(&self, request: ModelRequest) -> ModelStream {
        let body = request_body(&request, &self.settings);
        self.transport.stream_with_retries(
            &self.settings,
            "/v1/messages",
            self.headers(),
            &body,
            parse_anthropic_stream,
            parse_anthropic_response,
        )
    }

    fn describe(&self) -> String {
        format!("anthropic {}", self.settings.model)
    }
}

/// The JSON body of a streaming Messages API request.
///
/// Shape: `{model, max_tokens, stream: true, system?, messages, tools?}`. The model and token
/// limit come from `request`, falling back to `settings` when empty/zero. `system` is sent as
/// the run's shared prefix with a cache breakpoint (`cache_control: {type: "ephemeral"}`) and
/// the agent's own part after it ([`ModelRequest::system_shared_len`]; one block with the
/// breakpoint without a split), and the last content block of the last message carries a
/// breakpoint too (prompt caching: tools, system and history are cached with it).
/// Tool results are sent as `{type: tool_result, tool_use_id, content: "<text>", is_error}`.
/// Empty text blocks (which the API rejects) are dropped unless a message would become empty.
pub fn request_body(request: &ModelRequest, settings: &ProviderSettings) -> Value {
    let (model, max_tokens) = super::http::model_and_limit(request, settings);
    let mut messages: Vec<Value> = request.messages.iter().map(message_json).collect();
    if let Some(block) = messages
        .last_mut()
        .and_then(|m| m["content"].as_array_mut())
        .and_then(|c| c.last_mut())
        .and_then(Value::as_object_mut)
    {
        block.insert("cache_control".into(), json!({"type": "ephemeral"}));
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("max_tokens".into(), json!(max_tokens));
    body.insert("stream".into(), json!(true));
    if !request.system.is_empty() {
        body.insert("system".into(), system_json(request));
    }
    body.insert("messages".into(), Value::Array(messages));
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.input_schema}))
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    Value::Object(body)
}

/// The `system` blocks: the prefix shared by the run's agents of one role with a cache
/// breakpoint at its end (so every worker's first request reads the entry the first one
/// wrote), then the agent's own part; one block with the breakpoint when there is no split.
fn system_json(request: &ModelRequest) -> Value {
    let cached = json!({"type": "ephemeral"});
    let split = request.system_shared_len;
    match request.system.split_at_checked(split) {
        Some((shared, own)) if split > 0 && !own.is_empty() => json!([
            {"type": "text", "text": shared, "cache_control": cached},
            {"type": "text", "text": own},
        ]),
        _ => json!([{"type": "text", "text": request.system, "cache_control": cached}]),
    }
}

fn message_json(message: &Message) -> Value {
    let role = match message.role {
        Role::User => "user",
        Role::Assistant => "assistant",
    };
    let has_non_empty = message
        .content
        .iter()
        .any(|b| !matches!(b, ContentBlock::Text { text } if text.is_empty()));
    let content: Vec<Value> = message
        .content
        .iter()
        .filter(|b| !has_non_empty || !matches!(b, ContentBlock::Text { text } if text.is_empty()))
        .map(|b| match b {
            ContentBlock::Text { text } => json!({"type": "text", "text": text}),
            ContentBlock::ToolUse { id, name, input } => {
                json!({"type": "tool_use", "id": id, "name": name, "input": input})
            }
            ContentBlock::ToolResult {
                tool_use_id,
                content,
                is_error,
            } => {
                let mut v =
                    json!({"type": "tool_result", "tool_use_id": tool_use_id, "content": content});
                if *is_error {
                    v["is_error"] = json!(true);
                }
                v
            }
        })
        .collect();
    json!({"role": role, "content": content})
}

/// Parses a Messages API SSE response body into model events, without HTTP.
///
/// `bytes` is the raw body in chunks of any size (whole, one byte at a time, …: the result is the
/// same). The stream yields [`ModelEvent::Usage`] on `message_start` and `message_delta` (output
/// tokens replace, never add), [`ModelEvent::TextDelta`] as text arrives, then at `message_stop`
/// one [`ModelEvent::ToolCall`] or [`ModelEvent::InvalidToolCall`] per `tool_use` block in block
/// order, then [`ModelEvent::Stop`].
///
/// Errors: an `error` event → [`ModelError::Api`] (e.g. `overloaded_error`); a stream ending
/// without `message_stop` → [`ModelError::Incomplete`]; malformed JSON, a delta for an unknown
/// block or a delta whose type does not match its block → [`ModelError::Decode`]; transport
/// errors as converted by `Into<ModelError>`.
pub fn parse_anthropic_stream<S, E>(bytes: S) -> ModelStream
where
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: Into<ModelError> + Send + 'static,
{
    decode_sse(bytes, AnthropicDecoder::default())
}

/// Maps a Messages API `stop_reason`; a missing one means `tool_use` when the reply holds tool
/// calls, else `end_turn`.
fn stop_reason(reason: Option<&str>, any_call: bool) -> StopReason {
    match reason {
        Some("end_turn") => StopReason::EndTurn,
        Some("tool_use") => StopReason::ToolUse,
        Some("max_tokens") => StopReason::MaxTokens,
        Some("stop_sequence") => StopReason::StopSequence,
        Some(other) => StopReason::Other(other.to_string()),
        None if any_call => StopReason::ToolUse,
        None => StopReason::EndTurn,
    }
}

/// Converts a whole non-streaming Messages API reply (`{content, stop_reason, usage}`, or
/// `{type: "error", error: {type, message}}`) into the events a stream of it would give.
///
/// Errors (as the last item): [`ModelError::Decode`] for a body that is not JSON,
/// [`ModelError::NotAnEndpoint`] for JSON that is neither a reply nor an error (e.g.
/// `{"hello":"world"}`), [`ModelError::Api`] for an error object.
pub fn parse_anthropic_response(body: &[u8]) -> Vec<Result<ModelEvent, ModelError>> {
    let reply = match parse_reply_json(body) {
        Ok(v) => v,
        Err(why) => return vec![Err(decode_error(why))],
    };
    if reply.get("content").is_none() && reply.get("error").is_none() && reply["type"] != "error" {
        return vec![Err(ModelError::not_an_endpoint(format!(
            "a JSON reply without \"content\": {}",
            super::sse::truncate_bytes(&reply.to_string(), 200)
        )))];
    }
    if reply["type"] == "error" || reply.get("content").is_none() {
        let error = &reply["error"];
        return vec![Err(ModelError::Api {
            kind: error["type"].as_str().unwrap_or("api_error").to_string(),
            message: error["message"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| super::sse::truncate_bytes(&reply.to_string(), 2_000)),
        })];
    }
    let mut out = Vec::new();
    let usage = &reply["usage"];
    out.push(Ok(ModelEvent::Usage(AnthropicDecoder::usage(usage))));
    let mut calls = Vec::new();
    for block in reply["content"].as_array().into_iter().flatten() {
        match block["type"].as_str() {
            Some("text") => {
                let text = block["text"].as_str().unwrap_or_default();
                if !text.is_empty() {
                    out.push(Ok(ModelEvent::TextDelta { text: text.into() }));
                }
            }
            Some("tool_use") => {
                let id = block["id"].as_str().unwrap_or_default().to_string();
                let name = block["name"].as_str().unwrap_or_default().to_string();
                let input = block.get("input").cloned().unwrap_or(json!({}));
                calls.push(match check_object(input.clone()) {
                    Ok(input) => ModelEvent::ToolCall(ToolCall { id, name, input }),
                    Err(error) => ModelEvent::InvalidToolCall {
                        id,
                        name,
                        raw_arguments: input.to_string(),
                        error,
                    },
                });
            }
            _ => {}
        }
    }
    let any_call = !calls.is_empty();
    out.extend(calls.into_iter().map(Ok));
    out.push(Ok(ModelEvent::Stop {
        reason: stop_reason(reply["stop_reason"].as_str(), any_call),
    }));
    out
}

/// One content block of the reply being streamed.
#[derive(Debug)]
enum Block {
    Text,
    ToolUse {
        id: String,
        name: String,
        /// `input` of `content_block_start` (normally `{}`), used when no delta arrives.
        start_input: Value,
        json: String,
        stopped: bool,
    },
    /// `thinking`, `server_tool_use`, … — not ours to interpret; deltas are ignored.
    Other,
}

/// State machine over the events of one Messages API stream.
#[derive(Debug, Default)]
struct AnthropicDecoder {
    /// Blocks by their `index`.
    blocks: BTreeMap<u64, Block>,
    usage: Usage,
    stop_reason: Option<String>,
    text_bytes: usize,
}

fn decode_error(what: impl std::fmt::Display) -> ModelError {
    ModelError::Decode(format!("Anthropic stream: {what}"))
}

fn u64_field(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64)
}

impl AnthropicDecoder {
    /// Total prompt tokens of a usage object: uncached + cache writes + cache reads.
    fn input_tokens(usage: &Value) -> Option<u64> {
        let base = u64_field(usage, "input_tokens")?;
        Some(
            base + u64_field(usage, "cache_creation_input_tokens").unwrap_or(0)
                + u64_field(usage, "cache_read_input_tokens").unwrap_or(0),
        )
    }

    /// A usage object: all prompt tokens, output tokens, cache reads and writes.
    fn usage(usage: &Value) -> Usage {
        Usage {
            input_tokens: Self::input_tokens(usage).unwrap_or(0),
            output_tokens: u64_field(usage, "output_tokens").unwrap_or(0),
            cache_read_tokens: u64_field(usage, "cache_read_input_tokens").unwrap_or(0),
            cache_write_tokens: u64_field(usage, "cache_creation_input_tokens").unwrap_or(0),
        }
    }

    fn finish(&mut self, out: &mut Vec<ModelEvent>) {
        let max_tokens = self.stop_reason.as_deref() == Some("max_tokens");
        let last_index = self.blocks.keys().next_back().copied();
        let mut any_call = false;
        for (index, block) in std::mem::take(&mut self.blocks) {
            let Block::ToolUse {
                id,
                name,
                start_input,
                json,
                stopped,
            } = block
            else {
                continue;
            };
            any_call = true;
            // Under max_tokens the last block may have been cut off even if it looks empty;
            // a block never stopped is cut off whatever its content.
            let truncated = max_tokens && (!stopped || Some(index) == last_index);
            let result = if stopped || max_tokens {
                validate_arguments(&json, Some(&start_input), truncated)
            } else {
                Err(
                    "the tool call was never completed (no content_block_stop); the call was \
                     not executed. Send it again."
                        .to_string(),
                )
            };
            out.push(match result {
                Ok(input) => ModelEvent::ToolCall(ToolCall { id, name, input }),
                Err(error) => ModelEvent::InvalidToolCall {
                    id,
                    name,
                    raw_arguments: json,
                    error,
                },
            });
        }
        out.push(ModelEvent::Stop {
            reason: stop_reason(self.stop_reason.as_deref(), any_call),
        });
    }

    /// `message_start`: the prompt's usage.
    fn message_start(&mut self, data: &Value, out: &mut Vec<ModelEvent>) {
        let usage = &data["message"]["usage"];
        self.usage = Self::usage(usage);
        out.push(ModelEvent::Usage(self.usage));
    }

    /// `content_block_start`: a text block (its first text, if any, is streamed) or a
    /// `tool_use` block (its input arrives in deltas).
    fn content_block_start(
        &mut self,
        data: &Value,
        out: &mut Vec<ModelEvent>,
    ) -> Result<(), ModelError> {
        let index = block_index(data, "content_block_start")?;
        let cb = &data["content_block"];
        let block = match cb.get("type").and_then(Value::as_str) {
            Some("text") => {
                if let Some(text) = cb.get("text").and_then(Value::as_str) {
                    self.text(text, out);
                }
                Block::Text
            }
            Some("tool_use") => Block::ToolUse {
                id: cb["id"].as_str().unwrap_or_default().to_string(),
                name: cb["name"].as_str().unwrap_or_default().to_string(),
                start_input: cb.get("input").cloned().unwrap_or(json!({})),
                json: String::new(),
                stopped: false,
            },
            _ => Block::Other,
        };
        if self.blocks.insert(index, block).is_some() {
            return Err(decode_error(format_args!(
                "content_block_start for block {index}, which was already started"
            )));
        }
        Ok(())
    }

    /// Streams a piece of text (empty pieces are dropped).
    fn text(&mut self, text: &str, out: &mut Vec<ModelEvent>) {
        if !text.is_empty() {
            self.text_bytes += text.len();
            out.push(ModelEvent::TextDelta { text: text.into() });
        }
    }

    /// `content_block_delta`: text is streamed, tool input JSON collected; a delta of the wrong
    /// kind for its block is an error.
    fn content_block_delta(
        &mut self,
        data: &Value,
        out: &mut Vec<ModelEvent>,
    ) -> Result<(), ModelError> {
        let index = block_index(data, "content_block_delta")?;
        let delta = &data["delta"];
        let delta_type = delta.get("type").and_then(Value::as_str).unwrap_or("");
        let block = self.blocks.get_mut(&index).ok_or_else(|| {
            decode_error(format_args!(
                "content_block_delta for block {index}, which was never started"
            ))
        })?;
        match (block, delta_type) {
            (Block::Text, "text_delta") => {
                self.text(delta["text"].as_str().unwrap_or_default(), out)
            }
            (Block::ToolUse { json, stopped, .. }, "input_json_delta") => {
                if *stopped {
                    return Err(decode_error(format_args!(
                        "input_json_delta for block {index} after its content_block_stop"
                    )));
                }
                json.push_str(delta["partial_json"].as_str().unwrap_or_default());
            }
            (Block::Text, "input_json_delta") | (Block::ToolUse { .. }, "text_delta") => {
                let block_kind = if delta_type == "text_delta" {
                    "tool_use"
                } else {
                    "text"
                };
                return Err(decode_error(format_args!(
                    "a `{delta_type}` arrived for block {index}, which is a {block_kind} block"
                )));
            }
            // citations_delta, thinking/signature deltas, unknown blocks: not ours.
            _ => {}
        }
        Ok(())
    }

    /// `content_block_stop`: a tool call's input is complete.
    fn content_block_stop(&mut self, data: &Value) -> Result<(), ModelError> {
        let index = block_index(data, "content_block_stop")?;
        match self.blocks.get_mut(&index) {
            Some(Block::ToolUse { stopped, .. }) => *stopped = true,
            Some(_) => {}
            None => {
                return Err(decode_error(format_args!(
                    "content_block_stop for block {index}, which was never started"
                )));
            }
        }
        Ok(())
    }

    /// `message_delta`: the stop reason and the cumulative usage (replaced, never added).
    fn message_delta(&mut self, data: &Value, out: &mut Vec<ModelEvent>) {
        if let Some(reason) = data["delta"].get("stop_reason").and_then(Value::as_str) {
            self.stop_reason = Some(reason.to_string());
        }
        if let Some(usage) = data.get("usage").filter(|u| u.is_object()) {
            if let Some(input) = Self::input_tokens(usage) {
                self.usage.input_tokens = input;
            }
            if let Some(output) = u64_field(usage, "output_tokens") {
                self.usage.output_tokens = output;
            }
            if let Some(read) = u64_field(usage, "cache_read_input_tokens") {
                self.usage.cache_read_tokens = read;
            }
            if let Some(written) = u64_field(usage, "cache_creation_input_tokens") {
                self.usage.cache_write_tokens = written;
            }
            out.push(ModelEvent::Usage(self.usage));
        }
    }
}

/// The `index` of a content-block event.
fn block_index(data: &Value, event: &str) -> Result<u64, ModelError> {
    u64_field(data, "index").ok_or_else(|| decode_error(format_args!("{event} without an index")))
}

/// The error of an `error` event (`{"type": …, "message": …}`).
fn api_error(error: &Value) -> ModelError {
    ModelError::Api {
        kind: error["type"].as_str().unwrap_or("api_error").to_string(),
        message: error["message"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| error.to_string()),
    }
}

impl WireDecoder for AnthropicDecoder {
    fn on_event(&mut self, event: &Event, out: &mut Vec<ModelEvent>) -> Result<Flow, ModelError> {
        let data: Value = serde_json::from_str(&event.data).map_err(|e| {
            ModelError::MalformedEvent(format!(
                "Anthropic stream: event `{}` is not JSON ({e}): {}",
                event.event,
                super::sse::truncate_bytes(&event.data, 200)
            ))
        })?;
        let kind = data
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(event.event.as_str());
        match kind {
            "message_start" => self.message_start(&data, out),
            "content_block_start" => self.content_block_start(&data, out)?,
            "content_block_delta" => self.content_block_delta(&data, out)?,
            "content_block_stop" => self.content_block_stop(&data)?,
            "message_delta" => self.message_delta(&data, out),
            "message_stop" => {
                self.finish(out);
                return Ok(Flow::Done);
            }
            "error" => return Err(api_error(&data["error"])),
            // `ping` and event types added to the API later.
            _ => {}
        }
        Ok(Flow::Continue)
    }

    fn on_eof(&mut self, _out: &mut Vec<ModelEvent>) -> Result<(), ModelError> {
        Err(ModelError::Incomplete(format!(
            "the Anthropic stream ended without message_stop (after {} bytes of text, stop \
             reason {})",
            self.text_bytes,
            self.stop_reason.as_deref().unwrap_or("not sent")
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ToolSpec;

    async fn parse(text: &str) -> Vec<Result<ModelEvent, ModelError>> {
        crate::model::sse::events_of(parse_anthropic_stream, text).await
    }

    fn sse(events: &[&str]) -> String {
        events
            .iter()
            .map(|d| format!("event: x\ndata: {d}\n\n"))
            .collect()
    }

    #[tokio::test]
    async fn mismatched_delta_type_is_a_decode_error_not_a_panic() {
        let got = parse(&sse(&[
            r#"{"type":"message_start","message":{"usage":{"input_tokens":3,"output_tokens":1}}}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t1","name":"f","input":{}}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}"#,
        ]))
        .await;
        assert!(
            matches!(got.last(), Some(Err(ModelError::Decode(m))) if m.contains("tool_use")),
            "{got:?}"
        );
    }

    /// Every protocol error of the block events ends the stream with a message naming it.
    #[tokio::test]
    async fn block_protocol_errors_name_the_problem() {
        let start_text =
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#;
        let start_tool = r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t1","name":"f","input":{}}}"#;
        let stop = r#"{"type":"content_block_stop","index":0}"#;
        let json_delta = r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{}"}}"#;
        let cases: [(&[&str], &str); 6] = [
            (&[start_text, start_text], "which was already started"),
            (&[start_text, json_delta], "which is a text block"),
            (
                &[start_tool, stop, json_delta],
                "after its content_block_stop",
            ),
            (
                &[stop],
                "content_block_stop for block 0, which was never started",
            ),
            (
                &[r#"{"type":"content_block_stop"}"#],
                "content_block_stop without an index",
            ),
            (
                &[r#"{"type":"content_block_delta"}"#],
                "content_block_delta without an index",
            ),
        ];
        for (events, message) in cases {
            let got = parse(&sse(events)).await;
            assert!(
                matches!(got.last(), Some(Err(ModelError::Decode(m))) if m.contains(message)),
                "{message}: {got:?}"
            );
        }
        let got = parse(&sse(&[
            r#"{"type":"error","error":{"type":"overloaded_error","message":"busy"}}"#,
        ]))
        .await;
        assert!(
            matches!(got.last(), Some(Err(ModelError::Api { kind, message })) if kind == "overloaded_error" && message == "busy"),
            "{got:?}"
        );
    }

    #[tokio::test]
    async fn delta_for_unknown_block_is_a_decode_error() {
        let got = parse(&sse(&[
            r#"{"type":"content_block_delta","index":4,"delta":{"type":"text_delta","text":"hi"}}"#,
        ]))
        .await;
        assert!(matches!(got.last(), Some(Err(ModelError::Decode(_)))));
    }

    #[tokio::test]
    async fn tool_use_without_arguments_gets_empty_object_and_thinking_is_ignored() {
        let got = parse(&sse(&[
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}"#,
            r#"{"type":"content_block_stop","index":0}"#,
            r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t1","name":"list_dir","input":{}}}"#,
            r#"{"type":"content_block_stop","index":1}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":5}}"#,
            r#"{"type":"some_future_event"}"#,
            r#"{"type":"message_stop"}"#,
        ]))
        .await;
        let got: Vec<_> = got.into_iter().map(Result::unwrap).collect();
        assert_eq!(
            got,
            vec![
                ModelEvent::Usage(Usage {
                    input_tokens: 0,
                    output_tokens: 5,
                    ..Default::default()
                }),
                ModelEvent::ToolCall(ToolCall {
                    id: "t1".into(),
                    name: "list_dir".into(),
                    input: json!({})
                }),
                ModelEvent::Stop {
                    reason: StopReason::ToolUse
                },
            ]
        );
    }

    #[tokio::test]
    async fn cache_tokens_count_as_input() {
        let got = parse(&sse(&[
            r#"{"type":"message_start","message":{"usage":{"input_tokens":3,"cache_creation_input_tokens":10,"cache_read_input_tokens":100,"output_tokens":1}}}"#,
        ]))
        .await;
        assert_eq!(
            got[0],
            Ok(ModelEvent::Usage(Usage {
                input_tokens: 113,
                output_tokens: 1,
                cache_read_tokens: 100,
                cache_write_tokens: 10,
            }))
        );
    }

    fn settings() -> ProviderSettings {
        ProviderSettings {
            model: "claude-test".into(),
            max_output_tokens: 1024,
            context_window: 200_000,
            ..ProviderSettings::for_tests(
                crate::model::ProviderKind::Anthropic,
                "http://127.0.0.1:1",
                "sk-ant-secret",
            )
        }
    }

    #[test]
    fn request_body_maps_blocks_one_to_one() {
        let request = ModelRequest {
            model: String::new(),
            system_shared_len: 0,
            system: "be brief".into(),
            messages: Message::tool_round(
                "list files",
                "",
                &[("toolu_1", "list_dir", json!({"path": "."}))],
                &[("toolu_1", "no such dir", true)],
            ),
            tools: vec![ToolSpec {
                name: "list_dir".into(),
                description: "Lists a directory.".into(),
                input_schema: json!({"type": "object"}),
            }],
            max_output_tokens: 0,
        };
        let body = request_body(&request, &settings());
        assert_eq!(
            body,
            json!({
                "model": "claude-test",
                "max_tokens": 1024,
                "stream": true,
                "system": [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}],
                "messages": [
                    {"role": "user", "content": [{"type": "text", "text": "list files"}]},
                    {"role": "assistant", "content": [
                        {"type": "tool_use", "id": "toolu_1", "name": "list_dir", "input": {"path": "."}}
                    ]},
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "no such dir",
                         "is_error": true, "cache_control": {"type": "ephemeral"}}
                    ]}
                ],
                "tools": [{"name": "list_dir", "description": "Lists a directory.",
                           "input_schema": {"type": "object"}}]
            })
        );
    }

    #[test]
    fn debug_output_never_shows_the_key() {
        let client = AnthropicClient::new(settings());
        let debug = format!("{client:?}");
        assert!(!debug.contains("sk-ant-secret"), "{debug}");
        assert_eq!(client.describe(), "anthropic claude-test");
    }
}
