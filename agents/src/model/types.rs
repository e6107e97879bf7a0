//! Provider-neutral message and event types.
//!
//! Internally a conversation is a list of [`Message`]s made of [`ContentBlock`]s (text, tool use,
//! tool result) — the shape of the Anthropic Messages API
//! (<https://docs.anthropic.com/en/api/messages>). Each provider translates to and from its wire
//! format.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::pin::Pin;

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The user, or tool results sent back on the user's side.
    User,
    /// The model.
    Assistant,
}

/// One block of a message's content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// A tool call made by the model.
    ToolUse {
        /// Provider-assigned (or locally generated) call id; tool results refer to it.
        id: String,
        /// Tool name.
        name: String,
        /// Arguments, always a JSON object.
        input: Value,
    },
    /// The result of a tool call, sent back to the model on the user side.
    ToolResult {
        /// The id of the [`ContentBlock::ToolUse`] this answers.
        tool_use_id: String,
        /// The result text the model reads.
        content: String,
        /// True when the call failed or was refused; the model should act on the error.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
    },
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text { text: text.into() }
    }

    /// A tool call block.
    pub fn tool_use(id: impl Into<String>, name: impl Into<String>, input: Value) -> Self {
        ContentBlock::ToolUse {
            id: id.into(),
            name: name.into(),
            input,
        }
    }

    /// A tool result block answering the call `tool_use_id`.
    pub fn tool_result(
        tool_use_id: impl Into<String>,
        content: impl Into<String>,
        is_error: bool,
    ) -> Self {
        ContentBlock::ToolResult {
            tool_use_id: tool_use_id.into(),
            content: content.into(),
            is_error,
        }
    }
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Author.
    pub role: Role,
    /// Content blocks in order.
    pub content: Vec<ContentBlock>,
}

impl Message {
    /// A user message holding one text block.
    pub fn user_text(text: impl Into<String>) -> Self {
        Message {
            role: Role::User,
            content: vec![ContentBlock::text(text)],
        }
    }

    /// An assistant message holding one text block.
    pub fn assistant_text(text: impl Into<String>) -> Self {
        Message {
            role: Role::Assistant,
            content: vec![ContentBlock::text(text)],
        }
    }

    /// A user prompt, the assistant's turn (`text`, then the tool `calls` as `(id, name,
    /// input)`) and the user message carrying the `results` as `(id, content, is_error)`: one
    /// round of tool use, for tests.
    #[cfg(test)]
    pub(crate) fn tool_round(
        prompt: &str,
        text: &str,
        calls: &[(&str, &str, Value)],
        results: &[(&str, &str, bool)],
    ) -> Vec<Message> {
        let mut turn = vec![ContentBlock::text(text)];
        turn.extend(
            calls
                .iter()
                .map(|(id, name, input)| ContentBlock::tool_use(*id, *name, input.clone())),
        );
        let results = results
            .iter()
            .map(|(id, content, is_error)| ContentBlock::tool_result(*id, *content, *is_error));
        vec![
            Message::user_text(prompt),
            Message {
                role: Role::Assistant,
                content: turn,
            },
            Message {
                role: Role::User,
                content: results.collect(),
            },
        ]
    }

    /// All text blocks joined with no separator.
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }
}

/// A tool offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// Tool name (`^[a-zA-Z0-9_-]{1,64}$`).
    pub name: String,
    /// When to use it and what it returns.
    pub description: String,
    /// JSON Schema (draft 2020-12) of the arguments object.
    pub input_schema: Value,
}

/// One request to a model: everything needed for one turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelRequest {
    /// Model name as the provider knows it.
    pub model: String,
    /// System prompt.
    pub system: String,
    /// Length in bytes of the system prompt's prefix shared by every agent of a run with the
    /// same role (`agent::prompt::SystemPrompt::shared_len`); 0 when unknown. The Anthropic
    /// request puts a cache breakpoint at its end, so agents read one cache entry.
    #[serde(default)]
    pub system_shared_len: usize,
    /// Conversation so far; the last message is from the user.
    pub messages: Vec<Message>,
    /// Tools the model may call.
    pub tools: Vec<ToolSpec>,
    /// Upper bound on output tokens for this turn.
    pub max_output_tokens: u32,
}

