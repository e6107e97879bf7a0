//! Hooks through the binary: Claude Code's events, input on stdin, exit codes and JSON
//! decisions, timeouts, and project-config hooks ignored.

use super::support::config::write_user_config;
use super::support::run::run_ok;
use super::support::scripts::*;
use super::support::tmux::process_ended;
use super::support::*;
use ahelper_fake_llm::{Script, Turn};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A directory outside the repository where hooks leave their marker files.
fn marks(repo: &TestRepo) -> PathBuf {
    let dir = repo.root().join("marks");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{} was written by the hook: {e}", path.display()));
    serde_json::from_str(&text).expect("hook input is JSON")
}

fn command_then_answer(command: &str) -> Script {
    agent([runs(command), Turn::text("done")])
}

/// The arguments of a one-shot run that asks for a file in bypass mode.
const MAKE_A_FILE: &[&str] = &["-p", "make a file", "--permission-mode", "bypass"];

/// One command hook in TOML: `command` runs on `event`, for the tools `matcher` matches (every
/// tool when it is empty).
fn hook(event: &str, matcher: &str, command: &str) -> String {
    let quoted = |text: &str| serde_json::to_string(text).expect("a string is JSON");
    let matcher = match matcher {
        "" => String::new(),
        tools => format!("matcher = {}\n", quoted(tools)),
    };
    let command = quoted(command);
    format!("[[hooks.{event}]]\n{matcher}hooks = [{{ type = \"command\", command = {command} }}]\n")
}

/// A repository with `a.txt` whose user config holds `hooks` (TOML, where `{marks}` stands for
/// the [`marks`] directory); (repository, marks directory).
fn repo_with_hooks(hooks: &str) -> (TestRepo, PathBuf) {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let marks = marks(&repo);
    write_user_config(
        &repo,
        &hooks.replace("{marks}", &marks.display().to_string()),
    );
    (repo, marks)
}

#[test]
fn pre_tool_use_exit_2_blocks_the_call_and_the_model_reads_stderr() {
    let (repo, marks) = repo_with_hooks(&hook(
        "PreToolUse",
        "run_command|edit_file",
        "cat > {marks}/pre.json; echo 'no commands today' >&2; exit 2",
    ));
    let (server, _) = run_ok(&repo, command_then_answer("touch ran.txt"), MAKE_A_FILE);
    assert!(
        !repo.path().join("ran.txt").exists(),
        "the command never ran"
    );
    let second = server.model_requests()[1].body.to_string();
    assert!(second.contains("no commands today"), "{second}");
    let input = read_json(&marks.join("pre.json"));
    assert_eq!(input["hook_event_name"], "PreToolUse");
    assert_eq!(input["tool_name"], "run_command");
    assert_eq!(input["tool_input"]["command"], "touch ran.txt");
    assert!(input["session_id"].as_str().is_some_and(|s| !s.is_empty()));
    assert!(input["transcript_path"].as_str().is_some());
    let cwd = std::fs::canonicalize(repo.path()).unwrap();
    assert_eq!(input["cwd"], cwd.display().to_string());
}

#[test]
fn json_permission_deny_overrides_an_allow_rule() {
    let (repo, _) = repo_with_hooks(&hook(
        "PreToolUse",
        "run_command",
        r#"echo '{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "touching is forbidden"}}'"#,
    ));
    repo.write(
        ".ahelper/config.toml",
        "[permissions]\nallow = [\"run_command(touch:*)\"]\n",
    );
    let (server, _) = run_ok(
        &repo,
        command_then_answer("touch ran.txt"),
        &["-p", "make a file", "--trust-project"],
    );
    assert!(!repo.path().join("ran.txt").exists());
    let second = server.model_requests()[1].body.to_string();
    assert!(second.contains("touching is forbidden"), "{second}");
    let lines = session_lines(&repo);
    assert!(
        lines
            .iter()
            .any(|l| l["type"] == "permission" && l["reason"] == "touching is forbidden"),
        "the refusal is in the transcript"
    );
}

