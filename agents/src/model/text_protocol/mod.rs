//! The text tool protocol, for models without native tool calls (`tool_protocol = "text"`).
//!
//! The tools are described in the system prompt and the model calls one by writing
//!
//! ```text
//! <tool_call>
//! {"name": "read_file", "arguments": {"path": "src/lib.rs"}}
//! </tool_call>
//! ```
//!
//! (the Hermes/Qwen convention, see e.g. the Qwen function-calling guide
//! <https://qwen.readthedocs.io/en/latest/framework/function_call.html>). [`TextToolProtocol`]
//! wraps any [`ModelClient`]: it rewrites the request (tools into the system prompt, earlier
//! tool calls and results into text) and turns the reply text back into
//! [`ModelEvent::ToolCall`] / [`ModelEvent::InvalidToolCall`] events with the tolerant parser
//! [`parse_assistant_text`].

mod display;
mod lenient_json;
mod parse;
mod scan;

pub use display::DisplayGate;
pub use lenient_json::Repair;
pub use parse::{
    AppliedRepairs, EXPECTED_FORMAT, ParsedCall, ParsedText, TEXT_CALL_ID_PREFIX,
    TextToolCallError, parse_assistant_text,
};

use crate::model::{
    ContentBlock, Message, ModelClient, ModelError, ModelEvent, ModelRequest, ModelStream,
    StopReason, ToolSpec,
};
use futures::StreamExt;
use serde_json::Value;
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Tools that only read, by default: repairs that guess content are allowed for them.
pub const DEFAULT_READ_ONLY_TOOLS: &[&str] = &["read_file", "list_dir", "glob", "grep"];

/// Wraps a [`ModelClient`] so that tools are offered and called as text.
///
/// Request side: `tools` is emptied and described in the system prompt ([`tools_prompt`]); the
/// history is re-rendered ([`render_history`]). Response side: text deltas are forwarded for
/// display except tool-call markup (held back by a [`DisplayGate`]); at the end of the turn the
/// whole text is parsed, and [`ModelEvent::ToolCall`] events (ids `call_text_<n>`, unique within
/// the conversation) and [`ModelEvent::InvalidToolCall`] events are emitted, followed by
/// [`ModelEvent::Stop`] with [`StopReason::ToolUse`] when any call was found, else the inner
/// stop reason. `Usage` events pass through; a `Retry` resets the held text and passes through.
#[derive(Clone)]
pub struct TextToolProtocol {
    inner: Arc<dyn ModelClient>,
    read_only: Arc<BTreeSet<String>>,
    /// Highest call number handed out by this wrapper, so ids stay unique even when old turns
    /// are dropped from the history.
    last_call_number: Arc<AtomicU64>,
}

impl TextToolProtocol {
    /// Wraps `inner`; [`DEFAULT_READ_ONLY_TOOLS`] are the read-only tools.
    pub fn new(inner: Arc<dyn ModelClient>) -> Self {
        TextToolProtocol {
            inner,
            read_only: Arc::new(
                DEFAULT_READ_ONLY_TOOLS
                    .iter()
                    .map(|s| s.to_string())
                    .collect(),
            ),
            last_call_number: Arc::new(AtomicU64::new(0)),
        }
    }

    /// Replaces the set of read-only tool names (e.g. the tools of kind `Read` in the
    /// registry). Every other tool counts as mutating: calls to it are never repaired by
    /// guessing.
    pub fn with_read_only_tools<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.read_only = Arc::new(names.into_iter().map(Into::into).collect());
        self
    }

    /// The request actually sent to the inner client: no native tools, tools described in the
    /// system prompt, tool calls and results as text.
    pub fn render_request(request: ModelRequest) -> ModelRequest {
        let mut request = request;
        let tools = std::mem::take(&mut request.tools);
        if !tools.is_empty() {
            if !request.system.is_empty() {
                request.system.push_str("\n\n");
            }
            request.system.push_str(&tools_prompt(&tools));
        }
        request.messages = render_history(&request.messages);
        request
    }
}

