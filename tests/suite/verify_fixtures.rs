//! The verification scenarios of `suite/support/pyproject.rs` replayed without the swarm: each
//! worker's scripted tool calls are carried out in its own git worktree, branches are merged
//! with git, every tree is verified with the real runner (`python3 -m unittest`), and fixers
//! and mergers are chosen the way the fake model chooses them — by conditions on the files in
//! their working directory. This proves the scripts and fixtures do what the end-to-end tests
//! rely on.

use super::support::TestRepo;
use super::support::git::git;
use super::support::pyproject::*;
use ahelper_agents::redact::Redactor;
use ahelper_agents::verify::baseline::{NewFailure, Verdict, compare};
use ahelper_agents::verify::run::{VerifyOutcome, VerifyRun, VerifySpec, run_verification};
use ahelper_fake_llm::{RequestFacts, Script, ToolCall};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

async fn verify_in(dir: &Path, timeout: Duration) -> VerifyRun {
    let cancel = CancellationToken::new();
    let env = BTreeMap::new();
    run_verification(&VerifySpec {
        command: UNITTEST,
        dir,
        timeout,
        sandbox: None,
        env: &env,
        redactor: &Redactor::default(),
        cancel: &cancel,
    })
    .await
}

async fn verify(dir: &Path) -> VerifyRun {
    verify_in(dir, Duration::from_secs(120)).await
}

/// A new worktree of `repo` at `dir.path()/wt/<name>` on a new branch `<name>` from `start`.
fn worktree(repo: &TestRepo, name: &str, start: &str) -> PathBuf {
    let path = repo.dir.path().join("wt").join(name);
    repo.git(&[
        "worktree",
        "add",
        "-q",
        "-b",
        name,
        path.to_str().unwrap(),
        start,
    ]);
    path
}

fn commit_all(dir: &Path, message: &str) {
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", message]);
}

/// Carries out one scripted tool call in `dir` (the subset the scenario scripts use).
fn apply(dir: &Path, call: &ToolCall) {
    let arg = |k: &str| call.arguments[k].as_str().unwrap().to_string();
    match call.name.as_str() {
        "write_file" => std::fs::write(dir.join(arg("path")), arg("content")).unwrap(),
        "run_command" => {
            let status = std::process::Command::new("bash")
                .arg("-c")
                .arg(arg("command"))
                .current_dir(dir)
                .status()
                .unwrap();
            assert!(status.success(), "{}", arg("command"));
        }
        other => panic!("the scenario scripts use write_file and run_command, not {other}"),
    }
}

/// Plays an agent's conversation in `dir` as the fake model would serve it: the conversation
/// is chosen at the first request (by `first_user` and the files in `dir`) and kept; each
/// turn's tool calls are carried out; `responses_before` model responses already happened
/// (for a fix round). Returns the conversation's name and the final text.
fn play(
    script: &Script,
    dir: &Path,
    first_user: &str,
    responses_before: usize,
) -> (String, String) {
    let mut pinned = None;
    let mut n = responses_before;
    loop {
        let facts = RequestFacts {
            texts: ["", first_user],
            tool_results: n,
            assistant_messages: n,
            workdir: Some(dir),
        };
        let selection = script.select(&facts, pinned).expect("a conversation fits");
        pinned = Some(selection.conversation);
        let name = script.conversations[selection.conversation]
            .name
            .clone()
            .unwrap_or_default();
        if selection.turn.tool_calls.is_empty() {
            return (name, selection.turn.text.unwrap_or_default());
        }
        for call in &selection.turn.tool_calls {
            apply(dir, call);
        }
        n += selection.turn.tool_calls.len();
        assert!(n < 20, "runaway conversation {name}");
    }
}

/// Runs worker `id` of `script` in a new worktree from `main` and commits its work.
fn run_worker(repo: &TestRepo, script: &Script, id: &str) -> PathBuf {
    let dir = worktree(repo, id, "main");
    let (name, _) = play(script, &dir, &format!("Your subtask `{id}`: …"), 0);
    assert_eq!(name, format!("worker {id}"));
    commit_all(&dir, id);
    dir
}

