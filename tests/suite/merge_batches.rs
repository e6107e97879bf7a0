//! End-to-end tests of the batched merge queue (issue 28): the built binary, the fake model
//! playing `tests/data/swarm-batch.json` (three one-file subtasks that become ready to merge
//! together), the real `python3 -m unittest` behind a verification command that logs where it
//! ran to a file outside the repository, so the tests count verification runs.

use super::support::pyproject::*;
use super::support::wait::wait_for;
use super::support::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Writes the verification config: `prefix` (shell, may be empty) then `python3 -m unittest`,
/// each run first appending the name of the directory it runs in to `<temp>/verify.log`
/// (writable in the sandbox), no fix rounds or fixers. The log's path.
fn counted_verify(repo: &TestRepo, prefix: &str) -> PathBuf {
    counted_verify_of(repo, &format!("{prefix}{UNITTEST}"))
}

/// [`counted_verify`] with the command `verify` after the logging.
fn counted_verify_of(repo: &TestRepo, verify: &str) -> PathBuf {
    let log = repo.dir.path().join("logs").join("verify.log");
    std::fs::create_dir_all(log.parent().unwrap()).unwrap();
    let command = format!("basename \"$PWD\" >> {log}; {verify}", log = log.display());
    repo.write(
        ".ahelper/config.toml",
        &format!(
            "[swarm]\nverify = {command:?}\nverify_timeout_s = 120\nworker_fix_rounds = 0\nmerge_fix_attempts = 0\n\n[sandbox]\nwritable = [{dir:?}]\n",
            dir = log.parent().unwrap().display().to_string()
        ),
    );
    log
}

/// Runs `ahelper swarm --trust-project "do the task"` with the `swarm-batch` scenario;
/// (exit code, stdout and stderr, the run's record).
fn run_batch(repo: &TestRepo, extra: &[&str]) -> (i32, String, Value) {
    run_scenario(repo, "swarm-batch", extra)
}

/// Runs `ahelper swarm --trust-project "do the task"` with the scenario `name`; (exit code,
/// stdout and stderr, the run's record).
fn run_scenario(repo: &TestRepo, name: &str, extra: &[&str]) -> (i32, String, Value) {
    let server = start(script(name));
    let (code, stdout, stderr) = outcome_of(
        ahelper(repo, &server, Wire::Anthropic)
            .args(["swarm", "--trust-project", "do the task", "--yes"])
            .args(["--permission-mode", "bypass"])
            .args(extra)
            .timeout(std::time::Duration::from_secs(300)),
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    (code, format!("{stdout}\n{stderr}"), last_run(repo))
}

/// Verification runs in the merge queue's verification worktrees (`verify`, `verify-2`, …),
/// the baseline included.
fn queue_runs(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| *l == "verify" || l.starts_with("verify-"))
        .count()
}

fn all_merged(run: &Value) {
    for id in ["w1", "w2", "w3"] {
        assert_eq!(worker_record(run, id)["status"], "merged", "{id}: {run:#}");
    }
}

#[test]
fn a_batch_of_green_branches_merges_with_one_verification() {
    let repo = calc_repo();
    let log = counted_verify(&repo, "");
    let (code, out, run) = run_batch(&repo, &[]);
    assert_eq!(code, 0, "{out}");
    all_merged(&run);
    // the baseline, then one verification of the batch (serially: one per worker)
    assert_eq!(
        queue_runs(&log),
        2,
        "{}",
        std::fs::read_to_string(&log).unwrap()
    );
    // one merge commit per worker (the first, on the base, is a fast-forward), so history
    // says who brought what
    let integration = run["integration_branch"].as_str().unwrap();
    let merges = repo.git(&["log", "--merges", "--format=%s", integration]);
    for id in ["w2", "w3"] {
        assert!(merges.contains(&format!("Merge {id} ")), "{merges}");
    }
    for file in ["a.py", "b.py", "c.py"] {
        repo.git(&["cat-file", "-e", &format!("{integration}:{file}")]);
    }
}

