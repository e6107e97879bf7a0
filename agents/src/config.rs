//! Layered configuration.
//!
//! Precedence, highest first (as the README's "Configuration" says): command-line flags >
//! environment (`AHELPER_*`) > project `<workspace>/.ahelper/config.toml` > user
//! `$XDG_CONFIG_HOME/ahelper/config.toml` > provider environment fallbacks
//! (`ANTHROPIC_BASE_URL`, `OPENAI_BASE_URL`) > defaults.
//!
//! Each file is parsed on its own into [`ConfigFile`] (unknown keys are errors that name the
//! file, line and key), then the layers are merged field by field: scalars from the higher layer
//! win, permission rule lists are concatenated (deny rules of every layer stay in force).
//! Configuration files are only read at the workspace root, never above it (a parent directory's
//! `.ahelper/` is a config-injection vector).
//!
//! API keys are never read from files: `api_key_env` names the environment variable that holds
//! the key. [`Config::redactor`] knows the values of the key variables and of the variables
//! listed in `[secrets] redact_env`; [`Config::secret_env`] names the variables the binary
//! removes from its own environment once the configuration is read
//! ([`crate::hardening::scrub_environment`]).

use crate::model::{ApiKey, ProviderKind, ProviderSettings, SettingsOrigin, ToolProtocol};
use crate::permissions::{PermissionMode, PermissionPolicy, PermissionRule, RuleSet};
use crate::redact::{Redactor, is_credential_name};
use crate::sandbox_os::{SandboxMode, SandboxSettings, default_deny_read};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Default Anthropic endpoint (without `/v1`).
pub const ANTHROPIC_DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// Default OpenAI endpoint (with `/v1`).
pub const OPENAI_DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// Default Anthropic model.
pub const ANTHROPIC_DEFAULT_MODEL: &str = "claude-sonnet-4-5";
/// Default OpenAI model.
pub const OPENAI_DEFAULT_MODEL: &str = "gpt-4.1";
/// Output tokens requested per turn when `max_output_tokens` is not set.
pub const DEFAULT_MAX_OUTPUT_TOKENS: u32 = 8_192;
/// Context window of the default Anthropic model, in tokens (also assumed for a client without
/// provider settings).
pub const ANTHROPIC_DEFAULT_CONTEXT_WINDOW: u32 = 200_000;
/// Context window of the default OpenAI model, in tokens.
pub const OPENAI_DEFAULT_CONTEXT_WINDOW: u32 = 128_000;

/// Errors while loading or resolving configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A config file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A config file is not valid TOML or has a wrong or unknown key. `message` comes from the
    /// TOML parser and names the line, column and key.
    #[error("invalid config file {path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// Parser message with line/column and key.
        message: String,
    },
    /// A value is not acceptable (bad permission rule, bad mode, unknown provider…).
    #[error("invalid setting `{key}` in {origin}: {message}")]
    Invalid {
        /// The key, e.g. `permissions.allow`.
        key: String,
        /// Where the value came from (file path, `environment`, `command line`).
        origin: String,
        /// What is wrong and what is expected.
        message: String,
    },
    /// No model provider can be used. The binary exits with code 2 on this error.
    #[error(
        "no usable model is configured: {reason}.\n\
         Set one of:\n  \
         ANTHROPIC_API_KEY (Anthropic; optional ANTHROPIC_BASE_URL)\n  \
         OPENAI_API_KEY and/or OPENAI_BASE_URL (OpenAI or any OpenAI-compatible server: Ollama, vLLM, llama.cpp, LM Studio…)\n\
         or put `provider`, `model`, `base_url` and `api_key_env` in .ahelper/config.toml or \
         ~/.config/ahelper/config.toml (or use --provider/--model)."
    )]
    NoModel {
        /// What is missing.
        reason: NoModelReason,
    },
    /// Writing a rule to the project config failed.
    #[error("cannot update {path}: {message}")]
    Write {
        /// The file.
        path: PathBuf,
        /// What failed.
        message: String,
    },
}

/// Declares one table of a configuration file (a struct named like `RetryFile`): every field
/// public, `Default` (an absent table), (de)serialised, and an unknown key is an error.
macro_rules! config_table {
    ($(#[$meta:meta])* $name:ident {
        $($(#[$field_meta:meta])* $field:ident: $ty:ty,)*
    }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            $($(#[$field_meta])* pub $field: $ty,)*
        }
    };
}

config_table! {
    /// `[retry]` table.
    RetryFile {
        /// Total attempts per model request (1 = no retry). Default 5.
        max_attempts: Option<u32>,
        /// First backoff delay in ms. Default 1,000.
        base_delay_ms: Option<u64>,
        /// Largest backoff delay in ms. Default 60,000.
        max_delay_ms: Option<u64>,
        /// Time without a byte from the provider before an attempt fails, in ms. Default 120,000.
        idle_timeout_ms: Option<u64>,
    }
}

config_table! {
    /// `[agent]` table.
    AgentFile {
        /// Turns per prompt before stopping with `max_turns`. Default 40.
        max_turns: Option<u32>,
        /// Identical consecutive tool calls before stopping with `repeated_call`. Default 3.
        repeat_limit: Option<u32>,
        /// Tool output cap in characters. Default 30,000.
        max_tool_output_chars: Option<usize>,
        /// Time limit of one file-tool call (`read_file`, `grep`, `glob`, …), in seconds.
        /// Default 60.
        file_tool_timeout_s: Option<u64>,
        /// Fraction of `context_window` (0 < x ≤ 1) at which older turns are compacted into a
        /// summary. Default 0.8.
        compact_threshold: Option<f64>,
    }
}

config_table! {
    /// `[permissions]` table.
    PermissionsFile {
        /// `default`, `accept-edits`, `plan` or `bypass`.
        mode: Option<String>,
        /// Rules that allow without asking, e.g. `run_command(cargo test:*)`.
        #[serde(default)]
        allow: Vec<String>,
        /// Rules that always ask.
        #[serde(default)]
        ask: Vec<String>,
        /// Rules that always refuse (in every mode).
        #[serde(default)]
        deny: Vec<String>,
    }
}

config_table! {
    /// `[swarm]` table.
    SwarmFile {
        /// Workers running at once. Default 4.
        max_workers: Option<usize>,
        /// Subtasks a run does at most (a larger plan runs in batches). Default 64.
        max_subtasks: Option<usize>,
        /// Names of the declared MCP servers swarm workers start (besides `--mcp-config` files'
        /// and the worker role's `mcp_servers`). Default none.
        mcp_servers: Option<Vec<String>>,
        /// Turns per worker. Default 30.
        worker_max_turns: Option<u32>,
        /// Run-wide token budget (input + output tokens). Default 4,000,000.
        token_budget: Option<u64>,
        /// Run-wide wall-clock limit in seconds. Default 3,600.
        time_limit_s: Option<u64>,
        /// Where worker worktrees are created. Default
        /// `$XDG_STATE_HOME/ahelper/worktrees/<repo-id>/<run>/<worker>`.
        worktree_root: Option<PathBuf>,
        /// Verification command (a shell command line run with `bash -c` in a worktree), e.g.
        /// `cargo test`. Unset: one is detected from the repository
        /// ([`crate::verify::detect_command`]). Must not be empty.
        #[serde(default, deserialize_with = "verify_command")]
        verify: Option<String>,
        /// Time limit of one verification run, in seconds (1 to 86,400). Default 600.
        #[serde(default, deserialize_with = "verify_timeout_s")]
        verify_timeout_s: Option<u64>,
        /// Extra rounds a worker gets to fix new verification failures in its worktree (0 to 10).
        /// Default 2.
        #[serde(default, deserialize_with = "worker_fix_rounds")]
        worker_fix_rounds: Option<u32>,
        /// Fixer agents tried on a merge candidate that fails verification (0 to 10). Default 2.
        #[serde(default, deserialize_with = "merge_fix_attempts")]
        merge_fix_attempts: Option<u32>,
        /// Verification worktrees (and verification commands) of the merge queue at once, 1 to
        /// 16: a red batch is split and its parts verified in parallel. Default 2.
        #[serde(default, deserialize_with = "verify_slots")]
        verify_slots: Option<u32>,
        /// A file a worker's branch adds that is larger than this many megabytes (10⁶ bytes) is
        /// flagged as a hazard ([`ahelper_worktrees::scan_hazards`]). Default 10.
        max_file_mb: Option<u64>,
        /// Shell command line run (`bash -c`) in each new worker worktree before its worker starts,
        /// e.g. `npm ci`; its output goes into the worker's transcript, and a failure fails that
        /// worker. Must not be blank. Unset: nothing runs.
        #[serde(default, deserialize_with = "setup_command")]
        setup: Option<String>,
        /// Size guard of `.worktreeinclude`, in megabytes (10⁶ bytes) per worktree: an ignored
        /// entry that does not fit is skipped and named. Default 1,000.
        worktree_include_max_mb: Option<u64>,
        /// Warm cargo builds in new worker worktrees: `"auto"` (default) seeds a Rust project's
        /// new worktree `target/debug` with the dependency artifacts of the checkout's (copied,
        /// copy-on-write where supported, within `worktree_include_max_mb`) unless the
        /// `.worktreeinclude` covers `target/` or `CARGO_TARGET_DIR` is set; `"off"`: never.
        warm_cargo: Option<WarmCargo>,
        /// NATS server of remote workers (`nats://host:4222`, `tls://…`); set, `ahelper swarm`
        /// runs its workers on `ahelper worker` machines (`docs/distributed.md`). Unset: locally.
        nats_url: Option<String>,
        /// The git remote remote workers fetch from and push to. Default `origin`.
        remote: Option<String>,
    }
}

/// Deserialises an integer and checks `min ..= max`; the error names `key` and goes through the
/// TOML parser, which adds the file's line and column.
fn in_range<'de, D, T>(d: D, key: &str, min: u64, max: u64) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de> + Copy + Into<u64>,
{
    let value = T::deserialize(d)?;
    let v: u64 = value.into();
    if (min..=max).contains(&v) {
        Ok(Some(value))
    } else {
        Err(serde::de::Error::custom(format!(
            "`{key} = {v}` is out of range: expected {min} to {max}"
        )))
    }
}

fn verify_timeout_s<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    in_range(d, "swarm.verify_timeout_s", 1, 86_400)
}

fn worker_fix_rounds<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    in_range(d, "swarm.worker_fix_rounds", 0, 10)
}

fn merge_fix_attempts<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    in_range(d, "swarm.merge_fix_attempts", 0, 10)
}

fn verify_slots<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    in_range(d, "swarm.verify_slots", 1, 16)
}

/// `[swarm] warm_cargo`: whether new worker worktrees of a Rust project get the checkout's
/// dependency artifacts ([`ahelper_worktrees::list_cargo_seed`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WarmCargo {
    /// Seed when the project is a Rust project with a built, git-ignored `target/debug`, its
    /// `.worktreeinclude` does not cover `target/` and `CARGO_TARGET_DIR` is not set.
    #[default]
    Auto,
    /// Never: workers build their dependencies from scratch (unless `.worktreeinclude` brings
    /// `target/`).
    Off,
}

/// Deserialises `swarm.setup`: a command line that is not blank.
fn setup_command<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let command = String::deserialize(d)?;
    if command.trim().is_empty() {
        return Err(serde::de::Error::custom(
            "`swarm.setup` is empty: give a command such as \"npm ci\", or remove the key",
        ));
    }
    Ok(Some(command))
}