/// Token usage of one turn, in tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt (input) tokens, all of them: uncached, written to the provider's prompt cache,
    /// and read from it.
    pub input_tokens: u64,
    /// Completion (output) tokens.
    pub output_tokens: u64,
    /// Of `input_tokens`, those read from the provider's prompt cache (Anthropic
    /// `cache_read_input_tokens`, OpenAI `prompt_tokens_details.cached_tokens`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_read_tokens: u64,
    /// Of `input_tokens`, those written to the provider's prompt cache (Anthropic
    /// `cache_creation_input_tokens`; OpenAI reports none).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Usage {
    /// Component-wise sum.
    pub fn add(&mut self, other: Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
    }

    /// Input tokens neither read from nor written to the prompt cache.
    pub fn uncached_input_tokens(&self) -> u64 {
        self.input_tokens
            .saturating_sub(self.cache_read_tokens)
            .saturating_sub(self.cache_write_tokens)
    }
}

/// Why the model stopped producing output in a turn (provider-neutral).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model finished its answer (`end_turn`, OpenAI `stop`).
    EndTurn,
    /// The model wants tool calls run (`tool_use`, OpenAI `tool_calls`).
    ToolUse,
    /// The output-token limit cut the answer (`max_tokens`, OpenAI `length`).
    MaxTokens,
    /// A stop sequence was hit.
    StopSequence,
    /// Anything else the provider reported, verbatim.
    Other(String),
}

/// A complete tool call assembled from a stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Call id (provider's, or generated locally as `call_local_<n>` when the provider gave none).
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Parsed arguments (a JSON object).
    pub input: Value,
}

/// What a model stream yields, in order. A successful stream ends with exactly one
/// [`ModelEvent::Stop`]; a failed one ends with an `Err` item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum ModelEvent {
    /// A piece of assistant text, to be shown as it arrives.
    TextDelta {
        /// The text piece.
        text: String,
    },
    /// A tool call whose arguments are complete and parse as a JSON object.
    ToolCall(ToolCall),
    /// A tool call that must not be executed: its arguments were cut off by the output limit or do
    /// not parse. The agent loop answers it with an error tool result carrying `error`.
    InvalidToolCall {
        /// Call id (provider's or generated).
        id: String,
        /// Tool name as far as known (may be empty).
        name: String,
        /// The raw argument text received, for display (may be long; truncate before showing).
        raw_arguments: String,
        /// What is wrong, phrased for the model (e.g. "output truncated by max_tokens").
        error: String,
    },
    /// Token usage so far in this turn; later values replace earlier ones.
    Usage(Usage),
    /// The request failed and will be sent again after `delay_ms`. Everything received since the
    /// request started (text, tool calls, usage) must be discarded by the consumer.
    Retry {
        /// 1-based number of the attempt that is about to start.
        attempt: u32,
        /// Total attempts allowed.
        max_attempts: u32,
        /// Wait before the next attempt, in milliseconds.
        delay_ms: u64,
        /// Human-readable cause (e.g. "HTTP 429 Too Many Requests").
        reason: String,
    },
    /// The turn ended normally.
    Stop {
        /// Why it ended.
        reason: StopReason,
    },
}

/// Errors a model stream can end with.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    /// The HTTP request got a non-success status.
    #[error("HTTP {status} from the model provider: {body}")]
    Http {
        /// Status code.
        status: u16,
        /// Response body (truncated to 2,000 bytes).
        body: String,
        /// `retry-after` header in milliseconds, when sent.
        retry_after_ms: Option<u64>,
    },
    /// The provider reported an error inside a 200 stream (`event: error`, `{"error": …}`).
    #[error("model provider error ({kind}): {message}")]
    Api {
        /// Error type, e.g. `overloaded_error`.
        kind: String,
        /// Message from the provider.
        message: String,
    },
    /// The server refused the API key: HTTP 401 (unknown key) or 403 (no permission). Never
    /// retried; the message names the environment variable the key came from.
    #[error("{}", auth_message(*status, api_key_env, body))]
    Auth {
        /// 401 or 403.
        status: u16,
        /// The variable named by `api_key_env`, e.g. `ANTHROPIC_API_KEY`; empty when unknown.
        api_key_env: String,
        /// Response body (truncated to 2,000 bytes).
        body: String,
    },
    /// HTTP 404: nothing answers at the URL called (a wrong `base_url`), or the provider does
    /// not know the model. Never retried.
    #[error(
        "HTTP 404 Not Found from {url}: {body}; check {}, and the model name if the server \
         says the model does not exist",
        endpoint_note(base_url, base_url_origin)
    )]
    NotFound {
        /// The URL that was called.
        url: String,
        /// The configured `base_url` it was built from.
        base_url: String,
        /// Where `base_url` was set (see [`SettingsOrigin::base_url`]); empty when unknown.
        base_url_origin: String,
        /// Response body (truncated to 2,000 bytes).
        body: String,
    },
    /// A 2xx answer that is no model reply: an HTML page, plain text, JSON of another shape.
    /// Never retried: the same URL gives the same page.
    #[error(
        "this does not look like an Anthropic/OpenAI-compatible endpoint ({what} from {url}): \
         check {}",
        endpoint_note(base_url, base_url_origin)
    )]
    NotAnEndpoint {
        /// What came back, e.g. `content-type text/html` or `a JSON reply without "content"`.
        what: String,
        /// The URL that was called; empty until the transport fills it in.
        url: String,
        /// The configured `base_url`; empty when unknown.
        base_url: String,
        /// Where `base_url` was set; empty when unknown.
        base_url_origin: String,
    },
    /// The stream ended before its terminal event (`message_stop`, `[DONE]`/finish).
    #[error("the model's reply stream ended before it was complete: {0}")]
    Incomplete(String),
    /// Connection-level failure (connect, reset, timeout).
    #[error("connection to the model provider failed: {0}")]
    Connection(String),
    /// A stream event that could not be decoded.
    #[error("could not decode the model's reply: {0}")]
    Decode(String),
    /// A frame of the reply stream that is not what the wire format allows (an event whose
    /// data is not JSON, bytes that are not UTF-8 or not server-sent events): what a proxy
    /// that corrupts or cuts a frame sends. Retried like a dropped stream; the text quotes
    /// the frame (clipped to 200 bytes).
    #[error("the model's reply stream carried a malformed event: {0}")]
    MalformedEvent(String),
    /// The request was cancelled.
    #[error("cancelled")]
    Cancelled,
}

