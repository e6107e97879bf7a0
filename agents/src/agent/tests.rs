//! Unit tests of the agent loop with an in-process scripted model and test tools.

use super::*;
use crate::model::{ModelError, ModelEvent, ModelRequest, ModelStream, ToolCall, ToolSpec};
use crate::permissions::{
    DenyPrompter, PermissionMode, PermissionPolicy, PromptAnswer, PromptRequest, Prompter,
};
use crate::tools::{Tool, ToolKind};
use crate::tools::{ToolError, ToolOutput};
use gate::RulePersistence;
use serde_json::json;
use std::sync::Mutex;
use std::sync::RwLock;
use std::time::{Duration, Instant};

type Turn = Vec<Result<ModelEvent, ModelError>>;

/// Plays one scripted turn per request and records the requests.
struct Script {
    turns: Mutex<Vec<Turn>>,
    requests: Mutex<Vec<ModelRequest>>,
    hang_after: bool,
}

impl Script {
    fn new(turns: Vec<Turn>) -> Arc<Self> {
        Arc::new(Script {
            turns: Mutex::new(turns),
            requests: Mutex::new(vec![]),
            hang_after: false,
        })
    }
}

impl ModelClient for Script {
    fn stream(&self, request: ModelRequest) -> ModelStream {
        self.requests.lock().unwrap().push(request);
        let mut turns = self.turns.lock().unwrap();
        if turns.is_empty() {
            if self.hang_after {
                return Box::pin(futures::stream::pending());
            }
            return Box::pin(futures::stream::iter(vec![
                Ok(ModelEvent::TextDelta {
                    text: "done".into(),
                }),
                Ok(ModelEvent::Stop {
                    reason: StopReason::EndTurn,
                }),
            ]));
        }
        Box::pin(futures::stream::iter(turns.remove(0)))
    }
    fn describe(&self) -> String {
        "script".into()
    }
}

fn call(id: &str, name: &str, input: Value) -> Result<ModelEvent, ModelError> {
    Ok(ModelEvent::ToolCall(ToolCall {
        id: id.into(),
        name: name.into(),
        input,
    }))
}

fn stop(reason: StopReason) -> Result<ModelEvent, ModelError> {
    Ok(ModelEvent::Stop { reason })
}

fn text(t: &str) -> Result<ModelEvent, ModelError> {
    Ok(ModelEvent::TextDelta { text: t.into() })
}

/// A read-only tool that echoes its `value` after `delay_ms`, recording start/end times.
struct Echo {
    log: Arc<Mutex<Vec<(String, Instant, Instant)>>>,
}

#[async_trait::async_trait]
impl Tool for Echo {
    fn name(&self) -> &'static str {
        "echo"
    }
    fn description(&self) -> &'static str {
        "echo"
    }
    fn input_schema(&self) -> Value {
        json!({"type":"object"})
    }
    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }
    fn permission_subject(&self, _input: &Value) -> Option<String> {
        None
    }
    async fn call(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let start = Instant::now();
        let delay = input["delay_ms"].as_u64().unwrap_or(0);
        tokio::select! {
            _ = tokio::time::sleep(std::time::Duration::from_millis(delay)) => {}
            _ = ctx.cancel.cancelled() => return Err(ToolError::new("cancelled")),
        }
        let v = input["value"].as_str().unwrap_or("").to_string();
        self.log
            .lock()
            .unwrap()
            .push((v.clone(), start, Instant::now()));
        if v == "fail" {
            return Err(ToolError::new("echo failed as asked"));
        }
        Ok(ToolOutput::ok(v))
    }
}

/// An "edit" tool so permission paths are exercised.
struct Touch;

#[async_trait::async_trait]
impl Tool for Touch {
    fn name(&self) -> &'static str {
        "touch"
    }
    fn description(&self) -> &'static str {
        "touch"
    }
    fn input_schema(&self) -> Value {
        json!({"type":"object"})
    }
    fn kind(&self) -> ToolKind {
        ToolKind::Edit
    }
    fn permission_subject(&self, input: &Value) -> Option<String> {
        input["path"].as_str().map(str::to_string)
    }
    async fn call(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let p = ctx
            .workspace_root
            .join(input["path"].as_str().unwrap_or("x"));
        std::fs::write(&p, "touched").map_err(|e| ToolError::new(e.to_string()))?;
        Ok(ToolOutput::ok("ok"))
    }
}

