//! The verification runner through its real path: `bash -c` children in temporary project
//! directories (a tiny Python project tested with the standard library's unittest), process
//! groups killed at the time limit, the landlock sandbox where the kernel has it.

use super::support::process::{read_pid, wait_dead};
use ahelper_agents::redact::Redactor;
use ahelper_agents::sandbox_os::{CommandSandbox, SandboxSettings, landlock_status};
use ahelper_agents::verify::baseline::{NewFailure, Verdict, compare};
use ahelper_agents::verify::run::{
    ExitReason, KEPT_OUTPUT_CHARS, VerifyOutcome, VerifyRun, VerifySpec, run_verification,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

const CALC: &str = "def add(a, b):\n    return a + b\n";

fn test_calc(extra: &str) -> String {
    format!(
        "import unittest\n\nimport calc\n\n\nclass TestCalc(unittest.TestCase):\n    \
         def test_add(self):\n        self.assertEqual(calc.add(2, 3), 5)\n\n    \
         def test_legacy(self):\n        self.assertEqual(calc.add(2, 2), 5)\n{extra}"
    )
}

fn project(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        std::fs::write(dir.path().join(path), text).unwrap();
    }
    dir
}

async fn verify_with(
    command: &str,
    dir: &Path,
    timeout: Duration,
    env: &BTreeMap<String, String>,
) -> VerifyRun {
    let cancel = CancellationToken::new();
    run_verification(&VerifySpec {
        command,
        dir,
        timeout,
        sandbox: None,
        env,
        redactor: &Redactor::default(),
        cancel: &cancel,
    })
    .await
}

async fn verify(command: &str, dir: &Path) -> VerifyRun {
    verify_with(command, dir, Duration::from_secs(60), &BTreeMap::new()).await
}

#[tokio::test]
async fn a_failing_base_and_a_candidate_are_compared_by_test_name() {
    let base_dir = project(&[("calc.py", CALC), ("test_calc.py", &test_calc(""))]);
    let base = verify("python3 -m unittest", base_dir.path()).await;
    assert_eq!(
        base.outcome,
        VerifyOutcome::Failed {
            exit: ExitReason::Code(1)
        },
        "{}",
        base.output
    );
    let names: Vec<String> = base
        .failures
        .as_ref()
        .unwrap()
        .failed
        .iter()
        .map(|t| t.to_string())
        .collect();
    assert_eq!(names, ["test_calc.TestCalc.test_legacy"]);

    // The same failure only: pre-existing, never blocks.
    let same_dir = project(&[("calc.py", CALC), ("test_calc.py", &test_calc(""))]);
    let same = verify("python3 -m unittest", same_dir.path()).await;
    let v = compare(Some(&base), &same);
    assert!(!v.blocks_merge(), "{v:?}");
    assert_eq!(
        v.render("python3 -m unittest"),
        "python3 -m unittest passed (1 failure already at the base: test_calc.TestCalc.test_legacy)"
    );

    // A semantic break: the candidate's report module calls a function that is gone.
    let report = "import calc\n\ndef total(xs):\n    return calc.plus(*xs)\n";
    let test_report = "import unittest\n\nimport report\n\n\nclass TestReport(unittest.TestCase):\n    \
                       def test_total(self):\n        self.assertEqual(report.total([1, 2]), 3)\n";
    let cand_dir = project(&[
        ("calc.py", CALC),
        ("test_calc.py", &test_calc("")),
        ("report.py", report),
        ("test_report.py", test_report),
    ]);
    let cand = verify("python3 -m unittest", cand_dir.path()).await;
    let v = compare(Some(&base), &cand);
    assert!(v.blocks_merge());
    match &v {
        Verdict::NewFailures {
            new: NewFailure::Tests { names },
            pre_existing,
            ..
        } => {
            assert_eq!(names.len(), 1);
            assert_eq!(names[0].name, "test_report.TestReport.test_total");
            assert_eq!(pre_existing.len(), 1);
        }
        other => panic!("{other:?}"),
    }
    assert!(
        cand.output.contains("has no attribute 'plus'"),
        "{}",
        cand.output
    );

    // Fixed: green.
    std::fs::write(
        cand_dir.path().join("calc.py"),
        format!("{CALC}\nplus = add\n"),
    )
    .unwrap();
    std::fs::write(
        cand_dir.path().join("test_calc.py"),
        test_calc("").replace("(2, 2), 5", "(2, 2), 4"),
    )
    .unwrap();
    let fixed = verify("python3 -m unittest", cand_dir.path()).await;
    assert_eq!(fixed.outcome, VerifyOutcome::Passed, "{}", fixed.output);
    assert_eq!(compare(Some(&base), &fixed), Verdict::Green);
}

