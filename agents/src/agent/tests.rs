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

impl Script {
    /// A script without turns whose every stream hangs.
    fn hanging() -> Arc<Self> {
        Arc::new(Script {
            turns: Mutex::new(vec![]),
            requests: Mutex::new(vec![]),
            hang_after: true,
        })
    }

    /// The content and error flag of the first tool result, sent back in the second request.
    fn first_result(&self) -> (String, bool) {
        let requests = self.requests.lock().unwrap();
        match &requests[1].messages[2].content[0] {
            ContentBlock::ToolResult {
                content, is_error, ..
            } => (content.clone(), *is_error),
            other => panic!("expected a tool result, got {other:?}"),
        }
    }

    /// Asserts that the first tool result sent back is an error that mentions `needle`.
    fn assert_first_result_is_error(&self, needle: &str) {
        let (content, is_error) = self.first_result();
        assert!(is_error, "not an error: {content}");
        assert!(content.contains(needle), "{content}");
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

/// A turn that makes one tool call.
fn tool_turn(id: &str, name: &str, input: Value) -> Turn {
    vec![call(id, name, input), stop(StopReason::ToolUse)]
}

/// A turn that answers `t` and ends.
fn answer(t: &str) -> Turn {
    vec![text(t), stop(StopReason::EndTurn)]
}

fn stop(reason: StopReason) -> Result<ModelEvent, ModelError> {
    Ok(ModelEvent::Stop { reason })
}

fn text(t: &str) -> Result<ModelEvent, ModelError> {
    Ok(ModelEvent::TextDelta { text: t.into() })
}

/// Start and end times of the `echo` calls, by value.
type EchoLog = Arc<Mutex<Vec<(String, Instant, Instant)>>>;

/// What a [`TestTool`] does when called.
enum Behaviour {
    /// Read-only: echoes its `value` after `delay_ms`, recording start/end times; fails for
    /// the value "fail".
    Echo(EchoLog),
    /// An edit, so permission paths are exercised: writes "touched" to `path`.
    Touch,
    /// Cannot work in this environment (here: always): a fatal error.
    Broken,
}

/// A tool named after its behaviour.
struct TestTool {
    name: &'static str,
    behaviour: Behaviour,
}

impl TestTool {
    fn echo(log: EchoLog) -> Arc<Self> {
        Arc::new(TestTool {
            name: "echo",
            behaviour: Behaviour::Echo(log),
        })
    }
    fn touch() -> Arc<Self> {
        Arc::new(TestTool {
            name: "touch",
            behaviour: Behaviour::Touch,
        })
    }
    fn broken() -> Arc<Self> {
        Arc::new(TestTool {
            name: "broken",
            behaviour: Behaviour::Broken,
        })
    }
}

#[async_trait::async_trait]
impl Tool for TestTool {
    fn name(&self) -> &'static str {
        self.name
    }
    fn description(&self) -> &'static str {
        self.name
    }
    fn input_schema(&self) -> Value {
        json!({"type":"object"})
    }
    fn kind(&self) -> ToolKind {
        match self.behaviour {
            Behaviour::Touch => ToolKind::Edit,
            Behaviour::Echo(_) | Behaviour::Broken => ToolKind::Read,
        }
    }
    fn permission_subject(&self, input: &Value) -> Option<String> {
        match self.behaviour {
            Behaviour::Touch => input["path"].as_str().map(str::to_string),
            Behaviour::Echo(_) | Behaviour::Broken => None,
        }
    }
    async fn call(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        match &self.behaviour {
            Behaviour::Echo(log) => echo(log, &input, ctx).await,
            Behaviour::Touch => {
                let p = ctx
                    .workspace_root
                    .join(input["path"].as_str().unwrap_or("x"));
                std::fs::write(&p, "touched").map_err(|e| ToolError::new(e.to_string()))?;
                Ok(ToolOutput::ok("ok"))
            }
            Behaviour::Broken => Err(ToolError::fatal("the sandbox cannot be set up")),
        }
    }
}

/// The `echo` behaviour: waits `delay_ms` (or the cancellation), then logs and returns `value`.
async fn echo(log: &EchoLog, input: &Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
    let start = Instant::now();
    let delay = input["delay_ms"].as_u64().unwrap_or(0);
    tokio::select! {
        _ = tokio::time::sleep(std::time::Duration::from_millis(delay)) => {}
        _ = ctx.cancel.cancelled() => return Err(ToolError::new("cancelled")),
    }
    let v = input["value"].as_str().unwrap_or("").to_string();
    log.lock().unwrap().push((v.clone(), start, Instant::now()));
    if v == "fail" {
        return Err(ToolError::new("echo failed as asked"));
    }
    Ok(ToolOutput::ok(v))
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
    log: EchoLog,
}

