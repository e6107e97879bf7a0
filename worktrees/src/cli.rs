//! Running the `git` command-line program.

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::GitError;

/// Environment variables that would redirect a child `git` to another repository, index or worktree
/// (they are set, for example, when ahelper itself runs inside a git hook).
const REDIRECTING_ENV: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_PREFIX",
    "GIT_NAMESPACE",
];

/// Builds a `git -C <dir> <args…>` command with a clean, non-interactive environment.
pub(crate) fn command<I, S>(dir: &Path, args: I) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut cmd = Command::new("git");
    cmd.arg("-C").arg(dir).args(args);
    for var in REDIRECTING_ENV {
        cmd.env_remove(var);
    }
    cmd.env("GIT_TERMINAL_PROMPT", "0")
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Runs a prepared command; returns its stdout, or [`GitError::GitCommand`] with its stderr.
pub(crate) fn run(mut cmd: Command) -> Result<String, GitError> {
    let line = describe(&cmd);
    tracing::debug!(command = %line, "running git");
    let out = cmd
        .output()
        .map_err(|source| GitError::GitNotFound { source })?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_owned();
        if crate::error::says_disk_full(&stderr) {
            return Err(GitError::DiskFull {
                action: format!("running `{line}` in"),
                path: cmd
                    .get_current_dir()
                    .map(Path::to_path_buf)
                    .unwrap_or_default(),
                detail: stderr,
            });
        }
        Err(GitError::GitCommand {
            command: line,
            status: out.status.to_string(),
            stderr,
        })
    }
}

/// `git -C <dir> <args…>`, returning stdout.
pub(crate) fn git<I, S>(dir: &Path, args: I) -> Result<String, GitError>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    run(command(dir, args))
}

fn describe(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}
