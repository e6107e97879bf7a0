//! MCP servers through the built binary: the real `@modelcontextprotocol/server-everything`
//! from npm (stdio), and `tests/data/mcp/mini_server.py` for the failure cases (a server that
//! crashes at start, hangs at `initialize`, dies mid-session) and for streamable HTTP.
//! The fake model calls `mcp__<server>__<tool>`; what the tools returned is read back from the
//! requests the fake server recorded.

use super::support::scripts::*;
use super::support::*;
use ahelper_fake_llm::{Conversation, FakeLlm, Script, Turn};
use predicates::prelude::PredicateBooleanExt;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

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

/// Every `tool_result` block of the last model request: (content, is_error).
fn tool_results(server: &FakeLlm) -> Vec<(String, bool)> {
    let requests = server.model_requests();
    let last = requests.last().expect("the model was asked");
    last.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|b| b["type"] == "tool_result")
        .map(|b| {
            let content = match &b["content"] {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (content, b["is_error"] == json!(true))
        })
        .collect()
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

/// A repository with `a.txt` and a server file with the `mini` test server; (repository,
/// server file).
fn repo_with_mini() -> (TestRepo, PathBuf) {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let file = servers_file(
        &repo,
        json!({"mini": stdio("python3", &[&mini_server(), "ok"])}),
    );
    (repo, file)
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
    let results = tool_results(&server);
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
    let (repo, file) = repo_with_mini();
    let server = calling(&[("mcp__mini__shout", json!({"text": "hi"}))]);
    let stderr = run_with_servers(&repo, &server, &file, &["-p", "shout"]);
    assert!(
        stderr.contains("refused mcp__mini__shout")
            && stderr.contains("--allowedTools 'mcp__mini__shout'"),
        "no refusal on stderr:\n{stderr}"
    );
    let results = tool_results(&server);
    assert!(results[0].1, "{results:?}");
    assert!(!results[0].0.contains("HI"), "{results:?}");
}

#[test]
fn results_errors_and_images_of_a_server_go_back_as_tool_results() {
    let (repo, file) = repo_with_mini();
    let server = calling(&[
        ("mcp__mini__shout", json!({"text": "quiet please"})),
        ("mcp__mini__fail", json!({})),
        ("mcp__mini__picture", json!({})),
    ]);
    run_with_servers(
        &repo,
        &server,
        &file,
        &["-p", "go", "--allowedTools", "mcp__mini"],
    );
    let results = tool_results(&server);
    assert_eq!(
        results,
        vec![
            ("QUIET PLEASE".to_string(), false),
            ("the fail tool failed".to_string(), true),
            ("[image: image/png, 8 bytes]".to_string(), false),
        ]
    );
}

#[test]
fn a_server_that_dies_mid_session_is_withdrawn_and_the_agent_goes_on() {
    let (repo, file) = repo_with_mini();
    let server = calling(&[
        ("mcp__mini__die", json!({})),
        ("mcp__mini__shout", json!({"text": "still there?"})),
        ("read_file", json!({"path": "a.txt"})),
    ]);
    run_with_servers(
        &repo,
        &server,
        &file,
        &["-p", "go", "--allowedTools", "mcp__mini__*"],
    );
    let results = tool_results(&server);
    assert_eq!(results.len(), 3, "{results:?}");
    assert!(
        results[0].1,
        "the call that killed the server is an error: {results:?}"
    );
    assert!(results[1].1, "{results:?}");
    assert!(
        results[1].0.contains("MCP server `mini` has stopped")
            && results[1].0.contains("dying as asked"),
        "{results:?}"
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
        !after.iter().any(|t| t.starts_with("mcp__mini")),
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
            "mini": stdio("python3", &[&mini_server(), "ok"]),
        }),
    );
    let server = calling(&[("mcp__mini__shout", json!({"text": "ok"}))]);
    let started = std::time::Instant::now();
    let stderr = run_with_servers(
        &repo,
        &server,
        &file,
        &["-p", "go", "--allowedTools", "mcp__mini__shout"],
    );
    assert!(
        stderr.contains("MCP server `crashes` did not start")
            && stderr.contains("cannot open the database"),
        "{stderr}"
    );
    assert!(
        stderr.contains("MCP server `hangs` did not start: no answer to initialize within 1 s"),
        "{stderr}"
    );
    assert!(
        stderr
            .contains("MCP server `missing` did not start: cannot start `/nonexistent/mcp-server`"),
        "{stderr}"
    );
    assert_eq!(tool_results(&server), vec![("OK".to_string(), false)]);
    let tools = offered_tools(&server, 0);
    assert!(
        !tools.iter().any(|t| t.starts_with("mcp__hangs")),
        "{tools:?}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(60),
        "a hanging server must not hold the session"
    );
}

