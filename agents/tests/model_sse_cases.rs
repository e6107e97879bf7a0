//! Every `.sse` case file (copied from `shared/cases/sse/` into `tests/data/sse/`) fed to the
//! real stream parsers (a) whole, (b) one byte at a time and (c) in random chunk sizes with
//! several seeds: the events must be identical across all feedings and match the file's row in
//! `INDEX.md`.

use ahelper_agents::model::anthropic::parse_anthropic_stream;
use ahelper_agents::model::openai::parse_openai_stream;
use ahelper_agents::model::tool_args::TRUNCATED_BY_MAX_TOKENS;
use ahelper_agents::model::{ModelError, ModelEvent, StopReason, ToolCall, Usage};
use bytes::Bytes;
use futures::StreamExt;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The copy inside the crate (always present).
const LOCAL_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/sse");
/// The shared cases beside the repository (present in CI and on the development machine).
const SHARED_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/cases/sse");

type Item = Result<ModelEvent, ModelError>;

fn sse_files(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".sse"))
        .collect()
}

fn case_path(name: &str) -> PathBuf {
    Path::new(LOCAL_DIR).join(name)
}

async fn parse(name: &str, chunks: Vec<Bytes>) -> Vec<Item> {
    let input = futures::stream::iter(chunks.into_iter().map(Ok::<_, ModelError>));
    let stream = if name.starts_with("anthropic-") {
        parse_anthropic_stream(input)
    } else {
        parse_openai_stream(input)
    };
    stream.collect().await
}

/// Parses `name` whole, byte by byte and in random chunks; asserts all agree; returns the events.
async fn parse_all_ways(name: &str) -> Vec<Item> {
    let raw = std::fs::read(case_path(name)).unwrap();
    let whole = parse(name, vec![Bytes::from(raw.clone())]).await;
    let bytewise = parse(name, raw.iter().map(|b| Bytes::from(vec![*b])).collect()).await;
    assert_eq!(whole, bytewise, "{name}: byte-by-byte feeding differs");
    for seed in [1u64, 2, 3, 42, 1234] {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut chunks = Vec::new();
        let mut rest = &raw[..];
        while !rest.is_empty() {
            let n = rng.random_range(1..=rest.len().min(97));
            chunks.push(Bytes::copy_from_slice(&rest[..n]));
            rest = &rest[n..];
        }
        let random = parse(name, chunks).await;
        assert_eq!(whole, random, "{name}: random chunks (seed {seed}) differ");
    }
    whole
}

/// The result of one turn, summarised.
#[derive(Debug, Default, PartialEq)]
struct Outcome {
    text: String,
    calls: Vec<ToolCall>,
    /// (id, name, raw arguments, error)
    invalid: Vec<(String, String, String, String)>,
    usage: Option<Usage>,
    stop: Option<StopReason>,
    error: Option<ModelError>,
}

fn summarise(name: &str, items: &[Item]) -> Outcome {
    let mut o = Outcome::default();
    for (i, item) in items.iter().enumerate() {
        assert!(
            o.stop.is_none() && o.error.is_none(),
            "{name}: item {i} after the end: {item:?}"
        );
        match item {
            Ok(ModelEvent::TextDelta { text }) => {
                assert!(!text.is_empty(), "{name}: empty text delta");
                o.text.push_str(text);
            }
            Ok(ModelEvent::ToolCall(call)) => {
                assert!(call.input.is_object(), "{name}: {call:?}");
                o.calls.push(call.clone())
            }
            Ok(ModelEvent::InvalidToolCall {
                id,
                name,
                raw_arguments,
                error,
            }) => o.invalid.push((
                id.clone(),
                name.clone(),
                raw_arguments.clone(),
                error.clone(),
            )),
            Ok(ModelEvent::Usage(u)) => o.usage = Some(*u),
            Ok(ModelEvent::Stop { reason }) => o.stop = Some(reason.clone()),
            Ok(ModelEvent::Retry { .. }) => panic!("{name}: parsers never retry"),
            Err(e) => o.error = Some(e.clone()),
        }
    }
    assert!(
        o.stop.is_some() != o.error.is_some(),
        "{name}: a turn ends with exactly one Stop or one error: {items:?}"
    );
    o
}

fn call(id: &str, name: &str, input: Value) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        input,
    }
}

fn usage(input_tokens: u64, output_tokens: u64) -> Option<Usage> {
    Some(Usage {
        input_tokens,
        output_tokens,
    })
}

