//! The files and directories of a workspace that `read_file` deny rules cover, found on disk
//! when a command starts, so that the OS sandbox can hide them from the command
//! ([`crate::sandbox_os`] binds an empty placeholder over each).

use crate::permissions::rules::{PermissionRule, RulePattern};
use crate::tools::ToolKind;
use std::collections::HashSet;
use std::os::unix::fs::{DirEntryExt, MetadataExt};
use std::path::{Path, PathBuf};

/// At most this many entries of the workspace are looked at for one command.
pub const MAX_WALKED_ENTRIES: usize = 1_000_000;
/// At most this many paths are hidden from one command (one bind mount each).
pub const MAX_HIDDEN_PATHS: usize = 10_000;

/// What a read deny rule covers in a workspace: each path is absolute and exists; a
/// directory stands for everything beneath it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HiddenPaths {
    /// Regular files and other non-directories (devices, sockets) to hide.
    pub files: Vec<PathBuf>,
    /// Directories to hide whole.
    pub dirs: Vec<PathBuf>,
}

impl HiddenPaths {
    /// True when nothing is to be hidden.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty() && self.dirs.is_empty()
    }

    fn len(&self) -> usize {
        self.files.len() + self.dirs.len()
    }

    fn push(&mut self, path: PathBuf, is_dir: bool) {
        let list = if is_dir {
            &mut self.dirs
        } else {
            &mut self.files
        };
        if !list.contains(&path) {
            list.push(path);
        }
    }
}

/// Why the covered paths could not be listed; the command must not run.
#[derive(Debug, thiserror::Error)]
pub enum HiddenPathsError {
    /// The workspace is too large to list for every command.
    #[error(
        "the workspace has more than {MAX_WALKED_ENTRIES} entries, too many to find the files \
         your read_file deny rules cover before each command; move large directories out of \
         the workspace or remove the read_file deny rules"
    )]
    TooManyEntries,
    /// The rules cover too many paths to hide one by one.
    #[error(
        "your read_file deny rules cover more than {MAX_HIDDEN_PATHS} paths of the workspace, \
         too many to hide from commands; deny their directory instead (e.g. `read_file(secrets/**)` \
         hides `secrets` whole)"
    )]
    TooManyPaths,
}

/// The paths beneath `root` (canonical) that a `read_file` deny rule of `rules` covers: every
/// entry whose path relative to `root` a rule matches (a matching directory is hidden whole
/// and not entered), where a matching symbolic link inside the workspace leads, and every
/// other name of a covered file (a hard link: same device and inode). `.git` directories are
/// not entered (they are bound read-only, and git's own files are not what these rules name).
/// Empty when there is no such rule. [`hidden_paths_in`] with no added directory.
///
/// # Errors
/// [`HiddenPathsError`] when the workspace has more than [`MAX_WALKED_ENTRIES`] entries or the
/// rules cover more than [`MAX_HIDDEN_PATHS`] paths.
pub fn hidden_paths(
    rules: &[PermissionRule],
    root: &Path,
) -> Result<HiddenPaths, HiddenPathsError> {
    hidden_paths_in(rules, root, &[])
}

/// [`hidden_paths`] of the workspace `root` and of each directory added with `--add-dir`
/// (`added`, canonical): a rule covers a path as the permission decision does for a deny rule
/// — an absolute rule matches the absolute path; a relative rule matches the path relative to
/// the workspace or the absolute path (so `**/.env` covers `/elsewhere/.env`). An added
/// directory inside the workspace is not walked twice, nor the workspace inside an added
/// directory. The limits count all roots together.
///
/// # Errors
/// [`HiddenPathsError`] as for [`hidden_paths`].
pub fn hidden_paths_in(
    rules: &[PermissionRule],
    root: &Path,
    added: &[PathBuf],
) -> Result<HiddenPaths, HiddenPathsError> {
    let denies: Vec<&PermissionRule> = rules
        .iter()
        .filter(|r| r.applies_to("read_file", ToolKind::Read))
        .filter(|r| matches!(r.pattern, RulePattern::Path { .. }))
        .collect();
    let mut hidden = HiddenPaths::default();
    if denies.is_empty() {
        return Ok(hidden);
    }
    let covered = |abs: &Path| denies.iter().any(|r| deny_covers(r, root, abs));
    let mut walk = Walk::default();
    let extra = added.iter().filter(|d| !d.starts_with(root));
    for walk_root in std::iter::once(root).chain(extra.map(PathBuf::as_path)) {
        walk.skip = (walk_root != root).then(|| root.to_path_buf());
        collect_covered(&mut walk, walk_root, &covered, &mut hidden)?;
        add_hard_links(&mut hidden, walk_root)?;
    }
    if hidden.len() > MAX_HIDDEN_PATHS {
        return Err(HiddenPathsError::TooManyPaths);
    }
    Ok(hidden)
}

/// Whether the deny rule `rule` covers the absolute path `abs`, `root` being the workspace.
fn deny_covers(rule: &PermissionRule, root: &Path, abs: &Path) -> bool {
    match &rule.pattern {
        RulePattern::Path {
            absolute: true,
            matcher,
            ..
        } => matcher.is_match(abs),
        RulePattern::Path { matcher, .. } => {
            abs.strip_prefix(root)
                .is_ok_and(|rel| matcher.is_match(rel))
                || matcher.is_match(abs)
        }
        _ => false,
    }
}

