//! Append-only JSONL transcripts.
//!
//! One JSON object per line (JSON Lines, <https://jsonlines.org/>), each with an RFC 3339
//! timestamp `ts` and a `type`: `session_start`, `user_message`, `assistant_message`, `tool_call`,
//! `tool_result`, `usage`, `retry`, `permission`, `error`, `stop`. Every line is flushed as it is
//! written, so a crash loses nothing already seen. Sessions live in
//! `<workspace>/.ahelper/sessions/<session-id>.jsonl`, swarm workers in
//! `.ahelper/runs/<run>/workers/<worker>.jsonl`.
//!
//! API keys never reach a transcript: entries hold messages, tool calls and results only, and a
//! writer given a [`Redactor`] ([`TranscriptWriter::with_redactor`]) replaces every known secret
//! value in every string of a line before writing it.

use crate::model::{ContentBlock, Message, Role, Usage};
use crate::redact::Redactor;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};

/// One transcript line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TranscriptLine {
    /// RFC 3339 timestamp with milliseconds (UTC).
    pub ts: String,
    /// The entry.
    #[serde(flatten)]
    pub entry: TranscriptEntry,
}

/// What a transcript line records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TranscriptEntry {
    /// First line of a session or worker transcript.
    SessionStart {
        /// Session or worker id.
        session_id: String,
        /// Canonical workspace root.
        workspace: String,
        /// Provider and model (`describe()` of the client).
        model: String,
    },
    /// A user message (prompt text).
    UserMessage {
        /// The message.
        message: Message,
    },
    /// A complete assistant message (text and tool-use blocks).
    AssistantMessage {
        /// The message.
        message: Message,
    },
    /// A tool call about to be decided and run.
    ToolCall {
        /// Call id.
        id: String,
        /// Tool name.
        name: String,
        /// Arguments.
        input: Value,
    },
    /// The result sent back for a tool call.
    ToolResult {
        /// Call id.
        tool_use_id: String,
        /// Tool name.
        name: String,
        /// Result text (after truncation).
        content: String,
        /// Failed or refused.
        is_error: bool,
        /// Time the tool ran, in ms.
        duration_ms: u64,
    },
    /// Token usage of one turn and the running total.
    Usage {
        /// This turn.
        turn: Usage,
        /// Session total.
        total: Usage,
    },
    /// A model request is being retried.
    Retry {
        /// Attempt about to start (1-based).
        attempt: u32,
        /// Attempts allowed.
        max_attempts: u32,
        /// Delay before it, in ms.
        delay_ms: u64,
        /// Why.
        reason: String,
    },
    /// A permission decision for a tool call that was not plainly allowed.
    Permission {
        /// Call id.
        tool_use_id: String,
        /// `allow`, `deny`, `allow_always`, `deny_always` (the user's answers, or `deny` when
        /// nobody could answer), or `allowed_by_rule`: the question was withdrawn unanswered
        /// because a rule added meanwhile allows the call (the reason names it).
        decision: String,
        /// Why.
        reason: String,
    },
    /// An error that ended or disturbed a turn.
    Error {
        /// Message.
        message: String,
    },
    /// Older turns were replaced by a summary; `history` is the whole history from here on
    /// (the summary message, then the kept last turn), which a resumed session starts from.
    Compaction {
        /// Messages replaced by the summary.
        summarised_messages: usize,
        /// The summary the model wrote.
        summary: String,
        /// The history after the compaction.
        history: Vec<Message>,
    },
    /// `.worktreeinclude` brought ignored files of the user's checkout into a worker's new
    /// worktree (written before the worker's session starts).
    WorktreeInclude {
        /// Counts and the paths skipped, with why.
        report: ahelper_worktrees::IncludeReport,
    },
    /// `[swarm] warm_cargo`: the checkout's dependency artifacts were seeded into a worker's new
    /// worktree `target/debug` (or its own `target/` was kept; written before the worker's
    /// session starts).
    CargoWarm {
        /// Counts and what was skipped, with why.
        report: ahelper_worktrees::CargoSeedReport,
    },
    /// The `[swarm] setup` command ran in a worker's new worktree (before its session starts).
    Setup {
        /// The command line.
        command: String,
        /// How it ended.
        outcome: crate::verify::VerifyOutcome,
        /// Wall time in milliseconds.
        duration_ms: u64,
        /// Its output (stdout and stderr interleaved; head and tail when long, secrets
        /// redacted).
        output: String,
    },
    /// The agent loop stopped.
    Stop {
        /// Stop reason (`completed`, `max_turns`, …).
        reason: String,
        /// Turns used by this prompt.
        turns: u32,
    },
}