#[tokio::test]
async fn a_hanging_command_is_killed_with_its_whole_process_group_at_the_time_limit() {
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let run = verify_with(
        "sh -c 'echo $$ > child.pid; exec sleep 300' & echo started; wait",
        dir.path(),
        Duration::from_millis(1500),
        &BTreeMap::new(),
    )
    .await;
    assert_eq!(run.outcome, VerifyOutcome::TimedOut { after_s: 1 });
    assert!(run.output.contains("started"), "{}", run.output);
    assert!(started.elapsed() < Duration::from_secs(30));
    assert!(
        wait_dead(
            read_pid(dir.path().join("child.pid")),
            Duration::from_secs(10)
        ),
        "the child survived"
    );
}

#[tokio::test]
async fn processes_left_behind_after_exit_are_killed() {
    let dir = tempfile::tempdir().unwrap();
    let run = verify("(sleep 300 & echo $! > bg.pid); echo done", dir.path()).await;
    assert_eq!(run.outcome, VerifyOutcome::Passed, "{}", run.output);
    assert!(
        wait_dead(read_pid(dir.path().join("bg.pid")), Duration::from_secs(10)),
        "the background process survived"
    );
}

/// Verification goes through `run_command`'s containment: a process that left the group
/// (`setsid`) is found by the command's marker and killed, `TMPDIR` is private to the run and
/// removed after it, and known secret values never reach the output.
#[tokio::test]
async fn verification_gets_run_commands_containment_and_redaction() {
    let dir = tempfile::tempdir().unwrap();
    let secret = "s3cr3t-value-0123456789";
    let redactor = Redactor::new([("DEPLOY_API_TOKEN", secret)]).unwrap();
    let cancel = CancellationToken::new();
    let command = format!(
        "setsid sleep 300 & echo $! > detached.pid; echo \"$TMPDIR\" > tmpdir.txt; \
         echo \"marker=${{AHELPER_CMD_ID:+set}}\"; echo 'token {secret}'"
    );
    let run = run_verification(&VerifySpec {
        command: &command,
        dir: dir.path(),
        timeout: Duration::from_secs(60),
        sandbox: None,
        env: &BTreeMap::new(),
        redactor: &redactor,
        cancel: &cancel,
    })
    .await;
    assert_eq!(run.outcome, VerifyOutcome::Passed, "{}", run.output);
    assert!(run.output.contains("marker=set"), "{}", run.output);
    assert!(
        run.output.contains("token [REDACTED:DEPLOY_API_TOKEN]") && !run.output.contains(secret),
        "{}",
        run.output
    );
    assert!(
        wait_dead(
            read_pid(dir.path().join("detached.pid")),
            Duration::from_secs(10)
        ),
        "the detached process survived"
    );
    let tmpdir = std::fs::read_to_string(dir.path().join("tmpdir.txt")).unwrap();
    let tmpdir = Path::new(tmpdir.trim());
    assert!(
        tmpdir.is_absolute() && tmpdir != Path::new("/tmp"),
        "{tmpdir:?}"
    );
    assert!(!tmpdir.exists(), "the private TMPDIR {tmpdir:?} was left");
}

#[tokio::test]
async fn commands_that_cannot_start_say_why() {
    let dir = tempfile::tempdir().unwrap();
    let run = verify("no-such-test-runner-xyz --all", dir.path()).await;
    match &run.outcome {
        VerifyOutcome::CouldNotStart { reason } => {
            assert!(
                reason.contains("no-such-test-runner-xyz is not on PATH"),
                "{reason}"
            )
        }
        other => panic!("{other:?}"),
    }
    // A program computed at run time passes the precheck; the shell's exit 127 says it.
    let run = verify("X=no-such-test-runner-xyz; $X", dir.path()).await;
    match &run.outcome {
        VerifyOutcome::CouldNotStart { reason } => {
            assert!(
                reason.contains("not found") && reason.contains("127"),
                "{reason}"
            )
        }
        other => panic!("{other:?}"),
    }
    // A test that exits 127 on its own is a failure, not a start problem.
    let run = verify("echo 'ran 3 tests'; exit 127", dir.path()).await;
    assert_eq!(
        run.outcome,
        VerifyOutcome::Failed {
            exit: ExitReason::Code(127)
        }
    );
}

