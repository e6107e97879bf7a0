//! MCP servers through the built binary: the real `@modelcontextprotocol/server-everything`
//! from npm (stdio), and `tests/data/mcp/mini_server.py` for the failure cases (a server that
//! crashes at start, hangs at `initialize`, dies mid-session) and for streamable HTTP.
//! The fake model calls `mcp__<server>__<tool>`; what the tools returned is read back from the
//! requests the fake server recorded.

use super::support::config::write_user_config;
use super::support::requests::last_tool_results;
use super::support::scripts::*;
use super::support::text::assert_contains_all;
use super::support::wait::wait_for;
use super::support::*;
use ahelper_fake_llm::{Conversation, FakeLlm, Script, Turn};
use predicates::prelude::PredicateBooleanExt;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Version of `@modelcontextprotocol/server-everything` the tests run (also in `.ci/run`).
const EVERYTHING_VERSION: &str = "2026.8.31";

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn mini_server() -> String {
    manifest_dir()
        .join("tests/data/mcp/mini_server.py")
        .display()
        .to_string()
}

/// `node` and the server-everything entry point (installed into `.ci/node` by `.ci/run`, or
/// here on first use); `None` (with the reason printed) when node or npm is missing.
fn everything_server() -> Option<(String, String)> {
    static FOUND: OnceLock<Result<String, String>> = OnceLock::new();
    let found = FOUND.get_or_init(|| {
        let prefix = manifest_dir().join(".ci/node");
        let entry =
            prefix.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
        if std::process::Command::new("node")
            .arg("--version")
            .output()
            .is_err()
        {
            return Err("node is not installed".into());
        }
        if !entry.exists() {
            let status = std::process::Command::new("npm")
                .args(["install", "--no-audit", "--no-fund", "--prefix"])
                .arg(&prefix)
                .arg(format!(
                    "@modelcontextprotocol/server-everything@{EVERYTHING_VERSION}"
                ))
                .status()
                .map_err(|e| format!("npm cannot run: {e}"))?;
            assert!(status.success(), "npm install of server-everything failed");
        }
        Ok(entry.display().to_string())
    });
    match found {
        Ok(entry) => Some(("node".to_string(), entry.clone())),
        Err(reason) => {
            eprintln!("skipping: {reason}");
            None
        }
    }
}

/// A fake model that calls `calls` one after the other, then answers `Done.`.
fn calling(calls: &[(&str, Value)]) -> FakeLlm {
    let mut conversation = Conversation::new();
    for (name, args) in calls {
        conversation = conversation.turn(Turn::tool_call(*name, args.clone()));
    }
    start(Script::new().with_conversation(conversation.turn(Turn::text("Done."))))
}

/// Whether any of `tools` is named `prefix…`.
fn any_named(tools: &[String], prefix: &str) -> bool {
    tools.iter().any(|t| t.starts_with(prefix))
}

/// Tool names offered in model request `index`.
fn offered_tools(server: &FakeLlm, index: usize) -> Vec<String> {
    tool_names(&server.model_requests()[index])
}

fn write_json(path: &Path, value: &Value) {
    std::fs::write(path, serde_json::to_vec_pretty(value).unwrap()).unwrap();
}

/// A server file beside the repository (outside the workspace) for `--mcp-config`.
fn servers_file(repo: &TestRepo, servers: Value) -> PathBuf {
    let path = repo.root().join("servers.json");
    write_json(&path, &json!({ "mcpServers": servers }));
    path
}

fn stdio(command: &str, args: &[&str]) -> Value {
    json!({"command": command, "args": args})
}

/// The server entry of the `mini` test server that works.
fn mini() -> Value {
    stdio("python3", &[&mini_server(), "ok"])
}

/// [`mini`], which writes its pid and its child's to `pid_file`.
fn mini_writing_pids(pid_file: &Path) -> Value {
    let mut entry = mini();
    entry["env"] = json!({"MINI_PID_FILE": pid_file.display().to_string()});
    entry
}

/// Where a server may write its pids: a file in a directory beside the repository, which the
/// user config makes writable for sandboxed servers (`[sandbox] writable`).
fn writable_pid_file(repo: &TestRepo) -> PathBuf {
    let out = repo.root().join("out");
    std::fs::create_dir_all(&out).unwrap();
    write_user_config(
        repo,
        &format!("[sandbox]\nwritable = [\"{}\"]\n", out.display()),
    );
    out.join("pids")
}

