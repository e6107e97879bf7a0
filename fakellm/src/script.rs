//! The script a [`crate::FakeLlm`] plays: conversations, turns, tool calls and faults.
//!
//! See the crate documentation for the JSON format and an example.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::condition::Condition;

/// The example script shipped in `fakellm/examples/demo.json`; played by the binary when no
/// `--script` is given.
pub const DEMO_SCRIPT_JSON: &str = include_str!("../examples/demo.json");

/// Default stall length of a [`FaultKind::Stall`] fault, in milliseconds (10 minutes).
pub const DEFAULT_STALL_MS: u64 = 600_000;

/// Default `retry-after` of a [`FaultKind::Http429`] fault, in seconds.
pub const DEFAULT_RETRY_AFTER_SECS: u64 = 1;

/// Why a script could not be loaded or is not playable.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    /// The script file could not be read.
    #[error("cannot read script file {path}: {source} (check the path passed as --script)")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The script is not valid JSON or does not have the documented shape.
    #[error(
        "invalid script {origin}: {source} (see the ahelper-fake-llm crate docs for the format)"
    )]
    Parse {
        /// The file name, or `<inline>` for a string.
        origin: String,
        /// The JSON error, with line and column.
        source: serde_json::Error,
    },
    /// The script parsed but cannot be played as written.
    #[error("invalid script: {0}")]
    Invalid(String),
}

/// A whole script: the conversations the server can play, and global settings.
///
/// Source: the JSON format documented at the crate root. Build it in Rust with
/// [`Script::new`] and the `with_*` methods, or load it with [`Script::from_file`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// Free text for the script's reader; ignored by the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Delay added before every response of a model endpoint (`/v1/messages`,
    /// `/chat/completions`, `/v1/models`), in milliseconds. Not applied to `/health`.
    #[serde(default)]
    pub latency_ms: u64,
    /// Model name listed by `GET /v1/models` and echoed when a request names no model.
    /// Defaults to `fake-model`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Text answered when a request has more tool results than its conversation has turns
    /// (instead of replaying the last turn), unless the conversation sets its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_text: Option<String>,
    /// The conversations, tried in order; the first whose `match` fits the request wins.
    #[serde(default)]
    pub conversations: Vec<Conversation>,
    /// Directory that relative `raw_sse` paths are resolved against (set by
    /// [`Script::from_file`] to the script file's directory; otherwise the paths are used
    /// as given).
    #[serde(skip)]
    pub base_dir: Option<PathBuf>,
}

/// One scripted conversation: the turns the model plays, one per request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Conversation {
    /// A name for logs and assertions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Free text for the script's reader; ignored by the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Substring (case-sensitive) that must occur in the request's system prompt or first
    /// user message. `None` matches every request (a default conversation).
    #[serde(rename = "match", default, skip_serializing_if = "Option::is_none")]
    pub match_text: Option<String>,
    /// A condition on the requesting agent's working directory that must hold too (see
    /// [`Condition`]); checked when a conversation is chosen, which happens once per agent
    /// conversation (the choice is kept for later requests with the same system prompt and
    /// first user message).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<Condition>,
    /// What the turn index counts; default [`TurnIndex::ToolResults`].
    #[serde(default, skip_serializing_if = "TurnIndex::is_default")]
    pub turn_index: TurnIndex,
    /// The turns; turn `n` answers a request that carries `n` tool results (or `n` assistant
    /// messages, see [`Conversation::turn_index`]).
    #[serde(default)]
    pub turns: Vec<Turn>,
    /// Overrides [`Script::fallback_text`] for this conversation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_text: Option<String>,
}

