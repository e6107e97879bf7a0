//! Failures a swarm run recovers from (issue 9 items 4 and 5): workers that failed after their
//! retries (the model server down mid-run) are retried by `swarm resume` from their branches,
//! `wip` commits kept (`--only-failed`, `--worker` choose which); a worker's worktree deleted by
//! hand is rebuilt from its branch, and `swarm clean` removes its stale git registration — only
//! the run's, never a user's other worktrees.

use super::support::*;
use ahelper_fake_llm::{Conversation, FakeLlm, Fault, FaultKind, Script, Turn};
use predicates::prelude::*;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

const COORDINATOR: &str = "You are the coordinator of a swarm";

/// Whether the model server answers the workers' second request (a working server) or keeps
/// failing it with HTTP 500 (an outage that outlasts every retry).
#[derive(Clone, Copy, PartialEq)]
enum Server {
    Down,
    Up,
}

/// A plan of one subtask per id (`s1` on `s1.txt`, …). Each worker writes its file, then — on a
/// working server — a second file `<id>-more.txt` and stops. The first write is `first`, so a
/// test can tell whether a resumed worker replayed it.
fn script(ids: &[&str], server: Server, first: &str) -> Script {
    script_where(ids, |_| server, first)
}

/// [`script`] with each worker's server chosen by `server_of(id)`.
fn script_where(ids: &[&str], server_of: impl Fn(&str) -> Server, first: &str) -> Script {
    let subtasks: Vec<Value> = ids
        .iter()
        .map(|id| {
            json!({"id": id, "title": format!("Work on {id}"), "instructions": format!("Do {id}."),
                          "scope": [format!("{id}.txt"), format!("{id}-more.txt")]})
        })
        .collect();
    let plan = json!({"summary": "split by file", "subtasks": subtasks});
    let mut script = Script::new().with_conversation(
        Conversation::new()
            .matching(COORDINATOR)
            .turn(Turn::text(plan.to_string())),
    );
    for id in ids {
        let second = match server_of(id) {
            Server::Up => write(&format!("{id}-more.txt"), "more\n"),
            Server::Down => {
                Turn::text("never").with_fault(Fault::new(FaultKind::Http500).times(100))
            }
        };
        script = script.with_conversation(
            Conversation::new()
                .named(*id)
                .matching(format!("Your subtask `{id}`"))
                .turn(write(&format!("{id}.txt"), first))
                .turn(second)
                .turn(Turn::text(format!("{id} done"))),
        );
    }
    script
}

fn write(path: &str, content: &str) -> Turn {
    Turn::tool_call("write_file", json!({"path": path, "content": content}))
}

/// A repository whose model requests are tried twice, 10 ms apart.
fn repo() -> TestRepo {
    let repo = repo_with(&[("README.md", "readme\n")]);
    repo.write(
        ".ahelper/config.toml",
        "[retry]\nmax_attempts = 2\nbase_delay_ms = 10\n",
    );
    repo
}

fn swarm(repo: &TestRepo, server: &FakeLlm, args: &[&str]) -> assert_cmd::Command {
    let mut cmd = ahelper(repo, server, Wire::Anthropic);
    cmd.arg("swarm")
        .args(args)
        .args(["--permission-mode", "bypass"]);
    cmd
}

fn status_of<'a>(run: &'a Value, id: &str) -> &'a str {
    worker_record(run, id)["status"].as_str().unwrap()
}

fn stdout(assert: &assert_cmd::assert::Assert) -> String {
    String::from_utf8(assert.get_output().stdout.clone()).unwrap()
}