/// Deserialises `swarm.verify`: a command line that is not blank.
fn verify_command<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let command = String::deserialize(d)?;
    if command.trim().is_empty() {
        return Err(serde::de::Error::custom(
            "`swarm.verify` is empty: give a command such as \"cargo test\", or \
             remove the key to let ahelper detect one (--no-verify turns verification off)",
        ));
    }
    Ok(Some(command))
}

config_table! {
    /// `[sandbox]` table: the OS sandbox of `run_command` children (see [`crate::sandbox_os`]).
    SandboxFile {
        /// `enforce` (default; landlock where the kernel has it) or `off`.
        mode: Option<String>,
        /// Extra paths commands may write (besides the workspace and the temp dir). `~/` is the
        /// home directory; relative paths are relative to the workspace root. Lists of every layer
        /// are joined.
        #[serde(default)]
        writable: Vec<PathBuf>,
        /// Extra paths commands may not read, added to the defaults `~/.ssh`, `~/.aws`, `~/.gnupg`,
        /// `~/.config/ahelper`. Lists of every layer are joined.
        #[serde(default)]
        deny_read: Vec<PathBuf>,
        /// `false` denies TCP bind and connect to commands (landlock ABI ≥ 4). Default `true`.
        network: Option<bool>,
        /// Processes and threads a command may run at once. Default 4,096.
        max_processes: Option<u32>,
        /// MiB of memory each process of a command may allocate (`RLIMIT_DATA`); `0` = no
        /// limit. Default 8,192.
        max_memory_mb: Option<u64>,
    }
}

config_table! {
    /// `[secrets]` table.
    SecretsFile {
        /// Names of environment variables whose values are replaced by `[REDACTED:<NAME>]` in tool
        /// results, transcripts, logs and events (besides the provider keys, always redacted).
        /// Lists of every layer are joined.
        #[serde(default)]
        redact_env: Vec<String>,
    }
}

config_table! {
    /// One configuration file, every field optional.
    ConfigFile {
        /// `anthropic` or `openai` (any OpenAI-compatible server).
        provider: Option<String>,
        /// Model name.
        model: Option<String>,
        /// Provider base URL.
        base_url: Option<String>,
        /// Name of the environment variable holding the API key.
        api_key_env: Option<String>,
        /// Output-token limit per turn. Default 8,192.
        max_output_tokens: Option<u32>,
        /// Model context window in tokens. Default 200,000 (Anthropic) / 128,000 (OpenAI).
        context_window: Option<u32>,
        /// `native` or `text`.
        tool_protocol: Option<String>,
        /// Retry settings.
        #[serde(default)]
        retry: RetryFile,
        /// Agent-loop settings.
        #[serde(default)]
        agent: AgentFile,
        /// Permission mode and rules.
        #[serde(default)]
        permissions: PermissionsFile,
        /// Swarm settings.
        #[serde(default)]
        swarm: SwarmFile,
        /// Command sandbox settings.
        #[serde(default)]
        sandbox: SandboxFile,
        /// Secret redaction settings.
        #[serde(default)]
        secrets: SecretsFile,
        /// Hooks per event (read from the user config only; see [`crate::hooks`]).
        #[serde(default)]
        hooks: crate::hooks::HooksFile,
        /// Prices of models without a built-in one (or overriding it), by exact model name:
        /// `[pricing."model"] input_per_mtok = …, output_per_mtok = …` (US dollars per million
        /// tokens; see [`crate::pricing`]).
        #[serde(default)]
        pricing: BTreeMap<String, crate::pricing::Price>,
        /// `[mcp_servers.NAME]`: MCP servers (Codex's shape; see [`crate::mcp::config`]). A higher
        /// layer replaces a server of the same name.
        #[serde(default)]
        mcp_servers: std::collections::BTreeMap<String, crate::mcp::McpServerFile>,
    }
}

impl ConfigFile {
    /// Parses TOML text; `path` is only used in the error.
    ///
    /// # Errors
    /// [`ConfigError::Parse`] naming line, column and key.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            message: e.to_string(),
        })
    }

    /// Reads and parses a file; a missing file is an empty config. Numeric values are checked
    /// against their ranges ([`crate::config_ranges::KEY_RANGES`]).
    ///
    /// # Errors
    /// [`ConfigError::Read`], [`ConfigError::Parse`], or [`ConfigError::Invalid`] naming file,
    /// line and key of a value out of range or a bad permission rule.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        match std::fs::read_to_string(path) {
            Ok(text) => {
                let file = Self::parse(&text, path)?;
                crate::config_ranges::check_ranges(&file, &text, path)?;
                resolve_permissions(&file.permissions, &path.display().to_string())?;
                check_prices(&file.pricing, path)?;
                crate::hooks::validate(&file.hooks).map_err(|(key, message)| {
                    ConfigError::Invalid {
                        key,
                        origin: path.display().to_string(),
                        message,
                    }
                })?;
                Ok(file)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(source) => Err(ConfigError::Read {
                path: path.to_path_buf(),
                source,
            }),
        }
    }

    /// Merges `higher` over `self`: scalars from `higher` win when set; rule lists are
    /// concatenated (lower layer first).
    pub fn merged_with(mut self, higher: ConfigFile) -> Self {
        macro_rules! over {
            ($($field:ident).+) => {
                if higher.$($field).+.is_some() {
                    self.$($field).+ = higher.$($field).+.clone();
                }
            };
        }
        over!(provider);
        over!(model);
        over!(base_url);
        over!(api_key_env);
        over!(max_output_tokens);
        over!(context_window);
        over!(tool_protocol);
        over!(retry.max_attempts);
        over!(retry.base_delay_ms);
        over!(retry.max_delay_ms);
        over!(retry.idle_timeout_ms);
        over!(agent.max_turns);
        over!(agent.repeat_limit);
        over!(agent.max_tool_output_chars);
        over!(agent.file_tool_timeout_s);
        over!(agent.compact_threshold);
        over!(permissions.mode);
        over!(swarm.max_workers);
        over!(swarm.max_subtasks);
        over!(swarm.mcp_servers);
        over!(swarm.worker_max_turns);
        over!(swarm.token_budget);
        over!(swarm.time_limit_s);
        over!(swarm.worktree_root);
        over!(swarm.verify);
        over!(swarm.verify_timeout_s);
        over!(swarm.worker_fix_rounds);
        over!(swarm.merge_fix_attempts);
        over!(swarm.verify_slots);
        over!(swarm.max_file_mb);
        over!(swarm.setup);
        over!(swarm.worktree_include_max_mb);
        over!(swarm.warm_cargo);
        over!(swarm.nats_url);
        over!(swarm.remote);
        over!(sandbox.mode);
        over!(sandbox.network);
        over!(sandbox.max_processes);
        over!(sandbox.max_memory_mb);
        self.sandbox.writable.extend(higher.sandbox.writable);
        self.sandbox.deny_read.extend(higher.sandbox.deny_read);
        self.secrets.redact_env.extend(higher.secrets.redact_env);
        self.permissions.allow.extend(higher.permissions.allow);
        self.permissions.ask.extend(higher.permissions.ask);
        self.permissions.deny.extend(higher.permissions.deny);
        self.pricing.extend(higher.pricing);
        for (event, groups) in higher.hooks {
            self.hooks.entry(event).or_default().extend(groups);
        }
        self.mcp_servers.extend(higher.mcp_servers);
        self
    }
}

/// Settings given on the command line (highest precedence).
#[derive(Debug, Clone, Default)]
pub struct CliOverrides {
    /// `--provider`.
    pub provider: Option<String>,
    /// `--model`.
    pub model: Option<String>,
    /// `--base-url`.
    pub base_url: Option<String>,
    /// `--permission-mode`.
    pub permission_mode: Option<String>,
    /// `--max-turns`.
    pub max_turns: Option<u32>,
    /// `--sandbox` (`enforce` or `off`).
    pub sandbox: Option<String>,
    /// `--add-dir`: more writable roots, as given (relative to the process's current
    /// directory); each must be an existing directory.
    pub add_dirs: Vec<PathBuf>,
    /// The project config's settings apply whatever its trust
    /// ([`crate::project_trust`]): set by the binary once the user trusted the file.
    pub trusted_project: bool,
}

/// Agent-loop limits after resolution.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentLimits {
    /// Turns per prompt.
    pub max_turns: u32,
    /// Identical consecutive calls before stopping.
    pub repeat_limit: u32,
    /// Tool output cap in characters.
    pub max_tool_output_chars: usize,
    /// Time limit of one file-tool call (`agent.file_tool_timeout_s`, default
    /// [`crate::tools::DEFAULT_FILE_TOOL_TIMEOUT`]).
    pub file_tool_timeout: std::time::Duration,
    /// Hooks of the user config (project hooks are never here).
    pub hooks: crate::hooks::HooksFile,
    /// Fraction of the context window at which the history is compacted.
    pub compact_threshold: f64,
}

/// Default `[agent] compact_threshold`: compact at 80% of the context window.
pub const DEFAULT_COMPACT_THRESHOLD: f64 = 0.8;

/// Default `[swarm] max_subtasks`: enough for a coordinator to plan tens of subtasks for tens
/// of workers' worth of work; a larger plan runs in batches.
pub const DEFAULT_MAX_SUBTASKS: usize = 64;

/// Swarm limits after resolution.
#[derive(Debug, Clone, PartialEq)]
pub struct SwarmLimits {
    /// Workers at once.
    pub max_workers: usize,
    /// Subtasks per plan.
    pub max_subtasks: usize,
    /// `[swarm] mcp_servers`: declared MCP servers the workers start.
    pub mcp_servers: Vec<String>,
    /// Turns per worker.
    pub worker_max_turns: u32,
    /// Run-wide token budget.
    pub token_budget: u64,
    /// Run-wide wall-clock limit in seconds.
    pub time_limit_s: u64,
    /// Worktree root override.
    pub worktree_root: Option<PathBuf>,
    /// `swarm.verify`: the configured verification command; `None` = detect one.
    pub verify: Option<String>,
    /// `swarm.verify_timeout_s`: time limit of one verification run, in seconds.
    pub verify_timeout_s: u64,
    /// `swarm.worker_fix_rounds`: extra rounds for a worker whose verification shows new
    /// failures.
    pub worker_fix_rounds: u32,
    /// `swarm.merge_fix_attempts`: fixer agents tried on a red merge candidate.
    pub merge_fix_attempts: u32,
    /// `swarm.verify_slots`: verification worktrees of the merge queue at once.
    pub verify_slots: u32,
    /// Files larger than this many bytes in a worker's branch are hazards.
    pub max_file_bytes: u64,
    /// `swarm.setup`: run in each new worker worktree before its worker starts.
    pub setup: Option<String>,
    /// `swarm.worktree_include_max_mb` in bytes: the `.worktreeinclude` size guard per worktree.
    pub include_max_bytes: u64,
    /// `swarm.warm_cargo`: seed new worktrees' `target/debug` with dependency artifacts.
    pub warm_cargo: WarmCargo,
    /// `swarm.nats_url`: run workers on remote machines through this NATS server.
    pub nats_url: Option<String>,
    /// `swarm.remote`: the git remote both sides reach (default `origin`).
    pub remote: String,
}

/// Default of `swarm.verify_timeout_s`, in seconds.
pub const DEFAULT_VERIFY_TIMEOUT_S: u64 = 600;
/// Default of `swarm.worker_fix_rounds`.
pub const DEFAULT_WORKER_FIX_ROUNDS: u32 = 2;
/// Default of `swarm.merge_fix_attempts`.
pub const DEFAULT_MERGE_FIX_ATTEMPTS: u32 = 2;

