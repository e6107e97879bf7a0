//! `ahelper swarm …`: run, ls, status, logs, resume, clean. Parses what the flags mean for
//! `ahelper_agents::swarm` and renders what it returns; the rules (clean-up, exit status,
//! resume preconditions, transcript formatting) live there.

use crate::cli::{OutputFormat, SwarmArgs, SwarmCommand, SwarmRunArgs};
use crate::status_table;
use crate::swarm_ui::{self, ChannelPrompter, EventOutput, PromptJob};
use ahelper_agents::config::{Config, EnvSnapshot};
use ahelper_agents::model::{ModelClient, ProviderSettings};
use ahelper_agents::permissions::{DenyPrompter, Prompter};
use ahelper_agents::session::model_client;
use ahelper_agents::swarm::cleanup::{self, CleanStep, IntegrationCleanup, IntegrationDeleted};
use ahelper_agents::swarm::events::SwarmEvent;
use ahelper_agents::swarm::logs::{self, TranscriptFollower};
use ahelper_agents::swarm::plan::Plan;
use ahelper_agents::swarm::resume::{self, Resumable};
use ahelper_agents::swarm::state::{RunOutcome, RunRecord, WorkerStatus};
use ahelper_agents::swarm::summary::short_commit;
use ahelper_agents::swarm::{self, PlannedRun, PreparedRun, RunIo, RunOptions};
use ahelper_agents::text::for_terminal;
use ahelper_worktrees as git;
use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
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
        }) => rt.block_on(show_logs(&config, &run, worker.as_deref(), follow, json)),
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

/// The exit status of a finished run: 0 all merged, 130 cancelled, 1 otherwise.
fn exit_code(outcome: RunOutcome) -> i32 {
    match outcome {
        RunOutcome::Succeeded => 0,
        RunOutcome::Cancelled => 130,
        RunOutcome::Failed => 1,
    }
}

fn repo_root(config: &Config) -> Result<PathBuf, i32> {
    git::RepoInfo::discover(&config.workspace_root)
        .map(|info| info.workdir)
        .map_err(|e| usage_error(&e))
}

fn usage_error(e: &dyn std::fmt::Display) -> i32 {
    eprintln!("ahelper: {e}");
    EXIT_USAGE
}

