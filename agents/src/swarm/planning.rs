//! Planning: the coordinator — an agent with read-only tools rooted at the repository — explores
//! and answers with a JSON plan ([`super::plan`] validates it, [`super::plan_review`] refuses
//! read-only subtasks and chains over the same files); an invalid plan is re-asked once with
//! the validation error, and a re-asked plan that is still a chain runs as one worker. Its conversation goes to `runs/<run>/coordinator.jsonl`.

use super::events::SwarmEvent;
use super::plan::{Plan, PlanError, PlanValidator};
use super::plan_review::{collapse_chain, review_plan};
use super::record_saver::RecordFlush;
use super::repo_match::RepoFiles;
use super::roles::load_role;
use super::run::{PlannedRun, PreparedRun, RunIo, SwarmError, worker_branch, worktree_base};
use super::state::{RunRecord, RunStatus, WorkerRecord};
use crate::agent::gate::{PermissionGate, RulePersistence};
use crate::agent::{Agent, AgentEvent, AgentOutcome, AgentSettings, AgentStopReason};
use crate::config::{Config, EnvSnapshot};
use crate::model::ModelClient;
use crate::tools::{ToolContext, ToolRegistry};
use std::sync::{Arc, RwLock};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

/// Turns of the planning conversation when the coordinator role sets no `max_turns`.
pub const DEFAULT_COORDINATOR_TURNS: u32 = 12;

/// Label of the coordinator in events (where workers have their ids).
pub const COORDINATOR_LABEL: &str = "coordinator";

/// Why no plan came out of the planning conversation.
#[derive(Debug, thiserror::Error)]
pub enum PlanFailure {
    /// The user cancelled (Ctrl-C).
    #[error("cancelled")]
    Cancelled,
    /// The model request failed (after its retries) or the loop hit an error.
    #[error("{0}")]
    Model(String),
    /// The model settings are wrong (refused key, wrong `base_url`, not a model API): no plan
    /// can be made until the user fixes them.
    #[error("{0}")]
    ModelSettings(crate::model::ModelError),
    /// The model provider could not be reached or failed (connection, 5xx, overload, a cut or
    /// corrupted stream) after the request's retries: no plan was ever received.
    #[error("{0}")]
    Provider(crate::model::ModelError),
    /// The answer stopped at the output-token limit before the plan was complete, twice.
    #[error(
        "the plan was cut off by the output-token limit ({max_output_tokens} tokens); raise \
         `max_output_tokens` in .ahelper/config.toml (e.g. 2048) or give a smaller task"
    )]
    Truncated {
        /// The limit in tokens.
        max_output_tokens: u32,
    },
    /// The second answer was still not a valid plan.
    #[error(transparent)]
    Rejected(PlanError),
    /// The plan the user gave (`--plan FILE`) is not valid.
    #[error("the plan given is not valid: {0}")]
    Given(PlanError),
    /// No plan could be made from the `--each` globs.
    #[error(transparent)]
    Shard(#[from] super::sharding::ShardError),
    /// The repository's files at the base commit could not be listed.
    #[error("listing the files at the base commit failed: {0}")]
    Files(String),
}

/// Asks the coordinator model for a plan, re-asking once with the validation error, and saves
/// it in the record (status `planned`, one queued worker per subtask).
///
/// Steps: build the coordinator agent → forward its tool calls and retries as events → ask
/// (and re-ask) → save the plan, or mark the run `failed`.
///
/// # Errors
/// [`SwarmError::Plan`] after two invalid answers, a model failure or a cancel; set-up errors
/// (role, workspace, transcript, record).
pub async fn plan_run(
    prepared: &mut PreparedRun,
    config: &Config,
    client: Arc<dyn ModelClient>,
    model: &str,
    io: &RunIo,
) -> Result<PlannedRun, SwarmError> {
    let mut agent = coordinator_agent(&prepared.record, config, client, model, io)?;
    let forward = tokio::spawn(forward_coordinator_events(
        agent.subscribe(),
        io.events.clone(),
    ));
    // Compiled while the planning request is in flight.
    let mut validator = Validating::start();
    let files = repo_files(&prepared.record);
    let asked = ask_for_plan(
        &mut agent,
        &mut prepared.record,
        (io, files.as_ref()),
        &mut validator,
    )
    .await;
    agent.unsubscribe();
    drop(agent);
    let _ = forward.await;
    // Long done: the planning request took longer than the flush.
    prepared.flush.wait().await;
    match asked {
        Ok(plan) => {
            let plan = batch_over_cap(&prepared.record, plan, config, io)?;
            // One save for the plan and the remote.
            prepared.take_ready_remote();
            save_plan(&mut prepared.record, plan, config, io)
        }
        Err(failure) => {
            let base_url = provider_base_url(config);
            Err(record_planning_failure(
                &mut prepared.record,
                failure,
                (io, base_url),
            ))
        }
    }
}