/// A project's `.mcp.json` in `repo` naming `mini` with `args`.
fn write_project_servers(repo: &TestRepo, args: &[&str]) {
    let server = mini_server();
    let mini_args = [&[server.as_str()], args].concat();
    let servers = json!({"mcpServers": {"mini": stdio("python3", &mini_args)}});
    write_json(&repo.path().join(".mcp.json"), &servers);
}

/// `ahelper args… --mcp-config servers.json` in a repository with `a.txt`, whose server file
/// names the `mini` test server, against a model that makes `calls`; (the model, the stderr).
fn run_mini(calls: &[(&str, Value)], args: &[&str]) -> (FakeLlm, String) {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let file = servers_file(&repo, json!({"mini": mini()}));
    let server = calling(calls);
    let stderr = run_with_servers(&repo, &server, &file, args);
    (server, stderr)
}

/// Runs `ahelper args… --mcp-config file` in `repo` against `server` and asserts it succeeds;
/// its stderr.
fn run_with_servers(repo: &TestRepo, server: &FakeLlm, file: &Path, args: &[&str]) -> String {
    let out = ahelper(repo, server, Wire::Anthropic)
        .args(args)
        .arg("--mcp-config")
        .arg(file)
        .assert()
        .success()
        .get_output()
        .clone();
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn the_model_calls_server_everything_echo_and_get_sum() {
    let Some((node, entry)) = everything_server() else {
        return;
    };
    let repo = repo_with(&[("a.txt", "a\n")]);
    let file = servers_file(
        &repo,
        json!({"everything": stdio(&node, &[&entry, "stdio"])}),
    );
    let server = calling(&[
        (
            "mcp__everything__echo",
            json!({"message": "hello from ahelper"}),
        ),
        ("mcp__everything__get-sum", json!({"a": 2, "b": 40})),
        ("mcp__everything__get-tiny-image", json!({})),
    ]);
    let stderr = run_with_servers(
        &repo,
        &server,
        &file,
        &[
            "-p",
            "use the tools",
            "--allowedTools",
            "mcp__everything__*",
        ],
    );
    let results = last_tool_results(&server);
    assert_eq!(results.len(), 3, "{results:?}\n{stderr}");
    assert_eq!(results[0], ("Echo: hello from ahelper".to_string(), false));
    assert!(
        results[1].0.contains("The sum of 2 and 40 is 42."),
        "{results:?}"
    );
    assert!(
        results[2].0.contains("[image: image/png, ") && results[2].0.contains(" bytes]"),
        "{results:?}"
    );
    let tools = offered_tools(&server, 0);
    assert!(
        tools.contains(&"mcp__everything__echo".to_string()),
        "{tools:?}"
    );
    assert!(tools.contains(&"read_file".to_string()));
    // The server's JSON Schema is the input schema.
    let echo = server.model_requests()[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "mcp__everything__echo")
        .cloned()
        .unwrap();
    assert_eq!(
        echo["input_schema"]["properties"]["message"]["type"],
        "string"
    );
}

#[test]
fn mcp_tools_ask_by_default_so_print_mode_refuses_them() {
    let (server, stderr) = run_mini(
        &[("mcp__mini__shout", json!({"text": "hi"}))],
        &["-p", "shout"],
    );
    // the refusal, on stderr
    assert_contains_all(
        &stderr,
        &[
            "refused mcp__mini__shout",
            "--allowedTools 'mcp__mini__shout'",
        ],
    );
    let results = last_tool_results(&server);
    assert!(results[0].1, "{results:?}");
    assert!(!results[0].0.contains("HI"), "{results:?}");
}

#[test]
fn results_errors_and_images_of_a_server_go_back_as_tool_results() {
    let calls = [
        ("mcp__mini__shout", json!({"text": "quiet please"})),
        ("mcp__mini__fail", json!({})),
        ("mcp__mini__picture", json!({})),
    ];
    let (server, _) = run_mini(&calls, &["-p", "go", "--allowedTools", "mcp__mini"]);
    assert_eq!(
        last_tool_results(&server),
        vec![
            ("QUIET PLEASE".to_string(), false),
            ("the fail tool failed".to_string(), true),
            ("[image: image/png, 8 bytes]".to_string(), false),
        ]
    );
}

#[test]
fn a_server_that_dies_mid_session_is_withdrawn_and_the_agent_goes_on() {
    let calls = [
        ("mcp__mini__die", json!({})),
        ("mcp__mini__shout", json!({"text": "still there?"})),
        ("read_file", json!({"path": "a.txt"})),
    ];
    let (server, _) = run_mini(&calls, &["-p", "go", "--allowedTools", "mcp__mini__*"]);
    let results = last_tool_results(&server);
    assert_eq!(results.len(), 3, "{results:?}");
    assert!(
        results[0].1,
        "the call that killed the server is an error: {results:?}"
    );
    assert!(results[1].1, "{results:?}");
    assert_contains_all(
        &results[1].0,
        &["MCP server `mini` has stopped", "dying as asked"],
    );
    assert!(
        !results[2].1,
        "the agent goes on with its own tools: {results:?}"
    );
    let before = offered_tools(&server, 0);
    let after = offered_tools(&server, 3);
    assert!(
        before.contains(&"mcp__mini__shout".to_string()),
        "{before:?}"
    );
    assert!(
        !any_named(&after, "mcp__mini"),
        "withdrawn tools are no longer offered: {after:?}"
    );
}

#[test]
fn servers_that_fail_to_start_or_hang_are_reported_and_the_agent_goes_on() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let mut hang = stdio("python3", &[&mini_server(), "hang"]);
    hang["startup_timeout_s"] = json!(1);
    let file = servers_file(
        &repo,
        json!({
            "crashes": stdio("python3", &[&mini_server(), "crash"]),
            "hangs": hang,
            "missing": stdio("/nonexistent/mcp-server", &[]),
            "mini": mini(),
        }),
    );
    let server = calling(&[("mcp__mini__shout", json!({"text": "ok"}))]);
    let args = ["-p", "go", "--allowedTools", "mcp__mini__shout"];
    let stderr = within(
        Duration::from_secs(60),
        "a hanging server must not hold the session",
        || run_with_servers(&repo, &server, &file, &args),
    );
    assert_contains_all(
        &stderr,
        &[
            "MCP server `crashes` did not start",
            "cannot open the database",
            "MCP server `hangs` did not start: no answer to initialize within 1 s",
            "MCP server `missing` did not start: cannot start `/nonexistent/mcp-server`",
        ],
    );
    assert_eq!(last_tool_results(&server), vec![("OK".to_string(), false)]);
    let tools = offered_tools(&server, 0);
    assert!(!any_named(&tools, "mcp__hangs"), "{tools:?}");
}

