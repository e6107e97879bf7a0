//! Atomic file replacement: a temporary file in the same directory is written, flushed to disk
//! (`fsync`) and renamed over the target, so a reader (or `git add`) sees the old bytes or the
//! new bytes, never a half-written or empty file. A failure (a full disk, a quota, an I/O
//! error) removes the temporary file and leaves the target as it was.
//!
//! Two entry points: [`replace_in_dir`] for the file tools (the directory is an open handle the
//! sandbox verified, so the rename cannot be redirected out of the workspace) and
//! [`write_path`] for ahelper's own state files (`run.json`, `.ahelper/config.toml`);
//! [`write_path_deferring_sync`] replaces a state file just as atomically but leaves the
//! `fsync` to the caller (a swarm's `run.json` before its workers start: flushed beside them).
//! [`describe_write_error`] words a failure for the user, naming "No space left on device"
//! and what to do.

use std::ffi::{CString, OsStr, OsString};
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// What the replacement keeps of the file it replaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keep {
    /// Permission bits (`st_mode & 0o7777`).
    pub mode: u32,
    /// Owner and group.
    pub owner: (u32, u32),
}

impl Keep {
    /// The mode and owner of `meta` (the file being replaced).
    pub fn of(meta: &std::fs::Metadata) -> Self {
        Keep {
            mode: meta.mode() & 0o7777,
            owner: (meta.uid(), meta.gid()),
        }
    }
}

/// Replaces the entry `name` of the open directory `dir` with a regular file holding `bytes`.
///
/// `keep`: the mode and owner of the file being replaced (`None` for a new file: mode `0o666`
/// minus the umask, owned by this process). The temporary file is
/// `.<name>.ahelper-<uuid>.tmp` in the same directory (same filesystem, so the rename is
/// atomic); the directory is `fsync`ed after the rename (best effort).
///
/// # Errors
/// The I/O error of creating, writing, syncing or renaming; the target is then unchanged and
/// the temporary file removed. Word it with [`describe_write_error`].
pub fn replace_in_dir(
    dir: &File,
    name: &OsStr,
    bytes: &[u8],
    keep: Option<Keep>,
) -> io::Result<()> {
    replace_through(dir, name, bytes, (keep, Flush::Now), &mut |file| {
        Box::new(file)
    })
}

/// When a replacement reaches the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flush {
    /// The file is `fsync`ed before the rename and the directory after it.
    Now,
    /// Neither: the caller flushes later ([`PendingSync::sync`]).
    Later,
}

/// [`replace_in_dir`] writing the content through the writer `sink` makes of the temporary
/// file (unit tests inject a writer that fails part-way).
fn replace_through(
    dir: &File,
    name: &OsStr,
    bytes: &[u8],
    (keep, flush): (Option<Keep>, Flush),
    sink: &mut dyn for<'f> FnMut(&'f mut File) -> Box<dyn Write + 'f>,
) -> io::Result<()> {
    let tmp_name = temp_name(name);
    let mut file = create_temp(dir, &tmp_name)?;
    let written = fill(&mut file, bytes, keep, sink)
        .and_then(|()| {
            if flush == Flush::Now {
                file.sync_all()
            } else {
                Ok(())
            }
        })
        .and_then(|()| rename_in(dir, &tmp_name, name))
        .inspect_err(|_| {
            let _ = unlink_in(dir, &tmp_name);
        });
    written?;
    if flush == Flush::Now {
        // The rename is durable once the directory entry is; some filesystems refuse a
        // directory fsync, which does not undo the replacement.
        let _ = dir.sync_all();
    }
    Ok(())
}

/// Writes `bytes` through `sink` and restores `keep`'s mode and owner.
fn fill(
    file: &mut File,
    bytes: &[u8],
    keep: Option<Keep>,
    sink: &mut dyn for<'f> FnMut(&'f mut File) -> Box<dyn Write + 'f>,
) -> io::Result<()> {
    {
        let mut writer = sink(file);
        writer.write_all(bytes)?;
        writer.flush()?;
    }
    if let Some(keep) = keep {
        let meta = file.metadata()?;
        if (meta.uid(), meta.gid()) != keep.owner {
            // Only root may give a file away; for others the new file stays theirs.
            let _ = std::os::unix::fs::fchown(&*file, Some(keep.owner.0), Some(keep.owner.1));
        }
        file.set_permissions(std::fs::Permissions::from_mode(keep.mode))?;
    }
    Ok(())
}