impl ModelClient for TextToolProtocol {
    fn stream(&self, request: ModelRequest) -> ModelStream {
        let tools = request.tools.clone();
        let history_max = max_text_call_number(&request.messages);
        let floor = self.last_call_number.load(Ordering::SeqCst);
        let inner = self.inner.stream(Self::render_request(request));
        let state = TurnState {
            gate: DisplayGate::new(),
            tools,
            read_only: self.read_only.clone(),
            first_number: history_max.max(floor),
            last_call_number: self.last_call_number.clone(),
            native_calls: 0,
            done: false,
        };
        let events = futures::stream::unfold(Some((inner, state)), |st| async move {
            let (mut inner, mut state) = st?;
            match inner.next().await {
                Some(item) => {
                    let out = state.on_item(item);
                    let next = (!state.done).then_some((inner, state));
                    Some((out, next))
                }
                None if state.done => None,
                None => Some((
                    vec![Err(ModelError::Incomplete(
                        "the wrapped model stream ended without a stop event".to_string(),
                    ))],
                    None,
                )),
            }
        })
        .flat_map(futures::stream::iter);
        Box::pin(events)
    }

    fn describe(&self) -> String {
        format!("{} (text tool protocol)", self.inner.describe())
    }
}

/// Per-turn state of the response side.
struct TurnState {
    gate: DisplayGate,
    tools: Vec<ToolSpec>,
    read_only: Arc<BTreeSet<String>>,
    /// Calls of this turn are numbered from `first_number + 1`.
    first_number: u64,
    last_call_number: Arc<AtomicU64>,
    native_calls: usize,
    done: bool,
}

type Item = Result<ModelEvent, ModelError>;

impl TurnState {
    fn on_item(&mut self, item: Item) -> Vec<Item> {
        let event = match item {
            Ok(e) => e,
            Err(e) => {
                self.done = true;
                return vec![Err(e)];
            }
        };
        match event {
            ModelEvent::TextDelta { text } => {
                let shown = if self.tools.is_empty() {
                    text
                } else {
                    self.gate.push(&text)
                };
                if shown.is_empty() {
                    Vec::new()
                } else {
                    vec![Ok(ModelEvent::TextDelta { text: shown })]
                }
            }
            ModelEvent::Retry { .. } => {
                self.gate = DisplayGate::new();
                self.native_calls = 0;
                vec![Ok(event)]
            }
            ModelEvent::ToolCall(_) | ModelEvent::InvalidToolCall { .. } => {
                self.native_calls += 1;
                vec![Ok(event)]
            }
            ModelEvent::Usage(_) => vec![Ok(event)],
            ModelEvent::Stop { reason } => {
                self.done = true;
                self.finish(reason)
            }
        }
    }

    fn finish(&mut self, reason: StopReason) -> Vec<Item> {
        if self.tools.is_empty() {
            let reason = if self.native_calls > 0 {
                StopReason::ToolUse
            } else {
                reason
            };
            return vec![Ok(ModelEvent::Stop { reason })];
        }
        let read_only = self.read_only.clone();
        let parsed = parse_assistant_text(self.gate.text(), &self.tools, &|name: &str| {
            read_only.contains(name)
        });
        let mut out = Vec::new();
        let rest = self.gate.finish(&parsed.text);
        if !rest.is_empty() {
            out.push(Ok(ModelEvent::TextDelta { text: rest }));
        }
        let count = parsed.calls.len() as u64;
        for (i, call) in parsed.calls.into_iter().enumerate() {
            let id = format!("{TEXT_CALL_ID_PREFIX}{}", self.first_number + 1 + i as u64);
            out.push(Ok(match call {
                Ok(mut c) => {
                    c.id = id;
                    ModelEvent::ToolCall(c)
                }
                Err(e) => {
                    let mut error = e.error;
                    if e.truncated && reason == StopReason::MaxTokens {
                        error.push_str(
                            "\nThe reply stopped at the output-token limit (max_tokens): write \
                             shorter calls, e.g. split a large file into several edits.",
                        );
                    }
                    ModelEvent::InvalidToolCall {
                        id,
                        name: e.name.unwrap_or_default(),
                        raw_arguments: e.raw,
                        error,
                    }
                }
            }));
        }
        if count > 0 {
            self.last_call_number
                .fetch_max(self.first_number + count, Ordering::SeqCst);
        }
        let reason = if count > 0 || self.native_calls > 0 {
            StopReason::ToolUse
        } else {
            reason
        };
        out.push(Ok(ModelEvent::Stop { reason }));
        out
    }
}

