//! Both HTTP providers (`AnthropicClient`, `OpenAiClient`, built with `model::build_client`)
//! and the text tool protocol through the real HTTP path against the scripted fake LLM server
//! (`ahelper-fake-llm`) on 127.0.0.1:
//!
//! - streaming text and tool-call turns (arguments split mid-JSON by the server) give exact
//!   [`ModelEvent`]s, and the request bodies the server recorded carry the system prompt, tools,
//!   tool calls and tool results in each API's wire shape;
//! - non-streaming replies (`application/json`), obtained by a small proxy that turns the
//!   client's `"stream": true` into `false` so the fake answers with one JSON body;
//! - every `.sse` case file replayed over HTTP whole, byte by byte and in seeded random chunks
//!   gives the result its `INDEX.md` row states (expectations shared with `model_sse_cases.rs`);
//! - retries driven by injected faults (429 + `retry-after`, 529, 500, dropped connection,
//!   error event, stall past the idle timeout), no retry on 400/401 or a malformed line, and the
//!   attempt bound;
//! - the text tool protocol over OpenAI-compatible HTTP;
//! - the API key never appears in an error, even when the server echoes it back.

use super::support::model::{
    after_last_retry, assistant_calls, base_url, collect, non_streaming_proxy, provider_settings,
    proxy_base_url, retries, script, start, stop, text, tool_call, tool_results, unused_port,
    usage,
};
use super::support::sse_cases::{
    Item, LOCAL_DIR, case_path, check_by_hand, expected, sse_files, summarise,
};
use ahelper_agents::model::text_protocol::TextToolProtocol;
use ahelper_agents::model::{
    Message, ModelClient, ModelError, ModelEvent, ModelRequest, ProviderKind, ProviderSettings,
    StopReason, ToolSpec, build_client,
};
use ahelper_fake_llm::{Conversation, FakeLlm, Fault, FaultKind, RecordedRequest, Script, Turn};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

const KEY: &str = "sk-test-secret-123";
const SYSTEM: &str = "You are a careful coding assistant working in /work/demo.";
const PROMPT: &str = "Read src/lib.rs and tell me what it does.";
const BOTH: [ProviderKind; 2] = [ProviderKind::Anthropic, ProviderKind::Openai];

// ---------------------------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------------------------

fn tools() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: "read_file".into(),
            description: "Reads a text file of the workspace; returns numbered lines.".into(),
            input_schema: json!({"type": "object",
                "properties": {"path": {"type": "string"}, "offset": {"type": "integer"}},
                "required": ["path"]}),
        },
        ToolSpec {
            name: "list_dir".into(),
            description: "Lists a directory of the workspace.".into(),
            input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        },
    ]
}

fn request() -> ModelRequest {
    ModelRequest {
        model: String::new(),
        system_shared_len: 0,
        system: SYSTEM.into(),
        messages: vec![Message::user_text(PROMPT)],
        tools: tools(),
        max_output_tokens: 0,
    }
}

/// Settings for `kind` pointed at `server` (OpenAI: the `/v1` base), 3 attempts, fast backoff.
fn settings(server: &FakeLlm, kind: ProviderKind) -> ProviderSettings {
    provider_settings(kind, base_url(server, kind), KEY)
}

/// Plays `turn` for one request of `kind`; returns the server and the events, which must hold
/// no error.
async fn play(kind: ProviderKind, turn: Turn) -> (FakeLlm, Vec<ModelEvent>) {
    let server = start(script(vec![turn])).await;
    let client = build_client(&settings(&server, kind));
    let got = ok(collect(client.as_ref(), request()).await);
    (server, got)
}

fn ok(items: Vec<Item>) -> Vec<ModelEvent> {
    items
        .into_iter()
        .map(|i| i.unwrap_or_else(|e| panic!("unexpected error {e:?}")))
        .collect()
}

/// The events a streamed turn of `words` (text as the fake splits it) with usage `(input,
/// output)` gives: Anthropic reports `output_tokens: 1` in `message_start`, then the cumulative
/// usage in `message_delta`; OpenAI sends usage once, in the `include_usage` chunk; tool calls
/// come after the usage in both (they are emitted at the terminal event).
fn streamed_turn(
    kind: ProviderKind,
    words: &[&str],
    (input, output): (u64, u64),
    calls: Vec<ModelEvent>,
    reason: StopReason,
) -> Vec<ModelEvent> {
    let mut events = Vec::new();
    if kind == ProviderKind::Anthropic {
        events.push(usage(input, 1));
    }
    events.extend(words.iter().map(|w| text(w)));
    events.push(usage(input, output));
    events.extend(calls);
    events.push(stop(reason));
    events
}

