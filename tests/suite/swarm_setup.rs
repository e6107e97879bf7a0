//! End-to-end tests of preparing a worker's new worktree (issue 11): `.worktreeinclude` brings
//! ignored files of the checkout in, a Rust project's dependency artifacts are seeded into the
//! worktree's own `target/debug` (`[swarm] warm_cargo`), and `[swarm] setup` runs there before
//! the worker starts —
//! the built binary, the fake model, temporary git repositories.

use super::support::*;
use ahelper_fake_llm::{Conversation, Script, Turn};
use serde_json::{Value, json};

const COORDINATOR: &str = "You are the coordinator of a swarm";

/// A repository ignoring `.env` and `build/`, with a `.worktreeinclude` taking `.env` and an
/// ignored `.env` in the checkout; `setup` as `[swarm] setup`.
fn repo_with_setup(setup: &str) -> TestRepo {
    let repo = repo_with(&[
        ("a.txt", "a\n"),
        (".gitignore", ".env\nbuild/\n"),
        (".worktreeinclude", ".env\n"),
    ]);
    repo.write(".env", "TOKEN=from-the-checkout\n");
    repo.write("build/big.bin", "not included\n");
    repo.write(
        ".ahelper/config.toml",
        &format!(
            "[swarm]\nsetup = \"{}\"\n",
            setup.replace('\\', "\\\\").replace('"', "\\\"")
        ),
    );
    repo
}

/// One subtask `s1` on `a.txt`; its worker plays `turns`.
fn one_worker(turns: Vec<Turn>) -> Script {
    let plan = json!({"summary": "one", "subtasks": [{
        "id": "s1", "title": "Work on s1", "instructions": "Do s1.", "scope": ["a.txt"]}]});
    let worker = turns.into_iter().fold(
        Conversation::new()
            .named("s1")
            .matching("Your subtask `s1`"),
        Conversation::turn,
    );
    Script::new()
        .with_conversation(
            Conversation::new()
                .matching(COORDINATOR)
                .turn(Turn::text(plan.to_string())),
        )
        .with_conversation(worker)
}

/// Runs the swarm with the project trusted (its `setup` is a command ahelper runs); (exit code,
/// the run record, worker w1's transcript).
fn run(repo: &TestRepo, script: Script) -> (i32, Value, String) {
    run_with(repo, script, &[])
}

/// [`run`] with `extra` arguments after `swarm`'s.
fn run_with(repo: &TestRepo, script: Script, extra: &[&str]) -> (i32, Value, String) {
    let server = start(script);
    let out = ahelper(repo, &server, Wire::Anthropic)
        .args([
            "swarm",
            "--trust-project",
            "do it",
            "--yes",
            "--permission-mode",
            "bypass",
        ])
        .args(extra)
        .timeout(std::time::Duration::from_secs(120))
        .output()
        .unwrap();
    let runs = repo.path().join(".ahelper/runs");
    let mut ids: Vec<_> = std::fs::read_dir(&runs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    ids.sort();
    let dir = ids.last().unwrap();
    let record =
        serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
    let transcript = std::fs::read_to_string(dir.join("workers/w1.jsonl")).unwrap_or_default();
    (out.status.code().unwrap_or(-1), record, transcript)
}

fn transcript_entry(transcript: &str, kind: &str) -> Value {
    transcript
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["type"] == kind)
        .unwrap_or_else(|| panic!("no {kind} line in {transcript}"))
}

#[test]
fn setup_runs_in_each_new_worktree_after_the_included_files_arrive() {
    let repo = repo_with_setup("cat .env > setup-saw.txt; echo \"prepared $AHELPER_WORKER_ID\"");
    let script = one_worker(vec![
        Turn::tool_call(
            "run_command",
            json!({"command": "cp .env worker-saw.txt; ls build 2>&1 | head -1 > build-seen.txt"}),
        ),
        Turn::tool_call("write_file", json!({"path": "a.txt", "content": "A\n"})),
        Turn::text("s1 done"),
    ]);
    let (code, run, transcript) = run(&repo, script);
    assert_eq!(code, 0, "{run:#}");
    assert_eq!(run["workers"][0]["status"], "merged", "{run:#}");
    let integration = run["integration_branch"].as_str().unwrap();
    let show = |file: &str| repo.git(&["show", &format!("{integration}:{file}")]);
    assert_eq!(show("setup-saw.txt"), "TOKEN=from-the-checkout\n");
    assert_eq!(show("worker-saw.txt"), "TOKEN=from-the-checkout\n");
    assert!(
        show("build-seen.txt").contains("No such file"),
        "build/ is not included"
    );
    let include = transcript_entry(&transcript, "worktree_include");
    assert_eq!(include["report"]["files"], 1, "{include}");
    let setup = transcript_entry(&transcript, "setup");
    assert_eq!(setup["outcome"]["outcome"], "passed", "{setup}");
    assert!(
        setup["output"].as_str().unwrap().contains("prepared w1"),
        "{setup}"
    );
    // the ignored .env stays ignored: it is not in the worker's commit
    assert!(
        !repo
            .git(&["ls-tree", "-r", "--name-only", integration])
            .contains(".env\n")
    );
}