struct Answer(PromptAnswer, Mutex<Vec<PromptRequest>>);

#[async_trait::async_trait]
impl Prompter for Answer {
    async fn ask(&self, request: &PromptRequest) -> PromptAnswer {
        self.1.lock().unwrap().push(request.clone());
        self.0
    }
    fn is_interactive(&self) -> bool {
        true
    }
}

struct Fixture {
    agent: Agent,
    dir: tempfile::TempDir,
    log: Arc<Mutex<Vec<(String, Instant, Instant)>>>,
}

fn fixture(
    client: Arc<dyn ModelClient>,
    prompter: Arc<dyn Prompter>,
    mode: PermissionMode,
) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(Mutex::new(vec![]));
    let mut tools = ToolRegistry::new();
    tools.register(Arc::new(Echo { log: log.clone() }));
    tools.register(Arc::new(Touch));
    let policy = Arc::new(RwLock::new(PermissionPolicy {
        mode,
        ..Default::default()
    }));
    let gate = PermissionGate::new(policy, prompter, RulePersistence::InMemory);
    let ctx = ToolContext::new(dir.path()).unwrap();
    let agent = Agent::builder(client, "m", ctx, gate)
        .tools(tools)
        .system_prompt("sys")
        .build()
        .unwrap();
    Fixture { agent, dir, log }
}

#[tokio::test]
async fn completes_and_feeds_results_back_in_order() {
    let script = Script::new(vec![
        vec![
            text("let me look"),
            call("a", "echo", json!({"value": "one"})),
            call("b", "echo", json!({"value": "fail"})),
            stop(StopReason::ToolUse),
        ],
        vec![text("all good"), stop(StopReason::EndTurn)],
    ]);
    let mut f = fixture(
        script.clone(),
        Arc::new(DenyPrompter),
        PermissionMode::Default,
    );
    let out = f.agent.run("go", &CancellationToken::new()).await;
    assert_eq!(out.stop_reason, AgentStopReason::Completed);
    assert_eq!(out.final_text, "all good");
    assert_eq!(out.turns, 2);
    let reqs = script.requests.lock().unwrap();
    let results = &reqs[1].messages[2];
    assert_eq!(results.role, Role::User);
    assert_eq!(
        results.content,
        vec![
            ContentBlock::ToolResult {
                tool_use_id: "a".into(),
                content: "one".into(),
                is_error: false
            },
            ContentBlock::ToolResult {
                tool_use_id: "b".into(),
                content: "echo failed as asked".into(),
                is_error: true
            },
        ]
    );
}

#[tokio::test]
async fn read_only_calls_run_concurrently() {
    let script = Script::new(vec![vec![
        call("a", "echo", json!({"value": "1", "delay_ms": 150})),
        call("b", "echo", json!({"value": "2", "delay_ms": 150})),
        call("c", "echo", json!({"value": "3", "delay_ms": 150})),
        stop(StopReason::ToolUse),
    ]]);
    let mut f = fixture(script, Arc::new(DenyPrompter), PermissionMode::Default);
    f.agent.run("go", &CancellationToken::new()).await;
    let log = f.log.lock().unwrap();
    assert_eq!(log.len(), 3);
    // all three overlapped: every start precedes every end
    let last_start = log.iter().map(|l| l.1).max().unwrap();
    let first_end = log.iter().map(|l| l.2).min().unwrap();
    assert!(last_start < first_end, "calls ran one after another");
}

#[tokio::test]
async fn max_turns_stops() {
    let turns = (0..10)
        .map(|i| {
            vec![
                call(&format!("c{i}"), "echo", json!({"value": i.to_string()})),
                stop(StopReason::ToolUse),
            ]
        })
        .collect();
    let mut f = fixture(
        Script::new(turns),
        Arc::new(DenyPrompter),
        PermissionMode::Default,
    );
    f.agent.settings.max_turns = 3;
    let out = f.agent.run("go", &CancellationToken::new()).await;
    assert_eq!(out.stop_reason, AgentStopReason::MaxTurns);
    assert_eq!(out.turns, 3);
}

