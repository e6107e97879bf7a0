//! `--add-dir DIR`: a second writable root, as Claude Code's flag is. The file tools accept
//! paths in it, the permission decision counts it as inside the workspace, commands may write
//! in it under the OS sandbox, its protected paths stay protected, and swarm workers get it.

use super::support::files::assert_file;
use super::support::run::{run_ok, stderr_of_run};
use super::support::sandbox::{Needs, require_sandbox};
use super::support::scripts::*;
use super::support::*;
use ahelper_fake_llm::Turn;
use predicates::prelude::*;
use serde_json::json;
use std::path::PathBuf;

/// An added directory `extra/` beside the repository, with a `.git/config` and a
/// `.ahelper/config.toml` of its own, and a directory `other/` that is never added; both
/// canonical.
fn extra_and_other(repo: &TestRepo) -> (PathBuf, PathBuf) {
    let extra = repo.root().join("extra");
    let other = repo.root().join("other");
    for dir in [extra.join(".git"), extra.join(".ahelper"), other.clone()] {
        std::fs::create_dir_all(dir).unwrap();
    }
    std::fs::write(extra.join(".git/config"), "[core]\n").unwrap();
    std::fs::write(extra.join(".ahelper/config.toml"), "# extra\n").unwrap();
    (
        std::fs::canonicalize(extra).unwrap(),
        std::fs::canonicalize(other).unwrap(),
    )
}

fn at(dir: &std::path::Path, rel: &str) -> String {
    dir.join(rel).display().to_string()
}

/// `-p go --permission-mode MODE`, then `more`.
fn go<'a>(mode: &'a str, more: &[&'a str]) -> Vec<&'a str> {
    [&["-p", "go", "--permission-mode", mode][..], more].concat()
}

#[test]
fn file_tools_write_in_the_added_dir_and_nowhere_else() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let (extra, other) = extra_and_other(&repo);
    let script = agent([
        writes(&at(&extra, "notes.txt"), "notes\n"),
        writes(&at(&other, "x.txt"), "x\n"),
        writes(&at(&extra, ".git/config"), "[core]\n\tfsmonitor = evil\n"),
        writes(&at(&extra, ".ahelper/config.toml"), "mode = \"bypass\"\n"),
        Turn::tool_call("read_file", json!({"path": at(&extra, "notes.txt")})),
        Turn::text("done"),
    ]);
    let dir = extra.display().to_string();
    let args = go("accept-edits", &["--add-dir", &dir]);
    let (server, stderr) = stderr_of_run(&repo, script, &args);
    // inside the added dir: allowed by accept-edits like the workspace, written, read back
    assert_file(&extra.join("notes.txt"), "notes\n");
    let requests = server.model_requests();
    assert!(
        requests[5].body.to_string().contains("notes\\n"),
        "read_file of the added dir gave the file"
    );
    // outside every root, and the protected paths of the added dir: refused
    assert!(!other.join("x.txt").exists());
    assert_file(&extra.join(".git/config"), "[core]\n");
    assert_file(&extra.join(".ahelper/config.toml"), "# extra\n");
    assert!(stderr.contains("3 tool calls were refused"), "{stderr}");
    // the model is told where it may write
    let system = requests[0].body["system"].to_string();
    assert!(system.contains("Added directories"), "{system}");
    assert!(system.contains(&dir), "{system}");
}

#[test]
fn without_add_dir_the_same_write_is_refused_and_a_missing_dir_is_an_error() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let (extra, _) = extra_and_other(&repo);
    let server = start(agent([
        writes(&at(&extra, "notes.txt"), "notes\n"),
        Turn::text("done"),
    ]));
    ahelper(&repo, &server, Wire::Anthropic)
        .args(["-p", "go", "--permission-mode", "bypass"])
        .assert()
        .success();
    assert!(!extra.join("notes.txt").exists());
    let requests = server.model_requests();
    assert!(
        requests[1]
            .body
            .to_string()
            .contains("outside the workspace"),
        "{}",
        requests[1].body
    );
    let missing = repo.root().join("no-such-dir");
    for args in [
        vec!["-p", "go"],
        vec!["swarm", "x", "--plan-only"],
        vec!["swarm", "ls"],
    ] {
        ahelper(&repo, &server, Wire::Anthropic)
            .args(&args)
            .args(["--add-dir", &missing.display().to_string()])
            .assert()
            .code(2)
            .stderr(predicate::str::contains("--add-dir"))
            .stderr(predicate::str::contains(missing.display().to_string()))
            .stderr(predicate::str::contains("give an existing directory"));
    }
}

