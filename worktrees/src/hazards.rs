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
//! * an **auto-run file** ([`AUTO_RUN_PATHS`]): read and executed by an editor, CI, a git hook
//!   manager, direnv or ahelper itself when the user merely opens or pushes the repository.
//!   `Makefile`, `package.json` scripts and build scripts are not on the list: they run only
//!   when the user runs the build, and nearly every change touches them.

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
];

/// File names that are auto-run files in any directory (direnv loads `.envrc` of every
/// directory the shell enters).
pub const AUTO_RUN_NAMES: &[&str] = &[".envrc"];

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
    /// A file an editor, CI, hook manager, direnv or ahelper runs or obeys on its own.
    AutoRun,
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
                "{path}: auto-run file (editor, CI, hooks, direnv or ahelper config)"
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
    hazards_in(&repo, &diff, limits)
}

/// The hazards of the added and changed entries of a tree `diff` in `repo`, sorted by path.
pub(crate) fn hazards_in(
    repo: &Repository,
    diff: &Diff<'_>,
    limits: &HazardLimits,
) -> Result<Vec<Hazard>, GitError> {
    let mut found = Vec::new();
    for delta in diff.deltas() {
        if matches!(delta.status(), Delta::Deleted) {
            continue;
        }
        let file = delta.new_file();
        let Some(raw) = file.path_bytes() else {
            continue;
        };
        found.extend(hazards_of(repo, raw, file.id(), file.mode(), limits)?);
    }
    found.sort_by(|x, y| x.path.cmp(&y.path));
    Ok(found)
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
/// [`AUTO_RUN_PATHS`] entry at the root, or an [`AUTO_RUN_NAMES`] name anywhere.
pub fn is_auto_run(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    AUTO_RUN_NAMES.contains(&name)
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
    }
}
