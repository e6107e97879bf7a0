//! The fake LLM server through real HTTP on 127.0.0.1 with reqwest.

use std::time::{Duration, Instant};

use ahelper_fake_llm::{Conversation, FakeLlm, Fault, FaultKind, Script, Turn, WireFormat};
use bytes::Bytes;
use serde_json::{Value, json};

/// Reads the body chunk by chunk; the error (if any) ends the list.
async fn read_chunks(mut response: reqwest::Response) -> (Vec<Bytes>, Option<reqwest::Error>) {
    let mut out = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => out.push(chunk),
            Ok(None) => return (out, None),
            Err(err) => return (out, Some(err)),
        }
    }
}

/// Parses SSE text into (event name, data) pairs.
fn sse(body: &str) -> Vec<(Option<String>, String)> {
    body.split("\n\n")
        .filter(|block| !block.trim().is_empty())
        .map(|block| {
            let mut event = None;
            let mut data = String::new();
            for line in block.lines() {
                if let Some(e) = line.strip_prefix("event: ") {
                    event = Some(e.to_owned());
                } else if let Some(d) = line.strip_prefix("data: ") {
                    data.push_str(d);
                }
            }
            (event, data)
        })
        .collect()
}

/// The JSON objects of an OpenAI stream body, checking that `data: [DONE]` ends it.
fn openai_chunks(body: &str) -> Vec<Value> {
    let events = sse(body);
    let (done, objects) = events.split_last().expect("events");
    assert_eq!(done.1, "[DONE]");
    objects.iter().map(|(_, d)| json_of(d)).collect()
}

/// The string `v` holds; panics when it is not a string.
fn str_of(v: &Value) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v}"))
}

fn json_of(data: &str) -> Value {
    serde_json::from_str(data).unwrap_or_else(|e| panic!("not JSON ({e}): {data}"))
}

async fn post(url: String, body: Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(url)
        .header("x-api-key", "sk-test")
        .json(&body)
        .send()
        .await
        .expect("request sent")
}

/// GETs `url`.
async fn get(url: String) -> reqwest::Response {
    reqwest::Client::new()
        .get(url)
        .send()
        .await
        .expect("request sent")
}

/// Starts the server with `script`.
async fn start(script: Script) -> FakeLlm {
    FakeLlm::start(script).await.unwrap()
}

/// POSTs `anthropic_request("x", tool_results, stream)` to `server`'s `/v1/messages`.
async fn post_anthropic(server: &FakeLlm, tool_results: usize, stream: bool) -> reqwest::Response {
    let url = format!("{}/v1/messages", server.base_url());
    post(url, anthropic_request("x", tool_results, stream)).await
}

/// POSTs `openai_request("x", tool_results, stream)` to `server`'s `/v1/chat/completions`.
async fn post_openai(server: &FakeLlm, tool_results: usize, stream: bool) -> reqwest::Response {
    let url = format!("{}/chat/completions", server.openai_base_url());
    post(url, openai_request("x", tool_results, stream)).await
}

/// The JSON body of the answer to `post`.
async fn post_json(url: String, body: Value) -> Value {
    post(url, body).await.json().await.expect("a JSON body")
}

/// The JSON body of the answer to a non-streaming `post_anthropic`.
async fn anthropic_json(server: &FakeLlm, tool_results: usize) -> Value {
    let response = post_anthropic(server, tool_results, false).await;
    response.json().await.expect("a JSON body")
}

/// The JSON body of the answer to a non-streaming `post_openai`.
async fn openai_json(server: &FakeLlm, tool_results: usize) -> Value {
    let response = post_openai(server, tool_results, false).await;
    response.json().await.expect("a JSON body")
}

fn anthropic_request(user: &str, tool_results: usize, stream: bool) -> Value {
    let messages = anthropic_messages(user, tool_results);
    json!({"model": "claude-test", "max_tokens": 100, "stream": stream, "messages": messages})
}

