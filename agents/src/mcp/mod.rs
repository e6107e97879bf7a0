//! The MCP client: ahelper uses the tools of Model Context Protocol servers
//! (<https://modelcontextprotocol.io/specification>) through the official Rust SDK, `rmcp`
//! (stdio and streamable HTTP transports).
//!
//! - [`config`]: where servers are declared (`.mcp.json`, `--mcp-config`, `[mcp_servers]`).
//! - [`approval`]: a project `.mcp.json` starts only after the user approved its content and
//!   the content of the workspace files its servers name ([`files`]).
//! - [`hub`]: starting servers (with a timeout), their status, shutting them down.
//! - [`sandbox`]: stdio servers run in the command sandbox of their workspace.
//! - [`tool`]: a server's tool as an agent tool named `mcp__<server>__<tool>`.

pub mod approval;
pub mod config;
pub mod files;
pub mod hub;
pub mod sandbox;
pub mod tool;

pub use config::{McpConfigError, McpServerFile, McpServerSpec, McpTransport, ServerOrigin};
pub use hub::{McpHub, ServerReport, ServerStatus, ToolSummary};
pub use sandbox::ServerSandbox;

use std::path::{Path, PathBuf};

/// A project `.mcp.json` the user has not approved (with this content).
#[derive(Debug, Clone)]
pub struct UnapprovedProjectFile {
    /// The file.
    pub file: PathBuf,
    /// Its content and the content of the files its servers name, recorded by
    /// [`UnapprovedProjectFile::approve`].
    pub content: approval::ApprovedContent,
    /// Why it needs approval (never approved, or what changed since).
    pub reasons: Vec<approval::Unapproved>,
    /// Its servers (started only once approved).
    pub servers: Vec<McpServerSpec>,
}

