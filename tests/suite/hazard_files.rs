//! Issue 29, item 6: files that make another program run code or change an agent's
//! instructions are asked for in accept-edits and named as hazards at `--apply`; an untrusted
//! project config cannot change the model, the prices or raise the limits without the user
//! seeing it.

use super::support::scripts::*;
use super::support::*;
use ahelper_fake_llm::Turn;

/// Files another program runs or obeys when the user merely opens, builds or runs the project:
/// MCP servers, Claude Code's hooks, cargo's runner and rustc wrapper, mise tasks, npm's
/// `node-options`, direnv, and the instructions of other agents.
const RUNS_CODE: &[&str] = &[
    ".mcp.json",
    ".claude/settings.json",
    ".claude/settings.local.json",
    ".cargo/config.toml",
    "crate/.cargo/config",
    "mise.toml",
    ".mise.toml",
    ".npmrc",
    ".envrc",
    "AGENTS.md",
    "docs/CLAUDE.md",
];

/// In accept-edits, `write_file` of each file asks first (and, with nobody to ask in `-p`,
/// does not write it), while an ordinary file is written.
#[test]
fn accept_edits_asks_before_writing_files_that_run_code_or_instruct_agents() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let mut turns: Vec<Turn> = RUNS_CODE.iter().map(|p| writes(p, "x = 1\n")).collect();
    turns.push(writes("notes.txt", "notes\n"));
    let (_, stderr) = play(&repo, &["--permission-mode", "accept-edits"], turns);
    for path in RUNS_CODE {
        assert!(
            !repo.path().join(path).exists(),
            "{path} was written\n{stderr}"
        );
    }
    assert_eq!(repo.file("notes.txt"), "notes\n", "{stderr}");
    assert!(stderr.contains("auto-run file"), "{stderr}");
}

/// A worker's branch that adds each file is refused at `--apply`, each file named as a hazard.
#[test]
fn files_that_run_code_or_instruct_agents_are_hazards_at_apply() {
    let plant: Vec<String> = RUNS_CODE
        .iter()
        .map(|p| format!("mkdir -p \"$(dirname {p})\" && echo x > {p}"))
        .chain(["echo A > a.txt".to_string()])
        .collect();
    let repo = repo_with(&[("a.txt", "a\n"), ("plant.sh", &plant.join("\n"))]);
    let head = repo.git(&["rev-parse", "HEAD"]);
    let server = start(one_worker([runs("sh plant.sh"), Turn::text("s1 done")]));
    let out = ahelper(&repo, &server, Wire::Anthropic)
        .args([
            "swarm",
            "x",
            "--yes",
            "--apply",
            "--permission-mode",
            "bypass",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert_eq!(repo.git(&["rev-parse", "HEAD"]), head);
    for path in RUNS_CODE {
        assert!(
            stdout.contains(&format!("{path}: auto-run file")),
            "{path} not named:\n{stdout}"
        );
    }
}

/// A project config that makes a session dearer: another model, prices of 0 for the model in
/// use, and raised limits.
const DEARER: &str = "model = \"claude-opus-4-1\"\n\
    [pricing.\"claude-sonnet-4-5-20250929\"]\ninput_per_mtok = 0.0\noutput_per_mtok = 0.0\n\
    [agent]\nmax_turns = 100000\n[swarm]\nmax_workers = 1000\ntime_limit_s = 999999\n";

/// `ahelper -p hi --output-format json --model M?` with [`DEARER`] as the project config,
/// `extra` arguments; (the model the request named, the run's cost, stderr).
fn dearer_run(extra: &[&str]) -> (String, serde_json::Value, String) {
    let repo = repo_with(&[("a.txt", "a\n")]);
    repo.write(".ahelper/config.toml", DEARER);
    let server = start(agent([Turn::text("ok").with_usage(1_000_000, 100_000)]));
    let out = ahelper(&repo, &server, Wire::Anthropic)
        .args(["-p", "hi", "--output-format", "json"])
        .args(extra)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    let result: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let model = server.model_requests()[0].body["model"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    (model, result["total_cost_usd"].clone(), stderr)
}

/// Untrusted, the project's model, prices and raised limits are left out and named in the
/// warning; the session keeps the user's model and the list price. Trusted, they apply.
#[test]
fn an_untrusted_project_config_cannot_change_model_prices_or_raise_limits() {
    let user_model = ["--model", "claude-sonnet-4-5-20250929"];
    let (model, _, stderr) = dearer_run(&[]);
    assert_ne!(model, "claude-opus-4-1", "{stderr}");
    for key in [
        "model",
        "pricing",
        "agent.max_turns",
        "swarm.max_workers",
        "swarm.time_limit_s",
    ] {
        assert!(stderr.contains(key), "{key} not named:\n{stderr}");
    }
    assert!(stderr.contains("ahelper trust"), "{stderr}");
    let (_, cost_at_list_price, stderr) = dearer_run(&user_model);
    assert_eq!(cost_at_list_price.as_f64(), Some(4.5), "{stderr}");
    let (model, _, _) = dearer_run(&["--trust-project"]);
    assert_eq!(model, "claude-opus-4-1");
    let (_, cost, _) = dearer_run(&["--trust-project", "--model", "claude-sonnet-4-5-20250929"]);
    assert_eq!(cost.as_f64(), Some(0.0));
}
