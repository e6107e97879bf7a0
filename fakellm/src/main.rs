//! `ahelper-fake-llm`: serve a script of fake model turns on 127.0.0.1 until killed.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use ahelper_fake_llm::{FakeLlm, Script, ServerOptions};
use anyhow::Context;
use clap::Parser;

/// A scripted fake LLM server speaking the Anthropic Messages API (`POST /v1/messages`) and
/// OpenAI Chat Completions (`POST /v1/chat/completions`), for tests and offline demos.
#[derive(Debug, Parser)]
#[command(name = "ahelper-fake-llm", version)]
struct Args {
    /// Script to play (JSON; format in the ahelper-fake-llm crate docs). Default: the
    /// built-in demo (list the workspace, read README.md, answer).
    #[arg(long, value_name = "FILE")]
    script: Option<PathBuf>,
    /// Port on 127.0.0.1; 0 picks a free one.
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Delay before every model response, in milliseconds (overrides the script's
    /// `latency_ms`).
    #[arg(long, value_name = "MS")]
    latency_ms: Option<u64>,
    /// Also write the bound port (decimal, no newline) to this file once listening.
    #[arg(long, value_name = "PATH")]
    port_file: Option<PathBuf>,
    /// Do not log one line per request to stderr.
    #[arg(long)]
    quiet: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("ahelper-fake-llm: cannot start the Tokio runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            // The top-level message already includes its cause; print it once, no backtrace.
            eprintln!("ahelper-fake-llm: {err}");
            ExitCode::from(2)
        }
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    let mut script = match &args.script {
        Some(path) => Script::from_file(path)?,
        None => Script::demo(),
    };
    if let Some(ms) = args.latency_ms {
        script.latency_ms = ms;
    }
    let options = ServerOptions {
        port: args.port,
        log_requests: !args.quiet,
    };
    let server = FakeLlm::start_with(script, options).await?;
    if let Some(path) = &args.port_file {
        // Write then rename, so a reader polling the file never sees it half-written.
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, server.port().to_string())
            .and_then(|()| std::fs::rename(&tmp, path))
            .with_context(|| format!("cannot write the port file {}", path.display()))?;
    }
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "listening on {}", server.base_url())?;
    stdout.flush()?;
    drop(stdout);

    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("cannot install the SIGTERM handler")?;
    tokio::select! {
        result = tokio::signal::ctrl_c() => result.context("cannot wait for Ctrl-C")?,
        _ = terminate.recv() => {}
    }
    server.shutdown();
    Ok(())
}
