//! Hooks: the user's own commands, run at fixed points of a session with Claude Code's events,
//! input and output.
//!
//! Configuration (user config `~/.config/ahelper/config.toml` only — hooks in a project's
//! `.ahelper/config.toml` are ignored with a warning, because a cloned repository must not run
//! commands on the user's machine by being opened):
//!
//! ```toml
//! [[hooks.PreToolUse]]
//! matcher = "run_command|edit_file"      # regex on the tool name, matched in full
//! # or Claude Code's names: matcher = "Bash|Edit" — then the input uses Claude Code's names
//! hooks = [{ type = "command", command = "python3 ~/check.py", timeout = 60 }]
//! ```
//!
//! Each hook gets one JSON object on stdin (`session_id`, `transcript_path`, `cwd`,
//! `hook_event_name`, and per event `tool_name`, `tool_input`, `tool_use_id`, `tool_response`,
//! `prompt`, `stop_hook_active`, `message`, `source`, `reason`) and answers with its exit code:
//! 0 goes on (stdout may hold JSON: `{"decision": "block", "reason": …}` or
//! `{"hookSpecificOutput": {"permissionDecision": "allow"|"deny"|"ask",
//! "permissionDecisionReason": …, "additionalContext": …}}`); 2 blocks, and stderr is the reason
//! the model reads; any other code is a non-blocking error shown to the user. Format source:
//! Claude Code's hooks reference (<https://docs.anthropic.com/en/docs/claude-code/hooks>).
//!
//! Hooks run with the call's working directory, in their own process group, under a timeout
//! (default 60 s; the whole group is killed when it passes), all matching hooks of an event in
//! parallel.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;

/// Default timeout of one hook command, in seconds (Claude Code's).
pub const DEFAULT_HOOK_TIMEOUT_S: u64 = 60;

/// The points of a session where hooks run (Claude Code's event names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum HookEvent {
    /// Before a tool call runs (after the model made it). Matcher: the tool name.
    PreToolUse,
    /// After a tool call ran. Matcher: the tool name.
    PostToolUse,
    /// A user prompt is about to be sent to the model.
    UserPromptSubmit,
    /// The agent finished answering (no more tool calls).
    Stop,
    /// A swarm worker (a subagent) finished.
    SubagentStop,
    /// The session's first prompt is about to run.
    SessionStart,
    /// The session ends.
    SessionEnd,
    /// A permission question is waiting for the user.
    Notification,
}

impl HookEvent {
    /// The event name (`PreToolUse`, …), as in `hook_event_name`.
    pub fn as_str(self) -> &'static str {
        match self {
            HookEvent::PreToolUse => "PreToolUse",
            HookEvent::PostToolUse => "PostToolUse",
            HookEvent::UserPromptSubmit => "UserPromptSubmit",
            HookEvent::Stop => "Stop",
            HookEvent::SubagentStop => "SubagentStop",
            HookEvent::SessionStart => "SessionStart",
            HookEvent::SessionEnd => "SessionEnd",
            HookEvent::Notification => "Notification",
        }
    }
}

/// The kind of a hook handler; only `command` exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HookKind {
    /// A shell command (`bash -c`).
    Command,
}

/// One hook handler: `{ type = "command", command = "…", timeout = 60 }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookCommand {
    /// Always `command`.
    #[serde(rename = "type")]
    pub kind: HookKind,
    /// The command line, run by `bash -c` in the call's working directory.
    pub command: String,
    /// Seconds before the hook's process group is killed. Default 60.
    pub timeout: Option<u64>,
}

/// A matcher group: the hooks that run when `matcher` matches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookGroup {
    /// Regex matched against the whole tool name (`PreToolUse`, `PostToolUse`): ahelper's name
    /// (`run_command`) or one of Claude Code's for the same tool ([`CLAUDE_CODE_TOOL_NAMES`],
    /// `Bash`); absent, empty or `*` matches everything. Ignored by events without a tool.
    pub matcher: Option<String>,
    /// The names the hooks' input uses for the tool and its arguments. Absent: Claude Code's
    /// when the matcher names a tool only by a Claude Code name (`Bash`, `Edit|Write`),
    /// ahelper's otherwise.
    pub tool_names: Option<ToolNames>,
    /// The handlers.
    pub hooks: Vec<HookCommand>,
}