#[test]
fn a_fast_forward_onto_a_self_checked_commit_reuses_its_verdict() {
    let repo = calc_repo();
    let log = counted_verify(&repo, "");
    // One worker at a time: `a` alone is ready first and merges as a fast-forward onto its
    // own self-checked commit; the verdict cache answers for that tree.
    let (code, out, run) = run_batch(&repo, &["--max-workers", "1"]);
    assert_eq!(code, 0, "{out}");
    all_merged(&run);
    let text = std::fs::read_to_string(&log).unwrap();
    // the baseline, no run for w1's fast-forward, one each for w2's and w3's merges
    assert_eq!(queue_runs(&log), 3, "{text}");
}

#[test]
fn a_batch_red_once_while_each_part_passes_is_named_flaky() {
    let repo = calc_repo();
    let dir = repo.dir.path().join("logs");
    // Red exactly once, on the first tree that has all three files.
    let prefix = format!(
        "if [ -f a.py ] && [ -f b.py ] && [ -f c.py ] && [ ! -e {flag} ]; then touch {flag}; exit 1; fi; ",
        flag = dir.join("flaked").display()
    );
    let log = counted_verify(&repo, &prefix);
    let (code, out, run) = run_batch(&repo, &[]);
    assert_eq!(code, 0, "{out}");
    all_merged(&run);
    assert_eq!(run["flaky_verifications"][0], "w1+w2+w3", "{run:#}");
    assert!(
        out.contains("flaky verification (failed on a batch, passed on retry): w1+w2+w3"),
        "{out}"
    );
    assert!(queue_runs(&log) >= 3);
}

#[test]
fn a_semantic_conflict_inside_a_batch_leaves_only_the_culprit_out() {
    let repo = calc_repo();
    counted_verify(&repo, "");
    let (code, out, run) = run_scenario(&repo, "swarm-batch-semantic-conflict", &[]);
    assert_eq!(code, 1, "{out}");
    assert_eq!(worker_record(&run, "w1")["status"], "merged", "{run:#}");
    assert_eq!(
        worker_record(&run, "w2")["status"],
        "verify_failed",
        "{run:#}"
    );
    assert_eq!(worker_record(&run, "w3")["status"], "merged", "{run:#}");
    assert!(
        out.contains("[w2] isolated as the culprit of batch w1+w2+w3"),
        "{out}"
    );
    // the integration branch passes: the culprit is not in it, its branch is kept
    let integration = run["integration_branch"].as_str().unwrap();
    let files = repo.git(&["ls-tree", "--name-only", integration]);
    assert!(
        files.contains("notes.py") && !files.contains("report.py"),
        "{files}"
    );
    let branch = worker_record(&run, "w2")["branch"]
        .as_str()
        .unwrap()
        .to_string();
    repo.git(&["rev-parse", "--verify", &branch]);
    assert!(run["flaky_verifications"].is_null(), "{run:#}");
    // the isolation used a second verification worktree; `swarm clean` removes it too
    let worktrees = repo.git(&["worktree", "list"]);
    assert!(worktrees.contains("/verify-2 "), "{worktrees}");
    let server = start(script("swarm-batch-semantic-conflict"));
    let id = run["run_id"].as_str().unwrap();
    ahelper(&repo, &server, Wire::Anthropic)
        .args(["swarm", "clean", id, "--force"])
        .assert()
        .success();
    let worktrees = repo.git(&["worktree", "list"]);
    assert!(!worktrees.contains("verify"), "{worktrees}");
}

/// Subjects of the integration branch's commits naming `id`'s merge or work.
fn merges_of(repo: &TestRepo, integration: &str, id: &str) -> usize {
    repo.git(&["log", "--format=%s", integration])
        .lines()
        .filter(|l| l.starts_with(&format!("Merge {id} ")))
        .count()
}

