//! `ahelper swarm …`: run, ls, status, logs, resume, clean. Parses what the flags mean for
//! `ahelper_agents::swarm` and renders what it returns; the rules (clean-up, exit status,
//! resume preconditions, transcript formatting) live there.

use crate::cli::{ShardGrouping, SwarmArgs, SwarmCommand, SwarmOutputFormat, SwarmRunArgs};
use crate::status_table;
use crate::swarm_ui::{self, ChannelPrompter, EventOutput, PromptJob};
use ahelper_agents::config::{Config, EnvSnapshot};
use ahelper_agents::mcp::McpServerSpec;
use ahelper_agents::model::{ModelClient, ProviderSettings};
use ahelper_agents::permissions::{DenyPrompter, Prompter};
use ahelper_agents::session::model_client;
use ahelper_agents::swarm::cleanup::{self, CleanStep, IntegrationCleanup, IntegrationDeleted};
use ahelper_agents::swarm::events::SwarmEvent;
use ahelper_agents::swarm::logs::{self, TranscriptFollower};
use ahelper_agents::swarm::plan::Plan;
use ahelper_agents::swarm::remote::{NatsOptions, NatsSlots};
use ahelper_agents::swarm::resume::{self, Resumable, ResumeSelection};
use ahelper_agents::swarm::run_claim::RunClaim;
use ahelper_agents::swarm::sharding::ShardBy;
use ahelper_agents::swarm::slots::WorkerSlots;
use ahelper_agents::swarm::state::{RemoteRecord, RunOutcome, RunRecord, RunStatus, WorkerStatus};
use ahelper_agents::swarm::summary::short_commit;
use ahelper_agents::swarm::verification::{BaselineHandle, RunVerifier};
use ahelper_agents::swarm::{self, PlannedRun, PreparedRun, RunIo, RunOptions, UserStop};
use ahelper_agents::text::for_terminal;
use ahelper_agents::verify::{CommandSource, VerifyChoice, VerifyFlag, choose_command};
use ahelper_worktrees as git;
use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const EXIT_USAGE: i32 = 2;

/// Which workers `swarm resume` continues: `--only-failed`, the `--worker` ids given, or all.
fn resume_selection(only_failed: bool, workers: Vec<String>) -> ResumeSelection {
    match (only_failed, workers.is_empty()) {
        (true, _) => ResumeSelection::OnlyFailed,
        (false, false) => ResumeSelection::Workers(workers),
        (false, true) => ResumeSelection::All,
    }
}

/// Dispatches `ahelper swarm`.
/// `mode_given`: whether `--permission-mode` (or `AHELPER_PERMISSION_MODE`) was given; when it
/// was not, `swarm resume` keeps the mode the run was started with.
/// `mcp_servers`: the servers each worker starts in its worktree
/// ([`crate::mcp_setup::for_swarm`]).
pub fn run(
    rt: &tokio::runtime::Runtime,
    args: SwarmArgs,
    config: Config,
    env: &EnvSnapshot,
    mode_given: bool,
    mcp_servers: Vec<McpServerSpec>,
) -> i32 {
    let mut config = config;
    if let Some(url) = &args.run.nats.nats {
        config.swarm.nats_url = Some(url.clone());
    }
    let nats = config.swarm.nats_url.clone().map(|url| {
        crate::worker_cmd::nats_options(&args.run.nats, url, env, "ahelper swarm coordinator")
    });
    let nats = nats.as_ref();
    if nats.is_some() && !config.added_dirs.is_empty() {
        eprintln!(
            "ahelper: --add-dir cannot be used with NATS workers: they run on other machines, \
             where the added directory is not; run the swarm without --nats (or without \
             swarm.nats_url) to give workers an added directory"
        );
        return EXIT_USAGE;
    }
    match args.command {
        Some(SwarmCommand::Ls { all }) => ls(&config, all),
        Some(SwarmCommand::Key) => print_key(env),
        Some(SwarmCommand::Status { run }) => status(&config, run.as_deref()),
        Some(SwarmCommand::Logs {
            run,
            worker,
            follow,
            json,
        }) => {
            let (run, worker) = logs_target(run, worker);
            rt.block_on(show_logs(
                &config,
                run.as_deref(),
                worker.as_deref(),
                follow,
                json,
            ))
        }
        Some(SwarmCommand::Clean {
            run,
            all,
            force,
            purge,
        }) => {
            let remote = RemoteAccess {
                nats,
                args: &args.run.nats,
                env,
            };
            let flags = CleanFlags { all, force, purge };
            clean(rt, &config, &remote, run.as_deref(), flags)
        }
        Some(SwarmCommand::Resume {
            run,
            only_failed,
            worker,
            max_workers,
            output_format,
            accept_record,
        }) => {
            let run_args = SwarmRunArgs {
                max_workers,
                output_format,
                ..Default::default()
            };
            let remote = RemoteAccess {
                nats,
                args: &args.run.nats,
                env,
            };
            let selection = resume_selection(only_failed, worker);
            rt.block_on(resume(
                &config,
                (&run, accept_record),
                &selection,
                &run_args,
                mode_given,
                &mcp_servers,
                remote,
            ))
        }
        None => match args.task {
            Some(task) if !task.trim().is_empty() => match mistyped_subcommand(&task) {
                Some(name) if !run_the_task_anyway(&task, name) => EXIT_USAGE,
                _ => rt.block_on(start(&config, &task, &args.run, &mcp_servers, nats)),
            },
            _ => {
                eprintln!(
                    "ahelper: give the task to do: ahelper swarm \"<task>\" (or a subcommand: ls, status, logs, resume, clean)"
                );
                EXIT_USAGE
            }
        },
    }
}

/// The subcommands of `ahelper swarm`, which a one-word task may be a typo of.
const SWARM_SUBCOMMANDS: [&str; 6] = ["ls", "status", "logs", "resume", "key", "clean"];

/// The subcommand `task` is probably a mistyped name of (`stauts` → `status`): a task of one
/// word one edit away from a subcommand name (a swapped pair of letters counts as one edit;
/// two would take real words such as `rename` for `resume`).
fn mistyped_subcommand(task: &str) -> Option<&'static str> {
    let word = task.trim();
    if word.contains(char::is_whitespace) {
        return None;
    }
    let word = word.to_lowercase();
    SWARM_SUBCOMMANDS
        .into_iter()
        .find(|name| strsim::damerau_levenshtein(&word, name) <= 1)
}

/// Asks, on a terminal, whether the one-word `task` that looks like the subcommand `name` is
/// really a task to plan (a paid run); without a terminal refuses with the suggestion. True:
/// plan it.
fn run_the_task_anyway(task: &str, name: &str) -> bool {
    use std::io::IsTerminal;
    let task = for_terminal(task.trim());
    if !std::io::stdin().is_terminal() {
        eprintln!(
            "ahelper: not planning a run for the one-word task `{task}`: it looks like the \
             subcommand `{name}` mistyped; run `ahelper swarm {name}`, or describe the task in \
             more than one word"
        );
        return false;
    }
    eprint!(
        "`{task}` looks like the subcommand `{name}` mistyped (`ahelper swarm {name}`). Plan a \
         run for the task \"{task}\" (it uses the model)? [y/N]: "
    );
    let yes = matches!(read_answer().as_str(), "y" | "Y" | "yes");
    if !yes {
        eprintln!("Not started. For the subcommand: `ahelper swarm {name}`.");
    }
    yes
}

