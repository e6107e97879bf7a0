//! A scripted fake LLM server for ahelper's tests and for trying ahelper offline.
//!
//! [`FakeLlm`] listens on `127.0.0.1` and speaks two wire formats, streaming (SSE over
//! `Transfer-Encoding: chunked`, one event per chunk) and non-streaming (one JSON body):
//!
//! | endpoint | format |
//! |---|---|
//! | `POST /v1/messages` | [Anthropic Messages](https://docs.anthropic.com/en/api/messages), [streaming events](https://docs.anthropic.com/en/docs/build-with-claude/streaming) |
//! | `POST /v1/chat/completions`, `POST /chat/completions` | [OpenAI Chat Completions](https://platform.openai.com/docs/api-reference/chat/create), [chunks](https://platform.openai.com/docs/api-reference/chat/streaming) |
//! | `GET /v1/models`, `GET /models` | a one-model list readable as either API's shape |
//! | `GET /health` | `{"status":"ok"}` |
//!
//! Every request is recorded ([`FakeLlm::requests`]) with its method, path, headers, parsed
//! JSON body and arrival time, the agent's working directory, and the conversation and turn
//! that answered it.
//!
//! # Script format
//!
//! A JSON object (see `fakellm/examples/demo.json`; Rust: [`Script`], [`Conversation`],
//! [`Turn`], [`Fault`]). Unknown keys are rejected so typos fail loudly.
//!
//! ```json
//! {
//!   "latency_ms": 0,                 // added before every model response, ms
//!   "model": "fake-model",           // listed by /v1/models; echoed if a request names none
//!   "fallback_text": "Done.",        // optional, see turn selection
//!   "conversations": [
//!     {
//!       "name": "fix-bug",           // optional, for logs
//!       "match": "fix the bug",      // optional substring of system prompt or first user message
//!       "when": {"file_contains": {"path": "calc.py", "text": "def plus"}},  // optional, on disk
//!       "turn_index": "tool_results", // or "assistant_messages"
//!       "fallback_text": "Done.",    // optional, overrides the script's
//!       "turns": [
//!         {
//!           "when": {"file_exists": "report.py"},   // optional; then "otherwise" is required
//!           "otherwise": {"text": "No report yet."}, // a whole turn, played when `when` fails
//!           "text": "Let me read it.",
//!           "tool_calls": [{"id": "call_1", "name": "read_file", "arguments": {"path": "src/lib.rs"}}],
//!           "stop_reason": "tool_use",          // optional override, either vocabulary
//!           "usage": {"input_tokens": 100, "output_tokens": 20},
//!           "delay_ms": 0,                      // before the response headers
//!           "chunk_delay_ms": 0,                // between body chunks
//!           "fault": {"kind": "http_429", "times": 1, "retry_after": 2},
//!           "raw_sse": "cases/anthropic-text-basic.sse",  // or "raw_sse_inline": "data: …\n\n"
//!           "raw_chunk_bytes": 1,               // raw bodies: chunk size instead of one event per chunk
//!           "raw_chunk_seed": 42                // raw bodies: random chunk sizes 1..=raw_chunk_bytes (default 16)
//!         }
//!       ]
//!     }
//!   ]
//! }
//! ```
//! (Comments are for this page only; JSON has none. Use `"description"` keys on the script
//! or a conversation for notes.)
//!
//! **Deciding by disk.** A scripted swarm must act on what is in the agent's working directory,
//! not on how a prompt is worded. The server reads the agent's working directory from the
//! request — the path after `Working directory: ` (else `Workspace root: `) on a line of the
//! system prompt (else the first user message), as ahelper's system prompt writes it — and
//! evaluates [`Condition`]s there (same machine; paths relative to that directory, `..` and
//! absolute paths rejected at load time; with no directory in the request every condition is
//! false):
//!
//! | condition | true when |
//! |---|---|
//! | `{"file_exists": "report.py"}` | the path exists |
//! | `{"file_missing": "report.py"}` | the path does not exist |
//! | `{"file_contains": {"path": "calc.py", "text": "def plus"}}` | the file contains the text |
//! | `{"file_lacks": {"path": "calc.py", "text": "def add"}}` | the file is missing or lacks the text |
//! | `{"has_conflict_markers": true}` | a file (outside `.git`, `node_modules`, `target`, `__pycache__`) has `<<<<<<<` and `>>>>>>>` lines (`false`: none has) |
//! | `{"all": [c, …]}`, `{"any": [c, …]}`, `{"not": c}` | combinations |
//!
//! A conversation's `when` must hold for it to be chosen; a turn's `when` picks between the
//! turn and its `otherwise` turn (which may have its own `when`) each time it is played.
//!
//! **Conversation choice.** The first conversation whose `match` occurs (case-sensitive) in
//! the request's system prompt or its first user message and whose `when` holds wins; a
//! conversation without either matches everything, so put the default last. The choice is
//! made at an agent's first request and **kept** for every later request with the same
//! system prompt and first user message (the same agent conversation), so an agent whose own
//! edits make its `when` false goes on with its conversation. No match: HTTP 400
//! `invalid_request_error` naming the working directory.
//!
//! **Turn choice.** The turn played is `turns[n]` where `n` is the number of tool results in
//! the request (Anthropic `tool_result` blocks, OpenAI `role: "tool"` messages). A turn with
//! two tool calls is therefore answered by `turns[n + 2]`. With `"turn_index":
//! "assistant_messages"`, `n` is the number of assistant messages instead (one turn per model
//! response), so a new user message after a text-only turn — ahelper sending a worker back
//! with failing tests — plays the next turn rather than the last one again. Past the last
//! turn, the conversation's (or script's) `fallback_text` plays as a text-only turn if set,
//! else the last turn plays again.
//!
//! **Streaming.** Text is streamed word by word (`text_delta` / `delta.content`); tool call
//! arguments are serialised compactly and streamed in pieces of 7 characters, cut mid-key and
//! mid-value (Anthropic: a first empty `input_json_delta`, like the real API). Anthropic
//! `message_delta.usage` carries the cumulative totals; OpenAI adds the `choices: []` usage
//! chunk only when `stream_options.include_usage` is true, then `data: [DONE]`.
//! Default stop reason: `tool_use`/`tool_calls` with tool calls, else `end_turn`/`stop`.
//!
//! **Raw replays.** `raw_sse` (a file; relative paths resolve against the script file's
//! directory) or `raw_sse_inline` is sent byte-for-byte as a `text/event-stream` body with
//! status 200, whatever the request's format or `stream` flag, one SSE event per chunk (or
//! `raw_chunk_bytes` bytes per chunk, or seeded random sizes with `raw_chunk_seed`), so a
//! client can be fed a case file whole-event, byte by byte and in random cuts over HTTP.
//!
//! **Faults.** `fault.kind` applies to the first `times` (default 1) requests that select
//! the turn; later requests get the normal turn, so a client's retry succeeds:
//!
//! | kind | what the client sees |
//! |---|---|
//! | `http_429` | status 429, `retry-after: N` (`retry_after`, default 1 s), `rate_limit_error` body |
//! | `http_500` | status 500, `api_error` / `server_error` body |
//! | `http_529` | status 529, Anthropic `{"type":"error","error":{"type":"overloaded_error",…}}` (both routes) |
//! | `http_400`, `http_401`, `http_403` | status 400 `invalid_request_error`, 401 `authentication_error` / `invalid_api_key`, 403 `permission_error` |
//! | `html_page` | status 200, `content-type: text/html`, a small sign-in page (`message` is its heading) |
//! | `foreign_json` | status 200, `content-type: application/json`, `{"hello":"world"}` (`message` replaces `world`) |
//! | `drop_mid_stream` | 200, `after_chunks` chunks (default half), then the connection is aborted without the last chunk: a body error, not a clean EOF |
//! | `malformed_line` | a `data:` line of cut-off JSON after `after_chunks` (default 1) chunks, then the rest of the stream; non-streaming: half the JSON body |
//! | `stall` | 200, `after_chunks` (default 1) chunks, then nothing for `stall_ms` (default 600 000 ms), then the connection is aborted |
//! | `error_event` | 200, `after_chunks` (default 2) chunks, then Anthropic `event: error` (`overloaded_error`, no `message_stop`) or OpenAI `data: {"error":…}` + `data: [DONE]`; non-streaming: 200 with an error object body |
//!
//! `message` overrides the error message of HTTP faults and error events.
//!
//! # Library use
//!
//! ```no_run
//! use ahelper_fake_llm::{Conversation, FakeLlm, Script, Turn};
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let script = Script::new().with_conversation(
//!     Conversation::new()
//!         .turn(Turn::tool_call("list_dir", serde_json::json!({"path": "."})))
//!         .turn(Turn::text("Two files.")),
//! );
//! let server = FakeLlm::start(script).await?;
//! let anthropic_base = server.base_url();      // http://127.0.0.1:PORT
//! let openai_base = server.openai_base_url();  // http://127.0.0.1:PORT/v1
//! // … run the client …
//! assert_eq!(server.model_requests().len(), 2);
//! # Ok(()) }
//! ```
//!
//! # Binary
//!
//! `ahelper-fake-llm [--script FILE] [--port N] [--latency-ms N] [--port-file PATH] [--quiet]`
//! prints `listening on http://127.0.0.1:PORT` and serves until killed; without `--script`
//! it plays the demo script.

mod anthropic;
pub mod condition;
mod openai;
mod reply;
pub mod script;
mod server;

pub use condition::{Condition, FileText};
pub use script::{
    Conversation, Fault, FaultKind, RequestFacts, Script, ScriptError, Selection, ToolCall, Turn,
    TurnIndex, Usage,
};
pub use server::{FakeLlm, RecordedRequest, ServerError, ServerOptions, WireFormat};
