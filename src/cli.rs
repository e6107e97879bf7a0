//! Command-line interface definition (clap derive).

use ahelper_agents::permissions::PermissionRule;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

/// ahelper — a terminal AI coding assistant that can run a swarm of isolated agents.
///
/// With no prompt, starts the interactive REPL (`ahelper "<prompt>"` starts it with a first
/// prompt). `ahelper -p "…"` answers one prompt and exits. `ahelper swarm "<task>"` plans a large
/// change and runs parallel workers in git worktrees. Common flags go before or after `swarm`.
#[derive(Debug, Parser)]
#[command(name = "ahelper", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,

    /// First prompt of the REPL. Without a terminal it is answered once, as with `-p`.
    #[arg(value_name = "PROMPT")]
    pub first_prompt: Option<String>,

    /// Answer one prompt without the REPL and exit (headless). Use `-` to read it from stdin.
    #[arg(short = 'p', long = "print", value_name = "PROMPT")]
    pub prompt: Option<String>,

    /// Output of `-p`: `text` (the answer), `json` (one result object), `stream-json` (one JSON
    /// event per line).
    #[arg(long, value_enum)]
    pub output_format: Option<OutputFormat>,

    /// Text appended to the system prompt of this session (`-p` and the REPL).
    #[arg(long, value_name = "TEXT")]
    pub append_system_prompt: Option<String>,

    /// Resume the session with this id or unique id prefix (from `.ahelper/sessions/`).
    #[arg(long, value_name = "SESSION_ID", conflicts_with = "continue_latest")]
    pub resume: Option<String>,

    /// Continue the most recent session of this workspace.
    #[arg(short = 'c', long = "continue")]
    pub continue_latest: bool,

    /// MCP servers from this JSON file (Claude Code's `.mcp.json` format); trusted, started
    /// without asking. May be repeated. With `swarm`, each worker starts them in its worktree.
    #[arg(long, value_name = "FILE", visible_alias = "mcpConfig", global = true)]
    pub mcp_config: Vec<PathBuf>,

    #[command(flatten)]
    pub common: CommonArgs,
}

/// Options shared by every command.
#[derive(Debug, Args, Clone, Default)]
pub struct CommonArgs {
    /// Workspace directory (default: the current directory).
    #[arg(short = 'C', long = "cwd", value_name = "DIR", global = true)]
    pub cwd: Option<PathBuf>,

    /// Model name (overrides config `model`).
    #[arg(long, global = true)]
    pub model: Option<String>,

    /// Provider: `anthropic` or `openai` (any OpenAI-compatible server).
    #[arg(long, global = true)]
    pub provider: Option<String>,

    /// Provider base URL (overrides config `base_url`).
    #[arg(long, global = true, value_name = "URL")]
    pub base_url: Option<String>,

    /// Permission mode: default, accept-edits, plan or bypass.
    #[arg(long, global = true, value_name = "MODE")]
    pub permission_mode: Option<String>,

    /// Same as `--permission-mode bypass` (Claude Code's name).
    #[arg(long, global = true, conflicts_with = "permission_mode")]
    pub dangerously_skip_permissions: bool,

    /// Allow rules for this session, e.g. `run_command(git diff:*)`; several after one flag
    /// (`--allowedTools 'Bash(git diff:*)' Read`), several per value separated by commas or
    /// spaces, and the flag may be repeated. Claude Code's tool names work too (`Bash(git
    /// diff:*)`, Read, Edit, Write, Glob, Grep). Only rules are taken after the flag: a prompt
    /// or `swarm` after them stays a prompt or a subcommand (`--` ends the rules).
    #[arg(long, global = true, value_name = "RULES")]
    #[arg(visible_alias = "allowedTools")]
    pub allowed_tools: Vec<String>,

    /// Deny rules for this session, in the syntax of `--allowed-tools`.
    #[arg(long, global = true, value_name = "RULES")]
    #[arg(visible_alias = "disallowedTools")]
    pub disallowed_tools: Vec<String>,

    /// Another writable root besides the workspace (Claude Code's flag): file tools accept
    /// paths in it, commands may write in it under the sandbox, and its protected paths
    /// (`.git/`, `.ahelper/`…) stay protected. May be repeated. With `swarm`, every worker gets
    /// it (shared by all workers: they are not isolated from each other there).
    #[arg(long, global = true, value_name = "DIR")]
    pub add_dir: Vec<PathBuf>,

