//! Running the verification command in a worktree: [`precheck`] and [`run_verification`].
//!
//! The command runs like the `run_command` tool (through the same code,
//! `tools::shell::run_in_group`): `bash -c` in the worktree, its own process group, dying with
//! ahelper, stdin `/dev/null`, stdout and stderr interleaved, API-key variables removed from the
//! environment, a private `TMPDIR`, the landlock sandbox when one is given, known secret values
//! redacted from the output; on timeout or cancellation the whole group is stopped (`SIGTERM`,
//! `SIGKILL` after 1.5 s), and processes the command leaves behind are killed when it ends.
//! Unlike `run_command`, no permission rule is consulted: the command is allowed by being
//! configured.

use super::failures::{FailureReport, parse_failures};
use crate::permissions::command::{CommandKind, Cwd, SimpleCommand, analyze_command};
use crate::redact::Redactor;
use crate::sandbox_os::CommandSandbox;
use crate::tools::shell::{GroupCommand, Outcome, command_env, run_in_group};
use crate::tools::truncate_middle;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Output kept in a [`VerifyRun`], in characters (head and tail, marker in between).
pub const KEPT_OUTPUT_CHARS: usize = 30_000;
/// Output read for failure names, in characters; longer output is cut in the middle and its
/// [`FailureReport::output_cut`] is set.
pub const PARSED_OUTPUT_CHARS: usize = 1_000_000;
/// Time limit of the `python -m MODULE` importability probe of [`precheck`].
const PYTHON_PROBE_TIMEOUT: Duration = Duration::from_secs(20);

/// What to run and where.
#[derive(Debug, Clone)]
pub struct VerifySpec<'a> {
    /// Shell command line, e.g. `cargo test --no-fail-fast`.
    pub command: &'a str,
    /// The worktree it runs in (must exist).
    pub dir: &'a Path,
    /// Time limit (`[swarm] verify_timeout_s`).
    pub timeout: Duration,
    /// Landlock policy for the worktree, e.g. `base.for_workspace(dir)`; `None` = unconfined.
    pub sandbox: Option<&'a CommandSandbox>,
    /// Variables added to the environment (e.g. `AHELPER_RUN_ID`).
    pub env: &'a BTreeMap<String, String>,
    /// Known secret values, replaced by `[REDACTED:<NAME>]` in the output.
    pub redactor: &'a Redactor,
    /// Cancels the run (the whole process group is stopped).
    pub cancel: &'a CancellationToken,
}

/// How a process ended when it did not pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExitReason {
    /// Non-zero exit code.
    Code(i32),
    /// Killed by this signal number.
    Signal(i32),
}

impl std::fmt::Display for ExitReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExitReason::Code(c) => write!(f, "exit status {c}"),
            ExitReason::Signal(s) => write!(f, "killed by signal {s}"),
        }
    }
}

/// How a verification run ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "outcome")]
pub enum VerifyOutcome {
    /// Exit status 0.
    Passed,
    /// It ran and did not exit 0.
    Failed {
        /// Exit code or signal.
        exit: ExitReason,
    },
    /// Still running at the time limit; the whole process group was killed.
    TimedOut {
        /// The limit, in seconds.
        after_s: u64,
    },
    /// The command could not be started: [`precheck`] failed, the shell could not be spawned,
    /// or the shell said the program was not found (exit 127) or not executable (126).
    CouldNotStart {
        /// What went wrong (one line).
        reason: String,
    },
    /// Cancelled (Ctrl-C, run-wide limit); the whole process group was killed.
    Cancelled,
}

/// One run of the verification command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyRun {
    /// The command line.
    pub command: String,
    /// How it ended.
    pub outcome: VerifyOutcome,
    /// Wall time in milliseconds (the precheck included).
    pub duration_ms: u64,
    /// stdout and stderr interleaved, at most [`KEPT_OUTPUT_CHARS`] characters (head and tail).
    pub output: String,
    /// Failed tests named in the output; `None` when no known runner's output was recognised.
    pub failures: Option<FailureReport>,
}

