//! Permission decisions as the tests ask for them: a policy from rule lists, and the decision for
//! a shell command in the workspace `/ws` (pure path math; nothing touches the disk).

use ahelper_agents::permissions::{
    Decision, PermissionMode, PermissionPolicy, PermissionRequest, RuleSet,
};
use ahelper_agents::tools::ToolKind;
use serde::Deserialize;
use std::collections::BTreeMap;
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

/// The kind of decision a test case expects (reasons are checked apart where they matter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Want {
    /// [`Decision::Allow`].
    Allow,
    /// [`Decision::Ask`].
    Ask,
    /// [`Decision::Deny`].
    Deny,
    /// Ask or deny: anything but [`Decision::Allow`].
    NotAllow,
}

impl Want {
    /// Whether `d` is a decision of this kind.
    pub fn matches(self, d: &Decision) -> bool {
        matches!(
            (self, d),
            (Want::Allow, Decision::Allow)
                | (Want::Ask, Decision::Ask { .. })
                | (Want::Deny, Decision::Deny { .. })
                | (Want::NotAllow, Decision::Ask { .. } | Decision::Deny { .. })
        )
    }
}

/// The decision of `p` for a tool call written "<tool> <subject>", or "<tool>" for a call without
/// a subject, in the workspace `root` with cwd `cwd`. `read_file` reads, `edit_file` and
/// `write_file` edit, every other tool (`run_command` too) executes.
pub fn decide_call_in(p: &PermissionPolicy, root: &Path, cwd: &Path, call: &str) -> Decision {
    let (tool, subject) = match call.split_once(' ') {
        Some((tool, subject)) => (tool, Some(subject)),
        None => (call, None),
    };
    let kind = match tool {
        "read_file" => ToolKind::Read,
        "edit_file" | "write_file" => ToolKind::Edit,
        _ => ToolKind::Execute,
    };
    p.decide(&PermissionRequest {
        tool,
        kind,
        subject,
        workspace_root: root,
        cwd,
    })
}

/// A table of decisions, as written in `tests/data/decisions/*.toml`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecisionTable {
    /// One policy each, with the decisions it makes.
    pub group: Vec<Group>,
}

/// One policy of a [`DecisionTable`] and the kind of decision it makes for each command and
/// tool call listed. Every field but `name` may be left out.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Group {
    /// Names the group in failure messages: the test or the case it stands for.
    pub name: String,
    /// The permission mode.
    pub mode: PermissionMode,
    /// The rules (with the built-in read-only list unless `builtin_read_only = false`).
    pub rules: RuleSet,
    /// Whether the sandbox's network is off.
    pub network_off: bool,
    /// `run_command` with these commands, run at the workspace root.
    pub commands: Expected,
    /// Tool calls as [`decide_call_in`] reads them, with cwd `/ws/sub` (or the table's own).
    pub calls: Expected,
}

/// Subjects by the kind of decision each must get, and what the reasons of a kind contain.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Expected {
    /// Allowed.
    pub allowed: Vec<String>,
    /// Asked.
    pub asked: Vec<String>,
    /// Denied.
    pub denied: Vec<String>,
    /// Asked or denied.
    pub not_allowed: Vec<String>,
    /// What the reason of every decision of a kind (`ask`, `deny`) contains.
    pub reasons: BTreeMap<Want, String>,
}

impl Group {
    /// The group's policy.
    pub fn policy(&self) -> PermissionPolicy {
        PermissionPolicy {
            mode: self.mode,
            rules: self.rules.clone(),
            network_off: self.network_off,
            ..PermissionPolicy::default()
        }
    }

    /// Every way the decisions of the group's policy differ from the table, one line each,
    /// in the workspace `root` with tool calls made from `call_cwd`.
    pub fn failures_in(&self, root: &Path, call_cwd: &Path) -> Vec<String> {
        assert!(!self.name.is_empty(), "a group without a name: {self:?}");
        let p = self.policy();
        let command = |c: &str| decide_call_in(&p, root, root, &format!("run_command {c}"));
        let mut failures = self.commands.failures(&self.name, command);
        let call = |c: &str| decide_call_in(&p, root, call_cwd, c);
        failures.extend(self.calls.failures(&self.name, call));
        failures
    }
}

impl Expected {
    /// Every subject whose decision by `decide` is not the one listed, named by `group`.
    fn failures(&self, group: &str, decide: impl Fn(&str) -> Decision) -> Vec<String> {
        let lists = [
            (Want::Allow, &self.allowed),
            (Want::Ask, &self.asked),
            (Want::Deny, &self.denied),
            (Want::NotAllow, &self.not_allowed),
        ];
        let mut failures = Vec::new();
        for (want, subjects) in lists {
            for subject in subjects {
                let d = decide(subject);
                if !want.matches(&d) || !self.reason_fits(&d) {
                    failures.push(format!("{group}: `{subject}` expected {want:?}, got {d:?}"));
                }
            }
        }
        failures
    }

    /// Whether the reason of `d` contains the text the table asks of its kind.
    fn reason_fits(&self, d: &Decision) -> bool {
        let (kind, reason) = match d {
            Decision::Allow => return true,
            Decision::Ask { reason } => (Want::Ask, reason),
            Decision::Deny { reason } => (Want::Deny, reason),
        };
        self.reasons.get(&kind).is_none_or(|r| reason.contains(r))
    }
}

/// Checks every group of the TOML decision table `text` in the workspace `/ws`, tool calls made
/// from `/ws/sub`; a failure lists every case that differs, by group and subject.
#[track_caller]
pub fn check_table(text: &str) {
    check_table_in(text, Path::new("/ws"), Path::new("/ws/sub"));
}

/// [`check_table`] in the workspace `root`, tool calls made from `call_cwd`.
#[track_caller]
pub fn check_table_in(text: &str, root: &Path, call_cwd: &Path) {
    let table: DecisionTable = toml::from_str(text).expect("the decision table parses");
    let failures: Vec<String> = table
        .group
        .iter()
        .flat_map(|group| group.failures_in(root, call_cwd))
        .collect();
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}
