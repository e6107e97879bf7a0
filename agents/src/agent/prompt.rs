//! The system prompt template.

use crate::tools::ToolRegistry;
use std::path::Path;

/// Largest project-instructions file read, in bytes (longer files are cut with a note).
pub const MAX_INSTRUCTIONS_BYTES: usize = 32 * 1024;

/// Inputs of the system prompt.
#[derive(Clone)]
pub struct SystemPromptParams<'a> {
    /// Canonical workspace root.
    pub workspace_root: &'a Path,
    /// Working directory of tool calls.
    pub cwd: &'a Path,
    /// Directories added with `--add-dir` (canonical), writable like the workspace.
    pub added_dirs: &'a [std::path::PathBuf],
    /// Today's date (`YYYY-MM-DD`).
    pub date: String,
    /// Role instructions (swarm coordinator/worker), appended after the base prompt.
    pub role_instructions: Option<&'a str>,
    /// Tools offered, listed by name.
    pub tools: &'a ToolRegistry,
    /// Where the project instructions come from.
    pub instructions: InstructionsSource<'a>,
}

/// Where the system prompt's project instructions come from.
#[derive(Debug, Clone, Copy)]
pub enum InstructionsSource<'a> {
    /// Read from the workspace root now ([`find_project_instructions`]).
    WorkspaceRoot,
    /// Read already, e.g. from the commit a worktree still being made will have
    /// ([`instructions_at_commit`]); `None`: the project has none.
    Given(Option<&'a ProjectInstructions>),
}

/// File names of project instructions, in order of preference: `AGENTS.md` (the open convention
/// Codex reads), then `CLAUDE.md` (Claude Code's). Only the first that exists is read.
pub const INSTRUCTIONS_FILES: [&str; 2] = ["AGENTS.md", "CLAUDE.md"];

/// Project instructions read from the workspace root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectInstructions {
    /// The file name it came from (`AGENTS.md` or `CLAUDE.md`).
    pub file_name: &'static str,
    /// Its text, cut at [`MAX_INSTRUCTIONS_BYTES`] with a note.
    pub text: String,
}

/// Finds the project instructions file at the workspace root: `AGENTS.md`, or `CLAUDE.md` when
/// there is no `AGENTS.md` — never from a parent directory, and never through a symlink that
/// leads outside the workspace. Returns `None` when neither is present and readable.
pub fn find_project_instructions(workspace_root: &Path) -> Option<ProjectInstructions> {
    let root = std::fs::canonicalize(workspace_root).ok()?;
    INSTRUCTIONS_FILES.iter().find_map(|name| {
        let text = read_instructions_file(&root, name)?;
        Some(ProjectInstructions {
            file_name: name,
            text,
        })
    })
}

/// Reads one instructions file inside `root` (canonical), cut at 32 KiB.
fn read_instructions_file(root: &Path, name: &str) -> Option<String> {
    let real = std::fs::canonicalize(root.join(name)).ok()?;
    if !real.starts_with(root) || !real.is_file() {
        return None;
    }
    let bytes = std::fs::read(&real).ok()?;
    Some(instructions_text(name, &bytes, bytes.len()))
}

/// The instructions text of file `name` whose first bytes are `bytes` and whose whole size is
/// `size` bytes: at most [`MAX_INSTRUCTIONS_BYTES`], with a note when cut.
fn instructions_text(name: &str, bytes: &[u8], size: usize) -> String {
    let mut text =
        String::from_utf8_lossy(&bytes[..bytes.len().min(MAX_INSTRUCTIONS_BYTES)]).into_owned();
    if size > MAX_INSTRUCTIONS_BYTES {
        text.push_str(&format!("\n[{name} was cut at 32 KiB]"));
    }
    text
}

/// The project instructions a worktree of `repo` checked out at `commit` will have, read from
/// the object store, as [`find_project_instructions`] would read them from that worktree.
/// `Ok(None)`: only a checkout can tell (an instructions entry that is a symlink, a directory
/// or a submodule); `Ok(Some(None))`: the commit has none.
///
/// # Errors
/// [`ahelper_worktrees::GitError`] reading the repository.
pub fn instructions_at_commit(
    repo: &Path,
    commit: ahelper_worktrees::Oid,
) -> Result<Option<Option<ProjectInstructions>>, ahelper_worktrees::GitError> {
    use ahelper_worktrees::TreeFile;
    let first = ahelper_worktrees::first_file_at_commit(
        repo,
        commit,
        &INSTRUCTIONS_FILES,
        MAX_INSTRUCTIONS_BYTES,
    )?;
    Ok(match first {
        None => Some(None),
        Some((_, TreeFile::Other)) => None,
        Some((index, TreeFile::Regular { bytes, size })) => {
            let name = INSTRUCTIONS_FILES[index];
            Some(Some(ProjectInstructions {
                file_name: name,
                text: instructions_text(name, &bytes, size),
            }))
        }
    })
}