/// Anthropic messages: the user message `user`, then `rounds` (tool call `t<i>` of tool `x`,
/// its result `ok`) pairs.
pub(super) fn anthropic_messages(user: &str, rounds: usize) -> Vec<Value> {
    let mut messages = vec![json!({"role": "user", "content": user})];
    for i in 0..rounds {
        messages.push(json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": format!("t{i}"), "name": "x", "input": {}}]}));
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": format!("t{i}"), "content": "ok"}]}));
    }
    messages
}

fn openai_request(user: &str, tool_results: usize, stream: bool) -> Value {
    let mut messages = vec![
        json!({"role": "system", "content": "You are a test."}),
        json!({"role": "user", "content": user}),
    ];
    for i in 0..tool_results {
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": format!("c{i}"), "type": "function", "function": {"name": "x", "arguments": "{}"}}]}));
        messages.push(json!({"role": "tool", "tool_call_id": format!("c{i}"), "content": "ok"}));
    }
    json!({"model": "gpt-test", "stream": stream, "stream_options": {"include_usage": true},
           "messages": messages})
}

fn read_then_answer() -> Script {
    Script::new().with_conversation(
        Conversation::new()
            .turn(
                Turn::text("Let me read the file.")
                    .with_tool_call("read_file", json!({"path": "src/main.rs", "limit": 20}))
                    .with_chunk_delay_ms(3),
            )
            .turn(Turn::text("It prints hello.").with_usage(120, 7)),
    )
}

#[tokio::test]
async fn anthropic_stream_has_the_real_event_sequence_one_event_per_chunk() {
    let server = start(read_then_answer()).await;
    let url = format!("{}/v1/messages", server.base_url());
    let response = post(url, anthropic_request("read main", 0, true)).await;
    assert_eq!(response.status(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    assert_eq!(response.headers()["transfer-encoding"], "chunked");
    let (chunks, err) = read_chunks(response).await;
    assert!(err.is_none());
    for chunk in &chunks {
        let text = std::str::from_utf8(chunk).unwrap();
        assert!(
            text.ends_with("\n\n") && text.matches("data: ").count() == 1,
            "{text:?}"
        );
    }
    let body = String::from_utf8(chunks.concat()).unwrap();
    let events = sse(&body);
    let names: Vec<&str> = events.iter().map(|(e, _)| e.as_deref().unwrap()).collect();
    assert_eq!(names[..3], ["message_start", "content_block_start", "ping"]);
    assert_eq!(names[names.len() - 2..], ["message_delta", "message_stop"]);
    for (event, data) in &events {
        assert_eq!(json_of(data)["type"], event.as_deref().unwrap());
    }
    let start = json_of(&events[0].1);
    assert_eq!(start["message"]["model"], "claude-test");
    assert_eq!(start["message"]["usage"]["output_tokens"], 1);

    let deltas: Vec<Value> = events
        .iter()
        .filter(|(e, _)| e.as_deref() == Some("content_block_delta"))
        .map(|(_, d)| json_of(d))
        .collect();
    let text: String = deltas
        .iter()
        .filter(|d| d["delta"]["type"] == "text_delta")
        .map(|d| d["delta"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, "Let me read the file.");
    let pieces: Vec<&str> = deltas
        .iter()
        .filter(|d| d["delta"]["type"] == "input_json_delta")
        .map(|d| d["delta"]["partial_json"].as_str().unwrap())
        .collect();
    assert_eq!(pieces[0], "");
    assert!(
        pieces.len() >= 4,
        "arguments split over several deltas: {pieces:?}"
    );
    assert!(
        pieces
            .iter()
            .all(|p| serde_json::from_str::<Value>(p).is_err())
    );
    assert_eq!(
        json_of(&pieces.concat()),
        json!({"path": "src/main.rs", "limit": 20})
    );

    let tool_start = events
        .iter()
        .map(|(_, d)| json_of(d))
        .find(|d| d["content_block"]["type"] == "tool_use")
        .unwrap();
    assert_eq!(tool_start["index"], 1);
    assert_eq!(tool_start["content_block"]["name"], "read_file");
    assert!(str_of(&tool_start["content_block"]["id"]).starts_with("toolu_"));
    let delta = json_of(&events[events.len() - 2].1);
    assert_eq!(delta["delta"]["stop_reason"], "tool_use");
    assert!(delta["usage"]["output_tokens"].as_u64().unwrap() > 1);
}

#[tokio::test]
async fn anthropic_non_streaming_message() {
    let server = start(read_then_answer()).await;
    let body = anthropic_json(&server, 0).await;
    assert_eq!(body["type"], "message");
    assert_eq!(
        body["content"][0],
        json!({"type": "text", "text": "Let me read the file."})
    );
    assert_eq!(body["content"][1]["type"], "tool_use");
    assert_eq!(
        body["content"][1]["input"],
        json!({"path": "src/main.rs", "limit": 20})
    );
    assert_eq!(body["stop_reason"], "tool_use");
    let body = anthropic_json(&server, 1).await;
    assert_eq!(body["stop_reason"], "end_turn");
    assert_eq!(
        body["usage"],
        json!({"input_tokens": 120, "output_tokens": 7,
               "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0})
    );
}

#[tokio::test]
async fn openai_stream_has_tool_call_deltas_usage_chunk_and_done() {
    let server = start(read_then_answer()).await;
    let response = post_openai(&server, 0, true).await;
    assert_eq!(response.status(), 200);
    let (chunks, err) = read_chunks(response).await;
    assert!(err.is_none());
    let body = String::from_utf8(chunks.concat()).unwrap();
    assert!(sse(&body).iter().all(|(e, _)| e.is_none()));
    let objects = openai_chunks(&body);
    assert!(
        objects
            .iter()
            .all(|o| o["object"] == "chat.completion.chunk")
    );
    assert_eq!(objects[0]["choices"][0]["delta"]["role"], "assistant");
    let text: String = objects
        .iter()
        .filter_map(|o| o["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(text, "Let me read the file.");
    let calls: Vec<&Value> = objects
        .iter()
        .filter_map(|o| o["choices"][0]["delta"]["tool_calls"].get(0))
        .collect();
    assert!(calls.len() >= 4);
    assert_eq!(calls[0]["index"], 0);
    assert_eq!(calls[0]["type"], "function");
    assert_eq!(calls[0]["function"]["name"], "read_file");
    assert!(calls[0]["id"].as_str().unwrap().starts_with("call_"));
    assert!(
        calls[1..]
            .iter()
            .all(|c| c.get("id").is_none() && c["index"] == 0)
    );
    let arguments: String = calls
        .iter()
        .map(|c| c["function"]["arguments"].as_str().unwrap())
        .collect();
    assert_eq!(
        json_of(&arguments),
        json!({"path": "src/main.rs", "limit": 20})
    );
    let finish = &objects[objects.len() - 2];
    assert_eq!(finish["choices"][0]["finish_reason"], "tool_calls");
    let usage = objects.last().unwrap();
    assert_eq!(usage["choices"], json!([]));
    let u = &usage["usage"];
    assert_eq!(
        u["total_tokens"].as_u64().unwrap(),
        u["prompt_tokens"].as_u64().unwrap() + u["completion_tokens"].as_u64().unwrap()
    );
    assert!(
        objects[..objects.len() - 1]
            .iter()
            .all(|o| o["usage"].is_null())
    );
}

#[tokio::test]
async fn openai_alias_path_without_include_usage_has_no_usage_chunk() {
    let server = start(read_then_answer()).await;
    let mut request = openai_request("x", 1, true);
    request.as_object_mut().unwrap().remove("stream_options");
    let response = post(format!("{}/chat/completions", server.base_url()), request).await;
    let objects = openai_chunks(&response.text().await.unwrap());
    assert!(
        objects
            .iter()
            .all(|o| o.get("usage").is_none() && o["choices"].as_array().unwrap().len() == 1)
    );
    assert_eq!(
        objects.last().unwrap()["choices"][0]["finish_reason"],
        "stop"
    );
}

#[tokio::test]
async fn openai_non_streaming_completion() {
    let server = start(read_then_answer()).await;
    let body = openai_json(&server, 0).await;
    assert_eq!(body["object"], "chat.completion");
    let choice = &body["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    assert_eq!(choice["message"]["content"], "Let me read the file.");
    let call = &choice["message"]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "read_file");
    let arguments = call["function"]["arguments"].as_str().unwrap();
    assert_eq!(
        json_of(arguments),
        json!({"path": "src/main.rs", "limit": 20})
    );
    let body = openai_json(&server, 1).await;
    assert_eq!(
        body["usage"],
        json!({"prompt_tokens": 120, "completion_tokens": 7, "total_tokens": 127,
               "prompt_tokens_details": {"cached_tokens": 0}})
    );
}

fn three_turns() -> Conversation {
    Conversation::new()
        .turn(Turn::text("zero"))
        .turn(Turn::text("one"))
        .turn(Turn::text("two"))
}

#[tokio::test]
async fn turn_is_selected_by_the_number_of_tool_results() {
    let server = start(Script::new().with_conversation(three_turns())).await;
    for (results, expected) in [(0, "zero"), (1, "one"), (2, "two"), (5, "two")] {
        let body = anthropic_json(&server, results).await;
        assert_eq!(
            body["content"][0]["text"], expected,
            "{results} tool results (anthropic)"
        );
        let body = openai_json(&server, results).await;
        assert_eq!(
            body["choices"][0]["message"]["content"], expected,
            "{results} tool results (openai)"
        );
    }
    let turns: Vec<_> = server
        .model_requests()
        .iter()
        .map(|r| (r.tool_results, r.turn))
        .collect();
    assert_eq!(turns[6], (5, Some(2)));
}

#[tokio::test]
async fn fallback_text_plays_after_the_last_turn() {
    let script = Script::new()
        .with_fallback_text("script fallback")
        .with_conversation(
            three_turns()
                .matching("own")
                .with_fallback_text("own fallback"),
        )
        .with_conversation(three_turns());
    let server = start(script).await;
    let url = format!("{}/v1/messages", server.base_url());
    let body = post_json(url.clone(), anthropic_request("own", 3, false)).await;
    assert_eq!(body["content"][0]["text"], "own fallback");
    let body = post_json(url.clone(), anthropic_request("other", 4, false)).await;
    assert_eq!(body["content"][0]["text"], "script fallback");
    assert_eq!(body["stop_reason"], "end_turn");
    assert_eq!(server.model_requests()[1].turn, Some(3));
}

#[tokio::test]
async fn match_picks_the_conversation_by_system_prompt_or_first_user_message() {
    let script = Script::new()
        .with_conversation(
            Conversation::new()
                .named("sys")
                .matching("ROLE-A")
                .turn(Turn::text("a")),
        )
        .with_conversation(
            Conversation::new()
                .named("user")
                .matching("task 7")
                .turn(Turn::text("b")),
        );
    let server = start(script).await;
    let url = format!("{}/v1/messages", server.base_url());
    let mut request = anthropic_request("do task 7", 0, false);
    let body = post_json(url.clone(), request.clone()).await;
    assert_eq!(body["content"][0]["text"], "b");
    request["system"] = json!([{"type": "text", "text": "You are ROLE-A."}]);
    let body = post_json(url.clone(), request).await;
    assert_eq!(body["content"][0]["text"], "a");

    let mut request = openai_request("nothing here", 0, false);
    request["messages"][0]["content"] = json!("I am ROLE-A");
    let url_oa = format!("{}/chat/completions", server.openai_base_url());
    let body = post_json(url_oa, request).await;
    assert_eq!(body["choices"][0]["message"]["content"], "a");

    // Only the first user message counts.
    let mut request = anthropic_request("unrelated", 0, false);
    request["messages"]
        .as_array_mut()
        .unwrap()
        .push(json!({"role": "user", "content": "task 7"}));
    let response = post(url, request).await;
    assert_eq!(response.status(), 400);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["error"]["type"], "invalid_request_error");
    assert!(str_of(&error["error"]["message"]).contains("no conversation"));
    assert_eq!(server.conversation_counts(), vec![2, 1]);
}

fn faulty(fault: Fault) -> Script {
    Script::new().with_conversation(
        Conversation::new().turn(
            Turn::text("one two three four five six")
                .with_tool_call("grep", json!({"pattern": "fn main"}))
                .with_fault(fault),
        ),
    )
}

#[tokio::test]
async fn http_429_carries_retry_after_and_the_retry_succeeds() {
    let server = start(faulty(Fault::new(FaultKind::Http429).retry_after(2))).await;
    let response = post_anthropic(&server, 0, true).await;
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["retry-after"], "2");
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["type"], "rate_limit_error");
    let response = post_anthropic(&server, 0, true).await;
    assert_eq!(response.status(), 200);
    assert!(response.text().await.unwrap().contains("message_stop"));
    let faults: Vec<_> = server.model_requests().iter().map(|r| r.fault).collect();
    assert_eq!(faults, vec![Some(FaultKind::Http429), None]);
}

#[tokio::test]
async fn http_error_faults_have_their_status_and_error_type() {
    let cases = [
        (FaultKind::Http500, 500, "api_error", "server_error"),
        (
            FaultKind::Http529,
            529,
            "overloaded_error",
            "overloaded_error",
        ),
        (
            FaultKind::Http400,
            400,
            "invalid_request_error",
            "invalid_request_error",
        ),
        (
            FaultKind::Http401,
            401,
            "authentication_error",
            "invalid_request_error",
        ),
    ];
    for (kind, status, anthropic_type, openai_type) in cases {
        let server = start(faulty(Fault::new(kind).times(2))).await;
        let response = post_anthropic(&server, 0, true).await;
        assert_eq!(response.status().as_u16(), status);
        assert!(response.headers().get("retry-after").is_none());
        let body: Value = response.json().await.unwrap();
        assert_eq!(
            (body["type"].as_str(), body["error"]["type"].as_str()),
            (Some("error"), Some(anthropic_type))
        );
        let response = post_openai(&server, 0, true).await;
        assert_eq!(response.status().as_u16(), status);
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["type"], openai_type);
        assert!(str_of(&body["error"]["message"]).contains("fault injected"));
        // times = 2: both requests above failed, the third plays the turn.
        assert_eq!(post_openai(&server, 0, true).await.status(), 200);
    }
}

#[tokio::test]
async fn drop_mid_stream_is_a_body_error_not_a_clean_eof() {
    let server = start(faulty(Fault::new(FaultKind::DropMidStream).after_chunks(3))).await;
    let response = post_anthropic(&server, 0, true).await;
    assert_eq!(response.status(), 200);
    let (chunks, err) = read_chunks(response).await;
    assert_eq!(chunks.concat(), sse_prefix(&chunks, 3));
    let err = err.expect("a body error, not a clean EOF");
    assert!(err.is_body() || err.is_decode(), "{err:?}");
    // Next request plays normally (times = 1), on a fresh connection.
    let response = post_anthropic(&server, 0, true).await;
    assert!(response.text().await.unwrap().contains("message_stop"));

    // Non-streaming: half a JSON body, then the connection drops.
    let server = start(faulty(Fault::new(FaultKind::DropMidStream))).await;
    let result = post_openai(&server, 0, false).await.bytes().await;
    assert!(result.is_err(), "{result:?}");
}

/// The first `n` SSE events of a streamed body, checking that exactly `n` arrived.
fn sse_prefix(chunks: &[Bytes], n: usize) -> Vec<u8> {
    let body = String::from_utf8(chunks.concat()).unwrap();
    assert_eq!(sse(&body).len(), n, "{body}");
    body.into_bytes()
}

#[tokio::test]
async fn malformed_line_is_a_data_line_that_is_not_json() {
    for format in [WireFormat::Anthropic, WireFormat::OpenAi] {
        let server = start(faulty(Fault::new(FaultKind::MalformedLine).after_chunks(2))).await;
        let response = match format {
            WireFormat::Anthropic => post_anthropic(&server, 0, true).await,
            WireFormat::OpenAi => post_openai(&server, 0, true).await,
        };
        let events = sse(&response.text().await.unwrap());
        let bad: Vec<usize> = events
            .iter()
            .enumerate()
            .filter(|(_, (_, d))| d != "[DONE]" && serde_json::from_str::<Value>(d).is_err())
            .map(|(i, _)| i)
            .collect();
        assert_eq!(bad, vec![2], "{format:?}");
        let last = &events.last().unwrap().1;
        assert!(
            last == "[DONE]" || last.contains("message_stop"),
            "stream continues after the bad line"
        );
    }
}

#[tokio::test]
async fn stall_holds_the_stream_until_the_client_times_out() {
    let fault = Fault::new(FaultKind::Stall).stall_ms(30_000);
    let server = start(faulty(fault)).await;
    let client = reqwest::Client::builder()
        .read_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let started = Instant::now();
    let response = client
        .post(format!("{}/v1/messages", server.base_url()))
        .json(&anthropic_request("x", 0, true))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let (chunks, err) = read_chunks(response).await;
    assert_eq!(sse(std::str::from_utf8(&chunks.concat()).unwrap()).len(), 1);
    assert!(err.expect("timeout").is_timeout());
    assert!(started.elapsed() < Duration::from_secs(5));
    // Shutting down with the stalled connection open returns at once.
    server.shutdown();
}

#[tokio::test]
async fn error_event_arrives_after_http_200() {
    let server = start(faulty(Fault::new(FaultKind::ErrorEvent).times(2))).await;
    let response = post_anthropic(&server, 0, true).await;
    assert_eq!(response.status(), 200);
    let events = sse(&response.text().await.unwrap());
    let (name, data) = events.last().unwrap();
    assert_eq!(name.as_deref(), Some("error"));
    assert_eq!(json_of(data)["error"]["type"], "overloaded_error");
    assert_eq!(events.len(), 3);
    assert!(
        !events
            .iter()
            .any(|(e, _)| e.as_deref() == Some("message_stop"))
    );

    let events = sse(&post_openai(&server, 0, true).await.text().await.unwrap());
    assert_eq!(events.last().unwrap().1, "[DONE]");
    let error = json_of(&events[events.len() - 2].1);
    assert_eq!(
        error["error"]["message"],
        "engine queue is full, request rejected"
    );
    assert!(
        !events
            .iter()
            .any(|(_, d)| d.contains("finish_reason\":\"tool_calls"))
    );
}

#[tokio::test]
async fn raw_sse_file_is_replayed_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("cases")).unwrap();
    let raw = "event: message_start\r\ndata: {\"type\":\"message_start\"}\r\n\r\n: keepalive\n\ndata:{\"no\":\"space\"}\n\n";
    std::fs::write(dir.path().join("cases/x.sse"), raw).unwrap();
    let script_path = dir.path().join("script.json");
    let script = json!({"conversations": [{"turns": [
        {"raw_sse": "cases/x.sse", "chunk_delay_ms": 2},
        {"raw_sse_inline": "data: [DONE]\n\n"},
        {"raw_sse": "cases/x.sse", "raw_chunk_bytes": 5},
        {"raw_sse": "cases/x.sse", "raw_chunk_seed": 3, "raw_chunk_bytes": 4, "chunk_delay_ms": 1}
    ]}]});
    std::fs::write(&script_path, script.to_string()).unwrap();
    let server = start(Script::from_file(&script_path).unwrap()).await;
    // Non-streaming request: the raw body is still what is sent.
    let response = post_anthropic(&server, 0, false).await;
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let (chunks, err) = read_chunks(response).await;
    assert!(err.is_none());
    assert_eq!(chunks.len(), 3, "one chunk per event");
    assert_eq!(chunks.concat(), raw.as_bytes());
    let body = post_anthropic(&server, 1, true)
        .await
        .bytes()
        .await
        .unwrap();
    assert_eq!(&body[..], b"data: [DONE]\n\n");
    let body = post_anthropic(&server, 2, true)
        .await
        .bytes()
        .await
        .unwrap();
    assert_eq!(&body[..], raw.as_bytes());
    let (chunks, err) = read_chunks(post_anthropic(&server, 3, true).await).await;
    assert!(err.is_none());
    assert_eq!(chunks.concat(), raw.as_bytes());
    assert!(
        chunks.len() >= raw.len() / 4,
        "small random cuts: {}",
        chunks.len()
    );

    std::fs::remove_file(dir.path().join("cases/x.sse")).unwrap();
    let err = Script::from_file(&script_path).unwrap_err().to_string();
    assert!(
        err.contains("x.sse") && err.contains("does not exist"),
        "{err}"
    );
}

#[tokio::test]
async fn every_request_is_recorded() {
    let server = start(read_then_answer()).await;
    let client = reqwest::Client::new();
    let health = get(format!("{}/health", server.base_url())).await;
    assert_eq!(
        health.json::<Value>().await.unwrap(),
        json!({"status": "ok"})
    );
    let request = anthropic_request("hello", 1, true);
    client
        .post(format!("{}/v1/messages?beta=true", server.base_url()))
        .header("x-api-key", "sk-secret")
        .header("anthropic-version", "2023-06-01")
        .json(&request)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        (requests[0].method.as_str(), requests[0].path.as_str()),
        ("GET", "/health")
    );
    assert_eq!(requests[0].format, None);
    let r = &requests[1];
    assert_eq!(
        (r.method.as_str(), r.path.as_str(), r.query.as_deref()),
        ("POST", "/v1/messages", Some("beta=true"))
    );
    assert_eq!(r.header("X-Api-Key"), Some("sk-secret"));
    assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(r.body, request);
    assert_eq!(
        serde_json::from_slice::<Value>(&r.body_bytes).unwrap(),
        request
    );
    assert_eq!(
        (r.format, r.stream, r.tool_results),
        (Some(WireFormat::Anthropic), true, 1)
    );
    assert_eq!((r.conversation, r.turn, r.serial), (Some(0), Some(1), 2));
    assert!(r.received >= requests[0].received && r.received_at >= requests[0].received_at);
    assert_eq!(server.model_requests().len(), 1);
    assert_eq!(server.conversation_counts(), vec![1]);
}

#[tokio::test]
async fn models_health_and_unknown_paths() {
    let mut script = read_then_answer();
    script.model = Some("tiny-model".into());
    let server = start(script).await;
    let client = reqwest::Client::new();
    let models: Value = get(format!("{}/models", server.openai_base_url()))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(models["data"][0]["id"], "tiny-model");
    let response = get(format!("{}/v2/whatever", server.base_url())).await;
    assert_eq!(response.status(), 404);
    let response = get(format!("{}/v1/messages", server.base_url())).await;
    assert_eq!(response.status(), 405);
    let response = client
        .post(format!("{}/v1/messages", server.base_url()))
        .body("not json")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    // A request without `model` gets the script's model name.
    let body = post_json(
        format!("{}/v1/messages", server.base_url()),
        json!({"messages": []}),
    )
    .await;
    assert_eq!(body["model"], "tiny-model");
}

#[tokio::test]
async fn latency_and_turn_delay_are_added_before_the_response() {
    let script = Script::new()
        .with_latency_ms(1_500)
        .with_conversation(Conversation::new().turn(Turn::text("slow").with_delay_ms(50)));
    let server = start(script).await;
    let client = reqwest::Client::new();
    let url = format!("{}/v1/messages", server.base_url());
    let started = Instant::now();
    let response = client
        .post(url)
        .json(&anthropic_request("x", 0, false))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(started.elapsed() >= Duration::from_millis(1_550));
    let started = Instant::now();
    let health = get(format!("{}/health", server.base_url())).await;
    assert_eq!(health.status(), 200);
    assert!(
        started.elapsed() < Duration::from_millis(1_000),
        "health is not delayed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_parallel_requests_are_served_concurrently() {
    let mut script = Script::new().with_latency_ms(200);
    for i in 0..20 {
        script =
            script.with_conversation(Conversation::new().matching(format!("worker {i}:")).turn(
                Turn::text(format!("answer {i}")).with_tool_call("list_dir", json!({"path": "."})),
            ));
    }
    let server = start(script).await;
    let started = Instant::now();
    let tasks: Vec<_> = (0..20)
        .map(|i| {
            let anthropic = format!("{}/v1/messages", server.base_url());
            let openai = format!("{}/chat/completions", server.openai_base_url());
            tokio::spawn(async move {
                let prompt = format!("worker {i}: go");
                let (url, request) = if i % 2 == 0 {
                    (anthropic, anthropic_request(&prompt, 0, true))
                } else {
                    (openai, openai_request(&prompt, 0, true))
                };
                post(url, request).await.text().await.unwrap()
            })
        })
        .collect();
    for (i, task) in tasks.into_iter().enumerate() {
        let body = task.await.unwrap();
        let text: String = sse(&body)
            .iter()
            .filter(|(_, d)| d != "[DONE]")
            .filter_map(|(_, d)| {
                let v = json_of(d);
                v["delta"]["text"]
                    .as_str()
                    .or(v["choices"][0]["delta"]["content"].as_str())
                    .map(str::to_owned)
            })
            .collect();
        assert_eq!(text, format!("answer {i}"));
    }
    // Serial handling would take 20 × 200 ms = 4 s.
    assert!(
        started.elapsed() < Duration::from_millis(3_000),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(server.conversation_counts(), vec![1; 20]);
}

#[tokio::test]
async fn the_log_records_when_each_reply_ended_streaming_or_not() {
    let server = start(read_then_answer()).await;
    let before = std::time::Instant::now();
    for stream in [true, false] {
        let response = post_anthropic(&server, 0, stream).await;
        let (_chunks, error) = read_chunks(response).await;
        assert!(
            error.is_none(),
            "the reply (stream: {stream}) reads to its end"
        );
    }
    let requests = server.model_requests();
    assert_eq!(requests.len(), 2);
    for r in &requests {
        let replied = r
            .replied
            .unwrap_or_else(|| panic!("request {} has no reply end", r.serial));
        assert!(
            replied >= r.received && r.received >= before,
            "request {}",
            r.serial
        );
    }
    // The streamed reply is several chunks 3 ms apart: it ended after the first gap at least.
    let streamed = &requests[0];
    assert!(streamed.replied.unwrap() - streamed.received >= std::time::Duration::from_millis(3));
}

#[tokio::test]
async fn model_requests_since_a_count_and_forgotten_requests() {
    let server = start(read_then_answer()).await;
    anthropic_json(&server, 0).await;
    get(format!("{}/v1/models", server.base_url())).await;
    let before = server.model_request_count();
    assert_eq!(before, 1, "the models listing is not a model request");
    anthropic_json(&server, 1).await;
    let since = server.model_requests_since(before);
    assert_eq!(since.len(), 1);
    assert_eq!((since[0].tool_results, since[0].turn), (1, Some(1)));

    server.forget_requests();
    assert_eq!(server.model_request_count(), 0);
    assert!(server.requests().is_empty());
    assert_eq!(server.conversation_counts(), vec![2], "the counts are kept");
    // The script plays on where it was: the next request is recorded afresh.
    let body = anthropic_json(&server, 1).await;
    assert_eq!(body["content"][0]["text"], "It prints hello.");
    assert_eq!(server.model_requests()[0].tool_results, 1);
}
