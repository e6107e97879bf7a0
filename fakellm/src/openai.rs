//! OpenAI Chat Completions wire format (`POST /v1/chat/completions`, `POST /chat/completions`).
//!
//! Shapes follow <https://platform.openai.com/docs/api-reference/chat/create> (response
//! object), <https://platform.openai.com/docs/api-reference/chat/streaming> (chunk object,
//! `stream_options.include_usage`, `data: [DONE]`) and the error object of
//! <https://platform.openai.com/docs/guides/error-codes>.

use bytes::Bytes;
use serde_json::{Value, json};

use crate::reply::{
    Inspection, Reply, content_text, messages, openai_finish_reason, split_json, split_words,
    sse_event,
};

/// Reads what the server needs from a Chat Completions request body.
pub(crate) fn inspect(body: &Value) -> Inspection {
    let messages = messages(body);
    let role = |m: &Value| {
        m.get("role")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let system = messages
        .iter()
        .filter(|m| matches!(role(m).as_str(), "system" | "developer"))
        .filter_map(|m| m.get("content"))
        .map(content_text)
        .collect::<Vec<_>>()
        .join("\n");
    let first_user = messages
        .iter()
        .find(|m| role(m) == "user")
        .and_then(|m| m.get("content"))
        .map(content_text)
        .unwrap_or_default();
    Inspection {
        system,
        first_user,
        tool_results: messages.iter().filter(|m| role(m) == "tool").count(),
        assistant_messages: messages.iter().filter(|m| role(m) == "assistant").count(),
        stream: body.get("stream").and_then(Value::as_bool) == Some(true),
        include_usage: body
            .pointer("/stream_options/include_usage")
            .and_then(Value::as_bool)
            == Some(true),
        model: body.get("model").and_then(Value::as_str).map(str::to_owned),
    }
}

fn completion_id(reply: &Reply) -> String {
    format!("chatcmpl-fake{:06}", reply.serial)
}

fn usage(reply: &Reply) -> Value {
    let u = reply.usage;
    let prompt = u.input_tokens + u.cache_read_tokens + u.cache_write_tokens;
    json!({"prompt_tokens": prompt, "completion_tokens": u.output_tokens,
           "total_tokens": prompt + u.output_tokens,
           "prompt_tokens_details": {"cached_tokens": u.cache_read_tokens}})
}

/// The streamed response: one `data:` event per element, ending with `data: [DONE]`.
/// With `include_usage`, every chunk has `"usage": null` and a last chunk with
/// `"choices": []` carries the usage.
pub(crate) fn stream_events(reply: &Reply, include_usage: bool) -> Vec<Bytes> {
    let chunk = |choices: Value, usage_value: Option<Value>| {
        let mut c = json!({"id": completion_id(reply), "object": "chat.completion.chunk",
            "created": reply.created, "model": reply.model,
            "system_fingerprint": "fp_fakellm", "choices": choices});
        if include_usage {
            c["usage"] = usage_value.unwrap_or(Value::Null);
        }
        sse_event(None, &c)
    };
    let choice = |delta: Value, finish: Value| json!([{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]);
    let first_content = if reply.text.is_empty() {
        Value::Null
    } else {
        json!("")
    };
    let mut events = vec![chunk(
        choice(
            json!({"role": "assistant", "content": first_content, "refusal": null}),
            Value::Null,
        ),
        None,
    )];
    for piece in split_words(&reply.text) {
        events.push(chunk(choice(json!({"content": piece}), Value::Null), None));
    }
    for (i, call) in reply.tool_calls.iter().enumerate() {
        let head = json!({"tool_calls": [{"index": i, "id": reply.tool_call_id(i, "call_"),
            "type": "function", "function": {"name": call.name, "arguments": ""}}]});
        events.push(chunk(choice(head, Value::Null), None));
        for piece in split_json(&call.arguments.to_string()) {
            let delta = json!({"tool_calls": [{"index": i, "function": {"arguments": piece}}]});
            events.push(chunk(choice(delta, Value::Null), None));
        }
    }
    events.push(chunk(
        choice(json!({}), json!(openai_finish_reason(reply))),
        None,
    ));
    if include_usage {
        events.push(chunk(json!([]), Some(usage(reply))));
    }
    events.push(Bytes::from_static(b"data: [DONE]\n\n"));
    events
}

/// The non-streaming response body (a `chat.completion` object).
pub(crate) fn json_body(reply: &Reply) -> Value {
    let mut message = json!({"role": "assistant",
        "content": if reply.text.is_empty() { Value::Null } else { json!(reply.text) },
        "refusal": null});
    if !reply.tool_calls.is_empty() {
        let calls: Vec<Value> = reply
            .tool_calls
            .iter()
            .enumerate()
            .map(|(i, call)| {
                json!({"id": reply.tool_call_id(i, "call_"), "type": "function",
                       "function": {"name": call.name, "arguments": call.arguments.to_string()}})
            })
            .collect();
        message["tool_calls"] = json!(calls);
    }
    json!({"id": completion_id(reply), "object": "chat.completion", "created": reply.created,
           "model": reply.model, "system_fingerprint": "fp_fakellm",
           "choices": [{"index": 0, "message": message, "logprobs": null,
                        "finish_reason": openai_finish_reason(reply)}],
           "usage": usage(reply)})
}

/// An error body: `{"error":{"message":…,"type":…,"param":null,"code":…}}`.
pub(crate) fn error_body(error_type: &str, message: &str, code: Option<&str>) -> Value {
    json!({"error": {"message": message, "type": error_type, "param": null, "code": code}})
}

/// A mid-stream error object, followed by `data: [DONE]` as some compatible servers send.
pub(crate) fn error_events(message: &str) -> Vec<Bytes> {
    vec![
        sse_event(None, &error_body("server_error", message, Some("503"))),
        Bytes::from_static(b"data: [DONE]\n\n"),
    ]
}

/// A `data:` line that is cut-off JSON.
pub(crate) fn malformed_event() -> Bytes {
    Bytes::from_static(
        b"data: {\"id\":\"chatcmpl-malformed\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\n\n",
    )
}
