//! Role definitions (coordinator, worker, merger, fixer): Markdown with YAML front matter, built in
//! (`agents/roles/*.md`) and overridable per project in `.ahelper/agents/<name>.md`.
//!
//! Format: a `---` line, YAML keys `name`, `description`, `tools` (list of tool names),
//! optional `max_turns` and `mcp_servers` (names of declared MCP servers a swarm worker starts),
//! a `---` line, then the instructions in Markdown.

use serde::{Deserialize, Serialize};
use std::path::Path;

/// A role. Serialisable: a remote worker gets the run's worker role in its subtask message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoleDefinition {
    /// Role name.
    pub name: String,
    /// One line.
    pub description: String,
    /// Tools the role may use.
    pub tools: Vec<String>,
    /// Turn cap, when set.
    pub max_turns: Option<u32>,
    /// Declared MCP servers a swarm worker of this role starts (`mcp_servers:` in the front
    /// matter; only the `worker` role's are read).
    #[serde(default)]
    pub mcp_servers: Vec<String>,
    /// Instructions appended to the system prompt.
    pub instructions: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FrontMatter {
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    tools: Vec<String>,
    max_turns: Option<u32>,
    #[serde(default)]
    mcp_servers: Vec<String>,
}

/// Errors of role parsing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("role definition {origin}: {message}")]
pub struct RoleError {
    /// File or `built-in <name>`.
    pub origin: String,
    /// What is wrong.
    pub message: String,
}

const BUILT_IN: [(&str, &str); 6] = [
    ("coordinator", include_str!("../../roles/coordinator.md")),
    ("worker", include_str!("../../roles/worker.md")),
    ("merger", include_str!("../../roles/merger.md")),
    ("fixer", include_str!("../../roles/fixer.md")),
    // Sub-agents of the `agent` tool ([`crate::subagent`]).
    (
        "general-purpose",
        include_str!("../../roles/general-purpose.md"),
    ),
    ("explore", include_str!("../../roles/explore.md")),
];

/// Parses a role file's text.
///
/// # Errors
/// [`RoleError`] when the front matter is missing or invalid.
pub fn parse_role(text: &str, origin: &str) -> Result<RoleDefinition, RoleError> {
    let err = |message: String| RoleError {
        origin: origin.to_string(),
        message,
    };
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
        .ok_or_else(|| err("must start with a `---` line and YAML front matter".into()))?;
    let end = rest
        .find("\n---")
        .ok_or_else(|| err("front matter is not closed by a `---` line".into()))?;
    let yaml = &rest[..end];
    let body = rest[end + 4..].trim_start_matches(['\r', '\n']);
    let fm: FrontMatter = serde_yaml::from_str(yaml).map_err(|e| err(e.to_string()))?;
    Ok(RoleDefinition {
        name: fm.name,
        description: fm.description,
        tools: fm.tools,
        max_turns: fm.max_turns,
        mcp_servers: fm.mcp_servers,
        instructions: body.trim().to_string(),
    })
}

/// Loads role `name`: the project's `.ahelper/agents/<name>.md` if present, else the built-in one.
///
/// # Errors
/// [`RoleError`] for an invalid project file or an unknown role name.
pub fn load_role(workspace_root: &Path, name: &str) -> Result<RoleDefinition, RoleError> {
    let project = workspace_root
        .join(".ahelper")
        .join("agents")
        .join(format!("{name}.md"));
    if let Ok(text) = std::fs::read_to_string(&project) {
        return parse_role(&text, &project.display().to_string());
    }
    let (_, text) = BUILT_IN
        .iter()
        .find(|(n, _)| *n == name)
        .ok_or_else(|| RoleError {
            origin: name.into(),
            message: "no such role".into(),
        })?;
    parse_role(text, &format!("built-in {name}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_roles_parse() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            "coordinator",
            "worker",
            "merger",
            "fixer",
            "general-purpose",
            "explore",
        ] {
            let role = load_role(dir.path(), name).unwrap();
            assert_eq!(role.name, name);
            assert!(!role.instructions.is_empty());
            assert!(!role.tools.is_empty());
        }
    }

    #[test]
    fn fixer_and_merger_can_edit_and_run_the_tests() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["fixer", "merger"] {
            let role = load_role(dir.path(), name).unwrap();
            for tool in [
                "read_file",
                "edit_file",
                "write_file",
                "grep",
                "run_command",
            ] {
                assert!(role.tools.iter().any(|t| t == tool), "{name} lacks {tool}");
            }
            assert!(role.max_turns.is_some(), "{name} is bounded");
            assert!(
                role.instructions.contains("Do not commit")
                    || role.instructions.contains("do not run `git commit`")
            );
        }
        let merger = load_role(dir.path(), "merger").unwrap();
        assert!(merger.instructions.contains("Remove every marker line"));
    }

    #[test]
    fn project_role_overrides_and_bad_front_matter_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let roles = dir.path().join(".ahelper/agents");
        std::fs::create_dir_all(&roles).unwrap();
        let worker = "---\nname: worker\ntools: [read_file]\n---\nBe brief.\n";
        std::fs::write(roles.join("worker.md"), worker).unwrap();
        let role = load_role(dir.path(), "worker").unwrap();
        assert_eq!(role.instructions, "Be brief.");
        assert_eq!(role.tools, vec!["read_file"]);
        assert!(parse_role("no front matter", "x").is_err());
        assert!(
            parse_role("---\nname: x\nbogus: 1\n---\nhi", "x")
                .unwrap_err()
                .message
                .contains("bogus")
        );
    }
}