/// One scripted model response.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    /// A condition on the requesting agent's working directory: when it does not hold,
    /// [`Turn::otherwise`] plays instead. Requires `otherwise`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<Condition>,
    /// The turn played when [`Turn::when`] does not hold (it may have its own `when`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub otherwise: Option<Box<Turn>>,
    /// Assistant text, streamed word by word.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Tool calls after the text; their arguments are streamed in pieces split mid-JSON.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// Stop reason override, in either vocabulary (`end_turn`, `tool_use`, `max_tokens`,
    /// `stop_sequence`, or `stop`, `tool_calls`, `length`, `content_filter`); translated to
    /// the request's wire format. Default: `tool_use`/`tool_calls` when there are tool calls,
    /// else `end_turn`/`stop`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    /// Token usage reported; default: request body bytes / 4 input tokens, output bytes / 4
    /// output tokens (at least 1 each).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Delay before the response headers, in milliseconds (added to the script latency).
    #[serde(default)]
    pub delay_ms: u64,
    /// Delay before each body chunk after the first, in milliseconds.
    #[serde(default)]
    pub chunk_delay_ms: u64,
    /// A fault injected into the first `times` requests that select this turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fault: Option<Fault>,
    /// A raw `.sse` file replayed byte-for-byte as the response body (status 200,
    /// `text/event-stream`), whatever the request's format. Relative paths are resolved
    /// against the script file's directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_sse: Option<PathBuf>,
    /// Like `raw_sse`, with the body given inline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_sse_inline: Option<String>,
    /// For `raw_sse`/`raw_sse_inline`: release the body in chunks of this many bytes instead
    /// of one chunk per SSE event (e.g. `1` for byte-by-byte delivery). With
    /// `raw_chunk_seed`, the largest chunk size instead (default 16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_chunk_bytes: Option<usize>,
    /// For `raw_sse`/`raw_sse_inline`: release the body in chunks of pseudo-random sizes
    /// (1 to `raw_chunk_bytes` bytes) drawn from this seed; the same seed gives the same cuts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_chunk_seed: Option<u64>,
}

/// A tool call the model makes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    /// Tool call id; default `toolu_fake…` (Anthropic) or `call_fake…` (OpenAI).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Tool name.
    pub name: String,
    /// Arguments: a JSON object.
    #[serde(default = "empty_object")]
    pub arguments: Value,
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

/// Token usage reported by a turn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Usage {
    /// Prompt tokens (OpenAI `prompt_tokens`).
    pub input_tokens: u64,
    /// Generated tokens (OpenAI `completion_tokens`).
    pub output_tokens: u64,
    /// Prompt tokens read from the prompt cache, besides `input_tokens` (Anthropic
    /// `cache_read_input_tokens`; OpenAI `prompt_tokens_details.cached_tokens`, counted in its
    /// `prompt_tokens`).
    #[serde(default)]
    pub cache_read_tokens: u64,
    /// Prompt tokens written to the prompt cache, besides `input_tokens` (Anthropic
    /// `cache_creation_input_tokens`; counted in OpenAI's `prompt_tokens`).
    #[serde(default)]
    pub cache_write_tokens: u64,
}

/// A fault injected instead of (or into) a turn's normal response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fault {
    /// What goes wrong.
    pub kind: FaultKind,
    /// How many requests selecting this turn get the fault before the turn plays normally.
    #[serde(default = "one")]
    pub times: u32,
    /// `retry-after` header value in seconds; default 1 for `http_429`, absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<u64>,
    /// For body faults: how many body chunks are sent before the fault. Defaults:
    /// `drop_mid_stream` half the chunks (at least 1), `malformed_line` 1, `stall` 1,
    /// `error_event` 2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_chunks: Option<usize>,
    /// For `stall`: how long nothing is sent before the connection is dropped, in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stall_ms: Option<u64>,
    /// Error message override for HTTP errors and error events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

fn one() -> u32 {
    1
}