/// Reads the project instructions text (see [`find_project_instructions`]).
pub fn read_project_instructions(workspace_root: &Path) -> Option<String> {
    find_project_instructions(workspace_root).map(|i| i.text)
}

/// A system prompt laid out for prompt caching (issue 32): everything that is the same for
/// every agent of a run with the same role and tools first, the agent's own facts after.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SystemPrompt {
    /// The whole prompt.
    pub text: String,
    /// Length in bytes of its shared prefix (who the agent is, platform, tools, rules, role,
    /// project instructions): byte-identical across agents of a run with the same role, so a
    /// provider cache entry written by one is read by the others. The rest (workspace root,
    /// working directory, added directories, date) is the agent's own. Always a `char`
    /// boundary of [`Self::text`].
    pub shared_len: usize,
}

/// Builds the system prompt: who the agent is, platform and tools, working rules, the role
/// instructions and the project's `AGENTS.md` (or `CLAUDE.md`) — then the agent's own
/// environment: workspace, working directory, added directories and date.
pub fn build_system_prompt(params: &SystemPromptParams<'_>) -> String {
    build_system_prompt_parts(params).text
}

/// [`build_system_prompt`] with the length of its shared prefix ([`SystemPrompt`]).
pub fn build_system_prompt_parts(params: &SystemPromptParams<'_>) -> SystemPrompt {
    let mut s = String::new();
    s.push_str(
        "You are ahelper, an AI coding assistant working in a software project through tools. \
         Do the task you are given: inspect the code with the read and search tools, make focused \
         changes with the edit tools, run commands to build and test, and finish with a short \
         summary of what you did.\n\n",
    );
    s.push_str(&format!(
        "- Platform: {} ({})\n",
        std::env::consts::OS,
        std::env::consts::ARCH
    ));
    s.push_str(&format!("- Tools: {}\n\n", params.tools.names().join(", ")));
    s.push_str(
        "# Rules\n\
         - Paths are relative to the working directory; you cannot read or write outside the workspace root (and the added directories, when listed under Environment).\n\
         - Read a file before editing it; edit_file needs the exact text to replace.\n\
         - When a tool result is available, use it instead of calling the same tool again.\n\
         - A tool result marked as an error tells you what went wrong: fix the call or choose another approach.\n\
         - Keep answers short and concrete. When the task is done, stop calling tools and reply with a summary.\n",
    );
    if let Some(role) = params.role_instructions {
        s.push_str("\n# Role\n");
        s.push_str(role.trim());
        s.push('\n');
    }
    let instructions = match params.instructions {
        InstructionsSource::WorkspaceRoot => find_project_instructions(params.workspace_root),
        InstructionsSource::Given(given) => given.cloned(),
    };
    if let Some(instructions) = instructions {
        s.push_str(&format!(
            "\n# Project instructions ({})\n",
            instructions.file_name
        ));
        s.push_str(instructions.text.trim());
        s.push('\n');
    }
    let shared_len = s.len();
    push_environment(&mut s, params);
    SystemPrompt {
        text: s,
        shared_len,
    }
}