/// The width of the terminal stdout is, in columns; `None` when stdout is not a terminal (a
/// pipe or file gets the whole table).
fn terminal_width() -> Option<usize> {
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() {
        return None;
    }
    crossterm::terminal::size()
        .ok()
        .map(|(columns, _)| usize::from(columns))
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

/// The run `run`, or the latest run of the repository when `None`.
fn find_run_or_latest(config: &Config, run: Option<&str>) -> Result<(PathBuf, RunRecord), i32> {
    if let Some(run) = run {
        return find_run(config, run);
    }
    let root = repo_root(config)?;
    let (mut records, mut unreadable) = RunRecord::list_all(&root);
    // Run ids are UUID v7: the greatest is the newest, readable or not.
    let newest_unreadable = unreadable.pop();
    match (records.pop(), newest_unreadable) {
        (newest, Some((id, e))) if newest.as_ref().is_none_or(|r| r.run_id < id) => {
            Err(usage_error(&e))
        }
        (Some(record), _) => Ok((root, record)),
        (None, _) => {
            eprintln!(
                "ahelper: no swarm runs in {} yet; start one with `ahelper swarm \"<task>\"`",
                root.display()
            );
            Err(EXIT_USAGE)
        }
    }
}

/// `swarm logs [RUN] [WORKER]`: a lone argument that names a transcript of a run — a worker
/// (`w1`), a fixer or merger (`fix-1`, `merge-1`) or `coordinator`; run ids are hex, so none
/// of these can be one — names that transcript of the latest run.
fn logs_target(run: Option<String>, worker: Option<String>) -> (Option<String>, Option<String>) {
    let numbered = |s: &str, prefix: &str| {
        s.strip_prefix(prefix)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    let is_worker_id = |s: &str| {
        s == "coordinator" || numbered(s, "w") || numbered(s, "fix-") || numbered(s, "merge-")
    };
    match (run, worker) {
        (Some(r), None) if is_worker_id(&r) => (None, Some(r)),
        other => other,
    }
}

fn output_mode(format: SwarmOutputFormat) -> EventOutput {
    match format {
        SwarmOutputFormat::StreamJson => EventOutput::Json,
        SwarmOutputFormat::Text
            if std::io::stdout().is_terminal() && std::io::stdin().is_terminal() =>
        {
            EventOutput::Live
        }
        SwarmOutputFormat::Text => EventOutput::Lines,
    }
}

fn with_max_workers(config: &Config, run_args: &SwarmRunArgs) -> Config {
    let mut config = config.clone();
    if let Some(n) = run_args.max_workers {
        config.swarm.max_workers = n.max(1);
    }
    if let Some(n) = run_args.shard.max_subtasks {
        config.swarm.max_subtasks = n.max(1);
    }
    config
}

/// The MCP servers swarm workers start: of the servers declared and approved (`servers`), only
/// those the run names — a `--mcp-config` file's, `[swarm] mcp_servers`, or the worker role's
/// `mcp_servers`. A server approved for the REPL (a workspace `.mcp.json`, `[mcp_servers]`) is
/// not named by that approval: workers get its tools only when the run names it.
fn named_for_workers(
    config: &Config,
    root: &Path,
    servers: &[McpServerSpec],
) -> Vec<McpServerSpec> {
    let role = ahelper_agents::swarm::roles::load_role(root, "worker")
        .map(|role| role.mcp_servers)
        .unwrap_or_default();
    servers
        .iter()
        .filter(|s| {
            matches!(s.origin, ahelper_agents::mcp::ServerOrigin::CommandLine(_))
                || config.swarm.mcp_servers.contains(&s.name)
                || role.contains(&s.name)
        })
        .cloned()
        .collect()
}

/// Names the MCP servers the workers start (nothing when none), before the plan's confirmation.
fn say_mcp_servers(mode: EventOutput, servers: &[McpServerSpec]) {
    if !servers.is_empty() {
        let names: Vec<&str> = servers.iter().map(|s| s.name.as_str()).collect();
        say(
            mode,
            format!("MCP servers the workers start: {}", names.join(", ")),
        );
    }
}

/// Where the run's plan comes from: the coordinator, the `--each` shards, or `--plan FILE`.
enum PlanSource {
    /// The coordinator plans.
    Coordinator,
    /// `--each GLOB…` grouped by `--per N` / `--by dir`.
    Shards(Vec<String>, ShardBy),
    /// `--plan FILE`, read and parsed.
    Given(Plan),
}

/// The plan source the flags name; `Err` with the exit status after saying why (`--plan FILE`
/// unreadable or not a plan: nothing was created).
fn plan_source(run_args: &SwarmRunArgs) -> Result<PlanSource, i32> {
    let shard = &run_args.shard;
    if !shard.each.is_empty() {
        let by = match shard.by {
            Some(ShardGrouping::Dir) => ShardBy::Dir,
            None => ShardBy::Files(shard.per.unwrap_or(1)),
        };
        if let Err(e) = swarm::sharding::each_matcher(&shard.each) {
            return Err(usage_error(&e));
        }
        return Ok(PlanSource::Shards(shard.each.clone(), by));
    }
    match &shard.plan {
        Some(file) => read_plan_file(file).map(PlanSource::Given),
        None => Ok(PlanSource::Coordinator),
    }
}

/// The plan in `file`: a plan object (`{"summary", "subtasks"}`), or a `plan_ready` event line
/// of `--output-format stream-json` (its `plan`). Exit status 2 after saying what is wrong.
fn read_plan_file(file: &Path) -> Result<Plan, i32> {
    let text = std::fs::read_to_string(file).map_err(|e| {
        usage_error(&format!(
            "cannot read the plan file {}: {e}",
            file.display()
        ))
    })?;
    let value = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find_map(|v| (v["type"] == "plan_ready").then(|| v["plan"].clone()))
        .or_else(|| ahelper_agents::swarm::plan::extract_json(&text));
    let Some(value) = value else {
        return Err(usage_error(&format!(
            "{} holds no JSON plan; write one object {{\"summary\": …, \"subtasks\": [{{\"id\", \"title\", \"instructions\", \"scope\": […]}}, …]}} (the shape of `--plan-only --output-format stream-json`'s plan_ready event)",
            file.display()
        )));
    };
    // The cap is checked when the run's configuration is known; here only the shape.
    ahelper_agents::swarm::plan::validate_plan_value(&value, usize::MAX)
        .map_err(|e| usage_error(&format!("the plan in {} is not valid: {e}", file.display())))
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

/// `ahelper swarm "<task>"` (and `/swarm <task>` in the REPL): choose and precheck the
/// verification → prepare → plan (the baseline runs meanwhile,
/// and on while the first workers work) → confirm → execute → apply.
/// Returns the exit status.
pub(crate) async fn start(
    config: &Config,
    task: &str,
    run_args: &SwarmRunArgs,
    mcp_servers: &[McpServerSpec],
    nats: Option<&NatsOptions>,
) -> i32 {
    let config = with_max_workers(config, run_args);
    let (provider, root, source) = match run_inputs(&config, run_args) {
        Ok(inputs) => inputs,
        Err(code) => return code,
    };
    let mcp_servers = &named_for_workers(&config, &root, mcp_servers);
    let (mut prepared, choice, options) = match prepare(&config, task, run_args, &root).await {
        Ok(prepared) => prepared,
        Err(code) => return code,
    };
    // Held until this function returns (the run, then `--apply`): see `swarm::run_claim`.
    let _claim = match claim_new_run(&root, &prepared.record.run_id) {
        Ok(claim) => claim,
        Err(code) => return code,
    };
    let mode = output_mode(run_args.output_format);
    tell_interrupted_runs(&prepared.record, mode);
    announce(&prepared, &options, &config, mode);
    // One lock for every worktree made from here on: the baseline's, the spares', the run's.
    let lock = match git::RepoLock::new(&root) {
        Ok(lock) => Arc::new(lock),
        Err(e) => return usage_error(&e),
    };
    let baseline = start_baseline(&prepared.record, &config, &choice, &lock);
    let warm = warm_up(&prepared.record, &config, &lock, nats.is_some());
    let mut remote = prepare_remote_slots(nats, &config, &prepared.record);
    prepared.remote_ready = remote.as_mut().and_then(|r| r.ready.take());
    let client = model_client(&provider);
    let planned = plan(
        (&mut prepared, source),
        &config,
        client.clone(),
        &provider.model,
        mode,
    )
    .await;
    let mut planned = match planned {
        Ok(planned) => planned,
        Err(e) => {
            stop_baseline(baseline).await;
            discard(warm).await;
            discard_remote(remote, nats, &prepared.record).await;
            return report_planning_failure(&e, &prepared.record);
        }
    };
    say_mcp_servers(mode, mcp_servers);
    let answered = confirm_keeping_baseline(
        &mut planned,
        &config,
        run_args,
        mode,
        &choice,
        &lock,
        baseline,
    );
    let baseline = match answered.await {
        Ok(baseline) => baseline,
        Err(code) => {
            discard(warm).await;
            discard_remote(remote, nats, planned.record()).await;
            planned.flushed().await;
            return code;
        }
    };
    // The workers start now; the baseline goes on beside them (the run records it and the
    // merge queue waits for it before its first verification).
    if let Some(baseline) = baseline {
        planned.set_pending_baseline(baseline);
    }
    if let Some(warm) = warm {
        planned.set_warm_start(warm);
    }
    let run_id = planned.record().run_id.clone();
    let code = execute_run(
        planned,
        &config,
        client,
        &provider.model,
        mode,
        mcp_servers,
        remote,
    )
    .await;
    if code == 0 && run_args.apply {
        return apply(&config, &run_id, run_args.allow_hazards);
    }
    code
}

/// What a new run needs before anything is made: the model provider, the repository's root and
/// where the plan comes from; the exit status after saying what is wrong.
fn run_inputs(
    config: &Config,
    run_args: &SwarmRunArgs,
) -> Result<(ProviderSettings, PathBuf, PlanSource), i32> {
    Ok((
        provider(config)?,
        repo_root(config)?,
        plan_source(run_args)?,
    ))
}

/// Claims the new run `run_id` of the repository at `root` for this process
/// ([`swarm::run_claim`]); the exit status after saying why not.
fn claim_new_run(root: &Path, run_id: &str) -> Result<RunClaim, i32> {
    let run_dir = swarm::state::run_dir(root, run_id);
    swarm::run_claim::claim_run(&run_dir, run_id).map_err(|e| usage_error(&e))
}

/// The run's record, made before planning, with its verification choice (`--verify`,
/// `[swarm] verify` or detected; checked to run at all) and the options it was made with; `Err`
/// with the exit status.
async fn prepare(
    config: &Config,
    task: &str,
    run_args: &SwarmRunArgs,
    root: &Path,
) -> Result<(PreparedRun, VerifyChoice, RunOptions), i32> {
    let choice = choose_command(&verify_flag(run_args), config.swarm.verify.as_deref(), root);
    precheck(&choice, root).await?;
    let options = RunOptions {
        base: run_args.base.clone(),
        include_uncommitted: run_args.include_uncommitted,
        max_workers: run_args.max_workers,
    };
    stop_leftovers_of_inactive_runs(config);
    let mut prepared = swarm::prepare_run(config, task, &options).map_err(|e| usage_error(&e))?;
    prepared.record.verify = Some(choice.clone());
    prepared.record.seal = EnvSnapshot::capture().state_dir().map(|state| {
        swarm::seal::seal_path(&state, &prepared.record.repo_root, &prepared.record.run_id)
    });
    prepared.record.verify_worktree = choice
        .command()
        .map(|command| RunVerifier::new(&prepared.record, config, command).worktree);
    Ok((prepared, choice, options))
}

/// Says why planning ended without a plan (`e`) and where the coordinator's conversation is
/// (when it has one); the exit status: 130 when the user stopped it, else 1.
fn report_planning_failure(e: &swarm::SwarmError, record: &RunRecord) -> i32 {
    eprintln!("ahelper: {e}");
    let transcript = record.coordinator_transcript();
    if std::fs::metadata(&transcript).is_ok_and(|m| m.len() > 0) {
        eprintln!(
            "The coordinator's conversation is in {}",
            transcript.display()
        );
    }
    match e {
        swarm::SwarmError::PlanningCancelled { .. } => 130,
        // The user's own plan or globs were wrong: bad input, as a usage error.
        swarm::SwarmError::Plan(swarm::PlanFailure::Given(_) | swarm::PlanFailure::Shard(_)) => {
            EXIT_USAGE
        }
        _ => 1,
    }
}

/// Asks the user about the plan ([`confirm`]) and acts on the answer: `Ok` with the baseline run to keep — restarted when the answer changed
/// the verification — or `Err` with the exit status (the baseline stopped).
async fn confirm_keeping_baseline(
    planned: &mut PlannedRun,
    config: &Config,
    run_args: &SwarmRunArgs,
    mode: EventOutput,
    choice: &VerifyChoice,
    lock: &Arc<git::RepoLock>,
    baseline: Option<BaselineHandle>,
) -> Result<Option<BaselineHandle>, i32> {
    match confirm(planned, config, run_args, mode, choice) {
        Confirmed::Stop(code) => {
            stop_baseline(baseline).await;
            Err(code)
        }
        Confirmed::Start => Ok(baseline),
        Confirmed::StartWith(changed) => {
            stop_baseline(baseline).await;
            precheck(&changed, &planned.record().repo_root).await?;
            planned
                .set_verify(changed.clone())
                .map_err(|e| usage_error(&e))?;
            Ok(start_baseline(planned.record(), config, &changed, lock))
        }
    }
}

/// What setting up a distributed run's worker slots gave ([`remote_slots`]).
type SlotsSetUp = Result<(Arc<dyn WorkerSlots>, RemoteRecord), String>;

/// The worker slots of a distributed run being set up in the background ([`remote_slots`]),
/// while the coordinator plans.
struct PendingSlots {
    task: tokio::task::JoinHandle<SlotsSetUp>,
    /// Cancelled when the run does not start: a set-up still connecting gives up at once
    /// instead of waiting for the server (up to the connect timeout when it is unreachable).
    stop_connecting: tokio_util::sync::CancellationToken,
    /// Receives the run's remote as soon as it is set up (for the plan's save to record it).
    ready: Option<tokio::sync::oneshot::Receiver<RemoteRecord>>,
}

/// Starts setting up the worker slots of a distributed run (`None`: the workers are local).
fn prepare_remote_slots(
    nats: Option<&NatsOptions>,
    config: &Config,
    record: &RunRecord,
) -> Option<PendingSlots> {
    let (nats, remote, record) = (nats?.clone(), config.swarm.remote.clone(), record.clone());
    let stop_connecting = tokio_util::sync::CancellationToken::new();
    let stop = stop_connecting.clone();
    let (ready_tx, ready) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        let set_up = remote_slots(&nats, &remote, &record, &stop).await;
        if let Ok((_, remote)) = &set_up {
            let _ = ready_tx.send(remote.clone());
        }
        set_up
    });
    Some(PendingSlots {
        task,
        stop_connecting,
        ready: Some(ready),
    })
}

/// Undoes [`prepare_remote_slots`] for a run that does not start: a set-up still connecting
/// stops; one that connected finishes, and the base commit's ref it pushed to the git remote is
/// deleted.
async fn discard_remote(
    pending: Option<PendingSlots>,
    nats: Option<&NatsOptions>,
    record: &RunRecord,
) {
    let (Some(pending), Some(nats)) = (pending, nats) else {
        return;
    };
    pending.stop_connecting.cancel();
    let Ok(Ok((_, remote))) = pending.task.await else {
        return;
    };
    let cleaned =
        swarm::remote::lifecycle::clean_run(&record.repo_root, &remote, nats, &record.run_id).await;
    if let Err(error) = cleaned {
        tracing::warn!(%error, "removing a run that did not start from the git remote failed");
    }
}

/// The worker slots of a distributed run: connected to NATS, the base commit pushed to the
/// repository's remote `remote` (`[swarm] remote`). Gives up while connecting when
/// `stop_connecting` is cancelled (the run does not start).
async fn remote_slots(
    nats: &NatsOptions,
    remote: &str,
    record: &RunRecord,
    stop_connecting: &tokio_util::sync::CancellationToken,
) -> Result<(Arc<dyn WorkerSlots>, RemoteRecord), String> {
    let base = git::Oid::from_str(&record.base_commit).map_err(|e| e.to_string())?;
    let connection = tokio::select! {
        connected = swarm::remote::connect(nats) => connected.map_err(|e| e.to_string())?,
        () = stop_connecting.cancelled() => {
            return Err("the run did not start; NATS was not connected".into())
        }
    };
    let key = signing_key(nats)?;
    let slots = NatsSlots::prepare(
        connection,
        &record.repo_root,
        (remote, key),
        &record.run_id,
        base,
    )
    .await
    .map_err(|e| e.to_string())?;
    let remote = RemoteRecord {
        nats_url: nats.url.clone(),
        repo_url: slots.repo_url().to_string(),
    };
    Ok((Arc::new(slots), remote))
}

/// The coordinator's signing key of `nats` (made on first use).
fn signing_key(nats: &NatsOptions) -> Result<Arc<swarm::remote::auth::SigningKey>, String> {
    let path = nats.signing_key.as_ref().ok_or(
        "no place for the coordinator's signing key: set AHELPER_NATS_SIGNING_KEY (neither XDG_STATE_HOME nor HOME is set)",
    )?;
    swarm::remote::auth::SigningKey::load_or_create(path)
        .map(Arc::new)
        .map_err(|e| e.to_string())
}

/// `swarm key`: prints the public key this machine signs distributed runs with.
fn print_key(env: &EnvSnapshot) -> i32 {
    let options = NatsOptions {
        signing_key: crate::worker_cmd::signing_key_path(env),
        ..NatsOptions::default()
    };
    match signing_key(&options) {
        Ok(key) => {
            println!("{}", key.public_key());
            0
        }
        Err(message) => {
            eprintln!("ahelper: {message}");
            1
        }
    }
}

/// Names the runs of the repository that a dead process left `planning` or `running`, and how
/// to resume or clean each.
fn tell_interrupted_runs(current: &RunRecord, mode: EventOutput) {
    for r in RunRecord::list(&current.repo_root) {
        if r.run_id != current.run_id && r.is_interrupted() {
            say(
                mode,
                format!(
                    "Run {} was interrupted (its process {} is gone). {}",
                    r.run_id,
                    r.pid,
                    interrupted_advice(&r)
                ),
            );
        }
    }
}

fn verify_flag(run_args: &SwarmRunArgs) -> VerifyFlag {
    match (&run_args.verify, run_args.no_verify) {
        (_, true) => VerifyFlag::Off,
        (Some(command), false) => VerifyFlag::Command(command.clone()),
        (None, false) => VerifyFlag::Unset,
    }
}

/// Fails (exit 2) when the verification command cannot start, before anything is created.
async fn precheck(choice: &VerifyChoice, root: &Path) -> Result<(), i32> {
    let Some(command) = choice.command() else {
        return Ok(());
    };
    let env = std::collections::BTreeMap::new();
    ahelper_agents::verify::precheck(command, root, &env)
        .await
        .map_err(|e| usage_error(&e))
}

/// The baseline: the verification command on the base commit in the run's verification
/// worktree, running in the background while the coordinator plans (`None`: verification is
/// off).
fn start_baseline(
    record: &RunRecord,
    config: &Config,
    choice: &VerifyChoice,
    lock: &Arc<git::RepoLock>,
) -> Option<BaselineHandle> {
    let command = choice.command()?;
    let verifier = RunVerifier::new(record, config, command);
    let root = record.repo_root.clone();
    let base = git::Oid::from_str(&record.base_commit).ok()?;
    Some(BaselineHandle::start(verifier, lock.clone(), root, base))
}

/// The first workers' worktrees, made while the coordinator plans (`None` for a distributed
/// run, whose workers make their own on their machines).
fn warm_up(
    record: &RunRecord,
    config: &Config,
    lock: &Arc<git::RepoLock>,
    distributed: bool,
) -> Option<swarm::spares::WarmStart> {
    if distributed {
        return None;
    }
    swarm::spares::warm_up(record, config, lock.clone(), config.swarm.max_workers)
}

/// Removes the spare worktrees made for a run that does not start.
async fn discard(warm: Option<swarm::spares::WarmStart>) {
    if let Some(warm) = warm {
        warm.discard().await;
    }
}

/// Stops the baseline (the run does not start, or with another command) and waits until its
/// command is gone.
async fn stop_baseline(baseline: Option<BaselineHandle>) {
    if let Some(baseline) = baseline {
        baseline.stop_and_wait().await;
    }
}

/// How to go on with an interrupted run: resume it, or (one that stopped before it had a plan,
/// which `swarm resume` refuses) start a new one; either way `swarm clean` removes it.
fn interrupted_advice(r: &RunRecord) -> String {
    let id = &r.run_id;
    if r.plan.is_none() {
        format!(
            "It stopped while planning and has no plan to resume: start a new run, and remove this one with `ahelper swarm clean {id}`."
        )
    } else {
        format!(
            "Resume it with `ahelper swarm resume {id}`, or remove it with `ahelper swarm clean {id}`."
        )
    }
}

/// What to do with a run that failed or was cancelled before it had a plan (`None` for any
/// other run): there is nothing to resume.
fn ended_while_planning_advice(r: &RunRecord) -> Option<String> {
    if r.plan.is_some() || !matches!(r.status, RunStatus::Failed | RunStatus::Cancelled) {
        return None;
    }
    let why = r.error.as_deref().unwrap_or(r.status.as_str());
    Some(format!(
        "It ended while planning ({}) and has no plan to resume: start a new run, and remove this one with `ahelper swarm clean {}`.",
        for_terminal(why),
        r.run_id
    ))
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
    if let Some(choice) = &record.verify {
        say(mode, choice.describe());
    }
}

/// The planning phase, its events printed as lines (or JSON); Ctrl-C cancels it.
async fn plan(
    (prepared, source): (&mut PreparedRun, PlanSource),
    config: &Config,
    client: Arc<dyn ModelClient>,
    model: &str,
    mode: EventOutput,
) -> Result<PlannedRun, swarm::SwarmError> {
    let cancel = UserStop::new();
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
        mcp_servers: Vec::new(),
        worker_slots: None,
    };
    let ctrl_c = tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            cancel.stop(crate::interrupts::Interrupt::CtrlC.cancel_reason());
        }
    });
    let planned = match source {
        PlanSource::Coordinator => {
            say(mode, "planning…".into());
            swarm::plan_run(prepared, config, client, model, &io).await
        }
        PlanSource::Shards(globs, by) => {
            say(
                mode,
                format!(
                    "sharding the files matching {} (no planning turn)…",
                    globs.join(", ")
                ),
            );
            swarm::planning::shard_run(prepared, (&globs, by), config, &io).await
        }
        PlanSource::Given(plan) => swarm::planning::adopt_plan(prepared, plan, config, &io).await,
    };
    drop(io);
    let _ = printer.await;
    ctrl_c.abort();
    planned
}

