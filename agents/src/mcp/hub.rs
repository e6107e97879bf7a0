//! Starting MCP servers, keeping their connections, and stopping them.
//!
//! [`McpHub::start`] starts every server at once (each bounded by its `startup_timeout`); a
//! server that cannot be started, does not answer `initialize` in time, or fails `tools/list`
//! is [`ServerStatus::Failed`] with the reason and offers no tools. A server that dies later is
//! seen by its tools ([`super::tool::McpTool`]): they leave the tool list sent to the model and
//! a call gets a message saying the server stopped. The agent goes on either way.
//!
//! Stdio servers are children in their own process group (process-wrap's `ProcessGroup`), so
//! [`McpHub::shutdown`] (and dropping the hub) ends the server and everything it started. They
//! start in the command sandbox of their workspace ([`super::sandbox`]), and only where the
//! workspace files they name have the content they were declared or approved with
//! ([`super::files::check`]).

use super::config::{McpServerSpec, McpTransport};
use super::sandbox::ServerSandbox;
use super::tool::{McpTool, qualified_name};
use crate::tools::Tool;
use process_wrap::tokio::{CommandWrap, KillOnDrop, ProcessGroup};
use rmcp::ClientHandler;
// Roots are marked deprecated in rmcp (SEP-2577 plans their removal), but the current MCP
// specification has them and servers use them to learn the client's working directory.
#[allow(deprecated)]
use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, ListRootsResult, Root, RootsCapabilities,
};
use rmcp::service::{Peer, RequestContext, RoleClient, RunningService, ServiceExt};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Mutex};
use tokio::io::AsyncBufReadExt;

/// Lines of a stdio server's stderr kept for error messages.
const STDERR_TAIL_LINES: usize = 20;

/// The last lines a stdio server wrote on stderr (shown when it fails or dies).
#[derive(Debug, Clone, Default)]
pub struct StderrTail(Arc<Mutex<VecDeque<String>>>);

impl StderrTail {
    fn push(&self, line: String) {
        if let Ok(mut lines) = self.0.lock() {
            if lines.len() == STDERR_TAIL_LINES {
                lines.pop_front();
            }
            lines.push_back(line);
        }
    }

    /// The kept lines joined with `; ` (empty when there are none).
    pub fn summary(&self) -> String {
        self.0
            .lock()
            .map(|l| l.iter().cloned().collect::<Vec<_>>().join("; "))
            .unwrap_or_default()
    }
}

/// A live connection to one server.
pub struct Connection {
    /// Server name (for messages).
    pub server: String,
    /// Sends requests (cheap to clone).
    pub peer: Peer<RoleClient>,
    /// stderr of a stdio server.
    pub stderr: StderrTail,
    /// Time one tool call may take.
    pub tool_timeout: std::time::Duration,
    /// Process group of a stdio server (its pid: it leads the group).
    process_group: Option<u32>,
    service: tokio::sync::Mutex<Option<RunningService<RoleClient, RootedClient>>>,
    /// The sandboxed server's temp dir, removed when the connection is dropped.
    _temp: Option<crate::command_temp::CommandTemp>,
}

impl Connection {
    /// Whether the server is gone (process exited, connection closed, or shut down).
    pub fn is_closed(&self) -> bool {
        self.peer.is_transport_closed()
    }

    /// Why the server is gone, for the model and the user.
    pub fn stopped_message(&self) -> String {
        let tail = self.stderr.summary();
        let mut m = format!(
            "MCP server `{}` has stopped; its tools are withdrawn. Go on without them.",
            self.server
        );
        if !tail.is_empty() {
            m.push_str(&format!(" Its last stderr lines: {tail}"));
        }
        m
    }
}

/// What `/mcp` shows about a server.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerStatus {
    /// Connected; its tools are offered.
    Running,
    /// It did not start (the reason says why and what to do).
    Failed(String),
    /// It ran and has stopped since.
    Stopped,
}

/// One tool of a server, as listed by `/mcp`.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSummary {
    /// The name the model uses (`mcp__<server>__<tool>`).
    pub name: String,
    /// The server's own name for it.
    pub server_tool: String,
    /// Whether the server says it only reads (`readOnlyHint`; shown, not trusted).
    pub read_only_hint: bool,
}

/// One server as `/mcp` shows it.
#[derive(Debug, Clone)]
pub struct ServerReport {
    /// Declared name.
    pub name: String,
    /// `stdio: <command line>` or `http: <url>`.
    pub endpoint: String,
    /// State now.
    pub status: ServerStatus,
    /// Its tools (empty unless it started).
    pub tools: Vec<ToolSummary>,
}

struct Server {
    spec: McpServerSpec,
    connection: Result<Arc<Connection>, String>,
    tools: Vec<Arc<McpTool>>,
}

