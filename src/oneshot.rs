//! `ahelper -p "<prompt>"`: one prompt, no REPL, output as text, JSON or JSON lines.

use crate::cli::OutputFormat;
use crate::render::EventPrinter;
use ahelper_agents::agent::{AgentEvent, AgentOutcome, AgentStopReason};
use ahelper_agents::session::Session;
use ahelper_agents::text::for_terminal;
use serde_json::json;
use std::io::{IsTerminal, Write};
use tokio_util::sync::CancellationToken;

/// Runs `prompt` in `session` and prints the result; returns the process exit code
/// (0 completed, 1 stopped for another reason, 130 cancelled).
pub async fn run(mut session: Session, prompt: &str, format: OutputFormat, verbose: bool) -> i32 {
    let started = std::time::Instant::now();
    let mut rx = session.agent.subscribe();
    let cancel = CancellationToken::new();
    let watcher = crate::spawn_ctrl_c_watcher(cancel.clone());

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
    let printer_task = tokio::spawn(async move {
        let mut printer = EventPrinter::new(std::io::stderr().is_terminal(), false);
        let mut stdout = std::io::stdout();
        let mut stderr = std::io::stderr();
        while let Some(event) = rx.recv().await {
            match format {
                OutputFormat::StreamJson if !matches!(event, AgentEvent::Finished { .. }) => {
                    let _ = writeln!(
                        stdout,
                        "{}",
                        serde_json::to_string(&event).unwrap_or_default()
                    );
                    let _ = stdout.flush();
                }
                _ if verbose => printer.print(&mut stderr, &event),
                // Retries are always shown: the user should know why an answer is slow.
                _ if matches!(event, AgentEvent::Retry { .. }) => {
                    printer.print(&mut stderr, &event)
                }
                _ => {}
            }
        }
    });
    let outcome = session.agent.run(prompt, &cancel).await;
    session.agent.unsubscribe();
    watcher.abort();
    let _ = printer_task.await;
    print_outcome(
        &session,
        &outcome,
        format,
        started.elapsed().as_millis() as u64,
    );
    match outcome.stop_reason {
        AgentStopReason::Completed => 0,
        AgentStopReason::Cancelled => 130,
        _ => 1,
    }
}

fn print_outcome(
    session: &Session,
    outcome: &AgentOutcome,
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
                eprintln!(
                    "ahelper: resume with `ahelper -p \"…\" --resume {}`",
                    session.id
                );
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
                "duration_ms": duration_ms,
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
