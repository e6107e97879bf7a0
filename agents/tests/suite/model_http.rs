//! Both HTTP clients through real HTTP on 127.0.0.1 against the fake LLM server (case files of
//! `tests/data/sse/` replayed over chunked transfer encoding, injected faults): request shape and
//! headers, non-streaming JSON replies, retries (429 + retry-after, 529, error event, connection
//! dropped mid-stream, connection refused), no retry on 400, idle timeout, error body truncation
//! and API key hygiene.

use super::support::canned_http::{Canned, serve};
use super::support::model::{
    after_last_retry, collect, non_streaming_proxy, provider_settings, proxy_base_url, retries,
    script, start, stop, text, tool_call, unused_port, usage,
};
use super::support::sse_cases::{Item, case_path};
use ahelper_agents::model::anthropic::AnthropicClient;
use ahelper_agents::model::openai::OpenAiClient;
use ahelper_agents::model::{
    MAX_ERROR_BODY_BYTES, Message, ModelClient, ModelError, ModelEvent, ModelRequest, ProviderKind,
    ProviderSettings, StopReason, ToolSpec, build_client,
};
use ahelper_fake_llm::{FakeLlm, Fault, FaultKind, Turn};
use serde_json::{Value, json};

const ANTHROPIC_KEY: &str = "sk-ant-test-SECRET-0123456789";
const OPENAI_KEY: &str = "sk-openai-test-SECRET-0123456789";

/// Model `test-model`, 256 output tokens, a 5–20 ms backoff.
fn settings(kind: ProviderKind, base_url: &str, key: &str, max_attempts: u32) -> ProviderSettings {
    ProviderSettings {
        model: "test-model".into(),
        max_output_tokens: 256,
        max_attempts,
        retry_base_delay_ms: 5,
        retry_max_delay_ms: 20,
        ..provider_settings(kind, base_url, key)
    }
}

/// [`settings`] for a `kind` client of `server` with that provider's test key, trying each
/// request `max_attempts` times.
fn server_settings(server: &FakeLlm, kind: ProviderKind, max_attempts: u32) -> ProviderSettings {
    let key = match kind {
        ProviderKind::Anthropic => ANTHROPIC_KEY,
        _ => OPENAI_KEY,
    };
    settings(kind, &server.base_url(), key, max_attempts)
}

/// An Anthropic client of `server` with the test key, trying each request `max_attempts` times.
fn anthropic_client(server: &FakeLlm, max_attempts: u32) -> AnthropicClient {
    AnthropicClient::new(server_settings(
        server,
        ProviderKind::Anthropic,
        max_attempts,
    ))
}

/// An OpenAI client of `server` with the test key, trying each request `max_attempts` times.
fn openai_client(server: &FakeLlm, max_attempts: u32) -> OpenAiClient {
    OpenAiClient::new(server_settings(server, ProviderKind::Openai, max_attempts))
}

fn request() -> ModelRequest {
    ModelRequest {
        model: String::new(),
        system_shared_len: 0,
        system: "You are a test.".into(),
        messages: vec![Message::user_text("What is the weather?")],
        tools: vec![ToolSpec {
            name: "get_weather".into(),
            description: "Weather for a place.".into(),
            input_schema: json!({"type": "object", "properties": {"location": {"type": "string"}}}),
        }],
        max_output_tokens: 0,
    }
}

async fn run(client: &dyn ModelClient) -> Vec<Item> {
    collect(client, request()).await
}

/// A turn replaying case file `name` byte for byte in HTTP chunks of `chunk_bytes`.
fn replay(name: &str, chunk_bytes: usize) -> Turn {
    Turn::new()
        .with_raw_sse(case_path(name))
        .with_raw_chunk_bytes(chunk_bytes)
}

/// A fake server replaying case file `name` in chunks of `chunk_bytes`, after `fault`.
async fn faulty_replay(name: &str, chunk_bytes: usize, fault: Fault) -> FakeLlm {
    serving(replay(name, chunk_bytes).with_fault(fault)).await
}

