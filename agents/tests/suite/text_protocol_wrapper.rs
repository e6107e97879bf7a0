//! `TextToolProtocol` driven through `ModelClient` with a tiny scripted inner client.

use super::support::model::{assistant_calls, tool_results};
use ahelper_agents::model::text_protocol::{TextToolProtocol, parse_assistant_text};
use ahelper_agents::model::{
    Message, ModelClient, ModelError, ModelEvent, ModelRequest, ModelStream, StopReason, ToolCall,
    ToolSpec, Usage,
};
use futures::StreamExt;
use serde_json::json;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

type Item = Result<ModelEvent, ModelError>;

/// Plays one scripted list of stream items per request and records the requests it got.
#[derive(Default)]
struct Scripted {
    turns: Mutex<VecDeque<Vec<Item>>>,
    requests: Mutex<Vec<ModelRequest>>,
}

impl Scripted {
    fn new(turns: Vec<Vec<Item>>) -> Arc<Self> {
        Arc::new(Scripted {
            turns: Mutex::new(turns.into()),
            requests: Mutex::default(),
        })
    }

    fn requests(&self) -> Vec<ModelRequest> {
        self.requests.lock().unwrap().clone()
    }
}

impl ModelClient for Scripted {
    fn stream(&self, request: ModelRequest) -> ModelStream {
        self.requests.lock().unwrap().push(request);
        let items = self
            .turns
            .lock()
            .unwrap()
            .pop_front()
            .expect("no scripted turn left");
        Box::pin(futures::stream::iter(items))
    }

    fn describe(&self) -> String {
        "scripted test".into()
    }
}

fn delta(text: &str) -> Item {
    Ok(ModelEvent::TextDelta { text: text.into() })
}

fn stop(reason: StopReason) -> Item {
    Ok(ModelEvent::Stop { reason })
}

/// A turn whose text arrives in the given deltas and ends with `end_turn`.
fn turn(deltas: &[&str]) -> Vec<Item> {
    let mut items: Vec<Item> = deltas.iter().map(|d| delta(d)).collect();
    items.push(stop(StopReason::EndTurn));
    items
}

fn tools() -> Vec<ToolSpec> {
    let spec = |name: &str, props: serde_json::Value, required: &[&str]| ToolSpec {
        name: name.into(),
        description: format!("Use {name} when needed. Returns its output."),
        input_schema: json!({"type": "object", "properties": props, "required": required}),
    };
    vec![
        spec("read_file", json!({"path": {"type": "string"}}), &["path"]),
        spec(
            "write_file",
            json!({"path": {"type": "string"}, "content": {"type": "string"}}),
            &["path", "content"],
        ),
        spec("glob", json!({"pattern": {"type": "string"}}), &["pattern"]),
        spec(
            "run_command",
            json!({"command": {"type": "string"}}),
            &["command"],
        ),
    ]
}

fn request(messages: Vec<Message>) -> ModelRequest {
    ModelRequest {
        model: "m".into(),
        system_shared_len: 0,
        system: "You are a coding assistant.".into(),
        messages,
        tools: tools(),
        max_output_tokens: 1000,
    }
}

fn user(text: &str) -> Vec<Message> {
    vec![Message::user_text(text)]
}

async fn run(client: &TextToolProtocol, req: ModelRequest) -> Vec<Item> {
    client.stream(req).collect().await
}