/// The run `run` (id or unique prefix) of the repository, or the exit code after saying why not.
fn find_run(config: &Config, run: &str) -> Result<(PathBuf, RunRecord), i32> {
    let root = repo_root(config)?;
    let record = RunRecord::find(&root, run).map_err(|e| usage_error(&e))?;
    Ok((root, record))
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

fn provider(config: &Config) -> Result<ProviderSettings, i32> {
    config.provider().cloned().map_err(|e| usage_error(&e))
}

/// Notes before the workers start: JSON events with `--output-format stream-json`, else lines
/// on stderr.
fn say(mode: EventOutput, line: String) {
    if mode == EventOutput::Json {
        let event = SwarmEvent::Notice { message: line };
        println!("{}", serde_json::to_string(&event).unwrap_or_default());
    } else {
        eprintln!("{}", for_terminal(&line));
    }
}

/// `ahelper swarm "<task>"`: prepare → plan → confirm → execute → apply.
async fn start(config: &Config, task: &str, run_args: &SwarmRunArgs) -> i32 {
    let config = with_max_workers(config, run_args);
    let provider = match provider(&config) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let options = RunOptions {
        base: run_args.base.clone(),
        include_uncommitted: run_args.include_uncommitted,
        max_workers: run_args.max_workers,
    };
    stop_leftovers_of_inactive_runs(&config);
    let mut prepared = match swarm::prepare_run(&config, task, &options) {
        Ok(p) => p,
        Err(e) => return usage_error(&e),
    };
    let mode = output_mode(run_args.output_format);
    announce(&prepared, &options, &config, mode);
    let client = model_client(&provider);
    let planned = match plan(
        &mut prepared,
        &config,
        client.clone(),
        &provider.model,
        mode,
    )
    .await
    {
        Ok(planned) => planned,
        Err(e) => {
            eprintln!("ahelper: {e}");
            eprintln!(
                "The coordinator's conversation is in {}",
                prepared.record.coordinator_transcript().display()
            );
            return 1;
        }
    };
    if let Some(code) = confirm(&planned, &config, run_args, mode) {
        return code;
    }
    let run_id = planned.record().run_id.clone();
    let code = execute_run(planned, &config, client, &provider.model, mode).await;
    if code == 0 && run_args.apply {
        return apply(&config, &run_id, run_args.allow_hazards);
    }
    code
}

fn announce(prepared: &PreparedRun, options: &RunOptions, config: &Config, mode: EventOutput) {
    let record = &prepared.record;
    say(
        mode,
        format!(
            "ahelper swarm run {} — base {} ({}), integration branch {}",
            record.run_id,
            short_commit(&record.base_commit),
            record.base_ref,
            record.integration_branch
        ),
    );
    for notice in prepared.notices(options, config, mode == EventOutput::Live) {
        say(mode, notice);
    }
}

/// The planning phase, its events printed as lines (or JSON); Ctrl-C cancels it.
async fn plan(
    prepared: &mut PreparedRun,
    config: &Config,
    client: Arc<dyn ModelClient>,
    model: &str,
    mode: EventOutput,
) -> Result<PlannedRun, swarm::SwarmError> {
    let cancel = CancellationToken::new();
    let (event_tx, event_rx) = tokio::sync::mpsc::unbounded_channel::<SwarmEvent>();
    let printer_mode = if mode == EventOutput::Json {
        EventOutput::Json
    } else {
        EventOutput::Lines
    };
    let printer = tokio::spawn(swarm_ui::print_events(event_rx, printer_mode));
    let io = RunIo {
        events: event_tx,
        prompter: Arc::new(DenyPrompter),
        cancel: cancel.clone(),
    };
    let ctrl_c = tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            cancel.cancel();
        }
    });
    say(mode, "planning…".into());
    let planned = swarm::plan_run(prepared, config, client, model, &io).await;
    drop(io);
    let _ = printer.await;
    ctrl_c.abort();
    planned
}

/// Shows the plan and asks whether to start (unless `--yes`). `Some(exit code)` when the run
/// stops here.
fn confirm(
    planned: &PlannedRun,
    config: &Config,
    run_args: &SwarmRunArgs,
    mode: EventOutput,
) -> Option<i32> {
    let plan = planned.plan();
    let run_id = &planned.record().run_id;
    if mode != EventOutput::Json {
        print_plan(plan);
    }
    if run_args.plan_only {
        eprintln!("Plan only: nothing was started. The plan is saved in run {run_id}.");
        return Some(0);
    }
    if run_args.yes {
        return None;
    }
    if mode != EventOutput::Live {
        eprintln!(
            "ahelper: not starting workers without confirmation; pass --yes to start them (run {run_id} keeps the plan)"
        );
        return Some(EXIT_USAGE);
    }
    eprint!(
        "Start {} workers ({} at once)? [y/N] ",
        plan.subtasks.len(),
        config.swarm.max_workers.min(plan.subtasks.len())
    );
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    let _ = std::io::stdin().lock().read_line(&mut answer);
    if matches!(answer.trim(), "y" | "Y" | "yes") {
        return None;
    }
    eprintln!("Not started. The plan is saved in run {run_id}.");
    Some(0)
}

fn print_plan(plan: &Plan) {
    eprintln!("\nPlan: {}", for_terminal(&plan.summary));
    for (i, s) in plan.subtasks.iter().enumerate() {
        let deps = if s.depends_on.is_empty() {
            String::new()
        } else {
            format!(" (after {})", s.depends_on.join(", "))
        };
        eprintln!(
            "  w{} [{}] {}{deps}\n      scope: {}",
            i + 1,
            for_terminal(&s.id),
            for_terminal(&s.title),
            for_terminal(&s.scope.join(", "))
        );
    }
    eprintln!();
}

