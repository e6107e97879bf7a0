//! `.worktreeinclude`: ignored files of the user's checkout brought into a new worktree.
//!
//! A linked worktree has only tracked files; `.env`, `node_modules/`, `target/` or generated code
//! are missing there. The file `.worktreeinclude` at the repository root lists, in gitignore
//! syntax (the `ignore` crate's gitignore matcher: `#` comments, `!` negation, `/` anchoring,
//! `**`), which of the checkout's **git-ignored** files [`bring_included`] copies into a new
//! worktree — copy-on-write (`reflink`, via the `reflink-copy` crate) where the file system
//! supports it (btrfs, XFS, APFS), else a plain copy. Tracked and untracked-but-not-ignored
//! files are never brought (the first are there already, the second would be committed).
//!
//! Guards:
//! * **Size**: the ignored entries git reports (`target/`, `node_modules/`, `.env`) are taken
//!   whole or not at all, in order, while their total stays within
//!   [`IncludeLimits::max_bytes`]; an entry that does not fit is skipped and named
//!   ([`SkipReason::TooLarge`]).
//! * **Symlinks** are recreated, never followed: one whose target is absolute, or relative and
//!   leaving the repository (or pointing into `.git`), is refused and named
//!   ([`SkipReason::SymlinkEscapes`]). Nothing is written through a symlinked directory of the
//!   worktree ([`SkipReason::SymlinkedParent`]), and existing files are never overwritten.
//! * `.git` and `.ahelper/` are never brought.

use std::collections::HashSet;
use std::fs;
use std::path::{Component, Path, PathBuf};

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use serde::{Deserialize, Serialize};

use crate::error::io_err;
use crate::repo::is_ahelper_path;
use crate::{GitError, cli};

/// Name of the include file at the repository root.
pub const INCLUDE_FILE: &str = ".worktreeinclude";

/// Default of [`IncludeLimits::max_bytes`]: 1 GB (10⁹ bytes) per worktree.
pub const DEFAULT_INCLUDE_MAX_BYTES: u64 = 1_000_000_000;

/// Limits of [`bring_included`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IncludeLimits {
    /// Bytes (apparent file sizes) brought into one worktree at most.
    pub max_bytes: u64,
}

impl Default for IncludeLimits {
    fn default() -> Self {
        IncludeLimits {
            max_bytes: DEFAULT_INCLUDE_MAX_BYTES,
        }
    }
}

/// Why a matched path was not brought.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "reason")]
pub enum SkipReason {
    /// The ignored entry (all its files) would exceed the size guard.
    TooLarge {
        /// The entry's size in bytes.
        bytes: u64,
        /// What was left of [`IncludeLimits::max_bytes`] when it came up.
        remaining: u64,
    },
    /// A symlink whose target is absolute or leaves the repository.
    SymlinkEscapes {
        /// The link's target as stored.
        target: PathBuf,
    },
    /// A directory on the way in the worktree is a symlink; nothing is written through it.
    SymlinkedParent,
    /// Neither a file, a directory nor a symlink (socket, FIFO, device).
    NotAFile,
}

/// One path (relative, `/`-separated) [`bring_included`] left out, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedInclude {
    /// The path in the checkout.
    pub path: String,
    /// Why.
    pub reason: SkipReason,
}

/// What [`bring_included`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IncludeReport {
    /// Whether the repository has a `.worktreeinclude`.
    pub has_include_file: bool,
    /// Files and symlinks created in the worktree.
    pub files: u64,
    /// Bytes of the files brought.
    pub bytes: u64,
    /// Files cloned copy-on-write (the rest of [`IncludeReport::files`] were copied or are links).
    pub reflinked: u64,
    /// Matched paths left out, in the order met.
    pub skipped: Vec<SkippedInclude>,
}

impl IncludeReport {
    /// One line for a transcript or a log: counts, then each skipped path with its reason.
    pub fn describe(&self) -> String {
        let mut text = format!(
            "{INCLUDE_FILE}: brought {} files ({} bytes, {} copy-on-write)",
            self.files, self.bytes, self.reflinked
        );
        text.push_str(&describe_skipped(&self.skipped));
        text
    }
}