/// Runs a plan made without a coordinator — `plan` from the user's file, or the shards of
/// `--each` ([`shard_run`]): validated as a coordinator's would be (schema, ids, dependencies,
/// the subtask cap, [`review_plan`]) and saved like one (status `planned`). No model is asked.
///
/// # Errors
/// [`SwarmError::Plan`] with [`PlanFailure::Given`] when the plan is not valid (the run is
/// marked `failed`, saying why); record errors.
pub async fn adopt_plan(
    prepared: &mut PreparedRun,
    plan: Plan,
    config: &Config,
    io: &RunIo,
) -> Result<PlannedRun, SwarmError> {
    let value = serde_json::to_value(&plan).map_err(|e| PlanError::Json(e.to_string()));
    let checked = value
        .and_then(|v| PlanValidator::new().validate(&v, usize::MAX))
        .and_then(|plan| review_plan(&plan).map(|()| plan))
        .and_then(|plan| matches_repo(&plan, repo_files(&prepared.record).as_ref()).map(|()| plan));
    prepared.flush.wait().await;
    match checked {
        Ok(plan) => {
            let plan = batch_over_cap(&prepared.record, plan, config, io)?;
            prepared.take_ready_remote();
            save_plan(&mut prepared.record, plan, config, io)
        }
        Err(e) => Err(record_planning_failure(
            &mut prepared.record,
            PlanFailure::Given(e),
            (io, provider_base_url(config)),
        )),
    }
}

/// `--each`: the plan is the files tracked at the run's base commit that match `globs`, grouped
/// by `by` ([`super::sharding::shard_plan`]); then as [`adopt_plan`].
///
/// # Errors
/// [`SwarmError::Plan`] with [`PlanFailure::Shard`] (no file matches, a bad glob) or
/// [`PlanFailure::Files`]; those of [`adopt_plan`].
pub async fn shard_run(
    prepared: &mut PreparedRun,
    (globs, by): (&[String], super::sharding::ShardBy),
    config: &Config,
    io: &RunIo,
) -> Result<PlannedRun, SwarmError> {
    let record = &prepared.record;
    let files = ahelper_worktrees::Oid::from_str(&record.base_commit)
        .map_err(|e| e.to_string())
        .and_then(|base| {
            ahelper_worktrees::tracked_files(&record.repo_root, base).map_err(|e| e.to_string())
        })
        .map_err(PlanFailure::Files);
    let plan = files.and_then(|files| {
        super::sharding::shard_plan(&record.task, globs, &files, by).map_err(PlanFailure::from)
    });
    match plan {
        Ok(plan) => adopt_plan(prepared, plan, config, io).await,
        Err(failure) => {
            prepared.flush.wait().await;
            Err(record_planning_failure(
                &mut prepared.record,
                failure,
                (io, provider_base_url(config)),
            ))
        }
    }
}

