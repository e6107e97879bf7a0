//! `ahelper swarm …`: run, ls, status, logs, resume, clean.

use crate::cli::{OutputFormat, SwarmArgs, SwarmCommand, SwarmRunArgs};
use crate::status_table;
use crate::swarm_ui::{self, ChannelPrompter, EventOutput, PromptJob};
use ahelper_agents::config::{Config, EnvSnapshot};
use ahelper_agents::permissions::{DenyPrompter, Prompter};
use ahelper_agents::session::model_client;
use ahelper_agents::swarm::events::SwarmEvent;
use ahelper_agents::swarm::state::{RunRecord, RunStatus, WorkerStatus};
use ahelper_agents::swarm::{self, RunIo, RunOptions};
use ahelper_agents::transcript::TranscriptEntry;
use ahelper_worktrees as git;
use std::io::{BufRead, IsTerminal, Write};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

const EXIT_USAGE: i32 = 2;

/// Dispatches `ahelper swarm`.
/// `mode_given`: whether `--permission-mode` (or `AHELPER_PERMISSION_MODE`) was given; when it
/// was not, `swarm resume` keeps the mode the run was started with.
pub fn run(
    rt: &tokio::runtime::Runtime,
    args: SwarmArgs,
    config: Config,
    env: &EnvSnapshot,
    mode_given: bool,
) -> i32 {
    match args.command {
        Some(SwarmCommand::Ls) => ls(&config),
        Some(SwarmCommand::Status { run }) => status(&config, &run),
        Some(SwarmCommand::Logs {
            run,
            worker,
            follow,
            json,
        }) => rt.block_on(logs(&config, &run, worker.as_deref(), follow, json)),
        Some(SwarmCommand::Clean { run, all, force }) => {
            clean(&config, env, run.as_deref(), all, force)
        }
        Some(SwarmCommand::Resume {
            run,
            max_workers,
            output_format,
        }) => {
            let run_args = SwarmRunArgs {
                max_workers,
                output_format,
                ..Default::default()
            };
            rt.block_on(resume(&config, &run, &run_args, mode_given))
        }
        None => match args.task {
            Some(task) if !task.trim().is_empty() => rt.block_on(start(&config, &task, &args.run)),
            _ => {
                eprintln!(
                    "ahelper: give the task to do: ahelper swarm \"<task>\" (or a subcommand: ls, status, logs, resume, clean)"
                );
                EXIT_USAGE
            }
        },
    }
}

fn repo_root(config: &Config) -> Result<std::path::PathBuf, i32> {
    match git::RepoInfo::discover(&config.workspace_root) {
        Ok(info) => Ok(info.workdir),
        Err(e) => {
            eprintln!("ahelper: {e}");
            Err(EXIT_USAGE)
        }
    }
}

fn output_mode(format: OutputFormat) -> EventOutput {
    match format {
        OutputFormat::StreamJson | OutputFormat::Json => EventOutput::Json,
        OutputFormat::Text if std::io::stdout().is_terminal() && std::io::stdin().is_terminal() => {
            EventOutput::Live
        }
        OutputFormat::Text => EventOutput::Lines,
    }
}

fn with_max_workers(config: &Config, run_args: &SwarmRunArgs) -> Config {
    let mut config = config.clone();
    if let Some(n) = run_args.max_workers {
        config.swarm.max_workers = n.max(1);
    }
    config
}