/// The environment as seen by configuration: a snapshot passed in explicitly so that tests (and
/// parallel sessions) never depend on the process environment.
#[derive(Debug, Clone, Default)]
pub struct EnvSnapshot {
    vars: BTreeMap<String, String>,
}

impl EnvSnapshot {
    /// Captures the process environment (non-UTF-8 variables are skipped).
    pub fn capture() -> Self {
        EnvSnapshot {
            vars: std::env::vars().collect(),
        }
    }

    /// A snapshot from explicit pairs.
    pub fn from_pairs<I: IntoIterator<Item = (String, String)>>(pairs: I) -> Self {
        EnvSnapshot {
            vars: pairs.into_iter().collect(),
        }
    }

    /// Every variable, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.vars.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// A variable's value when set and non-empty.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.vars
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// The user config file: `$XDG_CONFIG_HOME/ahelper/config.toml`, else
    /// `$HOME/.config/ahelper/config.toml` (XDG Base Directory spec,
    /// <https://specifications.freedesktop.org/basedir-spec/latest/>).
    pub fn user_config_path(&self) -> Option<PathBuf> {
        self.xdg_dir("XDG_CONFIG_HOME", ".config")
            .map(|d| d.join("ahelper").join("config.toml"))
    }

    /// `$XDG_STATE_HOME/ahelper`, else `$HOME/.local/state/ahelper`.
    pub fn state_dir(&self) -> Option<PathBuf> {
        self.xdg_dir("XDG_STATE_HOME", ".local/state")
            .map(|d| d.join("ahelper"))
    }

    /// The user's directories that no tool may write, wherever they lie: ahelper's config
    /// directory (`$XDG_CONFIG_HOME/ahelper` and `~/.config/ahelper`) and state directory
    /// (`$XDG_STATE_HOME/ahelper` and `~/.local/state/ahelper`) — the user config, the trust
    /// and MCP approval files —, and the places that run code on their own: `~/.local/bin`
    /// (on `PATH`), and `systemd` (user units), `autostart` (desktop sessions) and `git`
    /// (git's user configuration) of the config directory. Absolute, each once; empty when
    /// neither `HOME` nor the XDG variables are set.
    pub fn protected_user_dirs(&self) -> Vec<PathBuf> {
        let home = self.get("HOME").map(PathBuf::from);
        let configs = [
            self.xdg_dir("XDG_CONFIG_HOME", ".config"),
            home.as_ref().map(|h| h.join(".config")),
        ];
        let states = [
            self.xdg_dir("XDG_STATE_HOME", ".local/state"),
            home.as_ref().map(|h| h.join(".local/state")),
        ];
        let mut dirs: Vec<PathBuf> = Vec::new();
        for config in configs.iter().flatten() {
            for name in ["ahelper", "systemd", "autostart", "git"] {
                dirs.push(config.join(name));
            }
        }
        dirs.extend(states.iter().flatten().map(|s| s.join("ahelper")));
        dirs.extend(home.map(|h| h.join(".local/bin")));
        let mut unique = Vec::new();
        for dir in dirs {
            if !unique.contains(&dir) {
                unique.push(dir);
            }
        }
        unique
    }

    fn xdg_dir(&self, var: &str, fallback: &str) -> Option<PathBuf> {
        if let Some(dir) = self.get(var).map(PathBuf::from).filter(|p| p.is_absolute()) {
            return Some(dir);
        }
        self.get("HOME").map(|h| PathBuf::from(h).join(fallback))
    }
}

/// The fully resolved configuration of a session.
#[derive(Debug, Clone)]
pub struct Config {
    /// Canonical workspace root.
    pub workspace_root: PathBuf,
    /// The merged file layers (for display with `/model`, `/permissions`).
    pub merged: ConfigFile,
    /// Permission mode and rules.
    pub permissions: PermissionPolicy,
    /// Agent-loop limits.
    pub agent: AgentLimits,
    /// Swarm limits.
    pub swarm: SwarmLimits,
    /// Command sandbox settings (paths absolute, default denied paths included).
    pub sandbox: SandboxSettings,
    /// The directories of `--add-dir` (canonical): further roots the file tools accept and
    /// commands may write; also in `permissions.added_dirs` and `sandbox.added_dirs`.
    pub added_dirs: Vec<PathBuf>,
    /// Files that were read, highest precedence first.
    pub files_read: Vec<PathBuf>,
    /// The project config's widening settings that were ignored because the user has not
    /// trusted the file ([`split_untrusted`]); `None` when there were none.
    pub untrusted: Option<UntrustedSettings>,
    /// The user's trust file (`$XDG_STATE_HOME/ahelper/trusted-projects.json`), when a state
    /// directory is known.
    pub trust_file: Option<PathBuf>,
    /// Replaces the values of the provider key variables (the configured `api_key_env`, and
    /// every variable named like a credential: see [`is_credential_name`]) and of the variables
    /// in `[secrets] redact_env` with `[REDACTED:<NAME>]`.
    pub redactor: Redactor,
    /// Variables that hold keys and that no command may inherit: every variable commands never
    /// get ([`crate::tools::shell::is_secret_env`]) plus the configured `api_key_env`. The
    /// binary removes them from its own environment after loading the configuration.
    pub secret_env: Vec<String>,
    /// Model prices (configured over built-in).
    pub pricing: crate::pricing::PriceTable,
    /// What the user should know about the configuration (e.g. project hooks that were
    /// ignored), one sentence each.
    pub warnings: Vec<String>,
    /// The rules of this command line (`--allowedTools`, `--disallowedTools`; also in
    /// `permissions.rules`), which a swarm run records so that `swarm resume` keeps them.
    pub session_rules: crate::swarm::state::SessionRules,
    /// The provider, or the reason none is usable (reported only when a model is needed, so
    /// `ahelper swarm ls` works without a key).
    provider: Result<ProviderSettings, NoModelReason>,
}

impl Config {
    /// Path of the project config file of `workspace_root`.
    pub fn project_config_path(workspace_root: &Path) -> PathBuf {
        workspace_root.join(".ahelper").join("config.toml")
    }

    /// Loads and merges every layer.
    ///
    /// # Errors
    /// Unreadable or invalid files, invalid values ([`ConfigError`]). A missing model is not an
    /// error here; see [`Config::provider`].
    pub fn load(
        workspace_root: &Path,
        env: &EnvSnapshot,
        cli: &CliOverrides,
    ) -> Result<Config, ConfigError> {
        let workspace_root =
            std::fs::canonicalize(workspace_root).map_err(|source| ConfigError::Read {
                path: workspace_root.to_path_buf(),
                source,
            })?;
        let mut files_read = Vec::new();
        let mut merged = ConfigFile::default();
        // Where the winning `base_url` was set, named in endpoint errors.
        let mut base_url_origin = None;
        if let Some(user) = env.user_config_path() {
            if user.exists() {
                files_read.push(user.clone());
            }
            let file = ConfigFile::load(&user)?;
            if file.base_url.is_some() {
                base_url_origin = Some(user.display().to_string());
            }
            merged = merged.merged_with(file);
        }
        let project = Self::project_config_path(&workspace_root);
        if project.exists() {
            files_read.push(project.clone());
        }
        let mut file = ConfigFile::load(&project)?;
        let mut warnings = Vec::new();
        if let Some(warning) = ignore_project_hooks(&mut file, &project) {
            warnings.push(warning);
        }
        if let Some(warning) = ignore_project_mcp_sandbox(&mut file, &project) {
            warnings.push(warning);
        }
        let trust_file = env
            .state_dir()
            .map(|d| crate::project_trust::trust_file_path(&d));
        let (file, untrusted) = trusted_project_layer(
            file,
            &project,
            &workspace_root,
            trust_file.as_deref(),
            &merged,
            cli,
        );
        if file.base_url.is_some() {
            base_url_origin = Some(project.display().to_string());
        }
        merged = merged.merged_with(file);
        files_read.reverse();
        if env.get("AHELPER_BASE_URL").is_some() {
            base_url_origin = Some("environment variable AHELPER_BASE_URL".into());
        }
        if cli.base_url.is_some() {
            base_url_origin = Some("--base-url".into());
        }

        let merged = with_env_and_cli_layers(merged, env, cli)?;
        warnings.extend(crate::hooks::unmatched_matchers(&merged.hooks));
        let permissions = resolve_permissions(&merged.permissions, "configuration")?;
        let agent = resolve_agent(&merged)?;
        let swarm = resolve_swarm(&merged.swarm);
        let added_dirs = resolve_added_dirs(&cli.add_dirs)?;
        let mut sandbox = resolve_sandbox(&merged.sandbox, &workspace_root, env)?;
        sandbox.added_dirs = added_dirs.clone();
        warnings.extend(user_dirs_warning(&sandbox, &workspace_root));
        let mut permissions = permissions;
        permissions.network_off = !sandbox.network;
        permissions.added_dirs = added_dirs.clone();
        let mut provider = match resolve_provider(&merged, env) {
            Ok(p) => Ok(p),
            Err(ProviderProblem::Unusable(reason)) => Err(reason),
            Err(ProviderProblem::Invalid(e)) => return Err(e),
        };
        if let (Ok(p), Some(origin)) = (&mut provider, base_url_origin) {
            p.origin.base_url = origin;
        }
        let (redactor, secret_env) = resolve_secrets(&merged, env, &provider)?;
        Ok(Config {
            workspace_root,
            pricing: crate::pricing::PriceTable::new(merged.pricing.clone()),
            merged,
            permissions,
            agent,
            swarm,
            sandbox,
            added_dirs,
            files_read,
            untrusted,
            trust_file,
            redactor,
            secret_env,
            warnings,
            session_rules: Default::default(),
            provider,
        })
    }

    /// The model provider.
    ///
    /// # Errors
    /// [`ConfigError::NoModel`] naming the environment variables and keys to set.
    pub fn provider(&self) -> Result<&ProviderSettings, ConfigError> {
        self.provider
            .as_ref()
            .map_err(|reason| ConfigError::NoModel {
                reason: reason.clone(),
            })
    }

    /// Uses `model` instead of the configured model name (the REPL's `/model` for a `/swarm`
    /// run started from the session). Nothing changes when no provider is usable: the error
    /// of [`Config::provider`] still says what to set.
    pub fn set_model(&mut self, model: &str) {
        if let Ok(provider) = &mut self.provider {
            provider.model = model.to_string();
        }
    }
}

/// The environment (`AHELPER_*`) and command-line layers on top of the files, each checked.
fn with_env_and_cli_layers(
    merged: ConfigFile,
    env: &EnvSnapshot,
    cli: &CliOverrides,
) -> Result<ConfigFile, ConfigError> {
    let env_layer = env_layer(env);
    resolve_permissions(
        &env_layer.permissions,
        "environment (AHELPER_PERMISSION_MODE)",
    )?;
    let merged = merged.merged_with(env_layer);
    let cli_layer = cli_layer(cli);
    resolve_permissions(&cli_layer.permissions, "command line (--permission-mode)")?;
    Ok(merged.merged_with(cli_layer))
}

