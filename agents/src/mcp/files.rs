//! The workspace files an MCP server runs: `python3 mcp_server.py`, `node ./srv/index.js`,
//! `./bin/server` name ordinary files the model can rewrite. Their content is part of what the
//! user approves ([`super::approval`]), and a server is started only where these files still
//! have the content they had when it was declared or approved ([`check`]): a swarm worker
//! does not run a server file another worker changed.
//!
//! A string names a workspace file when, taken as a path relative to the server's working
//! directory (the workspace root; absolute paths as they are), it resolves — symlinks followed —
//! to a regular file inside the workspace. The strings looked at: the command, every argument,
//! the value after the first `=` of an argument (`--script=srv.py`), the module files of
//! `-m <module>` (`srv.py`, `srv/__main__.py`), and every environment value. Directories, files the named program loads on its own (imports, `node_modules`) and
//! programs found through `PATH` are not covered; the command sandbox confines what they do.

use super::config::McpTransport;
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::Path;

/// One workspace file a server names, with its content's hash.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct NamedFile {
    /// Path relative to the workspace root, `/`-separated (symlinks resolved).
    pub path: String,
    /// SHA-256 (hex) of its bytes; `unreadable: <error>` when it could not be read.
    pub hash: String,
}

/// How a server's files differ from what was declared or approved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileChange {
    /// The file's content changed.
    Changed(String),
    /// The server names a workspace file it did not name then.
    New(String),
    /// A file it named is gone (or no longer inside the workspace).
    Gone(String),
}

impl std::fmt::Display for FileChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FileChange::Changed(p) => write!(f, "{p} changed"),
            FileChange::New(p) => write!(f, "{p} was not part of the approval"),
            FileChange::Gone(p) => write!(f, "{p} is gone"),
        }
    }
}

/// The strings of `transport` that may name a file (see the module documentation).
fn candidates(transport: &McpTransport) -> Vec<String> {
    let McpTransport::Stdio { command, args, env } = transport else {
        return Vec::new();
    };
    let mut out = vec![command.clone()];
    let mut previous = "";
    for arg in args {
        out.push(arg.clone());
        if let Some((_, value)) = arg.split_once('=') {
            out.push(value.to_string());
        }
        if previous == "-m" {
            out.extend(python_module_files(arg));
        }
        previous = arg;
    }
    out.extend(env.values().cloned());
    out
}

/// The files `python -m <module>` runs from the working directory: `a/b.py` and
/// `a/b/__main__.py` for `a.b`.
pub fn python_module_files(module: &str) -> [String; 2] {
    let path = module.replace('.', "/");
    [format!("{path}.py"), format!("{path}/__main__.py")]
}

/// The workspace files `transport` names, resolved against `root` (the server's working
/// directory and workspace), with their hashes; sorted, each once. HTTP servers name none.
pub fn named_files(transport: &McpTransport, root: &Path) -> Vec<NamedFile> {
    let Ok(root) = std::fs::canonicalize(root) else {
        return Vec::new();
    };
    let mut found: Vec<NamedFile> = candidates(transport)
        .into_iter()
        .filter(|c| !c.is_empty() && !c.contains("://"))
        .filter_map(|c| workspace_file(&root, &c))
        .collect();
    found.sort();
    found.dedup();
    found
}

/// `candidate` as a regular file inside `root` (canonical), with its hash.
fn workspace_file(root: &Path, candidate: &str) -> Option<NamedFile> {
    let real = std::fs::canonicalize(root.join(candidate)).ok()?;
    let relative = real.strip_prefix(root).ok()?;
    if relative.as_os_str().is_empty() || !std::fs::metadata(&real).ok()?.is_file() {
        return None;
    }
    Some(NamedFile {
        path: relative.to_string_lossy().replace('\\', "/"),
        hash: file_hash(&real),
    })
}

/// SHA-256 (hex) of the file's bytes, read in chunks; `unreadable: <error>` when it cannot be
/// opened as a regular file.
fn file_hash(path: &Path) -> String {
    let read = || -> std::io::Result<String> {
        use std::os::unix::fs::OpenOptionsExt;
        // Non-blocking and checked after opening: a file swapped for a FIFO cannot hang here.
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)?;
        if !file.metadata()?.is_file() {
            return Err(std::io::Error::other("not a regular file"));
        }
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = file.read(&mut buf)?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
        }
        Ok(hasher
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect())
    };
    read().unwrap_or_else(|e| format!("unreadable: {e}"))
}