async fn start(config: &Config, task: &str, run_args: &SwarmRunArgs) -> i32 {
    let config = with_max_workers(config, run_args);
    let provider = match config.provider() {
        Ok(p) => p.clone(),
        Err(e) => {
            eprintln!("ahelper: {e}");
            return EXIT_USAGE;
        }
    };
    let options = RunOptions {
        base: run_args.base.clone(),
        include_uncommitted: run_args.include_uncommitted,
        max_workers: run_args.max_workers,
    };
    let mut prepared = match swarm::prepare_run(&config, task, &options) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("ahelper: {e}");
            return EXIT_USAGE;
        }
    };
    let mode = output_mode(run_args.output_format);
    let say = |line: String| {
        if mode == EventOutput::Json {
            let event = SwarmEvent::Notice { message: line };
            println!("{}", serde_json::to_string(&event).unwrap_or_default());
        } else {
            eprintln!("{line}");
        }
    };
    say(format!(
        "ahelper swarm run {} — base {} ({}), integration branch {}",
        prepared.record.run_id,
        &prepared.record.base_commit[..12],
        prepared.record.base_ref,
        prepared.record.integration_branch
    ));
    if !prepared.dirty.is_empty() && !run_args.include_uncommitted {
        let shown: Vec<&str> = prepared.dirty.iter().take(5).map(String::as_str).collect();
        say(format!(
            "note: your checkout has uncommitted changes ({}{}); the workers start from the base commit WITHOUT them \
             (use --include-uncommitted to snapshot them into the base). Your files are not touched.",
            shown.join(", "),
            if prepared.dirty.len() > 5 {
                ", …"
            } else {
                ""
            }
        ));
    }
    let client = model_client(&provider);
    let interactive_terminal = mode == EventOutput::Live;
    if !interactive_terminal
        && config.permissions.mode == ahelper_agents::permissions::PermissionMode::Default
        && config.permissions.rules.allow.is_empty()
    {
        say("warning: no terminal to answer permission prompts and the permission mode is `default`: \
             every edit or command a worker tries will be refused. Use --permission-mode accept-edits \
             (and allow rules such as `run_command(cargo test:*)` in .ahelper/config.toml)."
            .into());
    }
    let cancel = CancellationToken::new();
    let (event_tx, event_rx) = tokio::sync::mpsc::unbounded_channel::<SwarmEvent>();
    let planning_printer = tokio::spawn(swarm_ui::print_events(
        event_rx,
        if mode == EventOutput::Json {
            EventOutput::Json
        } else {
            EventOutput::Lines
        },
    ));
    let planning_io = RunIo {
        events: event_tx,
        prompter: Arc::new(DenyPrompter),
        cancel: cancel.clone(),
    };
    let ctrl_c = tokio::spawn({
        let cancel = cancel.clone();
        async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                cancel.cancel();
            }
        }
    });
    say("planning…".into());
    let plan = swarm::plan(
        &mut prepared,
        &config,
        client.clone(),
        &provider.model,
        &planning_io,
    )
    .await;
    drop(planning_io);
    let _ = planning_printer.await;
    ctrl_c.abort();
    let plan = match plan {
        Ok(p) => p,
        Err(e) => {
            eprintln!("ahelper: {e}");
            eprintln!(
                "The coordinator's conversation is in {}",
                prepared.record.coordinator_transcript().display()
            );
            return 1;
        }
    };
    if mode != EventOutput::Json {
        print_plan(&plan);
    }
    if run_args.plan_only {
        eprintln!(
            "Plan only: nothing was started. The plan is saved in run {}.",
            prepared.record.run_id
        );
        return 0;
    }
    if !run_args.yes {
        if !interactive_terminal {
            eprintln!(
                "ahelper: not starting workers without confirmation; pass --yes to start them (run {} keeps the plan)",
                prepared.record.run_id
            );
            return EXIT_USAGE;
        }
        eprint!(
            "Start {} workers ({} at once)? [y/N] ",
            plan.subtasks.len(),
            config.swarm.max_workers.min(plan.subtasks.len())
        );
        let _ = std::io::stderr().flush();
        let mut answer = String::new();
        let _ = std::io::stdin().lock().read_line(&mut answer);
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            eprintln!(
                "Not started. The plan is saved in run {}.",
                prepared.record.run_id
            );
            return 0;
        }
    }
    let run_id = prepared.record.run_id.clone();
    let code = execute_run(prepared.record, &config, client, &provider.model, mode).await;
    if code == 0 && run_args.apply {
        return apply(&config, &run_id);
    }
    code
}

fn print_plan(plan: &ahelper_agents::swarm::plan::Plan) {
    eprintln!("\nPlan: {}", plan.summary);
    for (i, s) in plan.subtasks.iter().enumerate() {
        let deps = if s.depends_on.is_empty() {
            String::new()
        } else {
            format!(" (after {})", s.depends_on.join(", "))
        };
        eprintln!(
            "  w{} [{}] {}{deps}\n      scope: {}",
            i + 1,
            s.id,
            s.title,
            s.scope.join(", ")
        );
    }
    eprintln!();
}

