//! Showing a running swarm: the live status table (ratatui inline viewport, redrawn 5 times a
//! second, permission prompts answered with y/n/a/d), one line per event when stdout is not a
//! terminal, or JSON lines with `--output-format stream-json`.

use crate::interrupts::Interrupt;
use crate::status_table;
use ahelper_agents::permissions::{PromptAnswer, PromptRequest, Prompter, SettledCheck};
use ahelper_agents::pricing::Price;
use ahelper_agents::swarm::UserStop;
use ahelper_agents::swarm::events::SwarmEvent;
use ahelper_agents::swarm::process::kill_descendants;
use ahelper_agents::swarm::state::{RunRecord, WorkerRecord, WorkerStatus};
use ahelper_agents::text::for_terminal;
use crossterm::event::{Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::backend::CrosstermBackend;
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Color, Style};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;
use ratatui::{Terminal, TerminalOptions, Viewport};
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::{mpsc, oneshot, watch};

/// A permission question waiting for the user.
pub struct PromptJob {
    /// What is asked.
    pub request: PromptRequest,
    /// `Some(rule)` once the policy allows the call without asking (an `a` answer to another
    /// question added a rule that covers it); `None`: always ask.
    pub settled: Option<SettledCheck>,
    /// Where the answer goes.
    pub reply: oneshot::Sender<PromptAnswer>,
}

/// Sends permission questions to the live view, which shows them one at a time.
pub struct ChannelPrompter {
    /// Where questions go.
    pub tx: mpsc::UnboundedSender<PromptJob>,
}

impl ChannelPrompter {
    async fn send(&self, request: &PromptRequest, settled: Option<SettledCheck>) -> PromptAnswer {
        let (reply, rx) = oneshot::channel();
        let job = PromptJob {
            request: request.clone(),
            settled,
            reply,
        };
        if self.tx.send(job).is_err() {
            return PromptAnswer::Deny;
        }
        rx.await.unwrap_or(PromptAnswer::Deny)
    }
}