/// The warning for a workspace or added directory that contains the user's protected
/// directories ([`EnvSnapshot::protected_user_dirs`]), naming those that exist; `None` when no
/// root contains one.
fn user_dirs_warning(sandbox: &SandboxSettings, workspace_root: &Path) -> Option<String> {
    let roots: Vec<&Path> = std::iter::once(workspace_root)
        .chain(sandbox.added_dirs.iter().map(PathBuf::as_path))
        .collect();
    let inside: Vec<String> = sandbox
        .protected_dirs
        .iter()
        .map(|d| crate::sandbox_os::binds::canonical_best(d))
        .filter(|d| d.exists() && roots.iter().any(|r| d.starts_with(r)))
        .map(|d| d.display().to_string())
        .collect();
    let containing = |root: &Path| {
        sandbox
            .protected_dirs
            .iter()
            .map(|d| crate::sandbox_os::binds::canonical_best(d))
            .any(|d| d.starts_with(root))
    };
    let holders: Vec<String> = roots
        .iter()
        .filter(|r| containing(r))
        .map(|r| r.display().to_string())
        .collect();
    if holders.is_empty() {
        return None;
    }
    Some(format!(
        "{} contains your home's configuration ({}): ahelper's file tools refuse to write \
         ahelper's config and state directories, ~/.local/bin, ~/.config/systemd, \
         ~/.config/autostart and ~/.config/git, and commands see them read-only — prefer a \
         project directory as the workspace",
        holders.join(" and "),
        if inside.is_empty() {
            "none of its protected directories exists yet".to_string()
        } else {
            inside.join(", ")
        }
    ))
}

/// The `[agent]` limits with their defaults, and the hooks.
fn resolve_agent(merged: &ConfigFile) -> Result<AgentLimits, ConfigError> {
    Ok(AgentLimits {
        max_turns: merged.agent.max_turns.unwrap_or(40).max(1),
        repeat_limit: merged.agent.repeat_limit.unwrap_or(3).max(2),
        max_tool_output_chars: merged
            .agent
            .max_tool_output_chars
            .unwrap_or(30_000)
            .max(1_000),
        file_tool_timeout: merged.agent.file_tool_timeout_s.map_or(
            crate::tools::DEFAULT_FILE_TOOL_TIMEOUT,
            std::time::Duration::from_secs,
        ),
        hooks: merged.hooks.clone(),
        compact_threshold: compact_threshold(merged.agent.compact_threshold)?,
    })
}

/// Checks the `[pricing]` table of the file at `path`: prices are finite and not negative.
fn check_prices(
    prices: &BTreeMap<String, crate::pricing::Price>,
    path: &Path,
) -> Result<(), ConfigError> {
    for (model, price) in prices {
        let cached = [
            ("cache_read_per_mtok", price.cache_read_per_mtok),
            ("cache_write_per_mtok", price.cache_write_per_mtok),
        ];
        let set = cached.into_iter().filter_map(|(n, v)| v.map(|v| (n, v)));
        for (name, value) in [
            ("input_per_mtok", price.input_per_mtok),
            ("output_per_mtok", price.output_per_mtok),
        ]
        .into_iter()
        .chain(set)
        {
            if !value.is_finite() || value < 0.0 {
                return Err(ConfigError::Invalid {
                    key: format!("pricing.\"{model}\".{name}"),
                    origin: path.display().to_string(),
                    message: format!(
                        "{value} is not a price: use US dollars per million tokens, e.g. 3.0"
                    ),
                });
            }
        }
    }
    Ok(())
}

/// `[agent] compact_threshold`, checked: 0 < x ≤ 1.
fn compact_threshold(value: Option<f64>) -> Result<f64, ConfigError> {
    match value {
        None => Ok(DEFAULT_COMPACT_THRESHOLD),
        Some(x) if x > 0.0 && x <= 1.0 => Ok(x),
        Some(x) => Err(ConfigError::Invalid {
            key: "agent.compact_threshold".into(),
            origin: "configuration".into(),
            message: format!(
                "{x} is not a fraction of the context window: use a value in (0, 1], e.g. 0.8"
            ),
        }),
    }
}

/// Takes the hooks out of the project config: a repository must not run commands on the user's
/// machine by being opened. Returns the warning naming them, when there were any.
fn ignore_project_hooks(file: &mut ConfigFile, path: &Path) -> Option<String> {
    let hooks = std::mem::take(&mut file.hooks);
    let commands: Vec<String> = hooks
        .iter()
        .flat_map(|(event, groups)| {
            groups.iter().flat_map(move |g| {
                g.hooks
                    .iter()
                    .map(move |h| format!("{} `{}`", event.as_str(), h.command))
            })
        })
        .collect();
    (!commands.is_empty()).then(|| {
        format!(
            "ignored the hooks in the project config {} ({}): hooks run only from your user config \
             (~/.config/ahelper/config.toml); copy them there to enable them",
            path.display(),
            commands.join(", ")
        )
    })
}

/// Takes `sandbox` and `network` out of the project config's `[mcp_servers]` entries: only the
/// user's own config may run a server outside the command sandbox or change its network
/// ([`crate::mcp::sandbox`]). Returns the warning naming them, when there were any.
fn ignore_project_mcp_sandbox(file: &mut ConfigFile, path: &Path) -> Option<String> {
    let mut ignored = Vec::new();
    for (name, entry) in &mut file.mcp_servers {
        if entry.sandbox.take().is_some() {
            ignored.push(format!("mcp_servers.{name}.sandbox"));
        }
        if entry.network.take().is_some() {
            ignored.push(format!("mcp_servers.{name}.network"));
        }
    }
    (!ignored.is_empty()).then(|| {
        format!(
            "ignored {} in the project config {}: only your user config \
             (~/.config/ahelper/config.toml) can change an MCP server's sandbox or network",
            ignored.join(", "),
            path.display()
        )
    })
}

/// The `[swarm]` limits with their defaults (ranges were checked when the files were parsed).
fn resolve_swarm(file: &SwarmFile) -> SwarmLimits {
    SwarmLimits {
        max_workers: file.max_workers.unwrap_or(4).max(1),
        max_subtasks: file.max_subtasks.unwrap_or(DEFAULT_MAX_SUBTASKS).max(1),
        mcp_servers: file.mcp_servers.clone().unwrap_or_default(),
        worker_max_turns: file.worker_max_turns.unwrap_or(30).max(1),
        token_budget: file.token_budget.unwrap_or(4_000_000),
        time_limit_s: file.time_limit_s.unwrap_or(3_600),
        worktree_root: file.worktree_root.clone(),
        verify: file.verify.clone(),
        verify_timeout_s: file.verify_timeout_s.unwrap_or(DEFAULT_VERIFY_TIMEOUT_S),
        worker_fix_rounds: file.worker_fix_rounds.unwrap_or(DEFAULT_WORKER_FIX_ROUNDS),
        merge_fix_attempts: file
            .merge_fix_attempts
            .unwrap_or(DEFAULT_MERGE_FIX_ATTEMPTS),
        verify_slots: file
            .verify_slots
            .unwrap_or(crate::swarm::merge_policy::DEFAULT_VERIFY_SLOTS),
        max_file_bytes: file.max_file_mb.unwrap_or(10).saturating_mul(1_000_000),
        setup: file.setup.clone(),
        include_max_bytes: file
            .worktree_include_max_mb
            .map_or(ahelper_worktrees::DEFAULT_INCLUDE_MAX_BYTES, |mb| {
                mb.saturating_mul(1_000_000)
            }),
        warm_cargo: file.warm_cargo.unwrap_or_default(),
        nats_url: file.nats_url.clone(),
        remote: file.remote.clone().unwrap_or_else(|| "origin".into()),
    }
}

/// Settings of the project config that were left out because the user has not trusted it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UntrustedSettings {
    /// The project config file.
    pub path: PathBuf,
    /// The ignored keys, dotted (`permissions.mode`, `permissions.allow`, `sandbox.network`),
    /// sorted.
    pub ignored: Vec<String>,
}

/// The project config layer as it applies: whole when trusted (or `cli.trusted_project`),
/// else through [`split_untrusted`]; with the keys that were ignored.
fn trusted_project_layer(
    file: ConfigFile,
    project: &Path,
    workspace_root: &Path,
    trust_file: Option<&Path>,
    lower: &ConfigFile,
    cli: &CliOverrides,
) -> (ConfigFile, Option<UntrustedSettings>) {
    let bytes = match std::fs::read(project) {
        Ok(bytes) => bytes,
        Err(_) => return (file, None),
    };
    let trusted = cli.trusted_project
        || trust_file.is_some_and(|t| crate::project_trust::is_trusted(t, workspace_root, &bytes));
    if trusted {
        return (file, None);
    }
    let (kept, _) = split_untrusted(file.clone(), lower.permissions.mode.as_deref());
    let kept = hold_cost_settings(kept, lower);
    let ignored = changed_keys(&file, &kept);
    let untrusted = (!ignored.is_empty()).then(|| UntrustedSettings {
        path: project.to_path_buf(),
        ignored,
    });
    (kept, untrusted)
}

/// Takes out of an untrusted project layer what would change what a session or run may spend
/// without the user seeing it: a `model` other than the lower layers', `[pricing]` entries
/// that differ from theirs, and every limit raised above the value the lower layers (or the
/// default) give — `max_output_tokens`, `context_window` (above 200,000 without a lower
/// value), `retry.max_attempts`, `[agent]` `max_turns`, `repeat_limit`,
/// `max_tool_output_chars`, `compact_threshold`, and `[swarm]` `max_workers`, `max_subtasks`,
/// `worker_max_turns`, `token_budget`, `time_limit_s`, `verify_timeout_s`,
/// `worker_fix_rounds`, `merge_fix_attempts`, `verify_slots`. Lower values and equal ones apply.
fn hold_cost_settings(mut kept: ConfigFile, lower: &ConfigFile) -> ConfigFile {
    fn cap<T: PartialOrd + Copy>(value: &mut Option<T>, limit: T) {
        if value.is_some_and(|v| v > limit) {
            *value = None;
        }
    }
    if kept.model.is_some() && kept.model != lower.model {
        kept.model = None;
    }
    kept.pricing
        .retain(|model, price| lower.pricing.get(model) == Some(&*price));
    cap(
        &mut kept.max_output_tokens,
        lower.max_output_tokens.unwrap_or(DEFAULT_MAX_OUTPUT_TOKENS),
    );
    cap(
        &mut kept.context_window,
        lower
            .context_window
            .unwrap_or(ANTHROPIC_DEFAULT_CONTEXT_WINDOW),
    );
    cap(
        &mut kept.retry.max_attempts,
        lower.retry.max_attempts.unwrap_or(5),
    );
    if let Ok(agent) = resolve_agent(lower) {
        let a = &mut kept.agent;
        cap(&mut a.max_turns, agent.max_turns);
        cap(&mut a.repeat_limit, agent.repeat_limit);
        cap(&mut a.max_tool_output_chars, agent.max_tool_output_chars);
        // A threshold above 1 is no limit but an error, which the range check names.
        if a.compact_threshold.is_some_and(|t| t <= 1.0) {
            cap(&mut a.compact_threshold, agent.compact_threshold);
        }
    }
    let swarm = resolve_swarm(&lower.swarm);
    let s = &mut kept.swarm;
    cap(&mut s.max_workers, swarm.max_workers);
    cap(&mut s.max_subtasks, swarm.max_subtasks);
    cap(&mut s.worker_max_turns, swarm.worker_max_turns);
    cap(&mut s.token_budget, swarm.token_budget);
    cap(&mut s.time_limit_s, swarm.time_limit_s);
    cap(&mut s.verify_timeout_s, swarm.verify_timeout_s);
    cap(&mut s.worker_fix_rounds, swarm.worker_fix_rounds);
    cap(&mut s.merge_fix_attempts, swarm.merge_fix_attempts);
    cap(&mut s.verify_slots, swarm.verify_slots);
    kept
}