/// The MCP servers of one agent (a session or a swarm worker).
#[derive(Default)]
pub struct McpHub {
    servers: Vec<Server>,
}

impl McpHub {
    /// Starts every server of `specs` concurrently, stdio ones with `cwd` as working directory
    /// and confined by `sandbox`; every server gets `cwd` as its one root (`roots/list`).
    /// Never fails: a server that does not start (its workspace files changed, its sandbox
    /// cannot be built, …) is recorded as [`ServerStatus::Failed`].
    pub async fn start(specs: Vec<McpServerSpec>, cwd: &Path, sandbox: &ServerSandbox) -> McpHub {
        let starts = specs.into_iter().map(|spec| async move {
            let connection = connect(&spec, cwd, sandbox).await;
            let tools = match &connection {
                Ok((conn, listed)) => make_tools(&spec, conn, listed),
                Err(_) => Vec::new(),
            };
            Server {
                connection: connection.map(|(c, _)| c),
                spec,
                tools,
            }
        });
        let servers = futures::future::join_all(starts).await;
        McpHub { servers }
    }

    /// The declarations of every server of this hub (started or not), e.g. for a swarm started
    /// from the session: its workers start their own instances.
    pub fn specs(&self) -> Vec<McpServerSpec> {
        self.servers.iter().map(|s| s.spec.clone()).collect()
    }

    /// Whether no server is configured.
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// The tools of every started server, to register in the agent's tool registry.
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.servers
            .iter()
            .flat_map(|s| s.tools.iter().map(|t| t.clone() as Arc<dyn Tool>))
            .collect()
    }

    /// The tools a role may use: those its `tools` list names exactly
    /// (`mcp__everything__echo`) or by a prefix ending in `*` (`mcp__everything__*`, `mcp__*`).
    pub fn tools_for_role(&self, role_tools: &[String]) -> Vec<Arc<dyn Tool>> {
        self.tools()
            .into_iter()
            .filter(|t| role_offers(role_tools, t.name()))
            .collect()
    }

    /// One message per server that failed to start (for stderr at start-up).
    pub fn startup_failures(&self) -> Vec<String> {
        self.servers
            .iter()
            .filter_map(|s| s.connection.as_ref().err().cloned())
            .collect()
    }

    /// Every server with its status and tools (`/mcp`).
    pub fn report(&self) -> Vec<ServerReport> {
        self.servers
            .iter()
            .map(|s| ServerReport {
                name: s.spec.name.clone(),
                endpoint: endpoint(&s.spec),
                status: match &s.connection {
                    Err(reason) => ServerStatus::Failed(reason.clone()),
                    Ok(c) if c.is_closed() => ServerStatus::Stopped,
                    Ok(_) => ServerStatus::Running,
                },
                tools: s.tools.iter().map(|t| t.summary()).collect(),
            })
            .collect()
    }

    /// Closes every connection and ends stdio servers (stdin closed, then SIGTERM, then
    /// SIGKILL to the process group, as the MCP specification's stdio shutdown says).
    pub async fn shutdown(&self) {
        let closes = self
            .servers
            .iter()
            .filter_map(|s| s.connection.as_ref().ok())
            .map(|c| async move {
                if let Some(mut service) = c.service.lock().await.take() {
                    let _ = service
                        .close_with_timeout(std::time::Duration::from_secs(5))
                        .await;
                }
                if let Some(group) = c.process_group {
                    end_process_group(group).await;
                }
            });
        futures::future::join_all(closes).await;
    }
}

/// Whether a role's `tools` list offers the MCP tool `name`: named exactly, or by an
/// `mcp__…*` prefix.
pub fn role_offers(role_tools: &[String], name: &str) -> bool {
    role_tools
        .iter()
        .any(|entry| match entry.strip_suffix('*') {
            Some(prefix) => prefix.starts_with("mcp__") && name.starts_with(prefix),
            None => entry == name,
        })
}

/// Ends what is left of a stdio server's process group (children it started, or the server
/// itself when closing stdin did not end it): SIGTERM, up to 2 s to exit, then SIGKILL.
async fn end_process_group(group: u32) {
    let Ok(pgid) = libc::pid_t::try_from(group) else {
        return;
    };
    // SAFETY: killpg only sends a signal; the group is the server's own (it leads it).
    if unsafe { libc::killpg(pgid, libc::SIGTERM) } != 0 {
        return; // no process left in the group
    }
    for _ in 0..20 {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        // SAFETY: signal 0 only checks that the group still has a member.
        if unsafe { libc::killpg(pgid, 0) } != 0 {
            return;
        }
    }
    // SAFETY: as above.
    unsafe { libc::killpg(pgid, libc::SIGKILL) };
}