/// Runs `ids` against a server that goes down after each worker's first write: exit 1, and
/// the run's id.
fn run_through_outage(repo: &TestRepo, ids: &[&str]) -> String {
    let down = start(script(ids, Server::Down, "first attempt\n"));
    let out = swarm(repo, &down, &["do it", "--yes"]).assert().code(1);
    let run = last_run(repo);
    let id = run["run_id"].as_str().unwrap().to_string();
    let summary = stdout(&out);
    for (i, w) in ["w1", "w2", "w3"].iter().take(ids.len()).enumerate() {
        assert_eq!(status_of(&run, w), "failed", "{summary}");
        // issue 9.9: the table's last action is the failure, not "waiting for the model"
        let action = run["workers"][i]["last_action"].as_str().unwrap();
        assert!(
            action.starts_with("failed: ") && action.contains("500"),
            "{action}"
        );
        assert!(
            summary.contains(&format!("{w} (branch ahelper/{id}/{w})")),
            "{summary}"
        );
    }
    assert!(
        summary.contains(&format!("Resume with: ahelper swarm resume {id}"))
            && summary.contains(&format!("ahelper swarm resume {id} --only-failed")),
        "{summary}"
    );
    let last = summary.trim_end().lines().last().unwrap();
    assert!(
        last.starts_with("Result: FAILED") && last.contains(&format!("ahelper swarm resume {id}")),
        "{summary}"
    );
    id
}

/// The file `path` on the run's integration branch.
fn integrated(repo: &TestRepo, run: &str, path: &str) -> String {
    repo.git(&["show", &format!("ahelper/{run}/integration:{path}")])
}

/// issue 9.5: workers that fail after their retries leave a resumable run (exit 1, the failed
/// workers and the resume command in the summary); `swarm resume` against a working server
/// retries them from their branches — their first write is not replayed, it comes from the
/// `wip` commit — and the run ends with everything merged.
#[test]
fn failed_workers_resume_from_their_branches_after_a_model_outage() {
    let repo = repo();
    let id = run_through_outage(&repo, &["s1", "s2"]);
    let wip = repo.git(&["log", "-1", "--format=%s", &format!("ahelper/{id}/w1")]);
    assert!(wip.starts_with("wip:"), "{wip}");

    let up = start(script(&["s1", "s2"], Server::Up, "replayed\n"));
    let out = swarm(&repo, &up, &["resume", &id]).assert().success();
    let err = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(err.contains("2 worker(s) to run (w1, w2)"), "{err}");
    let run = last_run(&repo);
    assert_eq!(run["status"], "finished");
    assert_eq!(status_of(&run, "w1"), "merged");
    assert_eq!(status_of(&run, "w2"), "merged");
    for s in ["s1", "s2"] {
        assert_eq!(
            integrated(&repo, &id, &format!("{s}.txt")),
            "first attempt\n"
        );
        assert_eq!(integrated(&repo, &id, &format!("{s}-more.txt")), "more\n");
    }
    swarm(&repo, &up, &["resume", &id])
        .assert()
        .success()
        .stderr(predicate::str::contains("nothing left to do"));
}

/// issue 9.5: `--worker w2` retries that worker only (the other failed one stays failed, and
/// `resume` still offers it); `--only-failed` retries the rest; a worker with nothing to retry
/// or an unknown one is refused with exit 2.
#[test]
fn resume_retries_the_chosen_failed_workers() {
    let repo = repo();
    let id = run_through_outage(&repo, &["s1", "s2", "s3"]);
    let up = start(script(&["s1", "s2", "s3"], Server::Up, "replayed\n"));

    swarm(&repo, &up, &["resume", &id, "--worker", "w2"])
        .assert()
        .code(1)
        .stdout(predicate::str::contains(format!(
            "Resume with: ahelper swarm resume {id}"
        )));
    let run = last_run(&repo);
    assert_eq!(status_of(&run, "w2"), "merged");
    assert_eq!(status_of(&run, "w1"), "failed");
    assert_eq!(status_of(&run, "w3"), "failed");

    swarm(&repo, &up, &["resume", &id, "--worker", "w2"])
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("worker w2 of run").and(predicate::str::contains("is merged")),
        );
    swarm(&repo, &up, &["resume", &id, "--worker", "w9"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("has no worker `w9`"));

    swarm(&repo, &up, &["resume", &id, "--only-failed"])
        .assert()
        .success()
        .stderr(predicate::str::contains("2 worker(s) to run (w1, w3)"));
    let run = last_run(&repo);
    for w in ["w1", "w2", "w3"] {
        assert_eq!(status_of(&run, w), "merged", "{w}");
    }
    assert_eq!(integrated(&repo, &id, "s3.txt"), "first attempt\n");
    swarm(&repo, &up, &["resume", &id, "--only-failed"])
        .assert()
        .success()
        .stderr(predicate::str::contains("no failed workers to retry"));
}