// ---------------------------------------------------------------------------------------------
// 1. Streaming turns and request wire shapes
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn streamed_text_turns_give_exact_events_on_both_providers() {
    for kind in BOTH {
        let turn = Turn::text("Hello big world, nothing to do.").with_usage(120, 7);
        let (server, got) = play(kind, turn).await;
        assert_eq!(
            got,
            streamed_turn(
                kind,
                &["Hello", " big", " world,", " nothing", " to", " do."],
                (120, 7),
                vec![],
                StopReason::EndTurn
            ),
            "{kind:?}"
        );
        let sent = server.model_requests();
        assert_eq!(sent.len(), 1, "{kind:?}");
        assert!(sent[0].stream, "{kind:?}: the clients stream");
    }
}

#[tokio::test]
async fn streamed_tool_calls_split_mid_json_are_assembled_exactly() {
    let args = json!({"path": "src/lib.rs", "offset": 10, "note": "a \"quoted\" value ✓"});
    for kind in BOTH {
        let turn = Turn::text("Let me read it.")
            .with_tool_call_id("call_read_1", "read_file", args.clone())
            .with_tool_call_id("call_list_2", "list_dir", json!({"path": "src"}))
            .with_usage(300, 42);
        let (_server, got) = play(kind, turn).await;
        assert_eq!(
            got,
            streamed_turn(
                kind,
                &["Let", " me", " read", " it."],
                (300, 42),
                vec![
                    tool_call("call_read_1", "read_file", args.clone()),
                    tool_call("call_list_2", "list_dir", json!({"path": "src"})),
                ],
                StopReason::ToolUse
            ),
            "{kind:?}"
        );
    }
}

/// The premise of the test above: the fake really cuts tool arguments into pieces that are not
/// JSON on their own (checked on the raw SSE body, read without our clients).
#[tokio::test]
async fn the_fake_server_really_splits_tool_arguments_mid_json() {
    let server = start(script(vec![Turn::tool_call(
        "read_file",
        json!({"path": "src/lib.rs", "offset": 10}),
    )]))
    .await;
    let url = format!("{}/v1/messages", server.base_url());
    let request = json!({"model": "m", "max_tokens": 10, "stream": true,
                         "messages": [{"role": "user", "content": "hi"}]});
    let response = reqwest::Client::new().post(url).json(&request).send();
    let body = response.await.unwrap().text().await.unwrap();
    let pieces: Vec<String> = body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|v| v["delta"]["partial_json"].as_str().map(str::to_string))
        .filter(|p| !p.is_empty())
        .collect();
    assert!(pieces.len() >= 3, "{pieces:?}");
    assert!(
        pieces
            .iter()
            .all(|p| serde_json::from_str::<Value>(p).is_err()),
        "every piece is cut mid-JSON: {pieces:?}"
    );
}

/// A two-round conversation: the model calls two tools, the client sends both results (one an
/// error) back, and the model answers. The second request body is checked against each API's
/// documented shape.
#[tokio::test]
async fn tool_results_round_trip_in_each_apis_wire_shape() {
    let read_args = json!({"path": "src/lib.rs", "offset": 10});
    for kind in BOTH {
        let server = start(script(vec![
            Turn::text("Let me look.")
                .with_tool_call_id("call_read_1", "read_file", read_args.clone())
                .with_tool_call_id("call_list_2", "list_dir", json!({"path": "missing"})),
            Turn::text("unused: one result"),
            Turn::text("It prints hello.").with_usage(900, 5),
        ]))
        .await;
        let client = build_client(&settings(&server, kind));
        let first = ok(collect(client.as_ref(), request()).await);
        assert_eq!(
            first
                .iter()
                .filter(|e| matches!(e, ModelEvent::ToolCall(_)))
                .count(),
            2
        );

        let mut second = request();
        second.messages.push(assistant_calls(
            "Let me look.",
            &[
                ("call_read_1", "read_file", read_args.clone()),
                ("call_list_2", "list_dir", json!({"path": "missing"})),
            ],
        ));
        second.messages.push(tool_results(&[
            (
                "call_read_1",
                "10\tfn main() { println!(\"hello\"); }",
                false,
            ),
            ("call_list_2", "no such directory: missing", true),
        ]));
        let answer = ok(collect(client.as_ref(), second).await);
        assert_eq!(
            answer,
            streamed_turn(
                kind,
                &["It", " prints", " hello."],
                (900, 5),
                vec![],
                StopReason::EndTurn
            ),
            "{kind:?}"
        );

        let sent = server.model_requests();
        assert_eq!(sent.len(), 2);
        assert_eq!(sent[1].tool_results, 2, "{kind:?}: the fake counted both");
        assert_eq!(sent[1].turn, Some(2));
        match kind {
            ProviderKind::Anthropic => check_anthropic_request(&sent[1], &read_args),
            ProviderKind::Openai => check_openai_request(&sent[1], &read_args),
        }
    }
}