#[test]
fn json_permission_allow_cannot_override_a_deny_rule() {
    let (repo, _) = repo_with_hooks(&hook(
        "PreToolUse",
        "",
        r#"echo '{"hookSpecificOutput": {"permissionDecision": "allow"}}'"#,
    ));
    repo.write(
        ".ahelper/config.toml",
        "[permissions]\nmode = \"bypass\"\ndeny = [\"run_command(touch:*)\"]\n",
    );
    run_ok(
        &repo,
        command_then_answer("touch ran.txt"),
        &["-p", "make a file", "--trust-project"],
    );
    assert!(!repo.path().join("ran.txt").exists());
}

#[test]
fn post_tool_use_receives_the_tool_response() {
    let (repo, marks) = repo_with_hooks(&hook(
        "PostToolUse",
        "run_command",
        "cat > {marks}/post.json",
    ));
    run_ok(
        &repo,
        command_then_answer("echo hello-from-the-tool"),
        &["-p", "say hello", "--permission-mode", "bypass"],
    );
    let input = read_json(&marks.join("post.json"));
    assert_eq!(input["hook_event_name"], "PostToolUse");
    assert_eq!(input["tool_name"], "run_command");
    assert!(
        input["tool_response"]["content"]
            .as_str()
            .unwrap()
            .contains("hello-from-the-tool"),
        "{input}"
    );
}

#[test]
fn session_prompt_and_stop_hooks_run() {
    let prompt = "cat > {marks}/prompt.json; echo 'The build uses make.'";
    let (repo, marks) = repo_with_hooks(
        &[
            hook("SessionStart", "", "cat > {marks}/start.json"),
            hook("UserPromptSubmit", "", prompt),
            hook("Stop", "", "cat > {marks}/stop.json"),
            hook("SessionEnd", "", "cat > {marks}/end.json"),
        ]
        .concat(),
    );
    let (server, _) = run_ok(&repo, agent([Turn::text("hi")]), &["-p", "hello there"]);
    assert_eq!(read_json(&marks.join("start.json"))["source"], "startup");
    assert_eq!(
        read_json(&marks.join("prompt.json"))["prompt"],
        "hello there"
    );
    assert_eq!(
        read_json(&marks.join("stop.json"))["stop_hook_active"],
        false
    );
    assert_eq!(
        read_json(&marks.join("end.json"))["hook_event_name"],
        "SessionEnd"
    );
    let first = server.model_requests()[0].body.to_string();
    assert!(
        first.contains("The build uses make."),
        "UserPromptSubmit stdout is added to the context: {first}"
    );
}

#[test]
fn a_hanging_hook_is_killed_at_its_timeout_and_does_not_block() {
    let (repo, marks) = repo_with_hooks(
        r#"
[[hooks.PreToolUse]]
hooks = [{ type = "command", command = "echo $$ > {marks}/hook.pid; sleep 300; true", timeout = 1 }]
"#,
    );
    run_ok(&repo, command_then_answer("touch ran.txt"), MAKE_A_FILE)
        .1
        .stderr(predicates::str::contains("killed after its timeout of 1 s"));
    assert!(
        repo.path().join("ran.txt").exists(),
        "a timeout does not block"
    );
    let pid = std::fs::read_to_string(marks.join("hook.pid")).unwrap();
    let pid = pid.trim().parse().expect("the hook wrote its pid");
    assert!(process_ended(pid), "the hook's process group was killed");
}

#[test]
fn project_config_hooks_are_ignored_with_a_warning() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let marks = marks(&repo);
    let command = format!("touch {}/project-hook-ran", marks.display());
    repo.write(".ahelper/config.toml", &hook("SessionStart", "", &command));
    run_ok(&repo, agent([Turn::text("hi")]), &["-p", "hello"])
        .1
        .stderr(predicates::str::contains(
            "ignored the hooks in the project config",
        ))
        .stderr(predicates::str::contains("copy them there to enable them"))
        .stderr(predicates::str::contains("project-hook-ran"));
    assert!(!marks.join("project-hook-ran").exists());
}

#[test]
fn a_stop_hook_that_blocks_makes_the_model_go_on() {
    // blocks the first stop only: the second time the marker exists
    let (repo, _) = repo_with_hooks(&hook(
        "Stop",
        "",
        "if [ -e {marks}/once ]; then exit 0; fi; touch {marks}/once; \
         echo 'run the tests first' >&2; exit 2",
    ));
    let (server, _) = run_ok(&repo, agent([Turn::text("finished")]), &["-p", "do it"]);
    let requests = server.model_requests();
    assert_eq!(requests.len(), 2, "the model was asked to go on once");
    assert!(requests[1].body.to_string().contains("run the tests first"));
}