#[test]
fn a_project_mcp_json_needs_approval_and_print_mode_ignores_it_with_a_warning() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let project = repo.path().join(".mcp.json");
    write_project_servers(&repo, &["ok"]);
    let server = calling(&[("mcp__mini__shout", json!({"text": "x"}))]);
    let out = ahelper(&repo, &server, Wire::Anthropic)
        .args(["-p", "go", "--allowedTools", "mcp__mini__*"])
        .assert()
        .success()
        .get_output()
        .clone();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_contains_all(
        &stderr,
        &[
            "ignoring the MCP servers of",
            ".mcp.json (mini)",
            "--mcp-config",
        ],
    );
    assert!(!any_named(&offered_tools(&server, 0), "mcp__"));

    // Approved (as the REPL records a "y"): started in -p too.
    let state = repo.home().join("state/ahelper");
    let ahelper_agents::mcp::approval::ApprovalState::NotApproved { content, .. } =
        ahelper_agents::mcp::approval::state(&project, &[], Some(&state)).unwrap()
    else {
        panic!("approved before anyone approved it");
    };
    ahelper_agents::mcp::approval::approve(&project, &content, &state).unwrap();
    let server = calling(&[("mcp__mini__shout", json!({"text": "x"}))]);
    ahelper(&repo, &server, Wire::Anthropic)
        .args(["-p", "go", "--allowedTools", "mcp__mini__*"])
        .assert()
        .success()
        .stderr(predicates::str::contains("ignoring the MCP servers").not());
    assert_eq!(last_tool_results(&server), vec![("X".to_string(), false)]);

    // A changed file asks again.
    write_project_servers(&repo, &["ok", "changed"]);
    let server = calling(&[]);
    ahelper(&repo, &server, Wire::Anthropic)
        .args(["-p", "go"])
        .assert()
        .success()
        .stderr(predicates::str::contains("ignoring the MCP servers of"));

    // Named on the command line: trusted.
    let server = calling(&[("mcp__mini__shout", json!({"text": "y"}))]);
    ahelper(&repo, &server, Wire::Anthropic)
        .args([
            "-p",
            "go",
            "--allowedTools",
            "mcp__mini__*",
            "--mcp-config",
            ".mcp.json",
        ])
        .assert()
        .success()
        .stderr(predicates::str::contains("ignoring the MCP servers").not());
    assert_eq!(last_tool_results(&server), vec![("Y".to_string(), false)]);
}

