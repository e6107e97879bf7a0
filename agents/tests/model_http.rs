//! Both HTTP clients through real HTTP on 127.0.0.1: request shape and headers, SSE over chunked
//! transfer encoding, non-streaming JSON replies, retries (429 + retry-after, 529, error event,
//! connection dropped mid-stream, connection refused), no retry on 400, idle timeout, error body
//! truncation and API key hygiene.

mod model_support;

use ahelper_agents::model::anthropic::AnthropicClient;
use ahelper_agents::model::openai::OpenAiClient;
use ahelper_agents::model::{
    ApiKey, MAX_ERROR_BODY_BYTES, Message, ModelClient, ModelError, ModelEvent, ModelRequest,
    ProviderKind, ProviderSettings, StopReason, ToolCall, ToolSpec, Usage, build_client,
};
use futures::StreamExt;
use model_support::{Canned, serve};
use serde_json::json;

const ANTHROPIC_KEY: &str = "sk-ant-test-SECRET-0123456789";
const OPENAI_KEY: &str = "sk-openai-test-SECRET-0123456789";

fn case(name: &str) -> Vec<u8> {
    std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/sse/").to_string() + name)
        .unwrap()
}

fn settings(kind: ProviderKind, base_url: &str, key: &str, max_attempts: u32) -> ProviderSettings {
    ProviderSettings {
        kind,
        model: "test-model".into(),
        base_url: base_url.into(),
        api_key: ApiKey(key.into()),
        max_output_tokens: 256,
        context_window: 100_000,
        tool_protocol: Default::default(),
        max_attempts,
        retry_base_delay_ms: 5,
        retry_max_delay_ms: 20,
        idle_timeout_ms: 5_000,
        origin: Default::default(),
    }
}