/// A plan over the run's cap (`--max-subtasks`, `swarm.max_subtasks`) as batches: the first
/// `max_subtasks` subtasks in dependency order ([`super::plan::split_batch`]) are this run's
/// plan; the rest are written to `runs/<run>/queued-plan.json` (atomically) for a later
/// `ahelper swarm "<task>" --plan FILE`, and a notice says so. A plan within the cap is
/// returned as it is.
///
/// # Errors
/// [`SwarmError::Io`] when the queued plan cannot be written (nothing is lost: the run is not
/// started).
fn batch_over_cap(
    record: &RunRecord,
    plan: Plan,
    config: &Config,
    io: &RunIo,
) -> Result<Plan, SwarmError> {
    let cap = config.swarm.max_subtasks;
    let total = plan.subtasks.len();
    let (first, rest) = super::plan::split_batch(plan, cap);
    let Some(rest) = rest else {
        return Ok(first);
    };
    let file = super::state::run_dir(&record.repo_root, &record.run_id).join("queued-plan.json");
    serde_json::to_string_pretty(&rest)
        .map_err(std::io::Error::other)
        .and_then(|text| crate::atomic_write::write_path(&file, text.as_bytes()))
        .map_err(|source| SwarmError::QueuedPlan {
            path: file.clone(),
            source,
        })?;
    let _ = io.events.send(SwarmEvent::Notice {
        message: format!(
            "the plan has {total} subtasks, over this run's cap of {cap} (--max-subtasks, \
             swarm.max_subtasks): this run does the first {}; the other {} are queued in {}. \
             Once this run is merged and applied (--apply, or git merge {}), run them with \
             `ahelper swarm \"<task>\" --plan {}`",
            first.subtasks.len(),
            rest.subtasks.len(),
            file.display(),
            record.integration_branch,
            file.display()
        ),
    });
    Ok(first)
}

/// The model provider's `base_url` (empty when none is configured), named when it cannot be
/// reached while planning.
fn provider_base_url(config: &Config) -> String {
    config
        .provider()
        .map(|p| p.base_url.clone())
        .unwrap_or_default()
}

/// Marks the run `failed` with why planning failed, or `cancelled` with the user's reason
/// when they stopped it (the record is saved; a failed save leaves it `planning`, which
/// `swarm ls` shows as interrupted once this process is gone); the error the caller reports.
/// `base_url`: the provider's, named when it could not be reached.
fn record_planning_failure(
    record: &mut RunRecord,
    failure: PlanFailure,
    (io, base_url): (&RunIo, String),
) -> SwarmError {
    let (status, error) = match failure {
        PlanFailure::Cancelled => {
            let reason = io.cancel.reason();
            record.error = Some(reason.clone());
            let error = SwarmError::PlanningCancelled {
                run_id: record.run_id.clone(),
                reason,
            };
            (RunStatus::Cancelled, error)
        }
        PlanFailure::ModelSettings(e) => (RunStatus::Failed, SwarmError::ModelSettings(e)),
        PlanFailure::Provider(error) => (
            RunStatus::Failed,
            SwarmError::ProviderFailed {
                base_url,
                error: Box::new(error),
            },
        ),
        other => (RunStatus::Failed, SwarmError::Plan(other)),
    };
    if status == RunStatus::Failed {
        record.error = Some(error.to_string());
    }
    record.status = status;
    let _ = record.save();
    error
}

/// The coordinator: read-only tools of its role, rooted at the repository; its own copy of the
/// permission policy; the run's token budget.
fn coordinator_agent(
    record: &RunRecord,
    config: &Config,
    client: Arc<dyn ModelClient>,
    model: &str,
    io: &RunIo,
) -> Result<Agent, SwarmError> {
    let root = &record.repo_root;
    let role = load_role(root, "coordinator")?;
    let mut tool_context = ToolContext::new(root)?;
    tool_context.redactor = config.redactor.clone();
    let instructions = format!(
        "{}\n\nLimits: at most {} subtasks; {} workers run at once.",
        role.instructions, config.swarm.max_subtasks, config.swarm.max_workers
    );
    let gate = PermissionGate::new(
        Arc::new(RwLock::new(config.permissions.clone())),
        io.prompter.clone(),
        RulePersistence::InMemory,
    );
    let settings = AgentSettings {
        max_turns: role.max_turns.unwrap_or(DEFAULT_COORDINATOR_TURNS),
        token_budget: Some(config.swarm.token_budget),
        ..AgentSettings::new(&config.agent, config.provider().ok())
    };
    let agent = Agent::builder(client, model, tool_context, gate)
        .tools(ToolRegistry::standard().select(&role.tools).read_only())
        .role_instructions(instructions)
        .settings(settings)
        .transcript(
            record.coordinator_transcript(),
            format!("{}/{COORDINATOR_LABEL}", record.run_id),
        )
        .build()?;
    Ok(agent)
}