#[test]
fn config_toml_servers_and_rules_are_trusted_and_http_servers_work() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let port_file = repo.root().join("port");
    let mut http_server = std::process::Command::new("python3")
        .arg(mini_server())
        .arg("http")
        .arg(&port_file)
        .spawn()
        .expect("python3 runs");
    let mut port = String::new();
    wait_for("the HTTP server to start", Duration::from_secs(30), || {
        port = std::fs::read_to_string(&port_file).unwrap_or_default();
        !port.is_empty()
    });
    write_user_config(
        &repo,
        &format!(
            "[mcp_servers.web]\nurl = \"http://127.0.0.1:{port}/mcp\"\n\n\
             [mcp_servers.local]\ncommand = \"python3\"\nargs = [\"{}\", \"ok\"]\n\n\
             [permissions]\nallow = [\"mcp__web\", \"mcp__local__*\"]\n",
            mini_server()
        ),
    );
    let server = calling(&[
        ("mcp__web__shout", json!({"text": "over http"})),
        ("mcp__local__shout", json!({"text": "over stdio"})),
    ]);
    let out = ahelper(&repo, &server, Wire::Anthropic)
        .args(["-p", "go"])
        .output()
        .unwrap();
    let _ = http_server.kill();
    let _ = http_server.wait();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        last_tool_results(&server),
        vec![
            ("OVER HTTP".to_string(), false),
            ("OVER STDIO".to_string(), false)
        ]
    );
}

#[test]
fn bad_server_files_name_the_file_and_the_key() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let server = calling(&[]);
    let file = repo.root().join("bad.json");
    std::fs::write(&file, r#"{"mcpServers": {"x": {"comand": "node"}}}"#).unwrap();
    assert_usage_error(
        ahelper(&repo, &server, Wire::Anthropic)
            .args(["-p", "go", "--mcp-config"])
            .arg(&file),
        &["bad.json", "comand"],
    );
    write_user_config(&repo, "[mcp_servers.y]\nargs = []\n");
    assert_usage_error(
        ahelper(&repo, &server, Wire::Anthropic).args(["-p", "go"]),
        &["MCP server `y`", "needs `command`"],
    );
}

/// Runs `run` and asserts it took less than `limit`; `why` says why it must.
#[track_caller]
fn within<T>(limit: Duration, why: &str, run: impl FnOnce() -> T) -> T {
    let started = Instant::now();
    let result = run();
    assert!(started.elapsed() < limit, "{why}");
    result
}

#[test]
fn a_stdio_server_gets_expanded_variables_and_ends_with_its_children() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let pid_file = writable_pid_file(&repo);
    let mut entry = mini();
    // `${VAR}` is read from ahelper's environment, as Claude Code does.
    entry["env"] = json!({"MINI_PID_FILE": "${MINI_PIDS}"});
    let file = servers_file(&repo, json!({"mini": entry}));
    let server = calling(&[]);
    ahelper(&repo, &server, Wire::Anthropic)
        .env("MINI_PIDS", &pid_file)
        .args(["-p", "go", "--mcp-config"])
        .arg(&file)
        .assert()
        .success();
    std::fs::read_to_string(&pid_file).expect("the server started");
    assert_servers_end(&pid_file, "the session", Duration::from_secs(10));
}

/// The live processes of the `mini` servers (and their children) that write to `pid_file`:
/// found by their environment, since a sandboxed server lives in a PID namespace of its own and
/// writes the pids it sees there.
fn server_processes(pid_file: &Path) -> Vec<u32> {
    let needle = format!("MINI_PID_FILE={}", pid_file.display()).into_bytes();
    ahelper_agents::process_sweep::marked_pids(&[needle], std::process::id())
}

/// Waits up to `timeout` for every process of the servers writing to `pid_file` to end, after
/// `what`.
#[track_caller]
fn assert_servers_end(pid_file: &Path, what: &str, timeout: Duration) {
    wait_for(
        &format!("the MCP server's processes to end after {what}"),
        timeout,
        || server_processes(pid_file).is_empty(),
    );
}

