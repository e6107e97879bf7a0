//! Showing a running swarm: the live status table (ratatui inline viewport, redrawn 5 times a
//! second, permission prompts answered with y/n/a/d), one line per event when stdout is not a
//! terminal, or JSON lines with `--output-format stream-json`.

use crate::status_table;
use ahelper_agents::permissions::{PromptAnswer, PromptRequest, Prompter};
use ahelper_agents::swarm::events::SwarmEvent;
use ahelper_agents::swarm::state::{RunRecord, WorkerStatus};
use crossterm::event::{Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::backend::CrosstermBackend;
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Color, Style};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::{Terminal, TerminalOptions, Viewport};
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

/// A permission question waiting for the user.
pub type PromptJob = (PromptRequest, oneshot::Sender<PromptAnswer>);

/// Sends permission questions to the live view, which shows them one at a time.
pub struct ChannelPrompter {
    /// Where questions go.
    pub tx: mpsc::UnboundedSender<PromptJob>,
}

#[async_trait::async_trait]
impl Prompter for ChannelPrompter {
    async fn ask(&self, request: &PromptRequest) -> PromptAnswer {
        let (tx, rx) = oneshot::channel();
        if self.tx.send((request.clone(), tx)).is_err() {
            return PromptAnswer::Deny;
        }
        rx.await.unwrap_or(PromptAnswer::Deny)
    }
    fn is_interactive(&self) -> bool {
        true
    }
}

/// How events are shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventOutput {
    /// Live table.
    Live,
    /// One line per event.
    Lines,
    /// JSON lines.
    Json,
}

/// Prints events as lines or JSON until the channel closes.
pub async fn print_events(mut events: mpsc::UnboundedReceiver<SwarmEvent>, mode: EventOutput) {
    let mut out = std::io::stdout();
    while let Some(e) = events.recv().await {
        match mode {
            EventOutput::Json => {
                let _ = writeln!(out, "{}", serde_json::to_string(&e).unwrap_or_default());
            }
            _ => {
                // Merged/conflict/report lines already say what these state changes would.
                let redundant = matches!(
                    e,
                    SwarmEvent::RunFinished { .. }
                        | SwarmEvent::WorkerStatus {
                            status: WorkerStatus::Finished
                                | WorkerStatus::Merged
                                | WorkerStatus::Conflict
                                | WorkerStatus::NoChanges,
                            ..
                        }
                );
                if !redundant {
                    let _ = writeln!(out, "{}", e.to_line());
                }
            }
        }
        let _ = out.flush();
    }
}

/// Kills every descendant process of ahelper (used on a second Ctrl-C): walks `/proc` for
/// processes whose parent chain leads to us and sends SIGKILL to each one's process group and to
/// the process itself.
pub fn kill_descendants() {
    let me = std::process::id() as i32;
    let mut parents: Vec<(i32, i32)> = Vec::new();
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            // the command name may contain spaces: fields after the last ')'
            let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
                continue;
            };
            let fields: Vec<&str> = rest.split_whitespace().collect();
            if let Some(ppid) = fields.get(1).and_then(|p| p.parse::<i32>().ok()) {
                parents.push((pid, ppid));
            }
        }
    }
    let mut targets = vec![me];
    let mut i = 0;
    while i < targets.len() {
        let parent = targets[i];
        for (pid, ppid) in &parents {
            if *ppid == parent && !targets.contains(pid) {
                targets.push(*pid);
            }
        }
        i += 1;
    }
    for pid in targets.into_iter().skip(1) {
        // SAFETY: plain signal sends to processes we started.
        unsafe {
            let pgid = libc::getpgid(pid);
            if pgid > 0 && pgid != libc::getpgid(0) {
                libc::kill(-pgid, libc::SIGKILL);
            }
            libc::kill(pid, libc::SIGKILL);
        }
    }
}