fn fixture(
    client: Arc<dyn ModelClient>,
    prompter: Arc<dyn Prompter>,
    mode: PermissionMode,
) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(Mutex::new(vec![]));
    let mut tools = ToolRegistry::new();
    tools.register(TestTool::echo(log.clone()));
    tools.register(TestTool::touch());
    let gate = gate(mode, prompter);
    let agent = agent(client, dir.path(), gate, tools, AgentSettings::default());
    Fixture { agent, dir, log }
}

/// A gate in `mode` without rules that asks `prompter`; rules it adds stay in memory.
fn gate(mode: PermissionMode, prompter: Arc<dyn Prompter>) -> PermissionGate {
    let policy = Arc::new(RwLock::new(PermissionPolicy {
        mode,
        ..Default::default()
    }));
    PermissionGate::new(policy, prompter, RulePersistence::InMemory)
}

/// An agent of model "m" with system prompt "sys", in workspace `dir`.
fn agent(
    client: Arc<dyn ModelClient>,
    dir: &std::path::Path,
    gate: PermissionGate,
    tools: ToolRegistry,
    settings: AgentSettings,
) -> Agent {
    Agent::builder(client, "m", ToolContext::new(dir).unwrap(), gate)
        .tools(tools)
        .system_prompt("sys")
        .settings(settings)
        .build()
        .unwrap()
}

/// [`fixture`] with a prompter that denies, in the default permission mode.
fn default_fixture(client: Arc<dyn ModelClient>) -> Fixture {
    fixture(client, Arc::new(DenyPrompter), PermissionMode::Default)
}

impl Fixture {
    /// Runs the prompt "go" to its end (never cancelled).
    async fn go(&mut self) -> AgentOutcome {
        self.agent.run("go", &CancellationToken::new()).await
    }

    /// Runs the prompt "go" with `cancel`; panics if it takes more than 5 s.
    async fn go_within_5s(&mut self, cancel: &CancellationToken) -> AgentOutcome {
        tokio::time::timeout(Duration::from_secs(5), self.agent.run("go", cancel))
            .await
            .expect("the run ends within 5 s")
    }
}

/// A token that is cancelled `ms` milliseconds from now.
fn cancelled_after(ms: u64) -> CancellationToken {
    let cancel = CancellationToken::new();
    let later = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        later.cancel();
    });
    cancel
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
        answer("all good"),
    ]);
    let mut f = default_fixture(script.clone());
    let out = f.go().await;
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
    let mut f = default_fixture(script);
    f.go().await;
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
        .map(|i| tool_turn(&format!("c{i}"), "echo", json!({"value": i.to_string()})))
        .collect();
    let mut f = default_fixture(Script::new(turns));
    f.agent.settings.max_turns = 3;
    let out = f.go().await;
    assert_eq!(out.stop_reason, AgentStopReason::MaxTurns);
    assert_eq!(out.turns, 3);
}

#[tokio::test]
async fn repeated_identical_call_stops_after_three() {
    let turns = (0..10)
        .map(|i| tool_turn(&format!("c{i}"), "echo", json!({"value": "same"})))
        .collect();
    let mut f = default_fixture(Script::new(turns));
    let out = f.go().await;
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
    let mut f = default_fixture(script);
    let out = f.go().await;
    assert_eq!(out.stop_reason, AgentStopReason::Error);
    assert!(out.error.unwrap().contains("Overloaded"));
}

#[tokio::test]
async fn stream_without_stop_is_an_error_not_end_turn() {
    let script = Script::new(vec![vec![text("How can I help")]]);
    let mut f = default_fixture(script);
    let out = f.go().await;
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
    let mut f = default_fixture(script);
    let out = f.go().await;
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
        answer("ok"),
    ]);
    let mut f = fixture(
        script.clone(),
        Arc::new(DenyPrompter),
        PermissionMode::Bypass,
    );
    f.go().await;
    assert!(!f.dir.path().join("notes.md").exists());
    script.assert_first_result_is_error("truncated");
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
    let mut f = default_fixture(script.clone());
    let out = f.go().await;
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
        tool_turn("c1", "echo", json!({"value": "a"})),
        invalid(),
        invalid(),
        answer("done"),
    ]);
    let mut f = default_fixture(script);
    let out = f.go().await;
    assert_eq!(out.stop_reason, AgentStopReason::Completed);
    assert_eq!(out.turns, 5);
}

#[tokio::test]
async fn non_interactive_ask_is_denied_at_once() {
    let script = Script::new(vec![tool_turn("t", "touch", json!({"path": "a.txt"}))]);
    let mut f = default_fixture(script.clone());
    let out = f.go_within_5s(&CancellationToken::new()).await;
    assert_eq!(out.stop_reason, AgentStopReason::Completed);
    assert!(!f.dir.path().join("a.txt").exists());
    script.assert_first_result_is_error("non-interactive");
}