/// `.<name>.ahelper-<uuid>.tmp`, with `name` cut to 64 bytes so the result stays a valid name.
fn temp_name(name: &OsStr) -> OsString {
    let bytes = name.as_bytes();
    let mut out = b".".to_vec();
    out.extend_from_slice(&bytes[..bytes.len().min(64)]);
    // The name `ahelper_worktrees::is_writer_temp_name` recognises (commits leave it out).
    let uuid = uuid::Uuid::now_v7().simple();
    out.extend_from_slice(
        format!(
            "{}{uuid}{}",
            ahelper_worktrees::WRITER_TEMP_INFIX,
            ahelper_worktrees::WRITER_TEMP_SUFFIX
        )
        .as_bytes(),
    );
    OsString::from_vec(out)
}

fn c_name(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

/// Creates `name` in `dir` exclusively (never following a symlink), mode `0o666` minus umask.
fn create_temp(dir: &File, name: &OsStr) -> io::Result<File> {
    let c = c_name(name)?;
    // SAFETY: `dir` is an open directory fd and `c` a NUL-terminated single file name.
    let fd = unsafe {
        libc::openat(
            dir.as_raw_fd(),
            c.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0o666 as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor returned by the kernel and owned by nobody else.
    Ok(unsafe { File::from_raw_fd(fd) })
}

fn rename_in(dir: &File, from: &OsStr, to: &OsStr) -> io::Result<()> {
    let (from, to) = (c_name(from)?, c_name(to)?);
    // SAFETY: both names are NUL-terminated single names inside the open directory `dir`.
    let rc =
        unsafe { libc::renameat(dir.as_raw_fd(), from.as_ptr(), dir.as_raw_fd(), to.as_ptr()) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn unlink_in(dir: &File, name: &OsStr) -> io::Result<()> {
    let c = c_name(name)?;
    // SAFETY: `c` is a NUL-terminated single name inside the open directory `dir`.
    let rc = unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), 0) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Atomically replaces (or creates) the file at `path` with `bytes`, keeping the mode and
/// owner of an existing file. For ahelper's own state files; the parent directory must exist.
///
/// # Errors
/// As [`replace_in_dir`]; also when `path` has no parent or file name.
pub fn write_path(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_path_flushing(path, bytes, Flush::Now).map(|_| ())
}

/// [`write_path`] without waiting for the disk: the new file is written and renamed into
/// place (every reader, in this process or another, sees the old bytes or the new ones, never
/// a mix), but neither it nor the rename is flushed (`fsync`, milliseconds on a busy disk)
/// until the caller calls [`PendingSync::sync`]. Until then only a power loss can undo it:
/// the file may then read as it was before, or empty.
///
/// # Errors
/// As [`write_path`].
pub fn write_path_deferring_sync(path: &Path, bytes: &[u8]) -> io::Result<PendingSync> {
    write_path_flushing(path, bytes, Flush::Later)
}

/// A file replaced by [`write_path_deferring_sync`], not yet flushed to disk.
#[derive(Debug)]
#[must_use = "the file is not on disk until it is synced"]
pub struct PendingSync {
    file: PathBuf,
    dir: PathBuf,
}

impl PendingSync {
    /// Flushes the file (whatever is at its path now: a later replacement flushes itself too)
    /// and its directory entry (best effort, as [`replace_in_dir`]).
    ///
    /// # Errors
    /// The I/O error of opening or syncing the file.
    pub fn sync(self) -> io::Result<()> {
        File::open(&self.file)?.sync_all()?;
        if let Ok(dir) = File::open(&self.dir) {
            let _ = dir.sync_all();
        }
        Ok(())
    }
}

fn write_path_flushing(path: &Path, bytes: &[u8], flush: Flush) -> io::Result<PendingSync> {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a file path", path.display()),
        ));
    };
    let parent = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    let dir = File::open(parent)?;
    let keep = match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_file() => Some(Keep::of(&meta)),
        _ => None,
    };
    replace_through(&dir, name, bytes, (keep, flush), &mut |file| Box::new(file))?;
    Ok(PendingSync {
        file: path.to_path_buf(),
        dir: parent.to_path_buf(),
    })
}

/// Whether `e` means the disk (or the user's quota) is full.
pub fn is_disk_full(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::ENOSPC) | Some(libc::EDQUOT))
        || matches!(
            e.kind(),
            io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded
        )
}