fn success(text: &str, calls: Vec<ToolCall>, usage: Option<Usage>, stop: StopReason) -> Outcome {
    Outcome {
        text: text.into(),
        calls,
        usage,
        stop: Some(stop),
        ..Outcome::default()
    }
}

/// What INDEX.md says each file must produce (`None` for files checked by hand below).
fn expected(name: &str) -> Option<Outcome> {
    use StopReason::*;
    Some(match name {
        "anthropic-text-basic.sse" => success("Hello!", vec![], usage(25, 15), EndTurn),
        "anthropic-tool-use-split-json.sse" => success(
            "Okay, let's check the weather for San Francisco, CA:",
            vec![call(
                "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
                "get_weather",
                json!({"location": "San Francisco, CA", "unit": "fahrenheit"}),
            )],
            usage(472, 89),
            ToolUse,
        ),
        "anthropic-error-overloaded-midstream.sse" => Outcome {
            text: "Hel".into(),
            usage: usage(25, 1),
            error: Some(ModelError::Api {
                kind: "overloaded_error".into(),
                message: "Overloaded".into(),
            }),
            ..Outcome::default()
        },
        "anthropic-tool-input-truncated-max-tokens.sse" => Outcome {
            invalid: vec![(
                "toolu_placeholder_02".into(),
                "write_file".into(),
                r##"{"path": "notes.md", "content": "# Ti"##.into(),
                TRUNCATED_BY_MAX_TOKENS.into(),
            )],
            usage: usage(300, 16),
            stop: Some(MaxTokens),
            ..Outcome::default()
        },
        "openai-text-include-usage.sse" => success(
            "I'm unable to provide real-time updates.",
            vec![],
            usage(14, 47),
            EndTurn,
        ),
        "openai-parallel-tool-calls.sse" => success(
            "",
            vec![
                call(
                    "call_g4Q1vRbE0CaHGOs5if8mHsBq",
                    "GetWeatherArgs",
                    json!({"city": "Edinburgh", "country": "UK", "units": "c"}),
                ),
                call(
                    "call_gWj3HQxZEHnFvyJLEHIiJKBV",
                    "get_stock_price",
                    json!({"ticker": "AAPL", "exchange": "NASDAQ"}),
                ),
            ],
            usage(149, 60),
            ToolUse,
        ),
        "openai-tool-call-finish-reason-stop.sse" => success(
            "",
            vec![call(
                "call_9rqjEc1DQRADTYGVV45LbZwL",
                "get_weather",
                json!({"city": "New York City"}),
            )],
            usage(44, 16),
            ToolUse,
        ),
        "ollama-single-chunk-toolcall-finish-stop.sse" => success(
            "",
            vec![call(
                "call_placeholder_o",
                "get_current_weather",
                json!({"location": "Paris"}),
            )],
            None,
            ToolUse,
        ),
        "ollama-parallel-calls-index-always-zero.sse" => success(
            "",
            vec![
                call(
                    "call_placeholder_h",
                    "file_write",
                    json!({"filePath": "hello.py", "content": "print(\"hello\")"}),
                ),
                call(
                    "call_placeholder_w",
                    "file_write",
                    json!({"filePath": "world.py", "content": "print(\"world\")"}),
                ),
            ],
            None,
            ToolUse,
        ),
        "openai-compat-tool-call-missing-index.sse" => success(
            "",
            vec![call(
                "call_placeholder_x",
                "get_current_weather",
                json!({"location": "Boston, MA"}),
            )],
            None,
            ToolUse,
        ),
        "openai-compat-arguments-as-object.sse" => success(
            "",
            vec![call(
                "call_local_1",
                "get_weather",
                json!({"location": "Paris", "unit": "celsius"}),
            )],
            None,
            ToolUse,
        ),
        "openai-midstream-error-object.sse" => Outcome {
            text: "Let me look".into(),
            error: Some(ModelError::Api {
                kind: "server_error".into(),
                message: "engine queue is full, request rejected".into(),
            }),
            ..Outcome::default()
        },
        "openrouter-comment-keepalive.sse" => success("Hello there", vec![], None, EndTurn),
        "data-field-without-space.sse" => success("ok", vec![], None, EndTurn),
        // Checked by hand in `every_case_file_gives_its_indexed_result`.
        "anthropic-compat-no-message-stop.sse"
        | "openai-compat-truncated-args-finish-tool-calls.sse" => return None,
        other => panic!("{other}: no expectation written for this case file; add one"),
    })
}

