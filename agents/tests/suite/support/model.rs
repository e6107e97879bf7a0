//! Model-client helpers shared by `model_http.rs` and `providers_fake_server.rs`: provider
//! settings pointed at the fake LLM server, collecting a turn, reading its retries, and a proxy
//! that turns the clients' streaming requests into non-streaming ones.

use super::sse_cases::Item;
use ahelper_agents::model::{
    ApiKey, ContentBlock, Message, ModelClient, ModelEvent, ModelRequest, ProviderKind,
    ProviderSettings, Role, StopReason, ToolCall, Usage,
};
use ahelper_fake_llm::{Conversation, FakeLlm, Script, Turn};
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Settings for `kind` at `base_url` with `key`: model `fake-model`, 512 output tokens, 3
/// attempts, a 4–16 ms backoff and a 5 s idle timeout. Tests change what they are about with
/// struct update syntax.
pub fn provider_settings(
    kind: ProviderKind,
    base_url: impl Into<String>,
    key: &str,
) -> ProviderSettings {
    ProviderSettings {
        kind,
        model: "fake-model".into(),
        base_url: base_url.into(),
        api_key: ApiKey(key.into()),
        max_output_tokens: 512,
        context_window: 100_000,
        tool_protocol: Default::default(),
        max_attempts: 3,
        retry_base_delay_ms: 4,
        retry_max_delay_ms: 16,
        idle_timeout_ms: 5_000,
        origin: Default::default(),
    }
}

/// The base URL of `server` for `kind` (OpenAI: the `/v1` base).
pub fn base_url(server: &FakeLlm, kind: ProviderKind) -> String {
    match kind {
        ProviderKind::Anthropic => server.base_url(),
        ProviderKind::Openai => server.openai_base_url(),
    }
}

/// Starts the fake LLM server on 127.0.0.1 with `script`.
pub async fn start(script: Script) -> FakeLlm {
    FakeLlm::start(script)
        .await
        .expect("fake LLM server starts")
}

/// A script with one default conversation playing `turns`.
pub fn script(turns: Vec<Turn>) -> Script {
    Script::new().with_conversation(
        turns
            .into_iter()
            .fold(Conversation::new(), Conversation::turn),
    )
}

/// Every item of one call of `client` with `request`.
pub async fn collect(client: &dyn ModelClient, request: ModelRequest) -> Vec<Item> {
    client.stream(request).collect().await
}

/// A 127.0.0.1 port nothing listens on (the listener that found it is dropped).
pub fn unused_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// An assistant message: `text` (left out when empty), then one tool use per
/// `(id, name, input)`.
pub fn assistant_calls(text: &str, calls: &[(&str, &str, Value)]) -> Message {
    let text = (!text.is_empty()).then(|| ContentBlock::text(text));
    let uses = calls.iter().map(|(id, name, input)| ContentBlock::ToolUse {
        id: id.to_string(),
        name: name.to_string(),
        input: input.clone(),
    });
    Message {
        role: Role::Assistant,
        content: text.into_iter().chain(uses).collect(),
    }
}

/// A user message with one tool result per `(tool_use_id, content, is_error)`.
pub fn tool_results(results: &[(&str, &str, bool)]) -> Message {
    Message {
        role: Role::User,
        content: results
            .iter()
            .map(|(id, content, is_error)| ContentBlock::ToolResult {
                tool_use_id: id.to_string(),
                content: content.to_string(),
                is_error: *is_error,
            })
            .collect(),
    }
}

/// A `ModelEvent::TextDelta`.
pub fn text(t: &str) -> ModelEvent {
    ModelEvent::TextDelta { text: t.into() }
}

/// A `ModelEvent::ToolCall`.
pub fn tool_call(id: &str, name: &str, input: Value) -> ModelEvent {
    ModelEvent::ToolCall(ToolCall {
        id: id.into(),
        name: name.into(),
        input,
    })
}

/// A `ModelEvent::Stop`.
pub fn stop(reason: StopReason) -> ModelEvent {
    ModelEvent::Stop { reason }
}

