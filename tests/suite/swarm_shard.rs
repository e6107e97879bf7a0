//! Large refactors at any scale and with any model (issue 34): deterministic sharding with
//! `--each`, a plan the user wrote (`--plan FILE`), caps for large runs, plans checked against
//! the repository's files, fallbacks for weak models, MCP servers only where the run names them.

use super::support::scripts::*;
use super::support::*;
use ahelper_fake_llm::{FakeLlm, Script, Turn};
use serde_json::{Value, json};

/// `src/m01.rs` … `src/m<n>.rs`, each `fn f<i>() {}`, and a README that no glob below matches.
fn rust_files(n: usize) -> Vec<(String, String)> {
    let mut files: Vec<(String, String)> = (1..=n)
        .map(|i| (format!("src/m{i:02}.rs"), format!("fn f{i}() {{}}\n")))
        .collect();
    files.push(("README.md".into(), "# demo\n".into()));
    files
}

fn repo_of(files: &[(String, String)]) -> TestRepo {
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(p, c)| (p.as_str(), c.as_str()))
        .collect();
    repo_with(&refs)
}

/// The worker of shard `shard-<k>` documents the files `files` (one write each), then is done.
fn documents(script: Script, k: usize, files: &[String]) -> Script {
    let id = format!("shard-{k}");
    let mut turns: Vec<Turn> = files
        .iter()
        .map(|f| writes(f, &format!("/// Documented.\n{}", doc_target(f))))
        .collect();
    turns.push(done(&id));
    script.with_conversation(worker(&id, turns))
}

/// The original content of `src/mNN.rs`.
fn doc_target(file: &str) -> String {
    let n: usize = file
        .trim_start_matches("src/m")
        .trim_end_matches(".rs")
        .parse()
        .unwrap();
    format!("fn f{n}() {{}}\n")
}

/// Whether any request the server got was the coordinator's planning turn (the coordinator's
/// closing turn, which writes the run's summary, is not one).
fn asked_the_coordinator(server: &FakeLlm) -> bool {
    server.model_requests().iter().any(|r| {
        let body = r.body.to_string();
        body.contains(COORDINATOR) && body.contains("answer with the JSON plan only")
    })
}

fn integrated(repo: &TestRepo, file: &str) -> String {
    let run = last_run(repo);
    let branch = run["integration_branch"].as_str().unwrap();
    repo.git(&["show", &format!("{branch}:{file}")])
}

#[test]
fn each_glob_in_pairs_makes_six_subtasks_without_planning_and_merges_them() {
    let files = rust_files(12);
    let repo = repo_of(&files);
    let names: Vec<String> = files[..12].iter().map(|(p, _)| p.clone()).collect();
    let script = names
        .chunks(2)
        .enumerate()
        .fold(Script::new(), |s, (i, pair)| documents(s, i + 1, pair));
    let server = start(script);
    let out = ahelper(&repo, &server, Wire::Anthropic)
        .args([
            "swarm",
            "add a doc comment to every function",
            "--each",
            "src/**/*.rs",
            "--per",
            "2",
            "--yes",
            "--no-verify",
            "--permission-mode",
            "bypass",
        ])
        .assert()
        .success()
        .get_output()
        .clone();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!asked_the_coordinator(&server), "a planning turn was asked");
    let run = last_run(&repo);
    let subtasks = run["plan"]["subtasks"].as_array().unwrap();
    assert_eq!(subtasks.len(), 6, "{stderr}");
    assert_eq!(subtasks[0]["scope"], json!(["src/m01.rs", "src/m02.rs"]));
    assert!(
        stderr.contains("w6 [shard-6] src/m11.rs, src/m12.rs"),
        "{stderr}"
    );
    for w in run["workers"].as_array().unwrap() {
        assert_eq!(w["status"], "merged", "{w}");
    }
    for name in &names {
        assert!(
            integrated(&repo, name).starts_with("/// Documented."),
            "{name}"
        );
    }
    assert_eq!(integrated(&repo, "README.md"), "# demo\n");
}

#[test]
fn each_by_dir_groups_per_directory_and_a_glob_matching_nothing_is_a_usage_error() {
    let repo = repo_with(&[("a/x.py", "x\n"), ("a/y.py", "y\n"), ("b/z.py", "z\n")]);
    let server = start(Script::new());
    let out = ahelper(&repo, &server, Wire::Anthropic)
        .args([
            "swarm",
            "type it",
            "--each",
            "**/*.py",
            "--by",
            "dir",
            "--plan-only",
        ])
        .assert()
        .success()
        .get_output()
        .clone();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("scope: a/x.py, a/y.py"), "{stderr}");
    assert!(stderr.contains("scope: b/z.py"), "{stderr}");
    assert!(!asked_the_coordinator(&server));
    let (code, _, stderr) = outcome_of(
        ahelper(&repo, &server, Wire::Anthropic)
            .args(["swarm", "t", "--each", "src/*.rs", "--yes"]),
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("no tracked file matches `src/*.rs`"),
        "{stderr}"
    );
}