/// Runs the live status table until `done` fires. Keys: y/n/a/d answer the shown permission
/// question; Ctrl-C once cancels the run (workers commit `wip`), twice kills child processes and
/// exits.
pub async fn run_live(
    mut snapshots: watch::Receiver<RunRecord>,
    mut events: mpsc::UnboundedReceiver<SwarmEvent>,
    mut prompts: mpsc::UnboundedReceiver<PromptJob>,
    cancel: CancellationToken,
    mut done: oneshot::Receiver<()>,
) {
    let started = std::time::Instant::now();
    let workers = snapshots.borrow().workers.len() as u16;
    let (_, term_height) = crossterm::terminal::size().unwrap_or((120, 40));
    let height = (workers + 4).min(term_height.saturating_sub(1)).max(4);
    let _ = crossterm::terminal::enable_raw_mode();
    let backend = CrosstermBackend::new(std::io::stdout());
    let mut terminal = match Terminal::with_options(
        backend,
        TerminalOptions {
            viewport: Viewport::Inline(height),
        },
    ) {
        Ok(t) => t,
        Err(_) => {
            let _ = crossterm::terminal::disable_raw_mode();
            print_events(events, EventOutput::Lines).await;
            return;
        }
    };
    // Key reader thread.
    let (key_tx, mut keys) = mpsc::unbounded_channel::<crossterm::event::KeyEvent>();
    let stop = Arc::new(AtomicBool::new(false));
    let reader_stop = stop.clone();
    let reader = std::thread::spawn(move || {
        while !reader_stop.load(Ordering::Relaxed) {
            if crossterm::event::poll(std::time::Duration::from_millis(100)).unwrap_or(false)
                && let Ok(Event::Key(k)) = crossterm::event::read()
                && k.kind == KeyEventKind::Press
                && key_tx.send(k).is_err()
            {
                break;
            }
        }
    });
    let mut pending: std::collections::VecDeque<PromptJob> = Default::default();
    let mut ctrl_c_count = 0;
    let mut tick = tokio::time::interval(std::time::Duration::from_millis(200));
    let mut notes: Vec<String> = Vec::new();
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = snapshots.changed() => {}
            Some(e) = events.recv() => {
                let note = match &e {
                    SwarmEvent::Merged { .. } | SwarmEvent::MergeConflict { .. } | SwarmEvent::Notice { .. }
                    | SwarmEvent::WorkerReported { .. } | SwarmEvent::PermissionDenied { .. } => Some(e.to_line()),
                    SwarmEvent::WorkerStatus { status: WorkerStatus::Failed, .. } => Some(e.to_line()),
                    _ => None,
                };
                if let Some(n) = note { notes.push(n); }
            }
            Some(job) = prompts.recv() => pending.push_back(job),
            Some(key) = keys.recv() => {
                let ctrl_c = key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL);
                if ctrl_c {
                    ctrl_c_count += 1;
                    if ctrl_c_count == 1 {
                        notes.push("Ctrl-C: cancelling — workers commit their work as `wip`; press Ctrl-C again to kill everything".into());
                        cancel.cancel();
                        while let Some((_, tx)) = pending.pop_front() { let _ = tx.send(PromptAnswer::Deny); }
                    } else {
                        let _ = crossterm::terminal::disable_raw_mode();
                        kill_descendants();
                        eprintln!("\nahelper: killed; transcripts and branches are kept. Resume with `ahelper swarm resume {}`", snapshots.borrow().run_id);
                        std::process::exit(130);
                    }
                } else if let Some((_, _)) = pending.front() {
                    let answer = match key.code {
                        KeyCode::Char('y') => Some(PromptAnswer::AllowOnce),
                        KeyCode::Char('n') => Some(PromptAnswer::Deny),
                        KeyCode::Char('a') => Some(PromptAnswer::AllowAlways),
                        KeyCode::Char('d') => Some(PromptAnswer::DenyAlways),
                        _ => None,
                    };
                    if let Some(a) = answer
                        && let Some((_, tx)) = pending.pop_front() { let _ = tx.send(a); }
                }
            }
            _ = &mut done => break,
        }
        for note in notes.drain(..) {
            let _ = terminal.insert_before(1, |buf| {
                Paragraph::new(Line::from(note.clone())).render_ref_to(buf);
            });
        }
        let record = snapshots.borrow().clone();
        let waiting: Vec<String> = pending
            .iter()
            .filter_map(|(r, _)| {
                r.requester
                    .as_ref()
                    .and_then(|s| s.split(' ').next())
                    .map(str::to_string)
            })
            .collect();
        let prompt_line = pending.front().map(|(r, _)| {
            format!(
                "[{}] Allow {} {}? ({})  y = yes · n = no · a = always for this run · d = never",
                r.requester.clone().unwrap_or_default(),
                r.tool,
                r.subject.clone().unwrap_or_default(),
                r.reason
            )
        });
        let elapsed = started.elapsed().as_millis() as u64;
        let _ = terminal.draw(|frame| {
            let mut rec = record.clone();
            for w in &mut rec.workers {
                if waiting.contains(&w.id) {
                    w.status = WorkerStatus::WaitingForPermission;
                }
            }
            let areas = Layout::vertical([
                Constraint::Min(2),
                Constraint::Length(1),
                Constraint::Length(1),
            ])
            .split(frame.area());
            let claims = |id: &str| {
                rec.workers
                    .iter()
                    .find(|w| w.id == id)
                    .map(|w| w.claims)
                    .unwrap_or(0)
            };
            let now = chrono::Utc::now();
            let live = |i: usize| {
                let w = &rec.workers[i];
                let running = matches!(
                    w.status,
                    WorkerStatus::Starting
                        | WorkerStatus::Running
                        | WorkerStatus::WaitingForPermission
                        | WorkerStatus::Committing
                );
                if !running {
                    return None;
                }
                let started =
                    chrono::DateTime::parse_from_rfc3339(w.started_at.as_deref()?).ok()?;
                Some(
                    (now - started.with_timezone(&chrono::Utc))
                        .num_milliseconds()
                        .max(0) as u64,
                )
            };
            frame.render_widget(status_table::table_widget(&rec, &claims, &live), areas[0]);
            frame.render_widget(
                Paragraph::new(status_table::totals_line(&rec, elapsed)),
                areas[1],
            );
            if let Some(p) = &prompt_line {
                frame.render_widget(
                    Paragraph::new(p.as_str()).style(Style::default().fg(Color::Yellow)),
                    areas[2],
                );
            }
        });
    }
    stop.store(true, Ordering::Relaxed);
    let _ = reader.join();
    let _ = crossterm::terminal::disable_raw_mode();
    let _ = terminal.show_cursor();
    println!();
}

trait RenderRef {
    fn render_ref_to(&self, buf: &mut ratatui::buffer::Buffer);
}

impl RenderRef for Paragraph<'_> {
    fn render_ref_to(&self, buf: &mut ratatui::buffer::Buffer) {
        use ratatui::widgets::Widget;
        let area = buf.area;
        self.clone().render(area, buf);
    }
}