/// Whose tool and argument names a hook's input carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ToolNames {
    /// ahelper's: `"tool_name": "run_command"`, `tool_input.path`.
    Ahelper,
    /// Claude Code's: `"tool_name": "Bash"`, `tool_input.file_path` (absolute), `timeout`,
    /// `-i`, `head_limit`, so a hook written for Claude Code reads what it expects.
    ClaudeCode,
}

/// Claude Code's names of ahelper's built-in tools, `(Claude Code, ahelper)`; the first pair
/// of an ahelper tool gives the name hooks in Claude Code's shape receive. Source: Claude
/// Code's tools and hooks reference (<https://docs.anthropic.com/en/docs/claude-code/hooks>).
/// MCP tools have the same name in both (`mcp__<server>__<tool>`).
pub const CLAUDE_CODE_TOOL_NAMES: [(&str, &str); 10] = [
    ("Bash", "run_command"),
    ("Read", "read_file"),
    ("Edit", "edit_file"),
    ("MultiEdit", "edit_file"),
    ("Write", "write_file"),
    ("Glob", "glob"),
    ("Grep", "grep"),
    ("LS", "list_dir"),
    ("Task", "agent"),
    ("Agent", "agent"),
];

/// Every name `tool` answers to in a matcher: its own and Claude Code's.
fn names_of(tool: &str) -> impl Iterator<Item = &str> {
    std::iter::once(tool).chain(
        CLAUDE_CODE_TOOL_NAMES
            .iter()
            .filter(move |(_, ours)| *ours == tool)
            .map(|(claude, _)| *claude),
    )
}

/// Claude Code's name of `tool` (its own when it has none: MCP tools).
fn claude_code_name(tool: &str) -> &str {
    CLAUDE_CODE_TOOL_NAMES
        .iter()
        .find(|(_, ours)| *ours == tool)
        .map_or(tool, |(claude, _)| claude)
}

impl HookGroup {
    /// The names this group's hooks receive: the configured ones, else Claude Code's when an
    /// alternative of the matcher matches a Claude Code name and no ahelper name.
    pub fn names(&self) -> ToolNames {
        if let Some(names) = self.tool_names {
            return names;
        }
        let claude_only = |alternative: &str| {
            let Ok(Some(re)) = compile_matcher(alternative) else {
                return false;
            };
            CLAUDE_CODE_TOOL_NAMES.iter().any(|(c, _)| re.is_match(c))
                && !CLAUDE_CODE_TOOL_NAMES.iter().any(|(_, o)| re.is_match(o))
        };
        match &self.matcher {
            Some(m) if m.split('|').any(claude_only) => ToolNames::ClaudeCode,
            _ => ToolNames::Ahelper,
        }
    }
}

/// Warnings for tool matchers (`PreToolUse`, `PostToolUse`) that match no tool, so their hooks
/// would never run — a safety hook that never runs fails open. Matchers naming MCP tools
/// (`mcp…`) are not judged: servers' tools are known only once they run.
pub fn unmatched_matchers(file: &HooksFile) -> Vec<String> {
    let known: Vec<&str> = CLAUDE_CODE_TOOL_NAMES
        .iter()
        .flat_map(|(claude, ours)| [*claude, *ours])
        .collect();
    let mut warnings = Vec::new();
    for event in [HookEvent::PreToolUse, HookEvent::PostToolUse] {
        for group in file.get(&event).into_iter().flatten() {
            let Some(matcher) = &group.matcher else {
                continue;
            };
            let Ok(Some(re)) = compile_matcher(matcher) else {
                continue;
            };
            if matcher.contains("mcp") || known.iter().any(|name| re.is_match(name)) {
                continue;
            }
            warnings.push(format!(
                "the hooks.{} matcher `{matcher}` matches no tool, so its hooks never run; tool \
                 names: run_command (Bash), read_file (Read), edit_file (Edit, MultiEdit), \
                 write_file (Write), glob (Glob), grep (Grep), list_dir (LS), agent (Task, Agent), \
                 mcp__<server>__<tool>",
                event.as_str()
            ));
        }
    }
    warnings
}

