//! Workspace path sandbox (stub; being written).
use std::path::{Path, PathBuf};

/// Why a path was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SandboxError {
    /// The path resolves outside the workspace.
    #[error("path `{requested}` is outside the workspace {root}")]
    Outside {
        /// As given.
        requested: String,
        /// Workspace root.
        root: PathBuf,
    },
}

/// Read or write access.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Reading.
    Read,
    /// Creating or changing.
    Write,
}

/// A path checked to be inside the workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedPath {
    /// Physical path (realpath of the deepest existing ancestor joined with the rest).
    pub physical: PathBuf,
    /// The same path relative to the canonical workspace root.
    pub relative: PathBuf,
}

/// Resolves `requested` against `cwd` inside `workspace_root` (stub).
pub fn resolve(
    workspace_root: &Path,
    cwd: &Path,
    requested: &str,
    _access: Access,
) -> Result<ResolvedPath, SandboxError> {
    let p = cwd.join(requested);
    match p.strip_prefix(workspace_root) {
        Ok(rel) => Ok(ResolvedPath {
            relative: rel.to_path_buf(),
            physical: p.clone(),
        }),
        Err(_) => Err(SandboxError::Outside {
            requested: requested.into(),
            root: workspace_root.into(),
        }),
    }
}
