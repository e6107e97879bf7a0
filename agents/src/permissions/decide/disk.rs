//! What the decision learns from the disk about the paths a command or tool names: where a
//! path really leads (symbolic links resolved), which files a shell glob expands to, and which
//! files a recursive reader (`grep -r`, `rg`) would open beneath a directory. Read deny rules are
//! matched against all of these, not only against the name as written.

use super::paths::Placed;
use globset::GlobBuilder;
use std::path::{Component, Path, PathBuf};

/// At most this many paths are produced by one glob expansion.
const MAX_GLOB_MATCHES: usize = 1_000;
/// At most this many entries are looked at beneath a directory read recursively; beyond that
/// the decision asks instead of listing the rest.
pub(super) const MAX_RECURSIVE_ENTRIES: usize = 20_000;

/// `placed` with its symbolic links resolved, when the path exists and resolves elsewhere.
pub(super) fn real(placed: &Placed, root: &Path) -> Option<Placed> {
    let abs = std::fs::canonicalize(&placed.abs).ok()?;
    if abs == placed.abs {
        return None;
    }
    let rel = abs.strip_prefix(root).ok().map(Path::to_path_buf);
    Some(Placed { abs, rel })
}

/// The existing paths an unquoted glob word (`.en?`, `src/*.rs`) expands to, relative to
/// `base`, as bash would list them (a leading `.` matched by wildcards too, which is stricter
/// than bash). `None` when there are more than [`MAX_GLOB_MATCHES`].
pub(super) fn expand_glob(pattern: &str, base: &Path) -> Option<Vec<PathBuf>> {
    let start = if pattern.starts_with('/') {
        PathBuf::from("/")
    } else {
        base.to_path_buf()
    };
    let mut current = vec![start];
    for component in Path::new(pattern).components() {
        let Component::Normal(part) = component else {
            if let Component::ParentDir = component {
                current.iter_mut().for_each(|p| p.push(".."));
            }
            continue;
        };
        let part = part.to_string_lossy();
        current = if part.contains(['*', '?', '[']) {
            matching_entries(&current, &part)?
        } else {
            current.into_iter().map(|p| p.join(part.as_ref())).collect()
        };
    }
    current.retain(|p| p.symlink_metadata().is_ok());
    Some(current)
}

/// The entries of each directory in `dirs` whose name matches the glob `part`.
fn matching_entries(dirs: &[PathBuf], part: &str) -> Option<Vec<PathBuf>> {
    let Ok(glob) = GlobBuilder::new(part).literal_separator(true).build() else {
        return Some(Vec::new());
    };
    let matcher = glob.compile_matcher();
    let mut out = Vec::new();
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for entry in entries.flatten() {
            if matcher.is_match(entry.file_name()) {
                out.push(dir.join(entry.file_name()));
                if out.len() > MAX_GLOB_MATCHES {
                    return None;
                }
            }
        }
    }
    Some(out)
}

/// Every file beneath `dir` (hidden ones and ignored ones included, symbolic links not
/// followed, `.git` skipped), for which `visit` returns `true` to stop; `Err(())` when more than
/// [`MAX_RECURSIVE_ENTRIES`] entries were seen first.
pub(super) fn walk_files(dir: &Path, mut visit: impl FnMut(&Path) -> bool) -> Result<bool, ()> {
    let walker = ignore::WalkBuilder::new(dir)
        .standard_filters(false)
        .follow_links(false)
        .filter_entry(|e| e.file_name() != ".git")
        .build();
    for (seen, entry) in walker.flatten().enumerate() {
        if seen > MAX_RECURSIVE_ENTRIES {
            return Err(());
        }
        if entry.file_type().is_some_and(|t| !t.is_dir()) && visit(entry.path()) {
            return Ok(true);
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_expand_against_the_directory_dot_files_included() {
        let tmp =
            super::super::temp_tree(&[(".env", "SECRET=1\n"), ("a.txt", ""), ("docs/b.md", "")]);
        let base = tmp.path();
        assert_eq!(expand_glob(".en?", base).unwrap(), [base.join(".env")]);
        assert_eq!(expand_glob(".e*", base).unwrap(), [base.join(".env")]);
        assert_eq!(
            expand_glob("d*/*.md", base).unwrap(),
            [base.join("docs/b.md")]
        );
        assert!(expand_glob("*.none", base).unwrap().is_empty());
        let mut found = Vec::new();
        let stopped = walk_files(base, |p| {
            found.push(p.to_path_buf());
            p.ends_with(".env")
        });
        assert_eq!(stopped, Ok(true));
    }
}
