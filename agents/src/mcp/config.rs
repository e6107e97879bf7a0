//! Where MCP servers are declared and how their declarations are read.
//!
//! Three sources, in this order (a later source replaces an earlier server of the same name):
//! 1. `[mcp_servers.NAME]` in `config.toml` (user or project layer; Codex's shape):
//!    `command`, `args`, `env` (stdio) or `url`, `headers` (streamable HTTP), and
//!    `startup_timeout_s`. Trusted.
//! 2. `.mcp.json` at the workspace root (Claude Code's format,
//!    <https://docs.anthropic.com/en/docs/claude-code/mcp>):
//!    `{"mcpServers": {NAME: {"command", "args", "env"} | {"type": "http", "url", "headers"}}}`.
//!    Started only once the user approved this file's content ([`super::approval`]).
//! 3. `--mcp-config FILE` (same JSON format). Trusted: the user named it.
//!
//! As in Claude Code, `${VAR}` and `${VAR:-default}` in `command`, `args`, `env` values, `url`
//! and header values are replaced by the variable's value from ahelper's environment as it was
//! at start (before provider keys are removed from it); a variable that is not set and has no
//! default is an error naming it.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Seconds a server may take to start and answer `initialize` unless `startup_timeout_s` says
/// otherwise.
pub const DEFAULT_STARTUP_TIMEOUT_S: u64 = 10;

/// Seconds a tool call may take unless `tool_timeout_s` says otherwise.
pub const DEFAULT_TOOL_TIMEOUT_S: u64 = 300;

/// One server entry as written in `config.toml` or a JSON file (both formats share it).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerFile {
    /// `stdio` (default when `command` is set) or `http` (default when `url` is set);
    /// `streamable-http` is accepted as `http`.
    #[serde(rename = "type")]
    pub transport: Option<String>,
    /// Program to start (stdio).
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Extra environment variables of the server process.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Endpoint of a streamable HTTP server.
    pub url: Option<String>,
    /// HTTP headers sent with every request (e.g. `Authorization`).
    #[serde(default, alias = "http_headers")]
    pub headers: BTreeMap<String, String>,
    /// Seconds allowed for start and `initialize` (default 10).
    #[serde(alias = "startup_timeout_sec")]
    pub startup_timeout_s: Option<u64>,
    /// Seconds one tool call may take (default 300).
    #[serde(alias = "tool_timeout_sec")]
    pub tool_timeout_s: Option<u64>,
    /// `false`: a stdio server runs outside the command sandbox. Honoured only in the user's
    /// own `config.toml` (a project config's value is ignored with a warning, a JSON server
    /// file's is an error): see [`super::sandbox`].
    pub sandbox: Option<bool>,
    /// Network for a sandboxed stdio server: `false` denies it, `true` allows it even with
    /// `[sandbox] network = false`; unset follows `[sandbox] network` (default on). Same
    /// places as `sandbox`.
    pub network: Option<bool>,
}

/// A JSON server file (`.mcp.json`, `--mcp-config`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct McpJsonFile {
    #[serde(default)]
    mcp_servers: BTreeMap<String, McpServerFile>,
}

/// Reads an environment variable (the captured environment of the process).
pub type EnvLookup<'a> = &'a dyn Fn(&str) -> Option<String>;

