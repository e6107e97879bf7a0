//! Plans that match the repository: each scope entry of a plan should name tracked files, an
//! existing directory, or a plausible new file — one in a directory that exists, or with an
//! extension the repository already has (its languages). A scope that is
//! none of these (a plan for a Python repository naming `src/hello.rs`) is refused with the list
//! of what does exist, so the coordinator can correct it on its re-ask.

use super::plan::{Plan, in_scope};
use std::collections::BTreeSet;

/// Tracked files listed at most in a refusal; the rest are counted.
const LISTED_FILES: usize = 150;

/// The repository's files at the run's base commit, for checking scopes.
#[derive(Debug, Clone, Default)]
pub struct RepoFiles {
    /// Tracked paths, `/`-separated, sorted.
    pub files: Vec<String>,
    dirs: BTreeSet<String>,
    extensions: BTreeSet<String>,
}

impl RepoFiles {
    /// From the tracked paths (sorted, `/`-separated).
    pub fn new(files: Vec<String>) -> Self {
        let mut dirs = BTreeSet::new();
        let mut extensions = BTreeSet::new();
        for f in &files {
            let mut parts: Vec<&str> = f.split('/').collect();
            parts.pop();
            for i in 1..=parts.len() {
                dirs.insert(parts[..i].join("/"));
            }
            if let Some(ext) = extension(f) {
                extensions.insert(ext.to_string());
            }
        }
        RepoFiles {
            files,
            dirs,
            extensions,
        }
    }

    /// How many tracked files `scope` holds ([`in_scope`]).
    pub fn matching(&self, scope: &[String]) -> usize {
        self.files.iter().filter(|f| in_scope(f, scope)).count()
    }

    /// Whether the scope entry names tracked files or an existing directory, or is a plausible
    /// new file: in a directory that exists (the root does), or of a type the repository has
    /// (its extension). For a glob, its directory is the part before the first glob character.
    pub fn plausible(&self, entry: &str) -> bool {
        let entry = entry.trim_start_matches("./").trim_end_matches('/');
        if self.matching(&[entry.to_string()]) > 0 || self.dirs.contains(entry) {
            return true;
        }
        let literal: Vec<&str> = entry
            .split('/')
            .take_while(|c| !c.contains(['*', '?', '[', '{']))
            .collect();
        let is_glob = literal.len() < entry.split('/').count();
        let parent = if is_glob {
            literal.join("/")
        } else {
            literal[..literal.len().saturating_sub(1)].join("/")
        };
        let dir_exists = parent.is_empty() || self.dirs.contains(&parent);
        dir_exists || extension(entry).is_some_and(|ext| self.extensions.contains(ext))
    }

    /// The scope entries of `plan` that are not plausible, as (subtask id, entry).
    pub fn unmatched(&self, plan: &Plan) -> Vec<(String, String)> {
        plan.subtasks
            .iter()
            .flat_map(|s| {
                s.scope
                    .iter()
                    .filter(|e| !self.plausible(e))
                    .map(|e| (s.id.clone(), e.clone()))
            })
            .collect()
    }

    /// The tracked files as a list for the model: the first [`LISTED_FILES`], then a count.
    pub fn listing(&self) -> String {
        let mut text = self
            .files
            .iter()
            .take(LISTED_FILES)
            .cloned()
            .collect::<Vec<_>>()
            .join(", ");
        if self.files.len() > LISTED_FILES {
            text.push_str(&format!(" … and {} more", self.files.len() - LISTED_FILES));
        }
        text
    }
}

/// The extension of the last component of `path` (`rs` of `src/a.rs`), if it has one.
fn extension(path: &str) -> Option<&str> {
    let name = path.rsplit('/').next()?;
    let (stem, ext) = name.rsplit_once('.')?;
    (!stem.is_empty() && !ext.is_empty() && !ext.contains(['*', '?', '[', '{'])).then_some(ext)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn python_repo() -> RepoFiles {
        RepoFiles::new(vec![
            "README.md".into(),
            "calc/core.py".into(),
            "tests/test_core.py".into(),
        ])
    }

    #[test]
    fn scopes_of_other_languages_in_missing_places_are_not_plausible() {
        let repo = python_repo();
        assert!(!repo.plausible("src/hello.rs"));
        assert!(!repo.plausible("src/**/*.rs"));
        assert!(repo.plausible("calc/core.py"));
        assert!(repo.plausible("calc/"));
        assert!(repo.plausible("calc/new_module.py"));
        assert!(repo.plausible("pkg/new.py"));
        assert!(repo.plausible("calc/**"));
        assert!(repo.plausible("Makefile"));
        assert!(repo.plausible("calc/new.rs"));
        assert!(!repo.plausible("build/Makefile"));
        assert_eq!(repo.matching(&["calc/**".into(), "tests".into()]), 2);
    }
}