#[tokio::test]
async fn repeated_identical_call_stops_after_three() {
    let turns = (0..10)
        .map(|i| {
            vec![
                call(&format!("c{i}"), "echo", json!({"value": "same"})),
                stop(StopReason::ToolUse),
            ]
        })
        .collect();
    let mut f = fixture(
        Script::new(turns),
        Arc::new(DenyPrompter),
        PermissionMode::Default,
    );
    let out = f.agent.run("go", &CancellationToken::new()).await;
    assert_eq!(out.stop_reason, AgentStopReason::RepeatedCall);
    assert_eq!(out.turns, 3);
    assert_eq!(
        f.log.lock().unwrap().len(),
        2,
        "the third identical call is not run"
    );
    // history stays valid: last message holds a result for the last call
    let last = f.agent.history.last().unwrap();
    assert!(matches!(
        &last.content[0],
        ContentBlock::ToolResult { is_error: true, .. }
    ));
}

#[tokio::test]
async fn model_error_stops_with_error() {
    let script = Script::new(vec![vec![
        text("Hel"),
        Err(ModelError::Api {
            kind: "overloaded_error".into(),
            message: "Overloaded".into(),
        }),
    ]]);
    let mut f = fixture(script, Arc::new(DenyPrompter), PermissionMode::Default);
    let out = f.agent.run("go", &CancellationToken::new()).await;
    assert_eq!(out.stop_reason, AgentStopReason::Error);
    assert!(out.error.unwrap().contains("Overloaded"));
}

#[tokio::test]
async fn stream_without_stop_is_an_error_not_end_turn() {
    let script = Script::new(vec![vec![text("How can I help")]]);
    let mut f = fixture(script, Arc::new(DenyPrompter), PermissionMode::Default);
    let out = f.agent.run("go", &CancellationToken::new()).await;
    assert_eq!(out.stop_reason, AgentStopReason::Error);
}

#[tokio::test]
async fn retry_discards_partial_output() {
    let script = Script::new(vec![vec![
        text("partial garbage"),
        Ok(ModelEvent::Retry {
            attempt: 2,
            max_attempts: 3,
            delay_ms: 0,
            reason: "HTTP 529".into(),
        }),
        text("clean answer"),
        stop(StopReason::EndTurn),
    ]]);
    let mut f = fixture(script, Arc::new(DenyPrompter), PermissionMode::Default);
    let out = f.agent.run("go", &CancellationToken::new()).await;
    assert_eq!(out.final_text, "clean answer");
}

#[tokio::test]
async fn invalid_tool_call_is_not_run_and_model_is_told() {
    let script = Script::new(vec![
        vec![
            Ok(ModelEvent::InvalidToolCall {
                id: "t1".into(),
                name: "touch".into(),
                raw_arguments: "{\"path\": \"notes.md\", \"content\": \"# Ti".into(),
                error: "output truncated by max_tokens".into(),
            }),
            stop(StopReason::MaxTokens),
        ],
        vec![text("ok"), stop(StopReason::EndTurn)],
    ]);
    let mut f = fixture(
        script.clone(),
        Arc::new(DenyPrompter),
        PermissionMode::Bypass,
    );
    f.agent.run("go", &CancellationToken::new()).await;
    assert!(!f.dir.path().join("notes.md").exists());
    let reqs = script.requests.lock().unwrap();
    match &reqs[1].messages[2].content[0] {
        ContentBlock::ToolResult {
            content, is_error, ..
        } => {
            assert!(is_error);
            assert!(content.contains("truncated"), "{content}");
        }
        other => panic!("{other:?}"),
    }
}

/// Seen with Qwen2.5-Coder-1.5B under the text protocol: the model wrote the same unusable call
/// (a fenced JSON call) every turn and burned all of `max_turns` on the same error.
#[tokio::test]
async fn repeated_identical_invalid_call_stops_after_three() {
    let invalid = || {
        vec![
            Ok(ModelEvent::InvalidToolCall {
                id: String::new(),
                name: "read_file".into(),
                raw_arguments: "```json {...} ```".into(),
                error: "this tool call was written inside a code fence".into(),
            }),
            stop(StopReason::ToolUse),
        ]
    };
    let script = Script::new((0..10).map(|_| invalid()).collect());
    let mut f = fixture(
        script.clone(),
        Arc::new(DenyPrompter),
        PermissionMode::Default,
    );
    let out = f.agent.run("go", &CancellationToken::new()).await;
    assert_eq!(out.stop_reason, AgentStopReason::RepeatedCall);
    assert_eq!(out.turns, 3);
    let error = out.error.unwrap();
    assert!(error.contains("same unusable tool call"), "{error}");
    assert!(error.contains("code fence"), "{error}");
    // every invalid call got its error result: the history stays valid for a later prompt
    let last = f.agent.history.last().unwrap();
    assert!(matches!(
        &last.content[0],
        ContentBlock::ToolResult { is_error: true, .. }
    ));

    // Different invalid calls, or an invalid call between valid ones, do not stop the loop.
    let script = Script::new(vec![
        invalid(),
        vec![
            call("c1", "echo", json!({"value": "a"})),
            stop(StopReason::ToolUse),
        ],
        invalid(),
        invalid(),
        vec![text("done"), stop(StopReason::EndTurn)],
    ]);
    let mut f = fixture(script, Arc::new(DenyPrompter), PermissionMode::Default);
    let out = f.agent.run("go", &CancellationToken::new()).await;
    assert_eq!(out.stop_reason, AgentStopReason::Completed);
    assert_eq!(out.turns, 5);
}