/// The plan a user wrote: two subtasks, the second after the first.
fn hand_written_plan() -> Value {
    json!({"summary": "by hand", "subtasks": [
        {"id": "one", "title": "Change a", "instructions": "Write A into a.txt.", "scope": ["a.txt"]},
        {"id": "two", "title": "Change b", "instructions": "Write B into b.txt.", "scope": ["b.txt"],
         "depends_on": ["one"]}
    ]})
}

#[test]
fn a_plan_file_runs_without_the_coordinator_and_a_bad_one_is_refused_before_any_run() {
    let repo = repo_with(&[("a.txt", "a\n"), ("b.txt", "b\n")]);
    let dir = tempfile::tempdir().unwrap();
    let plan_file = dir.path().join("plan.json");
    std::fs::write(&plan_file, hand_written_plan().to_string()).unwrap();
    let script = Script::new()
        .with_conversation(worker("one", [writes("a.txt", "A\n"), done("one")]))
        .with_conversation(worker("two", [writes("b.txt", "B\n"), done("two")]));
    let server = start(script);
    ahelper(&repo, &server, Wire::Anthropic)
        .args(["swarm", "upper-case", "--plan"])
        .arg(&plan_file)
        .args(["--yes", "--no-verify", "--permission-mode", "bypass"])
        .assert()
        .success();
    assert!(!asked_the_coordinator(&server));
    assert_eq!(integrated(&repo, "a.txt"), "A\n");
    assert_eq!(integrated(&repo, "b.txt"), "B\n");
    // A dependency on an unknown subtask: refused like a coordinator's plan, nothing created.
    let mut bad = hand_written_plan();
    bad["subtasks"][1]["depends_on"] = json!(["three"]);
    std::fs::write(&plan_file, bad.to_string()).unwrap();
    let runs_before = std::fs::read_dir(repo.path().join(".ahelper/runs"))
        .unwrap()
        .count();
    let (code, _, stderr) = outcome_of(
        ahelper(&repo, &server, Wire::Anthropic)
            .args(["swarm", "again", "--yes", "--plan"])
            .arg(&plan_file),
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("depends on unknown subtask `three`"),
        "{stderr}"
    );
    let runs_after = std::fs::read_dir(repo.path().join(".ahelper/runs"))
        .unwrap()
        .count();
    assert_eq!(runs_before, runs_after);
}

/// The most workers that were starting or running at once, from the run's `events.jsonl`.
fn peak_concurrency(repo: &TestRepo) -> usize {
    let run = last_run(repo);
    let events = repo
        .path()
        .join(".ahelper/runs")
        .join(run["run_id"].as_str().unwrap())
        .join("events.jsonl");
    let mut active = std::collections::BTreeSet::new();
    let mut peak = 0;
    for line in std::fs::read_to_string(events).unwrap().lines() {
        let event: Value = serde_json::from_str(line).unwrap();
        let event = &event["event"];
        if event["type"] != "worker_status" {
            continue;
        }
        let worker = event["worker"].as_str().unwrap().to_string();
        match event["status"].as_str().unwrap() {
            "starting" | "running" | "waiting_for_permission" => active.insert(worker),
            _ => active.remove(&worker),
        };
        peak = peak.max(active.len());
    }
    peak
}

#[test]
fn a_thirty_subtask_plan_is_within_the_default_cap_and_runs_on_eight_workers() {
    let files: Vec<(String, String)> = (1..=30)
        .map(|i| (format!("f{i}.txt"), format!("{i}\n")))
        .collect();
    let repo = repo_of(&files);
    let subtasks: Vec<Value> = (1..=30)
        .map(|i| subtask(&format!("s{i}"), &format!("f{i}.txt")))
        .collect();
    let script = (1..=30).fold(plan(json!(subtasks)), |script, i| {
        let file = format!("f{i}.txt");
        script.with_conversation(worker(
            &format!("s{i}"),
            [writes(&file, "done\n").with_delay_ms(200), done("s")],
        ))
    });
    let server = start(script);
    ahelper(&repo, &server, Wire::Anthropic)
        .args(["swarm", "touch every file", "--yes", "--no-verify"])
        .args(["--permission-mode", "bypass", "--max-workers", "8"])
        .timeout(std::time::Duration::from_secs(300))
        .assert()
        .success();
    let run = last_run(&repo);
    let workers = run["workers"].as_array().unwrap();
    assert_eq!(workers.len(), 30);
    assert!(workers.iter().all(|w| w["status"] == "merged"), "{run}");
    assert_eq!(integrated(&repo, "f30.txt"), "done\n");
    let peak = peak_concurrency(&repo);
    assert!((2..=8).contains(&peak), "peak of {peak} workers at once");
}