/// The tool fields of a hook input (`tool_name`, `tool_input`) in Claude Code's names: the
/// tool's Claude Code name, `file_path` (absolute, from `cwd`) for `path` of file tools,
/// `timeout` for `timeout_ms`, `-i` and `head_limit` for grep's `case_insensitive` and
/// `max_results`, an absolute `path` for `list_dir`.
fn in_claude_code_names(mut fields: Map<String, Value>, cwd: &Path) -> Map<String, Value> {
    let Some(tool) = fields
        .get("tool_name")
        .and_then(Value::as_str)
        .map(str::to_string)
    else {
        return fields;
    };
    fields.insert("tool_name".into(), json!(claude_code_name(&tool)));
    let renames: &[(&str, &str)] = match tool.as_str() {
        "read_file" | "write_file" | "edit_file" => &[("path", "file_path")],
        "run_command" => &[("timeout_ms", "timeout")],
        "grep" => &[("case_insensitive", "-i"), ("max_results", "head_limit")],
        _ => &[],
    };
    if let Some(input) = fields.get_mut("tool_input").and_then(Value::as_object_mut) {
        for (ours, theirs) in renames {
            if let Some(value) = input.remove(*ours) {
                input.insert((*theirs).to_string(), value);
            }
        }
        let path_key = match tool.as_str() {
            "read_file" | "write_file" | "edit_file" => Some("file_path"),
            "list_dir" => Some("path"),
            _ => None,
        };
        if let Some(key) = path_key {
            let given = input.get(key).and_then(Value::as_str).unwrap_or(".");
            let absolute = cwd.join(given).display().to_string();
            input.insert(key.to_string(), json!(absolute));
        }
    }
    fields
}

/// The `[hooks]` table: matcher groups per event.
pub type HooksFile = BTreeMap<HookEvent, Vec<HookGroup>>;

/// Checks every matcher of `file` compiles; returns the first bad one as
/// `(key, message)` (`hooks.PreToolUse.matcher`, the regex error).
pub fn validate(file: &HooksFile) -> Result<(), (String, String)> {
    for (event, groups) in file {
        for group in groups {
            if let Some(m) = &group.matcher {
                compile_matcher(m).map_err(|e| {
                    (
                        format!("hooks.{}.matcher", event.as_str()),
                        format!("`{m}` is not a valid regex: {e}"),
                    )
                })?;
            }
        }
    }
    Ok(())
}

fn compile_matcher(matcher: &str) -> Result<Option<regex::Regex>, regex::Error> {
    if matcher.is_empty() || matcher == "*" {
        return Ok(None);
    }
    regex::Regex::new(&format!("^(?:{matcher})$")).map(Some)
}

/// A permission decision of a `PreToolUse` hook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookPermission {
    /// Skip the permission question (a deny rule still refuses).
    Allow,
    /// Ask the user even when a rule allows.
    Ask,
}

/// How one hook command ended.
#[derive(Debug, Clone, PartialEq)]
pub enum HookOutcome {
    /// Exit 0; stdout as written.
    Success {
        /// Standard output.
        stdout: String,
    },
    /// Exit 2: block; stderr is the reason for the model.
    Blocked {
        /// Standard error.
        stderr: String,
    },
    /// Another exit code, a signal, or the command could not start: shown to the user, not
    /// blocking.
    Failed {
        /// What happened.
        message: String,
    },
    /// Killed at its timeout (not blocking).
    TimedOut {
        /// The timeout in seconds.
        after_s: u64,
    },
}

