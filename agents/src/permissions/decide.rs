//! The decision for one tool call, built on the rules of [`super::rules`] and, for
//! `run_command`, the analysis of [`super::command`].
//!
//! - File tools and other tools ([`decide`] here): deny rules, then (per kind of tool) plan
//!   mode, protected paths, ask rules, allow rules and the mode's defaults; reads outside the
//!   workspace ask.
//! - Commands (`command.rs`): every simple command of the command line is decided on its own
//!   (`simple.rs`: deny rules, files it reads, files it writes, ask rules, then the built-in
//!   read-only list or an allow rule covering every concern); the command line is allowed only
//!   if every command is. Parts that cannot be analysed are denied when a denied program name
//!   could hide in them (`scan.rs`), else they ask.
//! - Rule matching for commands: `matching.rs`; paths as written resolved against the
//!   workspace without touching the disk: `paths.rs`.

use super::rules::{PermissionRule, RulePattern, is_command_tool};
use super::{Decision, PermissionMode, PermissionPolicy, PermissionRequest};
use crate::sandbox::protection_reason;
use crate::tools::ToolKind;
pub use hidden::{HiddenPaths, HiddenPathsError, hidden_paths, hidden_paths_in};
use paths::{Placed, path_rule_matches, place};

mod command;
mod disk;
mod git_dir;
mod hidden;
mod matching;
mod paths;
mod scan;
mod simple;

/// Test fixture: a temporary directory holding `entries`, each a path and its content (a path
/// ending in `/` is a directory); parent directories are created on the way.
#[cfg(test)]
fn temp_tree(entries: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, content) in entries {
        let full = dir.path().join(path);
        if path.ends_with('/') {
            std::fs::create_dir_all(&full).unwrap();
        } else {
            std::fs::create_dir_all(full.parent().unwrap()).unwrap();
            std::fs::write(&full, content).unwrap();
        }
    }
    dir
}

/// The decision for one call; see [`PermissionPolicy::decide`].
pub(crate) fn decide(policy: &PermissionPolicy, request: &PermissionRequest<'_>) -> Decision {
    if is_command_tool(request.tool) {
        return command::decide_command(policy, request);
    }
    let check = ToolCheck {
        policy,
        request,
        placed: request
            .subject
            .and_then(|s| place(s, s.starts_with('~'), request.cwd, request.workspace_root)),
    };
    check.decide()
}

/// True when a `read_file` deny rule of `rules` covers `path` (absolute), as named or where its
/// symbolic links lead; `root` is the canonical workspace root relative rules are matched
/// from. The `grep` and `glob` tools skip such files.
pub fn read_denied(
    rules: &[PermissionRule],
    path: &std::path::Path,
    root: &std::path::Path,
) -> bool {
    let mut denies = rules
        .iter()
        .filter(|r| r.applies_to("read_file", ToolKind::Read))
        .filter(|r| !matches!(r.pattern, RulePattern::Any))
        .peekable();
    if denies.peek().is_none() {
        return false;
    }
    let Some(placed) = place(&path.to_string_lossy(), false, root, root) else {
        return false;
    };
    let real = disk::real(&placed, root);
    denies.any(|r| {
        path_rule_matches(r, &placed, true)
            || real.as_ref().is_some_and(|q| path_rule_matches(r, q, true))
    })
}

/// A refusal because plan mode is read-only.
fn plan_denied(what: &str) -> Decision {
    Decision::Deny {
        reason: format!(
            "plan mode is read-only: {what} is not allowed; present the plan instead, and the \
             user can leave plan mode to carry it out"
        ),
    }
}

/// One call of a file tool or another non-shell tool, with its path placed.
struct ToolCheck<'a> {
    policy: &'a PermissionPolicy,
    request: &'a PermissionRequest<'a>,
    /// The path the call names, relative to the workspace when inside it.
    placed: Option<Placed>,
}