    /// Maximum model turns per prompt (config `agent.max_turns`, default 40).
    #[arg(long, global = true, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_turns: Option<u32>,

    /// OS sandbox of shell commands: `enforce` (landlock on Linux: writes only in the workspace
    /// and temp dir) or `off` (config `sandbox.mode`).
    #[arg(long, global = true, value_name = "MODE", value_parser = ["enforce", "off"])]
    pub sandbox: Option<String>,

    /// Verbose. `-p`: also print each tool call and its result on stderr (refused calls and
    /// retries are printed with or without it). REPL and `swarm`: no change on screen (tool calls
    /// and the status table are always shown). Every mode: the log file
    /// `$XDG_STATE_HOME/ahelper/logs/ahelper.log` records at `info` instead of `warn` level
    /// (`AHELPER_LOG` overrides both).
    #[arg(short, long, global = true)]
    pub verbose: bool,

    /// Trust this project's `.ahelper/config.toml` as it is now (its SHA-256 is recorded in
    /// `$XDG_STATE_HOME/ahelper/trusted-projects.json`), so settings that widen permissions
    /// or raise cost (model, prices, limits) apply; same as `ahelper trust`.
    #[arg(long, global = true)]
    pub trust_project: bool,
}

/// Output formats of `-p`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum OutputFormat {
    /// Plain answer text.
    #[default]
    Text,
    /// One JSON object with the result.
    Json,
    /// One JSON object per event (JSON Lines).
    StreamJson,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Plan a large change and run parallel workers in isolated git worktrees.
    Swarm(SwarmArgs),
    /// Trust this project's `.ahelper/config.toml` as it is now: its settings that widen
    /// permissions (mode, allow rules, a wider sandbox, endpoint) apply until the file changes.
    Trust,
    /// Run swarm workers for coordinators elsewhere: pull subtasks from a NATS JetStream queue
    /// until SIGTERM or Ctrl-C (see docs/distributed.md).
    Worker(WorkerArgs),
}

/// How to reach the NATS server of a distributed swarm.
#[derive(Debug, Args, Clone, Default)]
pub struct NatsArgs {
    /// NATS server URL (`nats://host:4222`, `tls://host:4222` for TLS; comma-separated for a
    /// cluster). With `swarm`: run the workers on `ahelper worker` machines (config
    /// `swarm.nats_url`).
    #[arg(long, value_name = "URL")]
    pub nats: Option<String>,

    /// NATS credentials file (`.creds`: JWT and NKey seed).
    #[arg(long, value_name = "FILE", env = "AHELPER_NATS_CREDS")]
    pub nats_creds: Option<PathBuf>,

    /// NATS user; the password is read from `AHELPER_NATS_PASSWORD`.
    #[arg(long, value_name = "USER", env = "AHELPER_NATS_USER")]
    pub nats_user: Option<String>,

    /// PEM file of CA certificates to trust for a `tls://` server.
    #[arg(long, value_name = "FILE", env = "AHELPER_NATS_CA")]
    pub nats_ca: Option<PathBuf>,
}

/// `ahelper worker`.
#[derive(Debug, Args, Clone)]
pub struct WorkerArgs {
    #[command(flatten)]
    pub nats: NatsArgs,

    /// Subtasks run at once (default: number of CPUs / 2, at least 1).
    #[arg(long, value_name = "N", value_parser = parse_positive)]
    pub concurrency: Option<usize>,

    /// Where clones, worktrees and transcripts live (default `$XDG_STATE_HOME/ahelper/remote`).
    #[arg(long, value_name = "DIR")]
    pub work_dir: Option<PathBuf>,

    /// This machine's name in the coordinator's table (default: host name and pid).
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,