#[tokio::test]
async fn non_interactive_ask_is_denied_at_once() {
    let script = Script::new(vec![vec![
        call("t", "touch", json!({"path": "a.txt"})),
        stop(StopReason::ToolUse),
    ]]);
    let mut f = fixture(
        script.clone(),
        Arc::new(DenyPrompter),
        PermissionMode::Default,
    );
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        f.agent.run("go", &CancellationToken::new()),
    )
    .await
    .expect("no hang");
    assert_eq!(out.stop_reason, AgentStopReason::Completed);
    assert!(!f.dir.path().join("a.txt").exists());
    let reqs = script.requests.lock().unwrap();
    match &reqs[1].messages[2].content[0] {
        ContentBlock::ToolResult {
            content, is_error, ..
        } => {
            assert!(is_error);
            assert!(content.contains("non-interactive"), "{content}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn prompt_answers_apply_and_always_adds_rule() {
    let script = Script::new(vec![
        vec![
            call("t1", "touch", json!({"path": "a.txt"})),
            stop(StopReason::ToolUse),
        ],
        vec![
            call("t2", "touch", json!({"path": "a.txt"})),
            stop(StopReason::ToolUse),
        ],
    ]);
    let prompter = Arc::new(Answer(PromptAnswer::AllowAlways, Mutex::new(vec![])));
    let mut f = fixture(script, prompter.clone(), PermissionMode::Default);
    f.agent.run("go", &CancellationToken::new()).await;
    assert!(f.dir.path().join("a.txt").exists());
    assert_eq!(f.agent.gate.policy.read().unwrap().rules.allow.len(), 1);
    assert!(!prompter.1.lock().unwrap().is_empty());
}

#[tokio::test]
async fn plan_mode_refuses_edits() {
    let script = Script::new(vec![vec![
        call("t", "touch", json!({"path": "a.txt"})),
        stop(StopReason::ToolUse),
    ]]);
    let mut f = fixture(
        script,
        Arc::new(Answer(PromptAnswer::AllowOnce, Mutex::new(vec![]))),
        PermissionMode::Plan,
    );
    f.agent.run("go", &CancellationToken::new()).await;
    assert!(!f.dir.path().join("a.txt").exists());
}

#[tokio::test]
async fn cancel_during_tool_stops_and_keeps_history_valid() {
    let script = Script::new(vec![vec![
        call("a", "echo", json!({"value": "x", "delay_ms": 10_000})),
        stop(StopReason::ToolUse),
    ]]);
    let mut f = fixture(script, Arc::new(DenyPrompter), PermissionMode::Default);
    let cancel = CancellationToken::new();
    let c2 = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        c2.cancel();
    });
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        f.agent.run("go", &cancel),
    )
    .await
    .unwrap();
    assert_eq!(out.stop_reason, AgentStopReason::Cancelled);
    let last = f.agent.history.last().unwrap();
    assert!(
        matches!(&last.content[0], ContentBlock::ToolResult { tool_use_id, is_error: true, .. } if tool_use_id == "a")
    );
}

#[tokio::test]
async fn cancel_during_stream() {
    let script = Arc::new(Script {
        turns: Mutex::new(vec![]),
        requests: Mutex::new(vec![]),
        hang_after: true,
    });
    let mut f = fixture(script, Arc::new(DenyPrompter), PermissionMode::Default);
    let cancel = CancellationToken::new();
    let c2 = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        c2.cancel();
    });
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        f.agent.run("go", &cancel),
    )
    .await
    .unwrap();
    assert_eq!(out.stop_reason, AgentStopReason::Cancelled);
}