/// A `ModelEvent::Usage`.
pub fn usage(input_tokens: u64, output_tokens: u64) -> ModelEvent {
    ModelEvent::Usage(Usage {
        input_tokens,
        output_tokens,
        ..Default::default()
    })
}

/// The events after the last `Retry` (what a consumer keeps).
pub fn after_last_retry(items: &[Item]) -> &[Item] {
    let start = items
        .iter()
        .rposition(|i| matches!(i, Ok(ModelEvent::Retry { .. })))
        .map_or(0, |p| p + 1);
    &items[start..]
}

/// `(attempt, max_attempts, delay_ms, reason)` of every `Retry` event.
pub fn retries(items: &[Item]) -> Vec<(u32, u32, u64, String)> {
    items
        .iter()
        .filter_map(|i| match i {
            Ok(ModelEvent::Retry {
                attempt,
                max_attempts,
                delay_ms,
                reason,
            }) => Some((*attempt, *max_attempts, *delay_ms, reason.clone())),
            _ => None,
        })
        .collect()
}

/// Starts a proxy on 127.0.0.1 that forwards each POST to `upstream` (same path) with
/// `"stream": false` and without `stream_options`, so the fake server answers with one
/// `application/json` body, and relays status, `content-type`, `retry-after` and body back with
/// `Connection: close`. Our clients always ask for a stream; this is how their documented
/// handling of a JSON reply is exercised against the fake's non-streaming format. Returns the
/// proxy's base URL (for OpenAI add `/v1`); the proxy task ends with the test's runtime.
pub async fn non_streaming_proxy(upstream: String) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let http = reqwest::Client::new();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            tokio::spawn(proxy_one(socket, http.clone(), upstream.clone()));
        }
    });
    base
}

/// The proxy's base URL for `kind` (OpenAI: the `/v1` base).
pub fn proxy_base_url(proxy: &str, kind: ProviderKind) -> String {
    match kind {
        ProviderKind::Anthropic => proxy.to_string(),
        ProviderKind::Openai => format!("{proxy}/v1"),
    }
}

async fn proxy_one(mut socket: tokio::net::TcpStream, http: reqwest::Client, upstream: String) {
    let mut buf = Vec::new();
    let header_end = loop {
        let mut chunk = [0u8; 4096];
        let n = match socket.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).into_owned();
    let mut lines = head.split("\r\n");
    let path = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .unwrap_or("/")
        .to_string();
    let mut forward = reqwest::header::HeaderMap::new();
    let mut length = 0usize;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let (name, value) = (name.trim().to_ascii_lowercase(), value.trim());
        if name == "content-length" {
            length = value.parse().unwrap_or(0);
        }
        if ["x-api-key", "anthropic-version", "authorization"].contains(&name.as_str()) {
            forward.insert(
                reqwest::header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
        }
    }
    let mut body = buf[header_end..].to_vec();
    while body.len() < length {
        let mut chunk = vec![0u8; length - body.len()];
        match socket.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => body.extend_from_slice(&chunk[..n]),
        }
    }
    let mut json: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if let Some(object) = json.as_object_mut() {
        object.insert("stream".into(), json!(false));
        object.remove("stream_options");
    }
    let Ok(response) = http
        .post(format!("{upstream}{path}"))
        .headers(forward)
        .json(&json)
        .send()
        .await
    else {
        return;
    };
    let status = response.status();
    let mut head = format!(
        "HTTP/1.1 {} {}\r\nconnection: close\r\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or("")
    );
    for name in ["content-type", "retry-after"] {
        if let Some(v) = response.headers().get(name).and_then(|v| v.to_str().ok()) {
            head.push_str(&format!("{name}: {v}\r\n"));
        }
    }
    // A body the fake cut off (drop fault) is relayed as a short read: close without it all.
    let bytes = response.bytes().await.unwrap_or_default();
    head.push_str(&format!("content-length: {}\r\n\r\n", bytes.len()));
    let _ = socket.write_all(head.as_bytes()).await;
    let _ = socket.write_all(&bytes).await;
    let _ = socket.shutdown().await;
}