/// Highest `n` of ids `call_text_<n>` in `messages` (0 when none).
fn max_text_call_number(messages: &[Message]) -> u64 {
    messages
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|b| match b {
            ContentBlock::ToolUse { id, .. } => id.strip_prefix(TEXT_CALL_ID_PREFIX)?.parse().ok(),
            _ => None,
        })
        .max()
        .unwrap_or(0)
}

/// The system-prompt section that offers `tools` under the text protocol: the calling format
/// with an example, the rules (one `<tool_call>` block per call, then stop and wait for the
/// result), and each tool's name, description and JSON Schema of its arguments.
pub fn tools_prompt(tools: &[ToolSpec]) -> String {
    let example = tools
        .iter()
        .find(|t| t.name == "read_file")
        .or_else(|| tools.first())
        .map(|t| render_call(&t.name, &example_arguments(&t.input_schema)))
        .unwrap_or_default();
    let mut out = String::from(
        "# Tools\n\n\
         You can call the tools listed below. Tool calls are written as text: to call a tool, \
         write a block of exactly this form in your reply:\n\n\
         <tool_call>\n\
         {\"name\": \"<tool name>\", \"arguments\": {<arguments as a JSON object>}}\n\
         </tool_call>\n\n\
         For example:\n\n",
    );
    out.push_str(&example);
    out.push_str(
        "\n\nRules:\n\
         - Write one <tool_call> block per call, then stop and wait for the result. Several \
         independent calls may be written as several blocks in one reply.\n\
         - The block holds one JSON object with the keys \"name\" (one of the tools below) and \
         \"arguments\" (a JSON object following that tool's schema). Use strict JSON: double \
         quotes, no trailing commas, newlines inside strings written as \\n.\n\
         - Results come back in the next message as <tool_result id=\"…\" name=\"…\">…</tool_result>; \
         a result marked error=\"true\" means the call failed or was refused.\n\
         - Do not put a <tool_call> block inside a code fence or quote; text in code fences is \
         never run.\n\
         - When you need no tool, answer in plain text without any <tool_call> block.\n\n\
         ## Available tools\n",
    );
    for t in tools {
        let schema = serde_json::to_string(&t.input_schema).unwrap_or_else(|_| "{}".into());
        out.push_str(&format!(
            "\n### {}\n{}\nArguments (JSON Schema): {}\n",
            t.name,
            t.description.trim(),
            schema
        ));
    }
    out
}

/// Placeholder arguments for the example call: each required property with a value of its type.
fn example_arguments(schema: &Value) -> Value {
    let mut args = serde_json::Map::new();
    let props = schema.get("properties");
    if let Some(Value::Array(required)) = schema.get("required") {
        for key in required.iter().filter_map(Value::as_str) {
            let ty = props
                .and_then(|p| p.get(key))
                .and_then(|p| p.get("type"))
                .and_then(|t| match t {
                    Value::String(s) => Some(s.as_str()),
                    Value::Array(a) => a.iter().filter_map(Value::as_str).find(|s| *s != "null"),
                    _ => None,
                });
            let value = match ty {
                Some("integer" | "number") => Value::from(1),
                Some("boolean") => Value::Bool(true),
                Some("array") => Value::Array(Vec::new()),
                Some("object") => Value::Object(serde_json::Map::new()),
                _ => Value::String(format!("<{key}>")),
            };
            args.insert(key.to_string(), value);
        }
    }
    Value::Object(args)
}