#[tokio::test]
async fn time_limit_and_token_budget() {
    let script = Arc::new(Script {
        turns: Mutex::new(vec![]),
        requests: Mutex::new(vec![]),
        hang_after: true,
    });
    let mut f = fixture(script, Arc::new(DenyPrompter), PermissionMode::Default);
    f.agent.settings.deadline =
        Some(tokio::time::Instant::now() + std::time::Duration::from_millis(50));
    let out = f.agent.run("go", &CancellationToken::new()).await;
    assert_eq!(out.stop_reason, AgentStopReason::TimeLimit);

    let turns = (0..5)
        .map(|i| {
            vec![
                call(&format!("c{i}"), "echo", json!({"value": i.to_string()})),
                Ok(ModelEvent::Usage(Usage {
                    input_tokens: 600,
                    output_tokens: 10,
                })),
                stop(StopReason::ToolUse),
            ]
        })
        .collect();
    let mut f = fixture(
        Script::new(turns),
        Arc::new(DenyPrompter),
        PermissionMode::Default,
    );
    f.agent.settings.token_budget = Some(1_000);
    let out = f.agent.run("go", &CancellationToken::new()).await;
    assert_eq!(out.stop_reason, AgentStopReason::TokenBudget);
    assert_eq!(out.turns, 2);
}

