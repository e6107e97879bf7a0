//! The user's approval of a workspace's `.mcp.json`: a project file can start programs, so its
//! servers start only once the user said yes to this exact content — the file's bytes and the
//! content of every workspace file its servers name ([`super::files`]: `python3
//! mcp_server.py` approves `mcp_server.py` as it is).
//!
//! Approvals live in `$XDG_STATE_HOME/ahelper/mcp-approvals.json` (outside the repository, so
//! a cloned repository cannot approve itself): `{"approved": {"<absolute path of .mcp.json>":
//! {"config": "<SHA-256 of its bytes, hex>", "files": {"<workspace-relative path>": "<SHA-256>"}}}}`.
//! A changed `.mcp.json` or named file is asked about again. (Records of older versions hold
//! only the config hash; the files they name count as not approved.)

use super::files::{FileChange, NamedFile};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// File name of the approval record inside the state directory.
pub const APPROVALS_FILE: &str = "mcp-approvals.json";

/// What one approval covers.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ApprovedContent {
    /// SHA-256 (hex) of the `.mcp.json` bytes.
    pub config: String,
    /// The workspace files its servers name: path relative to the workspace → SHA-256 (hex).
    #[serde(default)]
    pub files: BTreeMap<String, String>,
}

impl ApprovedContent {
    /// The content of `config_bytes` with the named `files`.
    pub fn of(config_bytes: &[u8], files: &[NamedFile]) -> Self {
        ApprovedContent {
            config: content_hash(config_bytes),
            files: files
                .iter()
                .map(|f| (f.path.clone(), f.hash.clone()))
                .collect(),
        }
    }

    fn named_files(&self) -> Vec<NamedFile> {
        self.files
            .iter()
            .map(|(path, hash)| NamedFile {
                path: path.clone(),
                hash: hash.clone(),
            })
            .collect()
    }
}

/// One recorded approval: the current shape, or an older record with the config hash only.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(untagged)]
enum Recorded {
    Content(ApprovedContent),
    ConfigOnly(String),
}

impl Recorded {
    fn content(&self) -> ApprovedContent {
        match self {
            Recorded::Content(c) => c.clone(),
            Recorded::ConfigOnly(hash) => ApprovedContent {
                config: hash.clone(),
                files: BTreeMap::new(),
            },
        }
    }
}

/// The approval record.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Approvals {
    #[serde(default)]
    approved: BTreeMap<String, Recorded>,
}

/// Why a project file needs the user's approval (again).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unapproved {
    /// It was never approved.
    Never,
    /// `.mcp.json` itself changed since it was approved.
    ConfigChanged,
    /// A file its servers name changed, is new or is gone.
    File(FileChange),
}

impl std::fmt::Display for Unapproved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unapproved::Never => f.write_str("this file has not been approved"),
            Unapproved::ConfigChanged => f.write_str("this file changed since it was approved"),
            Unapproved::File(change) => write!(f, "{change} since the file was approved"),
        }
    }
}

/// Whether a project `.mcp.json` may start its servers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalState {
    /// The user approved this content.
    Approved,
    /// Never approved, or approved with other content.
    NotApproved {
        /// The current content, to record when the user approves.
        content: ApprovedContent,
        /// What differs from the recorded approval.
        reasons: Vec<Unapproved>,
    },
}

/// SHA-256 (hex) of `bytes`.
pub fn content_hash(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The approval state of `file` (the workspace's `.mcp.json`, whose servers name `files`)
/// given the state directory (`None` when there is none: nothing is ever approved).
///
/// # Errors
/// The project file cannot be read.
pub fn state(
    file: &Path,
    files: &[NamedFile],
    state_dir: Option<&Path>,
) -> std::io::Result<ApprovalState> {
    let content = ApprovedContent::of(&std::fs::read(file)?, files);
    let recorded = state_dir
        .map(|d| load(&d.join(APPROVALS_FILE)))
        .unwrap_or_default()
        .approved
        .get(&key(file))
        .map(Recorded::content);
    let reasons = match recorded {
        None => vec![Unapproved::Never],
        Some(then) => {
            let mut reasons = Vec::new();
            if then.config != content.config {
                reasons.push(Unapproved::ConfigChanged);
            }
            let changed = super::files::changes(&then.named_files(), files);
            reasons.extend(changed.into_iter().map(Unapproved::File));
            reasons
        }
    };
    Ok(if reasons.is_empty() {
        ApprovalState::Approved
    } else {
        ApprovalState::NotApproved { content, reasons }
    })
}

/// Records that the user approved `file` with `content` (atomic write).
///
/// # Errors
/// The state directory cannot be created or written.
pub fn approve(
    file: &Path,
    content: &ApprovedContent,
    state_dir: &Path,
) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(state_dir)?;
    let path = state_dir.join(APPROVALS_FILE);
    let mut record = load(&path);
    record
        .approved
        .insert(key(file), Recorded::Content(content.clone()));
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

    fn named(path: &str, hash: &str) -> NamedFile {
        NamedFile {
            path: path.into(),
            hash: hash.into(),
        }
    }

    #[test]
    fn approval_follows_content_and_named_files() {
        let dir = tempfile::tempdir().unwrap();
        let state_dir = dir.path().join("state");
        let file = dir.path().join(".mcp.json");
        std::fs::write(&file, "{}").unwrap();
        let files = [named("srv.py", "1")];
        let ApprovalState::NotApproved { content, reasons } =
            state(&file, &files, Some(&state_dir)).unwrap()
        else {
            panic!("approved without asking");
        };
        assert_eq!(reasons, [Unapproved::Never]);
        approve(&file, &content, &state_dir).unwrap();
        assert_eq!(
            state(&file, &files, Some(&state_dir)).unwrap(),
            ApprovalState::Approved
        );
        let ApprovalState::NotApproved { reasons, .. } =
            state(&file, &[named("srv.py", "2")], Some(&state_dir)).unwrap()
        else {
            panic!("a changed server file stayed approved");
        };
        assert_eq!(
            reasons,
            [Unapproved::File(FileChange::Changed("srv.py".into()))]
        );
        std::fs::write(&file, r#"{"mcpServers": {}}"#).unwrap();
        assert!(matches!(
            state(&file, &files, Some(&state_dir)).unwrap(),
            ApprovalState::NotApproved { .. }
        ));
        assert!(matches!(
            state(&file, &files, None).unwrap(),
            ApprovalState::NotApproved { .. }
        ));
    }

    #[test]
    fn an_older_record_does_not_cover_named_files() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(".mcp.json");
        std::fs::write(&file, "{}").unwrap();
        let record = serde_json::json!({"approved": {key(&file): content_hash(b"{}")}});
        std::fs::write(dir.path().join(APPROVALS_FILE), record.to_string()).unwrap();
        assert_eq!(
            state(&file, &[], Some(dir.path())).unwrap(),
            ApprovalState::Approved
        );
        let ApprovalState::NotApproved { reasons, .. } =
            state(&file, &[named("srv.py", "1")], Some(dir.path())).unwrap()
        else {
            panic!("a file the old record never saw is approved");
        };
        assert_eq!(
            reasons,
            [Unapproved::File(FileChange::New("srv.py".into()))]
        );
    }
}