#[tokio::test]
async fn cancellation_stops_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let cancel = CancellationToken::new();
    let canceller = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        canceller.cancel();
    });
    let env = BTreeMap::new();
    let run = run_verification(&VerifySpec {
        command: "sleep 300",
        dir: dir.path(),
        timeout: Duration::from_secs(600),
        sandbox: None,
        env: &env,
        redactor: &Redactor::default(),
        cancel: &cancel,
    })
    .await;
    assert_eq!(run.outcome, VerifyOutcome::Cancelled);
    assert!(run.duration_ms < 30_000);
}

#[tokio::test]
async fn output_is_capped_and_the_extra_environment_is_passed() {
    let dir = tempfile::tempdir().unwrap();
    let mut env = BTreeMap::new();
    env.insert("AHELPER_RUN_ID".to_string(), "run-42".to_string());
    let run = verify_with(
        "echo \"run $AHELPER_RUN_ID\"; seq 1 200000; echo last-line",
        dir.path(),
        Duration::from_secs(60),
        &env,
    )
    .await;
    assert_eq!(run.outcome, VerifyOutcome::Passed);
    assert!(
        run.output.starts_with("run run-42\n"),
        "{}",
        &run.output[..40]
    );
    assert!(run.output.trim_end().ends_with("last-line"));
    assert!(run.output.contains("characters cut from the middle"));
    assert!(run.output.chars().count() < KEPT_OUTPUT_CHARS + 200);
}

#[tokio::test]
async fn the_sandbox_confines_writes_to_the_worktree() {
    if landlock_status().abi().is_none() {
        eprintln!("note: skipping: no landlock on this kernel");
        return;
    }
    let temp = std::fs::canonicalize(std::env::temp_dir()).unwrap();
    let outside_root = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(&outside_root).unwrap();
    if std::fs::canonicalize(&outside_root)
        .unwrap()
        .starts_with(&temp)
    {
        eprintln!("note: skipping: no directory outside the temp dir");
        return;
    }
    let outside = tempfile::tempdir_in(&outside_root).unwrap();
    let worktree = tempfile::tempdir_in(&outside_root).unwrap();
    let settings = SandboxSettings::with_defaults(None);
    let base = CommandSandbox::new(&settings, outside.path());
    let sandbox = base.for_workspace(worktree.path());
    let target = outside.path().join("escaped.txt");
    let command = format!("echo in > inside.txt && echo out > {}", target.display());
    let cancel = CancellationToken::new();
    let env = BTreeMap::new();
    let run = run_verification(&VerifySpec {
        command: &command,
        dir: worktree.path(),
        timeout: Duration::from_secs(60),
        sandbox: Some(&sandbox),
        env: &env,
        redactor: &Redactor::default(),
        cancel: &cancel,
    })
    .await;
    assert!(
        matches!(run.outcome, VerifyOutcome::Failed { .. }),
        "{run:?}"
    );
    assert!(worktree.path().join("inside.txt").exists());
    assert!(!target.exists());
    assert!(run.output.contains("Permission denied"), "{}", run.output);
}

/// Verification commands run with the sandbox's memory limit, and the output the worker's fix
/// prompt quotes says when the command hit it (issue 29.5).
#[tokio::test]
async fn a_verify_command_over_the_memory_limit_is_told_so() {
    if landlock_status().abi().is_none() {
        eprintln!("note: skipping: no landlock on this kernel");
        return;
    }
    let dir = project(&[]);
    let mut settings = SandboxSettings::with_defaults(None);
    settings.limits.max_memory_mb = 128;
    let sandbox = CommandSandbox::new(&settings, dir.path());
    let cancel = CancellationToken::new();
    let env = BTreeMap::new();
    let run = run_verification(&VerifySpec {
        command: "python3 -c 'b = bytearray(256 << 20); print(\"allocated\")'",
        dir: dir.path(),
        timeout: Duration::from_secs(60),
        sandbox: Some(&sandbox),
        env: &env,
        redactor: &Redactor::default(),
        cancel: &cancel,
    })
    .await;
    assert!(!run.passed(), "{run:?}");
    assert!(
        run.output.contains("MemoryError")
            && run
                .output
                .contains("each process of a command may allocate at most 128 MiB"),
        "{}",
        run.output
    );
}