/// `; skipped <path>: <why>` for each of `skipped` (empty when none).
pub(crate) fn describe_skipped(skipped: &[SkippedInclude]) -> String {
    let mut text = String::new();
    for skipped in skipped {
        let why = match &skipped.reason {
            SkipReason::TooLarge { bytes, remaining } => format!(
                "{bytes} bytes, over the size guard ({remaining} bytes left; raise [swarm] worktree_include_max_mb)"
            ),
            SkipReason::SymlinkEscapes { target } => {
                format!("symlink to {} leaves the repository", target.display())
            }
            SkipReason::SymlinkedParent => "a directory on its way is a symlink".into(),
            SkipReason::NotAFile => "not a regular file, directory or symlink".into(),
        };
        text.push_str(&format!("; skipped {}: {why}", skipped.path));
    }
    text
}

/// Brings the git-ignored files of the checkout `main` that its `.worktreeinclude` matches into
/// the new worktree `worktree` (same relative paths), within `limits` (see the module docs).
/// Without a `.worktreeinclude` it does nothing and reports `has_include_file: false`.
///
/// # Errors
/// [`GitError::IncludeFile`] for an unreadable or malformed `.worktreeinclude`;
/// [`GitError::GitCommand`] / [`GitError::GitNotFound`] from `git ls-files`; [`GitError::Io`] /
/// [`GitError::DiskFull`] when reading the checkout or writing the worktree fails.
pub fn bring_included(
    main: &Path,
    worktree: &Path,
    limits: IncludeLimits,
) -> Result<IncludeReport, GitError> {
    bring_listed(&list_included(main)?, worktree, limits)
}

/// The ignored files and symlinks of the checkout `main` that its `.worktreeinclude` matches,
/// listed once (a walk of every ignored directory) and brought into any number of worktrees
/// with [`bring_listed`]. Files that change later are read when brought; files added later are
/// not in the list.
#[derive(Debug, Default)]
pub struct IncludeList {
    main: PathBuf,
    has_include_file: bool,
    /// Each ignored entry as git reports it, with its matched items.
    entries: Vec<(String, Vec<Item>)>,
}

impl IncludeList {
    /// Whether the repository has a `.worktreeinclude` (without one, [`bring_listed`] does
    /// nothing).
    pub fn has_include_file(&self) -> bool {
        self.has_include_file
    }

    /// Whether the include patterns match anything under the directory `dir` (relative,
    /// `/`-separated, no trailing slash), e.g. `target`: the user chose what happens to it.
    pub fn covers(&self, dir: &str) -> bool {
        let prefix = format!("{dir}/");
        self.entries.iter().any(|(entry, items)| {
            (entry == &prefix || entry.starts_with(&prefix) || prefix.starts_with(entry.as_str()))
                && items.iter().any(|i| item_path(i).starts_with(&prefix))
        })
    }
}

/// Lists what [`bring_listed`] brings from the checkout `main` (see [`bring_included`]).
///
/// # Errors
/// As [`bring_included`], for reading.
pub fn list_included(main: &Path) -> Result<IncludeList, GitError> {
    let Some(matcher) = read_patterns(main)? else {
        return Ok(IncludeList {
            main: main.to_path_buf(),
            ..IncludeList::default()
        });
    };
    let mut entries = Vec::new();
    for entry in ignored_entries(main)? {
        let items = matched_items(main, &matcher, &entry)?;
        entries.push((entry, items));
    }
    Ok(IncludeList {
        main: main.to_path_buf(),
        has_include_file: true,
        entries,
    })
}

/// Brings the files of `list` into `worktree`, as [`bring_included`] does.
///
/// # Errors
/// As [`bring_included`], for writing.
pub fn bring_listed(
    list: &IncludeList,
    worktree: &Path,
    limits: IncludeLimits,
) -> Result<IncludeReport, GitError> {
    if !list.has_include_file {
        return Ok(IncludeReport::default());
    }
    let mut copier = Copier {
        main: &list.main,
        worktree,
        remaining: limits.max_bytes,
        checked_dirs: HashSet::new(),
        report: IncludeReport {
            has_include_file: true,
            ..IncludeReport::default()
        },
    };
    for (entry, items) in &list.entries {
        copier.bring_entry(entry, items)?;
    }
    Ok(copier.report)
}