#[test]
fn a_failing_setup_fails_its_worker_with_the_exit_status_and_output_tail() {
    let repo = repo_with_setup("echo preparing; echo 'dependency xyz is missing' >&2; exit 3");
    let script = one_worker(vec![
        Turn::tool_call("write_file", json!({"path": "a.txt", "content": "A\n"})),
        Turn::text("s1 done"),
    ]);
    let (code, run, transcript) = run(&repo, script);
    assert_eq!(code, 1, "{run:#}");
    let worker = &run["workers"][0];
    assert_eq!(worker["status"], "failed", "{run:#}");
    let error = worker["report"]["error"].as_str().unwrap();
    assert!(
        error.contains("setup command `echo preparing; echo 'dependency xyz is missing' >&2; exit 3` failed (exit status 3)"),
        "{error}"
    );
    assert!(error.contains("dependency xyz is missing"), "{error}");
    let setup = transcript_entry(&transcript, "setup");
    assert_eq!(setup["outcome"]["exit"]["code"], 3, "{setup}");
    assert!(
        !transcript.contains("Your subtask"),
        "the worker's agent never started: {transcript}"
    );
    assert_eq!(repo.file("a.txt"), "a\n");
}

/// A Rust project (package `demo`) ignoring `/target`, its `target/debug` holding fake
/// artifacts: the dependency `serde`'s (library and fingerprint), the own crate's, an
/// incremental cache and a symlink to a file outside the repository; `config` as the project's
/// `[swarm]` table.
fn rust_repo(config: &str) -> TestRepo {
    let repo = repo_with(&[
        (
            "Cargo.toml",
            "[package]\nname = \"demo\"\nversion = \"0.1.0\"\n",
        ),
        ("a.txt", "a\n"),
        ("b.txt", "b\n"),
        (".gitignore", "/target\n"),
    ]);
    for (rel, text) in [
        ("deps/libserde-1111.rlib", "serde library"),
        (".fingerprint/serde-1111/lib-serde", "serde fingerprint"),
        ("deps/libdemo-2222.rlib", "own library"),
        ("incremental/demo-1/cache.bin", "own incremental cache"),
    ] {
        repo.write(&format!("target/debug/{rel}"), text);
    }
    let outside = repo.home().join("outside-secret");
    std::fs::create_dir_all(repo.home()).unwrap();
    std::fs::write(&outside, "secret").unwrap();
    std::os::unix::fs::symlink(
        &outside,
        repo.path().join("target/debug/deps/libleak-3333.rlib"),
    )
    .unwrap();
    repo.write(".ahelper/config.toml", &format!("[swarm]\n{config}"));
    repo
}

/// A worker for subtask `id` that records what its worktree's `target/` holds into `<id>-saw.txt`
/// (the inode and link count of the seeded serde library, then the listings), then edits `file`.
fn recording_worker(id: &str, file: &str) -> Conversation {
    let record = format!(
        "{{ stat -c '%i %h' target/debug/deps/libserde-1111.rlib; ls -a target/debug target/debug/deps; }} > {id}-saw.txt 2>&1"
    );
    Conversation::new()
        .named(id)
        .matching(format!("Your subtask `{id}`"))
        .turn(Turn::tool_call("run_command", json!({"command": record})))
        .turn(Turn::tool_call(
            "write_file",
            json!({"path": file, "content": "edited\n"}),
        ))
        .turn(Turn::text(format!("{id} done")))
}