/// `stdio: node x.js` (with `, outside the sandbox` for a server whose user-config entry says
/// `sandbox = false`) or `http: <url>`.
fn endpoint(spec: &McpServerSpec) -> String {
    match &spec.transport {
        McpTransport::Stdio { command, args, .. } => {
            let line = format!("stdio: {command} {}", args.join(" "));
            let line = line.trim_end();
            if spec.sandboxed() {
                line.to_string()
            } else {
                format!("{line} (outside the sandbox: `sandbox = false`)")
            }
        }
        McpTransport::Http { url, .. } => format!("http: {url}"),
    }
}

/// ahelper's side of a connection: it tells servers who it is and that it offers one root
/// (MCP `roots/list`): the directory the agent works in — the workspace of a session, the
/// worktree of a swarm worker — as a `file://` URI.
#[derive(Clone)]
#[allow(deprecated)] // roots: see the import
pub struct RootedClient {
    config: ClientConfig,
    root: Root,
}

#[allow(deprecated)] // roots: see the import
impl RootedClient {
    /// The client for an agent working in `cwd`.
    fn new(cwd: &Path) -> RootedClient {
        let mut capabilities = ClientCapabilities::default();
        capabilities.roots = Some(RootsCapabilities::default());
        let config = ClientConfig::new(
            capabilities,
            Implementation::new("ahelper", env!("CARGO_PKG_VERSION")),
        );
        let dir = std::fs::canonicalize(cwd).unwrap_or_else(|_| cwd.to_path_buf());
        let mut root = Root::new(format!("file://{}", dir.display()));
        root.name = dir.file_name().map(|n| n.to_string_lossy().into_owned());
        RootedClient { config, root }
    }
}

#[allow(deprecated)] // roots: see the import
impl ClientHandler for RootedClient {
    fn get_info(&self) -> ClientConfig {
        self.config.clone()
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, rmcp::ErrorData> {
        Ok(ListRootsResult::new(vec![self.root.clone()]))
    }
}

type Listed = Vec<rmcp::model::Tool>;

/// Starts (or reaches) one server, runs `initialize` and `tools/list` within its timeout.
async fn connect(
    spec: &McpServerSpec,
    cwd: &Path,
    sandbox: &ServerSandbox,
) -> Result<(Arc<Connection>, Listed), String> {
    if let Err(changes) = super::files::check(&spec.transport, &spec.files, cwd) {
        let list: Vec<String> = changes
            .iter()
            .map(|c| c.to_string().escape_debug().to_string())
            .collect();
        return Err(format!(
            "MCP server `{}` was not started: the workspace files it runs are not the ones that \
             were approved ({}); approve them again in the REPL (`ahelper` in the workspace)",
            spec.name,
            list.join("; ")
        ));
    }
    let stderr = StderrTail::default();
    let mut process_group = None;
    let mut temp = None;
    let started = tokio::time::timeout(spec.startup_timeout, async {
        let service = match &spec.transport {
            McpTransport::Stdio { command, .. } => {
                let start = StdioStart {
                    cwd,
                    sandbox,
                    tail: &stderr,
                };
                let (transport, dir) = spawn_stdio(spec, start)
                    .map_err(|e| format!("cannot start `{command}`: {e}"))?;
                temp = dir;
                process_group = transport.id();
                RootedClient::new(cwd).serve(transport).await
            }
            McpTransport::Http { url, headers } => {
                let transport = http_transport(url, headers)?;
                RootedClient::new(cwd).serve(transport).await
            }
        }
        .map_err(|e| format!("initialize failed: {e}"))?;
        let tools = service
            .peer()
            .list_all_tools()
            .await
            .map_err(|e| format!("tools/list failed: {e}"))?;
        Ok::<_, String>((service, tools))
    })
    .await;
    let sandboxed = temp.is_some();
    let failure = |reason: String| {
        let tail = stderr.summary();
        let mut m = format!("MCP server `{}` did not start: {reason}", spec.name);
        if !tail.is_empty() {
            m.push_str(&format!(" (its stderr: {tail})"));
        }
        if sandboxed {
            m.push_str(&format!(
                " [it runs in the command sandbox: writes only in the workspace and its temp \
                 dir; if it needs more (e.g. npx's ~/.npm or uvx's ~/.cache/uv), list the path \
                 in `[sandbox] writable`, or set `sandbox = false` in `[mcp_servers.{}]` of your \
                 user config.toml]",
                spec.name
            ));
        }
        m
    };
    let (service, tools) = match started {
        Ok(Ok(v)) => v,
        Ok(Err(reason)) => {
            if let Some(group) = process_group {
                end_process_group(group).await;
            }
            return Err(failure(reason));
        }
        Err(_) => {
            if let Some(group) = process_group {
                end_process_group(group).await;
            }
            return Err(failure(format!(
                "no answer to initialize within {} s (raise `startup_timeout_s` in its entry if it is slow to start)",
                spec.startup_timeout.as_secs()
            )));
        }
    };
    let connection = Connection {
        server: spec.name.clone(),
        peer: service.peer().clone(),
        stderr,
        tool_timeout: spec.tool_timeout,
        process_group,
        service: tokio::sync::Mutex::new(Some(service)),
        _temp: temp,
    };
    Ok((Arc::new(connection), tools))
}

/// Where and how a stdio server starts.
struct StdioStart<'a> {
    cwd: &'a Path,
    sandbox: &'a ServerSandbox,
    tail: &'a StderrTail,
}