#[async_trait::async_trait]
impl Prompter for ChannelPrompter {
    async fn ask(&self, request: &PromptRequest) -> PromptAnswer {
        self.send(request, None).await
    }
    async fn ask_unless_settled(
        &self,
        request: &PromptRequest,
        settled: SettledCheck,
    ) -> PromptAnswer {
        self.send(request, Some(settled)).await
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

/// Prints events as lines or JSON until the channel closes; returns the error of the first
/// event that could not be written to stdout (a closed stdout is not one:
/// [`crate::try_write_stdout`]). Nothing is written after it; the channel is still drained.
pub async fn print_events(
    mut events: mpsc::UnboundedReceiver<SwarmEvent>,
    mode: EventOutput,
) -> Option<std::io::Error> {
    let mut lost = None;
    while let Some(e) = events.recv().await {
        if lost.is_some() {
            continue;
        }
        let written = match mode {
            EventOutput::Json => {
                let line = serde_json::to_string(&e).unwrap_or_default();
                crate::try_write_stdout(format_args!("{line}\n"))
            }
            _ => {
                // Merged/conflict/report lines already say what these state changes would.
                // Token counts are the table's and the JSON stream's, not a line each.
                let redundant = matches!(
                    e,
                    SwarmEvent::RunFinished { .. }
                        | SwarmEvent::Usage { .. }
                        | SwarmEvent::WorkerStatus {
                            status: WorkerStatus::Finished
                                | WorkerStatus::Merged
                                | WorkerStatus::Conflict
                                | WorkerStatus::NoChanges,
                            ..
                        }
                );
                if redundant {
                    Ok(())
                } else {
                    let line = e.to_line();
                    crate::try_write_stdout(format_args!("{}\n", for_terminal(&line)))
                }
            }
        };
        lost = written.err();
    }
    lost
}

/// Ctrl-C outside raw mode (line and JSON output), and `SIGTERM`/`SIGHUP` in every mode
/// ([`crate::interrupts`]): the first cancels the run, the second kills every child process
/// and exits with 130. The first one stops `cancel` with its
/// [`crate::interrupts::Interrupt::cancel_reason`].
pub async fn watch_ctrl_c(cancel: UserStop, run_id: String) {
    let mut interrupts = crate::interrupts::Interrupts::new();
    let first = interrupts.next().await;
    crate::interrupts::say(&format!(
        "ahelper: {} — cancelling run {run_id}; workers commit their work as wip. Ctrl-C again to kill everything.",
        first.name()
    ));
    cancel.stop(first.cancel_reason());
    interrupts.next().await;
    kill_descendants();
    crate::interrupts::say(&format!(
        "ahelper: killed; resume with `ahelper swarm resume {run_id}`"
    ));
    std::process::exit(130);
}

/// Runs the live status table until `done` fires. Keys: y/n/a/d answer the shown permission
/// question; Ctrl-C once cancels the run (workers commit `wip`), twice kills child processes and
/// exits.
pub async fn run_live(
    mut snapshots: watch::Receiver<RunRecord>,
    mut events: mpsc::UnboundedReceiver<SwarmEvent>,
    mut prompts: mpsc::UnboundedReceiver<PromptJob>,
    cancel: UserStop,
    mut done: oneshot::Receiver<()>,
    price: Option<Price>,
) {
    let workers = {
        let record = snapshots.borrow();
        // one more row for the verification worktree
        (record.workers.len() + usize::from(record.verify_worktree.is_some())) as u16
    };
    let Some(mut terminal) = open_inline_terminal(workers) else {
        print_events(events, EventOutput::Lines).await;
        return;
    };
    let mut keys = KeyReader::spawn();
    let mut view = LiveView::new(cancel);
    view.price = price;
    let mut tick = tokio::time::interval(std::time::Duration::from_millis(200));
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = snapshots.changed() => {}
            Some(e) = events.recv() => view.on_event(&e),
            Some(job) = prompts.recv() => {
                view.pending.push_back(job);
                view.settle_pending();
                if view.terminal_lost {
                    view.deny_pending();
                }
            }
            key = keys.rx.recv(), if !view.terminal_lost => {
                let Some(key) = key else {
                    view.lose_terminal();
                    continue;
                };
                if view.on_key(key) == KeyOutcome::Kill {
                    let _ = crossterm::terminal::disable_raw_mode();
                    kill_descendants();
                    eprintln!("\nahelper: killed; transcripts and branches are kept. Resume with `ahelper swarm resume {}`", snapshots.borrow().run_id);
                    std::process::exit(130);
                }
            }
            _ = &mut done => break,
        }
        // An `a` answer's rule reaches the policy after the answer: look again every tick.
        view.settle_pending();
        let record = snapshots.borrow().clone();
        view.draw(&mut terminal, record);
    }
    keys.stop();
    let _ = crossterm::terminal::disable_raw_mode();
    let _ = terminal.show_cursor();
    println!();
}

type LiveTerminal = Terminal<CrosstermBackend<std::io::Stdout>>;

/// Rows of the live view kept for a permission question, wrapped to the terminal's width.
const QUESTION_ROWS: u16 = 4;

/// Rows kept for the totals line, which wraps on a narrow terminal.
const TOTALS_ROWS: u16 = 2;

/// Longest requester (`w1 · <subtask title>`) in a question, in characters: a long title is
/// cut with `…` so that the call itself keeps its room.
const MAX_REQUESTER_CHARS: usize = 40;

/// `text` wrapped at spaces into lines of at most `width` characters (a longer word is split).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(8);
    let mut lines = vec![String::new()];
    for word in text.split(' ') {
        let mut word: Vec<char> = word.chars().collect();
        loop {
            let line = lines.last_mut().expect("never empty");
            let used = line.chars().count();
            let gap = usize::from(used > 0);
            if used + gap + word.len() <= width {
                if gap == 1 {
                    line.push(' ');
                }
                line.extend(word.iter());
                break;
            }
            if used > 0 {
                lines.push(String::new());
                continue;
            }
            let rest = word.split_off(width);
            line.extend(word.iter());
            lines.push(String::new());
            word = rest;
        }
    }
    lines
}

