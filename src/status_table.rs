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
/// running it, `<name>: NATS unreachable` while its heartbeat cannot be read, or
/// `<name>: machine lost` once that machine was silent past the liveness timeout.
pub fn machine_cell(w: &WorkerRecord) -> String {
    match (&w.machine, w.machine_lost, w.nats_unreachable) {
        (None, _, _) => "local".into(),
        (Some(name), true, _) => format!("{}: machine lost", clip(name, 24)),
        (Some(name), false, true) => format!("{}: NATS unreachable", clip(name, 24)),
        (Some(name), false, false) => clip(name, 24),
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

/// Columns the table drops, in this order, when the terminal is too narrow for all of them:
/// tools, turn, machine, files, tokens in/out, elapsed (indices into [`HEADERS`]). Worker,
/// subtask, state and last action always stay.
const DROP_ORDER: [usize; 6] = [6, 4, 1, 7, 5, 8];

/// Widths of the columns other than subtask (2) and last action (9), in characters.
const FIXED_WIDTHS: [usize; COLUMNS] = [6, 22, 0, 22, 4, 13, 5, 6, 8, 0];

/// Narrowest subtask and last-action columns before another column is dropped.
const MIN_SUBTASK: usize = 12;
const MIN_ACTION: usize = 24;
/// Widest subtask column.
const MAX_SUBTASK: usize = 36;

/// The columns of a table `width` characters wide with `gap` spaces between columns: (index
/// into [`HEADERS`], width) in order. Columns are dropped in [`DROP_ORDER`] until the subtask
/// and last-action columns get at least [`MIN_SUBTASK`] and [`MIN_ACTION`]; they share what is
/// left (subtask two fifths, at most [`MAX_SUBTASK`]), so every row fits on one line.
pub fn fit_columns(width: usize, gap: usize) -> Vec<(usize, usize)> {
    let mut shown: Vec<usize> = (0..HEADERS.len()).collect();
    let fixed = |shown: &[usize]| -> usize {
        shown.iter().map(|&c| FIXED_WIDTHS[c]).sum::<usize>() + gap * (shown.len() - 1)
    };
    for drop in DROP_ORDER {
        if fixed(&shown) + MIN_SUBTASK + MIN_ACTION <= width {
            break;
        }
        shown.retain(|&c| c != drop);
    }
    let rest = width.saturating_sub(fixed(&shown)).max(2);
    let subtask = (rest * 2 / 5).clamp(1, MAX_SUBTASK);
    let action = rest - subtask;
    shown
        .into_iter()
        .map(|c| {
            let w = match c {
                2 => subtask,
                9 => action,
                _ => FIXED_WIDTHS[c],
            };
            (c, w)
        })
        .collect()
}

/// The ratatui table widget for the live view, fitted to `width` columns ([`fit_columns`]):
/// each cell is cut with `…` to its column, never wrapped.
pub fn table_widget<'a>(
    record: &'a RunRecord,
    claims: &dyn Fn(&str) -> usize,
    live: &dyn Fn(usize) -> Option<u64>,
    width: u16,
) -> Table<'a> {
    let columns = fit_columns(usize::from(width), 1);
    let header = Row::new(
        columns
            .iter()
            .map(|&(c, w)| Cell::from(clip(HEADERS[c], w))),
    )
    .style(Style::default().add_modifier(Modifier::BOLD));
    let row = |cells: [String; COLUMNS], color: Color| {
        Row::new(columns.iter().map(move |&(c, w)| {
            let text = clip(&for_terminal(&cells[c]), w);
            let cell = Cell::from(Line::from(text));
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
    let widths: Vec<Constraint> = columns
        .iter()
        .map(|&(_, w)| Constraint::Length(w as u16))
        .collect();
    Table::new(rows, widths).header(header).column_spacing(1)
}

/// The table as plain text (for `swarm status` and non-terminal output). With `max_width`
/// (the width of the terminal it is printed on), a table wider than that is fitted to it as the
/// live view is ([`fit_columns`], cells cut with `…`); without, every column is as wide as its
/// widest cell.
pub fn render_text(
    record: &RunRecord,
    elapsed_ms: u64,
    price: Option<Price>,
    max_width: Option<usize>,
) -> String {
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
    let natural = widths.iter().sum::<usize>() + 2 * (widths.len() - 1);
    let columns: Vec<(usize, usize)> = match max_width {
        Some(max) if natural > max => fit_columns(max, 2),
        _ => widths.into_iter().enumerate().collect(),
    };
    let mut out = String::new();
    let line = |cells: &[String]| {
        columns
            .iter()
            .map(|&(c, w)| format!("{:<w$}", clip(&cells[c], w)))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    let headers: Vec<String> = HEADERS.iter().map(|h| h.to_string()).collect();
    out.push_str(&line(&headers));
    out.push('\n');
    for r in rows {
        out.push_str(&line(&r));
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

    /// Every fitted table fits its width; the columns are dropped in order and the subtask and
    /// last action always stay.
    #[test]
    fn fitted_columns_fit_the_width() {
        for width in [40, 60, 80, 100, 119, 120, 140, 200] {
            for gap in [1, 2] {
                let columns = fit_columns(width, gap);
                let total: usize =
                    columns.iter().map(|c| c.1).sum::<usize>() + gap * (columns.len() - 1);
                assert!(total <= width.max(40), "{width}/{gap}: {columns:?}");
                let shown: Vec<usize> = columns.iter().map(|c| c.0).collect();
                for always in [0, 2, 3, 9] {
                    assert!(shown.contains(&always), "{width}: {shown:?}");
                }
            }
        }
        let all: Vec<usize> = fit_columns(140, 1).iter().map(|c| c.0).collect();
        assert_eq!(all, (0..COLUMNS).collect::<Vec<_>>());
        let at_80: Vec<usize> = fit_columns(80, 1).iter().map(|c| c.0).collect();
        assert_eq!(at_80, [0, 2, 3, 8, 9]);
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
        w.nats_unreachable = true;
        assert_eq!(machine_cell(&w), "build-01: NATS unreachable");
        w.machine_lost = true;
        assert_eq!(machine_cell(&w), "build-01: machine lost");
    }
}
