//! Paths below a writable root that commands see read-only besides the top-level protected
//! entries ([`super::protected_entries`]): the `.git` of every nested repository
//! ([`nested_git_entries`], a bounded walk) and the user's own directories that run code or
//! hold ahelper's settings when a writable root contains them ([`user_dirs_within`]).

use std::path::{Path, PathBuf};

/// Deepest directory level [`nested_git_entries`] looks at (the root's entries are level 1).
pub const NESTED_GIT_MAX_DEPTH: usize = 6;

/// Most directories [`nested_git_entries`] lists per command; a tree larger than that has the
/// repositories found until then bound, the rest not (`docs/sandbox.md`).
pub const NESTED_GIT_MAX_DIRS: usize = 2_000;

/// Directory names not descended into: build outputs and package caches (a cargo `target/`
/// alone holds thousands of directories), where nobody runs git.
pub const SKIPPED_DIRS: &[&str] = &[
    "target",
    "node_modules",
    ".venv",
    "venv",
    "__pycache__",
    ".tox",
    ".mypy_cache",
    ".gradle",
];

/// The `.git` entries (directories, or a worktree's or submodule's `.git` file) of the
/// repositories nested below `root`, not `root/.git` itself, breadth first: at most
/// [`NESTED_GIT_MAX_DEPTH`] levels and [`NESTED_GIT_MAX_DIRS`] directories listed, symbolic
/// links not followed, [`SKIPPED_DIRS`] and `.git` directories not entered. Unreadable
/// directories are skipped.
pub fn nested_git_entries(root: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut level = vec![root.to_path_buf()];
    let mut listed = 0usize;
    for depth in 1..=NESTED_GIT_MAX_DEPTH {
        let mut next = Vec::new();
        for dir in level {
            if listed >= NESTED_GIT_MAX_DIRS {
                return found;
            }
            listed += 1;
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                let name = entry.file_name();
                if name == ".git" {
                    if depth > 1 && !kind.is_symlink() {
                        found.push(entry.path());
                    }
                } else if kind.is_dir() && !SKIPPED_DIRS.iter().any(|s| name == *s) {
                    next.push(entry.path());
                }
            }
        }
        level = next;
    }
    found
}

/// What commands see read-only of `protected` (absolute: ahelper's config and state
/// directories, the user's `~/.local/bin`, `~/.config/systemd`…): each of them that lies inside
/// one of `writable`, created (mode 0700) when missing so that it can be bound — a command
/// could otherwise create it with whatever it likes inside. A protected directory that itself
/// holds a writable path (a swarm worker's worktree in ahelper's state directory) cannot be
/// bound whole without making that path read-only: its existing entries that hold no writable
/// path are bound instead. A directory that cannot be created is left out.
pub fn user_dirs_within(writable: &[PathBuf], protected: &[PathBuf]) -> Vec<PathBuf> {
    let mut binds = Vec::new();
    for dir in protected.iter().map(|p| canonical_best(p)) {
        if !writable.iter().any(|w| dir.starts_with(w)) {
            continue;
        }
        if writable.iter().any(|w| w.starts_with(&dir)) {
            binds.extend(entries_without(&dir, writable));
        } else if ensure_dir(&dir) {
            binds.extend(std::fs::canonicalize(&dir).ok());
        }
    }
    binds
}

/// The directories strictly between a path of `writable` and each of `bound` (deepest
/// writable path that holds it), shallowest first, each once: `~/.config` for
/// `~/.config/ahelper` with `~` writable.
pub fn ancestors_within(writable: &[PathBuf], bound: &[PathBuf]) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = Vec::new();
    for path in bound {
        let Some(root) = writable
            .iter()
            .filter(|w| path.starts_with(w) && path != *w)
            .max_by_key(|w| w.components().count())
        else {
            continue;
        };
        let between = path
            .ancestors()
            .skip(1)
            .take_while(|a| a != root && a.starts_with(root));
        for dir in between {
            if !found.iter().any(|f| f == dir) {
                found.push(dir.to_path_buf());
            }
        }
    }
    found.sort_by_key(|p| p.components().count());
    found
}