/// The choices `y = yes once · n = no · …` wrapped into lines of at most `width` characters,
/// each choice kept on one line (a choice longer than a line is wrapped at spaces).
fn wrap_choices(keys: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for choice in keys.split(" · ") {
        match lines.last_mut() {
            Some(line) if line.chars().count() + 3 + choice.chars().count() <= width => {
                line.push_str(" · ");
                line.push_str(choice);
            }
            _ if choice.chars().count() <= width => lines.push(choice.to_string()),
            _ => lines.extend(wrap(choice, width)),
        }
    }
    lines
}

/// The question in `rows` lines of `width`: its keys always whole (the last paragraph, each
/// choice on one line), the question above them cut with `…` only when both do not fit.
fn fit_question(text: &str, width: usize, rows: usize) -> Vec<String> {
    let (question, keys) = text.rsplit_once('\n').unwrap_or(("", text));
    let keys = wrap_choices(keys, width);
    let mut lines: Vec<String> = question.lines().flat_map(|l| wrap(l, width)).collect();
    let room = rows.saturating_sub(keys.len()).max(1);
    if lines.len() > room {
        lines.truncate(room);
        if let Some(last) = lines.last_mut() {
            let kept: String = last.chars().take(width.max(8) - 1).collect();
            *last = format!("{kept}…");
        }
    }
    lines.extend(keys);
    lines
}

/// Raw mode and an inline viewport tall enough for the table of `workers` rows (within the
/// terminal); `None` (raw mode off again) when the terminal cannot be set up.
fn open_inline_terminal(workers: u16) -> Option<LiveTerminal> {
    let (_, term_height) = crossterm::terminal::size().unwrap_or((120, 40));
    let height = (workers + 2 + TOTALS_ROWS + QUESTION_ROWS)
        .min(term_height.saturating_sub(1))
        .max(4);
    let _ = crossterm::terminal::enable_raw_mode();
    let backend = CrosstermBackend::new(std::io::stdout());
    let options = TerminalOptions {
        viewport: Viewport::Inline(height),
    };
    match Terminal::with_options(backend, options) {
        Ok(t) => Some(t),
        Err(_) => {
            let _ = crossterm::terminal::disable_raw_mode();
            None
        }
    }
}

