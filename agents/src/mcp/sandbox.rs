//! Stdio MCP servers run in the command sandbox of their workspace, like `run_command`
//! ([`crate::sandbox_os`]): writes only in the workspace (a worker's worktree), the server's own
//! temp dir (`TMPDIR`) and `[sandbox] writable`; no reads of the denied paths (`~/.ssh`,
//! `~/.aws`, `~/.gnupg`, `~/.config/ahelper`, `[sandbox] deny_read`) nor of what the
//! `read_file` deny rules cover; `.git` and `.ahelper` read-only; the command environment
//! without provider keys ([`crate::tools::shell::command_env`]). Network follows `[sandbox]
//! network` (default on: most servers talk to an API) unless the server's entry says
//! `network = false` (or `true`), which only the user's own `config.toml` can set, as
//! `sandbox = false`, which runs that server unconfined.
//!
//! A server is a long-lived process: its temp dir lives as long as its connection.

use super::config::McpServerSpec;
use crate::command_temp::CommandTemp;
use crate::permissions::PermissionRule;
use crate::sandbox_os::CommandSandbox;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// The sandbox the stdio servers of one agent start in.
#[derive(Debug, Clone, Default)]
pub struct ServerSandbox {
    /// The agent's command sandbox (`None`: servers run unconfined, as without `[sandbox]`
    /// enforcement).
    pub policy: Option<Arc<CommandSandbox>>,
    /// The deny rules in force (the `read_file` ones are hidden from servers).
    pub read_deny: Vec<PermissionRule>,
}

impl ServerSandbox {
    /// The sandbox of `policy` with the deny rules `read_deny`.
    pub fn new(policy: Arc<CommandSandbox>, read_deny: Vec<PermissionRule>) -> Self {
        ServerSandbox {
            policy: Some(policy),
            read_deny,
        }
    }
}

/// Confines `cmd` (the server `spec`, started in `cwd`) when its sandbox is enforced and the
/// server did not opt out: the command environment with `env` and a private `TMPDIR`, and the
/// landlock ruleset and namespaces installed before `exec`. Returns the temp dir to keep for
/// the server's life (`None` when the server runs unconfined).
///
/// # Errors
/// The temp dir, a hidden path or the ruleset cannot be made (the server must not start).
pub(super) fn confine(
    cmd: &mut tokio::process::Command,
    spec: &McpServerSpec,
    env: &BTreeMap<String, String>,
    sandbox: &ServerSandbox,
    cwd: &Path,
) -> Result<Option<CommandTemp>, String> {
    let Some(policy) = sandbox.policy.as_deref().filter(|p| p.is_enforced()) else {
        return Ok(None);
    };
    if !spec.sandboxed() {
        return Ok(None);
    }
    let mut policy = policy.clone();
    if let Some(network) = spec.network() {
        policy.network = network;
    }
    let temp = CommandTemp::create().map_err(|e| format!("cannot create its temp dir: {e}"))?;
    let mut extra = env.clone();
    extra.insert("TMPDIR".into(), temp.path().display().to_string());
    extra.insert(
        crate::process_sweep::OWNER_VAR.into(),
        crate::process_sweep::owner_token(),
    );
    cmd.env_clear().envs(crate::tools::shell::command_env(
        std::env::vars_os(),
        &extra,
    ));
    let hidden = if policy.namespaces {
        crate::permissions::hidden_paths_in(
            &sandbox.read_deny,
            policy.workspace_root(),
            &policy.added_dirs(),
        )
        .map_err(|e| e.to_string())?
    } else {
        crate::permissions::HiddenPaths::default()
    };
    if let Some(dir) = hidden.dirs.iter().find(|d| cwd.starts_with(d)) {
        return Err(format!(
            "its working directory {} is inside {}, which a read_file deny rule covers",
            cwd.display(),
            dir.display()
        ));
    }
    let mut prepared = policy
        .prepare_hiding(Some(temp.path()), &hidden)
        .map_err(|e| e.to_string())?;
    // The report of leftover processes is for commands; a server's end is seen on its pipe.
    drop(prepared.take_report());
    prepared.install(cmd);
    Ok(Some(temp))
}