/// Replaces `${VAR}` and `${VAR:-default}` in `text`.
///
/// # Errors
/// The name of a variable that is not set and has no default, or of an unclosed `${`.
pub fn expand_vars(text: &str, env: EnvLookup<'_>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Err(format!("`${{` without a closing `}}` in `{text}`"));
        };
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (inner, None),
        };
        match (env(name), default) {
            (Some(value), _) => out.push_str(&value),
            (None, Some(default)) => out.push_str(default),
            (None, None) => {
                return Err(format!(
                    "the environment variable `{name}` is not set (write `${{{name}:-default}}` for a default)"
                ));
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// How ahelper talks to a server.
#[derive(Debug, Clone, PartialEq)]
pub enum McpTransport {
    /// A child process speaking JSON-RPC on stdin/stdout.
    Stdio {
        /// Program.
        command: String,
        /// Arguments.
        args: Vec<String>,
        /// Extra environment variables.
        env: BTreeMap<String, String>,
    },
    /// MCP's streamable HTTP transport.
    Http {
        /// Endpoint URL.
        url: String,
        /// Headers sent with every request.
        headers: BTreeMap<String, String>,
    },
}

/// Where a server was declared; decides whether it needs the user's approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerOrigin {
    /// `[mcp_servers]` in a config file (trusted).
    Config,
    /// The workspace's `.mcp.json` (needs approval).
    ProjectFile(PathBuf),
    /// `--mcp-config FILE` (trusted).
    CommandLine(PathBuf),
}

/// One server ready to start.
#[derive(Debug, Clone, PartialEq)]
pub struct McpServerSpec {
    /// Name as declared (shown to the user).
    pub name: String,
    /// How to reach it.
    pub transport: McpTransport,
    /// Time allowed for start and `initialize`.
    pub startup_timeout: Duration,
    /// Time allowed for one tool call.
    pub tool_timeout: Duration,
    /// Where it was declared.
    pub origin: ServerOrigin,
    /// The entry as written, before `${VAR}` expansion: what the approval question shows, and
    /// its `sandbox` and `network` settings ([`McpServerSpec::sandboxed`]).
    pub declared: McpServerFile,
    /// The workspace files its command, arguments and environment name, with their content
    /// when it was declared (or approved): a server whose files differ where it starts is not
    /// started ([`super::files`]).
    pub files: Vec<super::files::NamedFile>,
}

/// A server file or entry that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum McpConfigError {
    /// The file could not be read.
    #[error("cannot read MCP server file {path}: {source}; check the path and its permissions")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid JSON of the expected shape.
    #[error(
        "invalid MCP server file {path}: {message}; expected {{\"mcpServers\": {{NAME: {{\"command\", \"args\", \"env\"}} | {{\"type\": \"http\", \"url\", \"headers\"}}}}}}"
    )]
    Parse {
        /// The file.
        path: PathBuf,
        /// serde's message (line, column, key).
        message: String,
    },
    /// A project `.mcp.json` expands a provider key or credential variable.
    #[error(
        "refusing the MCP servers of {path}: server `{server}` expands `${{{variable}}}`, a \
         provider key or credential variable, and a project's .mcp.json may not send those to a \
         server (a cloned repository or the model can write this file). Declare the server in \
         your own config.toml (`[mcp_servers.{server}]`), or pass the file with \
         `--mcp-config` if you trust it"
    )]
    Credential {
        /// The project file.
        path: PathBuf,
        /// The server whose entry names it.
        server: String,
        /// The variable.
        variable: String,
    },
    /// An entry names no way to reach the server, or two.
    #[error("MCP server `{name}` in {origin}: {problem}")]
    Entry {
        /// Server name.
        name: String,
        /// The file (or `config.toml [mcp_servers]`).
        origin: String,
        /// What is wrong and what to write instead.
        problem: String,
    },
}

/// The `.mcp.json` of `workspace_root`.
pub fn project_file(workspace_root: &Path) -> PathBuf {
    workspace_root.join(".mcp.json")
}