#[tokio::test]
async fn prompt_answers_apply_and_always_adds_rule() {
    let script = Script::new(vec![
        tool_turn("t1", "touch", json!({"path": "a.txt"})),
        tool_turn("t2", "touch", json!({"path": "a.txt"})),
    ]);
    let prompter = Arc::new(Answer(PromptAnswer::AllowAlways, Mutex::new(vec![])));
    let mut f = fixture(script, prompter.clone(), PermissionMode::Default);
    f.go().await;
    assert!(f.dir.path().join("a.txt").exists());
    assert_eq!(f.agent.gate.policy.read().unwrap().rules.allow.len(), 1);
    assert!(!prompter.1.lock().unwrap().is_empty());
}

#[tokio::test]
async fn plan_mode_refuses_edits() {
    let script = Script::new(vec![tool_turn("t", "touch", json!({"path": "a.txt"}))]);
    let mut f = fixture(
        script,
        Arc::new(Answer(PromptAnswer::AllowOnce, Mutex::new(vec![]))),
        PermissionMode::Plan,
    );
    f.go().await;
    assert!(!f.dir.path().join("a.txt").exists());
}

#[tokio::test]
async fn cancel_during_tool_stops_and_keeps_history_valid() {
    let script = Script::new(vec![tool_turn(
        "a",
        "echo",
        json!({"value": "x", "delay_ms": 10_000}),
    )]);
    let mut f = default_fixture(script);
    let out = f.go_within_5s(&cancelled_after(100)).await;
    assert_eq!(out.stop_reason, AgentStopReason::Cancelled);
    let last = f.agent.history.last().unwrap();
    assert!(
        matches!(&last.content[0], ContentBlock::ToolResult { tool_use_id, is_error: true, .. } if tool_use_id == "a")
    );
}

#[tokio::test]
async fn cancel_during_stream() {
    let script = Script::hanging();
    let mut f = default_fixture(script);
    let out = f.go_within_5s(&cancelled_after(50)).await;
    assert_eq!(out.stop_reason, AgentStopReason::Cancelled);
}

#[tokio::test]
async fn time_limit_and_token_budget() {
    let script = Script::hanging();
    let mut f = default_fixture(script);
    f.agent.settings.deadline =
        Some(tokio::time::Instant::now() + std::time::Duration::from_millis(50));
    let out = f.go().await;
    assert_eq!(out.stop_reason, AgentStopReason::TimeLimit);

    let turns = (0..5)
        .map(|i| {
            vec![
                call(&format!("c{i}"), "echo", json!({"value": i.to_string()})),
                Ok(ModelEvent::Usage(Usage {
                    input_tokens: 600,
                    output_tokens: 10,
                    ..Default::default()
                })),
                stop(StopReason::ToolUse),
            ]
        })
        .collect();
    let mut f = default_fixture(Script::new(turns));
    f.agent.settings.token_budget = Some(1_000);
    let out = f.go().await;
    assert_eq!(out.stop_reason, AgentStopReason::TokenBudget);
    assert_eq!(out.turns, 2);
}

#[tokio::test]
async fn long_tool_output_is_truncated_with_marker() {
    let big = "y".repeat(50_000);
    let script = Script::new(vec![tool_turn("a", "echo", json!({"value": big}))]);
    let mut f = default_fixture(script.clone());
    f.go().await;
    let (content, _) = script.first_result();
    assert!(content.len() < 31_000);
    assert!(
        content.contains("20000 characters cut"),
        "{}",
        &content[17_990..18_100]
    );
}

#[tokio::test]
async fn unknown_tool_gets_error_listing_tools() {
    let script = Script::new(vec![tool_turn("a", "security-review", json!({}))]);
    let mut f = default_fixture(script.clone());
    f.go().await;
    script.assert_first_result_is_error("echo");
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

#[tokio::test]
async fn fatal_tool_error_stops_the_loop_and_keeps_history_valid() {
    let script = Script::new(vec![
        vec![
            call("a", "echo", json!({"value": "fine"})),
            call("b", "broken", json!({})),
            stop(StopReason::ToolUse),
        ],
        answer("never asked"),
    ]);
    let mut f = default_fixture(script.clone());
    f.agent.tools.register(TestTool::broken());
    let out = f.go().await;
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
        tool_turn("a", "echo", json!({"value": format!("the key is {KEY}")})),
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
    tools.register(TestTool::echo(Arc::new(Mutex::new(vec![]))));
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
    let mut streamed = String::new();
    for event in &events {
        if let AgentEvent::TextDelta { text } = event {
            streamed.push_str(text);
        }
    }
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
        answer("ok"),
    ]);
    let mut f = default_fixture(script.clone());
    f.agent.tool_context.redactor =
        crate::redact::Redactor::new([("ANTHROPIC_API_KEY", KEY)]).unwrap();
    f.go().await;
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
    let mut tools = ToolRegistry::new();
    tools.register(TestTool::touch());
    let settings = AgentSettings {
        hooks: crate::hooks::Hooks::new(file.hooks),
        ..AgentSettings::default()
    };
    f.agent = agent(client, f.dir.path(), gate(mode, prompter), tools, settings);
    f
}