/// What the user said to the plan.
enum Confirmed {
    /// Start with the verification shown.
    Start,
    /// Start with another verification setting (edited command, or none).
    StartWith(VerifyChoice),
    /// Do not start; exit with this status.
    Stop(i32),
}

/// Shows the plan and the verification command and asks whether to start (unless `--yes`,
/// which accepts both). In a terminal the answer may also edit the verification command or
/// turn verification off.
fn confirm(
    planned: &PlannedRun,
    config: &Config,
    run_args: &SwarmRunArgs,
    mode: EventOutput,
    choice: &VerifyChoice,
) -> Confirmed {
    let plan = planned.plan();
    let run_id = &planned.record().run_id;
    if mode != EventOutput::Json {
        let files = swarm::planning::repo_files(planned.record());
        print_plan(plan, files.as_ref());
        // The start of the run printed the verification line already; repeat it only beside
        // the question that may change it.
        if !run_args.yes && !run_args.plan_only {
            eprintln!("{}\n", for_terminal(&choice.describe()));
        }
    }
    if run_args.plan_only {
        eprintln!(
            "Plan only: nothing was started. The plan is saved in run {run_id}; start it with `ahelper swarm resume {run_id}`."
        );
        return Confirmed::Stop(0);
    }
    if run_args.yes {
        return Confirmed::Start;
    }
    if mode != EventOutput::Live {
        eprintln!(
            "ahelper: not starting workers without confirmation; pass --yes to start them (run {run_id} keeps the plan: start it with `ahelper swarm resume {run_id}`)"
        );
        return Confirmed::Stop(EXIT_USAGE);
    }
    eprint!(
        "Start {} workers ({} at once)? [y]es, [e]dit the verify command, yes [w]ithout verification, [N]o: ",
        plan.subtasks.len(),
        config.swarm.max_workers.min(plan.subtasks.len())
    );
    match read_answer().as_str() {
        "y" | "Y" | "yes" => Confirmed::Start,
        "w" | "W" => Confirmed::StartWith(VerifyChoice::Off {
            reason: ahelper_agents::verify::OffReason::NoVerifyFlag,
        }),
        "e" | "E" => {
            eprint!("Verify command: ");
            match read_answer() {
                command if command.is_empty() => {
                    eprintln!(
                        "Not started (no command given). The plan is saved in run {run_id}; start it with `ahelper swarm resume {run_id}`."
                    );
                    Confirmed::Stop(0)
                }
                command => Confirmed::StartWith(VerifyChoice::On {
                    command,
                    source: CommandSource::Flag,
                }),
            }
        }
        _ => {
            eprintln!(
                "Not started. The plan is saved in run {run_id}; start it with `ahelper swarm resume {run_id}`."
            );
            Confirmed::Stop(0)
        }
    }
}

