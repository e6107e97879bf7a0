//! What `swarm resume` must not take from `run.json` on trust. A run's record lives in the
//! repository (`.ahelper/runs/<run>/run.json`), where a model in bypass mode, a hook or a cloned
//! repository can edit it; three of its fields decide what a resume runs and where code goes:
//! the distributed run's `remote` (NATS server and git remote), the verification command
//! (`verify`) and the permission mode. Each save of a record that carries a seal path
//! ([`super::state::RunRecord::seal`]) also records these values outside the repository, in
//! the user's state dir (`<state>/run-seals/<repo id>/<run id>.json`, written atomically, only
//! when they changed); `swarm resume` compares ([`check`]) and refuses a record whose values
//! differ, or that has no seal (a run from before seals), unless told to accept it.

use super::state::{RemoteRecord, RunRecord};
use crate::permissions::PermissionMode;
use crate::verify::VerifyChoice;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The sealed values of a run, as JSON in its seal file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SealedValues {
    /// `run.json`'s `remote`.
    pub remote: Option<RemoteRecord>,
    /// `run.json`'s `verify`.
    pub verify: Option<VerifyChoice>,
    /// `run.json`'s `permission_mode`.
    pub permission_mode: Option<PermissionMode>,
    /// `run.json`'s `session_rules` (absent in seals from before they were recorded).
    #[serde(default, skip_serializing_if = "super::state::SessionRules::is_empty")]
    pub session_rules: super::state::SessionRules,
}

impl SealedValues {
    /// The values `record` holds now.
    pub fn of(record: &RunRecord) -> SealedValues {
        SealedValues {
            remote: record.remote.clone(),
            verify: record.verify.clone(),
            permission_mode: record.permission_mode,
            session_rules: record.session_rules.clone(),
        }
    }
}

/// How a record compares with its seal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SealCheck {
    /// The values are those the run recorded.
    Matches,
    /// No seal: a run recorded before seals existed (or on another machine or account).
    Missing,
    /// These fields of `run.json` differ from what the run recorded.
    Changed(Vec<&'static str>),
}

/// `<state>/run-seals/<repo id>/<run id>.json`.
pub fn seal_path(state_dir: &Path, repo_root: &Path, run_id: &str) -> PathBuf {
    state_dir
        .join("run-seals")
        .join(super::run::repo_id(repo_root))
        .join(format!("{run_id}.json"))
}

/// Records `record`'s values at `path` when they differ from what is there (atomically).
///
/// # Errors
/// The I/O error of creating the directory or writing the file.
pub fn write(path: &Path, record: &RunRecord) -> std::io::Result<()> {
    let values = SealedValues::of(record);
    if read(path)?.as_ref() == Some(&values) {
        return Ok(());
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let text = serde_json::to_string_pretty(&values).map_err(std::io::Error::other)?;
    crate::atomic_write::write_path(path, text.as_bytes())
}

/// The values recorded at `path`; `None` when there is no seal (an unreadable one reads as
/// none: it matches nothing).
fn read(path: &Path) -> std::io::Result<Option<SealedValues>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(serde_json::from_str(&text).ok()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Compares `record` with its seal at `path`.
///
/// # Errors
/// The I/O error of reading the seal (other than its absence).
pub fn check(path: &Path, record: &RunRecord) -> std::io::Result<SealCheck> {
    let Some(sealed) = read(path)? else {
        return Ok(SealCheck::Missing);
    };
    let now = SealedValues::of(record);
    let mut changed = Vec::new();
    if sealed.remote != now.remote {
        changed.push("remote");
    }
    if sealed.verify != now.verify {
        changed.push("verify");
    }
    if sealed.permission_mode != now.permission_mode {
        changed.push("permission_mode");
    }
    if sealed.session_rules != now.session_rules {
        changed.push("session_rules");
    }
    Ok(if changed.is_empty() {
        SealCheck::Matches
    } else {
        SealCheck::Changed(changed)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::swarm::state::RunStatus;

    #[test]
    fn a_saved_record_matches_its_seal_until_run_json_is_edited() {
        let dir = tempfile::tempdir().unwrap();
        let seal = seal_path(&dir.path().join("state"), dir.path(), "r1");
        let mut record = RunRecord::new("r1".into(), dir.path().into(), RunStatus::Running);
        assert_eq!(check(&seal, &record).unwrap(), SealCheck::Missing);
        record.seal = Some(seal.clone());
        record.permission_mode = Some(PermissionMode::Default);
        record.remote = Some(RemoteRecord {
            nats_url: "nats://127.0.0.1:4222".into(),
            repo_url: "/srv/git/p.git".into(),
        });
        record.save().unwrap();
        let mut read = RunRecord::load(dir.path(), "r1").unwrap();
        assert_eq!(read.seal, None, "the seal path is not in run.json");
        assert_eq!(check(&seal, &read).unwrap(), SealCheck::Matches);
        read.remote.as_mut().unwrap().repo_url = "/home/u/private".into();
        read.permission_mode = Some(PermissionMode::Bypass);
        assert_eq!(
            check(&seal, &read).unwrap(),
            SealCheck::Changed(vec!["remote", "permission_mode"])
        );
    }
}