    /// Act for the coordinator with this public key (`ahelper swarm key` prints it on the
    /// coordinator's machine); repeatable or comma-separated. Subtasks, cancels and answers
    /// not signed by a trusted key are refused.
    #[arg(
        long,
        value_name = "KEY",
        env = "AHELPER_TRUSTED_COORDINATORS",
        value_delimiter = ','
    )]
    pub trust_coordinator: Vec<String>,

    /// A file of trusted coordinator keys, one per line (`#` starts a comment).
    #[arg(long, value_name = "FILE", env = "AHELPER_TRUSTED_COORDINATORS_FILE")]
    pub trusted_coordinators_file: Option<PathBuf>,

    /// Fetch from and push to this repository URL, or any under this prefix when it ends with
    /// `/` or `:`; repeatable or comma-separated. A subtask of another repository is refused.
    #[arg(
        long,
        value_name = "URL",
        env = "AHELPER_WORKER_ALLOWED_REPOS",
        value_delimiter = ','
    )]
    pub allow_repo: Vec<String>,

    /// The tools a subtask's role may have on this machine (comma-separated; default: the
    /// built-in worker role's: read_file, write_file, edit_file, list_dir, glob, grep,
    /// run_command). Others in a subtask's role are dropped.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub worker_tools: Option<Vec<String>>,

    /// Let subtasks ask the coordinator's user about calls this machine's rules ask about;
    /// without it such calls are refused at once.
    #[arg(long)]
    pub allow_ask: bool,
}

/// `ahelper swarm`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct SwarmArgs {
    #[command(subcommand)]
    pub command: Option<SwarmCommand>,

    /// The task to plan and run.
    pub task: Option<String>,

    #[command(flatten)]
    pub run: SwarmRunArgs,
}

/// Options of a swarm run.
#[derive(Debug, Args, Clone, Default)]
pub struct SwarmRunArgs {
    /// Print the plan and stop.
    #[arg(long)]
    pub plan_only: bool,

    /// Start the workers without asking to confirm the plan.
    #[arg(short = 'y', long)]
    pub yes: bool,

    /// Workers running at once (config `swarm.max_workers`, default 4).
    #[arg(long, value_name = "N", value_parser = parse_positive)]
    pub max_workers: Option<usize>,

    /// Base commit or ref the workers start from (default: HEAD).
    #[arg(long, value_name = "REF")]
    pub base: Option<String>,

    /// Snapshot uncommitted changes into the base commit (the user's branch and index are not
    /// touched).
    #[arg(long)]
    pub include_uncommitted: bool,

    /// After a clean merge, merge the integration branch into the current branch.
    #[arg(long)]
    pub apply: bool,

    /// With `--apply`: merge even when workers added hazardous content (symlinks out of the
    /// repository, git drivers, submodules, large files, control characters in names, auto-run
    /// files) without asking.
    #[arg(long, requires = "apply")]
    pub allow_hazards: bool,

    /// Verification command run on the base, on each worker's worktree and on each merge
    /// candidate (config `swarm.verify`; default: detected from the repository).
    #[arg(long, value_name = "CMD", conflicts_with = "no_verify")]
    pub verify: Option<String>,

    /// Run without verification.
    #[arg(long)]
    pub no_verify: bool,

    /// Output: `text` (live table on a terminal, one line per event otherwise) or `stream-json`
    /// (one JSON event per line, each with a `type` key as in `-p`).
    #[arg(long, value_enum, default_value_t = SwarmOutputFormat::Text)]
    pub output_format: SwarmOutputFormat,

    #[command(flatten)]
    pub nats: NatsArgs,

    #[command(flatten)]
    pub shard: ShardArgs,
}

/// Where a swarm run's plan comes from when not from the coordinator: `--each` (deterministic
/// sharding of tracked files) or `--plan FILE`; and the subtask cap.
#[derive(Debug, Args, Clone, Default)]
pub struct ShardArgs {
    /// No planning turn: one subtask per group of tracked files matching GLOB (relative to the
    /// repository root; `*` stays in one directory, `**` crosses them). May be repeated.
    #[arg(long, value_name = "GLOB", conflicts_with = "plan")]
    pub each: Vec<String>,

    /// With `--each`: files per subtask (default 1).
    #[arg(long, value_name = "N", value_parser = parse_positive, requires = "each", conflicts_with = "by")]
    pub per: Option<usize>,

    /// With `--each`: one subtask per directory instead of per N files.
    #[arg(long, value_enum, value_name = "GROUPING", requires = "each")]
    pub by: Option<ShardGrouping>,

    /// Run the plan in FILE (JSON, the shape `--plan-only --output-format stream-json` shows in
    /// its `plan_ready` event and `.ahelper/runs/<run>/run.json` keeps under `plan`) instead of
    /// asking the coordinator; validated as a coordinator's plan is.
    #[arg(long, value_name = "FILE")]
    pub plan: Option<std::path::PathBuf>,

    /// Subtasks a run does at most, 1 to 1000 (config `swarm.max_subtasks`, default 64); a
    /// larger plan runs its first N and queues the rest in a plan file for `--plan`.
    #[arg(long, value_name = "N", value_parser = parse_subtask_cap)]
    pub max_subtasks: Option<usize>,
}

