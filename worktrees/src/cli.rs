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
        let command = clip_chars(&line, MAX_COMMAND_CHARS);
        if crate::error::says_disk_full(&stderr) {
            return Err(GitError::DiskFull {
                action: format!("running `{command}`"),
                path: Default::default(),
                detail: disk_full_detail(&stderr),
            });
        }
        Err(GitError::GitCommand {
            command,
            status: out.status.to_string(),
            stderr: clip_lines(&stderr, MAX_STDERR_LINES),
        })
    }
}

/// How much of a failed command line an error quotes, in characters (a `git add` of many
/// paths runs to kilobytes).
const MAX_COMMAND_CHARS: usize = 300;

/// How many lines of a failed git's stderr an error quotes: git prints one line per file it
/// could not write, so a full disk under a large worktree gives hundreds.
const MAX_STDERR_LINES: usize = 20;

/// The first line of `stderr` that says the disk is full, and how many other lines there were.
fn disk_full_detail(stderr: &str) -> String {
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    let first = lines
        .iter()
        .find(|l| crate::error::says_disk_full(l))
        .or(lines.first())
        .map_or("", |l| l.trim());
    match lines.len() {
        0 | 1 => first.to_owned(),
        n => format!("{first}; and {} more lines from git", n - 1),
    }
}

/// `text`'s first `max` lines, and how many were left out.
fn clip_lines(text: &str, max: usize) -> String {
    let total = text.lines().count();
    if total <= max {
        return text.to_owned();
    }
    let kept: Vec<&str> = text.lines().take(max).collect();
    format!("{}\n… ({} more lines)", kept.join("\n"), total - max)
}

/// `text`'s first `max` characters, with `…` when it was longer.
fn clip_chars(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A full disk under a large worktree: git prints one line per file; the error quotes the
    /// line that says why and counts the rest.
    #[test]
    fn a_disk_full_error_quotes_one_line_of_git() {
        let mut stderr = String::new();
        for i in 0..800 {
            stderr.push_str(&format!("error: unable to write file src/f{i}.rs\n"));
        }
        stderr.push_str("fatal: cannot create directory at 'x': No space left on device\n");
        assert_eq!(
            disk_full_detail(stderr.trim()),
            "fatal: cannot create directory at 'x': No space left on device; and 800 more lines from git"
        );
        assert_eq!(
            disk_full_detail("No space left on device"),
            "No space left on device"
        );
    }

    #[test]
    fn long_stderr_and_command_lines_are_clipped() {
        let text: String = (0..30).map(|i| format!("line {i}\n")).collect();
        let clipped = clip_lines(text.trim(), 20);
        assert!(clipped.starts_with("line 0\n"));
        assert!(clipped.ends_with("line 19\n… (10 more lines)"), "{clipped}");
        assert_eq!(clip_lines("a\nb", 20), "a\nb");
        assert_eq!(clip_chars("abcdef", 3), "abc…");
        assert_eq!(clip_chars("ab", 3), "ab");
    }

    /// The message of a failed `git` on a full disk: no dangling "in", git's first line.
    #[test]
    fn a_disk_full_git_error_reads_as_one_sentence() {
        let e = GitError::DiskFull {
            action: "running `git -C /r worktree add /w`".into(),
            path: Default::default(),
            detail: disk_full_detail("fatal: No space left on device"),
        };
        assert_eq!(
            e.to_string(),
            "No space left on device while running `git -C /r worktree add /w`. Free some disk space (`df -h` shows what is left) and try again (fatal: No space left on device)"
        );
    }
}
