//! `ahelper worker --nats URL`: a worker machine of a distributed swarm. It runs subtasks of
//! coordinators elsewhere with this machine's model, keys and configuration until the first
//! SIGTERM, SIGHUP or Ctrl-C; then running subtasks commit and push `wip` and are handed back,
//! and it exits 0. A second signal exits at once (130).

use crate::cli::{NatsArgs, WorkerArgs};
use crate::interrupts::{Interrupts, say};
use ahelper_agents::config::{Config, EnvSnapshot};
use ahelper_agents::session::model_client;
use ahelper_agents::swarm::remote::auth::TrustedKeys;
use ahelper_agents::swarm::remote::host::{HostModel, HostOptions, HostOutcome, serve};
use ahelper_agents::swarm::remote::limits::{DEFAULT_TOOLS, RepoAllowList, WorkerLimits};
use ahelper_agents::swarm::remote::{NatsOptions, connect};
use std::path::PathBuf;
use tokio_util::sync::CancellationToken;

/// The connection options of `--nats …` (and `AHELPER_NATS_PASSWORD` with `--nats-user`);
/// `url` is the server to use (the flag's, or the config's).
pub fn nats_options(args: &NatsArgs, url: String, env: &EnvSnapshot, name: &str) -> NatsOptions {
    let password = env
        .get("AHELPER_NATS_PASSWORD")
        .unwrap_or_default()
        .to_string();
    NatsOptions {
        url,
        creds_file: args.nats_creds.clone(),
        user_password: args.nats_user.clone().map(|user| (user, password)),
        ca_file: args.nats_ca.clone(),
        name: name.to_string(),
        signing_key: signing_key_path(env),
        inbox_prefix: Some(ahelper_agents::swarm::remote::connect::COORDINATOR_INBOX.into()),
    }
}

/// The coordinator's signing key: `AHELPER_NATS_SIGNING_KEY`, else
/// `$XDG_STATE_HOME/ahelper/nats-signing.nk`.
pub fn signing_key_path(env: &EnvSnapshot) -> Option<PathBuf> {
    env.get("AHELPER_NATS_SIGNING_KEY")
        .map(PathBuf::from)
        .or_else(|| env.state_dir().map(|d| d.join("nats-signing.nk")))
}

/// The limits of this worker machine from its flags; an error message when a trusted key or
/// its file is not valid.
fn limits(args: &WorkerArgs) -> Result<WorkerLimits, String> {
    let mut keys = args.trust_coordinator.clone();
    if let Some(file) = &args.trusted_coordinators_file {
        let text = std::fs::read_to_string(file).map_err(|e| {
            format!(
                "cannot read the trusted coordinators file {}: {e}",
                file.display()
            )
        })?;
        keys.extend(
            text.lines()
                .map(|l| l.split('#').next().unwrap_or_default().trim())
                .filter(|l| !l.is_empty())
                .map(str::to_string),
        );
    }
    keys.retain(|k| !k.trim().is_empty());
    if keys.is_empty() || args.allow_repo.iter().all(|r| r.trim().is_empty()) {
        return Err(
            "`ahelper worker` acts only for coordinators it trusts and on repositories it allows: give --trust-coordinator KEY (the key `ahelper swarm key` prints on the coordinator's machine) and --allow-repo URL (a prefix ends with `/`)"
                .into(),
        );
    }
    let trusted = TrustedKeys::parse(&keys).map_err(|e| e.to_string())?;
    let tools = match &args.worker_tools {
        Some(tools) => tools.iter().map(|t| t.trim().to_string()).collect(),
        None => DEFAULT_TOOLS.map(str::to_string).to_vec(),
    };
    Ok(WorkerLimits {
        trusted: std::sync::Arc::new(trusted),
        repos: RepoAllowList::new(&args.allow_repo),
        tools,
        allow_ask: args.allow_ask,
    })
}