/// The coordinator's tool calls and retries, as events labelled `coordinator`.
async fn forward_coordinator_events(
    mut agent_events: UnboundedReceiver<AgentEvent>,
    events: UnboundedSender<SwarmEvent>,
) {
    let started = std::time::Instant::now();
    let mut turns = 0;
    while let Some(event) = agent_events.recv().await {
        let forwarded = match &event {
            AgentEvent::TurnStarted { turn } => {
                turns = *turn;
                None
            }
            AgentEvent::Usage { total, .. } => Some(SwarmEvent::PlanningProgress {
                turn: turns,
                input_tokens: total.input_tokens,
                output_tokens: total.output_tokens,
                elapsed_ms: started.elapsed().as_millis() as u64,
            }),
            AgentEvent::ToolCallStarted { name, input, .. } => Some(SwarmEvent::WorkerToolCall {
                worker: COORDINATOR_LABEL.into(),
                action: super::describe_action(name, input),
            }),
            AgentEvent::Retry { .. } => {
                event
                    .retry_message()
                    .map(|message| SwarmEvent::WorkerRetry {
                        worker: COORDINATOR_LABEL.into(),
                        message,
                    })
            }
            _ => None,
        };
        if let Some(e) = forwarded {
            let _ = events.send(e);
        }
    }
}

/// The planning conversation: at most two answers; the second is asked with the first one's
/// validation error.
async fn ask_for_plan(
    agent: &mut Agent,
    record: &mut RunRecord,
    (io, files): (&RunIo, Option<&RepoFiles>),
    validator: &mut Validating,
) -> Result<Plan, PlanFailure> {
    let mut prompt = format!(
        "Task for the swarm:\n{}\n\nExplore as needed, then answer with the JSON plan only.",
        record.task
    );
    let mut attempts_left = 2;
    let mut last_plan = None;
    loop {
        let outcome = agent.run(&prompt, io.cancel.token()).await;
        record.usage.add(outcome.usage);
        let validator = validator.ready().await;
        // Over the cap is not refused: the plan runs in batches ([`batch_over_cap`]).
        let answer = read_plan(&outcome, usize::MAX, agent.settings(), validator);
        let rejected = match answer {
            Ok(plan) => match review_plan(&plan).and_then(|()| matches_repo(&plan, files)) {
                Ok(()) => return Ok(plan),
                // Re-asked and still a chain: one worker does the steps in order.
                Err(PlanError::Chain { ids }) if attempts_left == 1 => {
                    let _ = io.events.send(SwarmEvent::Notice {
                        message: format!(
                            "the plan is still a chain of steps over the same files ({}): running it as one worker",
                            ids.join(" → ")
                        ),
                    });
                    return Ok(collapse_chain(&plan));
                }
                Err(e) => {
                    last_plan = Some(plan);
                    e
                }
            },
            Err(PlanAnswer::Failed(failure)) => return Err(failure),
            Err(PlanAnswer::Rejected(e)) => e,
        };
        let _ = io.events.send(SwarmEvent::PlanRejected {
            error: rejected.to_string(),
        });
        attempts_left -= 1;
        if attempts_left == 0 {
            return match rejected {
                PlanError::Truncated { max_output_tokens } => {
                    Err(PlanFailure::Truncated { max_output_tokens })
                }
                other => Ok(fall_back(&record.task, &other, last_plan, files, io)),
            };
        }
        prompt = format!(
            "Your plan was rejected: {rejected}\nAnswer again with only the corrected JSON plan, nothing else."
        );
    }
}

/// The repository's tracked files at the run's base commit (`None` when they cannot be read:
/// scopes are then not checked against them).
pub fn repo_files(record: &RunRecord) -> Option<RepoFiles> {
    let base = ahelper_worktrees::Oid::from_str(&record.base_commit).ok()?;
    match ahelper_worktrees::tracked_files(&record.repo_root, base) {
        Ok(files) => Some(RepoFiles::new(files)),
        Err(error) => {
            tracing::warn!(%error, "listing the files at the base commit failed; scopes are not checked against them");
            None
        }
    }
}

