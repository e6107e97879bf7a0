//! Hazardous content in a branch: what a worker's commits add that could run code, reach outside
//! the repository or hide from a reviewer once merged. [`scan_hazards`] diffs two commits'
//! trees with libgit2 (modes, paths, sizes, symlink targets; no checkout) and returns typed
//! findings; the swarm lists them per worker and refuses `--apply` until the user confirms.
//!
//! What is flagged (added or changed files only; deletions are not hazards):
//! * a **symlink** whose target is absolute or climbs above the repository root with `..`;
//! * a **`.gitattributes`** line that names a `filter`, a `merge` driver, or a `diff` driver
//!   other than git's built-in function-name patterns — drivers are commands from git
//!   configuration, which the attributes switch on;
//! * a **`.gitmodules`** file (submodule URLs are fetched, and checked out, by `git submodule`);
//! * a file larger than [`HazardLimits::max_file_bytes`];
//! * a **path with control characters** (C0, DEL, C1) or bidirectional overrides, which display
//!   as something else in a terminal or review tool;
//! * an **auto-run file** ([`AUTO_RUN_PATHS`], [`AUTO_RUN_NAMES`], [`AUTO_RUN_SUFFIXES`]): read
//!   and executed by an editor, CI, a git hook manager, direnv, a package or tool manager
//!   (cargo's `runner`/`rustc-wrapper`, `.npmrc`'s `node-options`, mise tasks), Claude Code's
//!   hooks, an MCP client or ahelper itself when the user merely opens, builds or pushes the
//!   repository — or instructions another agent obeys (`AGENTS.md`, `CLAUDE.md`).
//!   `Makefile`, `package.json` scripts and build scripts are not on the list: they run only
//!   when the user runs the build, and nearly every change touches them;
//! * an **embedded git directory** (`HEAD` plus `objects/` or `refs/`, [`crate::git_shape`]):
//!   git run inside it obeys its `config`;
//! * a file named **`config` with git settings that run programs** (`core.fsmonitor`,
//!   `core.worktree`, `core.hooksPath`, `hook.*`, …).
//! * a file that the root `.mcp.json` (of either commit) names as an MCP server's command,
//!   argument (or `--opt=value` value, or `-m module` file) or environment value: the server
//!   runs it when a session starts it.

use std::path::Path;

use git2::{Delta, Diff, FileMode, Oid, Repository};
use serde::{Deserialize, Serialize};

use crate::GitError;
use crate::error::Context as _;
use crate::repo::open_repo;

/// Limits of [`scan_hazards`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HazardLimits {
    /// A file (blob) larger than this many bytes is flagged. Default 10 MB (10⁷ bytes).
    pub max_file_bytes: u64,
}

impl Default for HazardLimits {
    fn default() -> Self {
        HazardLimits {
            max_file_bytes: 10_000_000,
        }
    }
}

/// Paths of auto-run files, relative to the repository root (where the tools look for them): a
/// path is one when it equals an entry, or lies below an entry ending in `/`.
pub const AUTO_RUN_PATHS: &[&str] = &[
    ".vscode/tasks.json",
    ".vscode/settings.json",
    ".vscode/launch.json",
    ".devcontainer/",
    ".github/workflows/",
    ".gitlab-ci.yml",
    ".husky/",
    ".pre-commit-config.yaml",
    ".ahelper/",
    ".mcp.json",
    ".claude/",
];

/// File names that are auto-run files in any directory: direnv loads `.envrc` of every
/// directory the shell enters; npm reads the `.npmrc` of the project being run; mise the
/// `mise.toml` of every directory up from the current one; Codex and Claude Code the
/// `AGENTS.md` / `CLAUDE.md` of the directories they work in.
pub const AUTO_RUN_NAMES: &[&str] = &[
    ".envrc",
    ".npmrc",
    "mise.toml",
    ".mise.toml",
    "mise.local.toml",
    ".mise.local.toml",
    "AGENTS.md",
    "CLAUDE.md",
    "CLAUDE.local.md",
];

/// Paths that are auto-run files at any depth (cargo reads `.cargo/config.toml` of every
/// directory up from the one it runs in; mise its `.config/mise.toml` and `.mise/config.toml`).
pub const AUTO_RUN_SUFFIXES: &[&str] = &[
    ".cargo/config.toml",
    ".cargo/config",
    ".config/mise.toml",
    ".config/mise/config.toml",
    ".mise/config.toml",
];