impl ModelError {
    /// Whether a retry may succeed: 408/409/429/500/502–504/529, provider error events,
    /// incomplete streams, malformed stream events and connection errors (501 Not Implemented never changes).
    pub fn is_retryable(&self) -> bool {
        match self {
            ModelError::Http { status, .. } => {
                matches!(status, 408 | 409 | 429 | 500 | 502..=504 | 529)
            }
            ModelError::Api { kind, .. } => !matches!(
                kind.as_str(),
                "invalid_request_error"
                    | "authentication_error"
                    | "permission_error"
                    | "not_found_error"
                    | "request_too_large"
            ),
            ModelError::Incomplete(_)
            | ModelError::Connection(_)
            | ModelError::MalformedEvent(_) => true,
            ModelError::Auth { .. }
            | ModelError::NotFound { .. }
            | ModelError::NotAnEndpoint { .. }
            | ModelError::Decode(_)
            | ModelError::Cancelled => false,
        }
    }

    /// Whether the error is about the settings (key, `base_url`) rather than this request:
    /// retrying or resuming the conversation gives the same error until the user fixes them.
    pub fn is_settings_error(&self) -> bool {
        matches!(
            self,
            ModelError::Auth { .. }
                | ModelError::NotFound { .. }
                | ModelError::NotAnEndpoint { .. }
        )
    }

    /// A reply that is no model reply (`what`, e.g. `a JSON reply without "content"`), with the
    /// URL and `base_url` left empty for [`ModelError::with_endpoint`] to fill in.
    pub fn not_an_endpoint(what: impl Into<String>) -> Self {
        ModelError::NotAnEndpoint {
            what: what.into(),
            url: String::new(),
            base_url: String::new(),
            base_url_origin: String::new(),
        }
    }

    /// `self` with an empty URL / `base_url` of a [`ModelError::NotAnEndpoint`] filled in.
    /// Other errors are returned unchanged.
    pub fn with_endpoint(self, url: &str, base_url: &str, origin: &SettingsOrigin) -> Self {
        match self {
            ModelError::NotAnEndpoint { what, url: u, .. } if u.is_empty() => {
                ModelError::NotAnEndpoint {
                    what,
                    url: url.to_string(),
                    base_url: base_url.to_string(),
                    base_url_origin: origin.base_url.clone(),
                }
            }
            other => other,
        }
    }
}

/// The text of [`ModelError::Auth`].
fn auth_message(status: u16, api_key_env: &str, body: &str) -> String {
    let key = if api_key_env.is_empty() {
        "the API key".to_string()
    } else {
        format!("the API key in {api_key_env}")
    };
    let check = if status == 403 {
        "check it and its permissions"
    } else {
        "check it"
    };
    let said = server_message(body);
    let said = if said.is_empty() {
        String::new()
    } else {
        format!(" (the server said: {said})")
    };
    format!("{key} was refused (HTTP {status}): {check}{said}")
}

/// The message of an error body: `error.message` or `message` of a JSON body (both providers'
/// error shapes), else the body as sent.
fn server_message(body: &str) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_str(body).ok();
    parsed
        .as_ref()
        .and_then(|v| v["error"]["message"].as_str().or(v["message"].as_str()))
        .unwrap_or(body)
        .to_string()
}