/// Two subtasks `s1` (`a.txt`) and `s2` (`b.txt`), both recording their `target/`.
fn two_recording_workers() -> Script {
    let plan = json!({"summary": "two", "subtasks": [
        {"id": "s1", "title": "Work on s1", "instructions": "Do s1.", "scope": ["a.txt"]},
        {"id": "s2", "title": "Work on s2", "instructions": "Do s2.", "scope": ["b.txt"]}]});
    Script::new()
        .with_conversation(
            Conversation::new()
                .matching(COORDINATOR)
                .turn(Turn::text(plan.to_string())),
        )
        .with_conversation(recording_worker("s1", "a.txt"))
        .with_conversation(recording_worker("s2", "b.txt"))
}

#[test]
fn warm_cargo_seeds_each_worker_its_own_copy_of_the_dependency_artifacts() {
    let repo = rust_repo("");
    let (code, run, transcript) = run_with(&repo, two_recording_workers(), &["--no-verify"]);
    assert_eq!(code, 0, "{run:#}");
    let integration = run["integration_branch"].as_str().unwrap();
    let saw = |id: &str| repo.git(&["show", &format!("{integration}:{id}-saw.txt")]);
    let (s1, s2) = (saw("s1"), saw("s2"));
    for listing in [&s1, &s2] {
        assert!(listing.contains("libserde-1111.rlib"), "{listing}");
        for absent in ["libdemo-2222.rlib", "libleak-3333.rlib", "incremental"] {
            assert!(
                !listing.contains(absent),
                "{absent} is not seeded: {listing}"
            );
        }
    }
    let inode = |text: &str| text.lines().next().unwrap().to_string();
    let checkout = std::fs::metadata(repo.path().join("target/debug/deps/libserde-1111.rlib"));
    let checkout = std::os::unix::fs::MetadataExt::ino(&checkout.unwrap()).to_string();
    assert!(inode(&s1).ends_with(" 1"), "not hard-linked: {s1}");
    assert!(inode(&s2).ends_with(" 1"), "not hard-linked: {s2}");
    assert_ne!(inode(&s1), inode(&s2), "two workers never share a file");
    assert!(!inode(&s1).starts_with(&format!("{checkout} ")), "{s1}");
    let warm = transcript_entry(&transcript, "cargo_warm");
    assert_eq!(warm["report"]["outcome"], "seeded", "{warm}");
    assert_eq!(warm["report"]["files"], 2, "{warm}");
    let skipped = &warm["report"]["skipped"][0];
    assert_eq!(
        skipped["path"], "target/debug/deps/libleak-3333.rlib",
        "{warm}"
    );
    assert_eq!(skipped["reason"]["reason"], "symlink_escapes", "{warm}");
    // Nothing was written into the checkout's target/.
    assert_eq!(
        std::fs::read_dir(repo.path().join("target/debug/deps"))
            .unwrap()
            .count(),
        3
    );
}

#[test]
fn warm_cargo_off_leaves_the_worktree_without_target() {
    let repo = rust_repo("warm_cargo = \"off\"\n");
    let (code, run, transcript) = run_with(&repo, two_recording_workers(), &["--no-verify"]);
    assert_eq!(code, 0, "{run:#}");
    let integration = run["integration_branch"].as_str().unwrap();
    let saw = repo.git(&["show", &format!("{integration}:s1-saw.txt")]);
    assert!(saw.contains("No such file"), "{saw}");
    assert!(!transcript.contains("\"cargo_warm\""), "{transcript}");
}

#[test]
fn warm_cargo_over_the_size_guard_is_skipped_and_named() {
    let repo = rust_repo("worktree_include_max_mb = 0\n");
    let (code, run, transcript) = run_with(&repo, two_recording_workers(), &["--no-verify"]);
    assert_eq!(code, 0, "{run:#}");
    let integration = run["integration_branch"].as_str().unwrap();
    let saw = repo.git(&["show", &format!("{integration}:s1-saw.txt")]);
    assert!(saw.contains("No such file"), "{saw}");
    let warm = transcript_entry(&transcript, "cargo_warm");
    assert_eq!(warm["report"]["files"], 0, "{warm}");
    let skipped = &warm["report"]["skipped"][0];
    assert_eq!(
        skipped["path"], "target/debug/ (dependency artifacts)",
        "{warm}"
    );
    assert_eq!(skipped["reason"]["reason"], "too_large", "{warm}");
}
