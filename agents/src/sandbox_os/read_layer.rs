//! The read layer of the command sandbox (issue 32): the landlock ruleset that says what a
//! command may **read**, built once per policy and reused by every command until what it was
//! built from changes.
//!
//! "Read everything except the denied paths" needs a rule per entry of every ancestor of a
//! denied path ([`read_plan`]): with 20,000 files beside the workspace that is 20,000 `O_PATH`
//! opens and `landlock_add_rule` calls per command. Landlock rules belong to inodes, and a
//! ruleset fd can be applied any number of times (`landlock_restrict_self` copies it into the
//! new domain), so the read rules live in a ruleset of their own that handles only the read
//! rights ([`ReadLayer`]); each command applies a duplicate of its fd, and a second, small
//! ruleset of its own for the write rights and the network (`CommandSandbox::prepare_hiding`).
//! Landlock grants an access only when every layer that handles it does, so the two layers
//! together allow exactly what one ruleset with both sets of rules allowed.
//!
//! **When it is rebuilt** ([`Fingerprint`]): the plan depends on the names in the listed-only
//! directories (the ancestors of denied paths) and on which inodes the explicitly granted paths
//! are. Before each command the listed-only directories are `stat`ed: an entry created, removed
//! or renamed in one changes its modification time, a directory replaced changes its inode, and
//! either rebuilds the layer — so a sibling created later is covered, by the next command, as
//! before. A directory modified within [`RACY_WINDOW`] before a build cannot be trusted to show
//! a later change in its timestamp (timestamps are coarse): such a layer is used once and
//! rebuilt. A layer is also rebuilt after [`MAX_USES`] commands: each command's PID namespace
//! adds a rule for its own `/proc` to the layer it applies, which is this shared ruleset.

use super::SandboxOsError;
use landlock::{
    ABI, AccessFs, BitFlags, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreated,
    RulesetCreatedAttr,
};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// A directory modified less than this before a build may change again within the same
/// timestamp tick; a layer built then is used once only.
const RACY_WINDOW: Duration = Duration::from_secs(2);

/// Commands served by one layer before it is rebuilt (bounds the `/proc` rules that the
/// commands' PID namespaces add to it, one each).
const MAX_USES: u32 = 256;

/// What a read layer is built from: the denied paths, the paths readable inside them, and the
/// paths granted read explicitly (writable paths, the base of the commands' temp dirs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ReadKey {
    pub denied: Vec<PathBuf>,
    pub readable: Vec<PathBuf>,
    pub granted: Vec<PathBuf>,
}

/// The read layer cache of one [`super::CommandSandbox`] (shared by its clones, which hold the
/// same policy; a clone whose read policy differs rebuilds it: [`ReadKey`]). It is not part of
/// the policy: two sandboxes compare equal whatever their caches hold.
#[derive(Clone, Default)]
pub struct ReadLayerCache(Arc<Mutex<Option<ReadLayer>>>);

impl PartialEq for ReadLayerCache {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for ReadLayerCache {}

impl std::fmt::Debug for ReadLayerCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ReadLayerCache")
    }
}

/// One built read layer and what decides whether it may be reused.
struct ReadLayer {
    key: ReadKey,
    ruleset: RulesetCreated,
    fingerprint: Fingerprint,
    /// The listed-only directories of the plan, whose state [`Self::fingerprint`] holds.
    listed_dirs: Vec<PathBuf>,
    /// Modified within [`RACY_WINDOW`] of the build: use once, then rebuild.
    racy: bool,
    uses: u32,
}

/// The state of the file system a layer was built from: each listed-only directory's device,
/// inode, modification and change time, and each explicitly granted path's device and inode
/// (`None` where missing).
#[derive(Debug, PartialEq, Eq)]
struct Fingerprint {
    listed: Vec<Option<DirStamp>>,
    granted: Vec<Option<(u64, u64)>>,
}

/// A directory's device, inode, modification time (seconds, nanoseconds) and change time
/// (seconds, nanoseconds).
type DirStamp = (u64, u64, i64, i64, i64, i64);

impl Fingerprint {
    fn take(listed: &[PathBuf], granted: &[PathBuf]) -> Fingerprint {
        let listed = listed
            .iter()
            .map(|p| {
                std::fs::metadata(p).ok().map(|m| {
                    (
                        m.dev(),
                        m.ino(),
                        m.mtime(),
                        m.mtime_nsec(),
                        m.ctime(),
                        m.ctime_nsec(),
                    )
                })
            })
            .collect();
        let granted = granted
            .iter()
            .map(|p| std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino())))
            .collect();
        Fingerprint { listed, granted }
    }

    /// True when a listed-only directory changed at or after `since` (minus the racy window).
    fn is_racy(&self, since: SystemTime) -> bool {
        let Ok(since) = since.duration_since(SystemTime::UNIX_EPOCH) else {
            return true;
        };
        let limit = since.saturating_sub(RACY_WINDOW).as_secs();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.listed
            .iter()
            .flatten()
            .any(|&(_, _, mtime, _, ctime, _)| mtime >= limit || ctime >= limit)
    }
}

impl ReadLayerCache {
    /// A duplicate of the read layer for `key` (the command applies it and may add its own
    /// `/proc` rule to it), built now when there is none, it was built for another key, the
    /// file system it was built from changed, or it has served [`MAX_USES`] commands.
    ///
    /// # Errors
    /// [`SandboxOsError::Ruleset`] when the kernel refuses the ruleset, a rule or the `dup`.
    pub(super) fn ruleset(
        &self,
        key: &ReadKey,
        abi: ABI,
    ) -> Result<RulesetCreated, SandboxOsError> {
        let mut slot = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let reusable = slot.as_ref().is_some_and(|layer| layer.is_current(key));
        if !reusable {
            *slot = Some(ReadLayer::build(key, abi)?);
        }
        let layer = slot.as_mut().expect("a layer was just stored");
        layer.uses += 1;
        layer
            .ruleset
            .try_clone()
            .map_err(|e| SandboxOsError::Ruleset(format!("duplicate the read ruleset: {e}")))
    }
}

