//! Expectations shared by the SSE case tests: what each file of `tests/data/sse/` must produce
//! according to `tests/data/sse/INDEX.md`, and a summary of a turn's events to compare against.
//! Used by `model_sse_cases.rs` (parsers fed directly) and `providers_fake_server.rs` (the same
//! files replayed over real HTTP by the fake LLM server).

#![allow(dead_code)]

use ahelper_agents::model::tool_args::TRUNCATED_BY_MAX_TOKENS;
use ahelper_agents::model::{ModelError, ModelEvent, StopReason, ToolCall, Usage};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The SSE case files (see `tests/data/README.md`).
pub const LOCAL_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/sse");

/// One item of a model stream.
pub type Item = Result<ModelEvent, ModelError>;

/// The `.sse` file names in `dir`, sorted.
pub fn sse_files(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".sse"))
        .collect()
}

/// The path of case file `name` in [`LOCAL_DIR`].
pub fn case_path(name: &str) -> PathBuf {
    Path::new(LOCAL_DIR).join(name)
}

/// The result of one turn, summarised.
#[derive(Debug, Default, PartialEq)]
pub struct Outcome {
    pub text: String,
    pub calls: Vec<ToolCall>,
    /// (id, name, raw arguments, error)
    pub invalid: Vec<(String, String, String, String)>,
    pub usage: Option<Usage>,
    pub stop: Option<StopReason>,
    pub error: Option<ModelError>,
}

/// Folds a turn's events into an [`Outcome`], asserting that it ends with exactly one `Stop`
/// or one error, that nothing follows the end and that no text delta is empty. Panics on a
/// `Retry` (callers use one attempt).
pub fn summarise(name: &str, items: &[Item]) -> Outcome {
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

pub fn call(id: &str, name: &str, input: Value) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        input,
    }
}

pub fn usage(input_tokens: u64, output_tokens: u64) -> Option<Usage> {
    Some(Usage {
        input_tokens,
        output_tokens,
        ..Default::default()
    })
}

pub fn success(
    text: &str,
    calls: Vec<ToolCall>,
    usage: Option<Usage>,
    stop: StopReason,
) -> Outcome {
    Outcome {
        text: text.into(),
        calls,
        usage,
        stop: Some(stop),
        ..Outcome::default()
    }
}

/// What INDEX.md says each file must produce (`None` for files checked by hand below).
pub fn expected(name: &str) -> Option<Outcome> {
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

pub fn check_by_hand(name: &str, got: &Outcome) {
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
