//! The swarm status table: one row per worker (worker, the machine it runs on, subtask, state, turn, tokens in/out, tool
//! calls, files changed by its file tools or commands, elapsed, what it does now) and a totals line. Rendered live with ratatui in
//! an inline viewport, or as plain text for `swarm status` and the end of a run.

use ahelper_agents::pricing::{Price, format_usd};
use ahelper_agents::swarm::state::{RunRecord, WorkerRecord, WorkerStatus};
use ahelper_agents::text::for_terminal;
use ratatui::layout::Constraint;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Cell, Row, Table};

/// Number of columns.
pub const COLUMNS: usize = 10;

/// Column headers.
pub const HEADERS: [&str; COLUMNS] = [
    "worker",
    "machine",
    "subtask",
    "state",
    "turn",
    "tokens in/out",
    "tools",
    "files",
    "elapsed",
    "last action",
];

/// `1m05s` style.
pub fn format_elapsed(ms: u64) -> String {
    let s = ms / 1000;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else if ms >= 1000 {
        format!("{s}.{}s", (ms % 1000) / 100)
    } else {
        format!("{ms}ms")
    }
}

/// `12.3k` style.
pub fn format_tokens(n: u64) -> String {
    if n >= 1_000_000 {
        format!("{:.1}M", n as f64 / 1e6)
    } else if n >= 10_000 {
        format!("{}k", n / 1000)
    } else if n >= 1_000 {
        format!("{:.1}k", n as f64 / 1e3)
    } else {
        n.to_string()
    }
}

/// `s` in at most `max` characters, the last one `…` when cut.
fn clip(s: &str, max: usize) -> String {
    match ahelper_agents::text::clip(s, max) {
        (kept, 0) => kept.to_string(),
        _ => {
            let (kept, _) = ahelper_agents::text::clip(s, max.saturating_sub(1));
            format!("{kept}…")
        }
    }
}

/// The `files` cell: the files its commit changed once it reported, else the files it changed
/// so far — claimed by its file tools or left changed by its commands, whichever is more.
fn files_cell(w: &WorkerRecord, claims: usize) -> String {
    match &w.report {
        Some(r) => r.files_changed.len(),
        None => claims.max(w.changed_files),
    }
    .to_string()
}

/// The cells of one worker row. `claims` is the number of files the worker has claimed.
pub fn row_cells(
    w: &WorkerRecord,
    claims: usize,
    live_elapsed_ms: Option<u64>,
) -> [String; COLUMNS] {
    [
        w.id.clone(),
        machine_cell(w),
        clip(&w.title, 36),
        w.state_label(),
        if w.turns > 0 {
            w.turns.to_string()
        } else {
            "-".into()
        },
        format!(
            "{}/{}",
            format_tokens(w.usage.input_tokens),
            format_tokens(w.usage.output_tokens)
        ),
        w.tool_calls.to_string(),
        files_cell(w, claims),
        format_elapsed(live_elapsed_ms.unwrap_or(w.elapsed_ms)),
        clip(&action_cell(w, chrono::Utc::now()), 60),
    ]
}

/// Where the worker runs: `local` (this process), the `--name` of the `ahelper worker` machine
/// running it, or `<name>: machine lost` once that machine's heartbeat expired.
pub fn machine_cell(w: &WorkerRecord) -> String {
    match (&w.machine, w.machine_lost) {
        (None, _) => "local".into(),
        (Some(name), false) => clip(name, 24),
        (Some(name), true) => format!("{}: machine lost", clip(name, 24)),
    }
}

