//! Warm cargo builds in new worktrees: a Rust project's dependency artifacts seeded from the
//! user's checkout (`[swarm] warm_cargo = "auto"`, the default).
//!
//! A new worktree has no `target/`, so a worker's first `cargo build` or `cargo test` compiles
//! every dependency (minutes on a real project). [`list_cargo_seed`] lists, once per run, the
//! **dependency** artifacts of the checkout's `target/debug` — `deps/lib*` (`.rlib`, `.rmeta`,
//! proc-macro `.so`) and their `.d` files, `build/` (build-script outputs) and `.fingerprint/`
//! of every package that is not one of the repository's own (a package whose `Cargo.toml` is
//! tracked in the repository); [`seed_cargo_target`] copies them into the new worktree's empty
//! `target/debug` — copy-on-write (`reflink`) where the file system supports it, else a plain
//! copy, modification times kept so that cargo sees them fresh. The repository's own crates,
//! `incremental/`, executables and uplifted files are left out: cargo rebuilds the own crates in
//! the worktree anyway (its sources are newer than any artifact), so the first build costs about
//! an incremental build.
//!
//! Guards (those of [`crate::bring_included`]):
//! * each worktree gets its **own copy**: nothing is shared with the checkout or another
//!   worktree (hard links are never used: rustc and build scripts rewrite some outputs in
//!   place, which would write through into the checkout);
//! * nothing is written when the worktree already has a `target/` (a recycled worktree keeps
//!   its own), and nothing is ever written into the checkout;
//! * the **size guard**: the artifacts are taken whole or not at all, within what is left of
//!   [`crate::IncludeLimits::max_bytes`]; when they do not fit they are skipped and named;
//! * symlinks are recreated, never followed; one leaving the repository is skipped and named; a
//!   `target` or `target/debug` that is itself a symlink is not read at all.
//!
//! Nothing is seeded (and [`CargoSeed::applies`] says why) when the repository has no
//! `Cargo.toml`, its `target/` is not git-ignored, nothing is built in `target/debug/deps`, or
//! its `.worktreeinclude` already covers `target/` (the user chose).

use std::collections::{BTreeSet, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::io_err;
use crate::include::{Copier, IncludeList, Item, describe_skipped, ignored_entries, item_path};
use crate::{GitError, IncludeLimits, IncludeReport, SkippedInclude, cli};

/// The directory seeded, relative to the repository root.
pub const CARGO_SEED_DIR: &str = "target/debug";

/// Sub-directories of `target/debug` that hold per-package artifacts.
const ARTIFACT_DIRS: [&str; 3] = ["deps", "build", ".fingerprint"];

/// Extensions of library artifacts in `deps/` (`lib<crate>-<hash>.<ext>`).
const LIBRARY_EXTENSIONS: [&str; 5] = ["rlib", "rmeta", "so", "dylib", "a"];

/// Why [`list_cargo_seed`] found nothing to seed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoSeedReason {
    /// No `Cargo.toml` at the repository root: not a Rust project.
    NotCargo,
    /// `target/` is not git-ignored (or is tracked): it is not a build directory to copy.
    TargetNotIgnored,
    /// `target/debug/deps` does not exist in the checkout (nothing built there yet).
    NothingBuilt,
    /// `target`, or `target/debug`, is a symlink: it is not read.
    TargetIsSymlink,
    /// The repository's `.worktreeinclude` matches files under `target/`: the user chose.
    CoveredByInclude,
}

/// The dependency artifacts of a checkout, listed once by [`list_cargo_seed`] and copied into
/// any number of worktrees by [`seed_cargo_target`].
#[derive(Debug)]
pub struct CargoSeed {
    main: PathBuf,
    applies: Result<Vec<Item>, NoSeedReason>,
}

impl CargoSeed {
    /// `Ok(())` when there is something to seed, else why not.
    pub fn applies(&self) -> Result<(), NoSeedReason> {
        self.applies.as_ref().map(|_| ()).map_err(|r| *r)
    }

    /// Files (and symlinks) listed, and their bytes (apparent sizes).
    pub fn size(&self) -> (u64, u64) {
        let items = self.applies.as_deref().unwrap_or_default();
        let bytes = items
            .iter()
            .map(|i| match i {
                Item::File(_, len) => *len,
                _ => 0,
            })
            .sum();
        (items.len() as u64, bytes)
    }
}

/// What [`seed_cargo_target`] did in one worktree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "outcome")]
pub enum CargoSeedReport {
    /// The artifacts were copied (`skipped`: symlinks left out, or the whole set when it did not
    /// fit the size guard, then `files` is 0).
    Seeded {
        /// Files and symlinks created.
        files: u64,
        /// Bytes copied.
        bytes: u64,
        /// Files cloned copy-on-write.
        reflinked: u64,
        /// What was left out, and why.
        skipped: Vec<SkippedInclude>,
    },
    /// The worktree already had a `target/` (a recycled worktree): left as it was.
    KeptExisting,
}

