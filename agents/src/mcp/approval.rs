//! The user's approval of a workspace's `.mcp.json`: a project file can start programs, so its
//! servers start only once the user said yes to this exact content.
//!
//! Approvals live in `$XDG_STATE_HOME/ahelper/mcp-approvals.json` (outside the repository, so
//! a cloned repository cannot approve itself): `{"approved": {"<absolute path of .mcp.json>":
//! "<SHA-256 of its bytes, hex>"}}`. A changed file has another hash and is asked about again.

use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// File name of the approval record inside the state directory.
pub const APPROVALS_FILE: &str = "mcp-approvals.json";

/// The approval record.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Approvals {
    #[serde(default)]
    approved: BTreeMap<String, String>,
}

/// Whether a project `.mcp.json` may start its servers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalState {
    /// The user approved this content.
    Approved,
    /// Never approved, or approved with other content.
    NotApproved {
        /// SHA-256 (hex) of the current content, to record when the user approves.
        hash: String,
    },
}

/// SHA-256 (hex) of `bytes`.
pub fn content_hash(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The approval state of `file` (the workspace's `.mcp.json`) given the state directory
/// (`None` when there is none: nothing is ever approved).
///
/// # Errors
/// The project file cannot be read.
pub fn state(file: &Path, state_dir: Option<&Path>) -> std::io::Result<ApprovalState> {
    let hash = content_hash(&std::fs::read(file)?);
    let approved = state_dir
        .map(|d| load(&d.join(APPROVALS_FILE)))
        .unwrap_or_default();
    Ok(
        if approved
            .approved
            .get(&key(file))
            .is_some_and(|h| *h == hash)
        {
            ApprovalState::Approved
        } else {
            ApprovalState::NotApproved { hash }
        },
    )
}

/// Records that the user approved `file` with content hash `hash` (atomic write).
///
/// # Errors
/// The state directory cannot be created or written.
pub fn approve(file: &Path, hash: &str, state_dir: &Path) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(state_dir)?;
    let path = state_dir.join(APPROVALS_FILE);
    let mut record = load(&path);
    record.approved.insert(key(file), hash.to_string());
    let text = serde_json::to_vec_pretty(&record).map_err(std::io::Error::other)?;
    crate::atomic_write::write_path(&path, &text)?;
    Ok(path)
}

fn key(file: &Path) -> String {
    std::fs::canonicalize(file)
        .unwrap_or_else(|_| file.to_path_buf())
        .display()
        .to_string()
}

/// A missing or unreadable record approves nothing.
fn load(path: &Path) -> Approvals {
    std::fs::read(path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approval_follows_content() {
        let dir = tempfile::tempdir().unwrap();
        let state_dir = dir.path().join("state");
        let file = dir.path().join(".mcp.json");
        std::fs::write(&file, "{}").unwrap();
        let ApprovalState::NotApproved { hash } = state(&file, Some(&state_dir)).unwrap() else {
            panic!("approved without asking");
        };
        approve(&file, &hash, &state_dir).unwrap();
        assert_eq!(
            state(&file, Some(&state_dir)).unwrap(),
            ApprovalState::Approved
        );
        std::fs::write(&file, r#"{"mcpServers": {}}"#).unwrap();
        assert!(matches!(
            state(&file, Some(&state_dir)).unwrap(),
            ApprovalState::NotApproved { .. }
        ));
        assert!(matches!(
            state(&file, None).unwrap(),
            ApprovalState::NotApproved { .. }
        ));
    }
}
