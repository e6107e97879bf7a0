//! A private temp dir per command: `<temp>/ahelper-<uid>/cmd-<uuid>`, mode 0700, given to the
//! command as `TMPDIR` and removed when the command (and everything it started) has ended.
//! `<temp>` is ahelper's own `std::env::temp_dir()` (`$TMPDIR` or `/tmp`; `/tmp` when `$TMPDIR`
//! is not an existing directory). Under the landlock
//! sandbox this directory, not the shared temp dir, is what commands may write.

use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

/// One command's temp dir; removed (with its contents) on drop.
#[derive(Debug)]
pub struct CommandTemp {
    path: PathBuf,
}

impl CommandTemp {
    /// Creates a fresh directory under [`user_temp_base`].
    ///
    /// # Errors
    /// The base cannot be created, is not a directory owned by this user with mode 0700 (someone
    /// else made it: refusing keeps another user from reading or planting files), or the new
    /// directory cannot be created.
    pub fn create() -> io::Result<Self> {
        let base = user_temp_base()?;
        let path = base.join(format!("cmd-{}", uuid::Uuid::now_v7()));
        std::fs::DirBuilder::new().mode(0o700).create(&path)?;
        Ok(CommandTemp { path })
    }

    /// The directory (absolute).
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for CommandTemp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// `<temp>/ahelper-<uid>`, created with mode 0700 when missing and checked to be a real
/// directory owned by this user and closed to others.
///
/// # Errors
/// See [`CommandTemp::create`].
pub fn user_temp_base() -> io::Result<PathBuf> {
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    let temp = std::env::temp_dir();
    // A `TMPDIR` that does not exist (yet) is not a reason to fail every command.
    let temp = if temp.is_dir() {
        temp
    } else {
        PathBuf::from("/tmp")
    };
    let base = temp.join(format!("ahelper-{uid}"));
    match std::fs::DirBuilder::new().mode(0o700).create(&base) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let meta = std::fs::symlink_metadata(&base)?;
    if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} is not a private directory of this user (owner, mode 0700); remove it",
                base.display()
            ),
        ));
    }
    Ok(std::fs::canonicalize(&base).unwrap_or(base))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_dir_is_private_and_removed() {
        let temp = CommandTemp::create().unwrap();
        let path = temp.path().to_path_buf();
        std::fs::write(path.join("f"), "x").unwrap();
        let mode = std::fs::metadata(&path).unwrap().mode();
        assert_eq!(mode & 0o777, 0o700);
        drop(temp);
        assert!(!path.exists());
    }
}