/// Errors of transcript I/O.
#[derive(Debug, thiserror::Error)]
pub enum TranscriptError {
    /// The file could not be opened, written or read ("No space left on device" in the
    /// user's words when the disk is full).
    #[error("{}", io_message(path, source))]
    Io {
        /// File.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// No transcript with that id.
    #[error("no session `{0}` found in .ahelper/sessions/")]
    NotFound(String),
    /// Several sessions start with the prefix given.
    #[error("`{0}` matches several sessions in .ahelper/sessions/; give more characters of the id")]
    Ambiguous(String),
}

/// The text of [`TranscriptError::Io`].
fn io_message(path: &std::path::Path, source: &std::io::Error) -> String {
    if crate::atomic_write::is_disk_full(source) {
        format!(
            "No space left on device: the transcript {} cannot be written. Free some disk space \
             (`df -h` shows what is left) and try again",
            path.display()
        )
    } else {
        format!("transcript {}: {source}", path.display())
    }
}

/// Appends lines to one transcript file, flushing each.
#[derive(Debug)]
pub struct TranscriptWriter {
    path: PathBuf,
    file: std::fs::File,
    redactor: Redactor,
}

impl TranscriptWriter {
    /// Opens `path` for appending, creating it and its parent directories.
    ///
    /// # Errors
    /// [`TranscriptError::Io`].
    pub fn open(path: &Path) -> Result<Self, TranscriptError> {
        let io = |source| TranscriptError::Io {
            path: path.to_path_buf(),
            source,
        };
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(io)?;
        Ok(TranscriptWriter {
            path: path.to_path_buf(),
            file,
            redactor: Redactor::default(),
        })
    }

    /// Redacts the values `redactor` knows from every line written from now on.
    pub fn with_redactor(mut self, redactor: Redactor) -> Self {
        self.redactor = redactor;
        self
    }

    /// The file path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one entry with the current time and flushes it.
    ///
    /// # Errors
    /// [`TranscriptError::Io`].
    pub fn append(&mut self, entry: TranscriptEntry) -> Result<(), TranscriptError> {
        let line = TranscriptLine {
            ts: now_rfc3339(),
            entry,
        };
        let mut text = self
            .redactor
            .to_json_line(&line)
            .expect("transcript entries serialise");
        text.push('\n');
        self.file
            .write_all(text.as_bytes())
            .and_then(|()| self.file.flush())
            .map_err(|source| TranscriptError::Io {
                path: self.path.clone(),
                source,
            })
    }
}

/// Current UTC time as RFC 3339 with milliseconds.
pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Reads every line of a transcript. A torn last line (a crash mid-write) and lines that do not
/// parse are skipped.
///
/// # Errors
/// [`TranscriptError::Io`] when the file can't be read.
pub fn read_transcript(path: &Path) -> Result<Vec<TranscriptLine>, TranscriptError> {
    let text = std::fs::read_to_string(path).map_err(|source| TranscriptError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect())
}

/// Rebuilds the message history of a transcript: user and assistant messages in order, with the
/// tool results that followed an assistant message grouped into one user message. A tool call
/// left without a result (a crash mid-call) gets an error result so the history stays valid.
pub fn history_from_transcript(lines: &[TranscriptLine]) -> Vec<Message> {
    let mut history: Vec<Message> = Vec::new();
    let mut pending_results: Vec<ContentBlock> = Vec::new();
    let flush = |history: &mut Vec<Message>, pending: &mut Vec<ContentBlock>| {
        if let Some(Message {
            role: Role::Assistant,
            content,
        }) = history.last()
        {
            let wanted: Vec<String> = content
                .iter()
                .filter_map(|b| match b {
                    ContentBlock::ToolUse { id, .. } => Some(id.clone()),
                    _ => None,
                })
                .collect();
            if wanted.is_empty() {
                pending.clear();
                return;
            }
            let mut blocks = Vec::new();
            for id in wanted {
                let found = pending.iter().position(
                    |b| matches!(b, ContentBlock::ToolResult { tool_use_id, .. } if *tool_use_id == id),
                );
                blocks.push(match found {
                    Some(i) => pending.remove(i),
                    None => ContentBlock::ToolResult {
                        tool_use_id: id,
                        content: "the session ended before this tool call finished; it may or may not have run".into(),
                        is_error: true,
                    },
                });
            }
            history.push(Message {
                role: Role::User,
                content: blocks,
            });
        }
        pending.clear();
    };
    for line in lines {
        match &line.entry {
            TranscriptEntry::UserMessage { message } => {
                flush(&mut history, &mut pending_results);
                history.push(message.clone());
            }
            TranscriptEntry::AssistantMessage { message } => {
                flush(&mut history, &mut pending_results);
                history.push(message.clone());
            }
            TranscriptEntry::Compaction { history: after, .. } => {
                pending_results.clear();
                history = after.clone();
            }
            TranscriptEntry::ToolResult {
                tool_use_id,
                content,
                is_error,
                ..
            } => {
                pending_results.push(ContentBlock::ToolResult {
                    tool_use_id: tool_use_id.clone(),
                    content: content.clone(),
                    is_error: *is_error,
                });
            }
            _ => {}
        }
    }
    flush(&mut history, &mut pending_results);
    history
}

/// Directory of single-agent session transcripts: `<workspace>/.ahelper/sessions`.
pub fn sessions_dir(workspace_root: &Path) -> PathBuf {
    workspace_root.join(".ahelper").join("sessions")
}

/// Transcripts of the workspace's sessions, oldest first (session ids are UUID v7, which sort
/// by creation time).
pub fn list_sessions(workspace_root: &Path) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(sessions_dir(workspace_root))
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
                .collect()
        })
        .unwrap_or_default();
    paths.sort();
    paths
}

