//! The permission gate: applies the [`PermissionPolicy`] to a tool call and, when it says
//! "ask", asks through the [`Prompter`] — or denies at once when nobody can answer.

use crate::config::{RuleList, append_project_rule};
use crate::hooks::{HookEvent, HookPermission};
use crate::permissions::{
    Decision, PermissionPolicy, PermissionRequest, PermissionRule, PromptAnswer, PromptRequest,
    Prompter, SettledCheck,
};
use crate::tools::{Tool, ToolContext, ToolKind};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

/// Where rules from `a` (always) and `d` (never) answers are kept.
#[derive(Debug, Clone)]
pub enum RulePersistence {
    /// Appended to `<root>/.ahelper/config.toml` and applied for the rest of the session; the
    /// user's trust in that file (the trust file, [`crate::project_trust`]) is kept.
    ProjectConfig {
        /// The workspace root.
        root: PathBuf,
        /// The user's trust file, when known.
        trust_file: Option<PathBuf>,
    },
    /// Only applied in memory (shared by every holder of the policy, e.g. a whole swarm run).
    InMemory,
}

/// What the permission policy sees of one tool call, owned so that a waiting question can
/// decide it again later.
#[derive(Debug)]
struct CallFacts {
    tool: String,
    kind: crate::tools::ToolKind,
    subject: Option<String>,
    workspace_root: PathBuf,
    cwd: PathBuf,
}

/// The policy's decision for `call` now, with its hooks' `permissionDecision`.
fn decide_call(
    policy: &RwLock<PermissionPolicy>,
    call: &CallFacts,
    hook: Option<HookPermission>,
) -> Decision {
    let (decision, mode) = {
        let policy = policy.read().unwrap_or_else(|e| e.into_inner());
        let decision = policy.decide(&PermissionRequest {
            tool: &call.tool,
            kind: call.kind,
            subject: call.subject.as_deref(),
            workspace_root: &call.workspace_root,
            cwd: &call.cwd,
        });
        (decision, policy.mode)
    };
    let decision = match (decision, hook) {
        (Decision::Allow, Some(HookPermission::Ask)) => Decision::Ask {
            reason: "a PreToolUse hook asks for the user's approval".into(),
        },
        (Decision::Ask { .. }, Some(HookPermission::Allow)) => Decision::Allow,
        (decision, _) => decision,
    };
    ask_for_auto_run(decision, mode, call)
}

/// When the policy allows `call` now: the allow rule that does (the newest one that allows it
/// on its own), or a description of what does when no single rule does (the mode, several
/// rules together). `None` while the call still needs the user.
fn allowing_rule(
    policy: &RwLock<PermissionPolicy>,
    call: &CallFacts,
    hook: Option<HookPermission>,
) -> Option<String> {
    if decide_call(policy, call, hook) != Decision::Allow {
        return None;
    }
    let now = policy.read().unwrap_or_else(|e| e.into_inner()).clone();
    let mut without_rules = now.clone();
    without_rules.rules.allow.clear();
    if decide_call(&RwLock::new(without_rules), call, hook) == Decision::Allow {
        let mode = serde_json::to_value(now.mode)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        return Some(format!("the permission mode {mode}"));
    }
    let rule = now.rules.allow.iter().rev().find(|rule| {
        let mut alone = now.clone();
        alone.rules.allow = vec![(*rule).clone()];
        decide_call(&RwLock::new(alone), call, hook) == Decision::Allow
    });
    Some(rule.map_or_else(
        || "the permission rules now in force".to_string(),
        ToString::to_string,
    ))
}

/// In `accept-edits`, an edit of an auto-run file ([`ahelper_worktrees::is_auto_run`]: CI
/// workflows, editor tasks, hook managers, `.envrc`, `.mcp.json`, `.claude/`, `.cargo/config`,
/// `mise.toml`, `.npmrc`, `AGENTS.md`/`CLAUDE.md`) that the mode allowed asks instead: such a
/// file runs code, or instructs an agent, when the user merely opens, builds or pushes the
/// repository.
fn ask_for_auto_run(
    decision: Decision,
    mode: crate::permissions::PermissionMode,
    call: &CallFacts,
) -> Decision {
    let Some(path) = call.subject.as_deref() else {
        return decision;
    };
    if decision != Decision::Allow
        || mode != crate::permissions::PermissionMode::AcceptEdits
        || call.kind != crate::tools::ToolKind::Edit
    {
        return decision;
    }
    let path = std::path::Path::new(path);
    let relative = path.strip_prefix(&call.workspace_root).unwrap_or(path);
    let relative = relative.to_string_lossy().replace('\\', "/");
    if let Some(decision) = ask_for_mcp_server_code(&call.workspace_root, &relative) {
        return decision;
    }
    if !ahelper_worktrees::is_auto_run(relative.trim_start_matches("./")) {
        return decision;
    }
    Decision::Ask {
        reason: format!(
            "{relative} is an auto-run file (an editor, CI, hooks, direnv, a package or tool \
             manager, an MCP client or another agent runs or obeys it on its own), so \
             accept-edits asks before writing it"
        ),
    }
}