#[test]
fn a_swarm_worker_runs_subagent_stop_hooks_in_its_worktree() {
    let (repo, marks) = repo_with_hooks(&hook("SubagentStop", "", "cat > {marks}/subagent.json"));
    run_ok(
        &repo,
        one_worker([writes("a.txt", "A\n"), Turn::text("done")]),
        &["swarm", "do it", "--yes", "--permission-mode", "bypass"],
    );
    let input = read_json(&marks.join("subagent.json"));
    assert_eq!(input["hook_event_name"], "SubagentStop");
    let cwd = input["cwd"].as_str().unwrap();
    let repo_dir = std::fs::canonicalize(repo.path()).unwrap();
    assert_ne!(
        cwd,
        repo_dir.display().to_string(),
        "the worker's hook runs in its worktree"
    );
}

/// A safety hook copied from Claude Code's documentation: it reads `tool_name` and
/// `tool_input.command` and blocks `rm`.
const CLAUDE_CODE_RM_GUARD: &str = "input=$(cat); echo \"$input\" > {marks}/guard.json; \
     if echo \"$input\" | grep -q '\"tool_name\":\"Bash\"' && \
        echo \"$input\" | grep -q '\"command\":\"rm '; then echo 'no rm' >&2; exit 2; fi";

#[test]
fn a_claude_code_hook_matches_bash_and_reads_claude_code_names() {
    let (repo, marks) = repo_with_hooks(&hook("PreToolUse", "Bash", CLAUDE_CODE_RM_GUARD));
    let (server, _) = run_ok(&repo, command_then_answer("rm a.txt"), MAKE_A_FILE);
    assert!(repo.path().join("a.txt").exists(), "the hook blocked rm");
    assert!(
        server.model_requests()[1]
            .body
            .to_string()
            .contains("no rm")
    );
    let input = read_json(&marks.join("guard.json"));
    assert_eq!(input["tool_name"], "Bash");
    assert_eq!(input["tool_input"]["command"], "rm a.txt");
}

#[test]
fn a_claude_code_edit_hook_gets_file_path_and_old_string() {
    let (repo, marks) = repo_with_hooks(&hook(
        "PreToolUse",
        "Edit|MultiEdit|Write",
        "cat > {marks}/edit.json",
    ));
    let edit = Turn::tool_call(
        "edit_file",
        serde_json::json!({"path": "a.txt", "old_string": "a", "new_string": "b"}),
    );
    run_ok(&repo, agent([edit, Turn::text("done")]), MAKE_A_FILE);
    let input = read_json(&marks.join("edit.json"));
    assert_eq!(input["tool_name"], "Edit");
    assert_eq!(input["tool_input"]["old_string"], "a");
    assert_eq!(input["tool_input"]["new_string"], "b");
    let cwd = std::fs::canonicalize(repo.path()).unwrap();
    assert_eq!(
        input["tool_input"]["file_path"],
        cwd.join("a.txt").display().to_string()
    );
    assert!(input["tool_input"].get("path").is_none(), "{input}");
}

#[test]
fn a_hook_in_ahelpers_names_keeps_them_and_tool_names_can_choose() {
    let hooks = [
        hook("PreToolUse", "run_command", "cat > {marks}/ours.json"),
        "[[hooks.PreToolUse]]\ntool_names = \"claude-code\"\n\
         hooks = [{ type = \"command\", command = \"cat > {marks}/all.json\" }]\n"
            .to_string(),
    ]
    .concat();
    let (repo, marks) = repo_with_hooks(&hooks);
    run_ok(&repo, command_then_answer("true"), MAKE_A_FILE);
    assert_eq!(
        read_json(&marks.join("ours.json"))["tool_name"],
        "run_command"
    );
    assert_eq!(read_json(&marks.join("all.json"))["tool_name"], "Bash");
}

#[test]
fn a_matcher_that_matches_no_tool_is_a_warning_at_start_up() {
    let (repo, _) = repo_with_hooks(&hook("PreToolUse", "Bsh", "exit 2"));
    run_ok(&repo, agent([Turn::text("hi")]), &["-p", "hello"])
        .1
        .stderr(predicates::str::contains(
            "the hooks.PreToolUse matcher `Bsh` matches no tool, so its hooks never run",
        ));
}