/// Refuses scopes that match nothing of the repository and are not plausible new files
/// ([`RepoFiles::unmatched`]), with the list of what exists.
///
/// # Errors
/// [`PlanError::Unmatched`].
fn matches_repo(plan: &Plan, files: Option<&RepoFiles>) -> Result<(), PlanError> {
    let Some(files) = files else {
        return Ok(());
    };
    let entries = files.unmatched(plan);
    if entries.is_empty() {
        return Ok(());
    }
    Err(PlanError::Unmatched {
        entries,
        existing: files.listing(),
    })
}

/// Which fallback ran when the coordinator's plan was refused after its re-ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fallback {
    /// The files the coordinator's scopes named, one subtask each (as `--each` makes them).
    EachNamedFile,
    /// The whole task as one verified worker.
    WholeTask,
}

/// The plan that runs when the coordinator's was refused twice (`rejected`, the second
/// refusal): `--each` over the tracked files its last plan's scopes named, else the whole task
/// as one worker; a notice says why and which fallback ran, and the plan's summary says it too
/// (the user confirms it like any plan). (A step chain is collapsed before this: see
/// [`ask_for_plan`].)
fn fall_back(
    task: &str,
    rejected: &PlanError,
    last_plan: Option<Plan>,
    files: Option<&RepoFiles>,
    io: &RunIo,
) -> Plan {
    let named: Vec<String> = match (&last_plan, files) {
        (Some(plan), Some(files)) => {
            let scopes: Vec<String> = plan.subtasks.iter().flat_map(|s| s.scope.clone()).collect();
            files
                .files
                .iter()
                .filter(|f| super::plan::in_scope(f, &scopes))
                .cloned()
                .collect()
        }
        _ => Vec::new(),
    };
    let by_file = (!named.is_empty() && named.len() <= MAX_FALLBACK_FILES)
        .then(|| {
            let globs: Vec<String> = named.iter().map(|f| globset::escape(f)).collect();
            super::sharding::shard_plan(task, &globs, &named, super::sharding::ShardBy::Files(1))
                .ok()
        })
        .flatten();
    let (fallback, mut plan) = match by_file {
        Some(plan) => (Fallback::EachNamedFile, plan),
        None => (Fallback::WholeTask, whole_task(task)),
    };
    let what = match fallback {
        Fallback::EachNamedFile => format!(
            "one subtask per file the coordinator named ({} file(s), as --each would)",
            named.len()
        ),
        Fallback::WholeTask => "the whole task as one verified worker".to_string(),
    };
    plan.summary = format!("Fallback: {what}. {}", plan.summary);
    let _ = io.events.send(SwarmEvent::Notice {
        message: format!(
            "the coordinator's plan was refused after its re-ask ({rejected}); fallback: {what}"
        ),
    });
    plan
}

/// Files a by-file fallback takes at most; more named files run as one worker instead.
const MAX_FALLBACK_FILES: usize = 64;

/// The task as one subtask over the whole repository.
fn whole_task(task: &str) -> Plan {
    let title: String = task
        .lines()
        .next()
        .unwrap_or(task)
        .chars()
        .take(200)
        .collect();
    Plan {
        summary: "the task as one subtask".into(),
        subtasks: vec![super::plan::Subtask {
            id: "whole-task".into(),
            title: if title.trim().is_empty() {
                "The task".into()
            } else {
                title
            },
            instructions: task.to_string(),
            scope: vec![".".into()],
            depends_on: Vec::new(),
        }],
    }
}

/// What one answer of the coordinator was, when it was not a plan.
enum PlanAnswer {
    /// The conversation cannot go on.
    Failed(PlanFailure),
    /// Not a valid plan; may be re-asked.
    Rejected(PlanError),
}

/// The plan validator: being compiled beside the planning request, then ready.
enum Validating {
    Compiling(tokio::task::JoinHandle<PlanValidator>),
    Ready(PlanValidator),
}