fn shown_text(items: &[Item]) -> String {
    items
        .iter()
        .filter_map(|i| match i {
            Ok(ModelEvent::TextDelta { text }) => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

fn tool_calls(items: &[Item]) -> Vec<ToolCall> {
    items
        .iter()
        .filter_map(|i| match i {
            Ok(ModelEvent::ToolCall(c)) => Some(c.clone()),
            _ => None,
        })
        .collect()
}

fn last_stop(items: &[Item]) -> StopReason {
    match items.last() {
        Some(Ok(ModelEvent::Stop { reason })) => reason.clone(),
        other => panic!("stream did not end with Stop: {other:?}"),
    }
}

const READ_A: &str =
    "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.rs\"}}\n</tool_call>";

#[tokio::test]
async fn split_opener_is_held_back_and_call_emitted() {
    let inner = Scripted::new(vec![turn(&[
        "I'll read it.\n<tool_",
        "call>\n{\"name\": \"read_file\", ",
        "\"arguments\": {\"path\": \"a.rs\"}}\n</tool_call>",
    ])]);
    let client = TextToolProtocol::new(inner.clone());
    let items = run(&client, request(user("read a.rs"))).await;
    assert_eq!(shown_text(&items), "I'll read it.\n");
    assert!(
        items
            .iter()
            .all(|i| !matches!(i, Ok(ModelEvent::TextDelta { text }) if text.is_empty()))
    );
    assert_eq!(
        tool_calls(&items),
        vec![ToolCall {
            id: "call_text_1".into(),
            name: "read_file".into(),
            input: json!({"path": "a.rs"}),
        }]
    );
    assert_eq!(last_stop(&items), StopReason::ToolUse);
}

#[tokio::test]
async fn other_openers_split_across_deltas_are_held_back() {
    for deltas in [
        vec![
            "Running.\n[TOOL_",
            "CALLS]run_command[ARGS]{\"command\": \"ls\"}",
        ],
        vec![
            "Running.\n<",
            "function=run_command>\n<parameter=command>\nls\n</parameter>\n</function>",
        ],
        vec![
            "Running.\n<function",
            "=run_command>\n<parameter=command>\nls\n</parameter>\n</function>",
        ],
    ] {
        let inner = Scripted::new(vec![turn(&deltas)]);
        let client = TextToolProtocol::new(inner);
        let items = run(&client, request(user("ls"))).await;
        assert_eq!(shown_text(&items), "Running.\n", "{deltas:?}");
        let calls = tool_calls(&items);
        assert_eq!(calls.len(), 1, "{deltas:?}");
        assert_eq!(calls[0].input, json!({"command": "ls"}));
    }
}

#[tokio::test]
async fn false_alarm_prefix_is_released_and_prose_after_block_is_shown_at_the_end() {
    let inner = Scripted::new(vec![turn(&[
        "Compare a <",
        "b and <tool",
        "s>.\n",
        READ_A,
        "\nThen I will answer.",
    ])]);
    let client = TextToolProtocol::new(inner);
    let items = run(&client, request(user("x"))).await;
    assert_eq!(
        shown_text(&items),
        "Compare a <b and <tools>.\n\nThen I will answer."
    );
    assert_eq!(tool_calls(&items).len(), 1);
}

#[tokio::test]
async fn retry_resets_the_buffer_and_is_forwarded() {
    let retry = ModelEvent::Retry {
        attempt: 2,
        max_attempts: 3,
        delay_ms: 10,
        reason: "HTTP 529".into(),
    };
    let inner = Scripted::new(vec![vec![
        delta("First try <tool_call>{\"name\": \"run_command\", \"argu"),
        Ok(retry.clone()),
        delta("Second try, no tools needed."),
        Ok(ModelEvent::Usage(Usage {
            input_tokens: 10,
            output_tokens: 5,
            ..Default::default()
        })),
        stop(StopReason::EndTurn),
    ]]);
    let client = TextToolProtocol::new(inner);
    let items = run(&client, request(user("x"))).await;
    let events: Vec<ModelEvent> = items.into_iter().map(Result::unwrap).collect();
    assert_eq!(
        events,
        vec![
            ModelEvent::TextDelta {
                text: "First try ".into()
            },
            retry,
            ModelEvent::TextDelta {
                text: "Second try, no tools needed.".into()
            },
            ModelEvent::Usage(Usage {
                input_tokens: 10,
                output_tokens: 5,
                ..Default::default()
            }),
            ModelEvent::Stop {
                reason: StopReason::EndTurn
            },
        ]
    );
}

#[tokio::test]
async fn ids_are_unique_within_and_across_turns() {
    let two = format!(
        "{READ_A}\n<tool_call>{{\"name\": \"glob\", \"arguments\": {{\"pattern\": \"*.rs\"}}}}</tool_call>"
    );
    let inner = Scripted::new(vec![turn(&[&two]), turn(&[READ_A]), turn(&[READ_A])]);
    let client = TextToolProtocol::new(inner);
    let first = run(&client, request(user("x"))).await;
    let ids: Vec<String> = tool_calls(&first).into_iter().map(|c| c.id).collect();
    assert_eq!(ids, ["call_text_1", "call_text_2"]);

    // The next turn's history holds those calls; new ids continue after them.
    let mut history = user("x");
    let calls = tool_calls(&first);
    let uses: Vec<_> = calls
        .iter()
        .map(|c| (c.id.as_str(), c.name.as_str(), c.input.clone()))
        .collect();
    history.push(assistant_calls("", &uses));
    let results: Vec<_> = ids.iter().map(|id| (id.as_str(), "ok", false)).collect();
    history.push(tool_results(&results));
    let second = run(&client, request(history)).await;
    assert_eq!(tool_calls(&second)[0].id, "call_text_3");

    // Even with the old turns dropped from the history, this wrapper does not reuse ids.
    let third = run(&client, request(user("y"))).await;
    assert_eq!(tool_calls(&third)[0].id, "call_text_4");
}

#[tokio::test]
async fn invalid_calls_become_invalid_tool_call_events_and_stop_is_tool_use() {
    let inner = Scripted::new(vec![
        turn(&[
            "<tool_call>\n{\"name\": \"security-review\", \"arguments\": {}}\n</tool_call>\n",
            READ_A,
        ]),
        vec![
            delta(
                "<tool_call>\n{\"name\": \"run_command\", \"arguments\": {\"command\": \"echo hi",
            ),
            stop(StopReason::MaxTokens),
        ],
    ]);
    let client = TextToolProtocol::new(inner);
    let items = run(&client, request(user("x"))).await;
    let events: Vec<&ModelEvent> = items.iter().map(|i| i.as_ref().unwrap()).collect();
    let ModelEvent::InvalidToolCall {
        id,
        name,
        raw_arguments,
        error,
    } = events[0]
    else {
        panic!("expected an invalid tool call, got {:?}", events[0]);
    };
    assert_eq!(id, "call_text_1");
    assert_eq!(name, "security-review");
    assert!(raw_arguments.contains("security-review"));
    assert!(error.starts_with(
        "unknown tool `security-review`; available: read_file, write_file, glob, run_command"
    ));
    assert!(matches!(events[1], ModelEvent::ToolCall(c) if c.id == "call_text_2"));
    assert_eq!(last_stop(&items), StopReason::ToolUse);

    let items = run(&client, request(user("x"))).await;
    assert_eq!(shown_text(&items), "");
    match items[0].as_ref().unwrap() {
        ModelEvent::InvalidToolCall { name, error, .. } => {
            assert_eq!(name, "run_command");
            assert!(error.contains("cut off"), "{error}");
            assert!(error.contains("output-token limit (max_tokens)"), "{error}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(last_stop(&items), StopReason::ToolUse);
}

#[tokio::test]
async fn plain_answers_keep_the_inner_stop_reason_and_empty_replies_stay_empty() {
    let inner = Scripted::new(vec![
        turn(&["The answer ", "is 42."]),
        vec![stop(StopReason::EndTurn)],
        vec![delta("cut"), stop(StopReason::MaxTokens)],
    ]);
    let client = TextToolProtocol::new(inner);
    let items = run(&client, request(user("x"))).await;
    assert_eq!(shown_text(&items), "The answer is 42.");
    assert_eq!(last_stop(&items), StopReason::EndTurn);

    let items = run(&client, request(user("x"))).await;
    assert_eq!(
        items.into_iter().map(Result::unwrap).collect::<Vec<_>>(),
        vec![ModelEvent::Stop {
            reason: StopReason::EndTurn
        }]
    );

    let items = run(&client, request(user("x"))).await;
    assert_eq!(last_stop(&items), StopReason::MaxTokens);
}

#[tokio::test]
async fn bare_json_reply_is_held_then_called_or_released() {
    let inner = Scripted::new(vec![
        turn(&[
            "{\"name\": \"read_file\", ",
            "\"arguments\": {\"path\": \"a.rs\"}}",
        ]),
        turn(&["{\"answer\": ", "42}"]),
    ]);
    let client = TextToolProtocol::new(inner);
    let items = run(&client, request(user("x"))).await;
    assert_eq!(shown_text(&items), "");
    assert_eq!(tool_calls(&items).len(), 1);

    let items = run(&client, request(user("x"))).await;
    assert_eq!(shown_text(&items), "{\"answer\": 42}");
    assert_eq!(last_stop(&items), StopReason::EndTurn);
}

#[tokio::test]
async fn errors_are_forwarded_and_a_stream_without_stop_is_incomplete() {
    let inner = Scripted::new(vec![
        vec![delta("hi"), Err(ModelError::Connection("reset".into()))],
        vec![delta("hi")],
    ]);
    let client = TextToolProtocol::new(inner);
    let items = run(&client, request(user("x"))).await;
    assert_eq!(
        items.last(),
        Some(&Err(ModelError::Connection("reset".into())))
    );
    let items = run(&client, request(user("x"))).await;
    assert!(matches!(items.last(), Some(Err(ModelError::Incomplete(_)))));
}

#[tokio::test]
async fn native_events_pass_through() {
    let call = ToolCall {
        id: "native_1".into(),
        name: "glob".into(),
        input: json!({"pattern": "*"}),
    };
    let inner = Scripted::new(vec![vec![
        Ok(ModelEvent::ToolCall(call.clone())),
        stop(StopReason::EndTurn),
    ]]);
    let client = TextToolProtocol::new(inner);
    let items = run(&client, request(user("x"))).await;
    assert_eq!(tool_calls(&items), vec![call]);
    assert_eq!(last_stop(&items), StopReason::ToolUse);
}

#[tokio::test]
async fn without_offered_tools_text_passes_through() {
    let inner = Scripted::new(vec![turn(&["Here: ", READ_A])]);
    let client = TextToolProtocol::new(inner.clone());
    let mut req = request(user("x"));
    req.tools.clear();
    let items = run(&client, req).await;
    assert_eq!(shown_text(&items), format!("Here: {READ_A}"));
    assert!(tool_calls(&items).is_empty());
    assert_eq!(inner.requests()[0].system, "You are a coding assistant.");
}

#[tokio::test]
async fn request_offers_tools_as_text_and_rerenders_history() {
    let inner = Scripted::new(vec![turn(&["ok"])]);
    let client = TextToolProtocol::new(inner.clone());
    assert_eq!(client.describe(), "scripted test (text tool protocol)");
    let history = vec![
        Message::user_text("read a.rs then delete b"),
        assistant_calls(
            "Reading.",
            &[
                ("call_text_1", "read_file", json!({"path": "a.rs"})),
                ("call_text_2", "run_command", json!({"command": "rm b"})),
            ],
        ),
        tool_results(&[
            ("call_text_1", "fn a() {}", false),
            ("call_text_2", "denied by the user", true),
        ]),
    ];
    let _ = run(&client, request(history)).await;
    let sent = &inner.requests()[0];
    assert!(sent.tools.is_empty());
    let system = &sent.system;
    assert!(system.starts_with("You are a coding assistant.\n\n"));
    for needle in [
        "<tool_call>\n{\"name\": \"<tool name>\", \"arguments\": {<arguments as a JSON object>}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"<path>\"}}\n</tool_call>",
        "Write one <tool_call> block per call, then stop and wait for the result.",
        "### run_command\nUse run_command when needed. Returns its output.\nArguments (JSON Schema): {",
        "\"required\":[\"path\",\"content\"]",
    ] {
        assert!(system.contains(needle), "missing {needle:?} in\n{system}");
    }
    assert_eq!(sent.messages.len(), 3);
    assert_eq!(
        sent.messages[0],
        Message::user_text("read a.rs then delete b")
    );
    assert_eq!(
        sent.messages[1],
        Message::assistant_text(
            "Reading.\n<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.rs\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"run_command\", \"arguments\": {\"command\": \"rm b\"}}\n</tool_call>"
        )
    );
    assert_eq!(
        sent.messages[2],
        Message::user_text(
            "<tool_result id=\"call_text_1\" name=\"read_file\">\nfn a() {}\n</tool_result>\n<tool_result id=\"call_text_2\" name=\"run_command\" error=\"true\">\ndenied by the user\n</tool_result>"
        )
    );
    // The re-rendered calls parse back to the same calls.
    let parsed = parse_assistant_text(&sent.messages[1].text(), &tools(), &|_| false);
    assert_eq!(parsed.text, "Reading.");
    assert_eq!(parsed.calls.len(), 2);
    assert!(parsed.calls.iter().all(Result::is_ok));
}

fn case_files() -> Vec<(String, String)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/toolcall-text");
    let mut out: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read_to_string(&p).unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

/// Splits `text` into deltas: one per char, or chunks of a pseudo-random size from `seed`.
fn chunks(text: &str, seed: Option<u64>) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let mut state = seed.unwrap_or(0);
    while i < chars.len() {
        let n = match seed {
            None => 1,
            Some(_) => {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                1 + (state >> 33) as usize % 7
            }
        };
        let end = (i + n).min(chars.len());
        out.push(chars[i..end].iter().collect());
        i = end;
    }
    out
}

#[tokio::test]
async fn every_case_file_streamed_in_pieces_matches_the_parser_and_hides_markup() {
    let openers = [
        "<tool_call>",
        "<function=",
        "[TOOL_CALLS]",
        "</function>",
        "</tool_call>",
        "<parameter=",
    ];
    let read_only = |n: &str| matches!(n, "read_file" | "glob");
    for (name, text) in case_files() {
        let expected = parse_assistant_text(&text, &tools(), &read_only);
        for seed in [None, Some(1), Some(7), Some(42)] {
            let deltas = chunks(&text, seed);
            let refs: Vec<&str> = deltas.iter().map(String::as_str).collect();
            let inner = Scripted::new(vec![turn(&refs)]);
            let client = TextToolProtocol::new(inner).with_read_only_tools(["read_file", "glob"]);
            let items = run(&client, request(user("x"))).await;
            let shown = shown_text(&items);
            let calls: Vec<(String, serde_json::Value)> = tool_calls(&items)
                .into_iter()
                .map(|c| (c.name, c.input))
                .collect();
            let want: Vec<(String, serde_json::Value)> = expected
                .calls
                .iter()
                .filter_map(|c| c.as_ref().ok())
                .map(|c| (c.name.clone(), c.input.clone()))
                .collect();
            assert_eq!(calls, want, "{name} {seed:?}");
            let invalid = items
                .iter()
                .filter(|i| matches!(i, Ok(ModelEvent::InvalidToolCall { .. })))
                .count();
            assert_eq!(
                invalid,
                expected.calls.len() - want.len(),
                "{name} {seed:?}"
            );
            if expected.calls.is_empty() {
                assert_eq!(shown, text, "{name} {seed:?}");
                assert_eq!(last_stop(&items), StopReason::EndTurn);
            } else {
                for o in openers {
                    assert!(!shown.contains(o), "{name} {seed:?} showed {o}: {shown:?}");
                }
                assert_eq!(last_stop(&items), StopReason::ToolUse);
            }
        }
    }
}