/// Walks `walk_root` and adds to `hidden` what `covered` names: a covered directory whole, a
/// covered file, the target of a covered symbolic link when it lies inside `walk_root`.
fn collect_covered(
    walk: &mut Walk,
    walk_root: &Path,
    covered: &dyn Fn(&Path) -> bool,
    hidden: &mut HiddenPaths,
) -> Result<(), HiddenPathsError> {
    walk.run(walk_root, &mut |path, kind, _| {
        if !covered(path) {
            return Visit::Continue;
        }
        match kind {
            Kind::Symlink => {
                if let Ok(target) = std::fs::canonicalize(path)
                    && target.starts_with(walk_root)
                {
                    hidden.push(target.clone(), target.is_dir());
                }
                Visit::Continue
            }
            Kind::Dir => {
                hidden.push(path.to_path_buf(), true);
                Visit::SkipDir
            }
            Kind::Other => {
                hidden.push(path.to_path_buf(), false);
                Visit::Continue
            }
        }
    })
}

/// Adds the other names of covered files that have more than one (`nlink > 1`): a second walk,
/// only then.
fn add_hard_links(hidden: &mut HiddenPaths, root: &Path) -> Result<(), HiddenPathsError> {
    let linked: HashSet<(u64, u64)> = hidden
        .files
        .iter()
        .filter_map(|f| std::fs::metadata(f).ok())
        .filter(|m| m.nlink() > 1)
        .map(|m| (m.dev(), m.ino()))
        .collect();
    if linked.is_empty() {
        return Ok(());
    }
    let inodes: HashSet<u64> = linked.iter().map(|(_, ino)| *ino).collect();
    let mut found = Vec::new();
    Walk::default().run(root, &mut |path, kind, ino| {
        if kind == Kind::Other
            && inodes.contains(&ino)
            && let Ok(m) = std::fs::symlink_metadata(path)
            && linked.contains(&(m.dev(), m.ino()))
        {
            found.push(path.to_path_buf());
        }
        Visit::Continue
    })?;
    found.into_iter().for_each(|p| hidden.push(p, false));
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Dir,
    Symlink,
    Other,
}

enum Visit {
    Continue,
    SkipDir,
}

/// A depth-first walk (the callback gets each entry's path, kind and inode as listed) that
/// reads each directory once, never follows symbolic links, skips
/// `.git` directories and counts entries against [`MAX_WALKED_ENTRIES`].
#[derive(Default)]
struct Walk {
    seen: usize,
    /// A directory not entered (the workspace, when an added directory holds it).
    skip: Option<PathBuf>,
}

impl Walk {
    fn run(
        &mut self,
        root: &Path,
        visit: &mut dyn FnMut(&Path, Kind, u64) -> Visit,
    ) -> Result<(), HiddenPathsError> {
        let mut stack = vec![root.to_path_buf()];
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                self.seen += 1;
                if self.seen > MAX_WALKED_ENTRIES {
                    return Err(HiddenPathsError::TooManyEntries);
                }
                let Ok(file_type) = entry.file_type() else {
                    continue;
                };
                let path = entry.path();
                let kind = if file_type.is_symlink() {
                    Kind::Symlink
                } else if file_type.is_dir() {
                    Kind::Dir
                } else {
                    Kind::Other
                };
                let descend = matches!(visit(&path, kind, entry.ino()), Visit::Continue)
                    && kind == Kind::Dir
                    && entry.file_name() != ".git"
                    && self.skip.as_ref() != Some(&path);
                if descend {
                    stack.push(path);
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(texts: &[&str]) -> Vec<PermissionRule> {
        texts.iter().map(|t| t.parse().unwrap()).collect()
    }

    #[test]
    fn added_dirs_are_walked_once_with_rules_matched_as_for_a_deny() {
        let dir = super::super::temp_tree(&[
            ("repo/inner/", ""),
            ("repo/.env", "S=1"),
            ("extra/deep/.env", "S=2"),
            ("extra/ok.txt", "o"),
        ]);
        let top = std::fs::canonicalize(dir.path()).unwrap();
        let root = top.join("repo");
        let extra = top.join("extra");
        let rules = rules(&["read_file(**/.env)"]);
        // `top` holds the workspace and `inner` lies inside it: neither walks it twice.
        let added = [extra.clone(), top.clone(), root.join("inner")];
        let found = hidden_paths_in(&rules, &root, &added).unwrap();
        let mut files = found.files.clone();
        files.sort();
        assert_eq!(files, vec![extra.join("deep/.env"), root.join(".env")]);
        assert_eq!(
            hidden_paths(&rules, &root).unwrap().files,
            vec![root.join(".env")]
        );
    }

    #[test]
    fn finds_files_dirs_links_and_hard_links() {
        let dir = super::super::temp_tree(&[
            (".env", "S=1"),
            ("app/.env", "S=2"),
            (".git/.env", "not walked"),
            ("app/secrets/key", "k"),
            ("private.txt", "p"),
            ("ok.txt", "o"),
        ]);
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::os::unix::fs::symlink(root.join("private.txt"), root.join("link.env")).unwrap();
        std::fs::hard_link(root.join(".env"), root.join("copy.txt")).unwrap();
        let found = hidden_paths(
            &rules(&[
                "read_file(**/.env)",
                "read_file(app/secrets)",
                "read_file(*.env)",
                "edit_file(ok.txt)",
            ]),
            &root,
        )
        .unwrap();
        let mut files = found.files.clone();
        files.sort();
        let mut want = vec![
            root.join(".env"),
            root.join("app/.env"),
            root.join("private.txt"),
            root.join("copy.txt"),
        ];
        want.sort();
        assert_eq!(files, want);
        assert_eq!(found.dirs, vec![root.join("app/secrets")]);
        assert!(
            hidden_paths(&rules(&["run_command(rm:*)"]), &root)
                .unwrap()
                .is_empty()
        );
    }
}