/// A failed write of `what` (a path as the user knows it) in the user's words. A full disk
/// says "No space left on device", that the file was left as it was, and what to do.
pub fn describe_write_error(what: &str, e: &io::Error) -> String {
    if is_disk_full(e) {
        format!(
            "No space left on device: `{what}` could not be written and was left as it was \
             (nothing half-written was kept). Free some disk space (`df -h` shows what is left) \
             and try again"
        )
    } else {
        format!("cannot write `{what}`: {e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The temp name is the one commits leave out (`ahelper_worktrees::is_writer_temp_name`),
    /// also for a long target name (clipped to 64 bytes).
    #[test]
    fn temp_names_are_the_ones_commits_leave_out() {
        for name in ["a.txt", &"x".repeat(200)] {
            let tmp = temp_name(OsStr::new(name));
            assert!(
                ahelper_worktrees::is_writer_temp_name(&tmp.to_string_lossy()),
                "{tmp:?}"
            );
        }
    }

    /// Passes `limit` bytes to the file, then fails with ENOSPC, like a disk that fills up.
    struct FailsAfter<'f> {
        file: &'f mut File,
        limit: usize,
    }

    impl Write for FailsAfter<'_> {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if self.limit == 0 {
                return Err(io::Error::from_raw_os_error(libc::ENOSPC));
            }
            let n = buf.len().min(self.limit);
            self.limit -= n;
            self.file.write(&buf[..n])
        }
        fn flush(&mut self) -> io::Result<()> {
            self.file.flush()
        }
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_write_failing_midway_keeps_the_original_bytes_and_leaves_no_temp_file() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("notes.txt");
        std::fs::write(&target, "original bytes\n").unwrap();
        let dir = File::open(tmp.path()).unwrap();
        let keep = Some(Keep::of(&std::fs::metadata(&target).unwrap()));
        let err = replace_through(
            &dir,
            OsStr::new("notes.txt"),
            &[b'x'; 10_000],
            (keep, Flush::Now),
            &mut |file| Box::new(FailsAfter { file, limit: 4096 }),
        )
        .unwrap_err();
        assert!(is_disk_full(&err), "{err}");
        assert_eq!(
            std::fs::read_to_string(&target).unwrap(),
            "original bytes\n"
        );
        assert_eq!(entries(tmp.path()), vec!["notes.txt"], "temp file removed");
        let text = describe_write_error("notes.txt", &err);
        assert!(
            text.starts_with("No space left on device: `notes.txt`"),
            "{text}"
        );
    }

    #[test]
    fn a_new_file_failing_midway_is_not_created() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = File::open(tmp.path()).unwrap();
        replace_through(
            &dir,
            OsStr::new("new.txt"),
            b"abc",
            (None, Flush::Now),
            &mut |file| Box::new(FailsAfter { file, limit: 0 }),
        )
        .unwrap_err();
        assert!(entries(tmp.path()).is_empty(), "no 0-byte file left");
    }

    #[test]
    fn replacing_keeps_the_mode_and_replaces_the_content() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("run.sh");
        std::fs::write(&target, "old").unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o750)).unwrap();
        write_path(&target, b"#!/bin/sh\necho new\n").unwrap();
        assert_eq!(
            std::fs::read_to_string(&target).unwrap(),
            "#!/bin/sh\necho new\n"
        );
        let mode = std::fs::metadata(&target).unwrap().mode() & 0o7777;
        assert_eq!(mode, 0o750);
        assert_eq!(entries(tmp.path()), vec!["run.sh"]);
    }

    /// A replacement whose flush is left to the caller is in place, whole, before the flush.
    #[test]
    fn a_deferred_replacement_is_in_place_before_its_flush() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("run.json");
        std::fs::write(&target, "old").unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o640)).unwrap();
        let pending = write_path_deferring_sync(&target, b"{\"new\": true}").unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "{\"new\": true}");
        let mode = std::fs::metadata(&target).unwrap().mode() & 0o7777;
        assert_eq!(mode, 0o640);
        assert_eq!(entries(tmp.path()), vec!["run.json"]);
        pending.sync().unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "{\"new\": true}");
    }

    #[test]
    fn other_errors_keep_their_own_words() {
        let e = io::Error::from(io::ErrorKind::PermissionDenied);
        assert!(describe_write_error("a", &e).starts_with("cannot write `a`: "));
        assert!(is_disk_full(&io::Error::from_raw_os_error(libc::EDQUOT)));
    }
}
