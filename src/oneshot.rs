//! `ahelper -p "<prompt>"`: one prompt, no REPL, output as text, JSON or JSON lines.

use crate::cli::OutputFormat;
use crate::refusals::{self, Refusal, RefusalExplainer};
use crate::render::EventPrinter;
use ahelper_agents::agent::{AgentEvent, AgentOutcome, AgentStopReason};
use ahelper_agents::pricing::PriceTable;
use ahelper_agents::session::Session;
use ahelper_agents::text::for_terminal;
use serde_json::json;
use std::io::{IsTerminal, Write};
use std::path::Path;
use tokio_util::sync::CancellationToken;

/// How a one-shot run ended.
#[derive(Debug, Clone, Copy)]
pub struct RunEnd {
    /// The process exit code the run earned (see [`run`]).
    pub code: i32,
    /// Some of the run's output could not be written to stdout, and stderr already says so.
    pub output_lost: bool,
}

/// Runs `prompt` in `session` and prints the result; returns the process exit code
/// (0 completed, 1 stopped for another reason, 130 cancelled, [`crate::EXIT_OUTPUT_LOST`]
/// completed but its answer or a stream-json event could not be written: [`report_lost_output`]).
/// Refused tool calls do not change it (as in Claude Code); they are listed on stderr and in the
/// JSON result (`permission_denials`).
///
/// `prices` give the JSON result's `total_cost_usd` (null when the model has no known price).
/// The session is borrowed so that the caller may end the process without dropping it
/// ([`crate::end_one_shot`]).
pub async fn run(
    session: &mut Session,
    prompt: &str,
    format: OutputFormat,
    verbose: bool,
    prices: &PriceTable,
) -> RunEnd {
    let started = std::time::Instant::now();
    let rx = session.agent.subscribe();
    let cancel = CancellationToken::new();
    let watcher = crate::spawn_interrupt_watcher(cancel.clone());
    let mut lost: Option<std::io::Error> = None;

    if format == OutputFormat::StreamJson {
        let init = json!({
            "type": "system",
            "subtype": "init",
            "session_id": session.id,
            "cwd": session.agent.tool_context().workspace_root,
            "model": session.agent.client().describe(),
            "tools": session.agent.tools().names(),
            "transcript": session.transcript_path,
        });
        lost = crate::try_write_stdout(format_args!("{init}\n")).err();
    }
    let explainer = RefusalExplainer::new(&session.agent);
    let printer_task = tokio::spawn(print_events(rx, format, verbose, explainer, lost.is_some()));
    let outcome = session.agent.run(prompt, &cancel).await;
    session.agent.end_session("other").await;
    session.agent.unsubscribe();
    watcher.abort();
    let (refusals, lost_event) = printer_task.await.unwrap_or_default();
    lost = lost.or(lost_event);
    let cost_usd = prices.cost_usd(session.agent.model(), outcome.usage);
    if lost.is_none() {
        let written = print_outcome(
            session,
            &outcome,
            cost_usd,
            &refusals,
            format,
            started.elapsed().as_millis() as u64,
        );
        lost = written.err();
    }
    if !refusals.is_empty() {
        eprintln!("{}", refusals::closing_line(refusals.len()));
    }
    let code = match outcome.stop_reason {
        AgentStopReason::Completed => 0,
        AgentStopReason::Cancelled => 130,
        _ => 1,
    };
    match lost {
        Some(e) => RunEnd {
            code: report_lost_output(&e, &session.transcript_path, code),
            output_lost: true,
        },
        None => RunEnd {
            code,
            output_lost: false,
        },
    }
}

/// Says on stderr that the run's output could not be written to stdout (`error`) and where the
/// answer is kept (`transcript`); returns the exit code the run ends with:
/// [`crate::EXIT_OUTPUT_LOST`] instead of `code` 0, else `code` (a stopped or cancelled run
/// already says it did not succeed).
pub fn report_lost_output(error: &std::io::Error, transcript: &Path, code: i32) -> i32 {
    eprintln!(
        "ahelper: could not write the answer to standard output: {error}; it is kept in the transcript at {} (free some space or send stdout elsewhere, then read it there)",
        transcript.display()
    );
    if code == 0 {
        crate::EXIT_OUTPUT_LOST
    } else {
        code
    }
}