fn read_answer() -> String {
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    let _ = std::io::stdin().lock().read_line(&mut answer);
    answer.trim().to_string()
}

/// The plan as the confirmation shows it: each subtask with its scope and, when the
/// repository's files are known, how many of them the scope matches (0: new files only).
fn print_plan(plan: &Plan, files: Option<&swarm::repo_match::RepoFiles>) {
    eprintln!("\nPlan: {}", for_terminal(&plan.summary));
    for (i, s) in plan.subtasks.iter().enumerate() {
        let deps = if s.depends_on.is_empty() {
            String::new()
        } else {
            format!(" (after {})", s.depends_on.join(", "))
        };
        let matched = files.map_or(String::new(), |files| match files.matching(&s.scope) {
            0 => " (no existing file: new files)".to_string(),
            1 => " (1 file)".to_string(),
            n => format!(" ({n} files)"),
        });
        eprintln!(
            "  w{} [{}] {}{deps}\n      scope: {}{matched}",
            i + 1,
            for_terminal(&s.id),
            for_terminal(&s.title),
            for_terminal(&s.scope.join(", "))
        );
    }
    eprintln!();
}

/// The NATS worker slots set up while the coordinator planned (`None` for local workers), with
/// the run's record told where its workers run. Errors: the connection, the stream or the
/// base commit's push failed, or the record could not be saved (the message says which).
async fn await_remote_slots(
    run: &mut PlannedRun,
    remote: Option<PendingSlots>,
) -> Result<Option<Arc<dyn WorkerSlots>>, String> {
    let Some(pending) = remote else {
        return Ok(None);
    };
    let (slots, remote) = pending.task.await.map_err(|e| e.to_string())??;
    run.set_remote(remote).map_err(|e| e.to_string())?;
    tracing::debug!("the remote worker slots are ready");
    Ok(Some(slots))
}