impl ToolCheck<'_> {
    /// The first rule of `list` for this tool that matches the path (`restrictive`: deny and
    /// ask rules also match the absolute path).
    fn matching(&self, list: &[PermissionRule], restrictive: bool) -> Option<String> {
        list.iter()
            .filter(|r| r.applies_to(self.request.tool, self.request.kind))
            .find(|r| match (&r.pattern, &self.placed) {
                (RulePattern::Any, _) => true,
                (_, Some(p)) => path_rule_matches(r, p, restrictive),
                (_, None) => false,
            })
            .map(ToString::to_string)
    }

    /// The deny rule matching where the path's symbolic links lead (a link in the workspace to
    /// a denied file), with that target.
    fn real_path_denial(&self) -> Option<(String, String)> {
        let real = disk::real(self.placed.as_ref()?, self.request.workspace_root)?;
        let rule = self
            .policy
            .rules
            .deny
            .iter()
            .filter(|r| r.applies_to(self.request.tool, self.request.kind))
            .find(|r| path_rule_matches(r, &real, true))?;
        Some((rule.to_string(), real.abs.display().to_string()))
    }

    /// The path as given, for messages.
    fn subject(&self) -> &str {
        self.request.subject.unwrap_or("(no path)")
    }

    /// True when the path is inside the workspace or an added directory.
    fn inside(&self) -> bool {
        self.placed
            .as_ref()
            .is_some_and(|p| p.inside(&self.policy.added_dirs))
    }

    fn decide(&self) -> Decision {
        if let Some(rule) = self.matching(&self.policy.rules.deny, true) {
            return Decision::Deny {
                reason: format!("denied by the rule `{rule}`"),
            };
        }
        if let Some((rule, target)) = self.real_path_denial() {
            return Decision::Deny {
                reason: format!(
                    "{} leads to {target}, denied by the rule `{rule}`",
                    self.subject()
                ),
            };
        }
        match self.request.kind {
            ToolKind::Read => self.read(),
            ToolKind::Edit => self.edit(),
            ToolKind::Execute => self.execute(),
        }
    }

    /// Reads inside the workspace are allowed; outside, an allow rule or bypass mode allows.
    fn read(&self) -> Decision {
        let subject = self.subject();
        if let Some(rule) = self.matching(&self.policy.rules.ask, true) {
            return Decision::Ask {
                reason: format!("the rule `{rule}` asks before reading {subject}"),
            };
        }
        if self.request.subject.is_none()
            || self.inside()
            || self.policy.mode == PermissionMode::Bypass
            || self.matching(&self.policy.rules.allow, false).is_some()
        {
            return Decision::Allow;
        }
        Decision::Ask {
            reason: format!("{subject} is outside the workspace"),
        }
    }

    /// Edits: refused in plan mode and on protected paths; else ask rules, allow rules and the
    /// mode decide.
    fn edit(&self) -> Decision {
        let subject = self.subject();
        let mode = self.policy.mode;
        if mode == PermissionMode::Plan {
            return plan_denied(&format!("editing {subject}"));
        }
        let protected = self
            .placed
            .as_ref()
            .and_then(|p| protection_reason(p.rel.as_deref().unwrap_or(&p.abs)));
        // The file tools refuse protected paths outright (the same list), so asking would only
        // lead to a refusal after a "yes": deny at once, saying why.
        if let Some(why) = protected {
            return Decision::Deny {
                reason: format!(
                    "{subject} is protected ({why}); ahelper's tools never write it — the user \
                     can edit it by hand"
                ),
            };
        }
        if let Some(rule) = self.matching(&self.policy.rules.ask, true) {
            return Decision::Ask {
                reason: format!("the rule `{rule}` asks before editing {subject}"),
            };
        }
        if mode == PermissionMode::Bypass
            || self.matching(&self.policy.rules.allow, false).is_some()
            || (mode == PermissionMode::AcceptEdits && self.inside())
        {
            return Decision::Allow;
        }
        let reason = if self.inside() {
            format!("edit {subject}")
        } else {
            format!("edit {subject}, which is outside the workspace")
        };
        Decision::Ask { reason }
    }

    /// Other tools: refused in plan mode; else ask rules, allow rules and bypass mode decide.
    fn execute(&self) -> Decision {
        let tool = self.request.tool;
        if self.policy.mode == PermissionMode::Plan {
            return plan_denied(&format!("running `{tool}`"));
        }
        if let Some(rule) = self.matching(&self.policy.rules.ask, true) {
            return Decision::Ask {
                reason: format!("the rule `{rule}` asks before `{tool}`"),
            };
        }
        if self.policy.mode == PermissionMode::Bypass
            || self.matching(&self.policy.rules.allow, false).is_some()
        {
            return Decision::Allow;
        }
        Decision::Ask {
            reason: format!("run `{tool}`"),
        }
    }
}
