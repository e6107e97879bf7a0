//! The protected paths: files and directories that ahelper's tools never write, in any
//! permission mode, because writing them runs code later or changes ahelper's own rules.
//!
//! This is the one list of paths protected by name. (The user's own directories — ahelper's
//! config and state, `~/.local/bin`, `~/.config/systemd`… — are protected by where they are:
//! [`crate::config::EnvSnapshot::protected_user_dirs`], checked by
//! [`crate::tools::ToolContext::resolve`] and bound read-only for commands by
//! [`crate::sandbox_os`].) The path sandbox refuses `write_file`/`edit_file` on these paths
//! ([`super::resolve`] with [`super::Access::Write`]), and the permission decision denies a
//! shell command that writes one (`echo x > .git/config`, `cp a ~/.bashrc`, `sed -i … .envrc`;
//! see [`crate::permissions`]).
//!
//! A path is compared component by component after folding: Unicode NFKC normalisation, lower
//! case, invisible characters dropped, trailing dots and spaces trimmed, `/` and `\` both
//! separators. So `.GIT`, `．git`, `.gi\u{200B}t` and `.git.` all count as `.git`. The folding
//! is used for this check only; it never changes which file is opened.

use super::is_invisible;
use std::path::Path;
use unicode_normalization::UnicodeNormalization;

/// Why a path is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protection {
    /// Inside `.git` (the directory, or a worktree's `.git` file): hooks and config run code.
    GitDirectory,
    /// Inside `.ssh`: keys and `authorized_keys`.
    SshDirectory,
    /// `.ahelper` itself or a file in it other than the run records: ahelper's own
    /// configuration, permission rules and role prompts.
    AhelperDirectory,
    /// A shell start-up file or git's user configuration: runs code in every new shell or git
    /// command.
    StartupFile,
}

impl Protection {
    /// The reason as a phrase, for messages such as "`.git/config` is protected (REASON)".
    pub fn reason(self) -> &'static str {
        match self {
            Protection::GitDirectory => {
                "`.git` holds the repository's configuration and hooks, which run code"
            }
            Protection::SshDirectory => "`.ssh` holds SSH keys and authorized_keys",
            Protection::AhelperDirectory => {
                "`.ahelper` holds ahelper's own configuration, permission rules and role prompts"
            }
            Protection::StartupFile => {
                "shell start-up and git configuration files run code in every new shell"
            }
        }
    }
}

/// Directories protected with everything inside them, at any depth.
pub const PROTECTED_DIRECTORIES: &[(&str, Protection)] = &[
    (".git", Protection::GitDirectory),
    (".ssh", Protection::SshDirectory),
];

/// ahelper's own directory: protected itself and everything in it except the entries of
/// [`AHELPER_RECORDS`].
pub const AHELPER_DIRECTORY: &str = ".ahelper";

/// Entries of `.ahelper` that are records ahelper writes (swarm runs and their worker
/// transcripts), not configuration: not protected.
pub const AHELPER_RECORDS: &[&str] = &["runs"];

/// File names protected wherever they are: shell start-up files (bash, sh, zsh, csh, ksh, yash,
/// readline, direnv) and git's user configuration.
#[rustfmt::skip]
pub const STARTUP_FILES: &[&str] = &[
    ".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".bash_aliases",
    ".profile", ".shrc", ".login", ".logout",
    ".zshrc", ".zshenv", ".zprofile", ".zlogin", ".zlogout",
    ".cshrc", ".tcshrc", ".kshrc", ".mkshrc", ".yashrc",
    ".inputrc", ".envrc", ".gitconfig",
    "config.fish",
];

/// Paths (their last components) of start-up files with a generic name: git's XDG
/// configuration file.
pub const STARTUP_PATHS: &[&[&str]] = &[&[".config", "git", "config"]];

/// Directories whose every file is a start-up file: fish runs each `conf.d/*.fish` when it
/// starts.
pub const STARTUP_DIRECTORIES: &[&[&str]] = &[&["fish", "conf.d"]];

/// Why `path` is protected, or `None` when it may be written. `path` is relative to the
/// workspace root or absolute; see the module documentation for how it is compared.
pub fn protection(path: &Path) -> Option<Protection> {
    let folded = fold(&path.to_string_lossy());
    let parts: Vec<&str> = folded
        .split(['/', '\\'])
        .map(|c| c.trim_end_matches(['.', ' ']))
        .filter(|c| !c.is_empty())
        .collect();
    directory_protection(&parts).or_else(|| startup_file(&parts))
}

/// Folds a path for comparison: NFKC, invisible characters dropped, lower case, NFKC again (a
/// lower-cased character may have a compatibility decomposition).
fn fold(text: &str) -> String {
    let lower = text
        .nfkc()
        .filter(|c| !is_invisible(*c))
        .collect::<String>()
        .to_lowercase();
    lower.nfkc().collect()
}