/// Runs the workers with the live table (or lines, or JSON) and prints the final table and
/// summary. Ctrl-C outside raw mode: the first cancels, the second kills and exits.
async fn execute_run(
    mut run: PlannedRun,
    config: &Config,
    client: Arc<dyn ModelClient>,
    model: &str,
    mode: EventOutput,
    mcp_servers: &[McpServerSpec],
    remote: Option<PendingSlots>,
) -> i32 {
    let worker_slots = match await_remote_slots(&mut run, remote).await {
        Ok(slots) => slots,
        Err(e) => {
            eprintln!("ahelper: {e}");
            run.flushed().await;
            return 1;
        }
    };
    let cancel = UserStop::new();
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
        EventOutput::Live => {
            let live = swarm_ui::run_live(
                snap_rx,
                event_rx,
                prompt_rx,
                cancel.clone(),
                done_rx,
                config.pricing.price(model),
            );
            tokio::spawn(async move {
                live.await;
                None
            })
        }
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
        mcp_servers: mcp_servers.to_vec(),
        worker_slots,
    };
    let started = std::time::Instant::now();
    let result = swarm::execute(run, config, client, model, io, snap_tx).await;
    let _ = done_tx.send(());
    let lost = ui.await.unwrap_or_default();
    signal_watch.abort();
    let record = match result {
        Ok(record) => record,
        Err(e) => {
            eprintln!("ahelper: {e}");
            return 1;
        }
    };
    let elapsed = started.elapsed().as_millis() as u64;
    let lost = match lost {
        Some(e) => Err(e),
        None => print_final(&record, elapsed, config.pricing.price(model), mode),
    };
    let code = exit_code(record.outcome());
    match lost {
        Ok(()) => code,
        Err(e) => report_lost_output(&e, &record.run_id, code),
    }
}

/// Prints the final table (`--output-format text` without the live view, which already shows
/// it) and the run's summary (not in stream-json, whose events end with `run_finished`).
///
/// # Errors
/// The error of the write to stdout (a closed stdout is not one: [`crate::try_write_stdout`]).
fn print_final(
    record: &RunRecord,
    elapsed_ms: u64,
    price: Option<ahelper_agents::pricing::Price>,
    mode: EventOutput,
) -> std::io::Result<()> {
    if mode == EventOutput::Lines {
        let table = status_table::render_text(record, elapsed_ms, price, None);
        crate::try_write_stdout(format_args!("{}\n", for_terminal(&table)))?;
    }
    if mode != EventOutput::Json
        && let Some(summary) = &record.summary
    {
        crate::try_write_stdout(format_args!("{}\n", for_terminal(summary)))?;
    }
    Ok(())
}

/// Says on stderr that the swarm's output could not be written to stdout (`error`) and how to
/// see it again; returns the exit code: [`crate::EXIT_OUTPUT_LOST`] instead of `code`
/// 0, else `code` (a failed or cancelled run already says it did not succeed).
fn report_lost_output(error: &std::io::Error, run_id: &str, code: i32) -> i32 {
    eprintln!(
        "ahelper: could not write the swarm's output to standard output: {error}; run {run_id} is kept: `ahelper swarm status {run_id}` shows its table and summary (free some space or send stdout elsewhere first)"
    );
    if code == 0 {
        crate::EXIT_OUTPUT_LOST
    } else {
        code
    }
}