/// Runs the workers with the live table (or lines, or JSON) and prints the final table and
/// summary. Ctrl-C outside raw mode: the first cancels, the second kills and exits.
async fn execute_run(
    run: PlannedRun,
    config: &Config,
    client: Arc<dyn ModelClient>,
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
    let (snap_tx, snap_rx) = tokio::sync::watch::channel(run.record().clone());
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
    let signal_watch = tokio::spawn(swarm_ui::watch_ctrl_c(
        cancel.clone(),
        run.record().run_id.clone(),
    ));
    let io = RunIo {
        events: event_tx,
        prompter,
        cancel,
    };
    let started = std::time::Instant::now();
    let result = swarm::execute(run, config, client, model, io, snap_tx).await;
    let _ = done_tx.send(());
    let _ = ui.await;
    signal_watch.abort();
    let record = match result {
        Ok(record) => record,
        Err(e) => {
            eprintln!("ahelper: {e}");
            return 1;
        }
    };
    if mode == EventOutput::Lines {
        // the live view already shows the final table
        let elapsed = started.elapsed().as_millis() as u64;
        println!(
            "{}",
            for_terminal(&status_table::render_text(&record, elapsed))
        );
    }
    if mode != EventOutput::Json
        && let Some(summary) = &record.summary
    {
        println!("{}", for_terminal(summary));
    }
    exit_code(record.outcome())
}

/// `--apply`: merges the integration branch into the user's current branch — after a yes on a
/// terminal, or with `--allow-hazards`, when merged workers added hazardous content.
fn apply(config: &Config, run_id: &str, allow_hazards: bool) -> i32 {
    let Ok(root) = repo_root(config) else {
        return EXIT_USAGE;
    };
    let Ok(run) = RunRecord::find(&root, run_id) else {
        return 1;
    };
    let branch = &run.integration_branch;
    if !allow_hazards && !hazards_confirmed(&run) {
        eprintln!(
            "ahelper: not applied: workers added hazardous content (listed in the summary). \
             Review it with `git diff {base}...{branch}`, then merge with `git merge {branch}` \
             or re-run with --apply --allow-hazards.",
            base = short_commit(&run.base_commit)
        );
        return 1;
    }
    let message = format!("Merge ahelper run {}", run.run_id);
    match git::apply_to_current(&root, branch, &message, None) {
        Ok(outcome) => {
            let what = match outcome {
                git::ApplyOutcome::UpToDate { .. } => "already up to date".to_string(),
                git::ApplyOutcome::FastForward { commit } => {
                    format!("fast-forwarded to {}", short_commit(&commit.to_string()))
                }
                git::ApplyOutcome::Merged { commit } => {
                    format!("merge commit {}", short_commit(&commit.to_string()))
                }
            };
            println!("Applied {branch} to your current branch: {what}.");
            0
        }
        Err(e) => {
            eprintln!(
                "ahelper: not applied: {e}\nThe integration branch {branch} is intact; merge it yourself with `git merge {branch}`."
            );
            1
        }
    }
}

/// True when the merged workers added no hazards, or the user said yes on a terminal after
/// seeing them.
fn hazards_confirmed(run: &RunRecord) -> bool {
    let hazards = ahelper_agents::swarm::summary::merged_hazards(run);
    if hazards.is_empty() {
        return true;
    }
    if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
        return false;
    }
    eprintln!("ahelper: the integration branch brings hazardous content:");
    for (worker, hazard) in &hazards {
        eprintln!("  {worker}: {hazard}");
    }
    eprint!("Merge it into your current branch anyway? [y/N] ");
    let mut line = String::new();
    if std::io::stdin().read_line(&mut line).is_err() {
        return false;
    }
    matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

