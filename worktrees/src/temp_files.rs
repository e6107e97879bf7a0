//! Temporary files of ahelper's own writers, which a crash (`kill -9`, a power loss) can leave in
//! a worktree and which must never reach a commit.
//!
//! The one writer that puts them in a worktree is the atomic file replacement of the file tools
//! (`agents/src/atomic_write.rs`): it writes `.<name>.ahelper-<uuid>.tmp` (the target's name,
//! clipped to 64 bytes, and a UUID in its 32-hex-digit "simple" form) beside the target and
//! renames it over the target. Ahelper's other temporary files live outside worktrees (markers
//! and records under `.git` and `.ahelper/runs`). [`is_writer_temp_name`] recognises the name,
//! [`commit_all`](crate::commit_all) leaves such files out (and removes them), and
//! [`sweep_writer_temps`] removes them from a worktree before a worker resumes in it.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use git2::{Repository, Status, StatusOptions};

use crate::GitError;
use crate::error::Context as _;

/// The part of a writer temp file's name between the target's name and the UUID.
pub const WRITER_TEMP_INFIX: &str = ".ahelper-";

/// The suffix of a writer temp file's name.
pub const WRITER_TEMP_SUFFIX: &str = ".tmp";

/// Whether the file name `name` (no directory) is one of ahelper's writer temp files:
/// `.<name>.ahelper-<32 hex digits>.tmp`.
pub fn is_writer_temp_name(name: &str) -> bool {
    let Some(stem) = name
        .strip_prefix('.')
        .and_then(|n| n.strip_suffix(WRITER_TEMP_SUFFIX))
    else {
        return false;
    };
    let Some((target, uuid)) = stem.rsplit_once(WRITER_TEMP_INFIX) else {
        return false;
    };
    !target.is_empty() && uuid.len() == 32 && uuid.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Whether the repository-relative path `path` (`/`-separated) names a writer temp file.
pub fn is_writer_temp_path(path: &str) -> bool {
    is_writer_temp_name(path.rsplit('/').next().unwrap_or(path))
}

/// Removes every untracked writer temp file from the worktree (or checkout) at `worktree`, as
/// `git status` lists untracked files there (ignored files are left alone: git never commits
/// them). Returns the paths removed, relative to the worktree, sorted.
///
/// # Errors
/// [`GitError::Libgit2`] when the status cannot be read; [`GitError::Io`] when a file cannot
/// be removed.
pub fn sweep_writer_temps(worktree: &Path) -> Result<Vec<PathBuf>, GitError> {
    let repo = Repository::open(worktree)
        .ctx(|| format!("opening the worktree {}", worktree.display()))?;
    let mut options = StatusOptions::new();
    options
        .include_untracked(true)
        .recurse_untracked_dirs(true)
        .include_ignored(false);
    let statuses = repo
        .statuses(Some(&mut options))
        .ctx(|| format!("reading the status of {}", worktree.display()))?;
    let mut found: Vec<PathBuf> = statuses
        .iter()
        .filter(|s| s.status().contains(Status::WT_NEW))
        .map(|s| PathBuf::from(std::ffi::OsStr::from_bytes(s.path_bytes())))
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| is_writer_temp_name(&n.to_string_lossy()))
        })
        .collect();
    found.sort();
    for path in &found {
        remove_temp(&worktree.join(path))?;
    }
    Ok(found)
}

/// Removes the temp file at `path`; one already gone is fine.
pub(crate) fn remove_temp(path: &Path) -> Result<(), GitError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(crate::error::io_err(
            "removing the leftover temporary file",
            path,
        )(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writer_temp_names() {
        assert!(is_writer_temp_name(
            ".a.txt.ahelper-0190d1b2c3d4e5f60718293a4b5c6d7e.tmp"
        ));
        assert!(is_writer_temp_path(
            "src/.lib.rs.ahelper-0190d1b2c3d4e5f60718293a4b5c6d7e.tmp"
        ));
        assert!(!is_writer_temp_name(
            "a.txt.ahelper-0190d1b2c3d4e5f60718293a4b5c6d7e.tmp"
        ));
        assert!(!is_writer_temp_name(".a.txt.ahelper-xyz.tmp"));
        assert!(!is_writer_temp_name(
            ".ahelper-0190d1b2c3d4e5f60718293a4b5c6d7e.tmp"
        ));
        assert!(!is_writer_temp_name("notes.tmp"));
    }
}