/// What makes a path hazardous.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum HazardKind {
    /// A symlink to `target`, which is absolute or leaves the repository.
    SymlinkOutside {
        /// The link's target as stored.
        target: String,
    },
    /// A `.gitattributes` line naming a filter, merge or diff driver.
    AttributesDriver {
        /// The line.
        line: String,
    },
    /// A `.gitmodules` file.
    Submodules,
    /// A file over the size limit.
    LargeFile {
        /// Its size in bytes.
        bytes: u64,
    },
    /// A path with control characters or bidirectional overrides.
    ControlCharacters,
    /// A file an editor, CI, hook manager, direnv, a package or tool manager, an MCP client,
    /// another agent or ahelper runs or obeys on its own.
    AutoRun,
    /// A directory laid out like a git directory (`HEAD` plus `objects/` or `refs/`); the
    /// hazard's path is that directory.
    EmbeddedRepository,
    /// A file named `config` with a git setting that runs a program (`core.fsmonitor`, …).
    GitConfig {
        /// The setting, `section.key` in lower case.
        setting: String,
    },
    /// A file the root `.mcp.json` names as the program or an argument of MCP servers.
    McpServerCode {
        /// The servers that name it, comma-separated.
        servers: String,
    },
    /// A temporary file of ahelper's atomic writer ([`crate::is_writer_temp_name`]).
    WriterTemp,
}

/// One finding: the path (as UTF-8, control characters escaped as `\u{..}`) and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hazard {
    /// Path in the repository, `/`-separated, control characters escaped.
    pub path: String,
    /// What is wrong with it.
    #[serde(flatten)]
    pub kind: HazardKind,
}

impl std::fmt::Display for Hazard {
    /// One line: `<path>: <why>`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path = &self.path;
        match &self.kind {
            HazardKind::SymlinkOutside { target } => write!(
                f,
                "{path}: symlink pointing outside the repository ({})",
                target.escape_default()
            ),
            HazardKind::AttributesDriver { line } => write!(
                f,
                "{path}: switches on a git filter/diff/merge driver ({})",
                line.escape_default()
            ),
            HazardKind::Submodules => write!(f, "{path}: adds or changes git submodules"),
            HazardKind::LargeFile { bytes } => {
                write!(f, "{path}: large file ({:.1} MB)", *bytes as f64 / 1e6)
            }
            HazardKind::ControlCharacters => {
                write!(f, "{path}: file name with control or bidi characters")
            }
            HazardKind::AutoRun => write!(
                f,
                "{path}: auto-run file (editor, CI, hooks, direnv, tool or MCP config, \
                 agent instructions or ahelper config)"
            ),
            HazardKind::EmbeddedRepository => write!(
                f,
                "{path}: embedded git directory (HEAD with objects/ or refs/): git run there \
                 obeys its config"
            ),
            HazardKind::GitConfig { setting } => write!(
                f,
                "{path}: git configuration that runs a program ({})",
                setting.escape_default()
            ),
            HazardKind::McpServerCode { servers } => write!(
                f,
                "{path}: code of MCP server {servers} (named by .mcp.json), which runs when a \
                 session starts it"
            ),
            HazardKind::WriterTemp => write!(
                f,
                "{path}: temporary file of an interrupted write (may be a partial copy; delete it)"
            ),
        }
    }
}

/// The hazards that commit `to` adds relative to commit `from` (tree to tree), in the
/// repository containing `repo`, sorted by path. Rename detection is off: a renamed file counts
/// as added under its new name.
///
/// # Errors
/// [`GitError::CommitNotFound`] for an unknown id; [`GitError::Libgit2`]; those of
/// [`crate::RepoInfo::discover`].
pub fn scan_hazards(
    repo: &Path,
    from: Oid,
    to: Oid,
    limits: &HazardLimits,
) -> Result<Vec<Hazard>, GitError> {
    let repo = open_repo(repo)?;
    let diff = crate::commit::tree_diff(&repo, from, to)?;
    let mcp = mcp_named_paths(&repo, &[from, to]);
    hazards_in(&repo, &diff, to, &mcp, limits)
}

