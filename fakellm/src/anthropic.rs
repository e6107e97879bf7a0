//! Anthropic Messages API wire format (`POST /v1/messages`).
//!
//! Shapes follow <https://docs.anthropic.com/en/api/messages> (non-streaming body),
//! <https://docs.anthropic.com/en/docs/build-with-claude/streaming> (SSE events) and
//! <https://docs.anthropic.com/en/api/errors> (error bodies).

use bytes::Bytes;
use serde_json::{Value, json};

use crate::reply::{
    Inspection, Reply, anthropic_stop_reason, content_text, messages, split_json, split_words,
    sse_event,
};

/// Reads what the server needs from a Messages request body.
pub(crate) fn inspect(body: &Value) -> Inspection {
    let messages = messages(body);
    let first_user = messages
        .iter()
        .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))
        .and_then(|m| m.get("content"))
        .map(content_text)
        .unwrap_or_default();
    let tool_results = messages
        .iter()
        .filter_map(|m| m.get("content").and_then(Value::as_array))
        .flatten()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
        .count();
    let assistant_messages = messages
        .iter()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
        .count();
    Inspection {
        system: body.get("system").map(content_text).unwrap_or_default(),
        first_user,
        tool_results,
        assistant_messages,
        stream: body.get("stream").and_then(Value::as_bool) == Some(true),
        include_usage: false,
        model: body.get("model").and_then(Value::as_str).map(str::to_owned),
    }
}

fn message_id(reply: &Reply) -> String {
    format!("msg_fake{:06}", reply.serial)
}

/// A `usage` object with `output_tokens` as given (1 in `message_start`).
fn anthropic_usage(usage: crate::script::Usage, output_tokens: u64) -> Value {
    json!({"input_tokens": usage.input_tokens, "output_tokens": output_tokens,
           "cache_creation_input_tokens": usage.cache_write_tokens,
           "cache_read_input_tokens": usage.cache_read_tokens})
}

/// The streamed response: one SSE event per element, ending with `message_stop`.
pub(crate) fn stream_events(reply: &Reply) -> Vec<Bytes> {
    let usage = reply.usage;
    let mut events = vec![sse_event(
        Some("message_start"),
        &json!({"type": "message_start", "message": {
            "id": message_id(reply), "type": "message", "role": "assistant",
            "model": reply.model, "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": anthropic_usage(usage, 1)}}),
    )];
    let mut index = 0;
    let block_start = |events: &mut Vec<Bytes>, index: usize, block: Value| {
        events.push(sse_event(
            Some("content_block_start"),
            &json!({"type": "content_block_start", "index": index, "content_block": block}),
        ));
        if index == 0 {
            events.push(sse_event(Some("ping"), &json!({"type": "ping"})));
        }
    };
    let delta = |index: usize, delta: Value| {
        sse_event(
            Some("content_block_delta"),
            &json!({"type": "content_block_delta", "index": index, "delta": delta}),
        )
    };
    let block_stop = |index: usize| {
        sse_event(
            Some("content_block_stop"),
            &json!({"type": "content_block_stop", "index": index}),
        )
    };
    if !reply.text.is_empty() {
        block_start(&mut events, index, json!({"type": "text", "text": ""}));
        for piece in split_words(&reply.text) {
            events.push(delta(index, json!({"type": "text_delta", "text": piece})));
        }
        events.push(block_stop(index));
        index += 1;
    }
    for (i, call) in reply.tool_calls.iter().enumerate() {
        block_start(
            &mut events,
            index,
            json!({"type": "tool_use", "id": reply.tool_call_id(i, "toolu_"),
                   "name": call.name, "input": {}}),
        );
        events.push(delta(
            index,
            json!({"type": "input_json_delta", "partial_json": ""}),
        ));
        for piece in split_json(&call.arguments.to_string()) {
            events.push(delta(
                index,
                json!({"type": "input_json_delta", "partial_json": piece}),
            ));
        }
        events.push(block_stop(index));
        index += 1;
    }
    events.push(sse_event(
        Some("message_delta"),
        &json!({"type": "message_delta",
                "delta": {"stop_reason": anthropic_stop_reason(reply), "stop_sequence": null},
                "usage": anthropic_usage(usage, usage.output_tokens)}),
    ));
    events.push(sse_event(
        Some("message_stop"),
        &json!({"type": "message_stop"}),
    ));
    events
}

/// The non-streaming response body (a `message` object).
pub(crate) fn json_body(reply: &Reply) -> Value {
    let mut content = Vec::new();
    if !reply.text.is_empty() {
        content.push(json!({"type": "text", "text": reply.text}));
    }
    for (i, call) in reply.tool_calls.iter().enumerate() {
        content.push(
            json!({"type": "tool_use", "id": reply.tool_call_id(i, "toolu_"),
                            "name": call.name, "input": call.arguments}),
        );
    }
    json!({
        "id": message_id(reply), "type": "message", "role": "assistant", "model": reply.model,
        "content": content, "stop_reason": anthropic_stop_reason(reply), "stop_sequence": null,
        "usage": anthropic_usage(reply.usage, reply.usage.output_tokens),
    })
}

/// An error body: `{"type":"error","error":{"type":…,"message":…},"request_id":…}`.
pub(crate) fn error_body(error_type: &str, message: &str, serial: u64) -> Value {
    json!({"type": "error", "error": {"type": error_type, "message": message},
           "request_id": format!("req_fake{serial:06}")})
}

/// A mid-stream `event: error` (ends the stream; no `message_stop` follows).
pub(crate) fn error_event(message: &str, serial: u64) -> Bytes {
    let mut body = error_body("overloaded_error", message, serial);
    body["error"]["details"] = Value::Null;
    sse_event(Some("error"), &body)
}

/// An event whose `data:` line is cut-off JSON.
pub(crate) fn malformed_event() -> Bytes {
    Bytes::from_static(
        b"event: content_block_delta\ndata: {\"type\": \"content_block_delta\", \"index\": 0, \"delta\": {\"type\": \"text_de\n\n",
    )
}