/// Path of the transcript of session `id` (the full id or a unique prefix, as run ids), or the
/// most recent session when `id` is `None`.
///
/// # Errors
/// [`TranscriptError::NotFound`] when there is no such session, [`TranscriptError::Ambiguous`]
/// when a prefix matches several.
pub fn find_session(workspace_root: &Path, id: Option<&str>) -> Result<PathBuf, TranscriptError> {
    let sessions = list_sessions(workspace_root);
    let Some(id) = id else {
        return sessions
            .last()
            .cloned()
            .ok_or_else(|| TranscriptError::NotFound("(most recent)".into()));
    };
    let stem = |p: &PathBuf| {
        p.file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let matches: Vec<&PathBuf> = sessions
        .iter()
        .filter(|p| !id.is_empty() && stem(p).starts_with(id))
        .collect();
    if let Some(exact) = matches.iter().find(|p| stem(p) == id) {
        return Ok((*exact).clone());
    }
    match matches.as_slice() {
        [] => Err(TranscriptError::NotFound(id.into())),
        [one] => Ok((*one).clone()),
        _ => Err(TranscriptError::Ambiguous(id.into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_writer_with_a_redactor_never_writes_the_value() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let key = "sk-ant-transcript-0123456789";
        let redactor = Redactor::new([("ANTHROPIC_API_KEY", key)]).unwrap();
        let mut w = TranscriptWriter::open(&path)
            .unwrap()
            .with_redactor(redactor);
        w.append(TranscriptEntry::ToolCall {
            id: "c1".into(),
            name: "run_command".into(),
            input: serde_json::json!({"command": format!("echo {key}")}),
        })
        .unwrap();
        w.append(TranscriptEntry::Error {
            message: format!("HTTP 401: bad key {key}"),
        })
        .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains(key), "{text}");
        let lines = read_transcript(&path).unwrap();
        assert_eq!(lines.len(), 2);
        assert!(text.starts_with("{\"ts\":"), "{text}");
        assert!(text.contains("echo [REDACTED:ANTHROPIC_API_KEY]"), "{text}");
    }

    #[test]
    fn round_trip_and_history() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s/1.jsonl");
        let mut w = TranscriptWriter::open(&path).unwrap();
        w.append(TranscriptEntry::UserMessage {
            message: Message::user_text("hi"),
        })
        .unwrap();
        let assistant = Message {
            role: Role::Assistant,
            content: vec![
                ContentBlock::text("looking"),
                ContentBlock::ToolUse {
                    id: "a".into(),
                    name: "read_file".into(),
                    input: serde_json::json!({"path":"x"}),
                },
                ContentBlock::ToolUse {
                    id: "b".into(),
                    name: "read_file".into(),
                    input: serde_json::json!({"path":"y"}),
                },
            ],
        };
        w.append(TranscriptEntry::AssistantMessage {
            message: assistant.clone(),
        })
        .unwrap();
        w.append(TranscriptEntry::ToolResult {
            tool_use_id: "a".into(),
            name: "read_file".into(),
            content: "x!".into(),
            is_error: false,
            duration_ms: 1,
        })
        .unwrap();
        // torn line
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(b"{\"ts\":")
            .unwrap();
        let lines = read_transcript(&path).unwrap();
        assert_eq!(lines.len(), 3);
        let h = history_from_transcript(&lines);
        assert_eq!(h.len(), 3);
        assert_eq!(h[1], assistant);
        match &h[2].content[1] {
            ContentBlock::ToolResult {
                tool_use_id,
                is_error,
                ..
            } => {
                assert_eq!(tool_use_id, "b");
                assert!(is_error);
            }
            other => panic!("{other:?}"),
        }
    }
}