/// Splits an untrusted project config into what applies anyway and the dotted keys that need
/// the user's trust ([`crate::project_trust`]).
///
/// Applies without trust (narrowing, or nothing the model can reach): `model`,
/// `max_output_tokens`, `context_window`, `tool_protocol`, `[retry]`, `[agent]`,
/// `permissions.ask`, `permissions.deny`, `permissions.mode` when it is no wider than the mode of
/// the lower layers (`lower_mode`, default `default`; order `plan` < `default` <
/// `accept-edits` < `bypass`), `[swarm]` limits (`max_file_mb` up to the default 10,
/// `worktree_include_max_mb` up to the default 1,000),
/// `sandbox.mode = "enforce"`,
/// `sandbox.deny_read`, `sandbox.network = false`, `sandbox.max_processes` and
/// `sandbox.max_memory_mb` up to their defaults (4,096; 8,192, not `0`), `[secrets]`,
/// `[pricing]`.
///
/// Needs trust (widening): `permissions.allow`, a wider `permissions.mode`, `sandbox.mode =
/// "off"`, `sandbox.writable`, `sandbox.network = true`, higher command limits, `swarm.worktree_root` (where worker
/// checkouts and their writable paths go), `swarm.verify` and `swarm.setup` (commands ahelper
/// runs itself), `swarm.worktree_include_max_mb` above the default 1,000, `swarm.nats_url` and
/// `swarm.remote` (where the run's code and subtasks are sent),
/// `[mcp_servers]` (programs ahelper starts), `provider`, `base_url` and `api_key_env` (which
/// server receives which key) — and **every key not listed above**, so a table added later
/// needs trust until it is put on the first list. (`[hooks]` never apply from a project
/// config, trusted or not: they were taken out before.)
pub fn split_untrusted(project: ConfigFile, lower_mode: Option<&str>) -> (ConfigFile, Vec<String>) {
    let rank = |mode: Option<&str>| match mode.map(|m| m.parse::<PermissionMode>()) {
        Some(Ok(PermissionMode::Plan)) => 0,
        None | Some(Ok(PermissionMode::Default)) => 1,
        Some(Ok(PermissionMode::AcceptEdits)) => 2,
        Some(Ok(PermissionMode::Bypass)) | Some(Err(_)) => 3,
    };
    let mode = project
        .permissions
        .mode
        .clone()
        .filter(|m| rank(Some(m)) <= rank(lower_mode));
    let kept = ConfigFile {
        model: project.model.clone(),
        max_output_tokens: project.max_output_tokens,
        context_window: project.context_window,
        tool_protocol: project.tool_protocol.clone(),
        retry: project.retry.clone(),
        agent: project.agent.clone(),
        permissions: PermissionsFile {
            mode,
            allow: Vec::new(),
            ask: project.permissions.ask.clone(),
            deny: project.permissions.deny.clone(),
        },
        swarm: SwarmFile {
            worktree_root: None,
            verify: None,
            setup: None,
            nats_url: None,
            remote: None,
            max_file_mb: project.swarm.max_file_mb.filter(|mb| *mb <= 10),
            worktree_include_max_mb: project.swarm.worktree_include_max_mb.filter(|mb| {
                mb.saturating_mul(1_000_000) <= ahelper_worktrees::DEFAULT_INCLUDE_MAX_BYTES
            }),
            ..project.swarm.clone()
        },
        sandbox: SandboxFile {
            mode: project
                .sandbox
                .mode
                .clone()
                .filter(|m| m.parse::<SandboxMode>() == Ok(SandboxMode::Enforce)),
            writable: Vec::new(),
            deny_read: project.sandbox.deny_read.clone(),
            network: project.sandbox.network.filter(|n| !n),
            max_processes: project
                .sandbox
                .max_processes
                .filter(|n| *n <= crate::sandbox_os::DEFAULT_MAX_PROCESSES),
            max_memory_mb: project
                .sandbox
                .max_memory_mb
                .filter(|mb| (1..=crate::sandbox_os::DEFAULT_MAX_MEMORY_MB).contains(mb)),
        },
        secrets: project.secrets.clone(),
        pricing: project.pricing.clone(),
        ..ConfigFile::default()
    };
    let ignored = changed_keys(&project, &kept);
    (kept, ignored)
}

/// The dotted keys whose value in `full` differs from (or is missing in) `kept`.
fn changed_keys(full: &ConfigFile, kept: &ConfigFile) -> Vec<String> {
    fn walk(prefix: &str, full: &toml::Table, kept: &toml::Table, out: &mut Vec<String>) {
        for (key, value) in full {
            let dotted = if prefix.is_empty() {
                key.clone()
            } else {
                format!("{prefix}.{key}")
            };
            match (value, kept.get(key)) {
                (toml::Value::Table(f), Some(toml::Value::Table(k))) => walk(&dotted, f, k, out),
                (toml::Value::Table(f), None) => walk(&dotted, f, &toml::Table::new(), out),
                (toml::Value::Array(a), _) if a.is_empty() => {}
                (v, Some(k)) if v == k => {}
                _ => out.push(dotted),
            }
        }
    }
    let table = |c: &ConfigFile| toml::Table::try_from(c).unwrap_or_default();
    let mut out = Vec::new();
    walk("", &table(full), &table(kept), &mut out);
    out
}

fn resolve_sandbox(
    file: &SandboxFile,
    workspace_root: &Path,
    env: &EnvSnapshot,
) -> Result<SandboxSettings, ConfigError> {
    let mode = parse_setting(file.mode.as_deref(), "sandbox.mode", "configuration")?
        .unwrap_or(SandboxMode::Enforce);
    let home = env.get("HOME").map(PathBuf::from);
    let absolute = |p: &PathBuf| -> PathBuf {
        if let (Some(home), Ok(rest)) = (&home, p.strip_prefix("~")) {
            home.join(rest)
        } else {
            workspace_root.join(p)
        }
    };
    let mut deny_read = default_deny_read(home.as_deref());
    deny_read.extend(file.deny_read.iter().map(absolute));
    Ok(SandboxSettings {
        mode,
        writable: file.writable.iter().map(absolute).collect(),
        deny_read,
        network: file.network.unwrap_or(true),
        added_dirs: Vec::new(),
        protected_dirs: env.protected_user_dirs(),
        limits: crate::sandbox_os::CommandLimits {
            max_processes: file
                .max_processes
                .unwrap_or(crate::sandbox_os::DEFAULT_MAX_PROCESSES),
            max_memory_mb: file
                .max_memory_mb
                .unwrap_or(crate::sandbox_os::DEFAULT_MAX_MEMORY_MB),
        },
    })
}

/// The directories of `--add-dir`, canonical, each once.
///
/// # Errors
/// [`ConfigError::Invalid`] (key `--add-dir`) naming a path that does not exist or is not a
/// directory.
fn resolve_added_dirs(dirs: &[PathBuf]) -> Result<Vec<PathBuf>, ConfigError> {
    let invalid = |message: String| ConfigError::Invalid {
        key: "--add-dir".into(),
        origin: "the command line".into(),
        message,
    };
    let mut out: Vec<PathBuf> = Vec::new();
    for dir in dirs {
        let canonical = std::fs::canonicalize(dir).map_err(|e| {
            invalid(format!(
                "{} cannot be used ({e}); give an existing directory",
                dir.display()
            ))
        })?;
        if !canonical.is_dir() {
            return Err(invalid(format!(
                "{} is not a directory; give a directory (it becomes a second writable root)",
                dir.display()
            )));
        }
        if !out.contains(&canonical) {
            out.push(canonical);
        }
    }
    Ok(out)
}

/// Tools that permission rules may name.
pub const RULE_TOOLS: [&str; 7] = [
    "read_file",
    "write_file",
    "edit_file",
    "list_dir",
    "glob",
    "grep",
    "run_command",
];

/// The ahelper tool for a tool name other assistants use in their rules (Claude Code, Codex).
fn rule_tool_hint(tool: &str) -> Option<&'static str> {
    match tool.to_ascii_lowercase().as_str() {
        "bash" | "shell" | "exec" | "command" | "run_command" => Some("run_command"),
        "read" | "view" | "cat" => Some("read_file"),
        "edit" | "multiedit" | "str_replace" => Some("edit_file"),
        "write" | "create" => Some("write_file"),
        "ls" | "list" => Some("list_dir"),
        "search" | "rg" => Some("grep"),
        "find" => Some("glob"),
        _ => None,
    }
}

/// Parses and checks the `[permissions]` table of one layer; `origin` (a file path,
/// `environment`, `command line`) is named in errors. A rule naming an unknown tool is an error:
/// a misspelt deny rule must never be silently ignored.
fn resolve_permissions(
    file: &PermissionsFile,
    origin: &str,
) -> Result<PermissionPolicy, ConfigError> {
    let mode = parse_setting(file.mode.as_deref(), "permissions.mode", origin)?
        .unwrap_or(PermissionMode::Default);
    let parse_list = |key: &str, list: &[String]| -> Result<Vec<PermissionRule>, ConfigError> {
        list.iter()
            .map(|raw| {
                let invalid = |message: String| ConfigError::Invalid {
                    key: format!("permissions.{key}"),
                    origin: origin.into(),
                    message: format!("rule `{raw}`: {message}"),
                };
                let rule = PermissionRule::parse(raw).map_err(|e| invalid(e.to_string()))?;
                // MCP tools (`mcp__<server>__<tool>`) are only known once their servers run.
                if !RULE_TOOLS.contains(&rule.tool.as_str()) && !rule.tool.starts_with("mcp__") {
                    let hint = rule_tool_hint(&rule.tool)
                        .map(|t| format!(" (did you mean `{t}`?)"))
                        .unwrap_or_default();
                    return Err(invalid(format!(
                        "unknown tool `{}`{hint}; rules name one of: {}, or an MCP tool (`mcp__<server>__<tool>`, `mcp__<server>__*`)",
                        rule.tool,
                        RULE_TOOLS.join(", ")
                    )));
                }
                Ok(rule)
            })
            .collect()
    };
    let rules = RuleSet {
        allow: parse_list("allow", &file.allow)?,
        ask: parse_list("ask", &file.ask)?,
        deny: parse_list("deny", &file.deny)?,
        builtin_read_only: true,
    };
    Ok(PermissionPolicy {
        mode,
        rules,
        network_off: false,
        added_dirs: Vec::new(),
    })
}

/// Why no model provider is usable. Reported only when a model is needed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoModelReason {
    /// No `provider` setting and no provider key or URL in the environment.
    NoProvider,
    /// The provider's official endpoint needs a key and its variable is not set.
    MissingApiKey {
        /// `anthropic` or `openai`.
        provider: &'static str,
        /// The endpoint.
        base_url: String,
        /// The environment variable that should hold the key.
        key_env: String,
    },
}

impl std::fmt::Display for NoModelReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoModelReason::NoProvider => f.write_str(
                "no provider is set and neither ANTHROPIC_API_KEY nor OPENAI_API_KEY/OPENAI_BASE_URL is in the environment",
            ),
            NoModelReason::MissingApiKey {
                provider,
                base_url,
                key_env,
            } => write!(
                f,
                "provider `{provider}` at {base_url} needs an API key, but the environment variable {key_env} is not set"
            ),
        }
    }
}

