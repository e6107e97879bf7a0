//! Permission rules for MCP tools (`mcp__<server>__<tool>`): they ask by default, a rule naming
//! the tool, the server (`mcp__github`) or a prefix (`mcp__github__*`) allows or denies them,
//! and plan mode refuses them.

use super::support::permissions::check_table;
use ahelper_agents::permissions::PermissionRule;

/// Every group of `tests/data/decisions/mcp.toml`: the default, the rules, plan and bypass mode.
#[test]
fn decision_table() {
    check_table(include_str!("../data/decisions/mcp.toml"));
}

#[test]
fn wildcard_is_only_for_mcp_rules() {
    assert!(PermissionRule::parse("mcp__github__*").is_ok());
    assert!(PermissionRule::parse("read*").is_err());
    assert!(PermissionRule::parse("mcp__*__x").is_err());
}