/// Key presses read on a thread (crossterm's reads block).
struct KeyReader {
    rx: mpsc::UnboundedReceiver<crossterm::event::KeyEvent>,
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl KeyReader {
    fn spawn() -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let stop = Arc::new(AtomicBool::new(false));
        let reader_stop = stop.clone();
        let thread = std::thread::spawn(move || {
            // A hung-up terminal (closed window, killed tmux) ends the reader — dropping `tx`
            // tells the live view. crossterm never reports it: on a hung-up terminal its read
            // loop spins for ever, so the kernel is asked first whether keys or a hang-up wait.
            while !reader_stop.load(Ordering::Relaxed) {
                let wait = match stdin_terminal_state(100) {
                    TerminalState::HungUp => break,
                    TerminalState::Idle => continue,
                    TerminalState::Readable => std::time::Duration::ZERO,
                    TerminalState::NotStdin => std::time::Duration::from_millis(100),
                };
                match crossterm::event::poll(wait) {
                    Ok(false) => continue,
                    Ok(true) => {}
                    Err(_) => break,
                }
                match crossterm::event::read() {
                    Ok(Event::Key(k)) if k.kind == KeyEventKind::Press => {
                        if tx.send(k).is_err() {
                            break;
                        }
                    }
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
        });
        KeyReader { rx, stop, thread }
    }

    /// Stops the reader; waits for it only when it has already ended by itself or ends
    /// within its poll interval, so a reader stuck on a dead terminal never holds up the exit.
    fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(500);
        while !self.thread.is_finished() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        if self.thread.is_finished() {
            let _ = self.thread.join();
        }
    }
}

/// What standard input, the terminal keys come from, has for the key reader.
#[derive(Debug, PartialEq, Eq)]
enum TerminalState {
    /// Bytes wait to be read.
    Readable,
    /// Nothing within the wait.
    Idle,
    /// The terminal was hung up (`POLLHUP`, `POLLERR`, `POLLNVAL`): its window closed.
    HungUp,
    /// Standard input is not a terminal (crossterm reads `/dev/tty`): ask crossterm instead.
    NotStdin,
}

/// Waits up to `wait_ms` milliseconds (`poll(2)`) for standard input, when it is a terminal.
fn stdin_terminal_state(wait_ms: i32) -> TerminalState {
    // SAFETY: isatty only inspects the descriptor.
    if unsafe { libc::isatty(libc::STDIN_FILENO) } != 1 {
        return TerminalState::NotStdin;
    }
    let mut fd = libc::pollfd {
        fd: libc::STDIN_FILENO,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid `pollfd` for the duration of the call.
    let n = unsafe { libc::poll(&mut fd, 1, wait_ms) };
    if n <= 0 {
        return TerminalState::Idle;
    }
    if fd.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
        TerminalState::HungUp
    } else {
        TerminalState::Readable
    }
}

/// What a key press asks of the live view.
#[derive(Debug, PartialEq, Eq)]
enum KeyOutcome {
    /// Keep going.
    Continue,
    /// Second Ctrl-C: kill everything and exit.
    Kill,
}

/// The live view's state: permission questions waiting (shown one at a time), lines to print
/// above the table, Ctrl-C presses.
struct LiveView {
    cancel: UserStop,
    pending: VecDeque<PromptJob>,
    notes: Vec<String>,
    ctrl_c_count: u32,
    started: std::time::Instant,
    /// The model's price, for the cost on the totals line.
    price: Option<Price>,
    /// The key reader failed: the terminal is gone.
    terminal_lost: bool,
    /// The question whose diff was printed last (requester, tool and input), so each is
    /// printed once.
    diff_shown_for: Option<String>,
}

impl LiveView {
    fn new(cancel: UserStop) -> Self {
        LiveView {
            cancel,
            pending: VecDeque::new(),
            notes: Vec::new(),
            ctrl_c_count: 0,
            started: std::time::Instant::now(),
            price: None,
            terminal_lost: false,
            diff_shown_for: None,
        }
    }

    /// Prints, once, the diff of the front question's edit or write above the table (the
    /// question rows cannot hold it): the real change to the file in the asking worker's
    /// worktree ([`crate::prompter::diff_preview`]).
    fn show_front_diff(&mut self, record: &RunRecord) {
        let Some(job) = self.pending.front() else {
            return;
        };
        let r = &job.request;
        let key = format!(
            "{}\0{}\0{}",
            r.requester.as_deref().unwrap_or_default(),
            r.tool,
            r.input
        );
        if self.diff_shown_for.as_deref() == Some(key.as_str()) {
            return;
        }
        self.diff_shown_for = Some(key);
        let worker = r.requester.as_deref().and_then(|q| q.split(' ').next());
        let Some(w) = record
            .workers
            .iter()
            .find(|w| Some(w.id.as_str()) == worker)
        else {
            return;
        };
        if !w.worktree.is_dir() {
            // A worker on another machine: its files are not here to compare with.
            return;
        }
        if let Some(diff) = crate::prompter::diff_preview(r, &w.worktree) {
            self.notes.push(format!("[{}] wants to change:", w.id));
            self.notes.extend(diff.lines().map(str::to_string));
        }
    }

    /// Events worth a line above the table: merges, conflicts, notices, reports, refusals,
    /// failures.
    fn on_event(&mut self, e: &SwarmEvent) {
        let worth_a_line = matches!(
            e,
            SwarmEvent::Merged { .. }
                | SwarmEvent::MergeConflict { .. }
                | SwarmEvent::Notice { .. }
                | SwarmEvent::WorkerReported { .. }
                | SwarmEvent::PermissionDenied { .. }
                | SwarmEvent::WorkerStatus {
                    status: WorkerStatus::Failed,
                    ..
                }
        );
        if worth_a_line {
            self.notes.push(e.to_line());
        }
    }