/// How `--each` groups files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ShardGrouping {
    /// One subtask per directory (the matching files directly in it).
    Dir,
}

/// Output formats of `swarm` and `swarm resume`: a run is a stream of events, so there is no
/// single-object `json` (as `-p` has).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum SwarmOutputFormat {
    /// Live table on a terminal, one line per event otherwise.
    #[default]
    Text,
    /// One JSON object per event (JSON Lines), each with a `type` key.
    StreamJson,
}

/// `ahelper swarm <subcommand>`.
#[derive(Debug, Subcommand)]
pub enum SwarmCommand {
    /// List runs of this repository (cleaned runs only with --all).
    Ls {
        /// Also list runs whose worktrees and branches `swarm clean` removed.
        #[arg(long)]
        all: bool,
    },
    /// Show a run's status table once.
    Status {
        /// Run id (a unique prefix is enough); default: the latest run.
        run: Option<String>,
    },
    /// Show a run's transcripts: the coordinator's, or one worker's.
    Logs {
        /// Run id (prefix); default: the latest run (`swarm logs w1` shows worker w1 of it).
        run: Option<String>,
        /// Worker id (e.g. `w1`), fixer or merger id (`fix-1`, `merge-1`) or `coordinator`
        /// (the default).
        worker: Option<String>,
        /// Keep printing new lines as they are written.
        #[arg(short, long)]
        follow: bool,
        /// Print raw JSON lines.
        #[arg(long)]
        json: bool,
    },
    /// Continue a stopped run: its unfinished workers, and retry its failed and skipped
    /// workers from their branches (their `wip` commits are kept).
    Resume {
        /// Run id (prefix).
        run: String,
        /// Retry only the failed workers.
        #[arg(long, conflicts_with = "worker")]
        only_failed: bool,
        /// Run only this worker (`w2`); may be repeated.
        #[arg(long, value_name = "ID")]
        worker: Vec<String>,
        /// Workers running at once.
        #[arg(long, value_name = "N", value_parser = parse_positive)]
        max_workers: Option<usize>,
        /// `text` (live table on a terminal, one line per event otherwise) or `stream-json`.
        #[arg(long, value_enum, default_value_t = SwarmOutputFormat::Text)]
        output_format: SwarmOutputFormat,
        /// Resume even though the run's remote, verification command or permission mode in
        /// `run.json` differs from what the run recorded outside the repository (or that record
        /// is missing): the values in `run.json` are recorded anew.
        #[arg(long)]
        accept_record: bool,
    },
    /// Print the public key this machine signs distributed runs with (made on first use); give
    /// it to `ahelper worker --trust-coordinator`.
    Key,
    /// Remove a run's worktrees and merged branches.
    Clean {
        /// Run id (prefix); omit with --all.
        run: Option<String>,
        /// Every run of this repository.
        #[arg(long)]
        all: bool,
        /// Also delete branches with commits that are not in the integration branch.
        #[arg(long)]
        force: bool,
        /// Also remove the run's record and transcripts (`.ahelper/runs/<run>/`) once its
        /// worktrees and branches are gone.
        #[arg(long)]
        purge: bool,
    },
}

/// The permission rules of `--allowed-tools`/`--disallowed-tools` values: each value holds
/// rules separated by commas or whitespace outside parentheses; Claude Code's tool names are
/// mapped to ahelper's (`Bash(git diff:*)` → `run_command(git diff:*)`).
///
/// # Errors
/// A rule that does not parse, with the parser's reason.
pub fn permission_rules(values: &[String]) -> Result<Vec<PermissionRule>, String> {
    let mut rules = vec![];
    for text in values.iter().flat_map(|v| split_rules(v)) {
        let (tool, rest) = text.split_at(text.find('(').unwrap_or(text.len()));
        let tool = ahelper_agents::hooks::CLAUDE_CODE_TOOL_NAMES
            .iter()
            .find(|(claude, _)| *claude == tool)
            .map_or(tool, |(_, ours)| ours);
        let rule_text = format!("{tool}{rest}");
        let rule = PermissionRule::parse(&rule_text)
            .map_err(|e| format!("invalid permission rule `{text}`: {e}"))?;
        rules.push(rule);
    }
    Ok(rules)
}

