//! The user's trust in a project's configuration file (`<workspace>/.ahelper/config.toml`).
//!
//! A cloned repository can ship a project config that widens what the model may do (`mode =
//! "bypass"`, allow rules, a wider sandbox, another endpoint that would receive the API key).
//! Such settings apply only once the user trusts that exact file: its SHA-256 is recorded in
//! the user's state directory, in `$XDG_STATE_HOME/ahelper/trusted-projects.json`, keyed by the
//! workspace's canonical path. A changed file is untrusted again until the user trusts it anew.
//! Which settings widen is [`crate::config::split_untrusted`]'s list.
//!
//! File format (JSON, written atomically):
//! `{"projects": {"/abs/workspace": {"sha256": "<64 hex digits>"}}}`.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Name of the trust file inside ahelper's state directory.
pub const TRUST_FILE: &str = "trusted-projects.json";

/// The trust file's content.
#[derive(Debug, Default, Serialize, Deserialize)]
struct TrustFile {
    /// Canonical workspace path → the trusted config file.
    #[serde(default)]
    projects: BTreeMap<String, TrustedConfig>,
}

/// One trusted project config.
#[derive(Debug, Serialize, Deserialize)]
struct TrustedConfig {
    /// SHA-256 of the file's bytes, lower-case hex.
    sha256: String,
}

/// Reading or writing the trust file failed.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    /// The trust file exists but cannot be read or is not the JSON above.
    #[error("cannot read {path}: {message}; fix or delete that file and trust the project again")]
    Read {
        /// The trust file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// The trust file could not be written; nothing was recorded.
    #[error("cannot record trust in {path}: {message}")]
    Write {
        /// The trust file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
}

/// The trust file under `state_dir` (`$XDG_STATE_HOME/ahelper`).
pub fn trust_file_path(state_dir: &Path) -> PathBuf {
    state_dir.join(TRUST_FILE)
}

/// SHA-256 of `bytes` as 64 lower-case hex digits.
pub fn digest(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// True when `trust_file` records `config_bytes`' digest for `workspace_root` (canonical). A
/// missing or unreadable trust file trusts nothing.
pub fn is_trusted(trust_file: &Path, workspace_root: &Path, config_bytes: &[u8]) -> bool {
    let Ok(file) = read(trust_file) else {
        return false;
    };
    file.projects
        .get(&key(workspace_root))
        .is_some_and(|t| t.sha256 == digest(config_bytes))
}

/// Records trust in `config_bytes` (the project config's current content) for
/// `workspace_root` (canonical), replacing an earlier entry. Creates the state directory.
///
/// # Errors
/// [`TrustError::Read`] when the existing trust file is malformed, [`TrustError::Write`] when
/// it cannot be written.
pub fn trust(
    trust_file: &Path,
    workspace_root: &Path,
    config_bytes: &[u8],
) -> Result<(), TrustError> {
    let mut file = read(trust_file)?;
    file.projects.insert(
        key(workspace_root),
        TrustedConfig {
            sha256: digest(config_bytes),
        },
    );
    let write_err = |message: String| TrustError::Write {
        path: trust_file.to_path_buf(),
        message,
    };
    if let Some(parent) = trust_file.parent() {
        std::fs::create_dir_all(parent).map_err(|e| write_err(e.to_string()))?;
    }
    let text = serde_json::to_string_pretty(&file).map_err(|e| write_err(e.to_string()))?;
    crate::atomic_write::write_path(trust_file, text.as_bytes()).map_err(|e| {
        write_err(crate::atomic_write::describe_write_error(
            &trust_file.display().to_string(),
            &e,
        ))
    })
}

fn key(workspace_root: &Path) -> String {
    std::fs::canonicalize(workspace_root)
        .unwrap_or_else(|_| workspace_root.to_path_buf())
        .to_string_lossy()
        .into_owned()
}

fn read(trust_file: &Path) -> Result<TrustFile, TrustError> {
    let read_err = |message: String| TrustError::Read {
        path: trust_file.to_path_buf(),
        message,
    };
    match std::fs::read_to_string(trust_file) {
        Ok(text) => serde_json::from_str(&text).map_err(|e| read_err(e.to_string())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(TrustFile::default()),
        Err(e) => Err(read_err(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trust_follows_the_content() {
        let state = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let store = trust_file_path(state.path());
        assert!(!is_trusted(&store, ws.path(), b"a"));
        trust(&store, ws.path(), b"a").unwrap();
        assert!(is_trusted(&store, ws.path(), b"a"));
        assert!(!is_trusted(&store, ws.path(), b"b"));
        let other = tempfile::tempdir().unwrap();
        assert!(!is_trusted(&store, other.path(), b"a"));
        trust(&store, ws.path(), b"b").unwrap();
        assert!(is_trusted(&store, ws.path(), b"b"));
        assert!(!is_trusted(&store, ws.path(), b"a"));
    }
}