async fn execute_run(
    record: RunRecord,
    config: &Config,
    client: Arc<dyn ahelper_agents::model::ModelClient>,
    model: &str,
    mode: EventOutput,
) -> i32 {
    let cancel = CancellationToken::new();
    let (event_tx, event_rx) = tokio::sync::mpsc::unbounded_channel::<SwarmEvent>();
    let (prompt_tx, prompt_rx) = tokio::sync::mpsc::unbounded_channel::<PromptJob>();
    let prompter: Arc<dyn Prompter> = if mode == EventOutput::Live {
        Arc::new(ChannelPrompter { tx: prompt_tx })
    } else {
        Arc::new(DenyPrompter)
    };
    let (snap_tx, snap_rx) = tokio::sync::watch::channel(record.clone());
    let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
    let ui = match mode {
        EventOutput::Live => tokio::spawn(swarm_ui::run_live(
            snap_rx,
            event_rx,
            prompt_rx,
            cancel.clone(),
            done_rx,
        )),
        other => {
            drop(done_rx);
            tokio::spawn(swarm_ui::print_events(event_rx, other))
        }
    };
    // Ctrl-C outside raw mode (line and JSON output): first cancels, second kills and exits.
    let signal_watch = tokio::spawn({
        let cancel = cancel.clone();
        let run_id = record.run_id.clone();
        async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!(
                    "ahelper: cancelling run {run_id}; workers commit their work as wip. Ctrl-C again to kill everything."
                );
                cancel.cancel();
                if tokio::signal::ctrl_c().await.is_ok() {
                    swarm_ui::kill_descendants();
                    eprintln!("ahelper: killed; resume with `ahelper swarm resume {run_id}`");
                    std::process::exit(130);
                }
            }
        }
    });
    let io = RunIo {
        events: event_tx,
        prompter,
        cancel: cancel.clone(),
    };
    let started = std::time::Instant::now();
    let result = swarm::execute(record, config, client, model, io, snap_tx).await;
    let _ = done_tx.send(());
    let _ = ui.await;
    signal_watch.abort();
    match result {
        Ok(final_record) => {
            if mode == EventOutput::Json {
                return exit_code(&final_record);
            }
            if mode == EventOutput::Lines {
                // the live view already shows the final table
                println!(
                    "{}",
                    status_table::render_text(&final_record, started.elapsed().as_millis() as u64)
                );
            }
            if let Some(summary) = &final_record.summary {
                println!("{summary}");
            }
            exit_code(&final_record)
        }
        Err(e) => {
            eprintln!("ahelper: {e}");
            1
        }
    }
}

fn exit_code(record: &RunRecord) -> i32 {
    match record.status {
        RunStatus::Cancelled => 130,
        RunStatus::Finished
            if record.workers.iter().any(|w| !w.denied.is_empty())
                && !record
                    .workers
                    .iter()
                    .any(|w| w.status == WorkerStatus::Merged) =>
        {
            1
        }
        RunStatus::Finished
            if record
                .workers
                .iter()
                .all(|w| matches!(w.status, WorkerStatus::Merged | WorkerStatus::NoChanges)) =>
        {
            0
        }
        _ => 1,
    }
}

fn apply(config: &Config, run_id: &str) -> i32 {
    let Ok(root) = repo_root(config) else {
        return EXIT_USAGE;
    };
    let Ok(run) = RunRecord::find(&root, run_id) else {
        return 1;
    };
    match git::apply_to_current(
        &root,
        &run.integration_branch,
        &format!("Merge ahelper run {}", run.run_id),
        None,
    ) {
        Ok(outcome) => {
            let what = match outcome {
                git::ApplyOutcome::UpToDate { .. } => "already up to date".to_string(),
                git::ApplyOutcome::FastForward { commit } => {
                    format!("fast-forwarded to {}", &commit.to_string()[..12])
                }
                git::ApplyOutcome::Merged { commit } => {
                    format!("merge commit {}", &commit.to_string()[..12])
                }
            };
            println!(
                "Applied {} to your current branch: {what}.",
                run.integration_branch
            );
            0
        }
        Err(e) => {
            eprintln!(
                "ahelper: not applied: {e}\nThe integration branch {} is intact; merge it yourself with `git merge {}`.",
                run.integration_branch, run.integration_branch
            );
            1
        }
    }
}

