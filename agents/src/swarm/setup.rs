//! Preparing a new worker worktree before its worker starts: first the ignored files the
//! repository's `.worktreeinclude` matches are brought in
//! ([`ahelper_worktrees::bring_included`]: copy-on-write where the file system supports it,
//! with a size guard that names what it skipped, symlinks never leaving the repository), then,
//! for a Rust project (`[swarm] warm_cargo = "auto"`, the default), the checkout's dependency
//! artifacts are seeded into the worktree's own `target/debug`
//! ([`ahelper_worktrees::seed_cargo_target`]: same guards, within what the size guard has left;
//! not when `.worktreeinclude` covers `target/`, `CARGO_TARGET_DIR` is set, or the worktree
//! already has a `target/`), then the `[swarm] setup` command runs there (`bash -c`, like the verification command: the worker's
//! command sandbox and environment, the `verify_timeout_s` limit, secrets redacted). Both are
//! recorded in the worker's transcript (`worktree_include`, `cargo_warm` and `setup` lines); a failed setup
//! command fails that worker with the command's exit status and the tail of its output.

use super::{GitTaskError, git_task};
use crate::tools::ToolContext;
use crate::transcript::{TranscriptEntry, TranscriptError, TranscriptWriter};
use crate::verify::{VerifyOutcome, VerifySpec, run_verification};
use ahelper_worktrees as git;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Lines of a failed setup command's output quoted in the worker's failure.
const FAILURE_TAIL_LINES: usize = 15;
/// Characters of that tail at most.
const FAILURE_TAIL_CHARS: usize = 1_500;

/// How a run prepares each new worker worktree.
#[derive(Debug, Clone, Default)]
pub struct WorktreeSetup {
    /// The `.worktreeinclude` size guard (`[swarm] worktree_include_max_mb`).
    pub include_limits: git::IncludeLimits,
    /// `[swarm] setup`: the command line, `None` = nothing runs.
    pub command: Option<String>,
    /// Time limit of the setup command (`[swarm] verify_timeout_s`).
    pub timeout: Duration,
    /// The checkout's `.worktreeinclude` matches, listed by the first worktree that needs them
    /// and reused by the others (one walk of the ignored directories per run).
    pub included: tokio::sync::OnceCell<Arc<git::IncludeList>>,
    /// `[swarm] warm_cargo`; [`crate::config::WarmCargo::Off`] also when `CARGO_TARGET_DIR` is
    /// set in ahelper's environment (builds do not use `target/` then).
    pub warm_cargo: crate::config::WarmCargo,
    /// The checkout's dependency artifacts, listed by the first worktree that needs them.
    pub cargo_seed: tokio::sync::OnceCell<Arc<git::CargoSeed>>,
}