    fn on_key(&mut self, key: crossterm::event::KeyEvent) -> KeyOutcome {
        let ctrl_c =
            key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL);
        if ctrl_c {
            self.ctrl_c_count += 1;
            if self.ctrl_c_count > 1 {
                return KeyOutcome::Kill;
            }
            self.notes.push("Ctrl-C: cancelling — workers commit their work as `wip`; press Ctrl-C again to kill everything".into());
            self.cancel.stop(Interrupt::CtrlC.cancel_reason());
            self.deny_pending();
            return KeyOutcome::Continue;
        }
        let answer = match key.code {
            KeyCode::Char('y') => Some(PromptAnswer::AllowOnce),
            KeyCode::Char('n') => Some(PromptAnswer::Deny),
            KeyCode::Char('a') => Some(PromptAnswer::AllowAlways),
            KeyCode::Char('d') => Some(PromptAnswer::DenyAlways),
            _ => None,
        };
        if let Some(a) = answer
            && let Some(job) = self.pending.pop_front()
        {
            let _ = job.reply.send(a);
            self.settle_pending();
        }
        KeyOutcome::Continue
    }

    /// Denies every waiting permission question.
    fn deny_pending(&mut self) {
        while let Some(job) = self.pending.pop_front() {
            let _ = job.reply.send(PromptAnswer::Deny);
        }
    }

    /// The terminal is gone (its key reader failed): nobody can answer or watch, so the run
    /// stops as on the first Ctrl-C (workers commit `wip`, the resume command is printed) and
    /// every question, now and later, is denied.
    fn lose_terminal(&mut self) {
        self.terminal_lost = true;
        self.notes
            .push("the terminal is gone: cancelling — workers commit their work as `wip`".into());
        self.cancel
            .stop("stopped: the terminal is gone (its key reader failed)");
        self.deny_pending();
    }

    /// Withdraws the waiting questions nobody waits for any more (a remote worker that ended
    /// or whose question the coordinator gave up), with a line naming each: the table does not
    /// show its worker `waiting for permission` after that.
    fn withdraw_abandoned(&mut self) {
        let (abandoned, waiting): (VecDeque<PromptJob>, VecDeque<PromptJob>) = self
            .pending
            .drain(..)
            .partition(|job| job.reply.is_closed());
        self.pending = waiting;
        for job in abandoned {
            self.notes.push(format!(
                "[{}] question about {} {} withdrawn: the worker no longer waits for it",
                job.request.requester.as_deref().unwrap_or_default(),
                job.request.tool,
                job.request.subject.as_deref().unwrap_or_default()
            ));
        }
    }

    /// Withdraws the waiting questions that a rule added meanwhile (an `a` answer) now
    /// covers, so no other worker asks again for the same program: each is answered
    /// [`PromptAnswer::AllowedByRule`] (recorded as settled by that rule, not as the user's
    /// answer) with a line naming the rule.
    fn settle_pending(&mut self) {
        let mut waiting = VecDeque::new();
        for job in self.pending.drain(..) {
            let Some(rule) = job.settled.as_ref().and_then(|check| check()) else {
                waiting.push_back(job);
                continue;
            };
            self.notes.push(format!(
                "[{}] allowed {} {} by the rule `{rule}` (added while it waited; not asked)",
                job.request.requester.as_deref().unwrap_or_default(),
                job.request.tool,
                job.request.subject.as_deref().unwrap_or_default()
            ));
            let _ = job.reply.send(PromptAnswer::AllowedByRule);
        }
        self.pending = waiting;
    }

    /// Prints the pending notes above the viewport, then redraws the table, the totals and the
    /// current question.
    fn draw(&mut self, terminal: &mut LiveTerminal, mut record: RunRecord) {
        self.withdraw_abandoned();
        self.show_front_diff(&record);
        for note in self.notes.drain(..) {
            let _ = terminal.insert_before(1, |buf| {
                Paragraph::new(Line::from(for_terminal(&note).into_owned())).render_ref_to(buf);
            });
        }
        mark_waiting(&mut record, self.pending.iter().map(|job| &job.request));
        let prompt_line = self.pending.front().map(|job| question_text(&job.request));
        let elapsed = self.started.elapsed().as_millis() as u64;
        let price = self.price;
        let _ = terminal.draw(|frame| render_frame(frame, &record, elapsed, prompt_line, price));
    }
}