async fn resume(config: &Config, run: &str, run_args: &SwarmRunArgs, mode_given: bool) -> i32 {
    let mut config = with_max_workers(config, run_args);
    let Ok(root) = repo_root(&config) else {
        return EXIT_USAGE;
    };
    let record = match RunRecord::find(&root, run) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("ahelper: {e}");
            return EXIT_USAGE;
        }
    };
    if record.is_active() {
        eprintln!(
            "ahelper: run {} is still running (pid {}); it cannot be resumed twice",
            record.run_id, record.pid
        );
        return EXIT_USAGE;
    }
    if record.plan.is_none() {
        eprintln!(
            "ahelper: run {} has no plan (it failed while planning); start a new run",
            record.run_id
        );
        return EXIT_USAGE;
    }
    if let Some(mode) = record.permission_mode
        && !mode_given
        && mode != config.permissions.mode
    {
        eprintln!(
            "Using the run's permission mode `{mode:?}` (give --permission-mode to change it)."
        );
        config.permissions.mode = mode;
    }
    let unfinished = record
        .workers
        .iter()
        .filter(|w| !w.status.is_terminal())
        .count();
    if unfinished == 0 {
        eprintln!("Run {} has nothing left to do.", record.run_id);
        println!("{}", swarm::final_summary(&record));
        return 0;
    }
    let provider = match config.provider() {
        Ok(p) => p.clone(),
        Err(e) => {
            eprintln!("ahelper: {e}");
            return EXIT_USAGE;
        }
    };
    eprintln!(
        "Resuming run {}: {unfinished} unfinished workers.",
        record.run_id
    );
    let client = model_client(&provider);
    execute_run(
        record,
        &config,
        client,
        &provider.model,
        output_mode(run_args.output_format),
    )
    .await
}

fn ls(config: &Config) -> i32 {
    let Ok(root) = repo_root(config) else {
        return EXIT_USAGE;
    };
    let runs = RunRecord::list(&root);
    if runs.is_empty() {
        println!("No swarm runs in {}.", root.display());
        return 0;
    }
    println!(
        "{:<38} {:<10} {:<20} {:<13} {:<8} integration branch",
        "run", "state", "created", "base", "merged"
    );
    for r in runs {
        let merged = r
            .workers
            .iter()
            .filter(|w| w.status == WorkerStatus::Merged)
            .count();
        let state =
            if matches!(r.status, RunStatus::Running | RunStatus::Planning) && !r.is_active() {
                "stopped".to_string()
            } else {
                r.status.as_str().to_string()
            };
        println!(
            "{:<38} {:<10} {:<20} {:<13} {:<8} {}",
            r.run_id,
            state,
            r.created_at.get(..19).unwrap_or(&r.created_at),
            &r.base_commit[..r.base_commit.len().min(12)],
            format!("{merged}/{}", r.workers.len()),
            r.integration_branch
        );
    }
    0
}

fn status(config: &Config, run: &str) -> i32 {
    let Ok(root) = repo_root(config) else {
        return EXIT_USAGE;
    };
    match RunRecord::find(&root, run) {
        Ok(r) => {
            println!("Task: {}", r.task);
            let elapsed = match (
                chrono::DateTime::parse_from_rfc3339(&r.created_at),
                chrono::DateTime::parse_from_rfc3339(&r.updated_at),
            ) {
                (Ok(a), Ok(b)) => (b - a).num_milliseconds().max(0) as u64,
                _ => 0,
            };
            print!("{}", status_table::render_text(&r, elapsed));
            if let Some(s) = &r.summary {
                println!("\n{s}");
            }
            0
        }
        Err(e) => {
            eprintln!("ahelper: {e}");
            EXIT_USAGE
        }
    }
}