/// Why a worktree could not be prepared; the worker fails with this message.
#[derive(Debug, thiserror::Error)]
pub enum SetupFailure {
    /// Bringing the `.worktreeinclude` files failed (malformed file, unreadable checkout, full
    /// disk).
    #[error("could not bring the .worktreeinclude files: {0}")]
    Include(#[source] GitTaskError),
    /// Seeding `target/debug` with the checkout's dependency artifacts failed (unreadable
    /// checkout, full disk); the worktree's `target/` was removed again.
    #[error(
        "could not seed target/debug with the checkout's dependency artifacts (set [swarm] \
         warm_cargo = \"off\" to skip this): {0}"
    )]
    CargoWarm(#[source] GitTaskError),
    /// The setup command did not exit 0.
    #[error("setup command `{command}` failed ({}); its output ends with:\n{tail}", describe_outcome(.outcome))]
    Command {
        /// The command line.
        command: String,
        /// How it ended.
        outcome: VerifyOutcome,
        /// The last lines of its output.
        tail: String,
    },
    /// The worker's transcript could not be written.
    #[error("cannot write the transcript: {0}")]
    Transcript(#[source] TranscriptError),
}

/// How a setup command that did not pass ended, for a message: `exit status 3`, `timed out after
/// 600 s`, `could not start: …`, `cancelled`.
pub(crate) fn describe_outcome(outcome: &VerifyOutcome) -> String {
    match outcome {
        VerifyOutcome::Passed => "passed".into(),
        VerifyOutcome::Failed { exit } => exit.to_string(),
        VerifyOutcome::TimedOut { after_s } => format!("timed out after {after_s} s"),
        VerifyOutcome::CouldNotStart { reason } => format!("could not start: {reason}"),
        VerifyOutcome::Cancelled => "cancelled".into(),
    }
}

/// The last [`FAILURE_TAIL_LINES`] lines of `output`, at most [`FAILURE_TAIL_CHARS`] characters.
fn output_tail(output: &str) -> String {
    let lines: Vec<&str> = output.trim_end().lines().collect();
    let tail = lines[lines.len().saturating_sub(FAILURE_TAIL_LINES)..].join("\n");
    let count = tail.chars().count();
    if count <= FAILURE_TAIL_CHARS {
        return tail;
    }
    let cut: String = tail.chars().skip(count - FAILURE_TAIL_CHARS).collect();
    format!("…{cut}")
}

impl WorktreeSetup {
    /// The preparation `config` asks for: its `[swarm]` setup command, `.worktreeinclude` size
    /// guard, time limit and `warm_cargo` (off when `CARGO_TARGET_DIR` is set in this process's
    /// environment, which the workers' commands inherit); nothing listed yet.
    pub fn from_config(config: &crate::config::Config) -> Self {
        let target_dir_set = std::env::var_os("CARGO_TARGET_DIR").is_some_and(|v| !v.is_empty());
        WorktreeSetup {
            include_limits: git::IncludeLimits {
                max_bytes: config.swarm.include_max_bytes,
            },
            command: config.swarm.setup.clone(),
            timeout: Duration::from_secs(config.swarm.verify_timeout_s),
            included: Default::default(),
            warm_cargo: if target_dir_set {
                crate::config::WarmCargo::Off
            } else {
                config.swarm.warm_cargo
            },
            cargo_seed: Default::default(),
        }
    }

    /// Prepares the new `worktree` of `repo_root` for a worker whose tools are `tools` (its
    /// sandbox and environment are the setup command's) and whose transcript is `transcript`.
    ///
    /// # Errors
    /// [`SetupFailure`]; the transcript has the lines written before it.
    pub async fn prepare(
        &self,
        repo_root: &Path,
        worktree: &Path,
        tools: &ToolContext,
        transcript: &Path,
        cancel: &CancellationToken,
    ) -> Result<(), SetupFailure> {
        let mut writer = TranscriptWriter::open(transcript)
            .map_err(SetupFailure::Transcript)?
            .with_redactor(tools.redactor.clone());
        self.include(repo_root, worktree, tools, &mut writer)
            .await?;
        let Some(command) = &self.command else {
            return Ok(());
        };
        let sandbox = tools.command_sandbox.as_deref();
        let run = run_verification(&VerifySpec {
            command,
            dir: worktree,
            timeout: self.timeout,
            sandbox,
            env: &tools.env,
            redactor: &tools.redactor,
            cancel,
        })
        .await;
        writer
            .append(TranscriptEntry::Setup {
                command: command.clone(),
                outcome: run.outcome.clone(),
                duration_ms: run.duration_ms,
                output: run.output.clone(),
            })
            .map_err(SetupFailure::Transcript)?;
        if run.passed() {
            return Ok(());
        }
        Err(SetupFailure::Command {
            command: command.clone(),
            outcome: run.outcome,
            tail: output_tail(&run.output),
        })
    }

    /// `.worktreeinclude`, on the blocking pool; a report line in the transcript when the
    /// repository has the file. Then the warm cargo seed, within what the size guard has left.
    async fn include(
        &self,
        repo_root: &Path,
        worktree: &Path,
        tools: &ToolContext,
        writer: &mut TranscriptWriter,
    ) -> Result<(), SetupFailure> {
        let main: PathBuf = repo_root.into();
        let list = self
            .included
            .get_or_try_init(|| async move {
                git_task(move || Ok(Arc::new(git::list_included(&main)?))).await
            })
            .await
            .map_err(SetupFailure::Include)?
            .clone();
        let (dest, limits): (PathBuf, _) = (worktree.into(), self.include_limits);
        let report = if list.has_include_file() {
            let included = list.clone();
            git_task(move || Ok(git::bring_listed(&included, &dest, limits)?))
                .await
                .map_err(SetupFailure::Include)?
        } else {
            // Nothing to bring: no trip to the blocking pool on the way to the first request.
            git::IncludeReport::default()
        };
        let left = git::IncludeLimits {
            max_bytes: limits.max_bytes.saturating_sub(report.bytes),
        };
        if report.has_include_file {
            if !report.skipped.is_empty() {
                tracing::warn!(worktree = %worktree.display(), "{}", report.describe());
            }
            writer
                .append(TranscriptEntry::WorktreeInclude { report })
                .map_err(SetupFailure::Transcript)?;
        }
        if self.warm_cargo == crate::config::WarmCargo::Off
            || tools.env.contains_key("CARGO_TARGET_DIR")
        {
            return Ok(());
        }
        self.warm_cargo(repo_root, worktree, list, left, writer)
            .await
    }

    /// `[swarm] warm_cargo`: the checkout's dependency artifacts (listed once per run) copied
    /// into the worktree's `target/debug`; a transcript line when anything applied.
    async fn warm_cargo(
        &self,
        repo_root: &Path,
        worktree: &Path,
        included: Arc<git::IncludeList>,
        limits: git::IncludeLimits,
        writer: &mut TranscriptWriter,
    ) -> Result<(), SetupFailure> {
        let main: PathBuf = repo_root.into();
        let seed = self
            .cargo_seed
            .get_or_try_init(|| async move {
                git_task(move || Ok(Arc::new(git::list_cargo_seed(&main, &included)?))).await
            })
            .await
            .map_err(SetupFailure::CargoWarm)?
            .clone();
        if seed.applies().is_err() {
            // Not a Rust project with built dependencies: nothing to seed, no blocking task.
            return Ok(());
        }
        let dest: PathBuf = worktree.into();
        let report = git_task(move || Ok(git::seed_cargo_target(&seed, &dest, limits)?))
            .await
            .map_err(SetupFailure::CargoWarm)?;
        let Some(report) = report else {
            return Ok(());
        };
        if report.skipped_any() {
            tracing::warn!(worktree = %worktree.display(), "{}", report.describe());
        }
        writer
            .append(TranscriptEntry::CargoWarm { report })
            .map_err(SetupFailure::Transcript)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_names_the_exit_status_and_the_tail() {
        let output: String = (1..=40).map(|i| format!("line {i}\n")).collect();
        let failure = SetupFailure::Command {
            command: "make deps".into(),
            outcome: VerifyOutcome::Failed {
                exit: crate::verify::ExitReason::Code(3),
            },
            tail: output_tail(&output),
        };
        let text = failure.to_string();
        assert!(
            text.starts_with("setup command `make deps` failed (exit status 3)"),
            "{text}"
        );
        assert!(text.ends_with("line 26\nline 27\nline 28\nline 29\nline 30\nline 31\nline 32\nline 33\nline 34\nline 35\nline 36\nline 37\nline 38\nline 39\nline 40"), "{text}");
        assert!(!text.contains("line 25\n"), "{text}");
        let long = "x".repeat(5_000);
        assert_eq!(output_tail(&long).chars().count(), FAILURE_TAIL_CHARS + 1);
    }
}
