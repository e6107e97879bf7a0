//! Which MCP servers a session starts: the trusted ones at once, the workspace's `.mcp.json`
//! after the user approved it (a question before the REPL starts; in `-p` a warning and the
//! file is ignored). The decisions are `ahelper_agents::mcp`'s; this module asks and prints.

use ahelper_agents::config::{Config, EnvSnapshot};
use ahelper_agents::mcp::{self, DeclaredServers, McpHub};
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::Arc;

/// Whether the user can be asked about an unapproved `.mcp.json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asking {
    /// The REPL on a terminal: ask once.
    Interactive,
    /// `-p` and other headless runs: never start unapproved servers.
    Headless,
}

/// Reads the server declarations, settles the approval of `.mcp.json`, starts the servers
/// (failures are printed on stderr; the session goes on without them) and returns the hub.
///
/// # Errors
/// A bad server file or entry (message names the file and key).
pub fn start(
    rt: &tokio::runtime::Runtime,
    config: &Config,
    env: &EnvSnapshot,
    cli_files: &[PathBuf],
    asking: Asking,
) -> Result<Arc<McpHub>, String> {
    let state_dir = env.state_dir();
    let declared = mcp::declared_servers(config, cli_files, env).map_err(|e| e.to_string())?;
    let specs = settle_approval(declared, asking, state_dir, &mut ask);
    if specs.is_empty() {
        return Ok(Arc::new(McpHub::default()));
    }
    let sandbox = mcp::ServerSandbox::new(
        Arc::new(ahelper_agents::sandbox_os::CommandSandbox::new(
            &config.sandbox,
            &config.workspace_root,
        )),
        config.permissions.rules.deny.clone(),
    );
    let hub = rt.block_on(McpHub::start(specs, &config.workspace_root, &sandbox));
    for failure in hub.startup_failures() {
        eprintln!("ahelper: {failure}; going on without its tools");
    }
    Ok(Arc::new(hub))
}

/// The servers to start once the project file is settled: asked about in the REPL, left out
/// with a warning otherwise.
fn settle_approval(
    declared: DeclaredServers,
    asking: Asking,
    state_dir: Option<PathBuf>,
    ask: &mut dyn FnMut(&str) -> bool,
) -> Vec<mcp::McpServerSpec> {
    let Some(project) = declared.unapproved.clone() else {
        return declared.trusted;
    };
    let file = project.file.display();
    let names = project.names();
    let reasons = project.reasons_text();
    if asking == Asking::Headless {
        eprintln!(
            "ahelper: warning: ignoring the MCP servers of {file} ({names}): {reasons}. Approve \
             it once in the REPL (run `ahelper` here), or name it with `--mcp-config {file}` to \
             start them."
        );
        return declared.trusted;
    }
    let approved = ask(&format!(
        "{file} wants to start MCP servers: {names} ({reasons}):\n{}\n\
         They run programs on this machine, stdio ones in the command sandbox (writes only in \
         the workspace and their temp dir; network as `[sandbox] network` says).\n\
         Start them and remember this answer for this content and these files? [y/N] ",
        project.describe().join("\n")
    ));
    if !approved {
        eprintln!("ahelper: not starting the servers of {file}; you will be asked again next time");
        return declared.trusted;
    }
    match state_dir.map(|d| project.approve(&d)) {
        Some(Ok(_)) => {}
        Some(Err(e)) => eprintln!("ahelper: could not remember the approval of {file}: {e}"),
        None => eprintln!(
            "ahelper: no state directory (set HOME or XDG_STATE_HOME); the approval of {file} is for this session only"
        ),
    }
    declared.with_project_servers()
}

/// Asks a yes/no question on stderr, reads the answer from stdin.
fn ask(question: &str) -> bool {
    eprint!("{question}");
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line).is_err() {
        return false;
    }
    matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

/// The servers every worker of `ahelper swarm` starts for itself (in its worktree): the same
/// ones a session would start — the workspace's `.mcp.json` once approved (asked here when
/// `asking` allows, else left out with a warning), `[mcp_servers]`, `--mcp-config` files.
///
/// # Errors
/// A bad server file or entry (message names the file and key).
pub fn for_swarm(
    config: &Config,
    env: &EnvSnapshot,
    cli_files: &[PathBuf],
    asking: Asking,
) -> Result<Vec<mcp::McpServerSpec>, String> {
    let declared = mcp::declared_servers(config, cli_files, env).map_err(|e| e.to_string())?;
    Ok(settle_approval(declared, asking, env.state_dir(), &mut ask))
}