/// One transcript line as readable text.
pub fn format_transcript_line(entry: &TranscriptEntry, ts: &str) -> Option<String> {
    let time = ts.get(11..19).unwrap_or(ts);
    let clip = |s: &str, n: usize| -> String {
        let count = s.chars().count();
        if count <= n {
            s.to_string()
        } else {
            format!(
                "{}… [{} more characters]",
                s.chars().take(n).collect::<String>(),
                count - n
            )
        }
    };
    Some(match entry {
        TranscriptEntry::SessionStart {
            session_id,
            workspace,
            model,
        } => {
            format!("{time} ── session {session_id} · {model} · {workspace}")
        }
        TranscriptEntry::UserMessage { message } => {
            format!("{time} user: {}", clip(&message.text(), 2_000))
        }
        TranscriptEntry::AssistantMessage { message } => {
            let text = message.text();
            if text.trim().is_empty() {
                return None;
            }
            format!("{time} assistant: {}", clip(&text, 4_000))
        }
        TranscriptEntry::ToolCall { name, input, .. } => {
            format!("{time} → {name} {}", clip(&input.to_string(), 1_000))
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
            clip(content, 500)
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
        } => {
            format!("{time}   retry {attempt}/{max_attempts} in {delay_ms} ms: {reason}")
        }
        TranscriptEntry::Permission {
            decision, reason, ..
        } => format!("{time}   permission {decision}: {reason}"),
        TranscriptEntry::Error { message } => format!("{time} ERROR: {message}"),
        TranscriptEntry::Stop { reason, turns } => {
            format!("{time} ── stopped: {reason} after {turns} turns")
        }
    })
}

async fn logs(config: &Config, run: &str, worker: Option<&str>, follow: bool, json: bool) -> i32 {
    let Ok(root) = repo_root(config) else {
        return EXIT_USAGE;
    };
    let record = match RunRecord::find(&root, run) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("ahelper: {e}");
            return EXIT_USAGE;
        }
    };
    let path = match worker {
        None | Some("coordinator") => record.coordinator_transcript(),
        Some(w) => {
            if record.worker(w).is_none() {
                let ids: Vec<&str> = record.workers.iter().map(|w| w.id.as_str()).collect();
                eprintln!(
                    "ahelper: run {} has no worker `{w}`; workers: {}",
                    record.run_id,
                    ids.join(", ")
                );
                return EXIT_USAGE;
            }
            record.worker_transcript(w)
        }
    };
    let mut printed = 0usize;
    loop {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        // a last line without its newline may still be being written
        let complete = if text.ends_with('\n') {
            lines.len()
        } else {
            lines.len().saturating_sub(1)
        };
        for line in &lines[printed.min(complete)..complete] {
            if json {
                println!("{line}");
            } else if let Ok(parsed) =
                serde_json::from_str::<ahelper_agents::transcript::TranscriptLine>(line)
                && let Some(s) = format_transcript_line(&parsed.entry, &parsed.ts)
            {
                println!("{s}");
            }
        }
        printed = complete;
        let _ = std::io::stdout().flush();
        if !follow {
            break;
        }
        let active = RunRecord::find(&root, &record.run_id)
            .map(|r| r.is_active())
            .unwrap_or(false);
        if !active && printed == complete {
            // one last read after the run ended
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            if text.lines().count() <= printed {
                break;
            }
            continue;
        }
        tokio::select! {
            _ = tokio::time::sleep(std::time::Duration::from_millis(250)) => {}
            _ = tokio::signal::ctrl_c() => break,
        }
    }
    if printed == 0 && !path.exists() {
        eprintln!("(no transcript yet at {})", path.display());
    }
    0
}