impl ReadLayer {
    fn is_current(&self, key: &ReadKey) -> bool {
        if self.key != *key || self.racy || self.uses >= MAX_USES {
            return false;
        }
        Fingerprint::take(&self.listed_dirs, &key.granted) == self.fingerprint
    }

    fn build(key: &ReadKey, abi: ABI) -> Result<ReadLayer, SandboxOsError> {
        let err = |e: landlock::RulesetError| SandboxOsError::Ruleset(e.to_string());
        let started = SystemTime::now();
        let plan = read_plan(&key.denied);
        // Taken before the rules are added: a change during the build shows as a change.
        let fingerprint = Fingerprint::take(&plan.list_only, &key.granted);
        let read = AccessFs::from_read(abi);
        let mut created = Ruleset::default()
            .handle_access(read)
            .and_then(Ruleset::create)
            .map_err(err)?;
        for dir in &plan.list_only {
            created = add_path_rule(created, dir, AccessFs::ReadDir.into(), abi).map_err(err)?;
        }
        let dev = PathBuf::from("/dev");
        let paths = plan
            .readable
            .iter()
            .chain(&key.readable)
            .chain(&key.granted);
        for path in paths.chain(std::iter::once(&dev)) {
            created = add_path_rule(created, path, read, abi).map_err(err)?;
        }
        Ok(ReadLayer {
            key: key.clone(),
            ruleset: created,
            racy: fingerprint.is_racy(started),
            fingerprint,
            listed_dirs: plan.list_only,
            uses: 0,
        })
    }
}

/// The read rules: subtrees readable whole, and directories only listable (ancestors of
/// denied paths).
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct ReadPlan {
    pub readable: Vec<PathBuf>,
    pub list_only: Vec<PathBuf>,
}

/// Covers the file system minus `denied` with whole subtrees (see the module docs of
/// [`super`]).
pub(super) fn read_plan(denied: &[PathBuf]) -> ReadPlan {
    let mut plan = ReadPlan::default();
    let denied: Vec<&PathBuf> = denied.iter().filter(|d| d.is_absolute()).collect();
    visit(Path::new("/"), &denied, &mut plan, 0);
    plan
}

fn visit(dir: &Path, denied: &[&PathBuf], plan: &mut ReadPlan, depth: usize) {
    if denied.iter().any(|d| dir.starts_with(d)) {
        return;
    }
    if !denied.iter().any(|d| d.starts_with(dir)) || depth > 32 {
        plan.readable.push(dir.to_path_buf());
        return;
    }
    plan.list_only.push(dir.to_path_buf());
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let is_symlink = entry.file_type().is_ok_and(|t| t.is_symlink());
        if is_symlink {
            // Opening the rule's fd follows the link: judge the target, never recurse through it.
            let Ok(target) = std::fs::canonicalize(&path) else {
                continue;
            };
            let touches_denied = denied
                .iter()
                .any(|d| target.starts_with(d) || d.starts_with(&target));
            if !touches_denied {
                plan.readable.push(path);
            }
        } else {
            visit(&path, denied, plan, depth + 1);
        }
    }
}

/// Adds a path-beneath rule; a path that cannot be opened (missing, raced away) is skipped.
/// For a non-directory only the rights that apply to files are granted.
pub(super) fn add_path_rule(
    created: RulesetCreated,
    path: &Path,
    access: BitFlags<AccessFs>,
    abi: ABI,
) -> Result<RulesetCreated, landlock::RulesetError> {
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(created);
    };
    let access = if meta.is_dir() {
        access
    } else {
        access & AccessFs::from_file(abi)
    };
    if access.is_empty() {
        return Ok(created);
    }
    let Ok(fd) = PathFd::new(path) else {
        return Ok(created);
    };
    created.add_rule(PathBeneath::new(fd, access))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fingerprint_changes_with_an_entry_and_with_a_replaced_directory() {
        let dir = tempfile::tempdir().unwrap();
        let listed = dir.path().join("home");
        std::fs::create_dir(&listed).unwrap();
        let granted = vec![dir.path().join("ws")];
        let dirs = vec![listed.clone()];
        let before = Fingerprint::take(&dirs, &granted);
        assert_eq!(Fingerprint::take(&dirs, &granted), before);
        std::fs::write(listed.join("new"), "x").unwrap();
        let after_entry = Fingerprint::take(&dirs, &granted);
        assert_ne!(
            after_entry, before,
            "an entry created in a listed directory"
        );
        std::fs::rename(&listed, dir.path().join("old")).unwrap();
        std::fs::create_dir(&listed).unwrap();
        assert_ne!(
            Fingerprint::take(&dirs, &granted),
            after_entry,
            "a replaced directory"
        );
        std::fs::create_dir(&granted[0]).unwrap();
        assert_ne!(
            Fingerprint::take(&dirs, &granted).granted,
            after_entry.granted,
            "a granted path that appeared"
        );
    }

    #[test]
    fn a_directory_changed_just_before_the_build_makes_the_layer_racy() {
        let dir = tempfile::tempdir().unwrap();
        let dirs = vec![dir.path().to_path_buf()];
        let fresh = Fingerprint::take(&dirs, &[]);
        assert!(fresh.is_racy(SystemTime::now()));
        let later = SystemTime::now() + Duration::from_secs(10);
        assert!(!fresh.is_racy(later));
    }
}