fn check_anthropic_request(r: &RecordedRequest, read_args: &Value) {
    assert_eq!(
        (r.method.as_str(), r.path.as_str()),
        ("POST", "/v1/messages")
    );
    assert_eq!(r.header("x-api-key"), Some(KEY));
    assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(
        r.header("authorization"),
        None,
        "the key goes in x-api-key only"
    );
    let b = &r.body;
    assert_eq!(b["model"], "fake-model");
    assert_eq!(b["max_tokens"], 512);
    assert_eq!(b["stream"], true);
    assert_eq!(
        b["system"],
        json!([{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}])
    );
    assert_eq!(
        b["tools"],
        json!(
            tools()
                .iter()
                .map(|t| json!({"name": t.name, "description": t.description,
                            "input_schema": t.input_schema}))
                .collect::<Vec<_>>()
        )
    );
    assert_eq!(
        b["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": PROMPT}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "call_read_1", "name": "read_file", "input": read_args},
                {"type": "tool_use", "id": "call_list_2", "name": "list_dir",
                 "input": {"path": "missing"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_read_1",
                 "content": "10\tfn main() { println!(\"hello\"); }"},
                {"type": "tool_result", "tool_use_id": "call_list_2",
                 "content": "no such directory: missing", "is_error": true,
                 "cache_control": {"type": "ephemeral"}},
            ]},
        ])
    );
}