/// In `accept-edits`, an edit of a workspace file that the workspace's `.mcp.json` names as a
/// server's program or argument ([`crate::mcp::files::project_servers_naming`]) asks: the
/// server runs that file when a session starts it.
fn ask_for_mcp_server_code(workspace_root: &std::path::Path, relative: &str) -> Option<Decision> {
    let servers =
        crate::mcp::files::project_servers_naming(workspace_root, std::path::Path::new(relative));
    (!servers.is_empty()).then(|| Decision::Ask {
        reason: format!(
            "{relative} is code the MCP server `{}` of .mcp.json runs, so accept-edits asks \
             before writing it",
            servers.join("`, `")
        ),
    })
}

/// How a call was settled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateOutcome {
    /// Run the call. `answer` is set when the user was asked.
    Allowed {
        /// The user's answer, if there was a prompt ([`PromptAnswer::AllowedByRule`] when the
        /// question was withdrawn unanswered).
        answer: Option<PromptAnswer>,
        /// The allow rule that settled the waiting question, with
        /// [`PromptAnswer::AllowedByRule`].
        settled_by: Option<String>,
    },
    /// Do not run it; `reason` is sent back to the model as an error result.
    Denied {
        /// Readable by the model.
        reason: String,
        /// The user's answer, if there was a prompt.
        answer: Option<PromptAnswer>,
        /// The allow rule that would let such a call run (e.g. `run_command(cargo test:*)`):
        /// set when the call needed approval that was refused or could not be given; `None`
        /// when a deny rule, a protected path, the mode or a `d` answer refused it.
        allow_rule: Option<String>,
    },
}

/// Decides tool calls for one agent. The policy may be shared (a swarm shares one run-wide
/// policy); prompts are serialised by the [`Prompter`].
#[derive(Clone)]
pub struct PermissionGate {
    /// Mode and rules; answers `a`/`d` add rules here.
    pub policy: Arc<RwLock<PermissionPolicy>>,
    /// Who answers questions.
    pub prompter: Arc<dyn Prompter>,
    /// Where `a`/`d` rules go.
    pub persistence: RulePersistence,
    /// Label shown in prompts (worker id and subtask in a swarm).
    pub requester: Option<String>,
    /// `Notification` hooks, run when a question is about to be asked.
    pub notifier: Option<crate::hooks::Hooks>,
}

impl PermissionGate {
    /// A gate over `policy` with `prompter`.
    pub fn new(
        policy: Arc<RwLock<PermissionPolicy>>,
        prompter: Arc<dyn Prompter>,
        persistence: RulePersistence,
    ) -> Self {
        PermissionGate {
            policy,
            prompter,
            persistence,
            requester: None,
            notifier: None,
        }
    }

    /// The `read_file` deny rules in force now (for the `grep` and `glob` tools to skip what
    /// they cover).
    pub fn read_deny_rules(&self) -> Vec<PermissionRule> {
        let policy = self.policy.read().unwrap_or_else(|e| e.into_inner());
        policy
            .rules
            .deny
            .iter()
            .filter(|r| r.tool == "read_file")
            .cloned()
            .collect()
    }

    /// Settles one call of `tool` with `input` in `ctx`.
    pub async fn check(&self, tool: &dyn Tool, input: &Value, ctx: &ToolContext) -> GateOutcome {
        self.check_with_hook(tool, input, ctx, None).await
    }