/// One hook command and how it ended.
#[derive(Debug, Clone, PartialEq)]
pub struct HookRun {
    /// The command line.
    pub command: String,
    /// Its outcome.
    pub outcome: HookOutcome,
}

/// What the hooks of one event said, in configuration order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HookResults {
    /// Each command that ran.
    pub runs: Vec<HookRun>,
}

impl HookResults {
    /// The reason to block, when a hook blocked: exit 2 (its stderr), `"decision": "block"`
    /// (its `reason`) or `"permissionDecision": "deny"` (its `permissionDecisionReason`).
    pub fn block_reason(&self) -> Option<String> {
        let reasons: Vec<String> = self
            .runs
            .iter()
            .filter_map(|run| match &run.outcome {
                HookOutcome::Blocked { stderr } => Some(nonempty(stderr, &run.command)),
                HookOutcome::Success { stdout } => {
                    let output = parse_output(stdout)?;
                    let specific = &output["hookSpecificOutput"];
                    if specific["permissionDecision"] == "deny" {
                        return Some(nonempty(
                            specific["permissionDecisionReason"].as_str().unwrap_or(""),
                            &run.command,
                        ));
                    }
                    (output["decision"] == "block" || output["continue"] == false).then(|| {
                        let reason = output["reason"]
                            .as_str()
                            .or(output["stopReason"].as_str())
                            .unwrap_or("");
                        nonempty(reason, &run.command)
                    })
                }
                _ => None,
            })
            .collect();
        (!reasons.is_empty()).then(|| reasons.join("\n"))
    }

    /// The strongest `permissionDecision` other than deny: `ask` over `allow`.
    pub fn permission(&self) -> Option<HookPermission> {
        let mut found = None;
        for run in &self.runs {
            if let HookOutcome::Success { stdout } = &run.outcome
                && let Some(output) = parse_output(stdout)
            {
                match output["hookSpecificOutput"]["permissionDecision"].as_str() {
                    Some("ask") => found = Some(HookPermission::Ask),
                    Some("allow") if found.is_none() => found = Some(HookPermission::Allow),
                    _ => {}
                }
            }
        }
        found
    }

    /// Text the hooks add to the model's context: `additionalContext`, and plain (non-JSON)
    /// stdout for `UserPromptSubmit` and `SessionStart`, as Claude Code does.
    pub fn additional_context(&self, plain_stdout_counts: bool) -> Option<String> {
        let parts: Vec<String> = self
            .runs
            .iter()
            .filter_map(|run| match &run.outcome {
                HookOutcome::Success { stdout } => match parse_output(stdout) {
                    Some(output) => output["hookSpecificOutput"]["additionalContext"]
                        .as_str()
                        .map(str::to_string),
                    None if plain_stdout_counts && !stdout.trim().is_empty() => {
                        Some(stdout.trim().to_string())
                    }
                    None => None,
                },
                _ => None,
            })
            .collect();
        (!parts.is_empty()).then(|| parts.join("\n"))
    }

    /// Non-blocking errors for the user: `(command, message)`.
    pub fn errors(&self) -> Vec<(String, String)> {
        self.runs
            .iter()
            .filter_map(|run| match &run.outcome {
                HookOutcome::Failed { message } => Some((run.command.clone(), message.clone())),
                HookOutcome::TimedOut { after_s } => Some((
                    run.command.clone(),
                    format!("killed after its timeout of {after_s} s"),
                )),
                _ => None,
            })
            .collect()
    }
}

fn nonempty(reason: &str, command: &str) -> String {
    let reason = reason.trim();
    if reason.is_empty() {
        format!("Blocked by the hook `{command}`.")
    } else {
        reason.to_string()
    }
}