/// Why [`resolve_provider`] produced no provider.
enum ProviderProblem {
    /// A setting is wrong: loading the configuration fails.
    Invalid(ConfigError),
    /// Nothing is wrong, but no model can be used; said when one is needed.
    Unusable(NoModelReason),
}

impl From<ConfigError> for ProviderProblem {
    fn from(e: ConfigError) -> Self {
        ProviderProblem::Invalid(e)
    }
}

/// Defaults of one provider kind.
struct ProviderDefaults {
    name: &'static str,
    key_env: &'static str,
    base_url_env: &'static str,
    base_url: &'static str,
    model: &'static str,
    context_window: u32,
}

impl ProviderDefaults {
    fn of(kind: ProviderKind) -> Self {
        match kind {
            ProviderKind::Anthropic => ProviderDefaults {
                name: "anthropic",
                key_env: "ANTHROPIC_API_KEY",
                base_url_env: "ANTHROPIC_BASE_URL",
                base_url: ANTHROPIC_DEFAULT_BASE_URL,
                model: ANTHROPIC_DEFAULT_MODEL,
                context_window: ANTHROPIC_DEFAULT_CONTEXT_WINDOW,
            },
            ProviderKind::Openai => ProviderDefaults {
                name: "openai",
                key_env: "OPENAI_API_KEY",
                base_url_env: "OPENAI_BASE_URL",
                base_url: OPENAI_DEFAULT_BASE_URL,
                model: OPENAI_DEFAULT_MODEL,
                context_window: OPENAI_DEFAULT_CONTEXT_WINDOW,
            },
        }
    }
}

/// Parses the value of `key` when it is set; `origin` (a file path, `environment`,
/// `configuration`…) is named in the error, with the parser's message saying what is expected.
fn parse_setting<T: std::str::FromStr<Err = String>>(
    value: Option<&str>,
    key: &str,
    origin: &str,
) -> Result<Option<T>, ConfigError> {
    value
        .map(|v| {
            v.parse().map_err(|message| ConfigError::Invalid {
                key: key.into(),
                origin: origin.into(),
                message,
            })
        })
        .transpose()
}

fn invalid_setting(key: &str, message: String) -> ConfigError {
    ConfigError::Invalid {
        key: key.into(),
        origin: "configuration".into(),
        message,
    }
}

/// The provider: its kind, endpoint, key, model and limits, from the merged settings and the
/// environment.
fn resolve_provider(
    merged: &ConfigFile,
    env: &EnvSnapshot,
) -> Result<ProviderSettings, ProviderProblem> {
    let kind = provider_kind(merged, env)?;
    let tool_protocol = match merged.tool_protocol.as_deref() {
        None | Some("native") => ToolProtocol::Native,
        Some("text") => ToolProtocol::Text,
        Some(other) => {
            return Err(invalid_setting(
                "tool_protocol",
                format!("unknown tool protocol `{other}`; expected `native` or `text`"),
            )
            .into());
        }
    };
    let defaults = ProviderDefaults::of(kind);
    let base_url = provider_base_url(merged, env, &defaults)?;
    let key_env = key_env_name(merged, kind);
    let api_key = env.get(&key_env).map(str::to_string).unwrap_or_default();
    if api_key.is_empty() && base_url == defaults.base_url {
        return Err(ProviderProblem::Unusable(NoModelReason::MissingApiKey {
            provider: defaults.name,
            base_url,
            key_env,
        }));
    }
    Ok(ProviderSettings {
        kind,
        model: merged
            .model
            .clone()
            .unwrap_or_else(|| defaults.model.to_string()),
        base_url,
        api_key: ApiKey(api_key),
        max_output_tokens: merged
            .max_output_tokens
            .unwrap_or(DEFAULT_MAX_OUTPUT_TOKENS)
            .max(16),
        context_window: merged
            .context_window
            .unwrap_or(defaults.context_window)
            .max(1_024),
        tool_protocol,
        max_attempts: merged.retry.max_attempts.unwrap_or(5).max(1),
        retry_base_delay_ms: merged.retry.base_delay_ms.unwrap_or(1_000),
        retry_max_delay_ms: merged.retry.max_delay_ms.unwrap_or(60_000),
        idle_timeout_ms: merged.retry.idle_timeout_ms.unwrap_or(120_000),
        origin: SettingsOrigin {
            base_url: if env.get(defaults.base_url_env).is_some() {
                format!("environment variable {}", defaults.base_url_env)
            } else {
                "the default".into()
            },
            api_key_env: key_env,
        },
    })
}

/// The `provider` setting, or the provider the environment's keys and URLs point to.
fn provider_kind(merged: &ConfigFile, env: &EnvSnapshot) -> Result<ProviderKind, ProviderProblem> {
    match merged.provider.as_deref() {
        Some("anthropic") => Ok(ProviderKind::Anthropic),
        Some("openai") | Some("openai-compatible") | Some("ollama") => Ok(ProviderKind::Openai),
        Some(other) => Err(invalid_setting(
            "provider",
            format!("unknown provider `{other}`; expected `anthropic` or `openai`"),
        )
        .into()),
        None if env.get("ANTHROPIC_API_KEY").is_some() => Ok(ProviderKind::Anthropic),
        None if env.get("OPENAI_API_KEY").is_some()
            || env.get("OPENAI_BASE_URL").is_some()
            || merged.base_url.is_some() =>
        {
            Ok(ProviderKind::Openai)
        }
        None => Err(ProviderProblem::Unusable(NoModelReason::NoProvider)),
    }
}

/// `base_url`, else the provider's `*_BASE_URL` variable, else its official endpoint; without a
/// trailing `/`.
fn provider_base_url(
    merged: &ConfigFile,
    env: &EnvSnapshot,
    defaults: &ProviderDefaults,
) -> Result<String, ConfigError> {
    let base_url = merged
        .base_url
        .clone()
        .or_else(|| env.get(defaults.base_url_env).map(str::to_string))
        .unwrap_or_else(|| defaults.base_url.to_string());
    let base_url = base_url.trim_end_matches('/').to_string();
    if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
        return Err(invalid_setting(
            "base_url",
            format!("`{base_url}` is not an http:// or https:// URL"),
        ));
    }
    Ok(base_url)
}