/// Merges `branch` in `dir`; true when it merged without conflict.
fn merge(dir: &Path, branch: &str) -> bool {
    std::process::Command::new("git")
        .args(["merge", "-q", "--no-edit", branch])
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap()
        .success()
}

fn new_test_names(verdict: &Verdict) -> Vec<String> {
    match verdict {
        Verdict::NewFailures {
            new: NewFailure::Tests { names },
            ..
        } => names.iter().map(ToString::to_string).collect(),
        other => panic!("expected new test failures, got {other:?}"),
    }
}

#[tokio::test]
async fn every_scenario_script_loads() {
    for name in SCRIPTS {
        let s = script(name);
        assert!(s.description.is_some(), "{name}");
        assert!(
            s.conversations
                .iter()
                .any(|c| c.name.as_deref() == Some("synthesis")),
            "{name}"
        );
    }
}

async fn semantic_candidate(script_name: &str) -> (TestRepo, Script, VerifyRun, PathBuf) {
    let repo = calc_repo();
    let s = script(script_name);
    let base = verify(&repo.path()).await;
    assert!(base.passed(), "{}", base.output);
    for id in ["rename", "report"] {
        let dir = run_worker(&repo, &s, id);
        let own = verify(&dir).await;
        assert_eq!(
            compare(Some(&base), &own),
            Verdict::Green,
            "{id}: {}",
            own.output
        );
    }
    let candidate = worktree(&repo, "candidate", "main");
    assert!(merge(&candidate, "rename"));
    assert_eq!(
        compare(Some(&base), &verify(&candidate).await),
        Verdict::Green
    );
    assert!(merge(&candidate, "report"), "no textual conflict");
    let red = verify(&candidate).await;
    let verdict = compare(Some(&base), &red);
    assert_eq!(
        new_test_names(&verdict),
        ["test_report.TestReport.test_total"]
    );
    assert!(
        red.output.contains("has no attribute 'add'"),
        "{}",
        red.output
    );
    (repo, s, base, candidate)
}

#[tokio::test]
async fn semantic_conflict_is_red_when_merged_and_the_fixer_makes_it_green() {
    let (_repo, s, base, candidate) = semantic_candidate("swarm-semantic-conflict").await;
    let (name, _) = play(
        &s,
        &candidate,
        "# Make the merged code pass verification",
        0,
    );
    assert_eq!(name, "fixer");
    assert_eq!(
        compare(Some(&base), &verify(&candidate).await),
        Verdict::Green
    );
}

#[tokio::test]
async fn semantic_conflict_with_a_failing_fixer_stays_red() {
    let (_repo, s, base, candidate) =
        semantic_candidate("swarm-semantic-conflict-fixer-fails").await;
    for attempt in 1..=2 {
        let (name, _) = play(&s, &candidate, &format!("attempt {attempt}"), 0);
        assert_eq!(name, "fixer");
        assert!(compare(Some(&base), &verify(&candidate).await).blocks_merge());
    }
}

#[tokio::test]
async fn textual_conflict_is_resolved_by_the_merger_and_verifies() {
    let repo = calc_repo();
    let s = script("swarm-textual-conflict");
    let base = verify(&repo.path()).await;
    for id in ["mul", "sub"] {
        let dir = run_worker(&repo, &s, id);
        assert!(verify(&dir).await.passed());
    }
    let candidate = worktree(&repo, "candidate", "main");
    assert!(merge(&candidate, "mul"));
    assert!(!merge(&candidate, "sub"), "calc.py conflicts");
    assert!(
        std::fs::read_to_string(candidate.join("calc.py"))
            .unwrap()
            .contains("<<<<<<<")
    );
    let (name, _) = play(&s, &candidate, "# Resolve a merge conflict", 0);
    assert_eq!(name, "merger");
    let calc = std::fs::read_to_string(candidate.join("calc.py")).unwrap();
    assert!(!calc.contains("<<<<<<<") && calc.contains("def mul") && calc.contains("def sub"));
    commit_all(&candidate, "merge sub");
    assert_eq!(
        compare(Some(&base), &verify(&candidate).await),
        Verdict::Green
    );
}