/// Runs `ahelper worker`; returns the exit status.
pub fn run(
    rt: &tokio::runtime::Runtime,
    args: WorkerArgs,
    config: Config,
    env: &EnvSnapshot,
) -> i32 {
    let Some(url) = args
        .nats
        .nats
        .clone()
        .or_else(|| config.swarm.nats_url.clone())
    else {
        eprintln!(
            "ahelper: `ahelper worker` needs the NATS server: --nats URL (or `[swarm] nats_url`)"
        );
        return crate::EXIT_USAGE;
    };
    let provider = match config.provider() {
        Ok(p) => p.clone(),
        Err(e) => {
            eprintln!("ahelper: {e}");
            return crate::EXIT_USAGE;
        }
    };
    let Some(work_dir) = args
        .work_dir
        .clone()
        .or_else(|| env.state_dir().map(|d| d.join("remote")))
    else {
        eprintln!(
            "ahelper: no work dir: pass --work-dir DIR (neither XDG_STATE_HOME nor HOME is set)"
        );
        return crate::EXIT_USAGE;
    };
    let name = args.name.clone().unwrap_or_else(default_name);
    let limits = match limits(&args) {
        Ok(limits) => limits,
        Err(message) => {
            eprintln!("ahelper: {message}");
            return crate::EXIT_USAGE;
        }
    };
    let options = HostOptions {
        concurrency: args.concurrency.unwrap_or_else(default_concurrency),
        work_dir: absolute(work_dir),
        name: name.clone(),
        limits,
    };
    let mut nats = nats_options(&args.nats, url, env, &format!("ahelper worker {name}"));
    nats.signing_key = None;
    nats.inbox_prefix = Some(ahelper_agents::swarm::remote::connect::WORKER_INBOX.into());
    let model = HostModel {
        client: model_client(&provider),
        model: provider.model.clone(),
        config,
    };
    rt.block_on(work(nats, options, model))
}

async fn work(nats: NatsOptions, options: HostOptions, model: HostModel) -> i32 {
    let stop = CancellationToken::new();
    let signals = tokio::spawn(stop_on_signals(stop.clone()));
    let connection = match connect(&nats).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ahelper: {e}");
            return 1;
        }
    };
    eprintln!(
        "ahelper worker {}: pulling subtasks from {} ({} at once, work dir {})",
        options.name,
        ahelper_agents::swarm::remote::connect::redacted(&nats.url),
        options.concurrency,
        options.work_dir.display()
    );
    let outcome = serve(connection, options, model, stop).await;
    signals.abort();
    match outcome {
        Ok(HostOutcome::Stopped {
            completed,
            released,
        }) => {
            eprintln!(
                "ahelper worker: stopped; {completed} subtask(s) done, {released} handed back"
            );
            0
        }
        Err(e) => {
            eprintln!("ahelper: {e}");
            1
        }
    }
}

/// The first signal stops taking work; the second exits at once.
async fn stop_on_signals(stop: CancellationToken) {
    let mut interrupts = Interrupts::new();
    let first = interrupts.next().await;
    say(&format!(
        "ahelper worker: {}: no new subtasks; running ones push wip and are handed back (again to exit at once)",
        first.name()
    ));
    stop.cancel();
    let second = interrupts.next().await;
    say(&format!("ahelper worker: {}: exiting now", second.name()));
    std::process::exit(130);
}

/// Number of CPUs / 2, at least 1.
fn default_concurrency() -> usize {
    std::thread::available_parallelism().map_or(1, |n| (n.get() / 2).max(1))
}

/// `<host name>-<pid>`, with characters outside `A-Z a-z 0-9 . _ -` replaced by `-`.
fn default_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .unwrap_or_else(|_| "worker".into());
    let host: String = host
        .trim()
        .chars()
        .take(48)
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect();
    let host = host.trim_start_matches('.');
    format!(
        "{}-{}",
        if host.is_empty() { "worker" } else { host },
        std::process::id()
    )
}

fn absolute(path: PathBuf) -> PathBuf {
    if path.is_absolute() {
        path
    } else {
        std::env::current_dir().map_or(path.clone(), |cwd| cwd.join(path))
    }
}
