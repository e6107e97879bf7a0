//! A real full disk for tests: a tmpfs mounted on a temporary directory, and a filler that
//! fills it. One file, included with `#[path]` by the end-to-end tests (`tests/suite/support`)
//! and the runtime's tests (`agents/tests/suite/support`), so it uses `std` and `tempfile` only.
//!
//! Mounting needs root (CAP_SYS_ADMIN); without it [`Tmpfs::mount`] prints why the test is
//! skipped and returns `None`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A tmpfs mounted on a temporary directory; unmounted on drop.
pub struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size` (`mount -o size=`, e.g. `64k`, `1m`), or says on stderr why it
    /// cannot and returns `None`.
    pub fn mount(size: &str) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().ok()?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output();
        match out {
            Ok(o) if o.status.success() => Some(Tmpfs { dir }),
            Ok(o) => {
                eprintln!(
                    "skipped: cannot mount a tmpfs ({}); run the tests as root to cover a full disk",
                    String::from_utf8_lossy(&o.stderr).trim()
                );
                None
            }
            Err(e) => {
                eprintln!("skipped: cannot run mount ({e})");
                None
            }
        }
    }

    /// The mount point, canonical.
    pub fn path(&self) -> PathBuf {
        std::fs::canonicalize(self.dir.path()).unwrap()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

/// Writes `dir/filler` in 1 KiB chunks until the filesystem of `dir` is full; panics when a
/// write fails for another reason than "No space left on device".
pub fn fill(dir: &Path) {
    let mut filler = std::fs::File::create(dir.join("filler")).unwrap();
    let chunk = [0u8; 1024];
    loop {
        if let Err(e) = filler.write_all(&chunk).and_then(|()| filler.sync_all()) {
            assert_eq!(e.kind(), std::io::ErrorKind::StorageFull, "{e}");
            return;
        }
    }
}