#[test]
fn a_plan_over_the_cap_runs_its_first_batch_and_queues_the_rest_for_plan() {
    let files = rust_files(12);
    let repo = repo_of(&files);
    let server = start(Script::new());
    let out = ahelper(&repo, &server, Wire::Anthropic)
        .args([
            "swarm",
            "document",
            "--each",
            "src/*.rs",
            "--max-subtasks",
            "5",
        ])
        .arg("--plan-only")
        .assert()
        .success()
        .get_output()
        .clone();
    let stderr = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let run = last_run(&repo);
    assert_eq!(run["plan"]["subtasks"].as_array().unwrap().len(), 5);
    let queued = repo
        .path()
        .join(".ahelper/runs")
        .join(run["run_id"].as_str().unwrap())
        .join("queued-plan.json");
    assert!(
        stderr.contains("the other 7 are queued in") && stderr.contains("--plan"),
        "{stderr}"
    );
    let rest: Value = serde_json::from_str(&std::fs::read_to_string(&queued).unwrap()).unwrap();
    assert_eq!(rest["subtasks"][0]["scope"], json!(["src/m06.rs"]));
    // The queue is a plan `--plan` runs (here: shown).
    ahelper(&repo, &server, Wire::Anthropic)
        .args(["swarm", "clean", "--all", "--force"])
        .assert()
        .success();
    let out = ahelper(&repo, &server, Wire::Anthropic)
        .args(["swarm", "document", "--plan"])
        .arg(&queued)
        .arg("--plan-only")
        .assert()
        .success()
        .get_output()
        .clone();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("w7 [shard-12] src/m12.rs"), "{stderr}");
    // Out of range: a usage error.
    let (code, _, stderr) = outcome_of(ahelper(&repo, &server, Wire::Anthropic).args([
        "swarm",
        "t",
        "--max-subtasks",
        "0",
    ]));
    assert_eq!(code, 2, "{stderr}");
}

/// A coordinator answering with `first`, then (re-asked) with `second`.
fn two_plans(first: Value, second: Value) -> Script {
    Script::new().with_conversation(
        ahelper_fake_llm::Conversation::new()
            .matching(COORDINATOR)
            .with_turn_index(ahelper_fake_llm::TurnIndex::AssistantMessages)
            .turn(Turn::text(first.to_string()))
            .turn(Turn::text(second.to_string())),
    )
}

/// A Python repository: `calc/core.py`, `tests/test_core.py`.
fn python_repo() -> TestRepo {
    repo_with(&[
        ("calc/core.py", "def add(a, b):\n    return a + b\n"),
        ("tests/test_core.py", "from calc.core import add\n"),
    ])
}

#[test]
fn a_scope_matching_nothing_is_sent_back_with_the_files_that_exist() {
    let wrong = json!({"summary": "s", "subtasks": [subtask("s1", "src/hello.rs")]});
    let right = json!({"summary": "s", "subtasks": [subtask("s1", "calc/core.py"),
        subtask("s2", "calc/new.py")]});
    let repo = python_repo();
    let server = start(two_plans(wrong, right));
    let out = ahelper(&repo, &server, Wire::Anthropic)
        .args(["swarm", "type the calculator", "--plan-only", "--no-verify"])
        .assert()
        .success()
        .get_output()
        .clone();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let requests = server.model_requests();
    assert_eq!(requests.len(), 2, "{stdout}{stderr}");
    let reask = requests[1].body.to_string();
    for part in [
        "`src/hello.rs` (subtask `s1`)",
        "tracked files are: calc/core.py, tests/test_core.py",
    ] {
        assert!(reask.contains(part), "{part}: {reask}");
    }
    assert!(
        stderr.contains("scope: calc/core.py (1 file)"),
        "{stdout}{stderr}"
    );
    assert!(
        stderr.contains("scope: calc/new.py (no existing file: new files)"),
        "{stderr}"
    );
}

/// The plan a 1.5B model made: a chain of steps that only find, read and check, then write.
fn step_chain() -> Value {
    let step = |id: &str, title: &str, deps: &[&str]| {
        json!({"id": id, "title": title, "instructions": format!("{title}."),
               "scope": ["calc/core.py"], "depends_on": deps})
    };
    json!({"summary": "steps", "subtasks": [
        step("find", "Find the functions", &[]),
        step("read", "Read the functions", &["find"]),
        step("write", "Write the doc comments", &["read"]),
    ]})
}

#[test]
fn a_step_chain_refused_twice_falls_back_to_the_files_it_named_and_says_so() {
    let repo = python_repo();
    let script = two_plans(step_chain(), step_chain()).with_conversation(worker(
        "shard-1",
        [
            writes(
                "calc/core.py",
                "def add(a, b):\n    \"\"\"Add.\"\"\"\n    return a + b\n",
            ),
            done("shard-1"),
        ],
    ));
    let server = start(script);
    let out = ahelper(&repo, &server, Wire::Anthropic)
        .args(["swarm", "document every function", "--yes", "--no-verify"])
        .args(["--permission-mode", "bypass"])
        .assert()
        .success()
        .get_output()
        .clone();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("refused after its re-ask")
            && stdout.contains("fallback: one subtask per file the coordinator named (1 file(s)"),
        "{stdout}"
    );
    assert!(integrated(&repo, "calc/core.py").contains("\"\"\"Add.\"\"\""));
    assert_eq!(last_run(&repo)["workers"][0]["status"], "merged");
}
