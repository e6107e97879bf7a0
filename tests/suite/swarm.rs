//! End-to-end tests of `ahelper swarm` against the fake LLM server on temporary git repositories.
//! Case ids S01… are the rows of `worktrees/tests/data/swarm.md`, P01… of
//! `agents/tests/data/paths.md`.

use super::support::config::write_user_config;
use super::support::sandbox::{Needs, require_sandbox};
use super::support::scripts::*;
use super::support::*;
use ahelper_fake_llm::{Conversation, FakeLlm, Fault, FaultKind, RecordedRequest, Script, Turn};
use predicates::prelude::*;
use serde_json::{Value, json};

/// A swarm test's world: a temporary repository and the fake LLM server playing a script.
struct Swarm {
    repo: TestRepo,
    server: FakeLlm,
}

impl Swarm {
    /// Serves `script` for `repo`.
    fn new(repo: TestRepo, script: Script) -> Swarm {
        Swarm {
            repo,
            server: start(script),
        }
    }

    /// `ahelper <args>` in the repository, talking to the fake server in the Anthropic format.
    fn ahelper(&self, args: &[&str]) -> assert_cmd::Command {
        let mut cmd = ahelper(&self.repo, &self.server, Wire::Anthropic);
        cmd.args(args);
        cmd
    }

    /// Runs `ahelper swarm <task> --yes --permission-mode bypass`, the run most tests make.
    fn run(&self, task: &str) -> assert_cmd::assert::Assert {
        self.ahelper(&["swarm", task, "--yes", "--permission-mode", "bypass"])
            .assert()
    }

    /// Runs `ahelper <args>`, asserts that it exits with code 1 (the run failed); (stdout,
    /// stderr).
    fn fails(&self, args: &[&str]) -> (String, String) {
        let (code, stdout, stderr) = outcome_of(&mut self.ahelper(args));
        assert_eq!(code, 1, "stdout:\n{stdout}\nstderr:\n{stderr}");
        (stdout, stderr)
    }

    /// `file` as the newest run's integration branch holds it.
    fn integrated(&self, file: &str) -> String {
        let run = self.last_run();
        let integration = run["integration_branch"]
            .as_str()
            .expect("an integration branch");
        self.repo.git(&["show", &format!("{integration}:{file}")])
    }

    /// The newest run record, `.ahelper/runs/<newest>/run.json`.
    fn last_run(&self) -> Value {
        last_run(&self.repo)
    }

    /// The model requests of conversation `index` of the script (0 is the coordinator, then
    /// the workers in the order they were added).
    fn requests_of(&self, index: usize) -> Vec<RecordedRequest> {
        self.server
            .model_requests()
            .into_iter()
            .filter(|r| r.conversation == Some(index))
            .collect()
    }
}

/// Asserts that the model received `text` in `request` (a tool result, an error, a reminder).
#[track_caller]
fn assert_told(request: &RecordedRequest, text: &str) {
    let body = request.body.to_string();
    assert!(
        body.contains(text),
        "the model was not told {text:?}: {body}"
    );
}

/// One subtask on `a.txt` whose worker writes `A` into it.
fn one_worker_writes_a() -> Script {
    plan(json!([subtask("s1", "a.txt")]))
        .with_conversation(worker("s1", [writes("a.txt", "A\n"), Turn::text("d")]))
}

/// `n` subtasks, `s<i>` on `f<i>.txt` for `i` in `1..=n`, the worker of each playing
/// `turns(i)`; the user's config lets the run have `max_workers` workers at once.
fn numbered_subtasks(
    repo: &TestRepo,
    n: usize,
    max_workers: usize,
    turns: impl Fn(usize) -> Vec<Turn>,
) -> Script {
    write_user_config(
        repo,
        &format!("[swarm]\nmax_workers = {max_workers}\nmax_subtasks = {n}\n"),
    );
    let subtasks: Vec<Value> = (1..=n)
        .map(|i| subtask(&format!("s{i}"), &format!("f{i}.txt")))
        .collect();
    (1..=n).fold(plan(json!(subtasks)), |script, i| {
        script.with_conversation(worker(&format!("s{i}"), turns(i)))
    })
}