/// Shows the workers whose permission questions wait for the user as `waiting for
/// permission`, their last action naming the call (`waiting for permission: run_command make`)
/// instead of what they did before they asked.
fn mark_waiting<'a>(record: &mut RunRecord, pending: impl Iterator<Item = &'a PromptRequest>) {
    for r in pending {
        let worker = r.requester.as_deref().and_then(|q| q.split(' ').next());
        if let Some(w) = record
            .workers
            .iter_mut()
            .find(|w| Some(w.id.as_str()) == worker)
        {
            w.status = WorkerStatus::WaitingForPermission;
            w.action_started_at = None;
            w.last_action = format!(
                "waiting for permission: {} {}",
                r.tool,
                r.subject.as_deref().unwrap_or_default()
            )
            .trim_end()
            .to_string();
        }
    }
}

/// The live view's question: who asks for what and why, then the keys, `a` naming the exact
/// rule it adds for the rest of the run.
fn question_text(r: &PromptRequest) -> String {
    format!(
        "[{}] Allow {} {}? ({})\ny = yes once · n = no · a = always: add `{}` for this run · d = never",
        ahelper_agents::text::first_line_clipped(
            r.requester.as_deref().unwrap_or_default(),
            MAX_REQUESTER_CHARS
        ),
        r.tool,
        r.subject.clone().unwrap_or_default(),
        r.reason,
        r.suggested_rule
    )
}

/// Elapsed ms of a worker that is running now, from its start time.
fn live_elapsed(w: &WorkerRecord, now: chrono::DateTime<chrono::Utc>) -> Option<u64> {
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
    let started = chrono::DateTime::parse_from_rfc3339(w.started_at.as_deref()?).ok()?;
    Some(
        (now - started.with_timezone(&chrono::Utc))
            .num_milliseconds()
            .max(0) as u64,
    )
}