impl VerifyRun {
    /// True when the command exited 0.
    pub fn passed(&self) -> bool {
        self.outcome == VerifyOutcome::Passed
    }
}

/// Errors of [`precheck`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// The program of the command is missing or cannot be executed.
    #[error(
        "verify command `{command}` cannot start: {reason} (set [swarm] verify or pass --verify)"
    )]
    CannotStart {
        /// The command line.
        command: String,
        /// What is missing, e.g. `cargo is not on PATH (/usr/bin:/bin)`.
        reason: String,
    },
}

/// Checks, without running it, that `command` can start in `dir` with the environment it will
/// get (ahelper's minus secrets, plus `env`): the directory exists; the first program of the
/// line (after `cd`-like builtins, through `bash -c '…'` and wrappers such as `timeout` and
/// `env`, which are checked too) is an executable file — a path containing `/` relative to `dir`
/// (or to the directory a preceding `cd` entered), else found on `PATH`; and for
/// `python… -m MODULE`, the module is importable by that interpreter (a short probe run in
/// `dir`). A program computed at run time (`$RUNNER test`) is not checked.
///
/// # Errors
/// [`VerifyError::CannotStart`] naming what is missing.
pub async fn precheck(
    command: &str,
    dir: &Path,
    env: &BTreeMap<String, String>,
) -> Result<(), VerifyError> {
    let fail = |reason: String| VerifyError::CannotStart {
        command: command.to_string(),
        reason,
    };
    if command.trim().is_empty() {
        return Err(fail("the command is empty".into()));
    }
    if !dir.is_dir() {
        return Err(fail(format!(
            "the directory {} does not exist",
            dir.display()
        )));
    }
    let child_env = command_env(std::env::vars_os(), env);
    let path_var = child_env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    let analysis = analyze_command(command);
    for simple in &analysis.commands {
        for wrapper in simple.wrappers.iter().filter(|w| !is_shell_builtin(w)) {
            resolve_program(
                wrapper,
                dir,
                &Cwd::Possible(vec![PathBuf::new()]),
                &path_var,
            )
            .map_err(&fail)?;
        }
        if simple.kind != CommandKind::Program {
            continue;
        }
        let Some(program) = simple.argv.first() else {
            continue;
        };
        let Some(program) = program.as_literal() else {
            return Ok(());
        };
        if is_shell_builtin(program) {
            continue;
        }
        let resolved = resolve_program(program, dir, &simple.cwd, &path_var).map_err(&fail)?;
        if let Some(module) = python_module(simple) {
            probe_python_module(&resolved, &module, dir, &child_env)
                .await
                .map_err(&fail)?;
        }
        return Ok(());
    }
    Ok(())
}

/// Shell builtins and keywords that need no program on disk.
fn is_shell_builtin(word: &str) -> bool {
    matches!(
        word,
        "cd" | "export"
            | "set"
            | "unset"
            | "true"
            | "false"
            | ":"
            | "test"
            | "["
            | "[["
            | "echo"
            | "printf"
            | "source"
            | "."
            | "exit"
            | "pushd"
            | "popd"
            | "ulimit"
            | "umask"
            | "shopt"
            | "trap"
            | "wait"
            | "read"
            | "type"
            | "hash"
            | "exec"
            | "command"
            | "builtin"
            | "eval"
            | "let"
            | "local"
            | "declare"
            | "typeset"
            | "readonly"
            | "return"
            | "shift"
            | "kill"
            | "alias"
            | "jobs"
            | "disown"
    )
}

