//! `swarm logs`: which transcript to show, reading it as it grows, and one readable line per
//! transcript entry. Works after the worktree is gone (transcripts live in the run directory).

use super::state::RunRecord;
use crate::transcript::{TranscriptEntry, TranscriptLine};
use std::path::{Path, PathBuf};

/// A worker id that is not in the run.
#[derive(Debug, thiserror::Error)]
#[error("run {run_id} has no worker `{worker}`; workers: {}", known.join(", "))]
pub struct UnknownWorker {
    /// The run.
    pub run_id: String,
    /// What was asked for.
    pub worker: String,
    /// The run's worker ids.
    pub known: Vec<String>,
}

/// The transcript of `worker` in `record`: the coordinator's for `None` or `coordinator`.
///
/// # Errors
/// [`UnknownWorker`] naming the run's workers.
pub fn transcript_path(record: &RunRecord, worker: Option<&str>) -> Result<PathBuf, UnknownWorker> {
    match worker {
        None | Some(super::planning::COORDINATOR_LABEL) => Ok(record.coordinator_transcript()),
        Some(w) if record.worker(w).is_some() || record.helpers.iter().any(|h| h.id == w) => {
            Ok(record.worker_transcript(w))
        }
        Some(w) => Err(UnknownWorker {
            run_id: record.run_id.clone(),
            worker: w.to_string(),
            known: record
                .workers
                .iter()
                .map(|w| w.id.clone())
                .chain(record.helpers.iter().map(|h| h.id.clone()))
                .collect(),
        }),
    }
}

/// Reads a transcript that may still be growing: each call returns the complete lines added
/// since the last call (a last line without its newline may still be being written and waits
/// for the next call).
#[derive(Debug)]
pub struct TranscriptFollower {
    path: PathBuf,
    seen: usize,
}

impl TranscriptFollower {
    /// Follows `path` from its first line.
    pub fn new(path: PathBuf) -> Self {
        TranscriptFollower { path, seen: 0 }
    }

    /// The file followed.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Lines returned so far.
    pub fn seen(&self) -> usize {
        self.seen
    }

    /// The complete raw JSONL lines added since the last call (none while the file does not
    /// exist).
    pub fn read_new(&mut self) -> Vec<String> {
        let text = std::fs::read_to_string(&self.path).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let complete = if text.ends_with('\n') {
            lines.len()
        } else {
            lines.len().saturating_sub(1)
        };
        let new = lines[self.seen.min(complete)..complete]
            .iter()
            .map(|l| l.to_string())
            .collect();
        self.seen = complete;
        new
    }

    /// Whether the file has lines (complete or not) that were not returned yet.
    pub fn has_unread(&self) -> bool {
        std::fs::read_to_string(&self.path)
            .unwrap_or_default()
            .lines()
            .count()
            > self.seen
    }
}

/// One raw transcript line as readable text; `None` for blank lines and entries that say
/// nothing (an assistant message without text). A line that is not a transcript entry (cut
/// short by a crash or a full disk, edited by hand) is shown as such, its start quoted — never
/// skipped without a word.
pub fn format_raw_line(line: &str) -> Option<String> {
    if line.trim().is_empty() {
        return None;
    }
    match serde_json::from_str::<TranscriptLine>(line) {
        Ok(parsed) => format_transcript_line(&parsed.entry, &parsed.ts),
        Err(e) => Some(format!(
            "(a line that is not a transcript entry, {e}: {})",
            clip_counted(line, 200)
        )),
    }
}

/// "… [N more characters]" after the first `max` characters of `text`.
fn clip_counted(text: &str, max: usize) -> String {
    match crate::text::clip(text, max) {
        (kept, 0) => kept.to_string(),
        (kept, cut) => format!("{kept}… [{cut} more characters]"),
    }
}