/// The layer of the `AHELPER_*` environment variables (provider, model, base URL, permission
/// mode, sandbox mode).
fn env_layer(env: &EnvSnapshot) -> ConfigFile {
    ConfigFile {
        provider: env.get("AHELPER_PROVIDER").map(str::to_string),
        model: env.get("AHELPER_MODEL").map(str::to_string),
        base_url: env.get("AHELPER_BASE_URL").map(str::to_string),
        permissions: PermissionsFile {
            mode: env.get("AHELPER_PERMISSION_MODE").map(str::to_string),
            ..Default::default()
        },
        sandbox: SandboxFile {
            mode: env.get("AHELPER_SANDBOX").map(str::to_string),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// The layer of the command-line flags (provider, model, base URL, permission mode, max turns,
/// sandbox mode).
fn cli_layer(cli: &CliOverrides) -> ConfigFile {
    ConfigFile {
        provider: cli.provider.clone(),
        model: cli.model.clone(),
        base_url: cli.base_url.clone(),
        permissions: PermissionsFile {
            mode: cli.permission_mode.clone(),
            ..Default::default()
        },
        agent: AgentFile {
            max_turns: cli.max_turns,
            ..Default::default()
        },
        sandbox: SandboxFile {
            mode: cli.sandbox.clone(),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// The variable holding the provider key: `api_key_env`, else the provider's standard name.
fn key_env_name(merged: &ConfigFile, kind: ProviderKind) -> String {
    merged
        .api_key_env
        .clone()
        .unwrap_or_else(|| ProviderDefaults::of(kind).key_env.to_string())
}

/// The redactor and the key variables to remove from the process environment (see
/// [`Config::redactor`], [`Config::secret_env`]). `redact_env` names must be variable names.
fn resolve_secrets(
    merged: &ConfigFile,
    env: &EnvSnapshot,
    provider: &Result<ProviderSettings, NoModelReason>,
) -> Result<(Redactor, Vec<String>), ConfigError> {
    let invalid = |message: String| ConfigError::Invalid {
        key: "secrets.redact_env".into(),
        origin: "configuration".into(),
        message,
    };
    for name in &merged.secrets.redact_env {
        let valid = !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(invalid(format!(
                "`{name}` is not an environment variable name (letters, digits and _)"
            )));
        }
    }
    // The configured key first, so that its name is shown when two variables hold the value.
    let key_env = match provider {
        Ok(p) => Some(key_env_name(merged, p.kind)),
        Err(_) => merged.api_key_env.clone(),
    };
    let mut pairs: Vec<(String, String)> = Vec::new();
    if let Ok(p) = provider
        && let Some(name) = &key_env
    {
        pairs.push((name.clone(), p.api_key.0.clone()));
    }
    for (name, value) in env.iter() {
        if is_credential_name(name) || merged.secrets.redact_env.iter().any(|n| n == name) {
            pairs.push((name.to_string(), value.to_string()));
        }
    }
    let redactor = Redactor::new(pairs).map_err(|e| invalid(e.to_string()))?;
    let mut secret_env: Vec<String> = env
        .iter()
        .map(|(name, _)| name.to_string())
        .filter(|name| crate::tools::shell::is_secret_env(name))
        .collect();
    if let Some(name) = key_env
        && !secret_env.contains(&name)
    {
        secret_env.push(name);
    }
    Ok((redactor, secret_env))
}

/// Which rule list an answer goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleList {
    /// `permissions.allow`.
    Allow,
    /// `permissions.deny`.
    Deny,
}

/// Appends `rule` to `permissions.allow` or `permissions.deny` of the project config file,
/// creating the file and table if needed and keeping the rest of the file (comments included)
/// as it was. A rule already present is not added twice. When the file was missing or trusted
/// in `trust_file` ([`crate::project_trust`]), the new content is trusted too: the rule is the
/// user's own answer.
///
/// # Errors
/// [`ConfigError::Write`] when the file can't be read, parsed or written.
pub fn append_project_rule(
    workspace_root: &Path,
    list: RuleList,
    rule: &str,
    trust_file: Option<&Path>,
) -> Result<(), ConfigError> {
    let path = Config::project_config_path(workspace_root);
    let write_err = |message: String| ConfigError::Write {
        path: path.clone(),
        message,
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(write_err(e.to_string())),
    };
    let keep_trust = trust_file.filter(|t| {
        !path.exists() || crate::project_trust::is_trusted(t, workspace_root, text.as_bytes())
    });
    let mut doc: toml_edit::DocumentMut = text.parse().map_err(|e| write_err(format!("{e}")))?;
    let table = doc
        .entry("permissions")
        .or_insert_with(|| toml_edit::Item::Table(toml_edit::Table::new()))
        .as_table_mut()
        .ok_or_else(|| write_err("`permissions` is not a table".into()))?;
    let key = match list {
        RuleList::Allow => "allow",
        RuleList::Deny => "deny",
    };
    let array = table
        .entry(key)
        .or_insert_with(|| toml_edit::value(toml_edit::Array::new()))
        .as_array_mut()
        .ok_or_else(|| write_err(format!("`permissions.{key}` is not an array")))?;
    if !array.iter().any(|v| v.as_str() == Some(rule)) {
        array.push(rule);
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| write_err(e.to_string()))?;
    }
    let new_text = doc.to_string();
    crate::atomic_write::write_path(&path, new_text.as_bytes()).map_err(|e| {
        write_err(crate::atomic_write::describe_write_error(
            &path.display().to_string(),
            &e,
        ))
    })?;
    if let Some(trust_file) = keep_trust {
        crate::project_trust::trust(trust_file, workspace_root, new_text.as_bytes())
            .map_err(|e| write_err(e.to_string()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Overrides that apply the project config whatever its trust (the layering tests).
    fn trusted() -> CliOverrides {
        CliOverrides {
            trusted_project: true,
            ..CliOverrides::default()
        }
    }

    /// An untrusted project config keeps what narrows and names the rest.
    #[test]
    fn split_untrusted_keeps_narrowing_settings_and_names_widening_ones() {
        let text = "model = \"m\"\nbase_url = \"https://x\"\n[permissions]\nmode = \"bypass\"\n\
                    allow = [\"run_command(ls)\"]\ndeny = [\"run_command(rm:*)\"]\n\
                    [sandbox]\nmode = \"off\"\nnetwork = true\nwritable = [\"/x\"]\n\
                    deny_read = [\"/y\"]\n[swarm]\nmax_workers = 2\nworktree_root = \"/z\"\n";
        let file = ConfigFile::parse(text, Path::new("c.toml")).unwrap();
        let (kept, ignored) = split_untrusted(file, None);
        assert_eq!(
            ignored,
            [
                "base_url",
                "permissions.allow",
                "permissions.mode",
                "sandbox.mode",
                "sandbox.network",
                "sandbox.writable",
                "swarm.worktree_root"
            ]
        );
        assert_eq!(kept.model.as_deref(), Some("m"));
        assert_eq!(kept.permissions.deny, ["run_command(rm:*)"]);
        assert_eq!(kept.sandbox.deny_read, [PathBuf::from("/y")]);
        assert_eq!(kept.swarm.max_workers, Some(2));
        let narrowing =
            "[permissions]\nmode = \"plan\"\n[sandbox]\nnetwork = false\nmode = \"enforce\"\n";
        let file = ConfigFile::parse(narrowing, Path::new("c.toml")).unwrap();
        let (kept, ignored) = split_untrusted(file.clone(), Some("accept-edits"));
        assert!(ignored.is_empty(), "{ignored:?}");
        assert_eq!(kept, file);
        let default =
            ConfigFile::parse("[permissions]\nmode = \"default\"\n", Path::new("c")).unwrap();
        assert_eq!(
            split_untrusted(default, Some("plan")).1,
            ["permissions.mode"]
        );
    }

    fn env(pairs: &[(&str, &str)]) -> EnvSnapshot {
        EnvSnapshot::from_pairs(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())))
    }

    /// The project config file, relative to the workspace root.
    const PROJECT: &str = ".ahelper/config.toml";

    /// Writes `text` to `root/rel`, creating the directories on the way.
    fn write_file(root: &Path, rel: &str, text: &str) {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// A workspace whose project config holds `text`.
    fn project(text: &str) -> tempfile::TempDir {
        let ws = tempfile::tempdir().unwrap();
        write_file(ws.path(), PROJECT, text);
        ws
    }

    /// A workspace, a user config directory and an environment that names the directory
    /// (`XDG_CONFIG_HOME`).
    struct Layers {
        ws: tempfile::TempDir,
        home: tempfile::TempDir,
        env: EnvSnapshot,
    }

    /// Layers whose user and project configs hold `user` and `project_text`; the environment
    /// also sets `vars`.
    fn layers(user: &str, project_text: &str, vars: &[(&str, &str)]) -> Layers {
        let home = tempfile::tempdir().unwrap();
        write_file(home.path(), "ahelper/config.toml", user);
        let mut pairs = vec![("XDG_CONFIG_HOME", home.path().to_str().unwrap())];
        pairs.extend_from_slice(vars);
        Layers {
            ws: project(project_text),
            env: env(&pairs),
            home,
        }
    }

    /// The error of loading the configuration, as shown.
    fn load_err(ws: &Path, env: &EnvSnapshot, cli: &CliOverrides) -> String {
        Config::load(ws, env, cli).unwrap_err().to_string()
    }

    /// The model the configuration resolves to.
    fn model(ws: &Path, env: &EnvSnapshot, cli: &CliOverrides) -> String {
        let cfg = Config::load(ws, env, cli).unwrap();
        cfg.provider().unwrap().model.clone()
    }

    #[test]
    fn unknown_key_names_file_line_and_key() {
        let err = ConfigFile::parse(
            "model = \"x\"\nmodle = \"y\"\n",
            Path::new("/p/config.toml"),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("/p/config.toml"), "{err}");
        assert!(err.contains("modle"), "{err}");
        assert!(err.contains("line 2"), "{err}");
    }

    #[test]
    fn secrets_redact_keys_and_listed_variables_and_name_what_to_scrub() {
        let l = layers(
            "[secrets]\nredact_env = [\"DB_PASSWORD\"]\n",
            "api_key_env = \"MY_LLM_TOKEN\"\n[secrets]\nredact_env = [\"GITHUB_TOKEN\"]\n",
            &[
                ("MY_LLM_TOKEN", "sk-custom-key-0123456789"),
                ("ANTHROPIC_API_KEY", "sk-ant-other-0123456789"),
                ("ANTHROPIC_BASE_URL", "http://127.0.0.1:9"),
                ("DB_PASSWORD", "correct-horse"),
                ("GITHUB_TOKEN", "ghp_0123456789"),
                ("SHORT_API_KEY", "x"),
                ("PATH", "/usr/bin:/bin"),
            ],
        );
        let cfg = Config::load(l.ws.path(), &l.env, &trusted()).unwrap();
        assert_eq!(
            cfg.merged.secrets.redact_env,
            ["DB_PASSWORD", "GITHUB_TOKEN"],
            "lists of both layers are joined"
        );
        assert_eq!(
            cfg.provider().unwrap().api_key.0,
            "sk-custom-key-0123456789"
        );
        let text = "sk-custom-key-0123456789 sk-ant-other-0123456789 correct-horse \
                    ghp_0123456789 http://127.0.0.1:9 x";
        assert_eq!(
            cfg.redactor.redact(text),
            "[REDACTED:MY_LLM_TOKEN] [REDACTED:ANTHROPIC_API_KEY] [REDACTED:DB_PASSWORD] \
             [REDACTED:GITHUB_TOKEN] http://127.0.0.1:9 x"
        );
        let mut scrub = cfg.secret_env.clone();
        scrub.sort();
        assert_eq!(
            scrub,
            [
                "ANTHROPIC_API_KEY",
                "ANTHROPIC_BASE_URL",
                "MY_LLM_TOKEN",
                "SHORT_API_KEY"
            ]
        );
    }

    #[test]
    fn redact_env_names_must_be_variable_names() {
        let ws = project("[secrets]\nredact_env = [\"$HOME\"]\n");
        let err = load_err(ws.path(), &env(&[]), &trusted());
        assert!(
            err.contains("secrets.redact_env") && err.contains("$HOME"),
            "{err}"
        );
    }

    #[test]
    fn layers_precedence_and_rule_union() {
        let l = layers(
            "provider = \"openai\"\nmodel = \"user-model\"\nbase_url = \"http://127.0.0.1:1/v1\"\n[permissions]\ndeny = [\"run_command(rm:*)\"]\n",
            "model = \"project-model\"\n[permissions]\nallow = [\"run_command(cargo test:*)\"]\n",
            &[],
        );
        let cfg = Config::load(l.ws.path(), &l.env, &trusted()).unwrap();
        let p = cfg.provider().unwrap();
        assert_eq!(p.model, "project-model");
        assert_eq!(p.kind, ProviderKind::Openai);
        assert_eq!(cfg.permissions.rules.allow.len(), 1);
        assert_eq!(cfg.permissions.rules.deny.len(), 1);
        let cli = CliOverrides {
            model: Some("cli-model".into()),
            ..trusted()
        };
        let e2 = env(&[
            ("XDG_CONFIG_HOME", l.home.path().to_str().unwrap()),
            ("AHELPER_MODEL", "env-model"),
        ]);
        assert_eq!(model(l.ws.path(), &e2, &trusted()), "env-model");
        assert_eq!(model(l.ws.path(), &e2, &cli), "cli-model");
    }

    #[test]
    fn no_model_names_env_vars() {
        let ws = tempfile::tempdir().unwrap();
        let cfg = Config::load(ws.path(), &env(&[]), &trusted()).unwrap();
        let err = cfg.provider().unwrap_err().to_string();
        assert!(
            err.contains("ANTHROPIC_API_KEY") && err.contains("OPENAI_BASE_URL"),
            "{err}"
        );
        assert!(err.contains("api_key_env"), "{err}");
    }

    #[test]
    fn key_comes_from_named_env_var_and_is_redacted() {
        let ws = tempfile::tempdir().unwrap();
        let e = env(&[("ANTHROPIC_API_KEY", "sk-secret-123")]);
        let cfg = Config::load(ws.path(), &e, &trusted()).unwrap();
        let p = cfg.provider().unwrap();
        assert_eq!(p.api_key.0, "sk-secret-123");
        assert!(!format!("{p:?}").contains("sk-secret"));
    }

    #[test]
    fn config_above_workspace_is_not_read() {
        let parent = project("model = \"evil\"\n");
        let ws = parent.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let e = env(&[("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")]);
        assert_ne!(model(&ws, &e, &trusted()), "evil");
    }

    #[test]
    fn sandbox_table_layers_and_cli_flag() {
        let ws = project("[sandbox]\nnetwork = false\nwritable = [\"../common-target\"]\n");
        let home = tempfile::tempdir().unwrap();
        write_file(
            home.path(),
            ".config/ahelper/config.toml",
            "[sandbox]\nwritable = [\"~/.cargo\"]\ndeny_read = [\"~/.kube\"]\n",
        );
        let e = env(&[("HOME", home.path().to_str().unwrap())]);
        let cfg = Config::load(ws.path(), &e, &trusted()).unwrap();
        let root = cfg.workspace_root.clone();
        assert_eq!(cfg.sandbox.mode, SandboxMode::Enforce);
        assert!(!cfg.sandbox.network);
        assert_eq!(
            cfg.sandbox.writable,
            vec![home.path().join(".cargo"), root.join("../common-target")]
        );
        assert!(cfg.sandbox.deny_read.contains(&home.path().join(".ssh")));
        assert!(cfg.sandbox.deny_read.contains(&home.path().join(".kube")));
        let cli = CliOverrides {
            sandbox: Some("off".into()),
            ..trusted()
        };
        let cfg = Config::load(ws.path(), &e, &cli).unwrap();
        assert_eq!(cfg.sandbox.mode, SandboxMode::Off);
        let bad = CliOverrides {
            sandbox: Some("sometimes".into()),
            ..Default::default()
        };
        let err = load_err(ws.path(), &e, &bad);
        assert!(
            err.contains("sandbox.mode") && err.contains("enforce"),
            "{err}"
        );
    }

    #[test]
    fn rules_naming_unknown_tools_are_errors_that_name_the_file() {
        let ws = project("[permissions]\ndeny = [\"Bash(rm:*)\"]\n");
        let err = load_err(ws.path(), &env(&[]), &trusted());
        assert!(err.contains(".ahelper/config.toml"), "{err}");
        assert!(
            err.contains("unknown tool `Bash`") && err.contains("run_command"),
            "{err}"
        );
        let cli = CliOverrides {
            permission_mode: Some("yolo".into()),
            ..Default::default()
        };
        std::fs::write(ws.path().join(PROJECT), "").unwrap();
        let err = load_err(ws.path(), &env(&[]), &cli);
        assert!(err.contains("command line"), "{err}");
    }

    #[test]
    fn append_rule_keeps_comments_and_dedups() {
        let ws = project("# mine\nmodel = \"m\"\n");
        // The same rule twice: it is written once.
        for _ in 0..2 {
            append_project_rule(
                ws.path(),
                RuleList::Allow,
                "run_command(cargo test:*)",
                None,
            )
            .unwrap();
        }
        append_project_rule(ws.path(), RuleList::Deny, "run_command(rm:*)", None).unwrap();
        let text = std::fs::read_to_string(ws.path().join(PROJECT)).unwrap();
        assert!(text.starts_with("# mine"));
        assert_eq!(text.matches("cargo test").count(), 1);
        let parsed = ConfigFile::parse(&text, Path::new("x")).unwrap();
        assert_eq!(
            parsed.permissions.deny,
            vec!["run_command(rm:*)".to_string()]
        );
    }

    #[test]
    fn verify_settings_default_layer_and_check_ranges() {
        let empty = tempfile::tempdir().unwrap();
        let cfg = Config::load(empty.path(), &env(&[]), &CliOverrides::default()).unwrap();
        assert_eq!(cfg.swarm.verify, None);
        assert_eq!(cfg.swarm.verify_timeout_s, 600);
        assert_eq!(cfg.swarm.worker_fix_rounds, 2);
        assert_eq!(cfg.swarm.merge_fix_attempts, 2);

        let l = layers(
            "[swarm]\nverify = \"make check\"\nverify_timeout_s = 30\n",
            "[swarm]\nverify = \"cargo test --offline\"\nworker_fix_rounds = 0\nmerge_fix_attempts = 5\n",
            &[],
        );
        // Untrusted: the project's verification command (a command ahelper runs) is left out
        // and named; its limits apply where they lower what the user's layer gives, a raised
        // one (merge_fix_attempts 5 > the default 2) is left out and named.
        let cfg = Config::load(l.ws.path(), &l.env, &CliOverrides::default()).unwrap();
        assert_eq!(cfg.swarm.verify.as_deref(), Some("make check"));
        assert_eq!(
            cfg.untrusted.unwrap().ignored,
            vec!["swarm.merge_fix_attempts", "swarm.verify"]
        );
        assert_eq!(cfg.swarm.verify_timeout_s, 30);
        assert_eq!(cfg.swarm.worker_fix_rounds, 0);
        assert_eq!(cfg.swarm.merge_fix_attempts, 2);
        let cfg = Config::load(l.ws.path(), &l.env, &trusted()).unwrap();
        assert_eq!(cfg.swarm.verify.as_deref(), Some("cargo test --offline"));
        assert_eq!(cfg.untrusted, None);
    }

    /// An untrusted project's model and prices apply only when they equal the user's, its
    /// limits only up to the user's (or the default).
    #[test]
    fn untrusted_cost_settings_apply_only_when_no_dearer() {
        let user = "model = \"m1\"\n[agent]\nmax_turns = 60\n";
        let project = "model = \"m2\"\nmax_output_tokens = 4096\n\
                       [pricing.\"m1\"]\ninput_per_mtok = 0.0\noutput_per_mtok = 0.0\n\
                       [agent]\nmax_turns = 50\n[swarm]\nmax_workers = 5\nmax_subtasks = 3\n";
        let l = layers(user, project, &[]);
        let cfg = Config::load(l.ws.path(), &l.env, &CliOverrides::default()).unwrap();
        assert_eq!(cfg.merged.model.as_deref(), Some("m1"));
        assert!(cfg.merged.pricing.is_empty());
        assert_eq!(cfg.agent.max_turns, 50);
        assert_eq!(cfg.swarm.max_workers, 4);
        assert_eq!(cfg.swarm.max_subtasks, 3);
        assert_eq!(cfg.merged.max_output_tokens, Some(4096));
        assert_eq!(
            cfg.untrusted.unwrap().ignored,
            [
                "model",
                "pricing.m1.input_per_mtok",
                "pricing.m1.output_per_mtok",
                "swarm.max_workers"
            ]
        );
        let cfg = Config::load(l.ws.path(), &l.env, &trusted()).unwrap();
        assert_eq!(cfg.merged.model.as_deref(), Some("m2"));
        assert_eq!(cfg.swarm.max_workers, 5);
    }

    /// `swarm.setup` is a command ahelper runs: an untrusted project's is left out and named; its
    /// include size guard applies only up to the default.
    #[test]
    fn untrusted_setup_is_left_out_and_include_guard_capped() {
        let text = "[swarm]\nsetup = \"npm ci\"\nworktree_include_max_mb = 5000\n";
        let file = ConfigFile::parse(text, Path::new("/p/.ahelper/config.toml")).unwrap();
        let (kept, ignored) = split_untrusted(file.clone(), None);
        assert_eq!(kept.swarm.setup, None);
        assert_eq!(kept.swarm.worktree_include_max_mb, None);
        assert_eq!(
            ignored,
            vec!["swarm.setup", "swarm.worktree_include_max_mb"]
        );
        let limits = resolve_swarm(&file.swarm);
        assert_eq!(limits.setup.as_deref(), Some("npm ci"));
        assert_eq!(limits.include_max_bytes, 5_000_000_000);
        let small = ConfigFile::parse(
            "[swarm]\nworktree_include_max_mb = 20\n",
            Path::new("/p/.ahelper/config.toml"),
        )
        .unwrap();
        let (kept, ignored) = split_untrusted(small, None);
        assert_eq!(kept.swarm.worktree_include_max_mb, Some(20));
        assert!(ignored.is_empty(), "{ignored:?}");
        let blank = ConfigFile::parse("[swarm]\nsetup = \" \"\n", Path::new("/p/c.toml"));
        assert!(
            blank
                .unwrap_err()
                .to_string()
                .contains("`swarm.setup` is empty")
        );
        assert_eq!(
            resolve_swarm(&SwarmFile::default()).include_max_bytes,
            ahelper_worktrees::DEFAULT_INCLUDE_MAX_BYTES
        );
    }

    /// `sandbox.max_processes` and `sandbox.max_memory_mb`: defaults 4,096 and 8,192; an
    /// untrusted project may lower them, not raise them or turn the memory limit off (`0`).
    #[test]
    fn command_limits_default_and_an_untrusted_project_only_lowers_them() {
        let path = Path::new("/p/.ahelper/config.toml");
        let env = EnvSnapshot::default();
        let limits = |file: &ConfigFile| {
            resolve_sandbox(&file.sandbox, Path::new("/ws"), &env)
                .unwrap()
                .limits
        };
        assert_eq!(
            limits(&ConfigFile::default()),
            crate::sandbox_os::CommandLimits {
                max_processes: 4096,
                max_memory_mb: 8192
            }
        );
        let lower = ConfigFile::parse("[sandbox]\nmax_processes = 64\nmax_memory_mb = 512\n", path)
            .unwrap();
        let (kept, ignored) = split_untrusted(lower, None);
        assert!(ignored.is_empty(), "{ignored:?}");
        assert_eq!(limits(&kept).max_processes, 64);
        assert_eq!(limits(&kept).max_memory_mb, 512);
        for text in [
            "[sandbox]\nmax_processes = 100000\n",
            "[sandbox]\nmax_memory_mb = 0\n",
            "[sandbox]\nmax_memory_mb = 65536\n",
        ] {
            let file = ConfigFile::parse(text, path).unwrap();
            let (kept, ignored) = split_untrusted(file.clone(), None);
            assert_eq!(ignored.len(), 1, "{text}: {ignored:?}");
            assert!(ignored[0].starts_with("sandbox.max_"), "{ignored:?}");
            assert_eq!(limits(&kept), limits(&ConfigFile::default()), "{text}");
            assert_ne!(limits(&file), limits(&ConfigFile::default()), "{text}");
        }
    }

    /// `swarm.warm_cargo`: `"auto"` by default, `"off"` turns it off, anything else is an error
    /// naming the key.
    #[test]
    fn warm_cargo_defaults_to_auto_and_can_be_turned_off() {
        let path = Path::new("/p/.ahelper/config.toml");
        assert_eq!(
            resolve_swarm(&SwarmFile::default()).warm_cargo,
            WarmCargo::Auto
        );
        let off = ConfigFile::parse("[swarm]\nwarm_cargo = \"off\"\n", path).unwrap();
        assert_eq!(resolve_swarm(&off.swarm).warm_cargo, WarmCargo::Off);
        let (kept, ignored) = split_untrusted(off, None);
        assert_eq!(kept.swarm.warm_cargo, Some(WarmCargo::Off));
        assert!(ignored.is_empty(), "{ignored:?}");
        let bad = ConfigFile::parse("[swarm]\nwarm_cargo = \"always\"\n", path).unwrap_err();
        assert!(bad.to_string().contains("warm_cargo"), "{bad}");
    }

    /// An untrusted project's MCP servers need trust (they are programs ahelper starts); its
    /// prices apply.
    #[test]
    fn untrusted_mcp_servers_are_left_out_and_prices_kept() {
        let text = "[mcp_servers.evil]\ncommand = \"sh\"\nargs = [\"-c\", \"touch x\"]\n\
                    [pricing.\"m\"]\ninput_per_mtok = 1.0\noutput_per_mtok = 2.0\n";
        let file = ConfigFile::parse(text, Path::new("/p/.ahelper/config.toml")).unwrap();
        let (kept, ignored) = split_untrusted(file, None);
        assert!(kept.mcp_servers.is_empty());
        assert!(kept.pricing.contains_key("m"));
        let ignores = |prefix: &str| ignored.iter().any(|k| k.starts_with(prefix));
        assert!(ignores("mcp_servers.evil"), "{ignored:?}");
        assert!(!ignores("pricing"), "{ignored:?}");
    }

    #[test]
    fn verify_settings_out_of_range_name_file_line_and_key() {
        let path = Path::new("/p/.ahelper/config.toml");
        for (text, key, line, expected) in [
            (
                "[swarm]\nverify_timeout_s = 0\n",
                "verify_timeout_s",
                "line 2",
                "1 to 86400",
            ),
            (
                "[swarm]\nmax_workers = 2\nworker_fix_rounds = 11\n",
                "worker_fix_rounds",
                "line 3",
                "0 to 10",
            ),
            (
                "[swarm]\nmerge_fix_attempts = 99\n",
                "merge_fix_attempts",
                "line 2",
                "0 to 10",
            ),
            (
                "[swarm]\nverify_slots = 0\n",
                "verify_slots",
                "line 2",
                "1 to 16",
            ),
            (
                "[swarm]\nverify = \"  \"\n",
                "verify",
                "line 2",
                "--no-verify",
            ),
            (
                "[swarm]\nverify_timeout_s = -5\n",
                "verify_timeout_s",
                "line 2",
                "u64",
            ),
        ] {
            let err = ConfigFile::parse(text, path).unwrap_err().to_string();
            assert!(err.contains("/p/.ahelper/config.toml"), "{err}");
            assert!(err.contains(key), "{key}: {err}");
            assert!(err.contains(line), "{key}: {err}");
            assert!(err.contains(expected), "{key}: {err}");
        }
    }
}