/// A fake server playing `turn` for every request.
async fn serving(turn: Turn) -> FakeLlm {
    start(script(vec![turn])).await
}

fn anthropic_weather_events() -> Vec<Item> {
    vec![Ok(usage(472, 2)), Ok(text("Okay"))]
}

#[tokio::test]
async fn anthropic_streams_over_chunked_http_with_the_right_request() {
    let server = serving(replay("anthropic-tool-use-split-json.sse", 7)).await;
    let client = AnthropicClient::new(settings(
        ProviderKind::Anthropic,
        &server.base_url(),
        ANTHROPIC_KEY,
        3,
    ));
    let items = run(&client).await;
    assert_eq!(items[..2], anthropic_weather_events()[..]);
    let n = items.len();
    assert_eq!(
        items[n - 3..],
        [
            Ok(usage(472, 89)),
            Ok(tool_call(
                "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
                "get_weather",
                json!({"location": "San Francisco, CA", "unit": "fahrenheit"})
            )),
            Ok(stop(StopReason::ToolUse)),
        ]
    );
    let log = server.model_requests();
    assert_eq!(log.len(), 1);
    let req = &log[0];
    assert_eq!(
        (req.method.as_str(), req.path.as_str()),
        ("POST", "/v1/messages")
    );
    assert_eq!(req.header("x-api-key"), Some(ANTHROPIC_KEY));
    assert_eq!(req.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(req.header("authorization"), None);
    assert_eq!(req.body["stream"], json!(true));
    assert_eq!(req.body["model"], json!("test-model"));
    assert_eq!(req.body["max_tokens"], json!(256));
    assert_eq!(req.body["tools"][0]["name"], json!("get_weather"));
    assert_eq!(
        req.body["tools"][0]["input_schema"]["type"],
        json!("object")
    );
}

#[tokio::test]
async fn openai_streams_over_chunked_http_with_the_right_request() {
    let server = serving(replay("openai-parallel-tool-calls.sse", 5)).await;
    let client = build_client(&settings(
        ProviderKind::Openai,
        &server.openai_base_url(),
        OPENAI_KEY,
        3,
    ));
    assert_eq!(client.describe(), "openai test-model");
    let items = run(client.as_ref()).await;
    let calls: Vec<_> = items
        .iter()
        .filter_map(|i| match i {
            Ok(ModelEvent::ToolCall(c)) => Some(c.name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(calls, vec!["GetWeatherArgs", "get_stock_price"]);
    assert_eq!(items.last(), Some(&Ok(stop(StopReason::ToolUse))));
    let log = server.model_requests();
    let req = &log[0];
    assert_eq!(req.path, "/v1/chat/completions");
    assert_eq!(
        req.header("authorization"),
        Some(format!("Bearer {OPENAI_KEY}").as_str())
    );
    assert_eq!(req.body["stream"], json!(true));
    assert_eq!(req.body["stream_options"], json!({"include_usage": true}));
    assert_eq!(req.body["max_tokens"], json!(256));
    assert_eq!(
        req.body["messages"][0],
        json!({"role": "system", "content": "You are a test."})
    );
    assert_eq!(req.body["tools"][0]["type"], json!("function"));
}

#[tokio::test]
async fn openai_without_a_key_sends_no_authorization_header() {
    let server = serving(replay("data-field-without-space.sse", 64)).await;
    let client = OpenAiClient::new(settings(ProviderKind::Openai, &server.base_url(), "", 1));
    let items = run(&client).await;
    assert_eq!(items[0], Ok(text("ok")));
    assert_eq!(server.model_requests()[0].header("authorization"), None);
}

#[tokio::test]
async fn non_streaming_json_replies_are_understood() {
    // The proxy asks the fake for a non-streaming reply: one `application/json` body.
    let json_reply = |turn: Turn| async move {
        let server = serving(turn).await;
        let proxy = non_streaming_proxy(server.base_url()).await;
        (server, proxy)
    };
    let (_anthropic_server, proxy) = json_reply(
        Turn::text("Checking.")
            .with_tool_call_id("toolu_9", "get_weather", json!({"location": "Oslo"}))
            .with_usage(12, 7),
    )
    .await;
    let base = proxy_base_url(&proxy, ProviderKind::Anthropic);
    let anthropic = AnthropicClient::new(settings(ProviderKind::Anthropic, &base, "k", 1));
    assert_eq!(
        run(&anthropic).await,
        vec![
            Ok(usage(12, 7)),
            Ok(text("Checking.")),
            Ok(tool_call(
                "toolu_9",
                "get_weather",
                json!({"location": "Oslo"})
            )),
            Ok(stop(StopReason::ToolUse)),
        ]
    );
    let (_openai_server, proxy) = json_reply(Turn::text("Sunny.").with_usage(5, 2)).await;
    let base = proxy_base_url(&proxy, ProviderKind::Openai);
    let openai = OpenAiClient::new(settings(ProviderKind::Openai, &base, "k", 1));
    assert_eq!(
        run(&openai).await,
        vec![
            Ok(text("Sunny.")),
            Ok(usage(5, 2)),
            Ok(stop(StopReason::EndTurn)),
        ]
    );
}

#[tokio::test]
async fn http_429_with_retry_after_is_retried_after_that_delay() {
    let fault = Fault::new(FaultKind::Http429).retry_after(1);
    let server = faulty_replay("anthropic-text-basic.sse", 11, fault).await;
    let client = anthropic_client(&server, 3);
    let started = std::time::Instant::now();
    let items = run(&client).await;
    assert!(started.elapsed() >= std::time::Duration::from_millis(950));
    assert_eq!(
        retries(&items),
        vec![(2, 3, 1_000, "HTTP 429 Too Many Requests".to_string())]
    );
    let kept = after_last_retry(&items);
    assert_eq!(kept[1], Ok(text("Hello")));
    assert_eq!(kept.last(), Some(&Ok(stop(StopReason::EndTurn))));
    assert_eq!(server.model_requests().len(), 2);
}

/// Three different answers to the same request in a row: the fake LLM server plays one fault
/// per turn, so this sequence comes from canned responses (see `support/canned_http.rs`).
#[tokio::test]
async fn http_529_and_error_events_are_retried() {
    let case = |name| std::fs::read(case_path(name)).unwrap();
    let (base, requests) = serve(vec![
        Canned::status(
            529,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            &[],
        ),
        Canned::sse(&case("anthropic-error-overloaded-midstream.sse"), 13),
        Canned::sse(&case("anthropic-text-basic.sse"), 64),
    ])
    .await;
    let client = AnthropicClient::new(settings(ProviderKind::Anthropic, &base, ANTHROPIC_KEY, 3));
    let items = run(&client).await;
    let reasons: Vec<String> = retries(&items).into_iter().map(|r| r.3).collect();
    assert_eq!(
        reasons,
        vec![
            "HTTP 529 Overloaded".to_string(),
            "overloaded_error: Overloaded".to_string()
        ]
    );
    assert!(
        retries(&items).iter().all(|r| r.2 <= 20),
        "backoff capped at 20 ms"
    );
    assert_eq!(
        after_last_retry(&items).last(),
        Some(&Ok(stop(StopReason::EndTurn)))
    );
    assert_eq!(requests.count(), 3);
}

#[tokio::test]
async fn http_400_is_not_retried() {
    let message = "max_tokens is too large";
    let fault = Fault::new(FaultKind::Http400).message(message);
    let server = faulty_replay("openai-text-include-usage.sse", 64, fault).await;
    let client = openai_client(&server, 3);
    let items = run(&client).await;
    let [
        Err(ModelError::Http {
            status: 400,
            body,
            retry_after_ms: None,
        }),
    ] = &items[..]
    else {
        panic!("one HTTP 400 error, no retry: {items:?}");
    };
    let body: Value = serde_json::from_str(body).expect("the server's body, verbatim");
    assert_eq!(body["error"]["message"], message);
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert_eq!(server.model_requests().len(), 1);
}

#[tokio::test]
async fn connection_dropped_mid_stream_is_retried() {
    let fault = Fault::new(FaultKind::DropMidStream).after_chunks(3);
    let server = faulty_replay("openai-text-include-usage.sse", 100, fault).await;
    let client = openai_client(&server, 2);
    let items = run(&client).await;
    let r = retries(&items);
    assert_eq!(r.len(), 1, "{items:?}");
    assert_eq!((r[0].0, r[0].1), (2, 2));
    let kept = after_last_retry(&items);
    let text: String = kept
        .iter()
        .filter_map(|i| match i {
            Ok(ModelEvent::TextDelta { text }) => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "I'm unable to provide real-time updates.");
    assert_eq!(kept.last(), Some(&Ok(stop(StopReason::EndTurn))));
    assert_eq!(server.model_requests().len(), 2);
}

#[tokio::test]
async fn openai_error_object_in_a_200_stream_fails_when_attempts_run_out() {
    let server = serving(replay("openai-midstream-error-object.sse", 9)).await;
    let client = openai_client(&server, 1);
    let items = run(&client).await;
    assert_eq!(
        items.last(),
        Some(&Err(ModelError::Api {
            kind: "server_error".into(),
            message: "engine queue is full, request rejected".into()
        }))
    );
    assert!(
        !items
            .iter()
            .any(|i| matches!(i, Ok(ModelEvent::Stop { .. })))
    );
}

#[tokio::test]
async fn connection_refused_is_retried_then_reported() {
    let client = AnthropicClient::new(settings(
        ProviderKind::Anthropic,
        &format!("http://127.0.0.1:{}", unused_port()),
        ANTHROPIC_KEY,
        2,
    ));
    let items = run(&client).await;
    assert_eq!(retries(&items).len(), 1);
    match items.last() {
        Some(Err(e @ ModelError::Connection(_))) => {
            assert!(!e.to_string().contains(ANTHROPIC_KEY))
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_stalled_stream_hits_the_idle_timeout() {
    // 300 bytes, then nothing for 10 s.
    let fault = Fault::new(FaultKind::Stall)
        .after_chunks(1)
        .stall_ms(10_000);
    let server = faulty_replay("anthropic-text-basic.sse", 300, fault).await;
    let mut s = settings(
        ProviderKind::Anthropic,
        &server.base_url(),
        ANTHROPIC_KEY,
        1,
    );
    s.idle_timeout_ms = 150;
    let items = run(&AnthropicClient::new(s)).await;
    assert!(
        matches!(items.last(), Some(Err(ModelError::Connection(m))) if m.contains("idle timeout")),
        "{items:?}"
    );
}

#[tokio::test]
async fn error_bodies_are_truncated_and_never_contain_the_key() {
    let long = format!("invalid key {OPENAI_KEY} {}", "x".repeat(10_000));
    let server =
        serving(Turn::text("unused").with_fault(Fault::new(FaultKind::Http401).message(long)))
            .await;
    let client = openai_client(&server, 3);
    let items = run(&client).await;
    assert_eq!(items.len(), 1, "401 is not retried");
    let Some(Err(
        e @ ModelError::Auth {
            status: 401, body, ..
        },
    )) = items.last()
    else {
        panic!("{items:?}");
    };
    assert!(body.len() <= MAX_ERROR_BODY_BYTES, "{}", body.len());
    // The server's JSON error body, cut to the limit, with the echoed key replaced.
    assert!(body.contains("\"invalid key <redacted> x"), "{body}");
    assert!(!e.to_string().contains(OPENAI_KEY));
    assert!(!format!("{e:?}").contains(OPENAI_KEY));
    assert!(!format!("{client:?}").contains(OPENAI_KEY));
}