/// Reads a JSON server file. `Ok(None)` when `missing_ok` and the file does not exist.
///
/// # Errors
/// [`McpConfigError`] naming the file and the key.
pub fn read_json_file(
    path: &Path,
    origin: ServerOrigin,
    missing_ok: bool,
    env: EnvLookup<'_>,
) -> Result<Option<Vec<McpServerSpec>>, McpConfigError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if missing_ok && e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(McpConfigError::Read {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let file: McpJsonFile = serde_json::from_str(&text).map_err(|e| McpConfigError::Parse {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let where_ = path.display().to_string();
    if let Some((name, _)) = file
        .mcp_servers
        .iter()
        .find(|(_, e)| e.sandbox.is_some() || e.network.is_some())
    {
        return Err(McpConfigError::Entry {
            name: name.clone(),
            origin: where_,
            problem: "`sandbox` and `network` can only be set in your own config.toml \
                      (`[mcp_servers.NAME]`), not in a server file; declare the server there to \
                      change them"
                .into(),
        });
    }
    file.mcp_servers
        .into_iter()
        .map(|(name, entry)| resolve_entry(name, &entry, &where_, origin.clone(), env))
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// The servers of `[mcp_servers]` in the merged configuration.
///
/// # Errors
/// [`McpConfigError::Entry`] for an entry without `command` or `url`.
pub fn from_config(
    servers: &BTreeMap<String, McpServerFile>,
    env: EnvLookup<'_>,
) -> Result<Vec<McpServerSpec>, McpConfigError> {
    servers
        .iter()
        .map(|(name, entry)| {
            resolve_entry(
                name.clone(),
                entry,
                "config.toml [mcp_servers]",
                ServerOrigin::Config,
                env,
            )
        })
        .collect()
}

/// Checks one entry and turns it into a spec.
fn resolve_entry(
    name: String,
    entry: &McpServerFile,
    where_: &str,
    origin: ServerOrigin,
    env: EnvLookup<'_>,
) -> Result<McpServerSpec, McpConfigError> {
    let problem = |problem: String| McpConfigError::Entry {
        name: name.clone(),
        origin: where_.to_string(),
        problem,
    };
    if name.trim().is_empty() {
        return Err(problem("the server name is empty".into()));
    }
    let raw = entry;
    let entry = &expand_entry(entry, env).map_err(problem)?;
    let transport = match (entry.transport.as_deref(), &entry.command, &entry.url) {
        (Some("sse"), _, _) => {
            return Err(problem(
                "`\"type\": \"sse\"` (the old HTTP+SSE transport) is not supported; use the \
                 server's streamable HTTP endpoint with `\"type\": \"http\"`"
                    .into(),
            ));
        }
        (None | Some("stdio"), Some(command), None) if !command.trim().is_empty() => {
            McpTransport::Stdio {
                command: command.clone(),
                args: entry.args.clone(),
                env: entry.env.clone(),
            }
        }
        (None | Some("http" | "streamable-http" | "streamable_http"), None, Some(url)) => {
            McpTransport::Http {
                url: url.clone(),
                headers: entry.headers.clone(),
            }
        }
        (Some(t), _, _)
            if !matches!(t, "stdio" | "http" | "streamable-http" | "streamable_http") =>
        {
            return Err(problem(format!(
                "unknown `type` `{t}`; use `stdio` (with `command`) or `http` (with `url`)"
            )));
        }
        (_, Some(_), Some(_)) => {
            return Err(problem(
                "has both `command` and `url`; give `command` for a stdio server or `url` for \
                 an HTTP server"
                    .into(),
            ));
        }
        _ => {
            return Err(problem(
                "needs `command` (a stdio server) or `url` (an HTTP server), matching its `type`"
                    .into(),
            ));
        }
    };
    Ok(McpServerSpec {
        name,
        transport,
        startup_timeout: Duration::from_secs(
            entry
                .startup_timeout_s
                .unwrap_or(DEFAULT_STARTUP_TIMEOUT_S)
                .max(1),
        ),
        tool_timeout: Duration::from_secs(
            entry
                .tool_timeout_s
                .unwrap_or(DEFAULT_TOOL_TIMEOUT_S)
                .max(1),
        ),
        declared: raw.clone(),
        files: Vec::new(),
        origin,
    })
}

impl McpServerSpec {
    /// Whether a stdio server starts in the command sandbox: unless `sandbox = false` (which
    /// only the user's own `config.toml` can set).
    pub fn sandboxed(&self) -> bool {
        self.declared.sandbox != Some(false)
    }

    /// Its network when sandboxed: `None` follows `[sandbox] network`.
    pub fn network(&self) -> Option<bool> {
        self.declared.network
    }

    /// The names of the `${VAR}` variables its entry expands, sorted, each once.
    pub fn variables(&self) -> Vec<String> {
        let e = &self.declared;
        let texts = e
            .command
            .iter()
            .chain(&e.args)
            .chain(e.env.values())
            .chain(&e.url)
            .chain(e.headers.values());
        let mut names: Vec<String> = texts.flat_map(|t| variable_names(t)).collect();
        names.sort();
        names.dedup();
        names
    }
}

/// The names of the `${VAR}` and `${VAR:-default}` references in `text`.
pub fn variable_names(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else { break };
        let inner = &after[..end];
        names.push(inner.split_once(":-").map_or(inner, |(n, _)| n).to_string());
        rest = &after[end + 1..];
    }
    names
}

/// `entry` with `${VAR}` replaced in its command, arguments, environment values, URL and
/// header values.
fn expand_entry(entry: &McpServerFile, env: EnvLookup<'_>) -> Result<McpServerFile, String> {
    let one = |v: &String| expand_vars(v, env);
    let map = |m: &BTreeMap<String, String>| -> Result<BTreeMap<String, String>, String> {
        m.iter().map(|(k, v)| Ok((k.clone(), one(v)?))).collect()
    };
    Ok(McpServerFile {
        transport: entry.transport.clone(),
        command: entry.command.as_ref().map(one).transpose()?,
        args: entry.args.iter().map(one).collect::<Result<_, _>>()?,
        env: map(&entry.env)?,
        url: entry.url.as_ref().map(one).transpose()?,
        headers: map(&entry.headers)?,
        startup_timeout_s: entry.startup_timeout_s,
        tool_timeout_s: entry.tool_timeout_s,
        sandbox: entry.sandbox,
        network: entry.network,
    })
}

/// Puts `later` over `earlier`: a server of the same name is replaced.
pub fn merge(earlier: Vec<McpServerSpec>, later: Vec<McpServerSpec>) -> Vec<McpServerSpec> {
    let mut out: Vec<McpServerSpec> = earlier
        .into_iter()
        .filter(|s| !later.iter().any(|l| l.name == s.name))
        .collect();
    out.extend(later);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn variables_are_expanded_with_defaults() {
        let env = |name: &str| (name == "TOKEN").then(|| "s3cret".to_string());
        assert_eq!(
            expand_vars("Bearer ${TOKEN}", &env).unwrap(),
            "Bearer s3cret"
        );
        assert_eq!(
            expand_vars("${HOST:-127.0.0.1}:${PORT:-80}/x", &env).unwrap(),
            "127.0.0.1:80/x"
        );
        let e = expand_vars("${MISSING}", &env).unwrap_err();
        assert!(e.contains("`MISSING` is not set"), "{e}");
        assert!(expand_vars("${OPEN", &env).is_err());
        let entry = McpServerFile {
            command: Some("srv".into()),
            env: [("GITHUB_TOKEN".to_string(), "${TOKEN}".to_string())].into(),
            ..Default::default()
        };
        let spec = resolve_entry("gh".into(), &entry, "f", ServerOrigin::Config, &env).unwrap();
        assert!(
            matches!(&spec.transport, McpTransport::Stdio { env, .. } if env["GITHUB_TOKEN"] == "s3cret")
        );
    }

    fn write(dir: &Path, text: &str) -> PathBuf {
        let p = dir.join(".mcp.json");
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn reads_claude_code_format() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            r#"{"mcpServers": {
                "everything": {"command": "node", "args": ["x.js"], "env": {"A": "1"}},
                "remote": {"type": "http", "url": "http://127.0.0.1:1/mcp", "headers": {"X": "y"}}
            }}"#,
        );
        let specs = read_json_file(&p, ServerOrigin::ProjectFile(p.clone()), false, &no_env)
            .unwrap()
            .unwrap();
        assert_eq!(specs.len(), 2);
        assert_eq!(specs[0].name, "everything");
        assert!(
            matches!(&specs[0].transport, McpTransport::Stdio { command, args, env }
            if command == "node" && args == &["x.js"] && env["A"] == "1")
        );
        assert!(
            matches!(&specs[1].transport, McpTransport::Http { url, headers }
            if url.ends_with("/mcp") && headers["X"] == "y")
        );
        assert_eq!(specs[0].startup_timeout, Duration::from_secs(10));
    }

    #[test]
    fn bad_files_name_file_and_key() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), r#"{"mcpServers": {"x": {"comand": "node"}}}"#);
        let e = read_json_file(&p, ServerOrigin::Config, false, &no_env)
            .unwrap_err()
            .to_string();
        assert!(e.contains(".mcp.json") && e.contains("comand"), "{e}");
        let p = write(dir.path(), r#"{"mcpServers": {"x": {"args": []}}}"#);
        let e = read_json_file(&p, ServerOrigin::Config, false, &no_env)
            .unwrap_err()
            .to_string();
        assert!(e.contains("`x`") && e.contains("needs `command`"), "{e}");
        let p = write(
            dir.path(),
            r#"{"mcpServers": {"x": {"type": "sse", "url": "u"}}}"#,
        );
        let e = read_json_file(&p, ServerOrigin::Config, false, &no_env)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not supported"), "{e}");
        assert!(
            read_json_file(
                &dir.path().join("none.json"),
                ServerOrigin::Config,
                true,
                &no_env
            )
            .unwrap()
            .is_none()
        );
    }

    #[test]
    fn later_source_replaces_same_name() {
        let spec = |name: &str, command: &str| McpServerSpec {
            name: name.into(),
            transport: McpTransport::Stdio {
                command: command.into(),
                args: vec![],
                env: BTreeMap::new(),
            },
            startup_timeout: Duration::from_secs(1),
            tool_timeout: Duration::from_secs(1),
            origin: ServerOrigin::Config,
            declared: McpServerFile::default(),
            files: Vec::new(),
        };
        let merged = merge(vec![spec("a", "1"), spec("b", "1")], vec![spec("b", "2")]);
        assert_eq!(merged.len(), 2);
        assert!(
            matches!(&merged[1].transport, McpTransport::Stdio { command, .. } if command == "2")
        );
    }
}
