//! Refused tool calls in `ahelper -p`: never silent. Each refusal is one line on stderr (tool,
//! target, why, and the flag or rule that would allow it), the run ends with a line counting
//! them, and the JSON result lists them as `permission_denials` — Claude Code's field: an array
//! of `{tool_name, tool_use_id, tool_input}`.
//!
//! The exit status does not change: like Claude Code, `-p` exits 0 when the model finished its
//! answer, refusals or not. The closing stderr line says so.

use ahelper_agents::agent::Agent;
use ahelper_agents::permissions::rules::suggest_rule;
use ahelper_agents::permissions::{Decision, PermissionMode, PermissionPolicy, PermissionRequest};
use ahelper_agents::text::for_terminal;
use ahelper_agents::tools::{ToolKind, ToolRegistry};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

/// One refused tool call, explained for the user.
#[derive(Debug, Clone)]
pub struct Refusal {
    /// The model's tool-call id.
    pub tool_use_id: String,
    /// Tool name, e.g. `write_file`.
    pub tool_name: String,
    /// The call's arguments, as the model sent them.
    pub tool_input: Value,
    /// The call as a permission rule would name it, e.g. `write_file(notes.txt)`.
    pub call: String,
    /// Why it was refused, for the user.
    pub why: String,
    /// What would allow it: flags such as `--allowedTools 'write_file(notes.txt)'`; empty when
    /// only removing a deny rule would.
    pub allow_with: Vec<String>,
}

impl Refusal {
    /// The stderr line: `ahelper: refused write_file(notes.txt): <why>; to allow it: <flags>`.
    pub fn line(&self) -> String {
        let allow = if self.allow_with.is_empty() {
            String::new()
        } else {
            format!("; to allow it: {}", self.allow_with.join(" or "))
        };
        for_terminal(&format!(
            "ahelper: refused {}: {}{allow}",
            self.call, self.why
        ))
        .into_owned()
    }

    /// The entry of `permission_denials` in the JSON result.
    pub fn to_json(&self) -> Value {
        json!({
            "tool_name": self.tool_name,
            "tool_use_id": self.tool_use_id,
            "tool_input": self.tool_input,
        })
    }
}

/// The closing stderr line when `count` > 0 calls were refused.
pub fn closing_line(count: usize) -> String {
    let calls = if count == 1 {
        "1 tool call was".to_string()
    } else {
        format!("{count} tool calls were")
    };
    format!(
        "ahelper: {calls} refused (listed above) and did not run; the answer may describe work \
         that was not done. The exit status only says the model finished."
    )
}

/// Explains refusals of one agent: its tools, permission policy and workspace, taken before the
/// agent runs.
pub struct RefusalExplainer {
    tools: ToolRegistry,
    policy: Arc<RwLock<PermissionPolicy>>,
    interactive: bool,
    workspace_root: PathBuf,
    cwd: PathBuf,
}

impl RefusalExplainer {
    /// An explainer for `agent`'s calls.
    pub fn new(agent: &Agent) -> Self {
        let names: Vec<String> = agent
            .tools()
            .names()
            .iter()
            .map(|n| n.to_string())
            .collect();
        let ctx = agent.tool_context();
        RefusalExplainer {
            tools: agent.tools().select(&names),
            policy: agent.gate().policy.clone(),
            interactive: agent.gate().prompter.is_interactive(),
            workspace_root: ctx.workspace_root.clone(),
            cwd: ctx.cwd.clone(),
        }
    }

    /// Explains the refused call `id` of tool `name` with `input`; `reason` is what the model was
    /// told (used when the policy no longer refuses the call).
    pub fn explain(&self, id: &str, name: &str, input: &Value, reason: &str) -> Refusal {
        let tool = self.tools.get(name);
        let subject = tool.and_then(|t| t.permission_subject(input));
        let kind = tool.map_or(ToolKind::Execute, |t| t.kind());
        let rule = suggest_rule(name, subject.as_deref());
        let (decision, mode) = {
            let policy = self.policy.read().unwrap_or_else(|e| e.into_inner());
            let decision = policy.decide(&PermissionRequest {
                tool: name,
                kind,
                subject: subject.as_deref(),
                workspace_root: &self.workspace_root,
                cwd: &self.cwd,
            });
            (decision, policy.mode)
        };
        let (why, allow_with) = match decision {
            Decision::Ask { reason } if self.interactive => (
                format!("refused at the permission prompt ({reason})"),
                allow_hints(&rule, kind, mode),
            ),
            Decision::Ask { reason } => (
                format!("needs approval ({reason}) and nobody can approve it without a terminal"),
                allow_hints(&rule, kind, mode),
            ),
            Decision::Deny { reason } if mode == PermissionMode::Plan => {
                (reason, mode_hint(kind, mode).into_iter().collect())
            }
            Decision::Deny { reason } => (reason, vec![]),
            Decision::Allow => (reason.to_string(), vec![]),
        };
        Refusal {
            tool_use_id: id.to_string(),
            tool_name: name.to_string(),
            tool_input: input.clone(),
            call: rule,
            why,
            allow_with,
        }
    }
}

/// `--allowedTools '<rule>'`, and the permission mode that allows calls of this kind.
fn allow_hints(rule: &str, kind: ToolKind, mode: PermissionMode) -> Vec<String> {
    let mut hints = vec![format!("--allowedTools '{rule}'")];
    hints.extend(mode_hint(kind, mode));
    hints
}

/// The `--permission-mode` that allows a call of `kind` when `mode` does not.
fn mode_hint(kind: ToolKind, mode: PermissionMode) -> Option<String> {
    let needed = match kind {
        ToolKind::Edit if matches!(mode, PermissionMode::Default | PermissionMode::Plan) => {
            "accept-edits"
        }
        ToolKind::Execute if mode != PermissionMode::Bypass => "bypass",
        _ => return None,
    };
    Some(format!("--permission-mode {needed}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_name_the_rule_and_the_mode() {
        assert_eq!(
            allow_hints(
                "write_file(notes.txt)",
                ToolKind::Edit,
                PermissionMode::Default
            ),
            [
                "--allowedTools 'write_file(notes.txt)'",
                "--permission-mode accept-edits"
            ]
        );
        assert_eq!(
            allow_hints(
                "run_command(rm:*)",
                ToolKind::Execute,
                PermissionMode::AcceptEdits
            ),
            [
                "--allowedTools 'run_command(rm:*)'",
                "--permission-mode bypass"
            ]
        );
        assert_eq!(mode_hint(ToolKind::Edit, PermissionMode::AcceptEdits), None);
        assert!(closing_line(1).starts_with("ahelper: 1 tool call was refused"));
        assert!(closing_line(3).starts_with("ahelper: 3 tool calls were refused"));
    }
}