fn worker_status(run: &Value, id: &str) -> String {
    worker_record(run, id)["status"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The error worker `id` of `run` reported (its report's `error`).
fn worker_error(run: &Value, id: &str) -> String {
    let error = &worker_record(run, id)["report"]["error"];
    error
        .as_str()
        .expect("the worker reported an error")
        .to_string()
}

/// (a) three subtasks on disjoint files: isolated worktrees, own cwd, all merged, user untouched.
#[test]
fn three_disjoint_subtasks_merge_into_the_integration_branch() {
    let repo = repo_with(&[
        ("a.txt", "a\n"),
        ("b.txt", "b\n"),
        ("c.txt", "c\n"),
        ("notes.md", "mine\n"),
    ]);
    // the user's own uncommitted work
    repo.write("notes.md", "mine, edited but not committed\n");
    repo.write("scratch.txt", "untracked\n");
    let mut script = plan(json!([
        subtask("s1", "a.txt"),
        subtask("s2", "b.txt"),
        subtask("s3", "c.txt"),
    ]));
    for (id, file) in [("s1", "a.txt"), ("s2", "b.txt"), ("s3", "c.txt")] {
        let where_ = format!("where-{id}.txt");
        let record_where = format!(
            "pwd > {where_}; git rev-parse --abbrev-ref HEAD >> {where_}; \
             echo $AHELPER_WORKER_ID >> {where_}"
        );
        script = script.with_conversation(worker(
            id,
            [
                runs(&record_where),
                writes(file, &format!("{id} was here\n")),
                Turn::text(format!("{id} done")).with_usage(100, 10),
            ],
        ));
    }
    let swarm = Swarm::new(repo, script);
    let repo = &swarm.repo;
    let head_before = repo.git(&["rev-parse", "HEAD"]);
    let out = swarm
        .run("change three files")
        .success()
        .get_output()
        .clone();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("merged"), "{stdout}");
    let run = swarm.last_run();
    assert_eq!(run["status"], "finished");
    let integration = run["integration_branch"].as_str().unwrap().to_string();
    let mut cwds = vec![];
    for (i, (id, file)) in [("s1", "a.txt"), ("s2", "b.txt"), ("s3", "c.txt")]
        .iter()
        .enumerate()
    {
        let w = format!("w{}", i + 1);
        assert_eq!(worker_status(&run, &w), "merged");
        assert_eq!(
            repo.git(&["show", &format!("{integration}:{file}")]),
            format!("{id} was here\n")
        );
        let where_ = repo.git(&["show", &format!("{integration}:where-{id}.txt")]);
        let lines: Vec<&str> = where_.lines().collect();
        // its own cwd: the worker's worktree, outside the user's checkout, on its own branch
        assert!(lines[0].ends_with(&format!("/{w}")), "{where_}");
        assert!(
            !lines[0].starts_with(repo.path().to_str().unwrap()),
            "worktree inside the checkout: {where_}"
        );
        assert_eq!(
            lines[1],
            format!("{}/{w}", integration.trim_end_matches("/integration"))
        );
        assert_eq!(lines[2], w);
        cwds.push(lines[0].to_string());
    }
    cwds.sort();
    cwds.dedup();
    assert_eq!(cwds.len(), 3, "three distinct worktrees");
    // nothing landed in the main checkout; the user's branch, HEAD and dirty files are untouched
    assert_eq!(repo.git(&["rev-parse", "HEAD"]), head_before);
    assert_eq!(
        repo.git(&["rev-parse", "--abbrev-ref", "HEAD"]).trim(),
        "main"
    );
    assert_eq!(repo.file("a.txt"), "a\n");
    assert_eq!(repo.file("notes.md"), "mine, edited but not committed\n");
    assert_eq!(repo.file("scratch.txt"), "untracked\n");
    for id in ["s1", "s2", "s3"] {
        assert!(!repo.path().join(format!("where-{id}.txt")).exists());
    }
    let status = repo.git(&["status", "--porcelain"]);
    assert_eq!(status, " M notes.md\n?? scratch.txt\n", "{status}");
    // merged workers' worktrees are removed; transcripts stay
    assert!(!std::path::Path::new(&cwds[0]).exists());
    let run_id = run["run_id"].as_str().unwrap();
    assert!(
        repo.path()
            .join(format!(".ahelper/runs/{run_id}/workers/w1.jsonl"))
            .exists()
    );
    // the dirty tree was announced
    assert!(String::from_utf8_lossy(&out.stderr).contains("uncommitted changes"));
}

/// (b) two workers change the same lines: the conflict is reported, both branches kept, the
/// clean one merged, and the summary says what to run.
#[test]
fn conflicting_workers_keep_both_branches_and_report_the_conflict() {
    let repo = repo_with(&[("README.md", "title\n"), ("a.txt", "a\n"), ("b.txt", "b\n")]);
    let script = plan_files(&["a.txt", "b.txt"])
        .with_conversation(worker(
            "s1",
            [
                runs("printf 'title by w1\\n' > README.md"),
                Turn::text("s1 done"),
            ],
        ))
        .with_conversation(worker(
            "s2",
            [
                runs("printf 'title by w2\\n' > README.md"),
                Turn::text("s2 done"),
            ],
        ));
    let swarm = Swarm::new(repo, script);
    let out = swarm.run("retitle").code(1).get_output().clone();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let run = swarm.last_run();
    let repo = &swarm.repo;
    assert_eq!(worker_status(&run, "w1"), "merged");
    assert_eq!(worker_status(&run, "w2"), "conflict");
    let w2 = &run["workers"][1];
    assert_eq!(w2["conflicts"][0]["path"], "README.md");
    assert_eq!(swarm.integrated("README.md"), "title by w1\n");
    // the conflicting branch is kept with its commit
    let branch = w2["branch"].as_str().unwrap();
    assert_eq!(
        repo.git(&["show", &format!("{branch}:README.md")]),
        "title by w2\n"
    );
    assert!(
        stdout.contains("Conflict: w2") && stdout.contains(&format!("git merge {branch}")),
        "{stdout}"
    );
}

/// Workers that finish while an earlier one in the plan still runs wait for it, then merge in
/// one pass in plan order: a conflict in that pass keeps both branches and records the file,
/// the workers before it and after it merge, and the integration branch holds what merging
/// them one at a time would.
#[test]
fn workers_merged_in_one_pass_keep_plan_order_and_a_conflict_in_it() {
    let repo = repo_with(&[
        ("README.md", "title\n"),
        ("a.txt", "a\n"),
        ("b.txt", "b\n"),
        ("c.txt", "c\n"),
        ("d.txt", "d\n"),
    ]);
    repo.write(
        ".ahelper/config.toml",
        "[swarm]\nmax_workers = 4\nmerge_fix_attempts = 0\n",
    );
    let retitles = |id: &str| {
        worker(
            id,
            [
                runs(&format!("printf 'title by {id}\\n' > README.md")),
                done(id),
            ],
        )
    };
    // s1 answers last, so the others are ready before it and merge together after it.
    let script = plan_files(&["a.txt", "b.txt", "c.txt", "d.txt"])
        .with_conversation(worker(
            "s1",
            [writes("a.txt", "A\n"), done("s1").with_delay_ms(300)],
        ))
        .with_conversation(retitles("s2"))
        .with_conversation(retitles("s3"))
        .with_conversation(worker("s4", [writes("d.txt", "D\n"), done("s4")]));
    let swarm = Swarm::new(repo, script);
    swarm.run("retitle").code(1);
    let run = swarm.last_run();
    for (id, status) in [
        ("w1", "merged"),
        ("w2", "merged"),
        ("w3", "conflict"),
        ("w4", "merged"),
    ] {
        assert_eq!(worker_status(&run, id), status, "{id}: {run:#}");
    }
    let w3 = worker_record(&run, "w3");
    assert_eq!(w3["conflicts"][0]["path"], "README.md");
    let branch = w3["branch"].as_str().unwrap();
    assert_eq!(
        swarm.repo.git(&["show", &format!("{branch}:README.md")]),
        "title by s3\n",
        "the conflicting branch is kept"
    );
    for (file, content) in [
        ("a.txt", "A\n"),
        ("README.md", "title by s2\n"),
        ("c.txt", "c\n"),
        ("d.txt", "D\n"),
    ] {
        assert_eq!(swarm.integrated(file), content, "{file}");
    }
    // plan order: w1's commit comes before w2's merge, w2's before w4's
    let integration = run["integration_branch"].as_str().unwrap();
    let log = swarm
        .repo
        .git(&["log", "--format=%s", "--reverse", integration]);
    let at = |needle: &str| {
        log.find(needle)
            .unwrap_or_else(|| panic!("{needle}: {log}"))
    };
    assert!(at("Merge w2") < at("Merge w4"), "{log}");
}

/// (c) a worker whose model keeps failing is reported failed; the others finish.
#[test]
fn a_failing_worker_is_reported_and_the_others_finish() {
    let repo = repo_with(&[("a.txt", "a\n"), ("b.txt", "b\n")]);
    repo.write(
        ".ahelper/config.toml",
        "[retry]\nmax_attempts = 2\nbase_delay_ms = 10\n",
    );
    repo.git(&["add", "-A"]);
    let script = plan(json!([subtask("s1", "a.txt"), subtask("s2", "b.txt")]))
        .with_conversation(worker(
            "s1",
            [writes("a.txt", "A\n"), Turn::text("s1 done")],
        ))
        .with_conversation(worker(
            "s2",
            [Turn::text("never").with_fault(Fault::new(FaultKind::Http500).times(100))],
        ));
    let swarm = Swarm::new(repo, script);
    swarm.run("do it").code(1);
    let run = swarm.last_run();
    assert_eq!(worker_status(&run, "w1"), "merged");
    assert_eq!(worker_status(&run, "w2"), "failed");
    assert!(worker_error(&run, "w2").contains("500"), "{run:#}");
    assert_eq!(swarm.requests_of(2).len(), 2, "retried up to max_attempts");
}

/// (d) an invalid plan is re-asked once with the error; when the second answer is no plan
/// either, the whole task is offered as one worker, saying so (issue 34 item 4).
#[test]
fn an_invalid_plan_is_reasked_once_then_falls_back_to_the_whole_task() {
    let script = Script::new().with_conversation(Conversation::new().matching(COORDINATOR).turn(
        Turn::text("Here is the plan: {\"subtasks\": [{\"id\": \"s1\", \"title\": \"x\"}]}"),
    ));
    let swarm = Swarm::new(
        repo_with(&[("a.txt", "a\n")]),
        script.with_fallback_text("still not json"),
    );
    let (code, stdout, stderr) = outcome_of(&mut swarm.ahelper(&["swarm", "do it", "--plan-only"]));
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("fallback: the whole task as one verified worker"),
        "{stdout}\n{stderr}"
    );
    assert!(stderr.contains("[whole-task] do it"), "{stderr}");
    let requests = swarm.server.model_requests();
    assert_eq!(requests.len(), 2);
    assert!(
        requests[1]
            .body
            .to_string()
            .contains("Your plan was rejected"),
        "the error went back to the model"
    );
    assert_eq!(swarm.last_run()["status"], "planned");
}

/// (e) a permission request in a non-interactive run is denied at once, the model reads why.
#[test]
fn non_interactive_permission_request_is_denied_without_hanging() {
    let script = plan(json!([subtask("s1", "a.txt")])).with_conversation(worker(
        "s1",
        [
            writes("a.txt", "A\n"),
            Turn::text("I was not allowed to write."),
        ],
    ));
    let swarm = Swarm::new(repo_with(&[("a.txt", "a\n")]), script);
    let started = std::time::Instant::now();
    swarm
        .ahelper(&["swarm", "do it", "--yes"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains(
            "every edit or command a worker tries will be refused",
        ))
        .stdout(predicate::str::contains("[w1] refused write_file a.txt"))
        .stdout(predicate::str::contains(
            "1 tool call(s) refused by permissions: write_file a.txt",
        ));
    assert!(started.elapsed().as_secs() < 60);
    let run = swarm.last_run();
    assert_eq!(worker_status(&run, "w1"), "no_changes");
    let worker_req = &swarm.requests_of(1)[1];
    assert_told(worker_req, "non-interactive");
}

/// (f) `logs` shows every tool call of a worker after `clean` removed its worktree.
#[test]
fn logs_work_after_clean_and_clean_refuses_unmerged_branches() {
    let repo = repo_with(&[("README.md", "t\n"), ("a.txt", "a\n"), ("b.txt", "b\n")]);
    let script = plan(json!([subtask("s1", "a.txt"), subtask("s2", "b.txt")]))
        .with_conversation(worker(
            "s1",
            [
                Turn::tool_call("read_file", json!({"path": "a.txt"})),
                runs("printf 'x1\\n' > README.md"),
                Turn::text("s1 done"),
            ],
        ))
        .with_conversation(worker(
            "s2",
            [runs("printf 'x2\\n' > README.md"), Turn::text("s2 done")],
        ));
    let swarm = Swarm::new(repo, script);
    let repo = &swarm.repo;
    swarm.run("do it").code(1);
    let run = swarm.last_run();
    let run_id = run["run_id"].as_str().unwrap().to_string();
    let w2_worktree = run["workers"][1]["worktree"].as_str().unwrap().to_string();
    assert!(
        std::path::Path::new(&w2_worktree).exists(),
        "the conflicting worker's worktree is kept"
    );

    // ls and status
    swarm
        .ahelper(&["swarm", "ls"])
        .assert()
        .success()
        .stdout(predicate::str::contains(&run_id));
    swarm
        .ahelper(&["swarm", "status", &run_id[..8]])
        .assert()
        .success()
        .stdout(predicate::str::contains("conflict").and(predicate::str::contains("merged")));

    // clean: the conflicting branch has commits not in the integration branch → refused, listed
    swarm
        .ahelper(&["swarm", "clean", &run_id])
        .assert()
        .code(1)
        .stdout(predicate::str::contains("not in").and(predicate::str::contains("--force")));
    assert!(
        !std::path::Path::new(&w2_worktree).exists(),
        "worktree removed (its commit is on the branch)"
    );
    let branch = run["workers"][1]["branch"].as_str().unwrap();
    repo.git(&["rev-parse", "--verify", branch]);

    // logs still show every tool call of both workers
    for (w, calls) in [
        ("w1", vec!["read_file", "run_command"]),
        ("w2", vec!["run_command"]),
    ] {
        let out = swarm
            .ahelper(&["swarm", "logs", &run_id, w])
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        let text = String::from_utf8_lossy(&out);
        for c in calls {
            assert!(
                text.contains(&format!("→ {c}")),
                "{w} log lacks {c}:\n{text}"
            );
        }
    }
    // --json prints the raw lines
    let out = swarm
        .ahelper(&["swarm", "logs", &run_id, "w1", "--json"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    for line in String::from_utf8_lossy(&out).lines() {
        serde_json::from_str::<Value>(line).unwrap();
    }
    // --force deletes the unmerged branch
    swarm
        .ahelper(&["swarm", "clean", &run_id, "--force"])
        .assert()
        .success();
    assert!(
        std::process::Command::new("git")
            .args(["rev-parse", "--verify", branch])
            .current_dir(repo.path())
            .output()
            .unwrap()
            .status
            .code()
            != Some(0)
    );
}

/// (g) 16 subtasks with max_workers = 4 never run more than 4 at once.
#[test]
fn sixteen_subtasks_never_exceed_four_workers() {
    let repo = repo_with(&[("README.md", "x\n")]);
    let script = numbered_subtasks(&repo, 16, 4, |i| {
        vec![
            writes(&format!("f{i}.txt"), "x\n").with_delay_ms(150),
            Turn::text("done").with_delay_ms(150),
        ]
    });
    let swarm = Swarm::new(repo, script);
    swarm.run("sixteen files").success();
    let run = swarm.last_run();
    assert!(
        run["workers"]
            .as_array()
            .unwrap()
            .iter()
            .all(|w| w["status"] == "merged")
    );
    // intervals of each worker's model traffic: first request .. last request + its delay
    let mut intervals = vec![];
    for conv in 1..=16 {
        let times: Vec<_> = swarm.requests_of(conv).iter().map(|r| r.received).collect();
        assert_eq!(times.len(), 2);
        intervals.push((times[0], times[1] + std::time::Duration::from_millis(150)));
    }
    let mut max_overlap = 0;
    for (start, _) in &intervals {
        let overlap = intervals
            .iter()
            .filter(|(s, e)| s <= start && start < e)
            .count();
        max_overlap = max_overlap.max(overlap);
    }
    assert!(max_overlap <= 4, "{max_overlap} workers ran at once");
    assert!(
        max_overlap >= 2,
        "workers did run in parallel ({max_overlap})"
    );
}

#[test]
fn not_a_repo_and_no_commits_get_clear_messages() {
    let swarm = Swarm::new(TestRepo::empty(), Script::new());
    swarm
        .ahelper(&["swarm", "x", "--yes"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("not inside a git repository"));
    swarm.repo.git(&["init", "-q", "-b", "main"]);
    swarm
        .ahelper(&["swarm", "x", "--yes"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("no commits yet"));
}

#[test]
fn plan_only_prints_the_plan_and_starts_nothing() {
    let swarm = Swarm::new(
        repo_with(&[("a.txt", "a\n")]),
        plan(json!([subtask("s1", "a.txt")])),
    );
    swarm
        .ahelper(&["swarm", "x", "--plan-only"])
        .assert()
        .success()
        .stderr(predicate::str::contains("w1 [s1] Work on s1"));
    assert_eq!(swarm.server.model_requests().len(), 1);
    assert_eq!(swarm.last_run()["status"], "planned");
    assert_eq!(
        swarm.repo.git(&["branch", "--list", "ahelper/*"]),
        "",
        "no branch for a plan-only run"
    );
}

/// Waits (up to 60 s) until the first worker of the repository's run has written `name` (a
/// whole line) in its worktree; that file's path.
fn wait_for_worker_file(repo: &TestRepo, name: &str) -> std::path::PathBuf {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        assert!(
            std::time::Instant::now() < deadline,
            "the worker never wrote {name}"
        );
        if let Ok(entries) = std::fs::read_dir(repo.path().join(".ahelper/runs")) {
            let found = entries.flatten().find_map(|e| {
                let run: Value =
                    serde_json::from_str(&std::fs::read_to_string(e.path().join("run.json")).ok()?)
                        .ok()?;
                let wt = run["workers"][0]["worktree"].as_str()?.to_string();
                let p = std::path::Path::new(&wt).join(name);
                std::fs::read_to_string(&p)
                    .ok()
                    .filter(|s| s.ends_with('\n'))
                    .map(|_| p)
            });
            if let Some(p) = found {
                return p;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Whether a live (not zombie) process runs exactly `command_line` (arguments joined by
/// spaces).
fn command_running(command_line: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        String::from_utf8_lossy(&cmdline)
            .replace('\0', " ")
            .trim_end()
            == command_line
            && !stat.contains(") Z ")
    })
}

/// Ctrl-C once: workers stop, commit their work as `wip`, child processes are killed, the run
/// is resumable; `swarm resume` finishes it from the branch and transcript.
#[test]
fn ctrl_c_commits_wip_and_resume_finishes_the_run() {
    // `$$` is the shell's pid in its own PID namespace, not the host's: the command is found by
    // its unique argument instead.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let sleep_arg = format!("60.{}{}", std::process::id(), nanos % 1_000_000);
    let script = plan(json!([subtask("s1", "a.txt")])).with_conversation(worker(
        "s1",
        [
            writes("a.txt", "partial\n"),
            runs(&format!("echo $$ > sleeper.pid; exec sleep {sleep_arg}")),
            writes("a.txt", "complete\n"),
            Turn::text("s1 done"),
        ],
    ));
    let swarm = Swarm::new(repo_with(&[("a.txt", "a\n")]), script);
    let repo = &swarm.repo;
    let child = spawn_ahelper(
        repo,
        &swarm.server,
        &["swarm", "do it", "--yes", "--permission-mode", "bypass"],
    );
    let pid_file = wait_for_worker_file(repo, "sleeper.pid");
    assert!(std::fs::read_to_string(&pid_file).is_ok());
    let sleeper_alive = || command_running(&format!("sleep {sleep_arg}"));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !sleeper_alive() {
        assert!(
            std::time::Instant::now() < deadline,
            "the worker's command never ran"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let output = child.wait_with_output().unwrap();
    assert_eq!(
        output.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("Resume with: ahelper swarm resume"),
        "{stdout}"
    );
    // the child process group was killed
    std::thread::sleep(std::time::Duration::from_millis(200));
    assert!(!sleeper_alive(), "the worker's command survived Ctrl-C");
    let run = swarm.last_run();
    assert_eq!(run["status"], "cancelled");
    assert_eq!(worker_status(&run, "w1"), "cancelled");
    let branch = run["workers"][0]["branch"].as_str().unwrap().to_string();
    assert!(
        repo.git(&["log", "-1", "--format=%s", &branch])
            .starts_with("wip:")
    );
    assert_eq!(repo.git(&["show", &format!("{branch}:a.txt")]), "partial\n");

    // resume finishes it
    let run_id = run["run_id"].as_str().unwrap().to_string();
    swarm
        .ahelper(&["swarm", "resume", &run_id])
        .assert()
        .success()
        .stderr(predicate::str::contains("Using the run's permission mode"));
    let run = swarm.last_run();
    assert_eq!(run["status"], "finished");
    assert_eq!(worker_status(&run, "w1"), "merged");
    assert_eq!(swarm.integrated("a.txt"), "complete\n");
    // the resumed worker's model saw its earlier conversation
    let last = swarm.requests_of(1).pop().unwrap();
    assert_told(&last, "interrupted");
}

/// S17/P40: a worker that is handed an absolute path into the main checkout cannot edit it;
/// S20/S40: each worker writes only in its own worktree.
#[test]
fn a_worker_cannot_edit_the_main_checkout_by_absolute_or_relative_path() {
    let repo = repo_with(&[("src/a.rs", "fn a() {}\n"), ("b.txt", "b\n")]);
    let main_file = repo.path().join("src/a.rs").to_string_lossy().into_owned();
    let script = plan(json!([subtask("s1", "src/a.rs")])).with_conversation(worker(
        "s1",
        [
            Turn::tool_call(
                "edit_file",
                json!({"path": main_file, "old_string": "fn a", "new_string": "fn hacked"}),
            ),
            writes("../../../../../../../../../tmp/escape.txt", "x"),
            Turn::tool_call(
                "edit_file",
                json!({"path": "src/a.rs", "old_string": "fn a", "new_string": "fn renamed"}),
            ),
            Turn::text("done"),
        ],
    ));
    let swarm = Swarm::new(repo, script);
    let repo = &swarm.repo;
    swarm.run("rename").success();
    assert_eq!(
        repo.file("src/a.rs"),
        "fn a() {}\n",
        "the main checkout is untouched"
    );
    assert_eq!(repo.git(&["status", "--porcelain"]), "");
    assert_eq!(swarm.integrated("src/a.rs"), "fn renamed() {}\n");
    let reqs = swarm.requests_of(1);
    assert_told(&reqs[1], "outside the workspace");
    assert_told(&reqs[2], "outside the workspace");
}

/// S34: when a worktree cannot be created the worker fails — it never falls back to the
/// user's checkout.
#[test]
fn worktree_creation_failure_fails_the_worker_without_fallback() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let blocker = repo.home().join("not-a-dir");
    std::fs::write(&blocker, "a file where the worktree root should be").unwrap();
    repo.write(
        ".ahelper/config.toml",
        &format!("[swarm]\nworktree_root = \"{}\"\n", blocker.display()),
    );
    let swarm = Swarm::new(repo, one_worker_writes_a());
    let repo = &swarm.repo;
    swarm
        .ahelper(&["swarm", "x", "--yes", "--permission-mode", "bypass"])
        .arg("--trust-project")
        .assert()
        .code(1);
    let run = swarm.last_run();
    assert_eq!(worker_status(&run, "w1"), "failed");
    assert!(worker_error(&run, "w1").contains("worktree"), "{run:#}");
    assert_eq!(repo.file("a.txt"), "a\n");
    // planning and the coordinator's closing summary; the worker's model was never called
    assert_eq!(swarm.server.model_requests().len(), 2);
    assert!(
        swarm
            .server
            .model_requests()
            .iter()
            .all(|r| !r.body.to_string().contains("Your subtask `s1`")),
        "the worker's model was never called"
    );
}

/// S04: a second run gets fresh names and never reuses the first run's branches or worktrees.
#[test]
fn a_second_run_uses_its_own_names() {
    let swarm = Swarm::new(repo_with(&[("a.txt", "a\n")]), one_worker_writes_a());
    swarm.run("x").success();
    let first = swarm.last_run();
    swarm.run("x").success();
    let second = swarm.last_run();
    assert_ne!(first["run_id"], second["run_id"]);
    assert_ne!(first["integration_branch"], second["integration_branch"]);
    assert_ne!(
        first["workers"][0]["worktree"],
        second["workers"][0]["worktree"]
    );
    assert_eq!(worker_status(&second, "w1"), "merged");
}

/// A worker cannot write into the main checkout or another worker's worktree even
/// through a command the permission rules cannot see through (bypass mode allows it; the OS
/// sandbox refuses it).
#[test]
fn landlock_keeps_workers_out_of_the_main_checkout() {
    require_sandbox!(Needs::Landlock);
    let repo = repo_with(&[("a.txt", "a\n"), ("b.txt", "b\n")]);
    let target = repo.path().join("pwned.txt");
    let cmd = format!(
        "P='{}'; eval \"echo owned > $P\"; echo inside > mine.txt",
        target.display()
    );
    let script = plan(json!([subtask("s1", "a.txt")]))
        .with_conversation(worker("s1", [runs(&cmd), Turn::text("d")]));
    let swarm = Swarm::new(repo, script);
    swarm.run("x").success();
    assert!(!target.exists(), "a worker wrote into the main checkout");
    assert_eq!(swarm.integrated("mine.txt"), "inside\n");
    let reqs = swarm.requests_of(1);
    assert_told(&reqs[1], "Permission denied");
}

/// `--apply` merges the integration branch into the user's branch when it is clean.
#[test]
fn apply_merges_into_the_current_branch_when_clean() {
    let swarm = Swarm::new(repo_with(&[("a.txt", "a\n")]), one_worker_writes_a());
    let repo = &swarm.repo;
    swarm
        .ahelper(&["swarm", "x", "--yes", "--apply"])
        .args(["--permission-mode", "bypass"])
        .assert()
        .success()
        .stdout(predicate::str::contains("Applied"));
    assert_eq!(repo.file("a.txt"), "A\n");
    assert_eq!(
        repo.git(&["rev-parse", "--abbrev-ref", "HEAD"]).trim(),
        "main"
    );
    assert_eq!(repo.git(&["status", "--porcelain"]), "");
}

/// A second run on the same base while the first is active is refused with a clear message.
#[test]
fn a_run_already_active_on_the_same_base_is_refused() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let head = repo.git(&["rev-parse", "HEAD"]).trim().to_string();
    let run_dir = repo.path().join(".ahelper/runs/0000-active");
    std::fs::create_dir_all(&run_dir).unwrap();
    let record = json!({
        "run_id": "0000-active", "task": "t", "repo_root": repo.path(), "base_commit": head,
        "base_ref": "HEAD", "integration_branch": "ahelper/0000-active/integration",
        "status": "running", "created_at": "", "updated_at": "", "pid": std::process::id(),
        "plan": null, "workers": [], "usage": {"input_tokens": 0, "output_tokens": 0},
        "summary": null, "error": null
    });
    std::fs::write(run_dir.join("run.json"), record.to_string()).unwrap();
    let swarm = Swarm::new(repo, Script::new());
    swarm
        .ahelper(&["swarm", "x", "--yes"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("already active"));
    assert!(swarm.server.model_requests().is_empty());
}

/// Seen with a real small model: subtask 1 ("find the public functions") finished normally
/// without changing a file, and every subtask depending on it was skipped. A dependency that
/// completed with nothing to change is done; one stopped by a cap without changes is not.
#[test]
fn a_dependency_that_completed_without_changes_does_not_skip_its_dependents() {
    let repo = repo_with(&[("a.txt", "a\n"), ("b.txt", "b\n")]);
    let mut s2 = subtask("s2", "b.txt");
    s2["depends_on"] = json!(["s1"]);
    // two chains over their own files (overlapping scopes must be ordered by dependencies)
    let mut s4 = subtask("s4", "d.txt");
    s4["depends_on"] = json!(["s3"]);
    let script = plan(json!([
        subtask("s1", "a.txt"),
        s2,
        subtask("s3", "c.txt"),
        s4
    ]))
    .with_conversation(worker("s1", [Turn::text("a.txt needs no change")]))
    .with_conversation(worker(
        "s2",
        [writes("b.txt", "B\n"), Turn::text("s2 done")],
    ))
    // s3 keeps reading until its turn cap: stopped early, nothing changed.
    .with_conversation(worker(
        "s3",
        [
            Turn::tool_call("read_file", json!({"path": "a.txt"})),
            Turn::tool_call("list_dir", json!({"path": "."})),
            Turn::tool_call("read_file", json!({"path": "b.txt"})),
        ],
    ))
    .with_conversation(worker("s4", [Turn::text("never asked")]));
    repo.write(".ahelper/config.toml", "[swarm]\nworker_max_turns = 2\n");
    repo.git(&["add", "-A"]);
    let swarm = Swarm::new(repo, script);
    let repo = &swarm.repo;
    swarm
        .run("do it")
        .stdout(predicate::str::contains("elapsed 0.0s").not());
    let run = swarm.last_run();
    assert_eq!(worker_status(&run, "w1"), "no_changes");
    assert_eq!(worker_status(&run, "w2"), "merged");
    assert_eq!(worker_status(&run, "w3"), "no_changes");
    assert_eq!(worker_status(&run, "w4"), "skipped");
    assert_eq!(
        repo.git(&[
            "show",
            &format!("{}:b.txt", run["integration_branch"].as_str().unwrap())
        ]),
        "B\n"
    );
}

/// Seen with a real small model at `max_output_tokens = 512`: the plan was cut off at the limit
/// twice and the run said "no JSON plan found". The model is told the plan was cut off, and the
/// user how to fix it.
#[test]
fn a_plan_cut_off_by_the_output_token_limit_is_named_as_such() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    repo.write(".ahelper/config.toml", "max_output_tokens = 512\n");
    repo.git(&["add", "-A"]);
    let cut = "```json\n{\"summary\": \"s\", \"subtasks\": [{\"id\": \"1\", \"title\": \"Find\", \"instructions\": \"Use list_dir to";
    let script = Script::new().with_conversation(
        Conversation::new()
            .matching(COORDINATOR)
            .turn(Turn::text(cut).with_stop_reason("max_tokens"))
            .turn(Turn::text(cut).with_stop_reason("max_tokens")),
    );
    let swarm = Swarm::new(repo, script);
    let (_, stderr) = swarm.fails(&["swarm", "do it", "--yes"]);
    for said in [
        "cut off by the output-token limit (512 tokens)",
        "raise `max_output_tokens`",
    ] {
        assert!(stderr.contains(said), "{stderr}");
    }
    assert!(!stderr.contains("no JSON plan found"), "{stderr}");
    let requests = swarm.server.model_requests();
    assert_eq!(requests.len(), 2);
    let reask = requests[1].body.to_string();
    assert!(reask.contains("answer with a shorter plan"), "{reask}");
    assert_eq!(swarm.last_run()["status"], "failed");
}

/// Worker start-up from spare worktrees: six subtasks on two workers. The first workers
/// recycle the spares made while the coordinator planned, later ones the parked worktrees of
/// merged workers; each starts clean (a previous worker's ignored build output may stay, its
/// other files never do) on its own branch, and no spare is left when the run ends.
#[test]
fn recycled_worktrees_start_clean_on_their_own_branch_and_none_is_left() {
    let files: Vec<String> = (1..=6).map(|i| format!("f{i}.txt")).collect();
    let mut initial: Vec<(&str, &str)> = files.iter().map(|f| (f.as_str(), "0\n")).collect();
    initial.push((".gitignore", "build/\n"));
    let repo = repo_with(&initial);
    let script = numbered_subtasks(&repo, 6, 2, |i| {
        // What the worktree looked like when the worker got it, then its own build output
        // (ignored: it may stay warm for the next worker, never committed).
        let look = format!(
            "mkdir -p build; git status --porcelain > build/seen; \
             git rev-parse --abbrev-ref HEAD >> build/seen; cp build/seen seen-s{i}.txt; \
             echo s{i} > build/out"
        );
        vec![
            runs(&look),
            writes(&format!("f{i}.txt"), &format!("s{i}\n")),
            done(&format!("s{i}")),
        ]
    });
    let swarm = Swarm::new(repo, script);
    swarm.run("six files").success();
    let run = swarm.last_run();
    let integration = run["integration_branch"].as_str().unwrap().to_string();
    for i in 1..=6 {
        let w = format!("w{i}");
        assert_eq!(worker_status(&run, &w), "merged");
        let seen = swarm
            .repo
            .git(&["show", &format!("{integration}:seen-s{i}.txt")]);
        assert_eq!(
            seen,
            format!("{}/{w}\n", integration.trim_end_matches("/integration")),
            "w{i} started clean on its own branch"
        );
        assert_eq!(
            swarm
                .repo
                .git(&["show", &format!("{integration}:f{i}.txt")]),
            format!("s{i}\n")
        );
    }
    let log =
        std::fs::read_to_string(swarm.repo.home().join("state/ahelper/logs/ahelper.log")).unwrap();
    assert!(log.contains("recycled worktree"), "spares were used");
    // Every worktree and spare is gone: only the main checkout is registered.
    let listed = swarm.repo.git(&["worktree", "list", "--porcelain"]);
    assert_eq!(listed.matches("worktree ").count(), 1, "{listed}");
}

/// A worker's first model request goes out while its worktree is still being made; its system
/// prompt has the project instructions its worktree has (the start commit's `AGENTS.md`, read
/// from git), and one that is a symlink in the repository (only a checkout can tell what it
/// leads to) still reaches the worker, read from its worktree once made.
#[test]
fn workers_are_told_the_instructions_of_their_worktree() {
    for (behind_a_symlink, rules) in [
        (false, "RULES AT THE START COMMIT"),
        (true, "RULES BEHIND A SYMLINK"),
    ] {
        let repo = repo_with(&[
            ("a.txt", "a\n"),
            ("docs/rules.md", "RULES BEHIND A SYMLINK\n"),
        ]);
        if behind_a_symlink {
            std::os::unix::fs::symlink("docs/rules.md", repo.path().join("AGENTS.md")).unwrap();
        } else {
            repo.write("AGENTS.md", "RULES AT THE START COMMIT\n");
        }
        repo.git(&["add", "AGENTS.md"]);
        repo.git(&["commit", "-qm", "instructions"]);
        let swarm = Swarm::new(repo, one_worker_writes_a());
        swarm.run("x").success();
        let system = swarm.requests_of(1)[0].body["system"].to_string();
        assert!(system.contains(rules), "{rules:?} is not in {system}");
        assert!(
            system.contains("Project instructions (AGENTS.md)"),
            "{system}"
        );
        assert_eq!(worker_status(&swarm.last_run(), "w1"), "merged");
        let log = std::fs::read_to_string(swarm.repo.home().join("state/ahelper/logs/ahelper.log"))
            .unwrap();
        let early = log.contains("its agent is built; its worktree is being made");
        assert_eq!(early, !behind_a_symlink, "{log}");
    }
}