/// A protected directory among `parts` (the last part included: the directory itself).
fn directory_protection(parts: &[&str]) -> Option<Protection> {
    for (i, part) in parts.iter().enumerate() {
        if let Some((_, protection)) = PROTECTED_DIRECTORIES.iter().find(|(d, _)| d == part) {
            return Some(*protection);
        }
        if *part == AHELPER_DIRECTORY
            && parts
                .get(i + 1)
                .is_none_or(|next| !AHELPER_RECORDS.contains(next))
        {
            return Some(Protection::AhelperDirectory);
        }
    }
    None
}

/// A start-up file: its name is in [`STARTUP_FILES`], it ends with one of [`STARTUP_PATHS`],
/// or it lies in one of [`STARTUP_DIRECTORIES`].
fn startup_file(parts: &[&str]) -> Option<Protection> {
    let (name, dir) = parts.split_last()?;
    let startup = STARTUP_FILES.contains(name)
        || STARTUP_PATHS.iter().any(|path| parts.ends_with(path))
        || STARTUP_DIRECTORIES.iter().any(|d| dir.ends_with(d));
    startup.then_some(Protection::StartupFile)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::permissions::{
        Decision, PermissionMode, PermissionPolicy, PermissionRequest, RuleSet,
    };
    use crate::tools::{ToolContext, ToolKind, ToolRegistry};
    use serde_json::json;

    /// Paths (relative to the workspace) that exercise every entry of every list.
    fn protected_examples() -> Vec<String> {
        let mut paths = Vec::new();
        for (dir, _) in PROTECTED_DIRECTORIES {
            paths.push(format!("{dir}/config"));
            paths.push(format!("sub/{dir}/hooks/pre-commit"));
        }
        for inside in ["config.toml", "agents/worker.md", "hooks.toml"] {
            paths.push(format!("{AHELPER_DIRECTORY}/{inside}"));
        }
        for name in STARTUP_FILES {
            paths.push(name.to_string());
            paths.push(format!("home/{name}"));
        }
        for path in STARTUP_PATHS {
            paths.push(path.join("/"));
        }
        for dir in STARTUP_DIRECTORIES {
            paths.push(format!("{}/x.fish", dir.join("/")));
        }
        paths
    }

    fn command_decision(root: &Path, command: &str) -> Decision {
        let policy = PermissionPolicy {
            mode: PermissionMode::Bypass,
            rules: RuleSet::default(),
            ..PermissionPolicy::default()
        };
        policy.decide(&PermissionRequest {
            tool: "run_command",
            kind: ToolKind::Execute,
            subject: Some(command),
            workspace_root: root,
            cwd: root,
        })
    }

    /// Every protected path is refused by `write_file` and `edit_file` (through the sandbox)
    /// and, in bypass mode, for commands that write it (through the permission decision); the
    /// file on disk is unchanged.
    #[tokio::test]
    async fn every_protected_path_is_refused_by_file_tools_and_commands() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ToolContext::new(dir.path()).unwrap();
        let root = ctx.workspace_root.clone();
        let tools = ToolRegistry::standard();
        std::fs::write(root.join("a"), "a\n").unwrap();
        for path in protected_examples() {
            assert!(protection(Path::new(&path)).is_some(), "{path}");
            let file = root.join(&path);
            std::fs::create_dir_all(file.parent().unwrap()).unwrap();
            std::fs::write(&file, "old\n").unwrap();
            let write = json!({"path": path, "content": "new\n"});
            let edit = json!({"path": path, "old_string": "old", "new_string": "new"});
            for (tool, input) in [("write_file", write), ("edit_file", edit)] {
                let refusal = tools
                    .get(tool)
                    .unwrap()
                    .call(input, &ctx)
                    .await
                    .unwrap_err();
                assert!(
                    refusal.message().contains("protected"),
                    "{tool} {path}: {refusal}"
                );
            }
            assert_eq!(std::fs::read_to_string(&file).unwrap(), "old\n", "{path}");
            for command in [format!("echo x > {path}"), format!("cp a {path}")] {
                let decision = command_decision(&root, &command);
                assert!(
                    matches!(decision, Decision::Deny { .. }),
                    "{command}: {decision:?}"
                );
            }
        }
    }

    /// ahelper's run records are not protected, for the file tools and commands alike.
    #[tokio::test]
    async fn run_records_are_writable_by_file_tools_and_commands() {
        let dir = tempfile::tempdir().unwrap();
        let ctx = ToolContext::new(dir.path()).unwrap();
        let path = ".ahelper/runs/r1/notes.txt";
        let input = json!({"path": path, "content": "x\n"});
        let tools = ToolRegistry::standard();
        tools
            .get("write_file")
            .unwrap()
            .call(input, &ctx)
            .await
            .unwrap();
        let decision = command_decision(&ctx.workspace_root, &format!("echo x > {path}"));
        assert_eq!(decision, Decision::Allow);
    }
}