#[test]
fn a_project_mcp_json_needs_approval_and_print_mode_ignores_it_with_a_warning() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let project = repo.path().join(".mcp.json");
    write_json(
        &project,
        &json!({"mcpServers": {"mini": stdio("python3", &[&mini_server(), "ok"])}}),
    );
    let server = calling(&[("mcp__mini__shout", json!({"text": "x"}))]);
    let out = ahelper(&repo, &server, Wire::Anthropic)
        .args(["-p", "go", "--allowedTools", "mcp__mini__*"])
        .assert()
        .success()
        .get_output()
        .clone();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("ignoring the MCP servers of")
            && stderr.contains(".mcp.json (mini)")
            && stderr.contains("--mcp-config"),
        "{stderr}"
    );
    assert!(
        !offered_tools(&server, 0)
            .iter()
            .any(|t| t.starts_with("mcp__"))
    );

    // Approved (as the REPL records a "y"): started in -p too.
    let state = repo.home().join("state/ahelper");
    let ahelper_agents::mcp::approval::ApprovalState::NotApproved { hash } =
        ahelper_agents::mcp::approval::state(&project, Some(&state)).unwrap()
    else {
        panic!("approved before anyone approved it");
    };
    ahelper_agents::mcp::approval::approve(&project, &hash, &state).unwrap();
    let server = calling(&[("mcp__mini__shout", json!({"text": "x"}))]);
    ahelper(&repo, &server, Wire::Anthropic)
        .args(["-p", "go", "--allowedTools", "mcp__mini__*"])
        .assert()
        .success()
        .stderr(predicates::str::contains("ignoring the MCP servers").not());
    assert_eq!(tool_results(&server), vec![("X".to_string(), false)]);

    // A changed file asks again.
    write_json(
        &project,
        &json!({"mcpServers": {"mini": stdio("python3", &[&mini_server(), "ok", "changed"])}}),
    );
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
    assert_eq!(tool_results(&server), vec![("Y".to_string(), false)]);
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
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let port = loop {
        if let Ok(p) = std::fs::read_to_string(&port_file) {
            break p;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the HTTP server did not start"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let config_dir = repo.home().join("config/ahelper");
    std::fs::create_dir_all(&config_dir).unwrap();
    std::fs::write(
        config_dir.join("config.toml"),
        format!(
            "[mcp_servers.web]\nurl = \"http://127.0.0.1:{port}/mcp\"\n\n\
             [mcp_servers.local]\ncommand = \"python3\"\nargs = [\"{}\", \"ok\"]\n\n\
             [permissions]\nallow = [\"mcp__web\", \"mcp__local__*\"]\n",
            mini_server()
        ),
    )
    .unwrap();
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
        tool_results(&server),
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
    ahelper(&repo, &server, Wire::Anthropic)
        .args(["-p", "go", "--mcp-config"])
        .arg(&file)
        .assert()
        .code(2)
        .stderr(predicates::str::contains("bad.json").and(predicates::str::contains("comand")));
    let config_dir = repo.home().join("config/ahelper");
    std::fs::create_dir_all(&config_dir).unwrap();
    std::fs::write(
        config_dir.join("config.toml"),
        "[mcp_servers.y]\nargs = []\n",
    )
    .unwrap();
    ahelper(&repo, &server, Wire::Anthropic)
        .args(["-p", "go"])
        .assert()
        .code(2)
        .stderr(
            predicates::str::contains("MCP server `y`")
                .and(predicates::str::contains("needs `command`")),
        );
}

/// Whether process `pid` still runs (a zombie counts as ended).
fn running(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| {
            !stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
        .unwrap_or(false)
}

#[test]
fn a_stdio_server_gets_expanded_variables_and_ends_with_its_children() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let pid_file = repo.root().join("pids");
    let mut entry = stdio("python3", &[&mini_server(), "ok"]);
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
    let pids = std::fs::read_to_string(&pid_file).expect("the server started");
    assert_all_end(&pids, "the session");
}

/// Waits up to 10 s for every pid in `pids` (whitespace-separated) to end.
#[track_caller]
fn assert_all_end(pids: &str, what: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    for pid in pids.split_whitespace() {
        while running(pid) {
            assert!(
                std::time::Instant::now() < deadline,
                "process {pid} outlived {what}"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}

#[test]
fn swarm_workers_start_their_own_mcp_servers_in_their_worktrees() {
    let Some((node, entry)) = everything_server() else {
        return;
    };
    let repo = repo_with(&[("a.txt", "a\n")]);
    let pid_file = repo.root().join("pids");
    let mut mini = stdio("python3", &[&mini_server(), "ok"]);
    mini["env"] = json!({"MINI_PID_FILE": pid_file.display().to_string()});
    let file = servers_file(
        &repo,
        json!({"everything": stdio(&node, &[&entry, "stdio"]), "mini": mini}),
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
    assert!(
        !tool_names(coordinator)
            .iter()
            .any(|t| t.starts_with("mcp__")),
        "{:?}",
        tool_names(coordinator)
    );
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
    let pids = std::fs::read_to_string(&pid_file).expect("the worker started mini");
    assert_all_end(&pids, "the swarm");
}

#[test]
fn swarm_ignores_an_unapproved_project_mcp_file_without_a_terminal() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    write_json(
        &repo.path().join(".mcp.json"),
        &json!({"mcpServers": {"mini": stdio("python3", &[&mini_server(), "ok"])}}),
    );
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
    let mut entry = stdio("python3", &[&mini_server(), "ok"]);
    entry["tool_timeout_s"] = json!(1);
    let file = servers_file(&repo, json!({"mini": entry}));
    let server = calling(&[
        ("mcp__mini__stall", json!({})),
        ("read_file", json!({"path": "a.txt"})),
    ]);
    let started = std::time::Instant::now();
    ahelper(&repo, &server, Wire::Anthropic)
        .args(["-p", "go", "--allowedTools", "mcp__mini__*", "--mcp-config"])
        .arg(&file)
        .assert()
        .success();
    let results = tool_results(&server);
    assert!(results[0].1, "{results:?}");
    assert!(
        results[0]
            .0
            .contains("MCP server `mini` did not answer the call of `stall` within 1 s"),
        "{results:?}"
    );
    assert!(!results[1].1, "{results:?}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(50),
        "the stalled server is ended at exit, not waited for"
    );
}

#[test]
fn a_killed_ahelper_leaves_no_mcp_server_behind() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let pid_file = repo.root().join("pids");
    let mut entry = stdio("python3", &[&mini_server(), "ok"]);
    entry["env"] = json!({"MINI_PID_FILE": pid_file.display().to_string()});
    let file = servers_file(&repo, json!({"mini": entry}));
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
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while server.model_requests().is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "ahelper never asked the model"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let pids = std::fs::read_to_string(&pid_file).expect("the server started");
    child.kill().unwrap(); // SIGKILL: no shutdown code runs
    child.wait().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    for pid in pids.split_whitespace() {
        while running(pid) {
            assert!(
                std::time::Instant::now() < deadline,
                "process {pid} outlived a killed ahelper"
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}