/// What `/mcp` prints: each server with its status and endpoint, then its tools.
pub fn describe_servers(hub: &McpHub) -> String {
    use ahelper_agents::mcp::ServerStatus;
    let report = hub.report();
    if report.is_empty() {
        return "No MCP servers. Declare them in .mcp.json, with --mcp-config FILE, or under \
                [mcp_servers.NAME] in config.toml.\n"
            .to_string();
    }
    let mut out = String::from("MCP servers:\n");
    for server in report {
        let status = match &server.status {
            ServerStatus::Running => format!("running, {} tools", server.tools.len()),
            ServerStatus::Stopped => "stopped (its tools are withdrawn)".to_string(),
            ServerStatus::Failed(reason) => format!("failed: {reason}"),
        };
        out.push_str(&format!(
            "  {}  {status}\n    {}\n",
            server.name, server.endpoint
        ));
        if server.status == ServerStatus::Running {
            for tool in &server.tools {
                let hint = if tool.read_only_hint {
                    " (server says read-only)"
                } else {
                    ""
                };
                out.push_str(&format!("    - {}{hint}\n", tool.name));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ahelper_agents::mcp::{McpServerSpec, McpTransport, ServerOrigin};
    use std::collections::BTreeMap;
    use std::time::Duration;

    fn stdio(name: &str, command: &str, args: &[&str]) -> McpServerSpec {
        McpServerSpec {
            name: name.into(),
            transport: McpTransport::Stdio {
                command: command.into(),
                args: args.iter().map(|a| a.to_string()).collect(),
                env: BTreeMap::new(),
            },
            startup_timeout: Duration::from_secs(30),
            tool_timeout: Duration::from_secs(30),
            origin: ServerOrigin::Config,
            declared: Default::default(),
            files: Vec::new(),
        }
    }

    #[test]
    fn the_repl_question_approves_and_remembers_a_project_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(".mcp.json");
        std::fs::write(&file, "{}").unwrap();
        let state = dir.path().join("state");
        let declared = || DeclaredServers {
            trusted: vec![stdio("user", "u", &[])],
            unapproved: Some(ahelper_agents::mcp::UnapprovedProjectFile {
                file: file.clone(),
                content: ahelper_agents::mcp::approval::ApprovedContent::of(b"{}", &[]),
                reasons: vec![ahelper_agents::mcp::approval::Unapproved::Never],
                servers: vec![stdio("project", "p", &[])],
            }),
        };
        let names = |specs: Vec<McpServerSpec>| -> Vec<String> {
            specs.into_iter().map(|s| s.name).collect()
        };
        let settle = |asking: Asking, ask: &mut dyn FnMut(&str) -> bool| {
            settle_approval(declared(), asking, Some(state.clone()), ask)
        };
        let mut asked = Vec::new();
        let mut no = |q: &str| {
            asked.push(q.to_string());
            false
        };
        let specs = settle(Asking::Interactive, &mut no);
        assert_eq!(names(specs), ["user"]);
        assert!(asked[0].contains(".mcp.json wants to start MCP servers: project ("));
        let mut never = |_: &str| panic!("-p never asks");
        let specs = settle(Asking::Headless, &mut never);
        assert_eq!(names(specs), ["user"]);
        let mut yes = |_: &str| true;
        let specs = settle(Asking::Interactive, &mut yes);
        assert_eq!(names(specs), ["user", "project"]);
        assert_eq!(
            ahelper_agents::mcp::approval::state(&file, &[], Some(&state)).unwrap(),
            ahelper_agents::mcp::approval::ApprovalState::Approved
        );
    }

    #[test]
    fn slash_mcp_lists_servers_status_and_tools() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/mcp/mini_server.py");
        let dir = tempfile::tempdir().unwrap();
        let hub = rt.block_on(McpHub::start(
            vec![
                stdio("mini", "python3", &[script, "ok"]),
                stdio("gone", "/nonexistent/server", &[]),
            ],
            dir.path(),
            &Default::default(),
        ));
        let text = describe_servers(&hub);
        rt.block_on(hub.shutdown());
        assert!(text.starts_with("MCP servers:\n"), "{text}");
        assert!(text.contains("  mini  running, 5 tools\n"), "{text}");
        assert!(text.contains("    - mcp__mini__shout\n"), "{text}");
        assert!(
            text.contains("    - mcp__mini__picture (server says read-only)\n"),
            "{text}"
        );
        assert!(
            text.contains("  gone  failed: MCP server `gone` did not start: cannot start `/nonexistent/server`"),
            "{text}"
        );
        assert!(describe_servers(&McpHub::default()).starts_with("No MCP servers."));
    }
}