#[tokio::test]
async fn a_test_failing_at_the_base_is_pre_existing() {
    let repo = calc_repo_failing_at_base();
    let s = script("swarm-failing-at-base");
    let base = verify(&repo.path()).await;
    assert!(!base.passed());
    let dir = run_worker(&repo, &s, "stats");
    let verdict = compare(Some(&base), &verify(&dir).await);
    assert!(!verdict.blocks_merge(), "{verdict:?}");
    assert_eq!(
        verdict.render(UNITTEST),
        format!("{UNITTEST} passed (1 failure already at the base: {TEST_LEGACY_NAME})")
    );
}

#[tokio::test]
async fn a_hanging_test_times_out_and_its_fixer_is_chosen_by_disk() {
    let repo = calc_repo();
    let s = script("swarm-hanging-test");
    let base = verify(&repo.path()).await;
    let slow = run_worker(&repo, &s, "slow");
    let run = verify_in(&slow, Duration::from_secs(2)).await;
    assert_eq!(run.outcome, VerifyOutcome::TimedOut { after_s: 2 });
    assert!(matches!(
        compare(Some(&base), &run),
        Verdict::NewFailures {
            new: NewFailure::TimedOut { .. },
            ..
        }
    ));
    let stats = run_worker(&repo, &s, "stats");
    assert!(verify(&stats).await.passed());
    let candidate = worktree(&repo, "candidate", "slow");
    assert_eq!(play(&s, &candidate, "fix", 0).0, "fixer");
}

/// The first user message of the worker of subtask `rename`.
const RENAME_USER: &str = "Your subtask `rename`: …";

/// The self-fix scenarios' world: the calc repository, the scenario `script_name`, its
/// verification at the base, and worktree `rename` on a new branch from `main`.
async fn renaming(script_name: &str) -> (TestRepo, Script, VerifyRun, PathBuf) {
    let repo = calc_repo();
    let s = script(script_name);
    let base = verify(&repo.path()).await;
    let dir = worktree(&repo, "rename", "main");
    (repo, s, base, dir)
}

#[tokio::test]
async fn the_self_fixing_worker_fixes_its_tests_in_the_first_round() {
    let (_repo, s, base, dir) = renaming("swarm-worker-self-fix").await;
    let first_user = RENAME_USER;
    let (_, text) = play(&s, &dir, first_user, 0);
    assert_eq!(text, "Renamed calc.add to calc.plus in calc.py.");
    let red = compare(Some(&base), &verify(&dir).await);
    assert_eq!(
        new_test_names(&red),
        [
            "test_calc.TestCalc.test_add",
            "test_calc.TestCalc.test_add_negative"
        ]
    );
    // Fix round 1: the request carries two model responses so far.
    let (_, text) = play(&s, &dir, first_user, 2);
    assert_eq!(text, "test_calc.py now calls calc.plus.");
    assert_eq!(compare(Some(&base), &verify(&dir).await), Verdict::Green);
}

#[tokio::test]
async fn the_exhausted_worker_never_fixes_its_tests() {
    let (_repo, s, base, dir) = renaming("swarm-worker-self-fix-exhausted").await;
    let first_user = RENAME_USER;
    play(&s, &dir, first_user, 0);
    for _round in 1..=2 {
        // The request of a fix round has the same single tool result: the last turn replays.
        let (_, text) = play(&s, &dir, first_user, 1);
        assert_eq!(text, "Renamed calc.add to calc.plus in calc.py.");
        assert!(compare(Some(&base), &verify(&dir).await).blocks_merge());
    }
}

#[test]
fn the_verify_config_fixture_writes_a_valid_config() {
    let repo = calc_repo();
    write_verify_config(&repo, HANGING_VERIFY, 1);
    let text = repo.file(".ahelper/config.toml");
    let parsed =
        ahelper_agents::config::ConfigFile::parse(&text, Path::new("config.toml")).unwrap();
    assert_eq!(parsed.swarm.verify.as_deref(), Some(HANGING_VERIFY));
    assert_eq!(parsed.swarm.verify_timeout_s, Some(1));
}