/// `base_url X (set by ORIGIN)` for endpoint errors; plain `base_url` when it is unknown.
fn endpoint_note(base_url: &str, origin: &str) -> String {
    match (base_url.is_empty(), origin.is_empty()) {
        (true, _) => "base_url".to_string(),
        (false, true) => format!("base_url {base_url}"),
        (false, false) => format!("base_url {base_url} (set by {origin})"),
    }
}

/// A stream of model events for one turn.
pub type ModelStream =
    Pin<Box<dyn futures::Stream<Item = Result<ModelEvent, ModelError>> + Send + 'static>>;

/// A chat model that streams one turn at a time.
///
/// Implementations: [`crate::model::anthropic::AnthropicClient`],
/// [`crate::model::openai::OpenAiClient`], the text tool protocol wrapper
/// [`crate::model::text_protocol::TextToolProtocol`] and [`crate::model::scripted::ScriptedClient`]
/// for unit tests.
pub trait ModelClient: Send + Sync {
    /// Starts one turn. Retries (with [`ModelEvent::Retry`] events) happen inside the stream.
    fn stream(&self, request: ModelRequest) -> ModelStream;

    /// A short description for logs and `/model`, e.g. `anthropic claude-sonnet-4-5`.
    fn describe(&self) -> String;
}

/// Which wire format a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderKind {
    /// Anthropic Messages API, `POST {base_url}/v1/messages`.
    Anthropic,
    /// OpenAI-compatible Chat Completions, `POST {base_url}/chat/completions`.
    Openai,
}

/// How tools are offered to the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolProtocol {
    /// The provider's native tool calls.
    #[default]
    Native,
    /// Tools described in the system prompt; the model writes `<tool_call>{json}</tool_call>`.
    Text,
}

/// An API key. Its `Debug` output is redacted so it never reaches logs or transcripts.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct ApiKey(pub String);

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_empty() {
            "ApiKey(<none>)"
        } else {
            "ApiKey(<redacted>)"
        })
    }
}

/// Fully resolved settings for one model provider (after config layering).
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderSettings {
    /// Wire format.
    pub kind: ProviderKind,
    /// Model name sent to the provider.
    pub model: String,
    /// Base URL, e.g. `https://api.anthropic.com` or `http://127.0.0.1:8089/v1`.
    pub base_url: String,
    /// Key from the environment variable named by `api_key_env`; may be empty for local servers.
    pub api_key: ApiKey,
    /// Output-token limit per turn.
    pub max_output_tokens: u32,
    /// Context window of the model, in tokens.
    pub context_window: u32,
    /// Native or text tool calls.
    pub tool_protocol: ToolProtocol,
    /// Total attempts per request (1 = no retry).
    pub max_attempts: u32,
    /// Base delay of the exponential backoff, in milliseconds.
    pub retry_base_delay_ms: u64,
    /// Upper bound of one backoff delay, in milliseconds.
    pub retry_max_delay_ms: u64,
    /// Time allowed without any byte from the provider before the attempt fails, in milliseconds.
    pub idle_timeout_ms: u64,
    /// Where the key and `base_url` came from, for errors that say what to check.
    pub origin: SettingsOrigin,
}

#[cfg(test)]
impl ProviderSettings {
    /// Settings for unit tests: `kind` at `base_url` with `api_key`, native tool calls, no
    /// retry (1 attempt, 1 ms delays), a 1 s idle timeout, no origin; the model name and token
    /// limits are to be set with struct update syntax.
    pub(crate) fn for_tests(kind: ProviderKind, base_url: &str, api_key: &str) -> ProviderSettings {
        ProviderSettings {
            kind,
            model: "m".into(),
            base_url: base_url.into(),
            api_key: ApiKey(api_key.into()),
            max_output_tokens: 100,
            context_window: 1000,
            tool_protocol: ToolProtocol::Native,
            max_attempts: 1,
            retry_base_delay_ms: 1,
            retry_max_delay_ms: 1,
            idle_timeout_ms: 1000,
            origin: SettingsOrigin::default(),
        }
    }
}

/// Where a provider's key and `base_url` came from. Only used in error messages
/// ([`ModelError::Auth`], [`ModelError::NotFound`], [`ModelError::NotAnEndpoint`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SettingsOrigin {
    /// The environment variable holding the key (`api_key_env`), e.g. `ANTHROPIC_API_KEY`;
    /// empty when unknown.
    pub api_key_env: String,
    /// Where `base_url` was set: `--base-url`, `environment variable ANTHROPIC_BASE_URL`, a
    /// config file path, or `the default`; empty when unknown.
    pub base_url: String,
}