    /// Settles one call, with the `permissionDecision` of its `PreToolUse` hooks: `allow` skips
    /// the question but never overrides a deny rule; `ask` asks even when a rule allows.
    pub async fn check_with_hook(
        &self,
        tool: &dyn Tool,
        input: &Value,
        ctx: &ToolContext,
        hook: Option<HookPermission>,
    ) -> GateOutcome {
        let call = Arc::new(CallFacts {
            tool: tool.name().to_string(),
            kind: tool.kind(),
            subject: tool.permission_subject(input),
            workspace_root: ctx.workspace_root.clone(),
            cwd: ctx.cwd.clone(),
        });
        let subject = call.subject.clone();
        let decision = decide_call(&self.policy, &call, hook);
        let reason = match decision {
            Decision::Allow => {
                return GateOutcome::Allowed {
                    answer: None,
                    settled_by: None,
                };
            }
            Decision::Deny { reason } => {
                return GateOutcome::Denied {
                    reason: format!("Permission denied: {reason}"),
                    answer: None,
                    allow_rule: None,
                };
            }
            Decision::Ask { reason } => reason,
        };
        let suggested_rule = crate::permissions::rules::suggest_rule(
            tool.name(),
            rule_subject(tool, subject.as_deref(), ctx).as_deref(),
        );
        if !self.prompter.is_interactive() {
            return GateOutcome::Denied {
                reason: format!(
                    "Permission denied: this {} call needs the user's approval ({reason}), and nobody can \
                     approve it in this non-interactive run. Do not retry it; use another approach or \
                     report that it is needed. (The user can allow it with the rule `{suggested_rule}` \
                     in .ahelper/config.toml or with --permission-mode.)",
                    tool.name()
                ),
                answer: None,
                allow_rule: Some(suggested_rule),
            };
        }
        let request = PromptRequest {
            requester: self.requester.clone(),
            tool: tool.name().to_string(),
            subject: subject.clone(),
            input: input.clone(),
            reason: reason.clone(),
            suggested_rule: suggested_rule.clone(),
        };
        self.notify(&request, ctx);
        let (policy, facts) = (self.policy.clone(), call.clone());
        let settled: SettledCheck = Arc::new(move || allowing_rule(&policy, &facts, hook));
        let answer = self.prompter.ask_unless_settled(&request, settled).await;
        match answer {
            PromptAnswer::AllowOnce => GateOutcome::Allowed {
                answer: Some(answer),
                settled_by: None,
            },
            PromptAnswer::AllowedByRule => GateOutcome::Allowed {
                answer: Some(answer),
                settled_by: allowing_rule(&self.policy, &call, hook),
            },
            PromptAnswer::AllowAlways => {
                self.remember(RuleList::Allow, &suggested_rule);
                GateOutcome::Allowed {
                    answer: Some(answer),
                    settled_by: None,
                }
            }
            PromptAnswer::Deny => GateOutcome::Denied {
                reason: "Permission denied by the user for this call.".into(),
                answer: Some(answer),
                allow_rule: Some(suggested_rule),
            },
            PromptAnswer::DenyAlways => {
                self.remember(RuleList::Deny, &suggested_rule);
                GateOutcome::Denied {
                    reason: format!(
                        "Permission denied by the user; calls matching `{suggested_rule}` will always be refused."
                    ),
                    answer: Some(answer),
                    allow_rule: None,
                }
            }
        }
    }

    fn remember(&self, list: RuleList, rule_text: &str) {
        let Ok(rule) = PermissionRule::parse(rule_text) else {
            tracing::warn!(
                rule = rule_text,
                "suggested rule does not parse; not remembered"
            );
            return;
        };
        {
            let mut policy = self.policy.write().unwrap_or_else(|e| e.into_inner());
            match list {
                RuleList::Allow => policy.rules.allow.push(rule),
                RuleList::Deny => policy.rules.deny.push(rule),
            }
        }
        if let RulePersistence::ProjectConfig { root, trust_file } = &self.persistence
            && let Err(e) = append_project_rule(root, list, rule_text, trust_file.as_deref())
        {
            tracing::warn!(error = %e, "could not save permission rule");
        }
    }
}

impl PermissionGate {
    /// Starts the `Notification` hooks for a waiting question, without waiting for them.
    fn notify(&self, request: &PromptRequest, ctx: &ToolContext) {
        let Some(hooks) = self.notifier.clone() else {
            return;
        };
        if hooks.none_for(HookEvent::Notification) {
            return;
        }
        let mut fields = serde_json::Map::new();
        fields.insert(
            "message".into(),
            Value::String(format!(
                "ahelper needs your permission to use {}",
                request.tool
            )),
        );
        let cwd = ctx.cwd.clone();
        tokio::spawn(async move { hooks.run(HookEvent::Notification, None, &cwd, fields).await });
    }
}

/// The subject a suggested rule names: a file tool's path relative to the workspace root when
/// it lies inside (relative rules match paths from the root, so a rule naming one worktree's
/// absolute path would match no later run); anything else as given.
fn rule_subject(tool: &dyn Tool, subject: Option<&str>, ctx: &ToolContext) -> Option<String> {
    let subject = subject?;
    let file_tool =
        matches!(tool.kind(), ToolKind::Read | ToolKind::Edit) && !tool.name().starts_with("mcp__");
    if !file_tool || subject.starts_with('~') {
        return Some(subject.to_string());
    }
    let absolute = crate::permissions::command::normalize_path(&ctx.cwd.join(subject));
    let relative = absolute
        .strip_prefix(&ctx.workspace_root)
        .ok()
        .filter(|r| !r.as_os_str().is_empty());
    Some(relative.map_or_else(|| subject.to_string(), |r| r.display().to_string()))
}