/// Finds `program` the way the shell will: a path with `/` relative to `dir` (and to the
/// directories a preceding `cd` may have entered), else the entries of `path_var`.
fn resolve_program(
    program: &str,
    dir: &Path,
    cwd: &Cwd,
    path_var: &OsString,
) -> Result<PathBuf, String> {
    if program.contains('/') {
        let bases: Vec<PathBuf> = match cwd {
            Cwd::Possible(dirs) => dirs.iter().map(|d| dir.join(d)).collect(),
            Cwd::Unknown => return Ok(PathBuf::from(program)),
        };
        let candidates: Vec<PathBuf> = bases.iter().map(|b| b.join(program)).collect();
        return candidates
            .iter()
            .find(|c| is_executable(c))
            .cloned()
            .ok_or_else(|| match candidates.iter().find(|c| c.exists()) {
                Some(c) => format!("{} is not an executable file", c.display()),
                None => format!("{program} does not exist in {}", dir.display()),
            });
    }
    std::env::split_paths(path_var)
        .map(|entry| {
            if entry.is_relative() {
                dir.join(entry).join(program)
            } else {
                entry.join(program)
            }
        })
        .find(|c| is_executable(c))
        .ok_or_else(|| format!("{program} is not on PATH ({})", path_var.to_string_lossy()))
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// `MODULE` of `python… -m MODULE …`.
fn python_module(simple: &SimpleCommand) -> Option<String> {
    let program = simple.argv.first()?.as_literal()?;
    let base = program.rsplit('/').next().unwrap_or(program);
    if !base.starts_with("python") {
        return None;
    }
    let m = simple.argv.iter().position(|w| w.text == "-m")?;
    simple
        .argv
        .get(m + 1)?
        .as_literal()
        .map(|s| s.split('.').next().unwrap_or(s).to_string())
}

/// Runs `python -c "find_spec(module)"` in `dir`; fails when the module is missing.
async fn probe_python_module(
    python: &Path,
    module: &str,
    dir: &Path,
    env: &[(OsString, OsString)],
) -> Result<(), String> {
    let probe = "import importlib.util, sys\n\
                 sys.exit(0 if importlib.util.find_spec(sys.argv[1]) else 3)";
    let run = tokio::process::Command::new(python)
        .arg("-c")
        .arg(probe)
        .arg(module)
        .current_dir(dir)
        .env_clear()
        .envs(env.iter().cloned())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .status();
    match tokio::time::timeout(PYTHON_PROBE_TIMEOUT, run).await {
        Ok(Ok(status)) if status.code() == Some(3) => Err(format!(
            "the Python module `{module}` is not installed for {} (pip install {module})",
            python.display()
        )),
        // Any other answer (even a failing interpreter) is left to the real run to report.
        _ => Ok(()),
    }
}

/// Runs the verification command (see the module documentation). Never fails: a command that
/// cannot start is [`VerifyOutcome::CouldNotStart`].
pub async fn run_verification(spec: &VerifySpec<'_>) -> VerifyRun {
    let started = Instant::now();
    let finish =
        |outcome: VerifyOutcome, output: String, failures: Option<FailureReport>| VerifyRun {
            command: spec.command.to_string(),
            outcome,
            duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            output,
            failures,
        };
    if let Err(VerifyError::CannotStart { reason, .. }) =
        precheck(spec.command, spec.dir, spec.env).await
    {
        return finish(VerifyOutcome::CouldNotStart { reason }, String::new(), None);
    }
    let group = run_in_group(&GroupCommand {
        command: spec.command,
        cwd: spec.dir,
        env: spec.env,
        sandbox: spec.sandbox,
        timeout: spec.timeout,
        max_output_chars: PARSED_OUTPUT_CHARS,
        redactor: spec.redactor,
        cancel: spec.cancel,
    })
    .await;
    let run = match group {
        Ok(run) => run,
        Err(e) => {
            return finish(
                VerifyOutcome::CouldNotStart {
                    reason: e.to_string(),
                },
                String::new(),
                None,
            );
        }
    };
    let outcome = match run.outcome {
        Outcome::Exited(status) if status.success() => VerifyOutcome::Passed,
        Outcome::Exited(status) => match (status.code(), status.signal()) {
            (Some(code @ (126 | 127)), _) if shell_could_not_run(&run.output) => {
                VerifyOutcome::CouldNotStart {
                    reason: format!("{} (exit status {code})", last_line(&run.output)),
                }
            }
            (Some(code), _) => VerifyOutcome::Failed {
                exit: ExitReason::Code(code),
            },
            (None, Some(signal)) => VerifyOutcome::Failed {
                exit: ExitReason::Signal(signal),
            },
            (None, None) => VerifyOutcome::Failed {
                exit: ExitReason::Code(-1),
            },
        },
        Outcome::TimedOut => VerifyOutcome::TimedOut {
            after_s: spec.timeout.as_secs(),
        },
        Outcome::Cancelled => VerifyOutcome::Cancelled,
    };
    let failures = parse_failures(&run.output).map(|mut report| {
        report.output_cut = run.truncated;
        report
    });
    finish(
        outcome,
        truncate_middle(&run.output, KEPT_OUTPUT_CHARS),
        failures,
    )
}

/// True when the output ends with the shell's own "command not found" / "Permission denied"
/// message (exit 127 / 126 then comes from the shell, not from a test).
fn shell_could_not_run(output: &str) -> bool {
    let last = last_line(output);
    last.ends_with("command not found")
        || last.ends_with(": not found")
        || last.ends_with("No such file or directory")
        || last.ends_with("Permission denied")
}

fn last_line(output: &str) -> &str {
    output.trim_end().lines().last().unwrap_or("").trim()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> BTreeMap<String, String> {
        BTreeMap::new()
    }

    #[tokio::test]
    async fn precheck_finds_programs_and_names_the_missing_one() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir(d.join("sub")).unwrap();
        let script = d.join("sub/run.sh");
        std::fs::write(&script, "#!/bin/sh\nexit 0\n").unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(d.join("plain.txt"), "x").unwrap();
        for ok in [
            "true",
            "sh -c 'exit 0'",
            "bash -c \"cd sub && ./run.sh\"",
            "cd sub && ./run.sh",
            "timeout 5 env A=1 sh -c 'exit 0'",
            "FOO=1 sh -c true",
            "$RUNNER test",
            "python3 -m unittest",
        ] {
            precheck(ok, d, &env())
                .await
                .unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        for (bad, why) in [
            ("no-such-tool-xyz test", "no-such-tool-xyz is not on PATH"),
            (
                "bash -c 'no-such-tool-xyz --all'",
                "no-such-tool-xyz is not on PATH",
            ),
            (
                "timeout 5 no-such-tool-xyz",
                "no-such-tool-xyz is not on PATH",
            ),
            ("./missing.sh", "./missing.sh does not exist"),
            ("./plain.txt", "plain.txt is not an executable file"),
            (
                "python3 -m no_such_module_xyz -q",
                "`no_such_module_xyz` is not installed",
            ),
            ("  ", "the command is empty"),
        ] {
            let err = precheck(bad, d, &env()).await.unwrap_err().to_string();
            assert!(err.contains(why), "{bad}: {err}");
            assert!(
                err.starts_with(&format!("verify command `{bad}` cannot start: ")),
                "{err}"
            );
            assert!(
                err.ends_with("(set [swarm] verify or pass --verify)"),
                "{err}"
            );
        }
        let err = precheck("true", &d.join("gone"), &env()).await.unwrap_err();
        assert!(err.to_string().contains("does not exist"), "{err}");
    }

    #[tokio::test]
    async fn precheck_uses_the_path_the_command_will_get() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let tool = bin.join("my-test-runner");
        std::fs::write(&tool, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut extra = BTreeMap::new();
        assert!(
            precheck("my-test-runner", dir.path(), &extra)
                .await
                .is_err()
        );
        extra.insert(
            "PATH".to_string(),
            format!("{}:/usr/bin:/bin", bin.display()),
        );
        precheck("my-test-runner", dir.path(), &extra)
            .await
            .unwrap();
    }
}
