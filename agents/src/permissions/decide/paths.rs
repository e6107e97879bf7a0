//! Paths as a command or a tool call writes them, placed relative to the workspace without
//! touching the file system, and matched against path rules.

use crate::permissions::command::normalize_path;
use crate::permissions::rules::{PermissionRule, RulePattern, home_dir};
use std::path::{Path, PathBuf};

/// Where a path lies relative to the workspace.
#[derive(Debug, Clone)]
pub(super) struct Placed {
    /// Absolute and lexically normalised.
    pub(super) abs: PathBuf,
    /// Relative to the workspace root, when inside it.
    pub(super) rel: Option<PathBuf>,
}

impl Placed {
    /// True when the path is inside the workspace or one of `added_dirs` (the directories of
    /// `--add-dir`, canonical).
    pub(super) fn inside(&self, added_dirs: &[PathBuf]) -> bool {
        self.rel.is_some() || added_dirs.iter().any(|d| self.abs.starts_with(d))
    }
}

/// Resolves a path as written (relative to `cwd`; `~` is the home directory) without touching
/// the file system.
pub(super) fn place(path: &str, tilde: bool, cwd: &Path, root: &Path) -> Option<Placed> {
    let abs = if tilde {
        let rest = path.strip_prefix('~')?;
        if !(rest.is_empty() || rest.starts_with('/')) {
            // `~user`: another user's home, certainly outside.
            return Some(Placed {
                abs: PathBuf::from("/home").join(rest),
                rel: None,
            });
        }
        let home = home_dir()?;
        home.join(rest.trim_start_matches('/'))
    } else {
        cwd.join(path)
    };
    let abs = normalize_path(&abs);
    let rel = abs.strip_prefix(root).ok().map(Path::to_path_buf);
    Some(Placed { abs, rel })
}

/// True when a path rule matches `placed`: a relative glob matches the path relative to the
/// workspace; a `restrictive` (deny or ask) rule also matches the absolute path.
pub(super) fn path_rule_matches(rule: &PermissionRule, placed: &Placed, restrictive: bool) -> bool {
    match &rule.pattern {
        RulePattern::Any => true,
        RulePattern::Command { .. } => false,
        RulePattern::Path {
            absolute, matcher, ..
        } => {
            if *absolute {
                matcher.is_match(&placed.abs)
            } else {
                let rel_match = placed
                    .rel
                    .as_ref()
                    .is_some_and(|r| !r.as_os_str().is_empty() && matcher.is_match(r));
                rel_match || (restrictive && matcher.is_match(&placed.abs))
            }
        }
    }
}

/// Devices that writing to or reading from changes nothing (`/dev/null`, `/dev/fd/N`, …).
pub(super) fn is_harmless_device(path: &Path) -> bool {
    let s = path.to_string_lossy();
    matches!(
        s.as_ref(),
        "/dev/null" | "/dev/stdout" | "/dev/stderr" | "/dev/tty" | "/dev/zero"
    ) || s
        .strip_prefix("/dev/fd/")
        .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
}

/// True for bash's network pseudo-files `/dev/tcp/HOST/PORT` and `/dev/udp/HOST/PORT`: bash
/// opens a socket instead of a file for them (bash(1), "REDIRECTION").
pub(super) fn is_network_device(path: &Path) -> bool {
    path.starts_with("/dev/tcp") || path.starts_with("/dev/udp")
}

/// True for paths in the temporary directory (`$TMPDIR`, `/tmp`, `/var/tmp`).
pub(super) fn in_temp_dir(path: &Path) -> bool {
    let temp = normalize_path(&std::env::temp_dir());
    path.starts_with(&temp) || path.starts_with("/tmp") || path.starts_with("/var/tmp")
}