/// `--apply`: merges the integration branch into the user's current branch — after a yes on a
/// terminal, or with `--allow-hazards`, when merged workers added hazardous content.
fn apply(config: &Config, run_id: &str, allow_hazards: bool) -> i32 {
    let Ok(root) = repo_root(config) else {
        return EXIT_USAGE;
    };
    let run = match RunRecord::find(&root, run_id) {
        Ok(run) => run,
        Err(e) => {
            eprintln!("ahelper: cannot apply run {run_id}: {e}");
            return 1;
        }
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

/// `swarm resume <run> [--only-failed | --worker ID…]`.
async fn resume(
    config: &Config,
    (run, accept_record): (&str, bool),
    selection: &ResumeSelection,
    run_args: &SwarmRunArgs,
    mode_given: bool,
    mcp_servers: &[McpServerSpec],
    remote: RemoteAccess<'_>,
) -> i32 {
    let mut config = with_max_workers(config, run_args);
    // Held until this function returns: no other process runs, resumes or cleans the run.
    let (_claim, mut record) = match claim_for_resume(&config, run) {
        Ok(claimed) => claimed,
        Err(code) => return code,
    };
    let mcp_servers = &named_for_workers(&config, &record.repo_root, mcp_servers);
    // Checked now, refused after what makes the run not resumable at all (no plan, running).
    let sealed = check_record_seal(&mut record, remote.env, accept_record);
    let resumable = match resume::check_resumable(record, selection) {
        Ok(r) => r,
        Err(e) => return usage_error(&e),
    };
    match sealed {
        Ok(None) => {}
        Ok(Some(note)) => eprintln!("{note}"),
        Err(refusal) => {
            eprintln!("ahelper: {refusal}");
            return EXIT_USAGE;
        }
    }
    let record = match &resumable {
        Resumable::Unfinished { run, .. } => run.record(),
        Resumable::NothingLeft(record) => record,
    };
    // Not active (checked above): whatever still runs under its marker is a leftover.
    report_leftovers(swarm::process::kill_run_leftovers([record.run_id.as_str()]));
    if let Some(mode) = resume::resume_permission_mode(record, config.permissions.mode, mode_given)
    {
        eprintln!(
            "Using the run's permission mode `{mode}` (give --permission-mode to change it)."
        );
        config.permissions.mode = mode;
    }
    if let Err(e) = apply_the_runs_rules(&mut config, record) {
        return usage_error(&e);
    }
    let (run, selected) = match resumable {
        Resumable::NothingLeft(record) => return nothing_left(&record, selection),
        Resumable::Unfinished { run, selected } => (run, selected),
    };
    let provider = match provider(&config) {
        Ok(p) => p,
        Err(code) => return code,
    };
    report_pruned_worktrees(run.record());
    report_restored_branches(run.record());
    let what = if selected.is_empty() {
        "every worker has ended; the coordinator writes the run's summary".to_string()
    } else {
        format!(
            "{} worker(s) to run ({})",
            selected.len(),
            selected.join(", ")
        )
    };
    eprintln!(
        "Resuming {}run {}: {what}.",
        if run.record().is_interrupted() {
            "interrupted "
        } else {
            ""
        },
        run.record().run_id,
    );
    let client = model_client(&provider);
    let mode = output_mode(run_args.output_format);
    let nats = remote.for_run(run.record());
    if let Some(nats) = &nats {
        eprintln!(
            "Re-attaching to the run's workers through NATS at {}.",
            nats.url
        );
    }
    let remote = prepare_remote_slots(nats.as_ref(), &config, run.record());
    execute_run(
        run,
        &config,
        client,
        &provider.model,
        mode,
        mcp_servers,
        remote,
    )
    .await
}

/// Refuses to resume `record` when its remote, verification command or permission mode differ
/// from what the run recorded outside the repository ([`swarm::seal`]), or when it has no such
/// record, unless `accept` (`--accept-record`); sets the record's seal path so that the resumed
/// run records its values again. `Ok(Some(note))`: accepted as asked, with what differed;
/// `Err(why)`: refused.
fn check_record_seal(
    record: &mut RunRecord,
    env: &EnvSnapshot,
    accept: bool,
) -> Result<Option<String>, String> {
    let Some(state) = env.state_dir() else {
        return Ok(None);
    };
    let path = swarm::seal::seal_path(&state, &record.repo_root, &record.run_id);
    let checked = swarm::seal::check(&path, record);
    record.seal = Some(path.clone());
    let run = &record.run_id;
    let problem = match checked {
        Ok(swarm::seal::SealCheck::Matches) => return Ok(None),
        Ok(swarm::seal::SealCheck::Changed(fields)) => format!(
            "the {} in {} changed since run {run} recorded {} (in {}); a model, a hook or a checkout can edit files in the repository",
            fields.join(", "),
            record.record_path().display(),
            if fields.len() == 1 { "it" } else { "them" },
            path.display()
        ),
        Ok(swarm::seal::SealCheck::Missing) => format!(
            "run {run} has no record of its remote, verification command, permission mode and rules outside the repository ({} is missing: a run from an older ahelper, or from another account)",
            path.display()
        ),
        Err(e) => format!("cannot read {}: {e}", path.display()),
    };
    if accept {
        return Ok(Some(format!(
            "Note: {problem}; resuming with the values in run.json as you asked (--accept-record)."
        )));
    }
    Err(format!(
        "not resuming: {problem}. Check `remote`, `verify` and `permission_mode` in {}; if they are what you want, resume with --accept-record.",
        record.record_path().display()
    ))
}

/// Claims run `run` (id or unique prefix) for this `swarm resume` ([`swarm::run_claim`]) and
/// reads its record once the claim is held (what the process that held it before wrote last),
/// with the workers whose work is already on the integration branch set to be recorded
/// merged, never run again ([`resume::settle_already_merged`]); the exit code after saying why
/// not.
fn claim_for_resume(config: &Config, run: &str) -> Result<(RunClaim, RunRecord), i32> {
    let (root, record) = find_run(config, run)?;
    let dir = swarm::state::run_dir(&root, &record.run_id);
    let claim = swarm::run_claim::claim_run(&dir, &record.run_id).map_err(|e| usage_error(&e))?;
    let (_, mut record) = find_run(config, &record.run_id)?;
    if record.is_active() {
        // Its process (one that predates run locks) still runs it: check_resumable says so.
        return Ok((claim, record));
    }
    report_removed_ref_locks(&root, &record.run_id);
    let settled = resume::settle_already_merged(&mut record);
    if !settled.is_empty() {
        eprintln!(
            "Already on the integration branch, recorded merged without running again: {}.",
            settled.join(", ")
        );
    }
    Ok((claim, record))
}

/// Deletes the lock files a crash left on run `run_id`'s own refs (its branches): the run is
/// claimed by this process, so no other ahelper updates them; says which, or why not.
fn report_removed_ref_locks(root: &Path, run_id: &str) {
    match git::remove_run_ref_locks(root, run_id) {
        Ok(removed) => {
            for lock in removed {
                eprintln!(
                    "Removed the stale ref lock {} (left by an ahelper that was killed while it moved the run's branch).",
                    lock.display()
                );
            }
        }
        Err(e) => eprintln!("ahelper: could not remove the run's stale ref locks: {e}"),
    }
}

/// How `swarm resume` and `swarm clean` reach a distributed run's NATS server: the one given
/// (`--nats`, `[swarm] nats_url`), else the one the run recorded, with the credentials of this
/// command's flags and environment.
struct RemoteAccess<'a> {
    nats: Option<&'a NatsOptions>,
    args: &'a crate::cli::NatsArgs,
    env: &'a EnvSnapshot,
}

impl RemoteAccess<'_> {
    fn for_run(&self, record: &RunRecord) -> Option<NatsOptions> {
        if let Some(nats) = self.nats {
            return Some(nats.clone());
        }
        let url = record.remote.as_ref()?.nats_url.clone();
        Some(crate::worker_cmd::nats_options(
            self.args,
            url,
            self.env,
            "ahelper swarm coordinator",
        ))
    }
}

/// Prunes git's registrations of the run's worktrees whose directories were deleted by hand and
/// says which; their workers' worktrees are rebuilt from their branches when they start.
fn report_pruned_worktrees(record: &RunRecord) {
    let pruned = git::RepoLock::new(&record.repo_root)
        .and_then(|lock| cleanup::prune_missing_worktrees(&lock, &record.repo_root, record));
    match pruned {
        Ok(pruned) => {
            for p in pruned {
                eprintln!(
                    "Worktree {} was deleted: pruned its git registration; it is rebuilt from branch {} (its commits are kept).",
                    p.path.display(),
                    p.branch.as_deref().unwrap_or("(detached)")
                );
            }
        }
        Err(e) => eprintln!("ahelper: could not prune the run's deleted worktrees: {e}"),
    }
}

/// Makes again the branches of the run's workers that were deleted while their worktrees
/// stayed, and says which ([`cleanup::restore_deleted_branches`]).
fn report_restored_branches(record: &RunRecord) {
    match cleanup::restore_deleted_branches(&record.repo_root, record) {
        Ok(restored) => {
            for r in restored {
                let from = match r.source {
                    cleanup::RestoredFrom::WorktreeHead => "the last commit of worktree",
                    cleanup::RestoredFrom::StartCommit => {
                        "the worker's start commit; its files are kept in worktree"
                    }
                };
                eprintln!(
                    "Branch {} was deleted: made again at {} ({from} {}).",
                    r.branch,
                    short_commit(&r.commit.to_string()),
                    r.worktree.display()
                );
            }
        }
        Err(e) => eprintln!("ahelper: could not make again the run's deleted branches: {e}"),
    }
}