/// The kinds of fault. JSON names in parentheses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FaultKind {
    /// (`http_429`) Rate limited: status 429 with a `retry-after` header.
    #[serde(rename = "http_429")]
    Http429,
    /// (`http_500`) Status 500, `api_error` / `server_error`.
    #[serde(rename = "http_500")]
    Http500,
    /// (`http_529`) Status 529 with Anthropic's `overloaded_error` body.
    #[serde(rename = "http_529")]
    Http529,
    /// (`http_400`) Status 400, `invalid_request_error`.
    #[serde(rename = "http_400")]
    Http400,
    /// (`http_401`) Status 401, `authentication_error` / `invalid_api_key`.
    #[serde(rename = "http_401")]
    Http401,
    /// (`http_403`) Status 403, `permission_error` / `invalid_request_error`.
    #[serde(rename = "http_403")]
    Http403,
    /// (`html_page`) Status 200 with `content-type: text/html` and a small HTML page, as a
    /// proxy's or router's login page answers: not a model API.
    #[serde(rename = "html_page")]
    HtmlPage,
    /// (`foreign_json`) Status 200 with `content-type: application/json` and the body
    /// `{"hello":"world"}` (or `message` as the value of `hello`): JSON, but no model reply.
    #[serde(rename = "foreign_json")]
    ForeignJson,
    /// (`drop_mid_stream`) Some chunks, then the connection is aborted without the final
    /// chunk of the chunked encoding: the client sees a body error, not a clean EOF.
    #[serde(rename = "drop_mid_stream")]
    DropMidStream,
    /// (`malformed_line`) A `data:` line that is not valid JSON is inserted; the stream then
    /// continues normally. For a non-streaming request the JSON body is cut in half.
    #[serde(rename = "malformed_line")]
    MalformedLine,
    /// (`stall`) Headers and some chunks, then nothing for `stall_ms`, then the connection
    /// is aborted.
    #[serde(rename = "stall")]
    Stall,
    /// (`error_event`) Status 200, some chunks, then an error event (Anthropic `event: error`
    /// with `overloaded_error`; OpenAI `data: {"error": …}` then `[DONE]`). For a
    /// non-streaming request: status 200 with an error object as the body.
    #[serde(rename = "error_event")]
    ErrorEvent,
}

impl FaultKind {
    /// The JSON name, e.g. `http_429`.
    pub fn as_str(self) -> &'static str {
        match self {
            FaultKind::Http429 => "http_429",
            FaultKind::Http500 => "http_500",
            FaultKind::Http529 => "http_529",
            FaultKind::Http400 => "http_400",
            FaultKind::Http401 => "http_401",
            FaultKind::Http403 => "http_403",
            FaultKind::HtmlPage => "html_page",
            FaultKind::ForeignJson => "foreign_json",
            FaultKind::DropMidStream => "drop_mid_stream",
            FaultKind::MalformedLine => "malformed_line",
            FaultKind::Stall => "stall",
            FaultKind::ErrorEvent => "error_event",
        }
    }
}

/// What a conversation's turn index counts in a request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnIndex {
    /// Tool results (Anthropic `tool_result` blocks, OpenAI `role: "tool"` messages): a turn
    /// with two tool calls is answered by `turns[n + 2]`.
    #[default]
    ToolResults,
    /// Assistant messages: one turn per model response, so a new user message after a
    /// text-only turn (e.g. ahelper sending a worker back with failing tests) moves on to the
    /// next turn instead of replaying the last one.
    AssistantMessages,
}

impl TurnIndex {
    fn is_default(&self) -> bool {
        *self == TurnIndex::ToolResults
    }
}

/// What [`Script::select`] looks at in a request.
#[derive(Debug, Clone, Copy, Default)]
pub struct RequestFacts<'a> {
    /// The system prompt and the first user message.
    pub texts: [&'a str; 2],
    /// Tool results in the request.
    pub tool_results: usize,
    /// Assistant messages in the request.
    pub assistant_messages: usize,
    /// The agent's working directory (see [`crate::condition::workdir_of`]).
    pub workdir: Option<&'a Path>,
}

/// The turn chosen for one request by [`Script::select`].
#[derive(Debug, Clone, PartialEq)]
pub struct Selection {
    /// Index of the conversation in [`Script::conversations`].
    pub conversation: usize,
    /// Index of the turn played; equals the number of turns when the fallback text plays.
    pub turn_index: usize,
    /// The turn to play (a text-only turn for the fallback text).
    pub turn: Turn,
}

impl Script {
    /// An empty script with no conversations.
    pub fn new() -> Self {
        Self::default()
    }

    /// The example script `examples/demo.json`: lists the workspace, reads `README.md`,
    /// answers.
    pub fn demo() -> Self {
        Self::from_json_str(DEMO_SCRIPT_JSON).expect("the embedded demo script is valid")
    }

    /// Parses a script from JSON text; relative `raw_sse` paths stay relative to the process.
    ///
    /// Errors: [`ScriptError::Parse`] (with line and column) or [`ScriptError::Invalid`].
    pub fn from_json_str(json: &str) -> Result<Self, ScriptError> {
        let script: Script = serde_json::from_str(json).map_err(|source| ScriptError::Parse {
            origin: "<inline>".into(),
            source,
        })?;
        script.validate()?;
        Ok(script)
    }