impl CargoSeedReport {
    /// One line for a transcript or a log.
    pub fn describe(&self) -> String {
        match self {
            CargoSeedReport::KeptExisting => {
                "warm cargo: the worktree's own target/ kept from its previous subtask".into()
            }
            CargoSeedReport::Seeded {
                files,
                bytes,
                reflinked,
                skipped,
            } => format!(
                "warm cargo ([swarm] warm_cargo): seeded {CARGO_SEED_DIR} with the checkout's \
                 dependency artifacts: {files} files ({bytes} bytes, {reflinked} copy-on-write){}",
                describe_skipped(skipped)
            ),
        }
    }

    /// Whether anything was left out.
    pub fn skipped_any(&self) -> bool {
        matches!(self, CargoSeedReport::Seeded { skipped, .. } if !skipped.is_empty())
    }
}

/// Lists the dependency artifacts of the checkout `main` (see the module docs); `include` is
/// the checkout's `.worktreeinclude` list (a list covering `target/` means nothing is seeded).
///
/// # Errors
/// [`GitError::GitCommand`] / [`GitError::GitNotFound`] from `git ls-files`; [`GitError::Io`]
/// when the checkout's `target/debug` cannot be read.
pub fn list_cargo_seed(main: &Path, include: &IncludeList) -> Result<CargoSeed, GitError> {
    let applies = match applicable(main, include)? {
        Err(reason) => Err(reason),
        Ok(()) => Ok(dependency_items(main, &own_crates(main)?)?),
    };
    Ok(CargoSeed {
        main: main.to_path_buf(),
        applies,
    })
}

/// Copies `seed` into `worktree`'s `target/debug` within `limits` when `worktree` has no
/// `target/` yet; `None` when the seed does not apply ([`CargoSeed::applies`]) or `worktree` is
/// the checkout itself (nothing is ever written there).
///
/// # Errors
/// [`GitError::Io`] / [`GitError::DiskFull`] when reading the checkout or writing the worktree
/// fails; the worktree's `target/` is then removed again (no half-copied artifacts stay).
pub fn seed_cargo_target(
    seed: &CargoSeed,
    worktree: &Path,
    limits: IncludeLimits,
) -> Result<Option<CargoSeedReport>, GitError> {
    let Ok(items) = &seed.applies else {
        return Ok(None);
    };
    if same_dir(worktree, &seed.main) {
        return Ok(None);
    }
    let target = worktree.join("target");
    if fs::symlink_metadata(&target).is_ok() {
        return Ok(Some(CargoSeedReport::KeptExisting));
    }
    let mut copier = Copier {
        main: &seed.main,
        worktree,
        remaining: limits.max_bytes,
        checked_dirs: HashSet::new(),
        report: IncludeReport::default(),
    };
    if let Err(e) = copier.bring_entry(&format!("{CARGO_SEED_DIR}/ (dependency artifacts)"), items)
    {
        // A half-copied artifact next to its fingerprint would look fresh to cargo: take the
        // `target/` this call created away again.
        let _ = fs::remove_dir_all(&target);
        return Err(e);
    }
    let report = copier.report;
    Ok(Some(CargoSeedReport::Seeded {
        files: report.files,
        bytes: report.bytes,
        reflinked: report.reflinked,
        skipped: report.skipped,
    }))
}

/// Whether `a` and `b` are the same directory (both resolved; unresolvable means not).
fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Whether a seed applies to the checkout `main`, checked cheapest first.
fn applicable(main: &Path, include: &IncludeList) -> Result<Result<(), NoSeedReason>, GitError> {
    if !main.join("Cargo.toml").is_file() {
        return Ok(Err(NoSeedReason::NotCargo));
    }
    for dir in ["target", CARGO_SEED_DIR] {
        match fs::symlink_metadata(main.join(dir)) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Ok(Err(NoSeedReason::TargetIsSymlink));
            }
            Ok(meta) if meta.is_dir() => {}
            _ => return Ok(Err(NoSeedReason::NothingBuilt)),
        }
    }
    if !main.join(CARGO_SEED_DIR).join("deps").is_dir() {
        return Ok(Err(NoSeedReason::NothingBuilt));
    }
    if include.covers("target") {
        return Ok(Err(NoSeedReason::CoveredByInclude));
    }
    if !ignored_entries(main)?.iter().any(|e| e == "target/") {
        return Ok(Err(NoSeedReason::TargetNotIgnored));
    }
    Ok(Ok(()))
}

/// The repository's own packages: their names (as in `build/` and `.fingerprint/` directory
/// names) and library crate names (as in `deps/lib<crate>-<hash>.*`), from every tracked
/// `Cargo.toml`. A manifest that does not parse adds nothing (its artifacts are then copied
/// like a dependency's, which costs bytes, never correctness: cargo checks every artifact).
#[derive(Debug, Default)]
struct OwnCrates {
    packages: BTreeSet<String>,
    libraries: BTreeSet<String>,
}