/// Nothing to run: every worker ended (the default selection), or none failed
/// (`--only-failed`). Prints the run's summary; exit status as the run's outcome says.
fn nothing_left(record: &RunRecord, selection: &ResumeSelection) -> i32 {
    match selection {
        ResumeSelection::OnlyFailed => {
            eprintln!("Run {} has no failed workers to retry.", record.run_id)
        }
        _ => eprintln!("Run {} has nothing left to do.", record.run_id),
    }
    if git::branch_tip(&record.repo_root, &record.integration_branch).is_err()
        && record.plan.is_some()
    {
        eprintln!(
            "Its integration branch {} no longer exists (deleted, or merged and deleted); the summary below is the run's record.",
            record.integration_branch
        );
    }
    println!("{}", for_terminal(&swarm::final_summary(record)));
    exit_code(record.outcome())
}

/// `swarm ls [--all]`: runs of the repository, oldest first; runs `swarm clean` emptied only
/// with `--all`; an integration branch that no longer exists shows as `(deleted)`, one that was
/// never made (the workers never started) as `(none)`; a run whose record cannot be read is
/// listed as `unreadable`, with why on stderr. Exit code 0,
/// or [`crate::EXIT_OUTPUT_LOST`] when stdout cannot take the list ([`emit`]).
pub(crate) fn ls(config: &Config, all: bool) -> i32 {
    let Ok(root) = repo_root(config) else {
        return EXIT_USAGE;
    };
    let (runs, unreadable) = RunRecord::list_all(&root);
    let runs: Vec<RunRecord> = runs
        .into_iter()
        .filter(|r| all || r.cleaned_at.is_none())
        .collect();
    for (_, error) in &unreadable {
        eprintln!("ahelper: {error}");
    }
    if runs.is_empty() && unreadable.is_empty() {
        return emit(&format!("No swarm runs in {}.\n", root.display()));
    }
    let mut out = format!(
        "{:<38} {:<11} {:<20} {:<13} {:<8} integration branch\n",
        "run", "state", "created", "base", "merged"
    );
    for r in runs {
        out.push_str(&ls_line(&root, &r));
    }
    for (id, _) in &unreadable {
        out.push_str(&format!(
            "{id:<38} unreadable  (its run.json cannot be read: see above)\n"
        ));
    }
    emit(&out)
}

/// One run's line of `swarm ls`, with its newline.
fn ls_line(root: &Path, r: &RunRecord) -> String {
    let merged = r
        .workers
        .iter()
        .filter(|w| w.status == WorkerStatus::Merged)
        .count();
    let branch = if git::branch_tip(root, &r.integration_branch).is_ok() {
        r.integration_branch.clone()
    } else if r.plan.is_none() || matches!(r.status, RunStatus::Planning | RunStatus::Planned) {
        // Made when the workers start: a run that never started them has none.
        "(none)".to_string()
    } else {
        "(deleted)".to_string()
    };
    let state = if r.cleaned_at.is_some() {
        "cleaned"
    } else {
        r.state_label()
    };
    format!(
        "{:<38} {:<11} {:<20} {:<13} {:<8} {branch}\n",
        r.run_id,
        state,
        r.created_at.get(..19).unwrap_or(&r.created_at),
        short_commit(&r.base_commit),
        format!("{merged}/{}", r.workers.len()),
    )
}

/// Writes a command's whole output to stdout. Returns the exit code: 0, or
/// [`crate::EXIT_OUTPUT_LOST`] after a line on stderr when stdout does not take it (e.g. a full
/// disk); a closed pipe (`| head`) is not such a failure ([`crate::try_write_stdout`]).
fn emit(output: &str) -> i32 {
    if output.is_empty() {
        // Nothing to say (`--follow` with no new line): no write, no flush.
        return 0;
    }
    match crate::try_write_stdout(format_args!("{output}")) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("ahelper: could not write to standard output: {e}");
            crate::EXIT_OUTPUT_LOST
        }
    }
}

/// `swarm status [<run>]` (default: the latest run). An interrupted run says so and how to
/// go on; its in-flight workers show as `interrupted`. Exit code as [`emit`]'s.
fn status(config: &Config, run: Option<&str>) -> i32 {
    match find_run_or_latest(config, run) {
        Ok((_, record)) => emit(&status_text(&record.observed())),
        Err(code) => code,
    }
}

/// What `swarm status` prints for run `r`: state, task, advice, the table and the summary (or
/// the out-of-scope lines of a run without one).
fn status_text(r: &RunRecord) -> String {
    let mut out = format!("Run: {} ({})\n", r.run_id, r.state_label());
    out.push_str(&format!("Task: {}\n", for_terminal(&r.task)));
    if r.is_interrupted() {
        out.push_str(&format!("{}\n", interrupted_advice(r)));
    } else if let Some(advice) = ended_while_planning_advice(r) {
        out.push_str(&format!("{advice}\n"));
    }
    let elapsed = match (
        chrono::DateTime::parse_from_rfc3339(&r.created_at),
        chrono::DateTime::parse_from_rfc3339(&r.updated_at),
    ) {
        (Ok(a), Ok(b)) => (b - a).num_milliseconds().max(0) as u64,
        _ => 0,
    };
    // The record does not name its model: no price is assumed.
    let table = status_table::render_text(r, elapsed, None, terminal_width());
    out.push_str(&for_terminal(&table));
    match &r.summary {
        Some(s) => out.push_str(&format!("\n{}\n", for_terminal(s))),
        None => {
            for w in &r.workers {
                if let Some(line) = swarm::summary::out_of_scope_line(r, w) {
                    out.push_str(&format!("{}: {}\n", w.id, for_terminal(&line)));
                }
            }
        }
    }
    out
}