/// A call as the model is asked to write it: `<tool_call>\n{"name": …, "arguments": …}\n</tool_call>`
/// (`name` before `arguments`).
pub fn render_call(name: &str, input: &Value) -> String {
    let name = serde_json::to_string(name).unwrap_or_default();
    let args = to_spaced_json(input);
    format!("<tool_call>\n{{\"name\": {name}, \"arguments\": {args}}}\n</tool_call>")
}

/// One-line JSON with a space after `:` and `,` (`{"a": 1, "b": [1, 2]}`), the style the
/// model is shown.
fn to_spaced_json(value: &Value) -> String {
    use serde::Serialize;
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, SpacedFormatter);
    if value.serialize(&mut ser).is_err() {
        return "{}".to_string();
    }
    String::from_utf8(out).unwrap_or_else(|_| "{}".to_string())
}

/// `", "` before every array element and object key but the first.
fn separator<W: ?Sized + std::io::Write>(writer: &mut W, first: bool) -> std::io::Result<()> {
    if first {
        Ok(())
    } else {
        writer.write_all(b", ")
    }
}

/// A `serde_json` formatter writing `": "` and `", "` separators on one line.
struct SpacedFormatter;

impl serde_json::ser::Formatter for SpacedFormatter {
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        separator(writer, first)
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        separator(writer, first)
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(
        &mut self,
        writer: &mut W,
    ) -> std::io::Result<()> {
        writer.write_all(b": ")
    }
}

/// Re-renders a history for a model without native tools: assistant
/// [`ContentBlock::ToolUse`] blocks become [`render_call`] text, user
/// [`ContentBlock::ToolResult`] blocks become
/// `<tool_result id="…" name="…" error="true">…</tool_result>` text (`name` when the call is in
/// the history, `error` only for failed calls). A message holding such blocks becomes one text
/// block (parts joined by newlines); other messages are unchanged.
pub fn render_history(messages: &[Message]) -> Vec<Message> {
    let names: HashMap<&str, &str> = messages
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|b| match b {
            ContentBlock::ToolUse { id, name, .. } => Some((id.as_str(), name.as_str())),
            _ => None,
        })
        .collect();
    messages
        .iter()
        .map(|m| {
            let has_tool_blocks = m
                .content
                .iter()
                .any(|b| !matches!(b, ContentBlock::Text { .. }));
            if !has_tool_blocks {
                return m.clone();
            }
            let mut text = String::new();
            for block in &m.content {
                let part = match block {
                    ContentBlock::Text { text } => text.clone(),
                    ContentBlock::ToolUse { name, input, .. } => render_call(name, input),
                    ContentBlock::ToolResult {
                        tool_use_id,
                        content,
                        is_error,
                    } => render_result(
                        tool_use_id,
                        names.get(tool_use_id.as_str()).copied(),
                        content,
                        *is_error,
                    ),
                };
                if part.is_empty() {
                    continue;
                }
                if !text.is_empty() && !text.ends_with('\n') {
                    text.push('\n');
                }
                text.push_str(&part);
            }
            Message {
                role: m.role,
                content: vec![ContentBlock::Text { text }],
            }
        })
        .collect()
}

fn render_result(id: &str, name: Option<&str>, content: &str, is_error: bool) -> String {
    let attr = |v: &str| serde_json::to_string(v).unwrap_or_default();
    let mut open = format!("<tool_result id={}", attr(id));
    if let Some(name) = name {
        open.push_str(&format!(" name={}", attr(name)));
    }
    if is_error {
        open.push_str(" error=\"true\"");
    }
    format!("{open}>\n{content}\n</tool_result>")
}