fn own_crates(main: &Path) -> Result<OwnCrates, GitError> {
    let listed = cli::git(
        main,
        ["ls-files", "-z", "--", "Cargo.toml", ":(glob)**/Cargo.toml"],
    )?;
    let mut own = OwnCrates::default();
    for manifest in listed.split('\0').filter(|m| !m.is_empty()) {
        let Ok(text) = fs::read_to_string(main.join(manifest)) else {
            continue;
        };
        let Ok(table) = text.parse::<toml::Table>() else {
            continue;
        };
        let name_in = |key: &str| {
            table
                .get(key)
                .and_then(|t| t.get("name"))
                .and_then(|n| n.as_str())
                .map(str::to_owned)
        };
        if let Some(package) = name_in("package") {
            own.libraries.insert(package.replace('-', "_"));
            own.packages.insert(package);
        }
        if let Some(lib) = name_in("lib") {
            own.libraries.insert(lib.replace('-', "_"));
        }
    }
    Ok(own)
}

/// `name-<hash>` → `name` (cargo's per-unit file and directory names).
fn unit_name(name: &str) -> &str {
    name.rsplit_once('-').map_or(name, |(n, _)| n)
}

/// Whether the entry `name` of `target/debug/<dir>` is a dependency's artifact to seed.
fn is_dependency_entry(dir: &str, name: &str, own: &OwnCrates) -> bool {
    if dir != "deps" {
        return !own.packages.contains(unit_name(name));
    }
    let (stem, ext) = name.rsplit_once('.').unwrap_or((name, ""));
    if ext == "d" {
        // rustc's dep-info (`<crate>-<hash>.d`, small): kept unless an own library's.
        return !own.libraries.contains(unit_name(stem));
    }
    let Some(crate_and_hash) = stem.strip_prefix("lib") else {
        return false;
    };
    LIBRARY_EXTENSIONS.contains(&ext) && !own.libraries.contains(unit_name(crate_and_hash))
}

/// The files and symlinks under the dependency entries of `target/debug/{deps,build,.fingerprint}`
/// (not following symlinks), sorted by path.
fn dependency_items(main: &Path, own: &OwnCrates) -> Result<Vec<Item>, GitError> {
    let mut stack = Vec::new();
    for dir in ARTIFACT_DIRS {
        let path = main.join(CARGO_SEED_DIR).join(dir);
        if !path.is_dir() {
            continue;
        }
        for entry in fs::read_dir(&path).map_err(io_err("listing", &path))? {
            let entry = entry.map_err(io_err("listing", &path))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if is_dependency_entry(dir, &name, own) {
                stack.push(format!("{CARGO_SEED_DIR}/{dir}/{name}"));
            }
        }
    }
    let mut items = Vec::new();
    while let Some(rel) = stack.pop() {
        let path = main.join(&rel);
        let meta = fs::symlink_metadata(&path).map_err(io_err("reading", &path))?;
        let kind = meta.file_type();
        if kind.is_dir() {
            for child in fs::read_dir(&path).map_err(io_err("listing", &path))? {
                let child = child.map_err(io_err("listing", &path))?;
                stack.push(format!("{rel}/{}", child.file_name().to_string_lossy()));
            }
        } else if kind.is_symlink() {
            let target = fs::read_link(&path).map_err(io_err("reading the link", &path))?;
            items.push(Item::Symlink(rel, target));
        } else if kind.is_file() {
            items.push(Item::File(rel, meta.len()));
        } else {
            items.push(Item::Other(rel));
        }
    }
    items.sort_by(|a, b| item_path(a).cmp(item_path(b)));
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dependency_entries_leave_out_own_crates_and_executables() {
        let own = OwnCrates {
            packages: ["my-app".to_string()].into(),
            libraries: ["my_app".to_string()].into(),
        };
        assert!(is_dependency_entry("deps", "libserde-0123abcd.rlib", &own));
        assert!(is_dependency_entry("deps", "libserde_derive-01ab.so", &own));
        assert!(is_dependency_entry("deps", "libanyhow-01ab.rmeta", &own));
        assert!(!is_dependency_entry("deps", "libmy_app-01ab.rlib", &own));
        assert!(!is_dependency_entry("deps", "my_app-01ab", &own));
        assert!(is_dependency_entry("deps", "serde-01ab.d", &own));
        assert!(!is_dependency_entry("deps", "my_app-01ab.d", &own));
        assert!(is_dependency_entry("build", "serde-01ab", &own));
        assert!(!is_dependency_entry("build", "my-app-01ab", &own));
        assert!(!is_dependency_entry(".fingerprint", "my-app-01ab", &own));
        assert!(is_dependency_entry(".fingerprint", "my-apple-01ab", &own));
    }
}