fn check_openai_request(r: &RecordedRequest, read_args: &Value) {
    assert_eq!(
        (r.method.as_str(), r.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(r.header("authorization"), Some(&*format!("Bearer {KEY}")));
    assert_eq!(r.header("x-api-key"), None);
    let b = &r.body;
    assert_eq!(b["model"], "fake-model");
    assert_eq!(b["max_tokens"], 512);
    assert_eq!(b["stream"], true);
    assert_eq!(b["stream_options"], json!({"include_usage": true}));
    assert_eq!(
        b["tools"],
        json!(
            tools()
                .iter()
                .map(|t| json!({"type": "function", "function": {"name": t.name,
                "description": t.description, "parameters": t.input_schema}}))
                .collect::<Vec<_>>()
        )
    );
    let messages = b["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 5, "{messages:#?}");
    assert_eq!(messages[0], json!({"role": "system", "content": SYSTEM}));
    assert_eq!(messages[1], json!({"role": "user", "content": PROMPT}));
    let assistant = &messages[2];
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(assistant["content"], "Let me look.");
    let calls = assistant["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2);
    for (call, (id, name, args)) in calls.iter().zip([
        ("call_read_1", "read_file", read_args.clone()),
        ("call_list_2", "list_dir", json!({"path": "missing"})),
    ]) {
        assert_eq!(call["id"], id);
        assert_eq!(call["type"], "function");
        assert_eq!(call["function"]["name"], name);
        let arguments = call["function"]["arguments"]
            .as_str()
            .expect("arguments are a JSON string");
        assert_eq!(serde_json::from_str::<Value>(arguments).unwrap(), args);
    }
    assert_eq!(
        messages[3],
        json!({"role": "tool", "tool_call_id": "call_read_1",
               "content": "10\tfn main() { println!(\"hello\"); }"})
    );
    assert_eq!(
        messages[4],
        json!({"role": "tool", "tool_call_id": "call_list_2",
               "content": "Error: no such directory: missing"})
    );
}

// ---------------------------------------------------------------------------------------------
// 2. Non-streaming replies
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn non_streaming_json_replies_give_the_same_turn() {
    let args = json!({"path": "src/lib.rs"});
    for kind in BOTH {
        let server = start(script(vec![
            Turn::text("Let me read it.")
                .with_tool_call_id("call_r", "read_file", args.clone())
                .with_usage(77, 9),
        ]))
        .await;
        let proxy = non_streaming_proxy(server.base_url()).await;
        let client = build_client(&provider_settings(kind, proxy_base_url(&proxy, kind), KEY));
        let got = ok(collect(client.as_ref(), request()).await);
        // A JSON reply arrives whole: one text delta; usage before the text for Anthropic
        // (`usage` is read first), after it for OpenAI (as in a stream's usage chunk).
        let expected = match kind {
            ProviderKind::Anthropic => vec![
                usage(77, 9),
                text("Let me read it."),
                tool_call("call_r", "read_file", args.clone()),
                stop(StopReason::ToolUse),
            ],
            ProviderKind::Openai => vec![
                text("Let me read it."),
                usage(77, 9),
                tool_call("call_r", "read_file", args.clone()),
                stop(StopReason::ToolUse),
            ],
        };
        assert_eq!(got, expected, "{kind:?}");
        let sent = server.model_requests();
        assert_eq!(sent.len(), 1);
        assert!(
            !sent[0].stream,
            "{kind:?}: the fake saw a non-streaming request"
        );
        assert_eq!(
            sent[0].header("x-api-key").is_some(),
            kind == ProviderKind::Anthropic,
            "the proxy forwarded the client's own headers"
        );
    }
}

#[tokio::test]
async fn a_non_streaming_error_object_after_200_is_retried() {
    for kind in BOTH {
        let server = start(script(vec![
            Turn::text("Fine now.")
                .with_usage(5, 2)
                .with_fault(Fault::new(FaultKind::ErrorEvent)),
        ]))
        .await;
        let proxy = non_streaming_proxy(server.base_url()).await;
        let client = build_client(&provider_settings(kind, proxy_base_url(&proxy, kind), KEY));
        let got = collect(client.as_ref(), request()).await;
        let r = retries(&got);
        assert_eq!(r.len(), 1, "{kind:?}: {got:?}");
        let expected_reason = match kind {
            ProviderKind::Anthropic => "overloaded_error: Overloaded",
            ProviderKind::Openai => "server_error: engine queue is full, request rejected",
        };
        assert_eq!(r[0].3, expected_reason);
        assert!(
            matches!(got[0], Ok(ModelEvent::Retry { .. })),
            "nothing before the error: {got:?}"
        );
        assert_eq!(
            after_last_retry(&got).last(),
            Some(&Ok(stop(StopReason::EndTurn)))
        );
        assert_eq!(server.model_requests().len(), 2);
    }
}

// ---------------------------------------------------------------------------------------------
// 3. Every .sse case file replayed over HTTP
// ---------------------------------------------------------------------------------------------

/// How the fake cuts the replayed body into HTTP chunks.
#[derive(Debug, Clone, Copy)]
enum Cut {
    /// One SSE event per chunk (the fake's default).
    Events,
    /// One byte per chunk.
    Bytes,
    /// Seeded random sizes in `1..=max`.
    Random { seed: u64, max: usize },
}

const CUTS: [Cut; 5] = [
    Cut::Events,
    Cut::Bytes,
    Cut::Random { seed: 7, max: 16 },
    Cut::Random { seed: 42, max: 5 },
    Cut::Random {
        seed: 1234,
        max: 97,
    },
];

/// The replay turn of case file `name` (absolute path) cut as `cut`.
fn replay_turn(name: &str, cut: Cut) -> Turn {
    let turn = Turn::new().with_raw_sse(case_path(name));
    match cut {
        Cut::Events => turn,
        Cut::Bytes => turn.with_raw_chunk_bytes(1),
        Cut::Random { seed, max } => turn.with_raw_chunk_seed(seed).with_raw_chunk_bytes(max),
    }
}

/// The user message that selects the conversation replaying `name` cut as `CUTS[cut]`.
fn replay_marker(name: &str, cut: usize) -> String {
    format!("replay {name} cut {cut}")
}

/// Renumbers locally generated tool call ids (`call_local_<n>`) from 1 in order of appearance:
/// the counter belongs to the client, which is shared by all replays here (building a reqwest
/// client per replay would dominate the test's time).
fn renumber_local_ids(items: Vec<Item>) -> Vec<Item> {
    let mut seen: Vec<String> = Vec::new();
    let mut renumber = |id: &mut String| {
        if id.starts_with("call_local_") {
            let n = match seen.iter().position(|s| s == id) {
                Some(p) => p + 1,
                None => {
                    seen.push(id.clone());
                    seen.len()
                }
            };
            *id = format!("call_local_{n}");
        }
    };
    items
        .into_iter()
        .map(|item| {
            item.map(|mut event| {
                match &mut event {
                    ModelEvent::ToolCall(call) => renumber(&mut call.id),
                    ModelEvent::InvalidToolCall { id, .. } => renumber(id),
                    _ => {}
                }
                event
            })
        })
        .collect()
}

#[tokio::test]
async fn every_sse_case_replayed_over_http_gives_its_indexed_result() {
    let names = sse_files(Path::new(LOCAL_DIR));
    assert!(names.len() >= 16, "{names:?}");
    // One server with a conversation per (file, cut), selected by the user message.
    let mut script = Script::new();
    for name in &names {
        assert!(case_path(name).is_absolute());
        for (i, cut) in CUTS.iter().enumerate() {
            script = script.with_conversation(
                Conversation::new()
                    .matching(replay_marker(name, i))
                    .turn(replay_turn(name, *cut)),
            );
        }
    }
    let server = start(script).await;
    let client = |kind| {
        let mut s = settings(&server, kind);
        s.max_attempts = 1; // the case's own result, not a retry of it
        build_client(&s)
    };
    let (anthropic, openai) = (
        client(ProviderKind::Anthropic),
        client(ProviderKind::Openai),
    );
    for name in &names {
        let client = if name.starts_with("anthropic-") {
            &anthropic
        } else {
            &openai
        };
        let mut results = Vec::new();
        for (i, cut) in CUTS.iter().enumerate() {
            let mut r = request();
            r.messages = vec![Message::user_text(replay_marker(name, i))];
            let before = server.model_requests().len();
            let got = renumber_local_ids(collect(client.as_ref(), r).await);
            let sent = server.model_requests();
            assert_eq!(sent.len(), before + 1, "{name} {cut:?}: one request");
            assert_eq!(sent[before].turn, Some(0), "{name} {cut:?}");
            results.push(got);
        }
        for (cut, got) in CUTS.iter().zip(&results).skip(1) {
            assert_eq!(
                got, &results[0],
                "{name}: {cut:?} differs from whole events"
            );
        }
        let got = summarise(name, &results[0]);
        match expected(name) {
            Some(want) => assert_eq!(got, want, "{name}"),
            None => check_by_hand(name, &got),
        }
    }
    let counts = server.conversation_counts();
    assert!(
        counts.iter().all(|&c| c == 1),
        "each replay played once: {counts:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// 4. Retries driven by faults
// ---------------------------------------------------------------------------------------------

const RECOVERED: &str = "Recovered fine.";

/// Runs one request for `kind` against a text turn with `fault`; returns the items, the
/// recorded model requests and the time taken.
async fn run_fault(
    kind: ProviderKind,
    fault: Fault,
    tweak: impl FnOnce(&mut ProviderSettings),
) -> (Vec<Item>, Vec<RecordedRequest>, Duration) {
    let server = start(script(vec![
        Turn::text(RECOVERED).with_usage(50, 4).with_fault(fault),
    ]))
    .await;
    let mut s = settings(&server, kind);
    tweak(&mut s);
    let started = Instant::now();
    let got = collect(build_client(&s).as_ref(), request()).await;
    (got, server.model_requests(), started.elapsed())
}

fn recovered(kind: ProviderKind) -> Vec<Item> {
    streamed_turn(
        kind,
        &["Recovered", " fine."],
        (50, 4),
        vec![],
        StopReason::EndTurn,
    )
    .into_iter()
    .map(Ok)
    .collect()
}

/// Asserts one retry (attempt 2 of 3) whose reason satisfies `reason_ok`, the clean turn after
/// it, two requests, and that whatever came before the retry is a prefix of the clean turn.
fn assert_one_retry_then_success(
    kind: ProviderKind,
    got: &[Item],
    sent: &[RecordedRequest],
    reason_ok: impl Fn(&str) -> bool,
) -> u64 {
    let r = retries(got);
    assert_eq!(r.len(), 1, "{kind:?}: {got:#?}");
    let (attempt, max_attempts, delay_ms, reason) = &r[0];
    assert_eq!((*attempt, *max_attempts), (2, 3), "{kind:?}");
    assert!(reason_ok(reason), "{kind:?}: reason {reason:?}");
    assert_eq!(after_last_retry(got), &recovered(kind)[..], "{kind:?}");
    let before = &got[..got.len() - recovered(kind).len() - 1];
    assert!(
        recovered(kind).starts_with(before),
        "{kind:?}: partial events before the retry are the turn's own: {before:?}"
    );
    assert_eq!(sent.len(), 2, "{kind:?}: attempts");
    assert!(sent[0].fault.is_some() && sent[1].fault.is_none());
    *delay_ms
}

#[tokio::test]
async fn http_429_waits_for_retry_after_then_succeeds() {
    let runs = BOTH.map(|kind| async move {
        let fault = Fault::new(FaultKind::Http429).retry_after(1);
        (kind, run_fault(kind, fault, |_| {}).await)
    });
    for (kind, (got, sent, _)) in futures::future::join_all(runs).await {
        let delay =
            assert_one_retry_then_success(kind, &got, &sent, |r| r == "HTTP 429 Too Many Requests");
        assert_eq!(
            delay, 1_000,
            "{kind:?}: retry-after: 1 honoured over the 4 ms backoff"
        );
        let gap = sent[1].received.duration_since(sent[0].received);
        assert!(
            gap >= Duration::from_millis(950) && gap < Duration::from_millis(3_000),
            "{kind:?}: the second attempt came {gap:?} after the first"
        );
    }
}

#[tokio::test]
async fn http_529_and_500_are_retried_with_backoff() {
    for kind in BOTH {
        for (fault, reason) in [
            (FaultKind::Http529, "HTTP 529 Overloaded"),
            (FaultKind::Http500, "HTTP 500 Internal Server Error"),
        ] {
            let (got, sent, _) = run_fault(kind, Fault::new(fault), |_| {}).await;
            let delay = assert_one_retry_then_success(kind, &got, &sent, |r| r == reason);
            assert!(
                (2..=4).contains(&delay),
                "{kind:?} {fault:?}: jittered 4 ms backoff, got {delay}"
            );
        }
    }
}

#[tokio::test]
async fn a_connection_dropped_mid_stream_is_retried() {
    for kind in BOTH {
        let (got, sent, _) = run_fault(
            kind,
            Fault::new(FaultKind::DropMidStream).after_chunks(3),
            |_| {},
        )
        .await;
        assert_one_retry_then_success(kind, &got, &sent, |r| {
            r.starts_with("connection to the model provider failed")
        });
        let before = got.len() - recovered(kind).len() - 1;
        assert!(
            before >= 1,
            "{kind:?}: some events arrived before the drop: {got:?}"
        );
    }
}

#[tokio::test]
async fn an_error_event_after_200_fails_the_attempt_and_is_retried() {
    for kind in BOTH {
        let (got, sent, _) = run_fault(kind, Fault::new(FaultKind::ErrorEvent), |_| {}).await;
        let expected = match kind {
            ProviderKind::Anthropic => "overloaded_error: Overloaded",
            ProviderKind::Openai => "server_error: engine queue is full, request rejected",
        };
        assert_one_retry_then_success(kind, &got, &sent, |r| r == expected);
    }
}

#[tokio::test]
async fn a_stalled_stream_hits_the_idle_timeout_and_is_retried() {
    let runs = BOTH.map(|kind| async move {
        let fault = Fault::new(FaultKind::Stall)
            .after_chunks(1)
            .stall_ms(10_000);
        (
            kind,
            run_fault(kind, fault, |s| s.idle_timeout_ms = 250).await,
        )
    });
    for (kind, (got, sent, took)) in futures::future::join_all(runs).await {
        assert_one_retry_then_success(kind, &got, &sent, |r| r.contains("idle timeout"));
        assert!(
            took < Duration::from_secs(3),
            "{kind:?}: gave up after the 250 ms idle timeout, not the 10 s stall ({took:?})"
        );
    }
}

/// Issue 37.5: a `data:` line of cut-off JSON in a 200 stream (a proxy that corrupts a frame)
/// is retried like a dropped stream: the partial events are discarded (the client never skips
/// the frame: the lost piece may be text or tool arguments) and the next attempt plays the
/// turn whole.
#[tokio::test]
async fn a_malformed_line_is_retried_like_a_dropped_stream() {
    for kind in BOTH {
        let (got, sent, _) = run_fault(kind, Fault::new(FaultKind::MalformedLine), |_| {}).await;
        assert_one_retry_then_success(kind, &got, &sent, |r| {
            r.contains("malformed event") && r.contains("not JSON")
        });
    }
}

/// Issue 37.5: when every attempt gets a malformed frame, the final error is the malformed
/// event, quoting the frame.
#[tokio::test]
async fn a_malformed_line_on_every_attempt_quotes_the_frame() {
    for kind in BOTH {
        let fault = Fault::new(FaultKind::MalformedLine).times(5);
        let (got, sent, _) = run_fault(kind, fault, |_| {}).await;
        assert_eq!(sent.len(), 3, "{kind:?}: three attempts");
        match got.last() {
            Some(Err(e @ ModelError::MalformedEvent(m))) => {
                assert!(m.contains("not JSON") && m.contains('{'), "{kind:?}: {m}");
                assert!(
                    e.to_string()
                        .starts_with("the model's reply stream carried a malformed event")
                );
            }
            other => panic!("{kind:?}: expected a malformed event, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn http_400_and_401_are_not_retried() {
    for kind in BOTH {
        for (fault, status) in [(FaultKind::Http400, 400), (FaultKind::Http401, 401)] {
            let (got, sent, _) = run_fault(kind, Fault::new(fault).times(5), |_| {}).await;
            assert_eq!(got.len(), 1, "{kind:?} {status}: {got:?}");
            match &got[0] {
                Err(ModelError::Http {
                    status: s, body, ..
                })
                | Err(ModelError::Auth {
                    status: s, body, ..
                }) => {
                    assert_eq!(*s, status);
                    assert!(body.contains("fault injected"), "{body}");
                }
                other => panic!("{kind:?}: {other:?}"),
            }
            assert_eq!(sent.len(), 1, "{kind:?} {status}: exactly one request");
        }
    }
}

#[tokio::test]
async fn attempts_are_bounded_and_the_last_error_is_returned() {
    for kind in BOTH {
        let (got, sent, _) =
            run_fault(kind, Fault::new(FaultKind::Http500).times(10), |_| {}).await;
        let r = retries(&got);
        assert_eq!(
            r.iter().map(|r| (r.0, r.1)).collect::<Vec<_>>(),
            vec![(2, 3), (3, 3)],
            "{kind:?}"
        );
        assert!(
            matches!(got.last(), Some(Err(ModelError::Http { status: 500, .. }))),
            "{kind:?}: {got:?}"
        );
        assert_eq!(got.len(), 3);
        assert_eq!(sent.len(), 3, "{kind:?}: max_attempts = 3");
    }
}

// ---------------------------------------------------------------------------------------------
// 5. Text tool protocol over HTTP
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn text_tool_protocol_over_openai_http() {
    let reply = "I will read the file.\n<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"src/lib.rs\"}}\n</tool_call>";
    let server = start(script(vec![Turn::text(reply).with_usage(400, 30)])).await;
    let client = TextToolProtocol::new(build_client(&settings(&server, ProviderKind::Openai)));
    let got = ok(collect(&client, request()).await);

    let shown: String = got
        .iter()
        .filter_map(|e| match e {
            ModelEvent::TextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        shown.trim_end(),
        "I will read the file.",
        "markup is not shown"
    );
    let tail: Vec<_> = got
        .iter()
        .filter(|e| !matches!(e, ModelEvent::TextDelta { .. }))
        .cloned()
        .collect();
    assert_eq!(
        tail,
        vec![
            usage(400, 30),
            tool_call("call_text_1", "read_file", json!({"path": "src/lib.rs"})),
            stop(StopReason::ToolUse),
        ]
    );

    let sent = server.model_requests();
    assert_eq!(sent.len(), 1);
    let body = &sent[0].body;
    assert!(body.get("tools").is_none(), "no native tools: {body:#}");
    let system = body["messages"][0]["content"].as_str().unwrap();
    assert_eq!(body["messages"][0]["role"], "system");
    assert!(system.starts_with(SYSTEM), "{system}");
    for needle in [
        "<tool_call>",
        "read_file",
        "Reads a text file of the workspace; returns numbered lines.",
        "list_dir",
        "Lists a directory of the workspace.",
    ] {
        assert!(
            system.contains(needle),
            "system prompt lacks {needle:?}:\n{system}"
        );
    }

    // The next request renders the call and its result as text: no native shapes at all.
    let mut next = request();
    next.messages.push(assistant_calls(
        "I will read the file.",
        &[("call_text_1", "read_file", json!({"path": "src/lib.rs"}))],
    ));
    next.messages.push(tool_results(&[(
        "call_text_1",
        "1\tpub fn answer() -> u32 { 42 }",
        false,
    )]));
    let got = ok(collect(&client, next).await);
    assert!(
        got.contains(&tool_call(
            "call_text_2",
            "read_file",
            json!({"path": "src/lib.rs"})
        )),
        "ids stay unique within the conversation: {got:?}"
    );
    let sent = server.model_requests();
    let body = &sent[1].body;
    assert!(body.get("tools").is_none());
    assert_eq!(sent[1].tool_results, 0, "no role: tool messages");
    let messages = body["messages"].as_array().unwrap();
    assert!(messages.iter().all(|m| m.get("tool_calls").is_none()));
    let all = body["messages"].to_string();
    assert!(all.contains("pub fn answer() -> u32 { 42 }"), "{all}");
    assert!(
        all.contains("<tool_call>"),
        "the earlier call is rendered as text: {all}"
    );
}

// ---------------------------------------------------------------------------------------------
// 6. The API key never appears in an error
// ---------------------------------------------------------------------------------------------

fn assert_no_key(what: &str, items: &[Item]) {
    for item in items {
        let shown = match item {
            Ok(e @ ModelEvent::Retry { .. }) => format!("{e:?}"),
            Ok(_) => continue,
            Err(e) => format!("{e} / {e:?}"),
        };
        assert!(!shown.contains(KEY), "{what}: the key leaked: {shown}");
    }
}

#[tokio::test]
async fn the_api_key_never_appears_in_errors_even_when_echoed_back() {
    let echo = format!(
        "invalid x-api-key; request headers were: x-api-key: {KEY}, authorization: Bearer {KEY}"
    );
    for kind in BOTH {
        for fault in [
            Fault::new(FaultKind::Http401).message(echo.clone()),
            Fault::new(FaultKind::Http429)
                .retry_after(0)
                .times(5)
                .message(echo.clone()),
            Fault::new(FaultKind::Http500)
                .times(5)
                .message(echo.clone()),
            Fault::new(FaultKind::ErrorEvent)
                .times(5)
                .message(echo.clone()),
        ] {
            let kind_name = fault.kind;
            let (got, sent, _) = run_fault(kind, fault, |s| s.max_attempts = 2).await;
            let what = format!("{kind:?} {kind_name:?}");
            assert!(
                got.last().is_some_and(Result::is_err),
                "{what}: the turn fails: {got:?}"
            );
            assert_no_key(&what, &got);
            // The key was really sent, so the check above means something.
            let sent_key = match kind {
                ProviderKind::Anthropic => sent[0].header("x-api-key").map(str::to_string),
                ProviderKind::Openai => sent[0].header("authorization").map(str::to_string),
            };
            assert!(sent_key.unwrap().contains(KEY), "{what}");
            if let Some(Err(e)) = got.last() {
                assert!(e.to_string().contains("<redacted>"), "{what}: {e}");
            }
        }
    }
}

/// A malformed event quotes the line it could not read; a line echoing the key is scrubbed too.
#[tokio::test]
async fn the_api_key_is_not_in_malformed_event_errors_quoting_the_stream() {
    for kind in BOTH {
        let line = format!("data: {{\"echo\": \"x-api-key: {KEY}\"\n\n");
        let server = start(script(vec![Turn::raw_sse_inline(line)])).await;
        let got = collect(build_client(&settings(&server, kind)).as_ref(), request()).await;
        match got.last() {
            Some(Err(e @ ModelError::MalformedEvent(m))) => {
                assert!(m.contains("x-api-key: <redacted>"), "{kind:?}: {m}");
                assert!(!format!("{e} {e:?}").contains(KEY));
            }
            other => panic!("{kind:?}: expected a malformed event, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn the_api_key_is_not_in_connection_errors() {
    let port = unused_port();
    for kind in BOTH {
        let mut s = provider_settings(kind, format!("http://127.0.0.1:{port}"), KEY);
        s.max_attempts = 2;
        let client: Arc<dyn ModelClient> = build_client(&s);
        let got = collect(client.as_ref(), request()).await;
        assert!(
            matches!(got.last(), Some(Err(ModelError::Connection(_)))),
            "{got:?}"
        );
        assert_eq!(retries(&got).len(), 1, "connection errors are retried");
        assert_no_key(&format!("{kind:?} refused"), &got);
    }
}