/// Repository-relative paths that the root `.mcp.json` of one of `commits` names as a stdio
/// server's command, argument, `--opt=value` value or environment value → the servers naming
/// each (`` `a`, `b` ``). Absolute paths and paths leaving the repository are left out.
pub(crate) fn mcp_named_paths(
    repo: &Repository,
    commits: &[Oid],
) -> std::collections::BTreeMap<String, String> {
    let mut named: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for id in commits {
        let Some(servers) = project_mcp_servers(repo, *id) else {
            continue;
        };
        for (server, entry) in servers {
            for path in mcp_entry_paths(&entry) {
                let list = named.entry(path).or_default();
                if !list.contains(&server) {
                    list.push(server.clone());
                }
            }
        }
    }
    named
        .into_iter()
        .map(|(path, servers)| {
            let quoted: Vec<String> = servers.iter().map(|s| format!("`{s}`")).collect();
            (path, quoted.join(", "))
        })
        .collect()
}

/// The `mcpServers` object of commit `id`'s root `.mcp.json`, when it has one that parses.
fn project_mcp_servers(
    repo: &Repository,
    id: Oid,
) -> Option<serde_json::Map<String, serde_json::Value>> {
    let tree = repo.find_commit(id).ok()?.tree().ok()?;
    let entry = tree.get_name(".mcp.json")?;
    let blob = repo.find_blob(entry.id()).ok()?;
    let value: serde_json::Value = serde_json::from_slice(blob.content()).ok()?;
    value.get("mcpServers")?.as_object().cloned()
}

/// The repository-relative paths one `.mcp.json` entry may name (see [`mcp_named_paths`]).
fn mcp_entry_paths(entry: &serde_json::Value) -> Vec<String> {
    let text = |v: &serde_json::Value| v.as_str().map(str::to_string);
    let mut strings: Vec<String> = entry.get("command").and_then(text).into_iter().collect();
    let mut previous = String::new();
    for arg in entry
        .get("args")
        .and_then(|a| a.as_array())
        .into_iter()
        .flatten()
    {
        if let Some(arg) = text(arg) {
            if let Some((_, value)) = arg.split_once('=') {
                strings.push(value.to_string());
            }
            if previous == "-m" {
                // `python -m a.b` runs `a/b.py` or `a/b/__main__.py`.
                let path = arg.replace('.', "/");
                strings.push(format!("{path}.py"));
                strings.push(format!("{path}/__main__.py"));
            }
            previous = arg.clone();
            strings.push(arg);
        }
    }
    if let Some(env) = entry.get("env").and_then(|e| e.as_object()) {
        strings.extend(env.values().filter_map(text));
    }
    strings.iter().filter_map(|s| repository_path(s)).collect()
}

