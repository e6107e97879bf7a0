//! The decision for a `run_command` call: every simple command decided on its own
//! (`simple.rs`), then what the analysis could not see (commands over the cap, opaque parts,
//! suspicious characters).

use super::plan_denied;
use super::scan::deny_could_appear;
use super::simple::decide_simple;
use crate::permissions::command::{
    CommandAnalysis, Cwd, MAX_COMMAND_BYTES, MAX_SIMPLE_COMMANDS, SimpleCommand, analyze_command,
    normalize_path,
};
use crate::permissions::rules::{PermissionRule, RulePattern, is_command_tool};
use crate::permissions::{Decision, PermissionMode, PermissionPolicy, PermissionRequest};
use std::path::{Path, PathBuf};

/// Context of one command decision.
pub(super) struct Ctx<'a> {
    pub(super) policy: &'a PermissionPolicy,
    /// Canonical workspace root.
    pub(super) root: &'a Path,
    /// Directory the command line runs in.
    pub(super) cwd: &'a Path,
}

impl Ctx<'_> {
    /// The rules of `list` that are about commands.
    pub(super) fn command_rules<'r>(
        &self,
        list: &'r [PermissionRule],
    ) -> impl Iterator<Item = &'r PermissionRule> {
        list.iter().filter(|r| is_command_tool(&r.tool))
    }

    /// Absolute candidates for the working directory of `cmd`.
    pub(super) fn cwds(&self, cmd: &SimpleCommand) -> Option<Vec<PathBuf>> {
        match &cmd.cwd {
            Cwd::Unknown => None,
            Cwd::Possible(list) => Some(
                list.iter()
                    .map(|p| normalize_path(&self.cwd.join(p)))
                    .collect(),
            ),
        }
    }
}

/// The outcome for one simple command.
#[derive(Debug)]
pub(super) enum Outcome {
    /// It may run.
    Allow,
    /// Ask the user, for this reason.
    Ask(String),
    /// Refused (a deny rule, a protected path, a write outside the workspace).
    Deny(String),
    /// Refused because plan mode is read-only; a stronger refusal elsewhere in the command
    /// line takes precedence.
    PlanModeDeny(String),
}

/// Analyses the command line and decides it.
pub(super) fn decide_command(
    policy: &PermissionPolicy,
    request: &PermissionRequest<'_>,
) -> Decision {
    let command = request.subject.unwrap_or("");
    let analysis = analyze_command(command);
    decide_analysis(policy, request, command, &analysis)
}

/// The decision for an analysed command line.
fn decide_analysis(
    policy: &PermissionPolicy,
    request: &PermissionRequest<'_>,
    command: &str,
    analysis: &CommandAnalysis,
) -> Decision {
    let ctx = Ctx {
        policy,
        root: request.workspace_root,
        cwd: request.cwd,
    };
    let mut asks: Vec<String> = Vec::new();
    let mut plan_denial: Option<String> = None;
    for cmd in &analysis.commands {
        match decide_simple(&ctx, cmd) {
            Outcome::Allow => {}
            Outcome::Ask(reason) => asks.push(reason),
            Outcome::Deny(reason) => return Decision::Deny { reason },
            Outcome::PlanModeDeny(reason) => {
                plan_denial.get_or_insert(reason);
            }
        }
    }
    if analysis.over_cap {
        return over_cap(policy, command);
    }
    if let Some(denied) = opaque_denial(policy, analysis) {
        return denied;
    }
    if policy.mode == PermissionMode::Plan {
        if let Some(reason) = plan_denial {
            return Decision::Deny { reason };
        }
        if let Some(part) = analysis.opaque.first() {
            return plan_denied(&format!("`{}` ({})", part.text, part.reason));
        }
    }
    opaque_asks(policy, analysis, &mut asks);
    if policy.mode != PermissionMode::Bypass {
        asks.extend(analysis.warnings.iter().map(|w| format!("warning: {w}")));
    }
    if asks.is_empty() {
        Decision::Allow
    } else {
        asks.dedup();
        Decision::Ask {
            reason: asks.join("; "),
        }
    }
}

/// A command line too large to analyse: denied when a denied program name appears in it,
/// else asked about whole (refused in plan mode).
fn over_cap(policy: &PermissionPolicy, command: &str) -> Decision {
    if let Some(rule) = deny_could_appear(policy, command) {
        return Decision::Deny {
            reason: format!(
                "the command is too large to analyse (over {MAX_SIMPLE_COMMANDS} simple commands \
                 or {MAX_COMMAND_BYTES} bytes) and may run something the rule `{rule}` denies"
            ),
        };
    }
    if policy.mode == PermissionMode::Plan {
        return plan_denied("a command too large to analyse");
    }
    Decision::Ask {
        reason: format!(
            "the command is too large to analyse (over {MAX_SIMPLE_COMMANDS} simple commands); \
             review it whole"
        ),
    }
}

/// The denial for an opaque part in which a denied program name appears.
fn opaque_denial(policy: &PermissionPolicy, analysis: &CommandAnalysis) -> Option<Decision> {
    analysis.opaque.iter().find_map(|part| {
        let rule = deny_could_appear(policy, &part.text)?;
        Some(Decision::Deny {
            reason: format!(
                "`{}` cannot be analysed ({}) and may run something the rule `{rule}` denies",
                part.text, part.reason
            ),
        })
    })
}

/// Opaque parts ask, unless the user approved every command (a bare `run_command` allow rule,
/// or bypass mode) and no deny rule for commands exists that they could hide. A code runner's
/// own command is decided like any other; its hidden code matters only when a deny rule could
/// be hiding in it.
fn opaque_asks(policy: &PermissionPolicy, analysis: &CommandAnalysis, asks: &mut Vec<String>) {
    let bare_allow = policy
        .rules
        .allow
        .iter()
        .any(|r| is_command_tool(&r.tool) && matches!(r.pattern, RulePattern::Any));
    let command_denies = policy.rules.deny.iter().any(|r| is_command_tool(&r.tool));
    if !command_denies && (policy.mode == PermissionMode::Bypass || bare_allow) {
        return;
    }
    let hint = if command_denies {
        " (it could hide a command a deny rule refuses)"
    } else {
        ""
    };
    for part in analysis
        .opaque
        .iter()
        .filter(|p| command_denies || !p.code_runner)
    {
        asks.push(format!(
            "`{}` cannot be analysed: {}{hint}",
            part.text, part.reason
        ));
    }
}