#[tokio::test]
async fn long_tool_output_is_truncated_with_marker() {
    let big = "y".repeat(50_000);
    let script = Script::new(vec![vec![
        call("a", "echo", json!({"value": big})),
        stop(StopReason::ToolUse),
    ]]);
    let mut f = fixture(
        script.clone(),
        Arc::new(DenyPrompter),
        PermissionMode::Default,
    );
    f.agent.run("go", &CancellationToken::new()).await;
    let reqs = script.requests.lock().unwrap();
    match &reqs[1].messages[2].content[0] {
        ContentBlock::ToolResult { content, .. } => {
            assert!(content.len() < 31_000);
            assert!(
                content.contains("20000 characters cut"),
                "{}",
                &content[17_990..18_100]
            );
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn unknown_tool_gets_error_listing_tools() {
    let script = Script::new(vec![vec![
        call("a", "security-review", json!({})),
        stop(StopReason::ToolUse),
    ]]);
    let mut f = fixture(
        script.clone(),
        Arc::new(DenyPrompter),
        PermissionMode::Default,
    );
    f.agent.run("go", &CancellationToken::new()).await;
    let reqs = script.requests.lock().unwrap();
    match &reqs[1].messages[2].content[0] {
        ContentBlock::ToolResult {
            content, is_error, ..
        } => {
            assert!(is_error);
            assert!(content.contains("echo"), "{content}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn tool_spec_shape() {
    let spec = ToolSpec {
        name: "x".into(),
        description: "d".into(),
        input_schema: json!({}),
    };
    assert_eq!(spec.name, "x");
}

/// A tool that cannot work in this environment (here: always).
struct Broken;

#[async_trait::async_trait]
impl Tool for Broken {
    fn name(&self) -> &'static str {
        "broken"
    }
    fn description(&self) -> &'static str {
        "broken"
    }
    fn input_schema(&self) -> Value {
        json!({"type":"object"})
    }
    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }
    fn permission_subject(&self, _input: &Value) -> Option<String> {
        None
    }
    async fn call(&self, _input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        Err(ToolError::fatal("the sandbox cannot be set up"))
    }
}

#[tokio::test]
async fn fatal_tool_error_stops_the_loop_and_keeps_history_valid() {
    let script = Script::new(vec![
        vec![
            call("a", "echo", json!({"value": "fine"})),
            call("b", "broken", json!({})),
            stop(StopReason::ToolUse),
        ],
        vec![text("never asked"), stop(StopReason::EndTurn)],
    ]);
    let mut f = fixture(
        script.clone(),
        Arc::new(DenyPrompter),
        PermissionMode::Default,
    );
    f.agent.tools.register(Arc::new(Broken));
    let out = f.agent.run("go", &CancellationToken::new()).await;
    assert_eq!(out.stop_reason, AgentStopReason::Error);
    assert_eq!(out.turns, 1);
    let error = out.error.unwrap();
    assert!(
        error.contains("broken: the sandbox cannot be set up"),
        "{error}"
    );
    assert_eq!(script.requests.lock().unwrap().len(), 1);
    // both calls have their result: a later prompt can continue the conversation
    let last = f.agent.history.last().unwrap();
    assert_eq!(last.content.len(), 2);
    assert!(matches!(
        &last.content[1],
        ContentBlock::ToolResult { is_error: true, content, .. } if content.contains("sandbox")
    ));
}

#[tokio::test]
async fn known_secrets_are_redacted_from_results_events_and_streamed_text() {
    const KEY: &str = "sk-ant-agent-0123456789abcdef";
    let script = Script::new(vec![
        vec![
            call("a", "echo", json!({"value": format!("the key is {KEY}")})),
            stop(StopReason::ToolUse),
        ],
        // The model repeats it, split across deltas.
        vec![
            text("you said sk-ant-agent-01234"),
            text("56789abcdef, right?"),
            stop(StopReason::EndTurn),
        ],
    ]);
    // The redactor travels in the tool context; the builder gives it to the transcript too.
    let dir = tempfile::tempdir().unwrap();
    let mut ctx = ToolContext::new(dir.path()).unwrap();
    ctx.redactor = crate::redact::Redactor::new([("ANTHROPIC_API_KEY", KEY)]).unwrap();
    let mut tools = ToolRegistry::new();
    tools.register(Arc::new(Echo {
        log: Arc::new(Mutex::new(vec![])),
    }));
    let gate = PermissionGate::new(
        Arc::new(RwLock::new(PermissionPolicy::default())),
        Arc::new(DenyPrompter),
        RulePersistence::InMemory,
    );
    let transcript = dir.path().join("t.jsonl");
    let mut agent = Agent::builder(script.clone(), "m", ctx, gate)
        .tools(tools)
        .system_prompt("sys")
        .transcript(transcript.clone(), "t".into())
        .build()
        .unwrap();
    let mut rx = agent.subscribe();
    let out = agent.run("go", &CancellationToken::new()).await;
    agent.unsubscribe();
    assert_eq!(
        out.final_text,
        "you said [REDACTED:ANTHROPIC_API_KEY], right?"
    );
    let reqs = script.requests.lock().unwrap();
    assert_eq!(
        reqs[1].messages[2].content,
        vec![ContentBlock::ToolResult {
            tool_use_id: "a".into(),
            content: "the key is [REDACTED:ANTHROPIC_API_KEY]".into(),
            is_error: false
        }]
    );
    let mut events = vec![];
    while let Ok(e) = rx.try_recv() {
        events.push(e);
    }
    let all = serde_json::to_string(&events).unwrap();
    assert!(!all.contains("0123456789abcdef"), "{all}");
    let streamed: String = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::TextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(streamed, "you said [REDACTED:ANTHROPIC_API_KEY], right?");
    let written = std::fs::read_to_string(&transcript).unwrap();
    assert!(!written.contains("0123456789abcdef"), "{written}");
    assert!(
        written.contains("echo") && written.contains("[REDACTED:ANTHROPIC_API_KEY]"),
        "{written}"
    );
}

#[tokio::test]
async fn invalid_call_arguments_are_redacted_before_the_cut() {
    const KEY: &str = "sk-ant-invalid-0123456789abcdef";
    // The key sits where a 500-character cut of the raw arguments would split it.
    let raw = format!("{}{KEY}{}", "x".repeat(290), "y".repeat(600));
    let script = Script::new(vec![
        vec![
            Ok(ModelEvent::InvalidToolCall {
                id: "bad".into(),
                name: "echo".into(),
                raw_arguments: raw,
                error: format!("cannot parse the arguments near {KEY}"),
            }),
            stop(StopReason::ToolUse),
        ],
        vec![text("ok"), stop(StopReason::EndTurn)],
    ]);
    let mut f = fixture(
        script.clone(),
        Arc::new(DenyPrompter),
        PermissionMode::Default,
    );
    f.agent.tool_context.redactor =
        crate::redact::Redactor::new([("ANTHROPIC_API_KEY", KEY)]).unwrap();
    f.agent.run("go", &CancellationToken::new()).await;
    let reqs = script.requests.lock().unwrap();
    let sent = serde_json::to_string(&reqs[1].messages).unwrap();
    assert!(!sent.contains("sk-ant-inv"), "{sent}");
    assert!(sent.contains("near [REDACTED:ANTHROPIC_API_KEY]"), "{sent}");
}

/// A fixture whose agent has the hooks of `hooks_toml` (a `[hooks]` table).
fn fixture_with_hooks(
    client: Arc<dyn ModelClient>,
    prompter: Arc<dyn Prompter>,
    mode: PermissionMode,
    hooks_toml: &str,
) -> Fixture {
    #[derive(serde::Deserialize)]
    struct File {
        hooks: crate::hooks::HooksFile,
    }
    let file: File = toml::from_str(hooks_toml).unwrap();
    let mut f = fixture(client.clone(), prompter.clone(), mode);
    let policy = Arc::new(RwLock::new(PermissionPolicy {
        mode,
        ..Default::default()
    }));
    let gate = PermissionGate::new(policy, prompter, RulePersistence::InMemory);
    let mut tools = ToolRegistry::new();
    tools.register(Arc::new(Touch));
    f.agent = Agent::builder(client, "m", ToolContext::new(f.dir.path()).unwrap(), gate)
        .tools(tools)
        .system_prompt("sys")
        .settings(AgentSettings {
            hooks: crate::hooks::Hooks::new(file.hooks),
            ..AgentSettings::default()
        })
        .build()
        .unwrap();
    f
}

#[tokio::test]
async fn a_pre_tool_use_ask_asks_even_in_bypass_mode_and_notification_hooks_run() {
    let script = Script::new(vec![
        vec![
            call("t1", "touch", json!({"path": "a.txt"})),
            stop(StopReason::ToolUse),
        ],
        vec![text("done"), stop(StopReason::EndTurn)],
    ]);
    let prompter = Arc::new(Answer(PromptAnswer::Deny, Mutex::new(vec![])));
    let marks = tempfile::tempdir().unwrap();
    let marker = marks.path().join("notified.json");
    let hooks = format!(
        r#"
        [[hooks.PreToolUse]]
        hooks = [{{ type = "command", command = "echo '{{\"hookSpecificOutput\": {{\"permissionDecision\": \"ask\"}}}}'" }}]
        [[hooks.Notification]]
        hooks = [{{ type = "command", command = "cat > {}" }}]
        "#,
        marker.display()
    );
    let mut f = fixture_with_hooks(script, prompter.clone(), PermissionMode::Bypass, &hooks);
    f.agent.run("go", &CancellationToken::new()).await;
    assert_eq!(prompter.1.lock().unwrap().len(), 1, "the hook made it ask");
    assert!(!f.dir.path().join("a.txt").exists(), "the user said no");
    // Notification hooks run in the background: wait for the marker (at most 20 s)
    let mut text = String::new();
    for _ in 0..200 {
        text = std::fs::read_to_string(&marker).unwrap_or_default();
        if text.ends_with('}') {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let input: Value = serde_json::from_str(&text).expect("the Notification hook got its input");
    assert_eq!(input["hook_event_name"], "Notification");
    assert!(input["message"].as_str().unwrap().contains("touch"));
}

#[tokio::test]
async fn compact_on_demand_follows_the_instructions_and_keeps_the_last_turn() {
    let script = Script::new(vec![
        vec![
            call("e1", "echo", json!({"value": "OLD-RESULT"})),
            stop(StopReason::ToolUse),
        ],
        vec![text("first answer"), stop(StopReason::EndTurn)],
        vec![text("THE SUMMARY"), stop(StopReason::EndTurn)],
    ]);
    let mut f = fixture(
        script.clone(),
        Arc::new(DenyPrompter),
        PermissionMode::Bypass,
    );
    let cancel = CancellationToken::new();
    f.agent.run("task", &cancel).await;
    let report = f
        .agent
        .compact(Some("focus on the echo"), &cancel)
        .await
        .unwrap();
    assert_eq!(report.summary, "THE SUMMARY");
    assert_eq!(report.summarised_messages, 3);
    let requests = script.requests.lock().unwrap().clone();
    let summary_request = requests.last().unwrap();
    assert!(summary_request.tools.is_empty());
    assert_eq!(summary_request.system, COMPACTION_SYSTEM_PROMPT);
    let asked = format!("{:?}", summary_request.messages);
    assert!(asked.contains("focus on the echo") && asked.contains("OLD-RESULT"));
    let history = f.agent.history();
    assert_eq!(history.len(), 2, "the summary, then the last answer");
    assert!(history[0].text().contains("THE SUMMARY"));
    assert_eq!(history[1].text(), "first answer");
    // nothing older than the last turn: a second compaction has nothing to do
    assert!(matches!(
        f.agent.compact(None, &cancel).await,
        Err(CompactionError::NothingToCompact)
    ));
}