/// What differs between the files `then` (declared or approved) and `now`.
pub fn changes(then: &[NamedFile], now: &[NamedFile]) -> Vec<FileChange> {
    let mut out = Vec::new();
    for file in now {
        match then.iter().find(|t| t.path == file.path) {
            Some(t) if t.hash == file.hash => {}
            Some(_) => out.push(FileChange::Changed(file.path.clone())),
            None => out.push(FileChange::New(file.path.clone())),
        }
    }
    for file in then {
        if !now.iter().any(|n| n.path == file.path) {
            out.push(FileChange::Gone(file.path.clone()));
        }
    }
    out
}

/// Whether a server declared with `files` may start in `root` now: the files it names there
/// have the same content. The differences otherwise.
///
/// # Errors
/// Every difference (the server must not start).
pub fn check(
    transport: &McpTransport,
    files: &[NamedFile],
    root: &Path,
) -> Result<(), Vec<FileChange>> {
    let found = changes(files, &named_files(transport, root));
    if found.is_empty() { Ok(()) } else { Err(found) }
}

/// The servers of the workspace's `.mcp.json` (read now, as written: `${VAR}` is not expanded)
/// whose command, arguments or environment name `target` — a path relative to `root`, existing
/// or not. Empty when there is no readable `.mcp.json` or it names no such file. The
/// permission decision asks before an edit of such a file in accept-edits.
pub fn project_servers_naming(root: &Path, target: &Path) -> Vec<String> {
    let Some(entries) = read_project_entries(root) else {
        return Vec::new();
    };
    let target = lexical(&root.join(target));
    let target_real = std::fs::canonicalize(&target).ok();
    entries
        .into_iter()
        .filter(|(_, entry)| {
            let Some(command) = &entry.command else {
                return false;
            };
            let transport = McpTransport::Stdio {
                command: command.clone(),
                args: entry.args.clone(),
                env: entry.env.clone(),
            };
            candidates(&transport).into_iter().any(|c| {
                let named = lexical(&root.join(c));
                named == target
                    || target_real
                        .as_ref()
                        .is_some_and(|t| std::fs::canonicalize(&named).ok().as_ref() == Some(t))
            })
        })
        .map(|(name, _)| name)
        .collect()
}

/// The entries of `root`'s `.mcp.json`, when it exists and parses.
fn read_project_entries(root: &Path) -> Option<Vec<(String, super::McpServerFile)>> {
    #[derive(serde::Deserialize)]
    struct File {
        #[serde(rename = "mcpServers", default)]
        servers: std::collections::BTreeMap<String, super::McpServerFile>,
    }
    let text = std::fs::read(super::config::project_file(root)).ok()?;
    let file: File = serde_json::from_slice(&text).ok()?;
    Some(file.servers.into_iter().collect())
}

/// `path` with `.` and `..` components resolved lexically.
fn lexical(path: &Path) -> std::path::PathBuf {
    let mut out = std::path::PathBuf::new();
    for component in path.components() {
        match component {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn stdio(command: &str, args: &[&str]) -> McpTransport {
        McpTransport::Stdio {
            command: command.into(),
            args: args.iter().map(|a| a.to_string()).collect(),
            env: BTreeMap::new(),
        }
    }

    #[test]
    fn files_named_inside_the_workspace_are_found_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("srv")).unwrap();
        std::fs::write(root.join("mcp_server.py"), "print(1)").unwrap();
        std::fs::write(root.join("srv/index.js"), "x").unwrap();
        std::os::unix::fs::symlink("/etc/hostname", root.join("out")).unwrap();
        let t = stdio(
            "python3",
            &[
                "mcp_server.py",
                "--entry=./srv/index.js",
                "srv",
                "out",
                "ok",
            ],
        );
        let found = named_files(&t, root);
        let paths: Vec<&str> = found.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["mcp_server.py", "srv/index.js"]);
        assert_eq!(check(&t, &found, root), Ok(()));
        std::fs::write(root.join("mcp_server.py"), "print(2)").unwrap();
        assert_eq!(
            check(&t, &found, root),
            Err(vec![FileChange::Changed("mcp_server.py".into())])
        );
        std::fs::remove_file(root.join("srv/index.js")).unwrap();
        let now = named_files(&t, root);
        assert!(changes(&found, &now).contains(&FileChange::Gone("srv/index.js".into())));
        assert!(named_files(&stdio("./mcp_server.py", &[]), root)[0].path == "mcp_server.py");
    }

    #[test]
    fn files_named_by_the_project_file_are_found_before_they_exist() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(
            root.join(".mcp.json"),
            r#"{"mcpServers": {"a": {"command": "node", "args": ["./srv/new.js"]},
                "web": {"type": "http", "url": "http://127.0.0.1:1/mcp"}}}"#,
        )
        .unwrap();
        assert_eq!(project_servers_naming(root, Path::new("srv/new.js")), ["a"]);
        assert!(project_servers_naming(root, Path::new("srv/other.js")).is_empty());
    }
}