/// What the worker is doing now (`running \`cargo test\` for 12s`, `waiting for permission:
/// …`, `verifying its worktree`), or how it ended (`merged`, `failed: …`) at `now`.
pub fn action_cell(w: &WorkerRecord, now: chrono::DateTime<chrono::Utc>) -> String {
    let error = || {
        w.report
            .as_ref()
            .and_then(|r| r.error.clone())
            .unwrap_or_else(|| w.last_action.clone())
    };
    match w.status {
        // `merged as <commit>` when the merge recorded it.
        WorkerStatus::Merged if w.last_action.starts_with("merged") => w.last_action.clone(),
        WorkerStatus::Merged => "merged".into(),
        WorkerStatus::Failed => format!("failed: {}", error()),
        WorkerStatus::Conflict => {
            let files: Vec<&str> = w.conflicts.iter().map(|c| c.path.as_str()).collect();
            format!("merge conflict in {}", files.join(", "))
        }
        WorkerStatus::NoChanges => "finished without changes".into(),
        WorkerStatus::Cancelled => "cancelled; its work is committed as wip".into(),
        WorkerStatus::Finished => "finished; waiting to be merged".into(),
        WorkerStatus::Queued => "queued".into(),
        WorkerStatus::Skipped => "skipped".into(),
        WorkerStatus::Interrupted => "interrupted; `swarm resume` continues it".into(),
        WorkerStatus::VerifyFailed => match &w.verification {
            Some(v) => format!("verification failed: {v}"),
            None => "verification failed".into(),
        },
        _ => match running_for(w, now) {
            Some(ms) => format!("{} for {}", w.last_action, format_seconds(ms)),
            None => w.last_action.clone(),
        },
    }
}

/// How long the tool call in `last_action` has run at `now`.
fn running_for(w: &WorkerRecord, now: chrono::DateTime<chrono::Utc>) -> Option<u64> {
    let started = chrono::DateTime::parse_from_rfc3339(w.action_started_at.as_deref()?).ok()?;
    let ms = (now - started.with_timezone(&chrono::Utc)).num_milliseconds();
    Some(ms.max(0) as u64)
}

/// `12 s`, `3m05s`.
fn format_seconds(ms: u64) -> String {
    if ms >= 60_000 {
        format_elapsed(ms)
    } else {
        format!("{} s", ms / 1000)
    }
}

/// The row of the run's verification worktree, when verification is on: its state (`idle`,
/// `verifying w2's merge candidate`) and the baseline.
pub fn verify_row_cells(record: &RunRecord) -> Option<[String; COLUMNS]> {
    record.verify_worktree.as_ref()?;
    let state = record
        .verify_activity
        .clone()
        .unwrap_or_else(|| match &record.baseline {
            None => "baseline".into(),
            Some(_) => "idle".into(),
        });
    let baseline = record.baseline.as_ref().map_or_else(
        || "running the baseline".to_string(),
        ahelper_agents::swarm::summary::baseline_line,
    );
    let dash = || "-".to_string();
    Some([
        "verify".into(),
        "local".into(),
        "verification worktree".into(),
        clip(&state, 22),
        dash(),
        dash(),
        dash(),
        dash(),
        dash(),
        clip(&baseline, 48),
    ])
}

/// The totals line; with the cost of the run's tokens when the model's `price` is known.
pub fn totals_line(record: &RunRecord, elapsed_ms: u64, price: Option<Price>) -> String {
    let done = record
        .workers
        .iter()
        .filter(|w| w.status.is_terminal() || w.status == WorkerStatus::Cancelled)
        .count();
    let cost = price
        .map(|p| format!(" · cost {}", format_usd(p.cost_usd(record.usage))))
        .unwrap_or_default();
    format!(
        "run {} · {} · tokens {} in / {} out{cost} · elapsed {} · workers done {}/{}",
        &record.run_id[..record.run_id.len().min(13)],
        record.state_label(),
        format_tokens(record.usage.input_tokens),
        format_tokens(record.usage.output_tokens),
        format_elapsed(elapsed_ms),
        done,
        record.workers.len()
    )
}