impl UnapprovedProjectFile {
    /// The server names, comma-separated (for the question and the warning), control
    /// characters escaped.
    pub fn names(&self) -> String {
        self.servers
            .iter()
            .map(|s| s.name.escape_debug().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Records the user's approval in `state_dir`; returns the record's path.
    ///
    /// # Errors
    /// The record cannot be written.
    pub fn approve(&self, state_dir: &Path) -> std::io::Result<PathBuf> {
        approval::approve(&self.file, &self.content, state_dir)
    }

    /// Why it needs approval, `; `-separated (for the warning and the question); a changed
    /// file is named with the servers that run it.
    pub fn reasons_text(&self) -> String {
        self.reasons
            .iter()
            .map(|reason| match reason {
                approval::Unapproved::File(files::FileChange::Changed(path)) => format!(
                    "{} {}, which changed since the file was approved",
                    self.runners(path),
                    path.escape_debug()
                ),
                approval::Unapproved::File(files::FileChange::New(path)) => format!(
                    "{} {}, which the approval did not cover",
                    self.runners(path),
                    path.escape_debug()
                ),
                other => other.to_string().escape_debug().to_string(),
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// `server `a`, `b` runs` for the servers that name `path`.
    fn runners(&self, path: &str) -> String {
        let servers: Vec<String> = self
            .servers
            .iter()
            .filter(|s| s.files.iter().any(|f| f.path == path))
            .map(|s| format!("`{}`", s.name.escape_debug()))
            .collect();
        format!("server {} runs", servers.join(", "))
    }

    /// What the user approves, one line each: every server with its command and arguments (or
    /// URL and headers), environment, the workspace files it runs and the variables it expands
    /// (as written in the file: `${VAR}`, never a value).
    pub fn describe(&self) -> Vec<String> {
        self.servers.iter().flat_map(describe_server).collect()
    }
}

/// The lines of [`UnapprovedProjectFile::describe`] for one server.
fn describe_server(spec: &McpServerSpec) -> Vec<String> {
    let e = &spec.declared;
    let quoted = |items: &[String]| -> String {
        items
            .iter()
            .map(|a| format!("{a:?}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    // Everything from the file is shown escaped: a name cannot move the cursor or clear lines.
    let name = spec.name.escape_debug();
    let mut lines = Vec::new();
    match (&e.command, &e.url) {
        (Some(command), _) => {
            let args = quoted(&e.args);
            lines.push(format!("  {name}: runs {command:?} {args}"));
        }
        (None, Some(url)) => lines.push(format!("  {name}: connects to {}", url.escape_debug())),
        (None, None) => lines.push(format!("  {name}")),
    }
    for (key, value) in &e.env {
        lines.push(format!("    env {}={value:?}", key.escape_debug()));
    }
    for (key, value) in &e.headers {
        lines.push(format!("    header {}: {value:?}", key.escape_debug()));
    }
    for file in &spec.files {
        let short = &file.hash[..file.hash.len().min(12)];
        lines.push(format!(
            "    runs workspace file {} (sha256 {short}…)",
            file.path.escape_debug()
        ));
    }
    let variables = spec.variables();
    if !variables.is_empty() {
        let names: Vec<String> = variables
            .iter()
            .map(|v| format!("${{{}}}", v.escape_debug()))
            .collect();
        lines.push(format!("    expands {}", names.join(", ")));
    }
    lines
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
/// from `env`. Each stdio server records the workspace files it names ([`files`]).
///
/// # Errors
/// [`McpConfigError`] naming the file and key of a bad entry, or an unreadable
/// `--mcp-config` file; [`McpConfigError::Credential`] when the project's `.mcp.json` expands a
/// provider key or credential variable.
pub fn declared_servers(
    config: &crate::config::Config,
    cli_files: &[PathBuf],
    env: &crate::config::EnvSnapshot,
) -> Result<DeclaredServers, McpConfigError> {
    let root = &config.workspace_root;
    let lookup = |name: &str| env.get(name).map(str::to_string);
    let mut trusted = pinned(
        config::from_config(&config.merged.mcp_servers, &lookup)?,
        root,
    );
    let project = config::project_file(root);
    let named_on_cli = cli_files.iter().any(|f| same_file(f, &project));
    let mut unapproved = None;
    if !named_on_cli
        && let Some(servers) = project_servers(config, &project, &lookup)?
        && !servers.is_empty()
    {
        let servers = pinned(servers, root);
        let mut files: Vec<files::NamedFile> =
            servers.iter().flat_map(|s| s.files.clone()).collect();
        files.sort();
        files.dedup();
        let state_dir = env.state_dir();
        match approval::state(&project, &files, state_dir.as_deref()) {
            Ok(approval::ApprovalState::Approved) => trusted = config::merge(trusted, servers),
            Ok(approval::ApprovalState::NotApproved { content, reasons }) => {
                unapproved = Some(UnapprovedProjectFile {
                    file: project.clone(),
                    content,
                    reasons,
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
        trusted = config::merge(trusted, pinned(servers, root));
    }
    Ok(DeclaredServers {
        trusted,
        unapproved,
    })
}

/// `servers` with the workspace files each names, as they are now in `root`.
fn pinned(mut servers: Vec<McpServerSpec>, root: &Path) -> Vec<McpServerSpec> {
    for spec in &mut servers {
        spec.files = files::named_files(&spec.transport, root);
    }
    servers
}

/// The servers of the project's `.mcp.json` (`None` without one). `${VAR}` may not name a
/// provider key or credential variable there ([`is_refused_variable`]).
///
/// # Errors
/// As [`config::read_json_file`]; [`McpConfigError::Credential`] for such a variable.
fn project_servers(
    config: &crate::config::Config,
    project: &Path,
    lookup: config::EnvLookup<'_>,
) -> Result<Option<Vec<McpServerSpec>>, McpConfigError> {
    let refused = std::cell::RefCell::new(None::<String>);
    let guarded = |name: &str| {
        if is_refused_variable(config, name) {
            refused.borrow_mut().get_or_insert_with(|| name.to_string());
            return Some(String::new());
        }
        lookup(name)
    };
    let origin = ServerOrigin::ProjectFile(project.to_path_buf());
    let servers = config::read_json_file(project, origin, true, &guarded)?;
    if let Some(variable) = refused.into_inner() {
        let server = servers
            .iter()
            .flatten()
            .find(|s| s.variables().contains(&variable))
            .map(|s| s.name.clone())
            .unwrap_or_default();
        return Err(McpConfigError::Credential {
            path: project.to_path_buf(),
            server,
            variable,
        });
    }
    Ok(servers)
}

/// Variables a project `.mcp.json` may not expand: those no command inherits
/// ([`crate::tools::shell::is_secret_env`]: `ANTHROPIC_*`, `OPENAI_*`, `*_API_KEY`,
/// `*_API_TOKEN`, `*_AUTH_TOKEN`, `*_SECRET_KEY`), the configured `api_key_env`, and the
/// variables of `[secrets] redact_env`.
pub fn is_refused_variable(config: &crate::config::Config, name: &str) -> bool {
    crate::tools::shell::is_secret_env(name)
        || config.secret_env.iter().any(|s| s == name)
        || config.merged.secrets.redact_env.iter().any(|s| s == name)
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}