impl Validating {
    /// Starts compiling it on the blocking pool.
    fn start() -> Self {
        Validating::Compiling(tokio::task::spawn_blocking(PlanValidator::new))
    }

    /// The compiled validator (compiled here when its task failed).
    async fn ready(&mut self) -> &PlanValidator {
        if let Validating::Compiling(task) = self {
            let compiled = task.await.unwrap_or_else(|_| PlanValidator::new());
            *self = Validating::Ready(compiled);
        }
        match self {
            Validating::Ready(validator) => validator,
            Validating::Compiling(_) => unreachable!("compiled just above"),
        }
    }
}

/// Whether `e` says the provider was unreachable or failed (not the plan, not the settings):
/// a connection error, an HTTP or provider error, a cut or corrupted stream.
fn is_provider_failure(e: &crate::model::ModelError) -> bool {
    use crate::model::ModelError;
    matches!(
        e,
        ModelError::Connection(_)
            | ModelError::Http { .. }
            | ModelError::Api { .. }
            | ModelError::Incomplete(_)
            | ModelError::MalformedEvent(_)
    )
}

fn read_plan(
    outcome: &AgentOutcome,
    max_subtasks: usize,
    settings: &AgentSettings,
    validator: &PlanValidator,
) -> Result<Plan, PlanAnswer> {
    match outcome.stop_reason {
        AgentStopReason::Cancelled => return Err(PlanAnswer::Failed(PlanFailure::Cancelled)),
        AgentStopReason::Error => {
            if let Some(e) = outcome
                .model_error
                .as_ref()
                .filter(|e| e.is_settings_error())
            {
                return Err(PlanAnswer::Failed(PlanFailure::ModelSettings(e.clone())));
            }
            if let Some(e) = outcome
                .model_error
                .as_ref()
                .filter(|e| is_provider_failure(e))
            {
                return Err(PlanAnswer::Failed(PlanFailure::Provider(e.clone())));
            }
            let message = outcome
                .error
                .clone()
                .unwrap_or_else(|| "model error".into());
            return Err(PlanAnswer::Failed(PlanFailure::Model(message)));
        }
        _ => {}
    }
    // A reply that stopped at the output-token limit (the loop's only `completed` outcome with
    // an error) is named as such: "no JSON found" would send the model and the user looking for
    // the wrong problem.
    let cut_off = outcome.stop_reason == AgentStopReason::Completed && outcome.error.is_some();
    validator
        .parse(&outcome.final_text, max_subtasks)
        .map_err(|e| {
            PlanAnswer::Rejected(if cut_off {
                PlanError::Truncated {
                    max_output_tokens: settings.max_output_tokens,
                }
            } else {
                e
            })
        })
}

/// Stores the plan and one queued worker per subtask in the record (status `planned`).
fn save_plan(
    record: &mut RunRecord,
    plan: Plan,
    config: &Config,
    io: &RunIo,
) -> Result<PlannedRun, SwarmError> {
    record.plan = Some(plan.clone());
    record.workers = worker_records(record, &plan, config);
    record.status = RunStatus::Planned;
    // Flushed beside the first workers' start; the coordinator's first save waits for it.
    let flush = RecordFlush::start(record.save_deferring_sync()?);
    tracing::debug!(subtasks = plan.subtasks.len(), "saved the plan");
    let _ = io.events.send(SwarmEvent::PlanReady { plan });
    let mut planned = PlannedRun::from_record(record.clone())?;
    planned.set_flush(flush);
    Ok(planned)
}

/// Worker `w<i>` for the i-th subtask (1-based), with its branch and worktree directory.
fn worker_records(record: &RunRecord, plan: &Plan, config: &Config) -> Vec<WorkerRecord> {
    let env = EnvSnapshot::capture();
    let base = worktree_base(config, &env, &record.repo_root, &record.run_id);
    plan.subtasks
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let id = format!("w{}", i + 1);
            WorkerRecord::queued(
                id.clone(),
                s.id.clone(),
                s.title.clone(),
                worker_branch(&record.run_id, &id),
                base.join(&id),
            )
        })
        .collect()
}