#[test]
fn kill_9_while_isolating_a_culprit_then_resume_merges_each_worker_once() {
    let repo = calc_repo();
    let dir = repo.dir.path().join("logs");
    // In the queue's worktrees: the first tree with report.py and without notes.py (the
    // split's prefix w1+w2) runs at once; the second (the culprit's retry, after w1 merged)
    // writes `retrying` and hangs, and the run is killed there.
    let (seen, retrying) = (dir.join("seen"), dir.join("retrying"));
    let prefix = format!(
        "case \"$(basename \"$PWD\")\" in verify*) if [ -f report.py ] && [ ! -f notes.py ]; then \
         if [ -e {seen} ]; then [ -e {retrying} ] || {{ touch {retrying}; sleep 20; }}; \
         else touch {seen}; fi; fi;; esac; ",
        seen = seen.display(),
        retrying = retrying.display()
    );
    counted_verify(&repo, &prefix);
    let server = start(script("swarm-batch-semantic-conflict"));
    let mut child = ahelper_process(&repo, &server, Wire::Anthropic)
        .args(["swarm", "--trust-project", "do the task", "--yes"])
        .args(["--permission-mode", "bypass"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_for(
        "the culprit's retry",
        std::time::Duration::from_secs(120),
        || retrying.exists(),
    );
    child.kill().unwrap(); // SIGKILL, mid-isolation: w1 is in the integration branch already
    child.wait().unwrap();
    let run = last_run(&repo);
    let integration = run["integration_branch"].as_str().unwrap().to_string();
    let w1_commit = worker_record(&run, "w1")["report"]["commit"]
        .as_str()
        .unwrap()
        .to_string();
    repo.git(&["merge-base", "--is-ancestor", &w1_commit, &integration]);
    let id = run["run_id"].as_str().unwrap().to_string();
    let (code, stdout, stderr) = outcome_of(
        ahelper(&repo, &server, Wire::Anthropic)
            .args(["swarm", "resume", &id, "--trust-project"])
            .timeout(std::time::Duration::from_secs(300)),
    );
    assert_eq!(code, 1, "{stdout}\n{stderr}");
    let run = last_run(&repo);
    assert_eq!(worker_record(&run, "w1")["status"], "merged", "{run:#}");
    assert_eq!(
        worker_record(&run, "w2")["status"],
        "verify_failed",
        "{run:#}"
    );
    assert_eq!(worker_record(&run, "w3")["status"], "merged", "{run:#}");
    // nothing merged twice: w1's commit once, w3's merge once, w2 not at all
    let w1_subject = repo.git(&["log", "-1", "--format=%s", &w1_commit]);
    let log = repo.git(&["log", "--format=%s", &integration]);
    assert_eq!(
        log.lines().filter(|l| *l == w1_subject.trim()).count(),
        1,
        "{log}"
    );
    assert_eq!(merges_of(&repo, &integration, "w3"), 1, "{log}");
    assert_eq!(merges_of(&repo, &integration, "w2"), 0, "{log}");
}

#[test]
fn a_distributed_run_merges_through_the_same_batched_queue() {
    use super::support::nats::{NatsServer, WorkerProcess, repo_with_remote};
    use super::support::scripts::{done, plan_files, was_here, worker};
    let nats = NatsServer::start();
    let repo = repo_with_remote(&[("a.txt", "a\n"), ("b.txt", "b\n"), ("c.txt", "c\n")]);
    let log = counted_verify_of(&repo, "test -f a.txt");
    let files = [("s1", "a.txt"), ("s2", "b.txt"), ("s3", "c.txt")];
    // s1, first in the plan, answers 1.5 s late: the three are ready to merge together.
    let script = files
        .iter()
        .fold(plan_files(&files.map(|(_, f)| f)), |s, (id, file)| {
            let delay = if *id == "s1" { 1_500 } else { 0 };
            let first = was_here(id, file).with_delay_ms(delay);
            s.with_conversation(worker(id, vec![first, done(id)]))
        });
    let server = start(script);
    let mut m1 = WorkerProcess::start(&nats.url(), "m1", &server.base_url(), 3);
    let (code, stdout, stderr) = outcome_of(
        ahelper(&repo, &server, Wire::Anthropic)
            .args(["swarm", "--trust-project", "change three files", "--yes"])
            .args(["--permission-mode", "bypass", "--nats", &nats.url()])
            .timeout(std::time::Duration::from_secs(300)),
    );
    assert_eq!(code, 0, "{stdout}\n{stderr}\nworker:\n{}", m1.log());
    let run = last_run(&repo);
    all_merged(&run);
    let text = std::fs::read_to_string(&log).unwrap();
    // the baseline and at most two batches (one verification per worker before)
    let runs = queue_runs(&log);
    assert!((2..=3).contains(&runs), "{text}");
    assert!(worker_record(&run, "w1")["machine"] == "m1", "{run:#}");
    m1.signal("TERM");
    m1.wait_exit(std::time::Duration::from_secs(60));
}
