//! Permissions: modes, `allow`/`ask`/`deny` rules, shell-command analysis and the decision for a
//! tool call.
//!
//! - [`rules`]: the rule syntax (`run_command(cargo test:*)`, `edit_file(src/**)`) and rule sets;
//! - [`command`]: what a shell command line runs, reads and writes (tree-sitter-bash analysis);
//! - `decide`: the decision for one call, from the mode, the rules, the analysis and the
//!   protected paths of [`crate::sandbox::protected`].
//!
//! Precedence: deny beats ask beats allow, whatever their order in the config. A shell command is
//! allowed by rules only if every simple command in it is (see [`command`]).

use crate::tools::ToolKind;
use serde::{Deserialize, Serialize};
use std::path::Path;

pub mod command;
mod decide;
pub mod rules;

pub use decide::{HiddenPaths, HiddenPathsError, hidden_paths, hidden_paths_in, read_denied};
pub use rules::{PermissionRule, RuleSet};

/// Permission mode (`--permission-mode`, `permissions.mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PermissionMode {
    /// Reads allowed; edits and commands ask.
    #[default]
    Default,
    /// Reads and edits allowed; commands ask.
    AcceptEdits,
    /// Read-only: edits and commands denied.
    Plan,
    /// Everything allowed except what a deny rule matches.
    Bypass,
}

impl PermissionMode {
    /// The name users write (`default`, `accept-edits`, `plan`, `bypass`), as
    /// `--permission-mode` takes it.
    pub fn as_str(self) -> &'static str {
        match self {
            PermissionMode::Default => "default",
            PermissionMode::AcceptEdits => "accept-edits",
            PermissionMode::Plan => "plan",
            PermissionMode::Bypass => "bypass",
        }
    }
}

impl std::fmt::Display for PermissionMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for PermissionMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "default" => Ok(Self::Default),
            "accept-edits" | "acceptEdits" | "accept_edits" => Ok(Self::AcceptEdits),
            "plan" => Ok(Self::Plan),
            "bypass" | "bypassPermissions" => Ok(Self::Bypass),
            other => Err(format!(
                "unknown permission mode `{other}`; expected default, accept-edits, plan or bypass"
            )),
        }
    }
}

/// The outcome of checking one tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum Decision {
    /// Run it.
    Allow,
    /// Ask the user; `reason` says why no rule settled it (or what looks dangerous).
    Ask {
        /// Shown in the prompt.
        reason: String,
    },
    /// Refuse; `reason` goes back to the model.
    Deny {
        /// Shown to the model and the user.
        reason: String,
    },
}

/// One tool call as the permission layer sees it.
#[derive(Debug, Clone)]
pub struct PermissionRequest<'a> {
    /// Tool name, e.g. `run_command`.
    pub tool: &'a str,
    /// Read, edit or execute.
    pub kind: ToolKind,
    /// The path (file tools) or command line (`run_command`) rules match against.
    pub subject: Option<&'a str>,
    /// Canonical workspace root.
    pub workspace_root: &'a Path,
    /// Directory the call runs in.
    pub cwd: &'a Path,
}

/// The user's answer to a permission prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PromptAnswer {
    /// `y`: run this call once.
    AllowOnce,
    /// `n`: refuse this call.
    Deny,
    /// `a`: allow, and add an allow rule (project config, or run-wide in a swarm).
    AllowAlways,
    /// `d`: refuse, and add a deny rule.
    DenyAlways,
    /// Not the user's answer: a prompter that queues questions withdrew this one because, while
    /// it waited, the policy came to allow the call (a rule added by an `a` answer to another
    /// question; see [`SettledCheck`]). The call runs.
    AllowedByRule,
}

/// What a prompt shows.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PromptRequest {
    /// Who asks: `None` for the single agent, the worker id (and subtask) in a swarm.
    pub requester: Option<String>,
    /// Tool name.
    pub tool: String,
    /// Path or command.
    pub subject: Option<String>,
    /// Full arguments, for display.
    pub input: serde_json::Value,
    /// Why the call needs a decision.
    pub reason: String,
    /// The rule that `a`/`d` would add, e.g. `run_command(cargo test:*)`.
    pub suggested_rule: String,
}

/// Whether the permission policy now allows a call that is waiting for an answer: `Some` with
/// the allow rule that does (e.g. `run_command(sed -i:*)`), `None` while the call still needs
/// the user. Called by a prompter that queues questions, any number of times.
pub type SettledCheck = std::sync::Arc<dyn Fn() -> Option<String> + Send + Sync>;

/// Asks the user about a tool call. Implemented by the terminal UI; [`DenyPrompter`] is used when
/// there is no terminal.
#[async_trait::async_trait]
pub trait Prompter: Send + Sync {
    /// Shows `request` and waits for the answer.
    async fn ask(&self, request: &PromptRequest) -> PromptAnswer;
    /// Like [`Prompter::ask`], for a prompter that queues questions: a queued question whose
    /// `settled` check turns `Some` (a rule added by an `a` answer to another question now
    /// allows the call) is withdrawn with [`PromptAnswer::AllowedByRule`], never as the user's
    /// answer. The default asks.
    async fn ask_unless_settled(
        &self,
        request: &PromptRequest,
        _settled: SettledCheck,
    ) -> PromptAnswer {
        self.ask(request).await
    }
    /// False when nobody can answer; callers then deny at once instead of asking.
    fn is_interactive(&self) -> bool;
}

/// A prompter for non-interactive runs: every question is answered "no" at once.
#[derive(Debug, Default, Clone, Copy)]
pub struct DenyPrompter;

#[async_trait::async_trait]
impl Prompter for DenyPrompter {
    async fn ask(&self, _request: &PromptRequest) -> PromptAnswer {
        PromptAnswer::Deny
    }
    fn is_interactive(&self) -> bool {
        false
    }
}

/// Mode plus rules: decides tool calls.
#[derive(Debug, Clone, Default)]
pub struct PermissionPolicy {
    /// The mode.
    pub mode: PermissionMode,
    /// The rules from all config layers and session answers.
    pub rules: RuleSet,
    /// True when the command sandbox turns the network off (`[sandbox] network = false`):
    /// commands that open `/dev/tcp`/`/dev/udp` connections are then refused, not asked about.
    pub network_off: bool,
    /// Directories added with `--add-dir` (canonical): paths in them count as inside the
    /// workspace (reads allowed, edits allowed in `accept-edits`, command writes not refused
    /// as outside); their protected paths stay refused.
    pub added_dirs: Vec<std::path::PathBuf>,
}

impl PermissionPolicy {
    /// Decides one call: deny rules first (no mode overrides them), then ask rules, then allow
    /// rules and the mode's defaults, then the built-in read-only command list.
    pub fn decide(&self, request: &PermissionRequest<'_>) -> Decision {
        decide::decide(self, request)
    }
}