#[tokio::test]
async fn the_local_copy_holds_every_shared_case() {
    let local = sse_files(Path::new(LOCAL_DIR));
    assert!(local.len() >= 16, "{local:?}");
    if Path::new(SHARED_DIR).is_dir() {
        let shared = sse_files(Path::new(SHARED_DIR));
        let missing: Vec<_> = shared.difference(&local).collect();
        assert!(
            missing.is_empty(),
            "copy these from shared/cases/sse into tests/data/sse: {missing:?}"
        );
        for name in &shared {
            assert_eq!(
                std::fs::read(Path::new(SHARED_DIR).join(name)).unwrap(),
                std::fs::read(case_path(name)).unwrap(),
                "{name}: the copy differs from shared/cases/sse"
            );
        }
    }
}

#[tokio::test]
async fn every_case_file_gives_its_indexed_result() {
    for name in sse_files(Path::new(LOCAL_DIR)) {
        let items = parse_all_ways(&name).await;
        let got = summarise(&name, &items);
        match expected(&name) {
            Some(want) => assert_eq!(got, want, "{name}"),
            None => check_by_hand(&name, &got),
        }
        if let Some(e) = &got.error {
            let retryable = !matches!(e, ModelError::Decode(_));
            assert_eq!(e.is_retryable(), retryable, "{name}: {e:?}");
        }
    }
}

fn check_by_hand(name: &str, got: &Outcome) {
    match name {
        "anthropic-compat-no-message-stop.sse" => {
            assert_eq!(got.text, "How can I help you today?", "{name}");
            assert!(got.stop.is_none(), "{name}: never a normal end_turn");
            assert!(
                matches!(&got.error, Some(ModelError::Incomplete(m)) if m.contains("message_stop")),
                "{name}: {got:?}"
            );
            assert!(got.error.as_ref().unwrap().is_retryable());
        }
        "openai-compat-truncated-args-finish-tool-calls.sse" => {
            assert!(got.calls.is_empty(), "{name}: the call is never executed");
            assert_eq!(got.invalid.len(), 1, "{name}");
            let (id, tool, raw, error) = &got.invalid[0];
            assert_eq!(id, "call_placeholder_t");
            assert_eq!(tool, "write_file");
            assert_eq!(
                raw,
                r##"{"path":"report.md","content":"# Findings\n\nThe first"##
            );
            assert!(
                error.contains("not valid JSON") && error.contains("not executed"),
                "{error}"
            );
            assert_eq!(got.usage, usage(900, 300));
            assert_eq!(got.stop, Some(StopReason::ToolUse));
            assert!(got.error.is_none());
        }
        other => panic!("{other}: no hand check"),
    }
}

#[tokio::test]
async fn crlf_framing_gives_the_same_events() {
    for name in sse_files(Path::new(LOCAL_DIR)) {
        let raw = std::fs::read_to_string(case_path(&name)).unwrap();
        let crlf = raw.replace('\n', "\r\n");
        let lf = parse(&name, vec![Bytes::from(raw)]).await;
        let bytes = crlf.into_bytes();
        let split: Vec<Bytes> = bytes.chunks(3).map(Bytes::copy_from_slice).collect();
        assert_eq!(
            lf,
            parse(&name, split).await,
            "{name}: CRLF split mid-line differs"
        );
    }
}

#[tokio::test]
async fn multibyte_text_split_inside_a_character_survives() {
    let body = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"héllo ✓ 日本\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
    let chunks: Vec<Bytes> = body
        .as_bytes()
        .iter()
        .map(|b| Bytes::from(vec![*b]))
        .collect();
    let got = parse("openai-x.sse", chunks).await;
    assert_eq!(
        got[0],
        Ok(ModelEvent::TextDelta {
            text: "héllo ✓ 日本".into()
        })
    );
}

#[tokio::test]
async fn a_transport_error_mid_stream_ends_the_turn_with_that_error() {
    let raw = std::fs::read(case_path("anthropic-text-basic.sse")).unwrap();
    let items = vec![
        Ok(Bytes::copy_from_slice(&raw[..raw.len() / 2])),
        Err(ModelError::Connection("connection reset by peer".into())),
    ];
    let got: Vec<Item> = parse_anthropic_stream(futures::stream::iter(items))
        .collect()
        .await;
    assert_eq!(
        got.last(),
        Some(&Err(ModelError::Connection(
            "connection reset by peer".into()
        )))
    );
    assert!(!got.iter().any(|i| matches!(i, Ok(ModelEvent::Stop { .. }))));
}