/// `swarm logs [<run>] [worker] [--follow] [--json]` (default: the latest run). Exit code as
/// [`emit`]'s: a stdout that stops taking the lines ends the command with
/// [`crate::EXIT_OUTPUT_LOST`].
async fn show_logs(
    config: &Config,
    run: Option<&str>,
    worker: Option<&str>,
    follow: bool,
    json: bool,
) -> i32 {
    let (root, record) = match find_run_or_latest(config, run) {
        Ok(found) => found,
        Err(code) => return code,
    };
    let path = match logs::transcript_path(&record, worker) {
        Ok(p) => p,
        Err(_) if follow && record.status == RunStatus::Planning && record.is_active() => {
            match wait_for_the_plan(&root, &record.run_id, worker).await {
                Ok(path) => path,
                Err(code) => return code,
            }
        }
        Err(e) => return usage_error(&e),
    };
    let mut follower = TranscriptFollower::new(path);
    loop {
        let code = emit(&log_lines(follower.read_new(), json));
        if code != 0 {
            return code;
        }
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

/// Adds the run's own `--allowedTools`/`--disallowedTools` rules (checked against its seal
/// before) to `config`, saying which, so a resume does not ask again what the run allowed.
///
/// # Errors
/// A recorded rule that no longer parses, naming it.
fn apply_the_runs_rules(config: &mut Config, record: &RunRecord) -> Result<(), String> {
    let recorded = &record.session_rules;
    if recorded.is_empty() {
        return Ok(());
    }
    let parse = |rules: &[String]| {
        rules
            .iter()
            .map(|r| {
                ahelper_agents::permissions::PermissionRule::parse(r)
                    .map_err(|e| format!("the run's recorded rule `{r}` does not parse: {e}"))
            })
            .collect::<Result<Vec<_>, String>>()
    };
    let allow = parse(&recorded.allow)?;
    let deny = parse(&recorded.deny)?;
    for (flag, rules) in [
        ("--allowedTools", &recorded.allow),
        ("--disallowedTools", &recorded.deny),
    ] {
        if !rules.is_empty() {
            let quoted: Vec<String> = rules.iter().map(|r| format!("'{r}'")).collect();
            eprintln!("Using the run's {flag} {}.", quoted.join(" "));
        }
    }
    config.permissions.rules.allow.extend(allow);
    config.permissions.rules.deny.extend(deny);
    Ok(())
}

/// `swarm logs <worker> --follow` while the run still plans: says so, waits until the plan
/// names `worker`, and returns its transcript path; the exit code when the run stops planning
/// without such a worker (a usage error naming its workers) or on Ctrl-C (130).
async fn wait_for_the_plan(
    root: &Path,
    run_id: &str,
    worker: Option<&str>,
) -> Result<PathBuf, i32> {
    eprintln!(
        "Run {run_id} is still planning; waiting for its plan to follow {} (Ctrl-C to stop)…",
        worker.unwrap_or("the worker")
    );
    loop {
        tokio::select! {
            _ = tokio::time::sleep(std::time::Duration::from_millis(250)) => {}
            _ = tokio::signal::ctrl_c() => return Err(130),
        }
        let Ok(record) = RunRecord::find(root, run_id) else {
            continue;
        };
        match logs::transcript_path(&record, worker) {
            Ok(path) => return Ok(path),
            Err(_) if record.status == RunStatus::Planning && record.is_active() => {}
            Err(e) => return Err(usage_error(&e)),
        }
    }
}

/// The transcript `lines` as `swarm logs` prints them: raw JSON with `--json`, else formatted
/// for the terminal (lines with nothing to show are left out); each with its newline.
fn log_lines(lines: Vec<String>, json: bool) -> String {
    let mut out = String::new();
    for line in lines {
        if json {
            out.push_str(&line);
            out.push('\n');
        } else if let Some(text) = logs::format_raw_line(&line) {
            out.push_str(&for_terminal(&text));
            out.push('\n');
        }
    }
    out
}

fn run_is_active(root: &Path, run_id: &str) -> bool {
    RunRecord::find(root, run_id).is_ok_and(|r| r.is_active())
}

/// The flags of `swarm clean`.
struct CleanFlags {
    /// Every run.
    all: bool,
    /// Delete unmerged branches and dirty worktrees too.
    force: bool,
    /// Remove the run's record and transcripts once nothing else is left.
    purge: bool,
}

/// `swarm clean [<run>|--all] [--force] [--purge]`.
fn clean(
    rt: &tokio::runtime::Runtime,
    config: &Config,
    remote: &RemoteAccess<'_>,
    run: Option<&str>,
    flags: CleanFlags,
) -> i32 {
    let env = remote.env;
    let Ok(root) = repo_root(config) else {
        return EXIT_USAGE;
    };
    let mut refused_before = 0;
    let runs: Vec<RunRecord> = match (run, flags.all) {
        (Some(r), _) => match RunRecord::find(&root, r) {
            Ok(r) => vec![r],
            Err(e) => return usage_error(&e),
        },
        (None, true) => {
            let (runs, unreadable) = RunRecord::list_all(&root);
            for (id, e) in &unreadable {
                match e {
                    // Its message says what to do already.
                    swarm::state::RunStoreError::Corrupt { .. } => eprintln!("skip {id}: {e}"),
                    _ => eprintln!(
                        "skip {id}: {e}; its worktrees and branches are kept: restore its run.json, or move {} away to drop the run",
                        swarm::state::run_dir(&root, id).display()
                    ),
                }
            }
            refused_before = unreadable.len();
            runs
        }
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
    let mut refused = refused_before;
    for r in runs {
        // Held while this run is cleaned: no other process runs or resumes it meanwhile.
        let (_claim, mut r) = match claim_for_clean(&root, r) {
            Ok(claimed) => claimed,
            Err(()) => {
                refused += 1;
                continue;
            }
        };
        let base = swarm::run::recorded_worktree_base(config, env, &root, &r);
        match cleanup::clean_run(&lock, &root, &r, &base, flags.force) {
            Ok(cleaned) => {
                println!("run {}:", r.run_id);
                for step in &cleaned.steps {
                    print_clean_step(step, &r);
                }
                println!("  {}", integration_line(&cleaned.integration, &r));
                refused += cleaned.refusals();
                if cleaned.refusals() == 0 || flags.force {
                    refused += clean_remote(rt, remote, &r);
                }
                finish_clean(&mut r, &cleaned, flags.purge);
            }
            Err(e) => {
                eprintln!("skip {}: {e}", r.run_id);
                refused += 1;
            }
        }
    }
    if refused > 0 { 1 } else { 0 }
}

/// Claims run `r` for `swarm clean` ([`swarm::run_claim`]) and reads its record again under
/// the claim; says why not (`skip <run>: …`) when another process holds it or it cannot be read.
fn claim_for_clean(root: &Path, r: RunRecord) -> Result<(RunClaim, RunRecord), ()> {
    let dir = swarm::state::run_dir(root, &r.run_id);
    let claimed = swarm::run_claim::claim_run(&dir, &r.run_id)
        .map_err(|e| e.to_string())
        .and_then(|claim| {
            let record = RunRecord::find(root, &r.run_id).map_err(|e| e.to_string())?;
            Ok((claim, record))
        });
    claimed.map_err(|e| eprintln!("skip {}: {e}", r.run_id))
}

/// A distributed run's refs on the shared git remote and its consumer and queued subtasks on
/// NATS are removed (after its local branches: a branch kept locally keeps its commits).
/// Returns 1 when that failed (said why), else 0.
fn clean_remote(rt: &tokio::runtime::Runtime, access: &RemoteAccess<'_>, r: &RunRecord) -> usize {
    let (Some(remote), Some(nats)) = (&r.remote, access.for_run(r)) else {
        return 0;
    };
    let cleaned = rt.block_on(swarm::remote::lifecycle::clean_run(
        &r.repo_root,
        remote,
        &nats,
        &r.run_id,
    ));
    match cleaned {
        Ok(cleaned) => {
            println!(
                "  deleted {} ref(s) of the run on {}",
                cleaned.refs_deleted.len(),
                for_terminal(&remote.repo_url)
            );
            let consumer = if cleaned.released.consumer_deleted {
                "deleted its consumer"
            } else {
                "no consumer left"
            };
            println!(
                "  NATS {}: {consumer}, {} queued subtask(s) removed",
                for_terminal(&nats.url),
                cleaned.released.subtasks_purged
            );
            0
        }
        Err(e) => {
            eprintln!("ahelper: run {}: {e}", r.run_id);
            1
        }
    }
}

/// After a clean-up: a run with nothing left in git is marked cleaned (`swarm ls` hides it), and
/// with `purge` its directory (record and transcripts) is removed; otherwise the transcripts
/// are kept and the user is told where.
fn finish_clean(r: &mut RunRecord, cleaned: &cleanup::RunCleanup, purge: bool) {
    let nothing_left = cleaned.refusals() == 0
        && matches!(
            cleaned.integration,
            IntegrationCleanup::Missing | IntegrationCleanup::Deleted(_)
        );
    if !nothing_left {
        if purge {
            println!("  kept the run's record: its branches or worktrees are still there");
        }
        println!("  kept the transcripts (ahelper swarm logs {})", r.run_id);
        return;
    }
    if purge {
        let dir = swarm::state::run_dir(&r.repo_root, &r.run_id);
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => println!(
                "  removed the run's record and transcripts ({})",
                dir.display()
            ),
            Err(e) => println!("  could not remove {}: {e}", dir.display()),
        }
        return;
    }
    r.cleaned_at = Some(ahelper_agents::transcript::now_rfc3339());
    if let Err(e) = r.save() {
        println!("  could not mark the run cleaned: {e}");
    }
    println!(
        "  kept the transcripts (ahelper swarm logs {}; remove them with ahelper swarm clean {} --purge)",
        r.run_id, r.run_id
    );
}

fn print_clean_step(step: &CleanStep, run: &RunRecord) {
    match step {
        CleanStep::WorktreeRemoved { path } => println!("  removed worktree {}", path.display()),
        CleanStep::WorktreeKept { path, error } => {
            println!("  kept worktree {}: {error}", path.display())
        }
        CleanStep::RegistrationPruned { path } => println!(
            "  removed the git registration of worktree {} (its directory was already gone)",
            path.display()
        ),
        CleanStep::BranchDeleted { branch } => println!("  deleted branch {branch}"),
        CleanStep::BranchKept { branch, error } => println!("  kept branch {branch}: {error}"),
        CleanStep::BranchNotTheRuns { branch } => println!(
            "  kept branch {branch}: the run's record names it, but it is not one of the run's branches (ahelper/{}/…); its run.json was edited",
            run.run_id
        ),
        CleanStep::BranchWithoutIntegration { branch } => println!(
            "  kept branch {branch}: the integration branch {} no longer exists, so its commits cannot be checked; delete it anyway with: ahelper swarm clean {} --force",
            run.integration_branch, run.run_id
        ),
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
