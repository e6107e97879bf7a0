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
use tokio_util::sync::CancellationToken;

/// Runs `prompt` in `session` and prints the result; returns the process exit code
/// (0 completed, 1 stopped for another reason, 130 cancelled). Refused tool calls do not change
/// it (as in Claude Code); they are listed on stderr and in the JSON result (`permission_denials`).
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
) -> i32 {
    let started = std::time::Instant::now();
    let rx = session.agent.subscribe();
    let cancel = CancellationToken::new();
    let watcher = crate::spawn_interrupt_watcher(cancel.clone());

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
        println!("{init}");
    }
    let explainer = RefusalExplainer::new(&session.agent);
    let printer_task = tokio::spawn(print_events(rx, format, verbose, explainer));
    let outcome = session.agent.run(prompt, &cancel).await;
    session.agent.end_session("other").await;
    session.agent.unsubscribe();
    watcher.abort();
    let refusals = printer_task.await.unwrap_or_default();
    let cost_usd = prices.cost_usd(session.agent.model(), outcome.usage);
    print_outcome(
        session,
        &outcome,
        cost_usd,
        &refusals,
        format,
        started.elapsed().as_millis() as u64,
    );
    if !refusals.is_empty() {
        eprintln!("{}", refusals::closing_line(refusals.len()));
    }
    match outcome.stop_reason {
        AgentStopReason::Completed => 0,
        AgentStopReason::Cancelled => 130,
        _ => 1,
    }
}

/// Prints the events of the run as `format` and `verbose` ask, each refused tool call on stderr
/// whatever the format; returns the refusals.
async fn print_events(
    mut rx: tokio::sync::mpsc::UnboundedReceiver<AgentEvent>,
    format: OutputFormat,
    verbose: bool,
    explainer: RefusalExplainer,
) -> Vec<Refusal> {
    let mut printer = EventPrinter::new(std::io::stderr().is_terminal(), false);
    let mut stdout = std::io::stdout();
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
                let _ = writeln!(
                    stdout,
                    "{}",
                    serde_json::to_string(&event).unwrap_or_default()
                );
                let _ = stdout.flush();
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
    refusals
}

fn print_outcome(
    session: &Session,
    outcome: &AgentOutcome,
    cost_usd: Option<f64>,
    refusals: &[Refusal],
    format: OutputFormat,
    duration_ms: u64,
) {
    let is_error = outcome.stop_reason != AgentStopReason::Completed;
    match format {
        OutputFormat::Text => {
            if !outcome.final_text.is_empty() {
                println!("{}", for_terminal(outcome.final_text.trim_end()));
            }
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
                },
                "transcript": session.transcript_path,
            });
            println!("{result}");
        }
    }
}