/// One transcript entry as readable text, prefixed with the time of day (`HH:MM:SS` of the RFC
/// 3339 `ts`); long messages, arguments and results are cut with a count of what was cut.
pub fn format_transcript_line(entry: &TranscriptEntry, ts: &str) -> Option<String> {
    let time = ts.get(11..19).unwrap_or(ts);
    Some(match entry {
        TranscriptEntry::SessionStart {
            session_id,
            workspace,
            model,
        } => format!("{time} ── session {session_id} · {model} · {workspace}"),
        TranscriptEntry::UserMessage { message } => {
            format!("{time} user: {}", clip_counted(&message.text(), 2_000))
        }
        TranscriptEntry::AssistantMessage { message } => {
            let text = message.text();
            if text.trim().is_empty() {
                return None;
            }
            format!("{time} assistant: {}", clip_counted(&text, 4_000))
        }
        TranscriptEntry::ToolCall { name, input, .. } => {
            format!(
                "{time} → {name} {}",
                clip_counted(&input.to_string(), 1_000)
            )
        }
        TranscriptEntry::ToolResult {
            name,
            content,
            is_error,
            duration_ms,
            ..
        } => format!(
            "{time} ← {name}{} ({duration_ms} ms): {}",
            if *is_error { " ERROR" } else { "" },
            clip_counted(content, 500)
        ),
        TranscriptEntry::Usage { turn, total } => format!(
            "{time}   usage: {} in / {} out (total {} / {})",
            turn.input_tokens, turn.output_tokens, total.input_tokens, total.output_tokens
        ),
        TranscriptEntry::Retry {
            attempt,
            max_attempts,
            delay_ms,
            reason,
        } => format!("{time}   retry {attempt}/{max_attempts} in {delay_ms} ms: {reason}"),
        TranscriptEntry::Permission {
            decision, reason, ..
        } => format!("{time}   permission {decision}: {reason}"),
        TranscriptEntry::Error { message } => format!("{time} ERROR: {message}"),
        TranscriptEntry::Compaction {
            summarised_messages,
            summary,
            ..
        } => format!(
            "{time} ── compacted {summarised_messages} messages into a summary: {}",
            clip_counted(summary, 1_000)
        ),
        TranscriptEntry::WorktreeInclude { report } => format!("{time} ── {}", report.describe()),
        TranscriptEntry::CargoWarm { report } => format!("{time} ── {}", report.describe()),
        TranscriptEntry::Setup {
            command,
            outcome,
            duration_ms,
            output,
        } => format!(
            "{time} ── setup `{command}` ({duration_ms} ms): {}\n{}",
            super::setup::describe_outcome(outcome),
            clip_counted(output.trim_end(), 2_000)
        ),
        TranscriptEntry::Stop { reason, turns } => {
            format!("{time} ── stopped: {reason} after {turns} turns")
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Message;

    #[test]
    fn long_messages_are_cut_with_a_count() {
        let entry = TranscriptEntry::UserMessage {
            message: Message::user_text("x".repeat(2_010)),
        };
        let line = format_transcript_line(&entry, "2026-01-02T03:04:05.678Z").unwrap();
        let kept = "x".repeat(2_000);
        assert_eq!(line, format!("03:04:05 user: {kept}… [10 more characters]"));
    }

    /// A corrupt line is shown as such (with the parser's reason and its start); a blank one
    /// is not shown.
    #[test]
    fn a_line_that_is_not_an_entry_is_shown_not_skipped() {
        let shown =
            format_raw_line("{\"ts\":\"2026-01-02T03:04:05Z\",\"type\":\"user_mes").unwrap();
        assert!(
            shown.starts_with("(a line that is not a transcript entry, EOF while parsing")
                && shown.ends_with(": {\"ts\":\"2026-01-02T03:04:05Z\",\"type\":\"user_mes)"),
            "{shown}"
        );
        assert_eq!(format_raw_line("  "), None);
    }

    #[test]
    fn follower_returns_complete_lines_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.jsonl");
        let mut follower = TranscriptFollower::new(path.clone());
        assert!(follower.read_new().is_empty());
        std::fs::write(&path, "a\nb\nc-partial").unwrap();
        assert_eq!(follower.read_new(), ["a", "b"]);
        assert!(follower.has_unread());
        std::fs::write(&path, "a\nb\nc-partial, now whole\n").unwrap();
        assert_eq!(follower.read_new(), ["c-partial, now whole"]);
        assert!(follower.read_new().is_empty());
        assert_eq!(follower.seen(), 3);
    }
}