fn request() -> ModelRequest {
    ModelRequest {
        model: String::new(),
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

async fn run(client: &dyn ModelClient) -> Vec<Result<ModelEvent, ModelError>> {
    client.stream(request()).collect().await
}

/// The events after the last `Retry` (what the consumer keeps).
fn after_last_retry(items: &[Result<ModelEvent, ModelError>]) -> &[Result<ModelEvent, ModelError>] {
    let start = items
        .iter()
        .rposition(|i| matches!(i, Ok(ModelEvent::Retry { .. })))
        .map_or(0, |p| p + 1);
    &items[start..]
}

fn retries(items: &[Result<ModelEvent, ModelError>]) -> Vec<(u32, u32, u64, String)> {
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

fn anthropic_weather_events() -> Vec<Result<ModelEvent, ModelError>> {
    vec![
        Ok(ModelEvent::Usage(Usage {
            input_tokens: 472,
            output_tokens: 2,
        })),
        Ok(ModelEvent::TextDelta {
            text: "Okay".into(),
        }),
    ]
}

#[tokio::test]
async fn anthropic_streams_over_chunked_http_with_the_right_request() {
    let (base, log) = serve(vec![Canned::sse(
        &case("anthropic-tool-use-split-json.sse"),
        7,
    )])
    .await;
    let client = AnthropicClient::new(settings(ProviderKind::Anthropic, &base, ANTHROPIC_KEY, 3));
    let items = run(&client).await;
    assert_eq!(items[..2], anthropic_weather_events()[..]);
    let n = items.len();
    assert_eq!(
        items[n - 3..],
        [
            Ok(ModelEvent::Usage(Usage {
                input_tokens: 472,
                output_tokens: 89
            })),
            Ok(ModelEvent::ToolCall(ToolCall {
                id: "toolu_01T1x1fJ34qAmk2tNTrN7Up6".into(),
                name: "get_weather".into(),
                input: json!({"location": "San Francisco, CA", "unit": "fahrenheit"}),
            })),
            Ok(ModelEvent::Stop {
                reason: StopReason::ToolUse
            }),
        ]
    );
    let log = log.lock().unwrap();
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
    let (base, log) = serve(vec![Canned::sse(
        &case("openai-parallel-tool-calls.sse"),
        5,
    )])
    .await;
    let client = build_client(&settings(
        ProviderKind::Openai,
        &format!("{base}/v1"),
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
    assert_eq!(
        items.last(),
        Some(&Ok(ModelEvent::Stop {
            reason: StopReason::ToolUse
        }))
    );
    let log = log.lock().unwrap();
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
    let (base, log) = serve(vec![Canned::sse(&case("data-field-without-space.sse"), 64)]).await;
    let client = OpenAiClient::new(settings(ProviderKind::Openai, &base, "", 1));
    let items = run(&client).await;
    assert_eq!(items[0], Ok(ModelEvent::TextDelta { text: "ok".into() }));
    assert_eq!(log.lock().unwrap()[0].header("authorization"), None);
}

#[tokio::test]
async fn non_streaming_json_replies_are_understood() {
    let anthropic_reply = json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "m",
        "content": [{"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "toolu_9", "name": "get_weather", "input": {"location": "Oslo"}}],
        "stop_reason": "tool_use", "usage": {"input_tokens": 12, "output_tokens": 7}
    });
    let openai_reply = json!({
        "id": "c", "object": "chat.completion",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": "Sunny."}}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}
    });
    let json_header = [("content-type", "application/json")];
    let (base, _) = serve(vec![
        Canned::status(200, &anthropic_reply.to_string(), &json_header),
        Canned::status(200, &openai_reply.to_string(), &json_header),
    ])
    .await;
    let anthropic = AnthropicClient::new(settings(ProviderKind::Anthropic, &base, "k", 1));
    assert_eq!(
        run(&anthropic).await,
        vec![
            Ok(ModelEvent::Usage(Usage {
                input_tokens: 12,
                output_tokens: 7
            })),
            Ok(ModelEvent::TextDelta {
                text: "Checking.".into()
            }),
            Ok(ModelEvent::ToolCall(ToolCall {
                id: "toolu_9".into(),
                name: "get_weather".into(),
                input: json!({"location": "Oslo"})
            })),
            Ok(ModelEvent::Stop {
                reason: StopReason::ToolUse
            }),
        ]
    );
    let openai = OpenAiClient::new(settings(ProviderKind::Openai, &base, "k", 1));
    assert_eq!(
        run(&openai).await,
        vec![
            Ok(ModelEvent::TextDelta {
                text: "Sunny.".into()
            }),
            Ok(ModelEvent::Usage(Usage {
                input_tokens: 5,
                output_tokens: 2
            })),
            Ok(ModelEvent::Stop {
                reason: StopReason::EndTurn
            }),
        ]
    );
}

#[tokio::test]
async fn http_429_with_retry_after_is_retried_after_that_delay() {
    let (base, log) = serve(vec![
        Canned::status(
            429,
            r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#,
            &[("retry-after", "1"), ("content-type", "application/json")],
        ),
        Canned::sse(&case("anthropic-text-basic.sse"), 11),
    ])
    .await;
    let client = AnthropicClient::new(settings(ProviderKind::Anthropic, &base, ANTHROPIC_KEY, 3));
    let started = std::time::Instant::now();
    let items = run(&client).await;
    assert!(started.elapsed() >= std::time::Duration::from_millis(950));
    assert_eq!(
        retries(&items),
        vec![(2, 3, 1_000, "HTTP 429 Too Many Requests".to_string())]
    );
    let kept = after_last_retry(&items);
    assert_eq!(
        kept[1],
        Ok(ModelEvent::TextDelta {
            text: "Hello".into()
        })
    );
    assert_eq!(
        kept.last(),
        Some(&Ok(ModelEvent::Stop {
            reason: StopReason::EndTurn
        }))
    );
    assert_eq!(log.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn http_529_and_error_events_are_retried() {
    let (base, log) = serve(vec![
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
        Some(&Ok(ModelEvent::Stop {
            reason: StopReason::EndTurn
        }))
    );
    assert_eq!(log.lock().unwrap().len(), 3);
}

#[tokio::test]
async fn http_400_is_not_retried() {
    let body = r#"{"error":{"message":"max_tokens is too large","type":"invalid_request_error"}}"#;
    let (base, log) = serve(vec![
        Canned::status(400, body, &[("content-type", "application/json")]),
        Canned::sse(&case("openai-text-include-usage.sse"), 64),
    ])
    .await;
    let client = OpenAiClient::new(settings(ProviderKind::Openai, &base, OPENAI_KEY, 3));
    let items = run(&client).await;
    assert_eq!(
        items,
        vec![Err(ModelError::Http {
            status: 400,
            body: body.into(),
            retry_after_ms: None
        })]
    );
    assert_eq!(log.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn connection_dropped_mid_stream_is_retried() {
    let full = case("openai-text-include-usage.sse");
    let mut dropped = Canned::sse(&full, 100);
    dropped.drop_after = Some(3);
    let (base, log) = serve(vec![dropped, Canned::sse(&full, 100)]).await;
    let client = OpenAiClient::new(settings(ProviderKind::Openai, &base, OPENAI_KEY, 2));
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
    assert_eq!(
        kept.last(),
        Some(&Ok(ModelEvent::Stop {
            reason: StopReason::EndTurn
        }))
    );
    assert_eq!(log.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn openai_error_object_in_a_200_stream_fails_when_attempts_run_out() {
    let (base, _) = serve(vec![Canned::sse(
        &case("openai-midstream-error-object.sse"),
        9,
    )])
    .await;
    let client = OpenAiClient::new(settings(ProviderKind::Openai, &base, OPENAI_KEY, 1));
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
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let client = AnthropicClient::new(settings(
        ProviderKind::Anthropic,
        &format!("http://127.0.0.1:{port}"),
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
    let mut stalled = Canned::sse(&case("anthropic-text-basic.sse")[..300], 300);
    stalled.stall = true;
    let (base, _) = serve(vec![stalled]).await;
    let mut s = settings(ProviderKind::Anthropic, &base, ANTHROPIC_KEY, 1);
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
    let (base, _) = serve(vec![Canned::status(401, &long, &[])]).await;
    let client = OpenAiClient::new(settings(ProviderKind::Openai, &base, OPENAI_KEY, 3));
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
    assert!(body.starts_with("invalid key <redacted> x"), "{body}");
    assert!(!e.to_string().contains(OPENAI_KEY));
    assert!(!format!("{e:?}").contains(OPENAI_KEY));
    assert!(!format!("{client:?}").contains(OPENAI_KEY));
}