/// A user's own linked worktree, then its directory deleted: a stale registration that is not
/// ahelper's.
fn users_stale_worktree(repo: &TestRepo) -> PathBuf {
    let path = repo.root().join("users-worktree");
    repo.git(&[
        "worktree",
        "add",
        "-q",
        "-b",
        "users-branch",
        path.to_str().unwrap(),
    ]);
    std::fs::remove_dir_all(&path).unwrap();
    path
}

/// Whether `git worktree list` still has a registration at `path`.
fn registered(repo: &TestRepo, path: &Path) -> bool {
    repo.git(&["worktree", "list", "--porcelain"])
        .lines()
        .any(|l| l == format!("worktree {}", path.display()))
}

/// A failed run of one worker whose worktree was then deleted by hand (`rm -rf`); returns the
/// run id and the deleted worktree.
fn failed_run_with_deleted_worktree(repo: &TestRepo) -> (String, PathBuf) {
    let id = run_through_outage(repo, &["s1"]);
    let worktree = PathBuf::from(last_run(repo)["workers"][0]["worktree"].as_str().unwrap());
    assert!(registered(repo, &worktree));
    std::fs::remove_dir_all(&worktree).unwrap();
    (id, worktree)
}

/// A repository with a user's stale worktree (returned second) and a failed run (its id)
/// whose worker's worktree (returned last) was deleted by hand.
fn deleted_worktree_world() -> (TestRepo, PathBuf, String, PathBuf) {
    let repo = repo();
    let users = users_stale_worktree(&repo);
    let (id, worktree) = failed_run_with_deleted_worktree(&repo);
    (repo, users, id, worktree)
}

/// issue 9.4: `swarm resume` prunes the stale registration of a worktree deleted by hand (only
/// the run's: a user's stale worktree stays registered), rebuilds it from the worker's branch
/// — its `wip` commit included — and the worker finishes and merges.
#[test]
fn a_worktree_deleted_by_hand_is_rebuilt_from_its_branch() {
    let (repo, users, id, worktree) = deleted_worktree_world();
    let up = start(script(&["s1"], Server::Up, "replayed\n"));
    swarm(&repo, &up, &["resume", &id])
        .assert()
        .success()
        .stderr(predicate::str::contains(format!(
            "Worktree {} was deleted: pruned its git registration; it is rebuilt from branch ahelper/{id}/w1",
            worktree.display()
        )));
    let run = last_run(&repo);
    assert_eq!(status_of(&run, "w1"), "merged");
    assert_eq!(integrated(&repo, &id, "s1.txt"), "first attempt\n");
    assert_eq!(integrated(&repo, &id, "s1-more.txt"), "more\n");
    assert!(!registered(&repo, &worktree));
    assert!(
        registered(&repo, &users),
        "a user's worktree is never pruned"
    );
}