/// Prints the events of the run as `format` and `verbose` ask, each refused tool call on stderr
/// whatever the format; returns the refusals and the error of the first stream-json event that
/// could not be written to stdout (no event is written after it, nor when `stdout_lost`: the
/// stream is broken).
async fn print_events(
    mut rx: tokio::sync::mpsc::UnboundedReceiver<AgentEvent>,
    format: OutputFormat,
    verbose: bool,
    explainer: RefusalExplainer,
    mut stdout_lost: bool,
) -> (Vec<Refusal>, Option<std::io::Error>) {
    let mut printer = EventPrinter::new(std::io::stderr().is_terminal(), false);
    let mut lost = None;
    let mut stderr = std::io::stderr();
    let mut refusals: Vec<Refusal> = vec![];
    while let Some(event) = rx.recv().await {
        if let AgentEvent::PermissionDenied {
            id,
            name,
            input,
            reason,
            ..
        } = &event
        {
            let refusal = explainer.explain(id, name, input, reason);
            let _ = writeln!(stderr, "{}", refusal.line());
            refusals.push(refusal);
        }
        let refused = |id: &str| refusals.iter().any(|r| r.tool_use_id == id);
        match &event {
            AgentEvent::Finished { .. } => {}
            _ if format == OutputFormat::StreamJson => {
                if stdout_lost {
                    continue;
                }
                let line = serde_json::to_string(&event).unwrap_or_default();
                if let Err(e) = crate::try_write_stdout(format_args!("{line}\n")) {
                    lost = Some(e);
                    stdout_lost = true;
                }
            }
            // the refusal line above already says what this result would
            AgentEvent::ToolCallFinished { id, .. } if refused(id) => {}
            _ if verbose => printer.print(&mut stderr, &event),
            // Retries and hook failures are always shown: the user should know why an answer
            // is slow, and that a hook of theirs is broken.
            AgentEvent::Retry { .. } | AgentEvent::HookMessage { .. } => {
                printer.print(&mut stderr, &event)
            }
            _ => {}
        }
    }
    (refusals, lost)
}

/// Prints the run's result on stdout as `format` asks (and, in text, why it stopped on stderr).
///
/// # Errors
/// The error of the write to stdout (a closed stdout is not one: [`crate::try_write_stdout`]).
fn print_outcome(
    session: &Session,
    outcome: &AgentOutcome,
    cost_usd: Option<f64>,
    refusals: &[Refusal],
    format: OutputFormat,
    duration_ms: u64,
) -> std::io::Result<()> {
    let is_error = outcome.stop_reason != AgentStopReason::Completed;
    match format {
        OutputFormat::Text => {
            let written = if outcome.final_text.is_empty() {
                Ok(())
            } else {
                let text = for_terminal(outcome.final_text.trim_end());
                crate::try_write_stdout(format_args!("{text}\n"))
            };
            if is_error {
                eprintln!(
                    "ahelper: stopped ({}){}",
                    outcome.stop_reason.as_str(),
                    outcome
                        .error
                        .as_ref()
                        .map(|e| format!(": {}", for_terminal(e)))
                        .unwrap_or_default()
                );
                // A refused key or a wrong base_url fails again on resume: fix the setting first.
                if !outcome
                    .model_error
                    .as_ref()
                    .is_some_and(|e| e.is_settings_error())
                {
                    eprintln!(
                        "ahelper: resume with `ahelper -p \"…\" --resume {}`",
                        session.id
                    );
                }
            }
            written
        }
        OutputFormat::Json | OutputFormat::StreamJson => {
            let result = json!({
                "type": "result",
                "subtype": if is_error { "error" } else { "success" },
                "is_error": is_error,
                "stop_reason": outcome.stop_reason,
                "result": outcome.final_text,
                "error": outcome.error,
                "session_id": session.id,
                "num_turns": outcome.turns,
                "tool_calls": outcome.tool_calls,
                "permission_denials": refusals.iter().map(Refusal::to_json).collect::<Vec<_>>(),
                "duration_ms": duration_ms,
                // Claude Code's name; null when the model has no known price (never guessed).
                "total_cost_usd": cost_usd,
                "usage": {
                    "input_tokens": outcome.usage.input_tokens,
                    "output_tokens": outcome.usage.output_tokens,
                    // Of input_tokens (Anthropic's names, as Claude Code prints them).
                    "cache_read_input_tokens": outcome.usage.cache_read_tokens,
                    "cache_creation_input_tokens": outcome.usage.cache_write_tokens,
                },
                "transcript": session.transcript_path,
            });
            crate::try_write_stdout(format_args!("{result}\n"))
        }
    }
}