/// Stdout as a JSON object, when it is one.
fn parse_output(stdout: &str) -> Option<Value> {
    let trimmed = stdout.trim();
    if !trimmed.starts_with('{') {
        return None;
    }
    serde_json::from_str::<Value>(trimmed)
        .ok()
        .filter(Value::is_object)
}

/// The hooks of a session, with what every hook input carries.
#[derive(Debug, Clone, Default)]
pub struct Hooks {
    file: Arc<HooksFile>,
    session_id: String,
    transcript_path: Option<PathBuf>,
    project_dir: Option<PathBuf>,
}

impl Hooks {
    /// Hooks from the (user) configuration.
    pub fn new(file: HooksFile) -> Self {
        Hooks {
            file: Arc::new(file),
            ..Hooks::default()
        }
    }

    /// The session id, transcript path and workspace root sent to hooks
    /// (`AHELPER_PROJECT_DIR` and `CLAUDE_PROJECT_DIR` in their environment).
    pub fn for_session(
        mut self,
        session_id: String,
        transcript_path: Option<PathBuf>,
        project_dir: PathBuf,
    ) -> Self {
        self.session_id = session_id;
        self.transcript_path = transcript_path;
        self.project_dir = Some(project_dir);
        self
    }

    /// True when no hook is configured for `event`.
    pub fn none_for(&self, event: HookEvent) -> bool {
        self.file.get(&event).is_none_or(|groups| groups.is_empty())
    }

    /// The commands of `event` whose matcher matches `target` (the tool name, or one of its
    /// Claude Code names), with the names their input uses.
    fn matching(&self, event: HookEvent, target: Option<&str>) -> Vec<(HookCommand, ToolNames)> {
        let Some(groups) = self.file.get(&event) else {
            return Vec::new();
        };
        groups
            .iter()
            .filter(|g| match (g.matcher.as_deref(), target) {
                (Some(m), Some(name)) => match compile_matcher(m) {
                    Ok(Some(re)) => names_of(name).any(|n| re.is_match(n)),
                    Ok(None) => true,
                    Err(_) => false,
                },
                _ => true,
            })
            .flat_map(|g| g.hooks.iter().map(|h| (h.clone(), g.names())))
            .collect()
    }

    /// Runs the hooks of `event` that match `target`, in parallel, in `cwd`; `fields` are added
    /// to the common input fields.
    pub async fn run(
        &self,
        event: HookEvent,
        target: Option<&str>,
        cwd: &Path,
        fields: Map<String, Value>,
    ) -> HookResults {
        let commands = self.matching(event, target);
        if commands.is_empty() {
            return HookResults::default();
        }
        let mut input = json!({
            "session_id": self.session_id,
            "transcript_path": self.transcript_path.as_ref().map(|p| p.display().to_string()),
            "cwd": cwd.display().to_string(),
            "hook_event_name": event.as_str(),
        });
        if let Some(obj) = input.as_object_mut() {
            obj.extend(fields);
        }
        let claude_input = match &input {
            Value::Object(obj) => Value::Object(in_claude_code_names(obj.clone(), cwd)),
            other => other.clone(),
        };
        let input = Arc::new(input.to_string());
        let claude_input = Arc::new(claude_input.to_string());
        let runs = commands.into_iter().map(|(command, names)| {
            let input = match names {
                ToolNames::Ahelper => input.clone(),
                ToolNames::ClaudeCode => claude_input.clone(),
            };
            let cwd = cwd.to_path_buf();
            let project_dir = self.project_dir.clone();
            async move {
                let outcome = run_command(&command, &input, &cwd, project_dir.as_deref()).await;
                HookRun {
                    command: command.command,
                    outcome,
                }
            }
        });
        HookResults {
            runs: futures::future::join_all(runs).await,
        }
    }
}

