//! Permission decisions as the tests ask for them: a policy from rule lists, and the decision for
//! a shell command in the workspace `/ws` (pure path math; nothing touches the disk).

use ahelper_agents::permissions::{
    Decision, PermissionMode, PermissionPolicy, PermissionRequest, RuleSet,
};
use ahelper_agents::tools::ToolKind;
use std::path::Path;

/// A policy in `mode` with these allow, ask and deny rules; panics on an invalid rule.
pub fn policy(
    mode: PermissionMode,
    allow: &[&str],
    ask: &[&str],
    deny: &[&str],
) -> PermissionPolicy {
    PermissionPolicy {
        mode,
        rules: RuleSet::parse(allow, ask, deny).expect("valid rules"),
        ..PermissionPolicy::default()
    }
}

/// The decision of `p` for `run_command` with `command`, workspace and cwd `/ws`.
pub fn decide_command(p: &PermissionPolicy, command: &str) -> Decision {
    p.decide(&PermissionRequest {
        tool: "run_command",
        kind: ToolKind::Execute,
        subject: Some(command),
        workspace_root: Path::new("/ws"),
        cwd: Path::new("/ws"),
    })
}
