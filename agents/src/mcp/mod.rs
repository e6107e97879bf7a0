//! The MCP client: ahelper uses the tools of Model Context Protocol servers
//! (<https://modelcontextprotocol.io/specification>) through the official Rust SDK, `rmcp`
//! (stdio and streamable HTTP transports).
//!
//! - [`config`]: where servers are declared (`.mcp.json`, `--mcp-config`, `[mcp_servers]`).
//! - [`approval`]: a project `.mcp.json` starts only after the user approved its content.
//! - [`hub`]: starting servers (with a timeout), their status, shutting them down.
//! - [`tool`]: a server's tool as an agent tool named `mcp__<server>__<tool>`.

pub mod approval;
pub mod config;
pub mod hub;
pub mod tool;

pub use config::{McpConfigError, McpServerFile, McpServerSpec, McpTransport, ServerOrigin};
pub use hub::{McpHub, ServerReport, ServerStatus, ToolSummary};

use std::path::{Path, PathBuf};

/// A project `.mcp.json` the user has not approved (with this content).
#[derive(Debug, Clone)]
pub struct UnapprovedProjectFile {
    /// The file.
    pub file: PathBuf,
    /// SHA-256 of its content, recorded by [`UnapprovedProjectFile::approve`].
    pub hash: String,
    /// Its servers (started only once approved).
    pub servers: Vec<McpServerSpec>,
}

impl UnapprovedProjectFile {
    /// The server names, comma-separated (for the question and the warning).
    pub fn names(&self) -> String {
        self.servers
            .iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Records the user's approval in `state_dir`; returns the record's path.
    ///
    /// # Errors
    /// The record cannot be written.
    pub fn approve(&self, state_dir: &Path) -> std::io::Result<PathBuf> {
        approval::approve(&self.file, &self.hash, state_dir)
    }
}

/// The servers a session may start, and the project servers that wait for approval.
#[derive(Debug, Clone, Default)]
pub struct DeclaredServers {
    /// Servers to start: `[mcp_servers]`, an approved `.mcp.json`, `--mcp-config` files (a
    /// later source replaces a server of the same name).
    pub trusted: Vec<McpServerSpec>,
    /// The workspace's `.mcp.json` when it has servers and is not approved.
    pub unapproved: Option<UnapprovedProjectFile>,
}

impl DeclaredServers {
    /// Every server, the unapproved project ones included (after the user said yes).
    pub fn with_project_servers(mut self) -> Vec<McpServerSpec> {
        if let Some(project) = self.unapproved.take() {
            // The command line still wins over the project file.
            let (cli, rest): (Vec<_>, Vec<_>) = self
                .trusted
                .into_iter()
                .partition(|s| matches!(s.origin, ServerOrigin::CommandLine(_)));
            return config::merge(config::merge(rest, project.servers), cli);
        }
        self.trusted
    }
}

/// Reads every source of MCP servers for a session in `config.workspace_root`: `[mcp_servers]`
/// of the configuration, the workspace's `.mcp.json` (trusted when approved in the state
/// directory of `env` or named in `cli_files`), and the `--mcp-config` files; `${VAR}` is read
/// from `env`.
///
/// # Errors
/// [`McpConfigError`] naming the file and key of a bad entry, or an unreadable
/// `--mcp-config` file.
pub fn declared_servers(
    config: &crate::config::Config,
    cli_files: &[PathBuf],
    env: &crate::config::EnvSnapshot,
) -> Result<DeclaredServers, McpConfigError> {
    let state_dir = env.state_dir();
    let state_dir = state_dir.as_deref();
    let lookup = |name: &str| env.get(name).map(str::to_string);
    let mut trusted = config::from_config(&config.merged.mcp_servers, &lookup)?;
    let project = config::project_file(&config.workspace_root);
    let named_on_cli = cli_files.iter().any(|f| same_file(f, &project));
    let mut unapproved = None;
    if !named_on_cli
        && let Some(servers) = config::read_json_file(
            &project,
            ServerOrigin::ProjectFile(project.clone()),
            true,
            &lookup,
        )?
        && !servers.is_empty()
    {
        match approval::state(&project, state_dir) {
            Ok(approval::ApprovalState::Approved) => trusted = config::merge(trusted, servers),
            Ok(approval::ApprovalState::NotApproved { hash }) => {
                unapproved = Some(UnapprovedProjectFile {
                    file: project.clone(),
                    hash,
                    servers,
                });
            }
            Err(source) => {
                return Err(McpConfigError::Read {
                    path: project,
                    source,
                });
            }
        }
    }
    for file in cli_files {
        let servers = config::read_json_file(
            file,
            ServerOrigin::CommandLine(file.clone()),
            false,
            &lookup,
        )?
        .unwrap_or_default();
        trusted = config::merge(trusted, servers);
    }
    Ok(DeclaredServers {
        trusted,
        unapproved,
    })
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}