/// Runs one hook command: `bash -c` in `cwd` in its own process group, the input on stdin,
/// the whole group killed at the timeout.
async fn run_command(
    hook: &HookCommand,
    input: &str,
    cwd: &Path,
    project_dir: Option<&Path>,
) -> HookOutcome {
    let timeout_s = hook.timeout.unwrap_or(DEFAULT_HOOK_TIMEOUT_S);
    let mut cmd = tokio::process::Command::new("bash");
    cmd.arg("-c")
        .arg(&hook.command)
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if let Some(dir) = project_dir {
        cmd.env("AHELPER_PROJECT_DIR", dir)
            .env("CLAUDE_PROJECT_DIR", dir);
    }
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => {
            return HookOutcome::Failed {
                message: format!("could not start: {e}"),
            };
        }
    };
    let pid = child.id();
    if let Some(mut stdin) = child.stdin.take() {
        let input = input.to_string();
        // A hook that never reads its input must not block us: write in the background.
        tokio::spawn(async move {
            let _ = stdin.write_all(input.as_bytes()).await;
        });
    }
    match tokio::time::timeout(Duration::from_secs(timeout_s), child.wait_with_output()).await {
        Ok(Ok(output)) => outcome_of(output),
        Ok(Err(e)) => HookOutcome::Failed {
            message: format!("could not be waited for: {e}"),
        },
        Err(_) => {
            if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
                // SAFETY: killpg only sends a signal to the group this hook leads.
                unsafe {
                    libc::killpg(pid, libc::SIGKILL);
                }
            }
            HookOutcome::TimedOut { after_s: timeout_s }
        }
    }
}

fn outcome_of(output: std::process::Output) -> HookOutcome {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    match output.status.code() {
        Some(0) => HookOutcome::Success { stdout },
        Some(2) => HookOutcome::Blocked { stderr },
        Some(code) => HookOutcome::Failed {
            message: format!("exit code {code}: {}", stderr.trim()),
        },
        None => HookOutcome::Failed {
            message: "killed by a signal".into(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hooks(toml_text: &str) -> Hooks {
        #[derive(Deserialize)]
        struct F {
            hooks: HooksFile,
        }
        let f: F = toml::from_str(toml_text).unwrap();
        validate(&f.hooks).unwrap();
        Hooks::new(f.hooks)
    }

    #[tokio::test]
    async fn exit_codes_and_json_decisions() {
        let dir = tempfile::tempdir().unwrap();
        let h = hooks(
            r#"
            [[hooks.PreToolUse]]
            matcher = "run_command|edit_file"
            hooks = [{ type = "command", command = "echo no >&2; exit 2" }]
            [[hooks.PreToolUse]]
            matcher = "read_file"
            hooks = [{ type = "command", command = "echo '{\"hookSpecificOutput\":{\"permissionDecision\":\"deny\",\"permissionDecisionReason\":\"secret\"}}'" }]
            [[hooks.PreToolUse]]
            matcher = "glob"
            hooks = [{ type = "command", command = "exit 1" }, { type = "command", command = "echo '{\"hookSpecificOutput\":{\"permissionDecision\":\"allow\"}}'" }]
            "#,
        );
        let run = |name: &'static str| {
            let h = h.clone();
            let cwd = dir.path().to_path_buf();
            async move {
                h.run(HookEvent::PreToolUse, Some(name), &cwd, Map::new())
                    .await
            }
        };
        assert_eq!(run("run_command").await.block_reason().unwrap(), "no");
        assert_eq!(run("read_file").await.block_reason().unwrap(), "secret");
        let glob = run("glob").await;
        assert_eq!(glob.block_reason(), None);
        assert_eq!(glob.permission(), Some(HookPermission::Allow));
        assert_eq!(glob.errors().len(), 1);
        assert!(run("run_commandx").await.runs.is_empty(), "matched in full");
    }

    #[test]
    fn bad_matcher_is_named() {
        let mut file = HooksFile::new();
        file.insert(
            HookEvent::PostToolUse,
            vec![HookGroup {
                matcher: Some("(".into()),
                tool_names: None,
                hooks: vec![],
            }],
        );
        assert_eq!(validate(&file).unwrap_err().0, "hooks.PostToolUse.matcher");
    }
}
