//! Git in a repository other than the workspace's own. Its configuration (`diff.external`,
//! `filter.<driver>.clean`, `diff.<driver>.textconv`, …) can run programs that the hardened
//! environment of commands (`tools::shell::GIT_HARDENING`) cannot switch off, so such a
//! command is never read-only. This looks at the disk: the decision is taken just before the
//! command runs.

use std::path::{Path, PathBuf};

/// The first directory from `dir` up to (not including) `root` that holds a `.git` entry or is
/// itself laid out like a git directory; `dir` itself when it is outside `root`.
pub(super) fn foreign_repository(dir: &Path, root: &Path) -> Option<PathBuf> {
    if !dir.starts_with(root) {
        return Some(dir.to_path_buf());
    }
    let mut current = dir;
    while current != root {
        if current.join(".git").symlink_metadata().is_ok() || looks_like_git_dir(current) {
            return Some(current.to_path_buf());
        }
        current = current.parent()?;
    }
    None
}

/// True when `dir` has what git looks for in a (bare) git directory: a `HEAD` file and an
/// `objects` or `refs` directory.
fn looks_like_git_dir(dir: &Path) -> bool {
    dir.join("HEAD").is_file() && (dir.join("objects").is_dir() || dir.join("refs").is_dir())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_git_dirs_and_nested_repositories_below_the_root() {
        let tmp = super::super::temp_tree(&[
            (".git/objects/", ""),
            ("tools/evil/objects/", ""),
            ("tools/evil/HEAD", "ref: refs/heads/main\n"),
            ("vendor/lib/.git/", ""),
            ("src/deep/", ""),
        ]);
        let root = tmp.path();
        assert_eq!(foreign_repository(root, root), None);
        assert_eq!(foreign_repository(&root.join("src/deep"), root), None);
        assert_eq!(
            foreign_repository(&root.join("tools/evil"), root),
            Some(root.join("tools/evil"))
        );
        assert_eq!(
            foreign_repository(&root.join("vendor/lib"), root),
            Some(root.join("vendor/lib"))
        );
        assert!(foreign_repository(Path::new("/"), root).is_some());
    }
}