    /// Loads a script file; relative `raw_sse` paths resolve against its directory.
    ///
    /// Errors: [`ScriptError::Read`], [`ScriptError::Parse`] or [`ScriptError::Invalid`]
    /// (including a `raw_sse` file that does not exist).
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, ScriptError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| ScriptError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let mut script: Script =
            serde_json::from_str(&text).map_err(|source| ScriptError::Parse {
                origin: path.display().to_string(),
                source,
            })?;
        script.base_dir = Some(
            path.parent()
                .map(Path::to_path_buf)
                .unwrap_or_else(|| PathBuf::from(".")),
        );
        script.validate()?;
        script.check_raw_files()?;
        Ok(script)
    }

    /// Adds a conversation (builder style).
    pub fn with_conversation(mut self, conversation: Conversation) -> Self {
        self.conversations.push(conversation);
        self
    }

    /// Sets [`Script::latency_ms`].
    pub fn with_latency_ms(mut self, latency_ms: u64) -> Self {
        self.latency_ms = latency_ms;
        self
    }

    /// Sets [`Script::fallback_text`].
    pub fn with_fallback_text(mut self, text: impl Into<String>) -> Self {
        self.fallback_text = Some(text.into());
        self
    }

    /// Sets [`Script::base_dir`].
    pub fn with_base_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.base_dir = Some(dir.into());
        self
    }

    /// The model name served (`fake-model` unless set).
    pub fn model_name(&self) -> &str {
        self.model.as_deref().unwrap_or("fake-model")
    }

    /// Resolves a `raw_sse` path against [`Script::base_dir`].
    pub fn resolve(&self, path: &Path) -> PathBuf {
        match &self.base_dir {
            Some(dir) if path.is_relative() => dir.join(path),
            _ => path.to_path_buf(),
        }
    }

    /// Checks that every conversation can play: it has a turn or a fallback text, tool call
    /// arguments are objects, a turn has at most one raw body, `times` is at least 1, a turn's
    /// `when` comes with an `otherwise` (and `otherwise` with a `when`), condition paths stay
    /// inside the working directory.
    ///
    /// Errors: [`ScriptError::Invalid`] naming the conversation and turn.
    pub fn validate(&self) -> Result<(), ScriptError> {
        for (c, conv) in self.conversations.iter().enumerate() {
            let name = conv.label(c);
            if conv.turns.is_empty() && conv.fallback_text.is_none() {
                return Err(ScriptError::Invalid(format!(
                    "{name} has no turns; give it at least one turn or a fallback_text"
                )));
            }
            if let Some(when) = &conv.when {
                when.validate()
                    .map_err(|e| ScriptError::Invalid(format!("{name} `when`: {e}")))?;
            }
            for (t, turn) in conv.turns.iter().enumerate() {
                for (depth, turn) in turn.alternatives().enumerate() {
                    let at = if depth == 0 {
                        format!("{name} turn {t}")
                    } else {
                        format!("{name} turn {t} (otherwise #{depth})")
                    };
                    validate_turn(turn).map_err(|e| ScriptError::Invalid(format!("{at}: {e}")))?;
                }
            }
        }
        Ok(())
    }

    /// Checks that every `raw_sse` file exists (after [`Script::resolve`]).
    ///
    /// Errors: [`ScriptError::Invalid`] naming the missing file.
    pub fn check_raw_files(&self) -> Result<(), ScriptError> {
        for (c, conv) in self.conversations.iter().enumerate() {
            for (t, turn) in conv.turns.iter().enumerate() {
                for raw in turn.alternatives().filter_map(|a| a.raw_sse.as_ref()) {
                    let path = self.resolve(raw);
                    if !path.is_file() {
                        return Err(ScriptError::Invalid(format!(
                            "{} turn {t}: raw_sse file {} does not exist",
                            conv.label(c),
                            path.display()
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    /// Chooses the conversation and turn for a request.
    ///
    /// The conversation is `pinned` when given (the one chosen at the agent's first request),
    /// else the first whose `match` occurs in one of `facts.texts` (or that has no `match`)
    /// and whose `when` holds in `facts.workdir`. The turn is `turns[n]`, `n` counted as the
    /// conversation's [`TurnIndex`] says, with [`Turn::when`]/[`Turn::otherwise`] resolved;
    /// past the end, the fallback text if one is set, else the last turn. `None` when no
    /// conversation fits.
    pub fn select(&self, facts: &RequestFacts<'_>, pinned: Option<usize>) -> Option<Selection> {
        let conversation = pinned
            .filter(|c| *c < self.conversations.len())
            .or_else(|| self.choose_conversation(facts))?;
        Some(self.choose_turn(conversation, facts))
    }

    /// The index of the first conversation whose `match` and `when` fit the request.
    pub fn choose_conversation(&self, facts: &RequestFacts<'_>) -> Option<usize> {
        self.conversations.iter().position(|c| {
            c.match_text
                .as_deref()
                .is_none_or(|m| facts.texts.iter().any(|t| t.contains(m)))
                && c.when.as_ref().is_none_or(|w| w.holds(facts.workdir))
        })
    }

    fn choose_turn(&self, conversation: usize, facts: &RequestFacts<'_>) -> Selection {
        let conv = &self.conversations[conversation];
        let n = match conv.turn_index {
            TurnIndex::ToolResults => facts.tool_results,
            TurnIndex::AssistantMessages => facts.assistant_messages,
        };
        let (turn_index, turn) = match (
            conv.turns.get(n),
            conv.fallback_text.as_ref().or(self.fallback_text.as_ref()),
        ) {
            (Some(turn), _) => (n, turn.resolve(facts.workdir)),
            (None, Some(text)) => (conv.turns.len(), Turn::text(text.clone())),
            (None, None) => {
                let last = conv.turns.len() - 1;
                (last, conv.turns[last].resolve(facts.workdir))
            }
        };
        Selection {
            conversation,
            turn_index,
            turn,
        }
    }
}

/// The checks of [`Script::validate`] for one turn (not its `otherwise`).
fn validate_turn(turn: &Turn) -> Result<(), String> {
    if turn.raw_sse.is_some() && turn.raw_sse_inline.is_some() {
        return Err("sets both raw_sse and raw_sse_inline; keep one".into());
    }
    if turn.raw_chunk_bytes == Some(0) {
        return Err("raw_chunk_bytes must be at least 1".into());
    }
    if let Some(call) = turn.tool_calls.iter().find(|c| !c.arguments.is_object()) {
        return Err(format!(
            "arguments of tool call `{}` must be a JSON object",
            call.name
        ));
    }
    if turn.fault.as_ref().is_some_and(|f| f.times == 0) {
        return Err("fault.times must be at least 1 (remove the fault instead)".into());
    }
    match (&turn.when, &turn.otherwise) {
        (Some(when), Some(_)) => when.validate(),
        (Some(_), None) => {
            Err("`when` needs an `otherwise` turn to play when it does not hold".into())
        }
        (None, Some(_)) => Err("`otherwise` needs a `when`".into()),
        (None, None) => Ok(()),
    }
}

impl Conversation {
    /// An empty default conversation (no `match`).
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets [`Conversation::name`].
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Sets the `match` substring.
    pub fn matching(mut self, text: impl Into<String>) -> Self {
        self.match_text = Some(text.into());
        self
    }

    /// Sets [`Conversation::when`].
    pub fn when(mut self, condition: Condition) -> Self {
        self.when = Some(condition);
        self
    }

    /// Sets [`Conversation::turn_index`].
    pub fn with_turn_index(mut self, turn_index: TurnIndex) -> Self {
        self.turn_index = turn_index;
        self
    }

    /// Appends a turn.
    pub fn turn(mut self, turn: Turn) -> Self {
        self.turns.push(turn);
        self
    }

    /// Sets [`Conversation::fallback_text`].
    pub fn with_fallback_text(mut self, text: impl Into<String>) -> Self {
        self.fallback_text = Some(text.into());
        self
    }

    fn label(&self, index: usize) -> String {
        match &self.name {
            Some(name) => format!("conversation {index} (`{name}`)"),
            None => format!("conversation {index}"),
        }
    }
}

impl Turn {
    /// The turn to play in `workdir`: this one (without its condition) when its `when` holds
    /// or it has none, else its `otherwise`, resolved the same way.
    pub fn resolve(&self, workdir: Option<&Path>) -> Turn {
        let mut turn = self;
        while let (Some(when), Some(otherwise)) = (&turn.when, &turn.otherwise) {
            if when.holds(workdir) {
                break;
            }
            turn = otherwise;
        }
        Turn {
            when: None,
            otherwise: None,
            ..turn.clone()
        }
    }

    /// This turn and its chain of `otherwise` turns.
    fn alternatives(&self) -> impl Iterator<Item = &Turn> {
        std::iter::successors(Some(self), |t| t.otherwise.as_deref())
    }

    /// Sets the condition and the turn played when it does not hold.
    pub fn when(mut self, condition: Condition, otherwise: Turn) -> Self {
        self.when = Some(condition);
        self.otherwise = Some(Box::new(otherwise));
        self
    }

    /// An empty turn (no text, no tool calls).
    pub fn new() -> Self {
        Self::default()
    }

    /// A turn that answers with text only.
    pub fn text(text: impl Into<String>) -> Self {
        Self::new().with_text(text)
    }

    /// A turn that makes one tool call (generated id).
    pub fn tool_call(name: impl Into<String>, arguments: Value) -> Self {
        Self::new().with_tool_call(name, arguments)
    }

    /// A turn that replays a raw SSE body.
    pub fn raw_sse_inline(body: impl Into<String>) -> Self {
        Self {
            raw_sse_inline: Some(body.into()),
            ..Self::default()
        }
    }

    /// Sets the text.
    pub fn with_text(mut self, text: impl Into<String>) -> Self {
        self.text = Some(text.into());
        self
    }

    /// Appends a tool call with a generated id.
    pub fn with_tool_call(mut self, name: impl Into<String>, arguments: Value) -> Self {
        self.tool_calls.push(ToolCall {
            id: None,
            name: name.into(),
            arguments,
        });
        self
    }

    /// Appends a tool call with a fixed id.
    pub fn with_tool_call_id(
        mut self,
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: Value,
    ) -> Self {
        self.tool_calls.push(ToolCall {
            id: Some(id.into()),
            name: name.into(),
            arguments,
        });
        self
    }

    /// Sets the stop reason override.
    pub fn with_stop_reason(mut self, stop_reason: impl Into<String>) -> Self {
        self.stop_reason = Some(stop_reason.into());
        self
    }

    /// Sets the reported usage (tokens).
    pub fn with_usage(mut self, input_tokens: u64, output_tokens: u64) -> Self {
        self.usage = Some(Usage {
            input_tokens,
            output_tokens,
            ..Usage::default()
        });
        self
    }

    /// Sets the reported usage with prompt-cache reads and writes (tokens; see [`Usage`]).
    pub fn with_cached_usage(mut self, usage: Usage) -> Self {
        self.usage = Some(usage);
        self
    }

    /// Sets the delay before the response, in milliseconds.
    pub fn with_delay_ms(mut self, ms: u64) -> Self {
        self.delay_ms = ms;
        self
    }

    /// Sets the delay between body chunks, in milliseconds.
    pub fn with_chunk_delay_ms(mut self, ms: u64) -> Self {
        self.chunk_delay_ms = ms;
        self
    }

    /// Sets the fault.
    pub fn with_fault(mut self, fault: Fault) -> Self {
        self.fault = Some(fault);
        self
    }

    /// Sets the raw `.sse` file.
    pub fn with_raw_sse(mut self, path: impl Into<PathBuf>) -> Self {
        self.raw_sse = Some(path.into());
        self
    }

    /// Sets [`Turn::raw_chunk_bytes`].
    pub fn with_raw_chunk_bytes(mut self, bytes: usize) -> Self {
        self.raw_chunk_bytes = Some(bytes);
        self
    }

    /// Sets [`Turn::raw_chunk_seed`] (random chunk sizes).
    pub fn with_raw_chunk_seed(mut self, seed: u64) -> Self {
        self.raw_chunk_seed = Some(seed);
        self
    }
}

impl Fault {
    /// A fault of `kind` for the first request (times = 1), other fields default.
    pub fn new(kind: FaultKind) -> Self {
        Self {
            kind,
            times: 1,
            retry_after: None,
            after_chunks: None,
            stall_ms: None,
            message: None,
        }
    }

    /// Sets how many requests get the fault.
    pub fn times(mut self, times: u32) -> Self {
        self.times = times;
        self
    }

    /// Sets the `retry-after` header, in seconds.
    pub fn retry_after(mut self, secs: u64) -> Self {
        self.retry_after = Some(secs);
        self
    }

    /// Sets how many chunks are sent before a body fault.
    pub fn after_chunks(mut self, chunks: usize) -> Self {
        self.after_chunks = Some(chunks);
        self
    }

    /// Sets the stall length, in milliseconds.
    pub fn stall_ms(mut self, ms: u64) -> Self {
        self.stall_ms = Some(ms);
        self
    }

    /// Sets the error message.
    pub fn message(mut self, message: impl Into<String>) -> Self {
        self.message = Some(message.into());
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn facts<'a>(system: &'a str, user: &'a str, tool_results: usize) -> RequestFacts<'a> {
        RequestFacts {
            texts: [system, user],
            tool_results,
            assistant_messages: tool_results,
            workdir: None,
        }
    }

    fn script() -> Script {
        Script::new()
            .with_conversation(
                Conversation::new()
                    .matching("fix the bug")
                    .turn(Turn::tool_call("read_file", json!({"path": "a"})))
                    .turn(Turn::text("fixed")),
            )
            .with_conversation(Conversation::new().turn(Turn::text("default")))
    }

    #[test]
    fn first_matching_conversation_wins_and_default_catches_the_rest() {
        let s = script();
        assert_eq!(
            s.select(&facts("", "please fix the bug", 0), None)
                .unwrap()
                .conversation,
            0
        );
        assert_eq!(
            s.select(&facts("fix the bug", "", 1), None).unwrap().turn,
            Turn::text("fixed")
        );
        assert_eq!(
            s.select(&facts("", "hello", 0), None).unwrap().conversation,
            1
        );
    }

    #[test]
    fn past_the_last_turn_plays_last_turn_or_fallback() {
        let s = script();
        let sel = s.select(&facts("fix the bug", "", 5), None).unwrap();
        assert_eq!((sel.turn_index, sel.turn), (1, Turn::text("fixed")));
        let s = s.with_fallback_text("done");
        let sel = s.select(&facts("fix the bug", "", 5), None).unwrap();
        assert_eq!((sel.turn_index, sel.turn), (2, Turn::text("done")));
    }

    #[test]
    fn no_match_and_no_default_selects_nothing() {
        let s = Script::new()
            .with_conversation(Conversation::new().matching("x").turn(Turn::text("y")));
        assert!(s.select(&facts("abc", "", 0), None).is_none());
    }

    #[test]
    fn json_names_and_validation() {
        let s = Script::from_json_str(
            r#"{"conversations":[{"match":"m","turns":[{"text":"t",
                "fault":{"kind":"http_429","retry_after":3}}]}]}"#,
        )
        .unwrap();
        let fault = s.conversations[0].turns[0].fault.clone().unwrap();
        assert_eq!(
            (fault.kind, fault.times, fault.retry_after),
            (FaultKind::Http429, 1, Some(3))
        );
        let err = Script::from_json_str(r#"{"conversations":[{"turns":[{"txt":"t"}]}]}"#);
        assert!(err.unwrap_err().to_string().contains("unknown field `txt`"));
        let err = Script::from_json_str(
            r#"{"conversations":[{"turns":[{"tool_calls":[{"name":"x","arguments":[1]}]}]}]}"#,
        );
        assert!(
            err.unwrap_err()
                .to_string()
                .contains("must be a JSON object")
        );
        assert!(Script::from_json_str(r#"{"conversations":[{"turns":[]}]}"#).is_err());
    }

    #[test]
    fn conversations_and_turns_are_chosen_by_disk() {
        let dir = tempfile::tempdir().unwrap();
        let s = Script::from_json_str(
            r#"{"conversations": [
                {"name": "merger", "when": {"has_conflict_markers": true},
                 "turns": [{"text": "resolving"}]},
                {"name": "fixer", "match": "fixer",
                 "when": {"all": [{"file_contains": {"path": "calc.py", "text": "def plus"}},
                                  {"file_contains": {"path": "report.py", "text": "calc.add"}}]},
                 "turns": [{"when": {"file_exists": "notes.txt"}, "text": "with notes",
                            "otherwise": {"text": "without notes"}}]},
                {"name": "default", "turns": [{"text": "nothing to do"}]}
            ]}"#,
        )
        .unwrap();
        let d = dir.path();
        let at = |user: &'static str| RequestFacts {
            texts: ["", user],
            workdir: Some(d),
            ..RequestFacts::default()
        };
        let play = |user: &'static str| {
            let sel = s.select(&at(user), None).unwrap();
            (sel.conversation, sel.turn.text.unwrap())
        };
        std::fs::write(d.join("calc.py"), "def plus(a, b): ...\n").unwrap();
        assert_eq!(play("you are the fixer"), (2, "nothing to do".into()));
        std::fs::write(d.join("report.py"), "import calc\ncalc.add(1, 2)\n").unwrap();
        assert_eq!(play("you are the fixer"), (1, "without notes".into()));
        assert_eq!(play("someone else"), (2, "nothing to do".into()));
        std::fs::write(d.join("notes.txt"), "").unwrap();
        assert_eq!(play("you are the fixer"), (1, "with notes".into()));
        std::fs::write(d.join("m.py"), "<<<<<<< HEAD\n=======\n>>>>>>> b\n").unwrap();
        assert_eq!(play("you are the fixer"), (0, "resolving".into()));
        // A pinned conversation stays chosen whatever the disk says now.
        let sel = s.select(&at("you are the fixer"), Some(1)).unwrap();
        assert_eq!(sel.conversation, 1);
        assert!(sel.turn.when.is_none() && sel.turn.otherwise.is_none());
        // No working directory: no condition holds.
        let none = RequestFacts {
            texts: ["", "you are the fixer"],
            ..RequestFacts::default()
        };
        assert_eq!(s.select(&none, None).unwrap().conversation, 2);
    }

    #[test]
    fn assistant_messages_turn_index_moves_on_after_a_user_message() {
        let s = Script::new().with_conversation(
            Conversation::new()
                .with_turn_index(TurnIndex::AssistantMessages)
                .turn(
                    Turn::tool_call("a", serde_json::json!({}))
                        .with_tool_call("b", serde_json::json!({})),
                )
                .turn(Turn::text("first answer"))
                .turn(Turn::text("second answer")),
        );
        let at = |tool_results, assistant_messages| {
            let facts = RequestFacts {
                tool_results,
                assistant_messages,
                ..RequestFacts::default()
            };
            s.select(&facts, None).unwrap().turn.text
        };
        assert_eq!(at(2, 1), Some("first answer".into()));
        assert_eq!(at(2, 2), Some("second answer".into()));
    }

    #[test]
    fn condition_rules_are_checked_when_loading() {
        for (json, needle) in [
            (
                r#"{"conversations":[{"turns":[{"when":{"file_exists":"a"},"text":"x"}]}]}"#,
                "needs an `otherwise`",
            ),
            (
                r#"{"conversations":[{"turns":[{"otherwise":{"text":"y"},"text":"x"}]}]}"#,
                "`otherwise` needs a `when`",
            ),
            (
                r#"{"conversations":[{"when":{"file_exists":"../a"},"turns":[{"text":"x"}]}]}"#,
                "must be relative",
            ),
            (
                r#"{"conversations":[{"turns":[{"when":{"file_exists":"a"},"text":"x","otherwise":{"when":{"file_missing":"/b"},"text":"y","otherwise":{"text":"z"}}}]}]}"#,
                "otherwise #1",
            ),
            (
                r#"{"conversations":[{"when":{"file_exsts":"a"},"turns":[{"text":"x"}]}]}"#,
                "unknown variant",
            ),
            (
                r#"{"conversations":[{"turn_index":"responses","turns":[{"text":"x"}]}]}"#,
                "unknown variant",
            ),
        ] {
            let err = Script::from_json_str(json).unwrap_err().to_string();
            assert!(err.contains(needle), "{json}: {err}");
        }
    }

    #[test]
    fn demo_script_is_valid() {
        assert!(!Script::demo().conversations.is_empty());
    }
}