fn clean(config: &Config, env: &EnvSnapshot, run: Option<&str>, all: bool, force: bool) -> i32 {
    let Ok(root) = repo_root(config) else {
        return EXIT_USAGE;
    };
    let runs: Vec<RunRecord> = match (run, all) {
        (Some(r), _) => match RunRecord::find(&root, r) {
            Ok(r) => vec![r],
            Err(e) => {
                eprintln!("ahelper: {e}");
                return EXIT_USAGE;
            }
        },
        (None, true) => RunRecord::list(&root),
        (None, false) => {
            eprintln!("ahelper: say which run to clean (`ahelper swarm clean <run>`), or --all");
            return EXIT_USAGE;
        }
    };
    let lock = match git::RepoLock::new(&root) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("ahelper: {e}");
            return 1;
        }
    };
    let mut refused = 0;
    for r in runs {
        if r.is_active() {
            eprintln!("skip {}: still running (pid {})", r.run_id, r.pid);
            refused += 1;
            continue;
        }
        let base = swarm::run::worktree_base(config, env, &root, &r.run_id);
        println!("run {}:", r.run_id);
        for w in &r.workers {
            if w.worktree.exists() {
                match git::remove_worktree(&lock, &root, &base, &w.worktree, force) {
                    Ok(_) => println!("  removed worktree {}", w.worktree.display()),
                    Err(e) => {
                        println!("  kept worktree {}: {e}", w.worktree.display());
                        refused += 1;
                    }
                }
            }
            if git::branch_tip(&root, &w.branch).is_err() {
                continue;
            }
            match git::unmerged_commits(&root, &w.branch, &r.integration_branch) {
                Ok(commits) if !commits.is_empty() && !force => {
                    println!(
                        "  kept branch {} ({}): {} commit(s) not in {}:",
                        w.branch,
                        w.status.label(),
                        commits.len(),
                        r.integration_branch
                    );
                    for c in commits.iter().take(10) {
                        println!("      {} {}", &c.id.to_string()[..12], c.summary);
                    }
                    println!(
                        "    delete it anyway with: ahelper swarm clean {} --force",
                        r.run_id
                    );
                    refused += 1;
                }
                _ => {
                    match git::delete_branch(&lock, &root, &w.branch, &r.integration_branch, force)
                    {
                        Ok(_) => println!("  deleted branch {}", w.branch),
                        Err(e) => {
                            println!("  kept branch {}: {e}", w.branch);
                            refused += 1;
                        }
                    }
                }
            }
        }
        for w in &r.workers {
            let _ = std::fs::remove_dir_all(base.join(format!(".tmp-{}", w.id)));
        }
        let _ = std::fs::remove_dir(&base);
        match clean_integration_branch(&lock, &root, &r, force) {
            Ok(line) | Err(line) => println!("  {line}"),
        }
        println!("  kept the transcripts (ahelper swarm logs {})", r.run_id);
    }
    if refused > 0 { 1 } else { 0 }
}

/// Deletes a run's integration branch when nothing would be lost: it is still at the base
/// commit, or it is merged into the current branch; otherwise keeps it (deleted anyway with
/// `force`). Returns the line to print.
fn clean_integration_branch(
    lock: &git::RepoLock,
    root: &std::path::Path,
    run: &RunRecord,
    force: bool,
) -> Result<String, String> {
    let branch = &run.integration_branch;
    let Ok(tip) = git::branch_tip(root, branch) else {
        return Ok(format!("no integration branch {branch}"));
    };
    let at_base = tip.to_string() == run.base_commit;
    let current = git::RepoInfo::discover(root)
        .ok()
        .and_then(|i| i.branch().map(str::to_string));
    let merged_into_current = current
        .as_deref()
        .is_some_and(|c| git::unmerged_commits(root, branch, c).is_ok_and(|u| u.is_empty()));
    if at_base || merged_into_current || force {
        let into = current.unwrap_or_else(|| branch.clone());
        git::delete_branch(lock, root, branch, &into, true)
            .map_err(|e| format!("kept {branch}: {e}"))?;
        Ok(format!(
            "deleted the integration branch {branch} ({})",
            if at_base {
                "nothing was merged into it"
            } else if merged_into_current {
                "it is merged into your branch"
            } else {
                "--force"
            }
        ))
    } else {
        Err(format!(
            "kept the integration branch {branch}: it has the run's merged work, not in your branch yet (`git merge {branch}`, or clean with --force)"
        ))
    }
}
