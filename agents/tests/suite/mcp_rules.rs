//! Permission rules for MCP tools (`mcp__<server>__<tool>`): they ask by default, a rule naming
//! the tool, the server (`mcp__github`) or a prefix (`mcp__github__*`) allows or denies them,
//! and plan mode refuses them.

use super::support::permissions::policy;
use ahelper_agents::permissions::{
    Decision, PermissionMode, PermissionPolicy, PermissionRequest, PermissionRule,
};
use ahelper_agents::tools::ToolKind;
use std::path::Path;

fn decide(p: &PermissionPolicy, tool: &str) -> Decision {
    p.decide(&PermissionRequest {
        tool,
        kind: ToolKind::Execute,
        subject: None,
        workspace_root: Path::new("/ws"),
        cwd: Path::new("/ws"),
    })
}

#[test]
fn mcp_tools_ask_by_default() {
    let p = policy(PermissionMode::Default, &[], &[], &[]);
    assert!(matches!(
        decide(&p, "mcp__everything__echo"),
        Decision::Ask { .. }
    ));
    let p = policy(PermissionMode::AcceptEdits, &[], &[], &[]);
    assert!(matches!(
        decide(&p, "mcp__everything__echo"),
        Decision::Ask { .. }
    ));
}

#[test]
fn rules_name_a_tool_a_server_or_a_prefix() {
    let p = policy(
        PermissionMode::Default,
        &["mcp__everything__echo", "mcp__github__*", "mcp__fs"],
        &[],
        &["mcp__github__delete*"],
    );
    assert_eq!(decide(&p, "mcp__everything__echo"), Decision::Allow);
    assert!(matches!(
        decide(&p, "mcp__everything__add"),
        Decision::Ask { .. }
    ));
    assert_eq!(decide(&p, "mcp__github__create_issue"), Decision::Allow);
    assert!(matches!(
        decide(&p, "mcp__github__delete_repo"),
        Decision::Deny { .. }
    ));
    assert_eq!(decide(&p, "mcp__fs__read"), Decision::Allow);
    // `mcp__fs` is the server `fs`, not every server whose name starts with `fs`.
    assert!(matches!(decide(&p, "mcp__fsx__read"), Decision::Ask { .. }));
}

#[test]
fn plan_mode_refuses_mcp_tools_and_bypass_allows_them() {
    let p = policy(PermissionMode::Plan, &["mcp__github__*"], &[], &[]);
    assert!(matches!(
        decide(&p, "mcp__github__create_issue"),
        Decision::Deny { .. }
    ));
    let p = policy(PermissionMode::Bypass, &[], &[], &[]);
    assert_eq!(decide(&p, "mcp__github__create_issue"), Decision::Allow);
}

#[test]
fn wildcard_is_only_for_mcp_rules() {
    assert!(PermissionRule::parse("mcp__github__*").is_ok());
    assert!(PermissionRule::parse("read*").is_err());
    assert!(PermissionRule::parse("mcp__*__x").is_err());
}