/// The gitignore matcher of `<main>/.worktreeinclude`, `None` when there is none.
fn read_patterns(main: &Path) -> Result<Option<Gitignore>, GitError> {
    let path = main.join(INCLUDE_FILE);
    if fs::symlink_metadata(&path).is_err() {
        return Ok(None);
    }
    let invalid = |message: String| GitError::IncludeFile {
        path: path.clone(),
        message,
    };
    let mut builder = GitignoreBuilder::new(main);
    if let Some(e) = builder.add(&path) {
        return Err(invalid(e.to_string()));
    }
    builder
        .build()
        .map(Some)
        .map_err(|e| invalid(e.to_string()))
}

/// The checkout's ignored entries as git reports them (`git ls-files --others --ignored
/// --exclude-standard --directory`): a wholly ignored directory once, as `dir/`; `.ahelper/`
/// left out.
pub(crate) fn ignored_entries(main: &Path) -> Result<Vec<String>, GitError> {
    let out = cli::git(
        main,
        [
            "ls-files",
            "-z",
            "--others",
            "--ignored",
            "--exclude-standard",
            "--directory",
        ],
    )?;
    Ok(out
        .split('\0')
        .filter(|e| !e.is_empty() && !is_ahelper_path(e.trim_end_matches('/')))
        .map(str::to_owned)
        .collect())
}

/// One thing to create in the worktree.
#[derive(Debug)]
pub(crate) enum Item {
    /// A regular file of this many bytes.
    File(String, u64),
    /// A symlink with this target.
    Symlink(String, PathBuf),
    /// Something else, reported as [`SkipReason::NotAFile`].
    Other(String),
}

/// The files and symlinks under the ignored `entry` (not following symlinks) that the include
/// patterns match (a match of a parent directory counts; `!` patterns exclude).
fn matched_items(main: &Path, matcher: &Gitignore, entry: &str) -> Result<Vec<Item>, GitError> {
    let rel = entry.trim_end_matches('/');
    let mut items = Vec::new();
    let mut stack = vec![rel.to_string()];
    while let Some(rel) = stack.pop() {
        let path = main.join(&rel);
        let meta = fs::symlink_metadata(&path).map_err(io_err("reading", &path))?;
        let kind = meta.file_type();
        if kind.is_dir() {
            if matcher.matched(&rel, true).is_whitelist() {
                continue;
            }
            for child in fs::read_dir(&path).map_err(io_err("listing", &path))? {
                let child = child.map_err(io_err("listing", &path))?;
                stack.push(format!("{rel}/{}", child.file_name().to_string_lossy()));
            }
            continue;
        }
        if !matcher.matched_path_or_any_parents(&rel, false).is_ignore() {
            continue;
        }
        items.push(if kind.is_symlink() {
            let target = fs::read_link(&path).map_err(io_err("reading the link", &path))?;
            Item::Symlink(rel, target)
        } else if kind.is_file() {
            Item::File(rel, meta.len())
        } else {
            Item::Other(rel)
        });
    }
    items.sort_by(|a, b| item_path(a).cmp(item_path(b)));
    Ok(items)
}

pub(crate) fn item_path(item: &Item) -> &str {
    match item {
        Item::File(p, _) | Item::Symlink(p, _) | Item::Other(p) => p,
    }
}

/// Whether the symlink at `rel` with `target` stays inside the repository and out of `.git`:
/// a relative target whose lexical resolution from the link's directory never climbs above the
/// root.
fn symlink_stays_inside(rel: &str, target: &Path) -> bool {
    if target.is_absolute() {
        return false;
    }
    let mut depth: Vec<String> = Path::new(rel)
        .parent()
        .into_iter()
        .flat_map(|p| p.components())
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    for component in target.components() {
        match component {
            Component::Normal(name) => depth.push(name.to_string_lossy().into_owned()),
            Component::CurDir => {}
            Component::ParentDir => {
                if depth.pop().is_none() {
                    return false;
                }
            }
            Component::RootDir | Component::Prefix(_) => return false,
        }
    }
    depth.first().is_none_or(|first| first != ".git")
}

/// Writes the items of one entry into the worktree, keeping count.
pub(crate) struct Copier<'a> {
    pub(crate) main: &'a Path,
    pub(crate) worktree: &'a Path,
    pub(crate) remaining: u64,
    /// Directories of the worktree known to exist and not to be symlinks.
    pub(crate) checked_dirs: HashSet<PathBuf>,
    pub(crate) report: IncludeReport,
}