/// Kills processes that runs of this repository which are no longer active left running
/// (an ahelper killed with `SIGKILL` whose watchdog could not run), and says so.
fn stop_leftovers_of_inactive_runs(config: &Config) {
    let Ok(root) = git::RepoInfo::discover(&config.workspace_root).map(|info| info.workdir) else {
        return;
    };
    let runs: Vec<RunRecord> = RunRecord::list(&root)
        .into_iter()
        .filter(|r| !r.is_active())
        .collect();
    report_leftovers(swarm::process::kill_run_leftovers(
        runs.iter().map(|r| r.run_id.as_str()),
    ));
}

fn report_leftovers(killed: usize) {
    if killed > 0 {
        eprintln!("Stopped {killed} process(es) left running by an earlier, interrupted run.");
    }
}

/// `swarm resume <run>`.
async fn resume(config: &Config, run: &str, run_args: &SwarmRunArgs, mode_given: bool) -> i32 {
    let mut config = with_max_workers(config, run_args);
    let record = match find_run(&config, run) {
        Ok((_, record)) => record,
        Err(code) => return code,
    };
    let resumable = match resume::check_resumable(record) {
        Ok(r) => r,
        Err(e) => return usage_error(&e),
    };
    let record = match &resumable {
        Resumable::Unfinished { run, .. } => run.record(),
        Resumable::NothingLeft(record) => record,
    };
    // Not active (checked above): whatever still runs under its marker is a leftover.
    report_leftovers(swarm::process::kill_run_leftovers([record.run_id.as_str()]));
    if let Some(mode) = resume::resume_permission_mode(record, config.permissions.mode, mode_given)
    {
        eprintln!(
            "Using the run's permission mode `{mode:?}` (give --permission-mode to change it)."
        );
        config.permissions.mode = mode;
    }
    let (run, unfinished) = match resumable {
        Resumable::NothingLeft(record) => {
            eprintln!("Run {} has nothing left to do.", record.run_id);
            println!("{}", for_terminal(&swarm::final_summary(&record)));
            return 0;
        }
        Resumable::Unfinished { run, unfinished } => (run, unfinished),
    };
    let provider = match provider(&config) {
        Ok(p) => p,
        Err(code) => return code,
    };
    eprintln!(
        "Resuming run {}: {unfinished} unfinished workers.",
        run.record().run_id
    );
    let client = model_client(&provider);
    let mode = output_mode(run_args.output_format);
    execute_run(run, &config, client, &provider.model, mode).await
}

/// `swarm ls`.
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
        println!(
            "{:<38} {:<10} {:<20} {:<13} {:<8} {}",
            r.run_id,
            r.state_label(),
            r.created_at.get(..19).unwrap_or(&r.created_at),
            short_commit(&r.base_commit),
            format!("{merged}/{}", r.workers.len()),
            r.integration_branch
        );
    }
    0
}

/// `swarm status <run>`.
fn status(config: &Config, run: &str) -> i32 {
    let r = match find_run(config, run) {
        Ok((_, record)) => record,
        Err(code) => return code,
    };
    println!("Task: {}", for_terminal(&r.task));
    let elapsed = match (
        chrono::DateTime::parse_from_rfc3339(&r.created_at),
        chrono::DateTime::parse_from_rfc3339(&r.updated_at),
    ) {
        (Ok(a), Ok(b)) => (b - a).num_milliseconds().max(0) as u64,
        _ => 0,
    };
    print!("{}", for_terminal(&status_table::render_text(&r, elapsed)));
    if let Some(s) = &r.summary {
        println!("\n{}", for_terminal(s));
    }
    0
}