/// The child process of the stdio server `spec`: its own process group, killed when dropped,
/// confined by the sandbox ([`super::sandbox::confine`]), stderr collected into the tail; with
/// the temp dir to keep while it runs.
fn spawn_stdio(
    spec: &McpServerSpec,
    at: StdioStart<'_>,
) -> Result<(TokioChildProcess, Option<crate::command_temp::CommandTemp>), String> {
    let McpTransport::Stdio { command, args, env } = &spec.transport else {
        return Err("not a stdio server".into());
    };
    let mut cmd = tokio::process::Command::new(command);
    cmd.args(args).envs(env).current_dir(at.cwd);
    // The marker lets ahelper's watchdog end the server (and what it started) when ahelper is
    // killed without a chance to shut it down (`kill -9`).
    cmd.env(
        crate::process_sweep::OWNER_VAR,
        crate::process_sweep::owner_token(),
    );
    let temp = super::sandbox::confine(&mut cmd, spec, env, at.sandbox, at.cwd)?;
    let mut wrapped = CommandWrap::from(cmd);
    wrapped.wrap(ProcessGroup::leader()).wrap(KillOnDrop);
    let (process, child_stderr) = TokioChildProcess::builder(wrapped)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    if let Some(child_stderr) = child_stderr {
        let tail = at.tail.clone();
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(child_stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::debug!(target: "mcp", "{line}");
                tail.push(line);
            }
        });
    }
    Ok((process, temp))
}

/// The streamable HTTP transport for `url`; `Authorization: Bearer …` becomes the bearer
/// token, other headers are sent as they are.
fn http_transport(
    url: &str,
    headers: &std::collections::BTreeMap<String, String>,
) -> Result<StreamableHttpClientTransport<reqwest::Client>, String> {
    use reqwest::header::{HeaderName, HeaderValue};
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_string());
    for (name, value) in headers {
        if name.eq_ignore_ascii_case("authorization")
            && let Some(token) = value.strip_prefix("Bearer ")
        {
            config.auth_header = Some(token.to_string());
            continue;
        }
        let name_ok =
            HeaderName::from_bytes(name.as_bytes()).map_err(|e| format!("header `{name}`: {e}"))?;
        let value_ok =
            HeaderValue::from_str(value).map_err(|e| format!("header `{name}` value: {e}"))?;
        config.custom_headers.insert(name_ok, value_ok);
    }
    Ok(StreamableHttpClientTransport::from_config(config))
}

/// One [`McpTool`] per listed tool; a name that collides after sanitising is skipped with a
/// warning.
fn make_tools(spec: &McpServerSpec, conn: &Arc<Connection>, listed: &Listed) -> Vec<Arc<McpTool>> {
    let mut seen = std::collections::BTreeSet::new();
    listed
        .iter()
        .filter_map(|t| {
            let name = qualified_name(&spec.name, &t.name);
            if !seen.insert(name.clone()) {
                tracing::warn!(server = %spec.name, tool = %t.name, "MCP tool name collides after sanitising; skipped");
                return None;
            }
            Some(Arc::new(McpTool::new(name, t, conn.clone())))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::role_offers;

    #[test]
    fn a_role_offers_mcp_tools_it_names_exactly_or_by_prefix() {
        let role = |tools: &[&str]| tools.iter().map(|t| t.to_string()).collect::<Vec<_>>();
        assert!(role_offers(
            &role(&["read_file", "mcp__*"]),
            "mcp__git__log"
        ));
        assert!(role_offers(&role(&["mcp__git__*"]), "mcp__git__log"));
        assert!(!role_offers(&role(&["mcp__git__*"]), "mcp__github__log"));
        assert!(role_offers(&role(&["mcp__git__log"]), "mcp__git__log"));
        assert!(!role_offers(&role(&["mcp__git__log"]), "mcp__git__diff"));
        // A bare `*` is not a way to offer every server's tools by accident.
        assert!(!role_offers(&role(&["*"]), "mcp__git__log"));
        assert!(!role_offers(&role(&["read_file", "grep"]), "mcp__git__log"));
    }
}