/// `dir` exists as a directory, or was created (mode 0700, parents too).
fn ensure_dir(dir: &Path) -> bool {
    use std::os::unix::fs::DirBuilderExt;
    dir.is_dir()
        || std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .is_ok()
}

/// The entries of `dir` (not symbolic links) that are not, and do not hold, one of `writable`.
fn entries_without(dir: &Path, writable: &[PathBuf]) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| !t.is_symlink()))
        .map(|e| e.path())
        .filter(|p| !writable.iter().any(|w| w.starts_with(p)))
        .collect()
}

/// `path` with its deepest existing ancestor canonicalised (symbolic links resolved) and the
/// missing components appended as given.
pub fn canonical_best(path: &Path) -> PathBuf {
    let mut missing = Vec::new();
    let mut current = path;
    loop {
        if let Ok(real) = std::fs::canonicalize(current) {
            return missing.iter().rev().fold(real, |acc, name| acc.join(name));
        }
        match (current.parent(), current.file_name()) {
            (Some(parent), Some(name)) => {
                missing.push(name.to_os_string());
                current = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_repositories_are_found_but_not_the_root_nor_skipped_dirs() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for d in [
            ".git/objects",
            "inner/.git",
            "a/b/c/deep/.git",
            "target/x/.git",
            "node_modules/m/.git",
        ] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::fs::create_dir_all(root.join("wt")).unwrap();
        std::fs::write(root.join("wt/.git"), "gitdir: /x\n").unwrap();
        let mut found = nested_git_entries(root);
        found.sort();
        let expected: Vec<PathBuf> = ["a/b/c/deep/.git", "inner/.git", "wt/.git"]
            .iter()
            .map(|p| root.join(p))
            .collect();
        assert_eq!(found, expected);
    }

    #[test]
    fn user_dirs_inside_a_writable_root_are_created_and_returned() {
        let dir = tempfile::tempdir().unwrap();
        let home = std::fs::canonicalize(dir.path()).unwrap();
        let outside = tempfile::tempdir().unwrap();
        let protected = vec![
            home.join(".config/systemd"),
            outside.path().join("state/ahelper"),
        ];
        let found = user_dirs_within(std::slice::from_ref(&home), &protected);
        assert_eq!(found, [home.join(".config/systemd")]);
        assert!(home.join(".config/systemd").is_dir());
        assert!(!outside.path().join("state").exists());
    }

    #[test]
    fn ancestors_between_a_writable_root_and_bound_dirs_are_listed_shallowest_first() {
        let home = PathBuf::from("/h");
        let bound = [
            home.join(".local/state/ahelper"),
            home.join(".config/ahelper"),
            home.join(".local/bin"),
        ];
        assert_eq!(
            ancestors_within(std::slice::from_ref(&home), &bound),
            [
                home.join(".local"),
                home.join(".config"),
                home.join(".local/state")
            ]
        );
        let config = [home.join(".config")];
        assert!(ancestors_within(&config, &[home.join(".config/git")]).is_empty());
    }

    /// A protected directory that holds a writable path (a worktree in ahelper's state
    /// directory) has its other entries bound, not itself.
    #[test]
    fn a_protected_dir_holding_a_writable_path_has_its_other_entries_bound() {
        let dir = tempfile::tempdir().unwrap();
        let home = std::fs::canonicalize(dir.path()).unwrap();
        let state = home.join(".local/state/ahelper");
        let worktree = state.join("worktrees/r/w1");
        std::fs::create_dir_all(&worktree).unwrap();
        std::fs::write(state.join("trusted-projects.json"), "{}").unwrap();
        let found = user_dirs_within(&[home.clone(), worktree], std::slice::from_ref(&state));
        assert_eq!(found, [state.join("trusted-projects.json")]);
    }
}