fn status_color(status: WorkerStatus) -> Color {
    match status {
        WorkerStatus::Merged => Color::Green,
        WorkerStatus::Conflict | WorkerStatus::Failed | WorkerStatus::VerifyFailed => Color::Red,
        WorkerStatus::Verifying | WorkerStatus::Fixing | WorkerStatus::ResolvingConflict => {
            Color::Yellow
        }
        WorkerStatus::WaitingForPermission => Color::Yellow,
        WorkerStatus::Running | WorkerStatus::Starting | WorkerStatus::Committing => Color::Cyan,
        WorkerStatus::Cancelled | WorkerStatus::Skipped => Color::Magenta,
        _ => Color::Gray,
    }
}

/// The ratatui table widget for the live view.
pub fn table_widget<'a>(
    record: &'a RunRecord,
    claims: &dyn Fn(&str) -> usize,
    live: &dyn Fn(usize) -> Option<u64>,
) -> Table<'a> {
    let header = Row::new(HEADERS.iter().map(|h| Cell::from(*h)))
        .style(Style::default().add_modifier(Modifier::BOLD));
    let row = |cells: [String; COLUMNS], color: Color| {
        Row::new(cells.into_iter().enumerate().map(move |(c, text)| {
            let cell = Cell::from(Line::from(for_terminal(&text).into_owned()));
            if c == 3 {
                cell.style(Style::default().fg(color))
            } else {
                cell
            }
        }))
    };
    let rows: Vec<Row> = record
        .workers
        .iter()
        .enumerate()
        .map(|(i, w)| row(row_cells(w, claims(&w.id), live(i)), status_color(w.status)))
        .chain(verify_row_cells(record).map(|cells| row(cells, Color::Gray)))
        .collect();
    Table::new(
        rows,
        [
            Constraint::Length(6),
            Constraint::Length(16),
            Constraint::Length(28),
            Constraint::Length(22),
            Constraint::Length(4),
            Constraint::Length(13),
            Constraint::Length(5),
            Constraint::Length(6),
            Constraint::Length(8),
            Constraint::Min(30),
        ],
    )
    .header(header)
}

/// The table as plain text (for `swarm status` and non-terminal output).
pub fn render_text(record: &RunRecord, elapsed_ms: u64, price: Option<Price>) -> String {
    let rows: Vec<[String; COLUMNS]> = record
        .workers
        .iter()
        .map(|w| row_cells(w, w.claims, None))
        .chain(verify_row_cells(record))
        .collect();
    let mut widths: Vec<usize> = HEADERS.iter().map(|h| h.chars().count()).collect();
    for r in &rows {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let mut out = String::new();
    let line = |cells: Vec<String>| {
        cells
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:<w$}", w = widths[i]))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    out.push_str(&line(HEADERS.iter().map(|h| h.to_string()).collect()));
    out.push('\n');
    for r in rows {
        out.push_str(&line(r.to_vec()));
        out.push('\n');
    }
    out.push_str(&totals_line(record, elapsed_ms, price));
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(format_elapsed(65_000), "1m05s");
        assert_eq!(format_elapsed(1_500), "1.5s");
        assert_eq!(format_elapsed(85), "85ms");
        assert_eq!(format_tokens(12_345), "12k");
        assert_eq!(format_tokens(1_234), "1.2k");
        assert_eq!(clip("abcdef", 4), "abc…");
    }

    #[test]
    fn the_machine_cell_names_the_worker_machine_and_a_lost_one() {
        let json = serde_json::json!({"id": "w1", "subtask_id": "s1", "title": "t", "branch": "b",
            "worktree": "/w", "start_commit": null, "status": "running", "turns": 0,
            "usage": {"input_tokens": 0, "output_tokens": 0}, "tool_calls": 0, "last_action": "", "started_at": null, "elapsed_ms": 0,
            "report": null});
        let mut w: WorkerRecord = serde_json::from_value(json).unwrap();
        assert_eq!(machine_cell(&w), "local");
        w.machine = Some("build-01".into());
        assert_eq!(machine_cell(&w), "build-01");
        w.machine_lost = true;
        assert_eq!(machine_cell(&w), "build-01: machine lost");
    }
}