/// The agent's own facts: workspace root, working directory, added directories, date.
fn push_environment(s: &mut String, params: &SystemPromptParams<'_>) {
    s.push_str("\n# Environment\n");
    s.push_str(&format!(
        "- Workspace root: {}\n",
        params.workspace_root.display()
    ));
    s.push_str(&format!("- Working directory: {}\n", params.cwd.display()));
    if !params.added_dirs.is_empty() {
        let dirs: Vec<String> = params
            .added_dirs
            .iter()
            .map(|d| d.display().to_string())
            .collect();
        s.push_str(&format!(
            "- Added directories (also readable and writable; name files in them by absolute \
             path): {}\n",
            dirs.join(", ")
        ));
    }
    s.push_str(&format!("- Date: {}\n", params.date));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agents_md_at_root_only() {
        let parent = tempfile::tempdir().unwrap();
        std::fs::write(parent.path().join("AGENTS.md"), "PARENT RULES").unwrap();
        let ws = parent.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        let tools = ToolRegistry::new();
        let params = SystemPromptParams {
            workspace_root: &ws,
            cwd: &ws,
            added_dirs: &[],
            date: "2026-11-30".into(),
            role_instructions: None,
            tools: &tools,
            instructions: InstructionsSource::WorkspaceRoot,
        };
        let p = build_system_prompt(&params);
        assert!(!p.contains("PARENT RULES"));
        assert!(p.contains("2026-11-30"));
        std::fs::write(ws.join("AGENTS.md"), "Use tabs.").unwrap();
        assert!(build_system_prompt(&params).contains("Use tabs."));
    }

    #[test]
    fn symlinked_agents_md_outside_is_ignored() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("evil.md"), "EVIL").unwrap();
        let ws = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path().join("evil.md"), ws.path().join("AGENTS.md"))
            .unwrap();
        assert_eq!(read_project_instructions(ws.path()), None);
    }

    #[test]
    fn claude_md_is_read_only_without_agents_md() {
        let ws = tempfile::tempdir().unwrap();
        assert_eq!(find_project_instructions(ws.path()), None);
        std::fs::write(ws.path().join("CLAUDE.md"), "Claude rules").unwrap();
        let found = find_project_instructions(ws.path()).unwrap();
        assert_eq!(found.file_name, "CLAUDE.md");
        assert_eq!(found.text, "Claude rules");
        std::fs::write(ws.path().join("AGENTS.md"), "Agents rules").unwrap();
        let found = find_project_instructions(ws.path()).unwrap();
        assert_eq!(found.file_name, "AGENTS.md");
        assert_eq!(found.text, "Agents rules");
    }

    /// A repository at `dir` with one commit of `files` (name, content; a content starting
    /// with `->` makes a symlink to the rest); the commit.
    fn commit_files(dir: &Path, files: &[(&str, &str)]) -> ahelper_worktrees::Oid {
        let git = |args: &[&str]| {
            let out = std::process::Command::new("git")
                .arg("-C")
                .arg(dir)
                .args(["-c", "user.name=t", "-c", "user.email=t@t"])
                .args(args)
                .output()
                .unwrap();
            assert!(out.status.success(), "{out:?}");
            String::from_utf8(out.stdout).unwrap()
        };
        git(&["init", "-q"]);
        std::fs::write(dir.join("src.txt"), "x").unwrap();
        for (name, content) in files {
            match content.strip_prefix("->") {
                Some(target) => std::os::unix::fs::symlink(target, dir.join(name)).unwrap(),
                None => std::fs::write(dir.join(name), content).unwrap(),
            }
        }
        git(&["add", "-A"]);
        git(&["commit", "-qm", "c"]);
        ahelper_worktrees::Oid::from_str(git(&["rev-parse", "HEAD"]).trim()).unwrap()
    }

    #[test]
    fn instructions_at_a_commit_are_what_its_checkout_has() {
        let long = "y".repeat(MAX_INSTRUCTIONS_BYTES + 10);
        let cases: [&[(&str, &str)]; 5] = [
            &[],
            &[("AGENTS.md", "Agents rules"), ("CLAUDE.md", "Claude rules")],
            &[("CLAUDE.md", "Claude rules")],
            &[("AGENTS.md", &long)],
            &[("AGENTS.md", "")],
        ];
        for files in cases {
            let dir = tempfile::tempdir().unwrap();
            let commit = commit_files(dir.path(), files);
            let read = instructions_at_commit(dir.path(), commit).unwrap();
            assert_eq!(
                read,
                Some(find_project_instructions(dir.path())),
                "{files:?}"
            );
        }
    }

    #[test]
    fn instructions_that_only_a_checkout_can_tell_are_not_guessed() {
        for files in [
            [("AGENTS.md", "->docs/rules.md"), ("docs/rules.md", "r")],
            [
                ("AGENTS.md", "->/etc/passwd"),
                ("CLAUDE.md", "Claude rules"),
            ],
        ] {
            let dir = tempfile::tempdir().unwrap();
            std::fs::create_dir(dir.path().join("docs")).unwrap();
            let commit = commit_files(dir.path(), &files);
            assert_eq!(instructions_at_commit(dir.path(), commit).unwrap(), None);
        }
        // a directory of that name, as a checkout would skip it
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("AGENTS.md")).unwrap();
        let commit = commit_files(dir.path(), &[("AGENTS.md/x", "x")]);
        assert_eq!(instructions_at_commit(dir.path(), commit).unwrap(), None);
    }
}
