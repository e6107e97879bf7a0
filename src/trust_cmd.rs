//! Trust in the project config: `ahelper trust`, `--trust-project`, the start-up question in
//! the REPL and the warning naming ignored settings everywhere else
//! (`ahelper_agents::project_trust`, `ahelper_agents::config::split_untrusted`).

use crate::cli::Cli;
use ahelper_agents::config::{Config, EnvSnapshot, UntrustedSettings};
use ahelper_agents::project_trust;
use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;

/// Records trust in `<workspace>/.ahelper/config.toml` as it is now. Returns the line to show.
///
/// # Errors
/// No project config, no state directory (`XDG_STATE_HOME`/`HOME` unset), or the trust file
/// cannot be read or written.
pub fn record(workspace: &Path, env: &EnvSnapshot) -> Result<String, String> {
    let workspace = std::fs::canonicalize(workspace)
        .map_err(|e| format!("cannot open {}: {e}", workspace.display()))?;
    let path = Config::project_config_path(&workspace);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Ok(format!(
                "{} does not exist; nothing to trust",
                path.display()
            ));
        }
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let state = env.state_dir().ok_or(
        "cannot record trust: neither XDG_STATE_HOME nor HOME is set (the trust file lives in \
         $XDG_STATE_HOME/ahelper)",
    )?;
    let trust_file = project_trust::trust_file_path(&state);
    project_trust::trust(&trust_file, &workspace, &bytes).map_err(|e| e.to_string())?;
    Ok(format!(
        "trusted {} (sha256 {}); its settings apply until the file changes",
        path.display(),
        &project_trust::digest(&bytes)[..12]
    ))
}

/// The configuration to run with: when the project config has untrusted widening settings,
/// asks in an interactive REPL start-up (a yes trusts the file and reloads), else warns on
/// stderr naming the ignored keys.
///
/// # Errors
/// Reloading the configuration after a yes failed.
pub fn settle(config: Config, cli: &Cli, env: &EnvSnapshot) -> Result<Config, String> {
    let Some(untrusted) = config.untrusted.clone() else {
        return Ok(config);
    };
    let repl = cli.command.is_none()
        && cli.prompt.is_none()
        && std::io::stdin().is_terminal()
        && std::io::stderr().is_terminal();
    if repl && ask(&untrusted) {
        let message = record(&config.workspace_root, env)?;
        eprintln!("ahelper: {message}");
        return crate::load_config(cli, env);
    }
    eprintln!("ahelper: warning: {}", warning(&untrusted));
    Ok(config)
}

/// "ignoring … of the untrusted project config …: keys; run `ahelper trust` …".
pub fn warning(untrusted: &UntrustedSettings) -> String {
    format!(
        "ignoring settings of {} that widen permissions or raise what a session may spend \
         (model, prices, limits), because you have not trusted this file: {}. Review it, then \
         run `ahelper trust` (or pass --trust-project) to apply them",
        untrusted.path.display(),
        untrusted.ignored.join(", ")
    )
}

/// Asks on the terminal whether to trust the file; true on `y`/`yes`.
fn ask(untrusted: &UntrustedSettings) -> bool {
    let mut err = std::io::stderr();
    let _ = write!(
        err,
        "ahelper: {} sets {}, which widen what the model may do or what it may spend.\nTrust \
         this file? [y/N] ",
        untrusted.path.display(),
        untrusted.ignored.join(", ")
    );
    let _ = err.flush();
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line).is_err() {
        return false;
    }
    matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}