/// `swarm logs <run> [worker] [--follow] [--json]`.
async fn show_logs(
    config: &Config,
    run: &str,
    worker: Option<&str>,
    follow: bool,
    json: bool,
) -> i32 {
    let (root, record) = match find_run(config, run) {
        Ok(found) => found,
        Err(code) => return code,
    };
    let path = match logs::transcript_path(&record, worker) {
        Ok(p) => p,
        Err(e) => return usage_error(&e),
    };
    let mut follower = TranscriptFollower::new(path);
    loop {
        for line in follower.read_new() {
            if json {
                println!("{line}");
            } else if let Some(text) = logs::format_raw_line(&line) {
                println!("{}", for_terminal(&text));
            }
        }
        let _ = std::io::stdout().flush();
        if !follow || (!run_is_active(&root, &record.run_id) && !follower.has_unread()) {
            break;
        }
        tokio::select! {
            _ = tokio::time::sleep(std::time::Duration::from_millis(250)) => {}
            _ = tokio::signal::ctrl_c() => break,
        }
    }
    if follower.seen() == 0 && !follower.path().exists() {
        eprintln!("(no transcript yet at {})", follower.path().display());
    }
    0
}

fn run_is_active(root: &Path, run_id: &str) -> bool {
    RunRecord::find(root, run_id).is_ok_and(|r| r.is_active())
}

/// `swarm clean [<run>|--all] [--force]`.
fn clean(config: &Config, env: &EnvSnapshot, run: Option<&str>, all: bool, force: bool) -> i32 {
    let Ok(root) = repo_root(config) else {
        return EXIT_USAGE;
    };
    let runs: Vec<RunRecord> = match (run, all) {
        (Some(r), _) => match RunRecord::find(&root, r) {
            Ok(r) => vec![r],
            Err(e) => return usage_error(&e),
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
        let base = swarm::run::worktree_base(config, env, &root, &r.run_id);
        match cleanup::clean_run(&lock, &root, &r, &base, force) {
            Ok(cleaned) => {
                println!("run {}:", r.run_id);
                for step in &cleaned.steps {
                    print_clean_step(step, &r);
                }
                println!("  {}", integration_line(&cleaned.integration, &r));
                println!("  kept the transcripts (ahelper swarm logs {})", r.run_id);
                refused += cleaned.refusals();
            }
            Err(e) => {
                eprintln!("skip {}: {e}", r.run_id);
                refused += 1;
            }
        }
    }
    if refused > 0 { 1 } else { 0 }
}

fn print_clean_step(step: &CleanStep, run: &RunRecord) {
    match step {
        CleanStep::WorktreeRemoved { path } => println!("  removed worktree {}", path.display()),
        CleanStep::WorktreeKept { path, error } => {
            println!("  kept worktree {}: {error}", path.display())
        }
        CleanStep::BranchDeleted { branch } => println!("  deleted branch {branch}"),
        CleanStep::BranchKept { branch, error } => println!("  kept branch {branch}: {error}"),
        CleanStep::BranchUnmerged {
            branch,
            status,
            commits,
        } => {
            println!(
                "  kept branch {branch} ({}): {} commit(s) not in {}:",
                status.label(),
                commits.len(),
                run.integration_branch
            );
            for c in commits.iter().take(10) {
                println!(
                    "      {} {}",
                    short_commit(&c.id.to_string()),
                    for_terminal(&c.summary)
                );
            }
            println!(
                "    delete it anyway with: ahelper swarm clean {} --force",
                run.run_id
            );
        }
    }
}

fn integration_line(cleanup: &IntegrationCleanup, run: &RunRecord) -> String {
    let branch = &run.integration_branch;
    match cleanup {
        IntegrationCleanup::Missing => format!("no integration branch {branch}"),
        IntegrationCleanup::Deleted(why) => format!(
            "deleted the integration branch {branch} ({})",
            match why {
                IntegrationDeleted::NothingMerged => "nothing was merged into it",
                IntegrationDeleted::MergedIntoCurrent => "it is merged into your branch",
                IntegrationDeleted::Forced => "--force",
            }
        ),
        IntegrationCleanup::Kept => format!(
            "kept the integration branch {branch}: it has the run's merged work, not in your branch yet (`git merge {branch}`, or clean with --force)"
        ),
        IntegrationCleanup::Failed(e) => format!("kept {branch}: {e}"),
    }
}