fn render_frame(
    frame: &mut ratatui::Frame<'_>,
    record: &RunRecord,
    elapsed: u64,
    prompt_line: Option<String>,
    price: Option<Price>,
) {
    let width = usize::from(frame.area().width);
    let question = prompt_line
        .map(|p| fit_question(&for_terminal(&p), width, usize::from(QUESTION_ROWS)))
        .unwrap_or_default();
    let totals = wrap(&status_table::totals_line(record, elapsed, price), width);
    let areas = Layout::vertical([
        Constraint::Min(2),
        Constraint::Length(totals.len() as u16),
        Constraint::Length(question.len() as u16),
    ])
    .split(frame.area());
    let claims = |id: &str| {
        record
            .workers
            .iter()
            .find(|w| w.id == id)
            .map(|w| w.claims)
            .unwrap_or(0)
    };
    let now = chrono::Utc::now();
    let live = |i: usize| live_elapsed(&record.workers[i], now);
    frame.render_widget(
        status_table::table_widget(record, &claims, &live, frame.area().width),
        areas[0],
    );
    let totals: Vec<Line> = totals.into_iter().map(Line::from).collect();
    frame.render_widget(Paragraph::new(totals), areas[1]);
    if !question.is_empty() {
        let lines: Vec<Line> = question.into_iter().map(Line::from).collect();
        frame.render_widget(
            Paragraph::new(lines).style(Style::default().fg(Color::Yellow)),
            areas[2],
        );
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn record_with_w1_waiting_for_the_model() -> RunRecord {
        serde_json::from_value(serde_json::json!({
            "run_id": "r", "task": "t", "repo_root": "/r", "base_commit": "c",
            "base_ref": "HEAD", "integration_branch": "i", "status": "running",
            "created_at": "", "updated_at": "", "pid": 0, "plan": null, "summary": null,
            "error": null, "usage": {"input_tokens": 0, "output_tokens": 0},
            "workers": [{
                "id": "w1", "subtask_id": "s1", "title": "t", "status": "running",
                "branch": "b", "worktree": "/w", "start_commit": null, "turns": 2,
                "usage": {"input_tokens": 0, "output_tokens": 0}, "tool_calls": 1,
                "last_action": "waiting for the model (turn 2)", "started_at": null,
                "elapsed_ms": 0, "report": null
            }]
        }))
        .unwrap()
    }

    /// issue 9.9: a worker whose question waits for the user says so in its last action.
    #[test]
    fn a_worker_waiting_for_a_permission_answer_says_so() {
        let mut record = record_with_w1_waiting_for_the_model();
        let request = PromptRequest {
            requester: Some("w1 · Write a".into()),
            tool: "run_command".into(),
            subject: Some("make test".into()),
            input: serde_json::json!({}),
            reason: "not allowed by a rule".into(),
            suggested_rule: "run_command(make test)".into(),
        };
        mark_waiting(&mut record, std::iter::once(&request));
        let w1 = &record.workers[0];
        assert_eq!(w1.status, WorkerStatus::WaitingForPermission);
        assert_eq!(
            w1.last_action,
            "waiting for permission: run_command make test"
        );
        let cells = status_table::row_cells(w1, 0, None);
        assert_eq!(cells[1], "local");
        assert_eq!(cells[3], "waiting for permission");
        assert!(cells[9].starts_with("waiting for permission"), "{cells:?}");
    }

    /// issue 33: a question nobody waits for any more (its remote worker ended) is withdrawn,
    /// with a line saying so, and its worker no longer shows `waiting for permission`.
    #[test]
    fn a_question_nobody_waits_for_is_withdrawn() {
        let mut view = LiveView::new(UserStop::new());
        let request = PromptRequest {
            requester: Some("w1 · Write a".into()),
            tool: "run_command".into(),
            subject: Some("make test".into()),
            input: serde_json::json!({}),
            reason: "not allowed by a rule".into(),
            suggested_rule: "run_command(make test)".into(),
        };
        let (reply, answer) = oneshot::channel();
        view.pending.push_back(PromptJob {
            request: request.clone(),
            settled: None,
            reply,
        });
        view.withdraw_abandoned();
        assert_eq!(view.pending.len(), 1, "still awaited");
        drop(answer);
        view.withdraw_abandoned();
        assert!(view.pending.is_empty());
        assert!(view.notes[0].contains("withdrawn"), "{:?}", view.notes);
        let mut record = record_with_w1_waiting_for_the_model();
        mark_waiting(&mut record, view.pending.iter().map(|job| &job.request));
        assert_ne!(record.workers[0].status, WorkerStatus::WaitingForPermission);
    }

    #[test]
    fn questions_wrap_and_keep_their_keys_whole() {
        assert_eq!(wrap("aaa bbb ccc", 8), ["aaa bbb", "ccc"]);
        assert_eq!(wrap("abcdefghijkl", 8), ["abcdefgh", "ijkl"]);
        let text = format!(
            "[w1 · Work on s1] Allow run_command {}? (why)\ny = yes once · n = no · a = always: add `run_command(sed:*)` for this run · d = never",
            "x ".repeat(200)
        );
        let lines = fit_question(&text, 40, 4);
        assert_eq!(lines.len(), 4, "{lines:?}");
        assert!(lines.iter().all(|l| l.chars().count() <= 40), "{lines:?}");
        let keys = lines[1..].join(" ");
        assert!(
            keys.contains("run_command(sed:*)") && keys.ends_with("d = never"),
            "{lines:?}"
        );
        assert!(lines[0].ends_with('…'), "{lines:?}");
        let keys = wrap_choices(
            "y = yes once · n = no · a = always: add `run_command(sed -i:*)` for this run · d = never",
            80,
        );
        assert_eq!(
            keys,
            [
                "y = yes once · n = no · a = always: add `run_command(sed -i:*)` for this run",
                "d = never"
            ]
        );
    }

    #[test]
    fn a_lost_terminal_cancels_the_run_with_its_own_reason() {
        let cancel = UserStop::new();
        let mut view = LiveView::new(cancel.clone());
        view.lose_terminal();
        assert!(cancel.token().is_cancelled());
        assert!(view.terminal_lost);
        assert_eq!(
            cancel.reason(),
            "stopped: the terminal is gone (its key reader failed)"
        );
    }
}