/// `text` as a repository-relative path (`./a/../b.py` → `b.py`), or `None` when it is empty, an
/// option (`-…`), absolute or leaves the repository.
fn repository_path(text: &str) -> Option<String> {
    if text.is_empty() || text.starts_with(['/', '-']) || text.contains("://") {
        return None;
    }
    let mut parts: Vec<&str> = Vec::new();
    for part in text.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// The hazards of the added and changed entries of a tree `diff` in `repo` whose new side is
/// commit `to`, sorted by path;
/// `mcp` maps the paths `.mcp.json` names to their servers ([`mcp_named_paths`]).
pub(crate) fn hazards_in(
    repo: &Repository,
    diff: &Diff<'_>,
    to: Oid,
    mcp: &std::collections::BTreeMap<String, String>,
    limits: &HazardLimits,
) -> Result<Vec<Hazard>, GitError> {
    let tree =
        repo.find_commit(to)
            .and_then(|c| c.tree())
            .map_err(|_| GitError::CommitNotFound {
                rev: to.to_string(),
            })?;
    let mut found = Vec::new();
    let mut git_dirs = Vec::new();
    for delta in diff.deltas() {
        if matches!(delta.status(), Delta::Deleted) {
            continue;
        }
        let file = delta.new_file();
        let Some(raw) = file.path_bytes() else {
            continue;
        };
        found.extend(hazards_of(repo, raw, file.id(), file.mode(), limits)?);
        git_dirs.extend(embedded_git_dirs(&tree, &String::from_utf8_lossy(raw)));
        let text = String::from_utf8_lossy(raw);
        if let Some(servers) = mcp.get(text.as_ref()) {
            found.push(Hazard {
                path: escape_controls(&text),
                kind: HazardKind::McpServerCode {
                    servers: servers.clone(),
                },
            });
        }
    }
    git_dirs.sort();
    git_dirs.dedup();
    found.extend(git_dirs.into_iter().map(|dir| Hazard {
        path: escape_controls(if dir.is_empty() { "." } else { &dir }),
        kind: HazardKind::EmbeddedRepository,
    }));
    found.sort_by(|x, y| x.path.cmp(&y.path));
    Ok(found)
}

/// The directories that the added or changed `path` completes into a git directory in `tree`
/// ([`crate::git_shape::git_dir_candidates`]).
fn embedded_git_dirs(tree: &git2::Tree<'_>, path: &str) -> Vec<String> {
    let kind_at = |dir: &str, name: &str| {
        let full = if dir.is_empty() {
            name.to_string()
        } else {
            format!("{dir}/{name}")
        };
        tree.get_path(Path::new(&full)).ok().and_then(|e| e.kind())
    };
    crate::git_shape::git_dir_candidates(path)
        .into_iter()
        .filter(|dir| {
            crate::git_shape::is_git_dir_layout(
                kind_at(dir, "HEAD") == Some(git2::ObjectType::Blob),
                kind_at(dir, "objects") == Some(git2::ObjectType::Tree),
                kind_at(dir, "refs") == Some(git2::ObjectType::Tree),
            )
        })
        .collect()
}

/// The hazards of one added or changed entry.
fn hazards_of(
    repo: &Repository,
    raw_path: &[u8],
    id: Oid,
    mode: FileMode,
    limits: &HazardLimits,
) -> Result<Vec<Hazard>, GitError> {
    let text = String::from_utf8_lossy(raw_path);
    let path = escape_controls(&text);
    let mut kinds = Vec::new();
    if text.chars().any(is_control_or_bidi) {
        kinds.push(HazardKind::ControlCharacters);
    }
    if is_auto_run(&text) {
        kinds.push(HazardKind::AutoRun);
    }
    let name = text.rsplit('/').next().unwrap_or(&text);
    if name == ".gitmodules" {
        kinds.push(HazardKind::Submodules);
    }
    if crate::is_writer_temp_name(name) {
        kinds.push(HazardKind::WriterTemp);
    }
    if mode == FileMode::Commit {
        return Ok(with_path(&path, kinds));
    }
    let blob = repo
        .find_blob(id)
        .ctx(|| format!("reading {path} ({id})"))?;
    if blob.size() as u64 > limits.max_file_bytes {
        kinds.push(HazardKind::LargeFile {
            bytes: blob.size() as u64,
        });
    }
    if mode == FileMode::Link {
        let target = String::from_utf8_lossy(blob.content()).into_owned();
        if link_leaves_repository(&text, &target) {
            kinds.push(HazardKind::SymlinkOutside { target });
        }
    } else if name == ".gitattributes" {
        let content = String::from_utf8_lossy(blob.content());
        kinds.extend(content.lines().filter(|l| names_driver(l)).map(|l| {
            HazardKind::AttributesDriver {
                line: l.trim().to_string(),
            }
        }));
    } else if name.eq_ignore_ascii_case("config") {
        let content = String::from_utf8_lossy(blob.content());
        if let Some(setting) = crate::git_shape::config_running_code(&content) {
            kinds.push(HazardKind::GitConfig { setting });
        }
    }
    Ok(with_path(&path, kinds))
}

fn with_path(path: &str, kinds: Vec<HazardKind>) -> Vec<Hazard> {
    kinds
        .into_iter()
        .map(|kind| Hazard {
            path: path.to_string(),
            kind,
        })
        .collect()
}

/// C0 controls, DEL, C1 controls, and the bidirectional embedding/override/isolate characters.
fn is_control_or_bidi(c: char) -> bool {
    c.is_control() || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

fn escape_controls(text: &str) -> String {
    text.chars()
        .map(|c| {
            if is_control_or_bidi(c) {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// True when `path` (relative to the repository root, `/`-separated) is an auto-run file: an
/// [`AUTO_RUN_PATHS`] entry at the root, an [`AUTO_RUN_NAMES`] name anywhere, or a path that
/// ends with an [`AUTO_RUN_SUFFIXES`] entry.
pub fn is_auto_run(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    AUTO_RUN_NAMES.contains(&name)
        || AUTO_RUN_SUFFIXES
            .iter()
            .any(|s| path == *s || path.ends_with(&format!("/{s}")))
        || AUTO_RUN_PATHS
            .iter()
            .any(|entry| match entry.strip_suffix('/') {
                Some(dir) => path.starts_with(entry) || path == dir,
                None => path == *entry,
            })
}

/// True when a symlink at `link_path` (repository-relative) pointing at `target` is absolute or
/// resolves (lexically) above the repository root.
fn link_leaves_repository(link_path: &str, target: &str) -> bool {
    if target.starts_with('/') || target.starts_with('\\') || target.contains(':') {
        return true;
    }
    let mut depth: i64 = link_path.split('/').count() as i64 - 1;
    for part in target.split(['/', '\\']) {
        match part {
            "" | "." => {}
            ".." => {
                depth -= 1;
                if depth < 0 {
                    return true;
                }
            }
            _ => depth += 1,
        }
    }
    false
}

/// Git's built-in diff drivers (function-name patterns, `userdiff.c`): `diff=<one of these>`
/// runs nothing.
const BUILTIN_DIFF_DRIVERS: &[&str] = &[
    "ada", "bash", "bibtex", "cpp", "csharp", "css", "dts", "elixir", "fortran", "fountain",
    "golang", "html", "java", "kotlin", "markdown", "matlab", "objc", "pascal", "perl", "php",
    "python", "ruby", "rust", "scheme", "tex",
];

/// A `.gitattributes` line that sets `filter=…`, `merge=…` or a non-built-in `diff=…`
/// (format: <https://git-scm.com/docs/gitattributes>).
fn names_driver(line: &str) -> bool {
    let line = line.trim();
    if line.starts_with('#') {
        return false;
    }
    line.split_whitespace().skip(1).any(|attr| {
        let Some((name, value)) = attr.split_once('=') else {
            return false;
        };
        match name {
            "filter" | "merge" => true,
            "diff" => !BUILTIN_DIFF_DRIVERS.contains(&value),
            _ => false,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_that_leave_the_repository() {
        assert!(link_leaves_repository("a", "/etc/passwd"));
        assert!(link_leaves_repository("a", "../x"));
        assert!(link_leaves_repository("d/a", "../../x"));
        assert!(link_leaves_repository("d/a", "e/../../../x"));
        assert!(!link_leaves_repository("d/a", "../x"));
        assert!(!link_leaves_repository("a", "d/x"));
    }

    #[test]
    fn drivers_and_auto_run_paths() {
        assert!(names_driver("*.c filter=indent"));
        assert!(names_driver("* merge=evil"));
        assert!(names_driver("*.bin diff=hexdump"));
        assert!(!names_driver("*.py diff=python"));
        assert!(!names_driver("*.png binary -diff"));
        assert!(!names_driver("# *.c filter=x"));
        assert!(is_auto_run(".github/workflows/ci.yml"));
        assert!(is_auto_run("sub/.envrc"));
        assert!(is_auto_run(".ahelper/config.toml"));
        assert!(!is_auto_run("src/.github/workflows/ci.yml"));
        assert!(!is_auto_run("Makefile"));
        for path in [
            ".mcp.json",
            ".claude/settings.json",
            ".claude/settings.local.json",
            ".cargo/config.toml",
            "crates/x/.cargo/config",
            "mise.toml",
            "sub/.mise.toml",
            "web/.npmrc",
            "AGENTS.md",
            "docs/CLAUDE.md",
        ] {
            assert!(is_auto_run(path), "{path}");
        }
        assert!(!is_auto_run("docs/agents.md"));
        assert!(!is_auto_run("src/cargo/config.rs"));
        assert!(is_auto_run(".mcp.json"));
    }

    #[test]
    fn paths_an_mcp_entry_names() {
        let entry = serde_json::json!({"command": "./bin/srv", "args": ["mcp_server.py",
            "--config=conf/x.toml", "/abs/y.py", "../out.py", "a/../b.py", "-m", "p.q"],
            "env": {"X": "e.js"}});
        let mut paths = mcp_entry_paths(&entry);
        paths.sort();
        let expected = [
            "b.py",
            "bin/srv",
            "conf/x.toml",
            "e.js",
            "mcp_server.py",
            "p.q",
            "p/q.py",
            "p/q/__main__.py",
        ];
        assert_eq!(paths, expected);
    }
}