impl Copier<'_> {
    /// The size guard for the entry as a whole, then each of its items.
    pub(crate) fn bring_entry(&mut self, entry: &str, items: &[Item]) -> Result<(), GitError> {
        let bytes: u64 = items
            .iter()
            .map(|i| match i {
                Item::File(_, len) => *len,
                _ => 0,
            })
            .sum();
        if bytes > self.remaining {
            self.skip(
                entry,
                SkipReason::TooLarge {
                    bytes,
                    remaining: self.remaining,
                },
            );
            return Ok(());
        }
        for item in items {
            self.bring(item)?;
        }
        Ok(())
    }

    fn skip(&mut self, path: &str, reason: SkipReason) {
        self.report.skipped.push(SkippedInclude {
            path: path.to_string(),
            reason,
        });
    }

    fn bring(&mut self, item: &Item) -> Result<(), GitError> {
        if let Item::Other(rel) = item {
            self.skip(rel, SkipReason::NotAFile);
            return Ok(());
        }
        if let Item::Symlink(rel, target) = item
            && !symlink_stays_inside(rel, target)
        {
            self.skip(
                rel,
                SkipReason::SymlinkEscapes {
                    target: target.clone(),
                },
            );
            return Ok(());
        }
        let rel = item_path(item).to_string();
        let dest = self.worktree.join(&rel);
        if !self.safe_parent(&rel)? {
            self.skip(&rel, SkipReason::SymlinkedParent);
            return Ok(());
        }
        if fs::symlink_metadata(&dest).is_ok() {
            return Ok(());
        }
        match item {
            Item::File(_, len) => self.copy_file(&rel, &dest, *len)?,
            Item::Symlink(_, target) => {
                std::os::unix::fs::symlink(target, &dest).map_err(io_err("creating", &dest))?;
            }
            Item::Other(_) => {}
        }
        self.report.files += 1;
        Ok(())
    }

    /// Clones (or copies) one file, keeping its permissions and modification time (so build
    /// tools that compare times, such as cargo, see their outputs as fresh).
    fn copy_file(&mut self, rel: &str, dest: &Path, len: u64) -> Result<(), GitError> {
        let src = self.main.join(rel);
        let copied = reflink_copy::reflink_or_copy(&src, dest).map_err(io_err("copying", &src))?;
        if copied.is_none() {
            self.report.reflinked += 1;
        }
        let meta = fs::metadata(&src).map_err(io_err("reading", &src))?;
        fs::set_permissions(dest, meta.permissions()).map_err(io_err("writing", dest))?;
        if let Ok(modified) = meta.modified() {
            let file = fs::File::options()
                .write(true)
                .open(dest)
                .map_err(io_err("writing", dest))?;
            let times = fs::FileTimes::new().set_modified(modified);
            file.set_times(times).map_err(io_err("writing", dest))?;
        }
        self.remaining = self.remaining.saturating_sub(len);
        self.report.bytes += len;
        Ok(())
    }

    /// Creates the parent directories of `rel` in the worktree; `false` when one of them is a
    /// symlink (or not a directory), so nothing may be written there.
    fn safe_parent(&mut self, rel: &str) -> Result<bool, GitError> {
        let Some(parent) = Path::new(rel).parent() else {
            return Ok(true);
        };
        let mut dir = self.worktree.to_path_buf();
        for component in parent.components() {
            dir.push(component);
            if self.checked_dirs.contains(&dir) {
                continue;
            }
            match fs::symlink_metadata(&dir) {
                Ok(meta) if meta.file_type().is_dir() => {}
                Ok(_) => return Ok(false),
                Err(_) => fs::create_dir(&dir).map_err(io_err("creating", &dir))?,
            }
            self.checked_dirs.insert(dir.clone());
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symlinks_inside_stay_and_escapes_are_caught() {
        assert!(symlink_stays_inside("a/link", Path::new("../b")));
        assert!(symlink_stays_inside("link", Path::new("./b/c")));
        assert!(!symlink_stays_inside("a/link", Path::new("../../etc")));
        assert!(!symlink_stays_inside("link", Path::new("/etc/passwd")));
        assert!(!symlink_stays_inside("link", Path::new(".git/config")));
        assert!(!symlink_stays_inside("a/b/link", Path::new("../../../x")));
    }
}