/// Splits `value` at commas and whitespace outside parentheses, dropping empty pieces.
fn split_rules(value: &str) -> Vec<String> {
    let mut rules = vec![];
    let mut current = String::new();
    let mut depth = 0usize;
    for c in value.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' | ' ' | '\t' | '\n' if depth == 0 => {
                if !current.is_empty() {
                    rules.push(std::mem::take(&mut current));
                }
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    if !current.is_empty() {
        rules.push(current);
    }
    rules
}

/// The flags whose values are permission rules.
const RULE_FLAGS: [&str; 4] = [
    "--allowedTools",
    "--allowed-tools",
    "--disallowedTools",
    "--disallowed-tools",
];

/// The command line with the rules written after a rule flag's value folded into that value,
/// as Claude Code's CLI reads them (`--allowedTools 'Bash(git diff:*)' 'Read'`: several values
/// after one flag). Only arguments that are rules — a known tool name (ahelper's, Claude
/// Code's, `mcp__…`) optionally followed by `(pattern)` — are taken, so a prompt or a
/// subcommand after the rules stays what it is; `--` ends the rules.
pub fn gather_rule_values(
    args: impl IntoIterator<Item = std::ffi::OsString>,
) -> Vec<std::ffi::OsString> {
    let mut out: Vec<std::ffi::OsString> = Vec::new();
    let mut args = args.into_iter().peekable();
    while let Some(arg) = args.next() {
        let is_rule_flag = arg.to_str().is_some_and(|a| RULE_FLAGS.contains(&a));
        out.push(arg);
        if !is_rule_flag {
            continue;
        }
        let Some(mut value) = args.next() else {
            break;
        };
        while let Some(next) = args
            .peek()
            .and_then(|a| a.to_str())
            .filter(|a| is_rule_list(a))
        {
            value.push(",");
            value.push(next);
            args.next();
        }
        out.push(value);
    }
    out
}

/// Whether `text` is one or more permission rules naming known tools.
fn is_rule_list(text: &str) -> bool {
    let rules = split_rules(text);
    !rules.is_empty()
        && rules.iter().all(|rule| {
            let (tool, rest) = rule.split_at(rule.find('(').unwrap_or(rule.len()));
            let known = tool.starts_with("mcp__")
                || ahelper_agents::hooks::CLAUDE_CODE_TOOL_NAMES
                    .iter()
                    .any(|(claude, ours)| tool == *claude || tool == *ours);
            known && (rest.is_empty() || (rest.starts_with('(') && rest.ends_with(')')))
        })
}

/// A whole number ≥ 1.
fn parse_positive(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!("`{s}` is not a whole number of at least 1")),
    }
}

/// `--max-subtasks`: 1 to 1000 (the range of `swarm.max_subtasks`).
fn parse_subtask_cap(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (1..=1_000).contains(&n) => Ok(n),
        _ => Err(format!("`{s}` is not a whole number from 1 to 1000")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_code_rules_map_to_ahelper_tools() {
        let rules = permission_rules(&[
            "Bash(git diff:*),Read".to_string(),
            "Write(notes.txt) grep".to_string(),
        ])
        .unwrap();
        let shown: Vec<String> = rules.iter().map(|r| r.to_string()).collect();
        assert_eq!(
            shown,
            [
                "run_command(git diff:*)",
                "read_file",
                "write_file(notes.txt)",
                "grep"
            ]
        );
        assert!(permission_rules(&["Bash(".to_string()]).is_err());
    }

    #[test]
    fn common_flags_go_before_or_after_the_subcommand() {
        let cli =
            Cli::try_parse_from(["ahelper", "--model", "m", "-C", "/tmp", "swarm", "ls"]).unwrap();
        assert_eq!(cli.common.model.as_deref(), Some("m"));
        assert!(matches!(cli.command, Some(Command::Swarm(_))));
        let cli = Cli::try_parse_from(["ahelper", "swarm", "task", "--model", "m"]).unwrap();
        assert_eq!(cli.common.model.as_deref(), Some("m"));
        let cli = Cli::try_parse_from(["ahelper", "explain x"]).unwrap();
        assert_eq!(cli.first_prompt.as_deref(), Some("explain x"));
        assert!(cli.command.is_none());
        assert!(
            Cli::try_parse_from([
                "ahelper",
                "--dangerously-skip-permissions",
                "--permission-mode",
                "plan"
            ])
            .is_err()
        );
    }
}