/// A command writes in the added dir (by absolute path, and with it as its cwd) under the
/// sandbox; the same command without `--add-dir` is stopped by landlock; a script run there
/// in bypass mode still cannot rewrite the added dir's `.git/config`.
#[test]
fn commands_write_in_the_added_dir_under_the_sandbox() {
    require_sandbox!(Needs::Landlock);
    let repo = repo_with(&[("a.txt", "a\n")]);
    let (extra, _) = extra_and_other(&repo);
    std::fs::write(
        extra.join("s.sh"),
        "echo made > made.txt\necho evil >> .git/config\n",
    )
    .unwrap();
    let dir = extra.display().to_string();
    let command = format!("echo one > {dir}/one.txt && cd {dir} && echo two > two.txt");
    let script = || {
        agent([
            runs(&command),
            runs(&format!("cd {dir} && sh s.sh")),
            Turn::text("done"),
        ])
    };
    run_ok(&repo, script(), &go("bypass", &["--sandbox", "enforce"]));
    assert!(
        !extra.join("one.txt").exists(),
        "landlock let a command out"
    );

    let args = go("bypass", &["--sandbox", "enforce", "--add-dir", &dir]);
    run_ok(&repo, script(), &args);
    assert_file(&extra.join("one.txt"), "one\n");
    assert_file(&extra.join("two.txt"), "two\n");
    assert_file(&extra.join("made.txt"), "made\n");
    if ahelper_agents::sandbox_os::namespaces_available() {
        assert_eq!(
            std::fs::read_to_string(extra.join(".git/config")).unwrap(),
            "[core]\n",
            "the added dir's .git is read-only for commands"
        );
    }
}

/// In `accept-edits`, a command that writes in the added dir is allowed like one that writes
/// in the workspace; one that writes outside every root and the temp dir is refused.
#[test]
fn the_permission_decision_counts_the_added_dir_as_inside() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let (extra, _) = extra_and_other(&repo);
    let dir = extra.display().to_string();
    let script = agent([
        runs(&format!("echo one > {dir}/one.txt")),
        runs("echo home > /home/not-a-root.txt"),
        Turn::text("done"),
    ]);
    let args = go("accept-edits", &["--add-dir", &dir, "--sandbox", "off"]);
    let (_, stderr) = stderr_of_run(&repo, script, &args);
    assert_file(&extra.join("one.txt"), "one\n");
    assert!(stderr.contains("1 tool call was refused"), "{stderr}");
    assert!(stderr.contains("outside the workspace"), "{stderr}");
}

/// Swarm workers get the added dir: a worker writes there with a file tool and a command.
#[test]
fn swarm_workers_get_the_added_dir() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let (extra, _) = extra_and_other(&repo);
    let dir = extra.display().to_string();
    let script = plan(json!([subtask("s1", "a.txt")])).with_conversation(worker(
        "s1",
        [
            writes("a.txt", "A\n"),
            writes(&at(&extra, "from-worker.txt"), "w\n"),
            runs(&format!("echo c > {dir}/from-command.txt")),
            Turn::text("d"),
        ],
    ));
    let swarm = ["swarm", "x", "--yes", "--permission-mode", "accept-edits"];
    run_ok(&repo, script, &[&swarm[..], &["--add-dir", &dir]].concat());
    assert_file(&extra.join("from-worker.txt"), "w\n");
    assert_file(&extra.join("from-command.txt"), "c\n");
}

/// The REPL takes `--add-dir` too: `/status` names the added dir and a write there runs in
/// `accept-edits` without a question.
#[test]
fn the_repl_takes_add_dir() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let (extra, _) = extra_and_other(&repo);
    let dir = extra.display().to_string();
    let server = start(
        agent([
            writes(&at(&extra, "repl.txt"), "r\n"),
            Turn::text("written"),
        ])
        .with_fallback_text("ok"),
    );
    let args = ["--add-dir", &dir, "--permission-mode", "accept-edits"];
    let tmux = super::support::tmux::Tmux::start(&repo, &server, &args);
    tmux.wait_for("Type /help");
    tmux.line("/status");
    tmux.wait_for(&format!("Added dir:  {dir} (--add-dir)"));
    tmux.line("write it");
    tmux.wait_for("written");
    assert_file(&extra.join("repl.txt"), "r\n");
}