/// A failed worker whose branch was deleted by hand (`git update-ref -d`: git refuses `branch
/// -D` of a checked-out branch) while its worktree is kept: `swarm resume` makes the branch
/// again at the worktree's last commit (its `wip` commit, from the worktree's HEAD log, also
/// when it was deleted from inside the worktree) — or,
/// without that log, at the worker's start commit, the worktree's files kept — and says so;
/// the worker finishes and merges, nothing it wrote lost. It does not run again only to fail
/// at its commit.
#[test]
fn a_deleted_worker_branch_is_made_again_from_its_worktree() {
    // (HEAD log kept, deleted from inside the worktree)
    for (head_log_kept, from_inside) in [(true, false), (true, true), (false, false)] {
        let repo = repo();
        let id = run_through_outage(&repo, &["s1"]);
        let run = last_run(&repo);
        let worktree = PathBuf::from(run["workers"][0]["worktree"].as_str().unwrap());
        let branch = format!("ahelper/{id}/w1");
        let wip = repo.git(&["rev-parse", &branch]).trim().to_string();
        let deleting = ["update-ref", "-d", &format!("refs/heads/{branch}")];
        if from_inside {
            // The worktree's HEAD log then ends with an entry from the tip to zero.
            let mut args = vec!["-C", worktree.to_str().unwrap()];
            args.extend(deleting);
            repo.git(&args);
        } else {
            repo.git(&deleting);
        }
        let expected = if head_log_kept {
            format!("made again at {} (the last commit of worktree", &wip[..12])
        } else {
            let git_dir = repo.git(&["-C", worktree.to_str().unwrap(), "rev-parse", "--git-dir"]);
            std::fs::remove_file(Path::new(git_dir.trim()).join("logs/HEAD")).unwrap();
            let start = run["workers"][0]["start_commit"].as_str().unwrap();
            format!(
                "made again at {} (the worker's start commit; its files are kept in worktree",
                &start[..12]
            )
        };
        let up = start(script(&["s1"], Server::Up, "replayed\n"));
        swarm(&repo, &up, &["resume", &id])
            .assert()
            .success()
            .stderr(predicate::str::contains(format!(
                "Branch {branch} was deleted: {expected} {}).",
                worktree.display()
            )));
        let run = last_run(&repo);
        assert_eq!(status_of(&run, "w1"), "merged");
        assert_eq!(integrated(&repo, &id, "s1.txt"), "first attempt\n");
        assert_eq!(integrated(&repo, &id, "s1-more.txt"), "more\n");
    }
}

/// issue 9.4: `swarm clean` removes the stale registration of a worktree deleted by hand and
/// says so; it keeps the branch with the worker's unmerged `wip` commit (exit 1) until
/// `--force`, which finishes. A user's stale worktree stays registered.
#[test]
fn clean_removes_the_registration_of_a_deleted_worktree() {
    let (repo, users, id, worktree) = deleted_worktree_world();
    let down = start(script(&["s1"], Server::Down, "x\n"));
    let branch = format!("ahelper/{id}/w1");
    let out = swarm(&repo, &down, &["clean", &id]).assert().code(1);
    let text = stdout(&out);
    assert!(
        text.contains(&format!(
            "removed the git registration of worktree {} (its directory was already gone)",
            worktree.display()
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("kept branch {branch} (failed)")),
        "{text}"
    );
    assert!(!registered(&repo, &worktree));
    let out = swarm(&repo, &down, &["clean", &id, "--force"])
        .assert()
        .success();
    let text = stdout(&out);
    assert!(text.contains(&format!("deleted branch {branch}")), "{text}");
    assert!(repo.git(&["branch", "--list", &branch]).trim().is_empty());
    assert!(
        registered(&repo, &users),
        "a user's worktree is never pruned"
    );
}

/// `swarm resume` of a run whose integration branch was deleted after a worker merged into it
/// is refused with what to do: making the branch again at the base commit would drop the merge
/// and still end in "success".
#[test]
fn resume_refuses_a_run_whose_integration_branch_is_gone_after_merges() {
    let repo = repo();
    let down_for_s2 = |id: &str| if id == "s2" { Server::Down } else { Server::Up };
    let server = start(script_where(&["s1", "s2"], down_for_s2, "first\n"));
    swarm(&repo, &server, &["do it", "--yes"])
        .assert()
        .failure();
    let run = last_run(&repo);
    assert_eq!(run["workers"][0]["status"], "merged", "{run}");
    let id = run["run_id"].as_str().unwrap().to_string();
    let integration = run["integration_branch"].as_str().unwrap().to_string();
    repo.git(&["branch", "-D", &integration]);
    swarm(&repo, &server, &["resume", &id])
        .assert()
        .failure()
        .stderr(predicate::str::contains(format!(
            "the integration branch {integration} of run {id} is gone, but 1 worker(s) were merged into it"
        )));
    let branches = repo.git(&["branch", "--list", &integration]);
    assert!(branches.trim().is_empty(), "made again: {branches}");
}