#[tokio::test]
async fn a_pre_tool_use_ask_asks_even_in_bypass_mode_and_notification_hooks_run() {
    let script = Script::new(vec![
        tool_turn("t1", "touch", json!({"path": "a.txt"})),
        answer("done"),
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
    f.go().await;
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
        tool_turn("e1", "echo", json!({"value": "OLD-RESULT"})),
        answer("first answer"),
        answer("THE SUMMARY"),
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

/// An agent whose workspace `root` (not there yet) is made later: `touch` writes into it.
fn agent_for_workspace_to_be(
    client: Arc<dyn ModelClient>,
    root: &std::path::Path,
    ready: WorkspaceReady,
) -> Agent {
    let mut tools = ToolRegistry::new();
    tools.register(TestTool::touch());
    Agent::builder(
        client,
        "m",
        ToolContext::for_root_to_be(root).unwrap(),
        gate(PermissionMode::Bypass, Arc::new(DenyPrompter)),
    )
    .tools(tools)
    .project_instructions(Some(prompt::ProjectInstructions {
        file_name: "AGENTS.md",
        text: "Given rules.".into(),
    }))
    .workspace_ready(ready)
    .build()
    .unwrap()
}

#[tokio::test]
async fn the_first_request_goes_out_before_the_workspace_and_tools_wait_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("wt");
    let script = Script::new(vec![
        tool_turn("a", "touch", json!({"path": "f.txt"})),
        answer("done"),
    ]);
    let (said, ready) = workspace_ready_channel();
    let mut agent = agent_for_workspace_to_be(script.clone(), &root, ready);
    // the system prompt has the given instructions (nothing read from a missing directory)
    assert!(agent.system_prompt().contains("Given rules."));
    let maker_script = script.clone();
    let maker_root = root.clone();
    let maker = tokio::spawn(async move {
        // the first request is out while the workspace does not exist
        while maker_script.requests.lock().unwrap().is_empty() {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        assert!(!maker_root.exists());
        tokio::time::sleep(Duration::from_millis(50)).await;
        std::fs::create_dir(&maker_root).unwrap();
        said.send(Ok(())).unwrap();
    });
    let out = agent.run("go", &CancellationToken::new()).await;
    maker.await.unwrap();
    assert_eq!(
        out.stop_reason,
        AgentStopReason::Completed,
        "{:?}",
        out.error
    );
    // the tool ran in the workspace once it was there
    assert_eq!(
        std::fs::read_to_string(root.join("f.txt")).unwrap(),
        "touched"
    );
}

#[tokio::test]
async fn a_workspace_that_cannot_be_made_stops_the_loop_before_any_tool_runs() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("wt");
    let script = Script::new(vec![tool_turn("a", "touch", json!({"path": "f.txt"}))]);
    for fails in [Some("the disk is full"), None] {
        let (said, ready) = workspace_ready_channel();
        let mut agent = agent_for_workspace_to_be(script.clone(), &root, ready);
        match fails {
            Some(reason) => said.send(Err(reason.into())).unwrap(),
            // its maker ended without a word
            None => drop(said),
        }
        let out = agent.run("go", &CancellationToken::new()).await;
        assert_eq!(out.stop_reason, AgentStopReason::Error);
        let error = out.error.unwrap();
        assert!(error.contains("the workspace could not be made"), "{error}");
        assert!(error.contains(fails.unwrap_or("without a word")), "{error}");
        assert!(!root.exists());
    }
}

#[tokio::test]
async fn a_cancel_while_waiting_for_the_workspace_stops_the_loop() {
    let dir = tempfile::tempdir().unwrap();
    let script = Script::new(vec![tool_turn("a", "touch", json!({"path": "f.txt"}))]);
    let (_said, ready) = workspace_ready_channel();
    let mut agent = agent_for_workspace_to_be(script, &dir.path().join("wt"), ready);
    let out = tokio::time::timeout(
        Duration::from_secs(5),
        agent.run("go", &cancelled_after(50)),
    )
    .await
    .expect("the cancel ends the wait");
    assert_eq!(out.stop_reason, AgentStopReason::Cancelled);
}
