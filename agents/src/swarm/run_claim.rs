//! One process drives a run at a time: starting a run, `swarm resume` and `swarm clean` take an
//! exclusive lock on the run's `run.lock` (`<repo>/.ahelper/runs/<run>/run.lock`, BSD `flock`)
//! and hold it for as long as they work on the run. The kernel releases it when the process
//! exits, however it exits (`kill -9` included), so a crash never leaves a run claimed.
//!
//! The record's `pid` alone could not do this: reading it, finding its process gone and writing
//! our own is a check-then-write race, which two resumes started together both won. The lock
//! file holds the pid of the process holding it (decimal, one line), so the one refused can
//! say which process runs the run.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The lock file's name in a run's directory.
pub const RUN_LOCK_FILE: &str = "run.lock";

/// A run claimed by this process: exclusive until dropped (or the process ends).
#[derive(Debug)]
pub struct RunClaim {
    /// The open lock file; closing it releases the lock.
    _file: File,
    path: PathBuf,
}

impl RunClaim {
    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Why a run could not be claimed.
#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    /// Another process holds the run's lock.
    #[error(
        "run {run_id} is being driven by another ahelper process ({holder}); only one process may run, resume or clean a run at a time — wait for it to end (`ahelper swarm status {run_id}` shows its progress), or stop it first"
    )]
    Held {
        /// The run.
        run_id: String,
        /// "pid N", or where to look when the holder did not write its pid yet.
        holder: String,
        /// Its pid, when the lock file names one.
        pid: Option<u32>,
    },
    /// The lock file could not be opened or locked.
    #[error("could not lock run {run_id} ({path}): {source}; check that the directory is writable")]
    Io {
        /// The run.
        run_id: String,
        /// The lock file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// Claims run `run_id` whose directory is `run_dir` for this process (see the module docs),
/// without waiting: the claim, or who holds it.
///
/// # Errors
/// [`ClaimError::Held`] when another process holds it (its pid from the lock file);
/// [`ClaimError::Io`] when the directory is missing or the file cannot be opened or locked.
pub fn claim_run(run_dir: &Path, run_id: &str) -> Result<RunClaim, ClaimError> {
    let path = run_dir.join(RUN_LOCK_FILE);
    let io = |source| ClaimError::Io {
        run_id: run_id.to_string(),
        path: path.clone(),
        source,
    };
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)
        .map_err(io)?;
    // SAFETY: `file` is an open descriptor for the whole call.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let error = std::io::Error::last_os_error();
        if error.raw_os_error() != Some(libc::EWOULDBLOCK) {
            return Err(io(error));
        }
        let pid = holder_pid(&mut file);
        return Err(ClaimError::Held {
            run_id: run_id.to_string(),
            holder: match pid {
                Some(pid) => format!("pid {pid}"),
                None => format!("its pid is not written yet in {}", path.display()),
            },
            pid,
        });
    }
    write_pid(&mut file).map_err(io)?;
    Ok(RunClaim { _file: file, path })
}

/// Replaces the lock file's content with this process's pid.
fn write_pid(file: &mut File) -> std::io::Result<()> {
    file.set_len(0)?;
    file.rewind()?;
    writeln!(file, "{}", std::process::id())?;
    file.flush()
}

/// The pid the holder wrote in the lock file; it writes it just after taking the lock, so an
/// empty file is read again for up to 200 ms.
fn holder_pid(file: &mut File) -> Option<u32> {
    for _ in 0..20 {
        let mut text = String::new();
        if file.rewind().is_ok()
            && file.read_to_string(&mut text).is_ok()
            && let Ok(pid) = text.trim().parse()
        {
            return Some(pid);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A second claim fails naming this process; after the first is dropped it succeeds.
    #[test]
    fn one_claim_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let first = claim_run(dir.path(), "r1").unwrap();
        match claim_run(dir.path(), "r1") {
            Err(ClaimError::Held { pid, .. }) => assert_eq!(pid, Some(std::process::id())),
            other => panic!("{other:?}"),
        }
        drop(first);
        claim_run(dir.path(), "r1").unwrap();
    }
}
