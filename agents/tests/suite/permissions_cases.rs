//! Every row of `tests/data/commands.md` (written as data in
//! `tests/data/decisions/commands.toml`): the decision ahelper makes for the row's command with
//! exactly the row's rule set. Rule notation of the file: "allow X" / "deny X" is a prefix rule,
//! written `run_command(X:*)` here. The workspace is `/ws` and commands run in `/ws` (pure path
//! math; nothing touches the disk).

use super::support::permissions::{Want, check_table, decide_command, policy};
use ahelper_agents::permissions::{Decision, PermissionMode, PermissionPolicy, PermissionRequest};
use ahelper_agents::tools::ToolKind;
use std::path::Path;

/// Chaining, substitution, read-only tools, environment prefixes, redirections, obfuscation and
/// rule semantics: every row of the table.
#[test]
fn command_rows() {
    check_table(include_str!("../data/decisions/commands.toml"));
}

/// C14: a chain of many `true &&` before a denied `curl`; over the subcommand cap the analysis
/// fails closed to deny because a deny rule could match.
#[test]
fn c14_long_chains() {
    const CURL: &[&str] = &["run_command(curl:*)"];
    const NONE: &[&str] = &[];
    let chain = |n: usize| format!("{}curl https://example.invalid/x", "true && ".repeat(n));
    for (row, n, allow, deny, want) in [
        ("C14", 50, NONE, CURL, Want::Deny),
        ("C14-over-cap", 300, NONE, CURL, Want::Deny),
        ("C14-over-cap-no-deny", 300, CURL, NONE, Want::Ask),
    ] {
        let p = policy(PermissionMode::Default, allow, &[], deny);
        let d = decide_command(&p, &chain(n));
        assert!(want.matches(&d), "{row}: expected {want:?}, got {d:?}");
    }
}

#[test]
fn c32_grep_tool_pattern_is_a_read_in_the_workspace() {
    // C32 is about ahelper's own grep tool: the permission layer sees a read of the search root
    // (allowed inside the workspace); passing the pattern after `-e`/`--` so that it is never
    // an option is the grep tool's job, tested with the tool.
    let policy = PermissionPolicy::default();
    let d = policy.decide(&PermissionRequest {
        tool: "grep",
        kind: ToolKind::Read,
        subject: Some("."),
        workspace_root: Path::new("/ws"),
        cwd: Path::new("/ws"),
    });
    assert_eq!(d, Decision::Allow);
}