#[test]
fn swarm_workers_start_their_own_mcp_servers_in_their_worktrees() {
    let Some((node, entry)) = everything_server() else {
        return;
    };
    let repo = repo_with(&[("a.txt", "a\n")]);
    let pid_file = writable_pid_file(&repo);
    let file = servers_file(
        &repo,
        json!({"everything": stdio(&node, &[&entry, "stdio"]), "mini": mini_writing_pids(&pid_file)}),
    );
    let server = start(one_worker([
        Turn::tool_call("mcp__everything__get-roots-list", json!({})),
        Turn::tool_call("mcp__mini__shout", json!({"text": "from w1"})),
        writes("a.txt", "A\n"),
        Turn::text("done"),
    ]));
    let out = ahelper(&repo, &server, Wire::Anthropic)
        .args(["swarm", "do it", "--yes", "--permission-mode", "bypass"])
        .arg("--mcp-config")
        .arg(&file)
        .assert()
        .success()
        .get_output()
        .clone();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let requests = server.model_requests();
    let coordinator = requests.iter().find(|r| r.conversation == Some(0)).unwrap();
    let worker: Vec<_> = requests
        .iter()
        .filter(|r| r.conversation == Some(1))
        .collect();
    // Tools by role: the coordinator's read-only role names no MCP tool; the worker's does.
    let offered = tool_names(coordinator);
    assert!(!any_named(&offered, "mcp__"), "{offered:?}");
    let offered = tool_names(worker[0]);
    assert!(
        offered.contains(&"mcp__mini__shout".to_string()),
        "{offered:?}\n{stderr}"
    );
    assert!(
        offered.contains(&"mcp__everything__get-roots-list".to_string()),
        "{offered:?}"
    );
    // The server's one root is the worker's worktree, not the user's checkout.
    let record: Value = serde_json::from_str(
        &std::fs::read_to_string(
            std::fs::read_dir(repo.path().join(".ahelper/runs"))
                .unwrap()
                .next()
                .unwrap()
                .unwrap()
                .path()
                .join("run.json"),
        )
        .unwrap(),
    )
    .unwrap();
    // (The worktree itself is removed once its branch merged.)
    let worktree = record["workers"][0]["worktree"].as_str().unwrap();
    let last = worker.last().unwrap().body.to_string();
    assert!(
        last.contains(&format!("file://{worktree}")),
        "roots: {last}"
    );
    assert!(last.contains("FROM W1"), "{last}");
    assert_eq!(
        repo.git(&[
            "show",
            &format!("{}:a.txt", record["integration_branch"].as_str().unwrap())
        ]),
        "A\n"
    );
    // The worker's servers ended with it.
    std::fs::read_to_string(&pid_file).expect("the worker started mini");
    assert_servers_end(&pid_file, "the swarm", Duration::from_secs(10));
}

#[test]
fn swarm_ignores_an_unapproved_project_mcp_file_without_a_terminal() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    write_project_servers(&repo, &["ok"]);
    let server = calling(&[]);
    ahelper(&repo, &server, Wire::Anthropic)
        .args(["swarm", "do it", "--plan-only"])
        .assert()
        .stderr(
            predicates::str::contains("ignoring the MCP servers of").and(
                predicates::str::contains("(mini): this file has not been approved"),
            ),
        );
}

#[test]
fn a_tool_call_that_hangs_times_out_and_the_agent_goes_on() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let mut entry = mini();
    entry["tool_timeout_s"] = json!(1);
    let file = servers_file(&repo, json!({"mini": entry}));
    let server = calling(&[
        ("mcp__mini__stall", json!({})),
        ("read_file", json!({"path": "a.txt"})),
    ]);
    let args = ["-p", "go", "--allowedTools", "mcp__mini__*"];
    within(
        Duration::from_secs(50),
        "the stalled server is ended at exit, not waited for",
        || run_with_servers(&repo, &server, &file, &args),
    );
    let results = last_tool_results(&server);
    assert!(results[0].1, "{results:?}");
    assert!(
        results[0]
            .0
            .contains("MCP server `mini` did not answer the call of `stall` within 1 s"),
        "{results:?}"
    );
    assert!(!results[1].1, "{results:?}");
}

#[test]
fn a_killed_ahelper_leaves_no_mcp_server_behind() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let pid_file = writable_pid_file(&repo);
    let file = servers_file(&repo, json!({"mini": mini_writing_pids(&pid_file)}));
    // The model takes a minute to answer: ahelper is killed while it waits.
    let server = start(
        Script::new()
            .with_conversation(Conversation::new().turn(Turn::text("Done.").with_delay_ms(60_000))),
    );
    let mut child = ahelper_process(&repo, &server, Wire::Anthropic)
        .args(["-p", "go", "--mcp-config"])
        .arg(&file)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_for("ahelper to ask the model", Duration::from_secs(60), || {
        !server.model_requests().is_empty()
    });
    wait_for("the server and its child", Duration::from_secs(30), || {
        server_processes(&pid_file).len() >= 2
    });
    child.kill().unwrap(); // SIGKILL: no shutdown code runs
    child.wait().unwrap();
    assert_servers_end(&pid_file, "a killed ahelper", Duration::from_secs(20));
}
