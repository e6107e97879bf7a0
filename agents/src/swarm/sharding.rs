//! Deterministic sharding (`ahelper swarm "<task>" --each GLOB`): the plan is the tracked files
//! that match the globs, grouped into subtasks — `--per N` files each, or one subtask per
//! directory (`--by dir`) — with no planning turn, so it works with any model. Each subtask's
//! scope is its group of files; its instructions are the task plus the files.
//!
//! Glob syntax: `globset` with `*` and `?` not crossing `/` (as in `.gitignore` and shells;
//! `**` crosses directories), matched against paths relative to the repository root.

use super::plan::{Plan, Subtask};
use std::collections::BTreeMap;

/// How matched files are grouped into subtasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardBy {
    /// At most this many files per subtask (≥ 1), in path order.
    Files(usize),
    /// One subtask per directory (the files directly in it).
    Dir,
}

/// Why no sharded plan could be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShardError {
    /// A `--each` pattern is not a valid glob.
    #[error("`--each {glob}` is not a valid glob: {reason}")]
    BadGlob {
        /// The pattern as given.
        glob: String,
        /// What `globset` said.
        reason: String,
    },
    /// No tracked file matches any pattern.
    #[error(
        "no tracked file matches {}; the globs are matched against paths relative to the \
         repository root (`*` stays within one directory, `**` crosses directories), e.g. \
         --each 'src/**/*.rs'",
        .globs.iter().map(|g| format!("`{g}`")).collect::<Vec<_>>().join(", ")
    )]
    NoFiles {
        /// The patterns given.
        globs: Vec<String>,
    },
}

/// The matcher of the `--each` patterns.
///
/// # Errors
/// [`ShardError::BadGlob`] naming the first invalid pattern.
pub fn each_matcher(globs: &[String]) -> Result<globset::GlobSet, ShardError> {
    let mut set = globset::GlobSetBuilder::new();
    for glob in globs {
        let compiled = globset::GlobBuilder::new(glob.trim_start_matches("./"))
            .literal_separator(true)
            .build()
            .map_err(|e| ShardError::BadGlob {
                glob: glob.clone(),
                reason: e.kind().to_string(),
            })?;
        set.add(compiled);
    }
    set.build().map_err(|e| ShardError::BadGlob {
        glob: globs.join(" "),
        reason: e.to_string(),
    })
}

/// The plan for `task` over the `tracked` files (sorted, `/`-separated) that match `globs`,
/// grouped by `by`. Subtask ids are `shard-1`, `shard-2`, … in path order; no subtask depends on
/// another (their files are disjoint).
///
/// # Errors
/// [`ShardError::BadGlob`], [`ShardError::NoFiles`].
pub fn shard_plan(
    task: &str,
    globs: &[String],
    tracked: &[String],
    by: ShardBy,
) -> Result<Plan, ShardError> {
    let matcher = each_matcher(globs)?;
    let files: Vec<&String> = tracked.iter().filter(|f| matcher.is_match(f)).collect();
    if files.is_empty() {
        return Err(ShardError::NoFiles {
            globs: globs.to_vec(),
        });
    }
    let groups = group(&files, by);
    let count = groups.len();
    let subtasks = groups
        .into_iter()
        .enumerate()
        .map(|(i, group)| shard_subtask(task, i + 1, group))
        .collect();
    Ok(Plan {
        summary: format!(
            "{} file(s) matching {} in {count} subtask(s) ({}); no planning turn",
            files.len(),
            globs.join(", "),
            match by {
                ShardBy::Files(n) => format!("{n} file(s) each"),
                ShardBy::Dir => "one per directory".into(),
            }
        ),
        subtasks,
    })
}

/// The files in groups: consecutive runs of `n`, or one group per parent directory.
fn group<'a>(files: &[&'a String], by: ShardBy) -> Vec<Vec<&'a String>> {
    match by {
        ShardBy::Files(n) => files.chunks(n.max(1)).map(<[_]>::to_vec).collect(),
        ShardBy::Dir => {
            let mut dirs: BTreeMap<&str, Vec<&String>> = BTreeMap::new();
            for f in files {
                let dir = f.rsplit_once('/').map_or("", |(d, _)| d);
                dirs.entry(dir).or_default().push(f);
            }
            dirs.into_values().collect()
        }
    }
}

/// Subtask `shard-<n>`: the task on the files of `group`.
fn shard_subtask(task: &str, n: usize, group: Vec<&String>) -> Subtask {
    let names: Vec<String> = group.iter().map(|f| f.to_string()).collect();
    let listed = names
        .iter()
        .map(|f| format!("- {f}"))
        .collect::<Vec<_>>()
        .join("\n");
    Subtask {
        id: format!("shard-{n}"),
        title: title(&names),
        instructions: format!(
            "{task}\n\nDo this in these files only (other subtasks handle the other files):\n{listed}"
        ),
        scope: names,
        depends_on: Vec::new(),
    }
}

/// The files named in at most ~100 characters: `src/a.rs, src/b.rs (+3 more)`.
fn title(files: &[String]) -> String {
    let mut title = String::new();
    for (i, f) in files.iter().enumerate() {
        let next = if i == 0 { f.clone() } else { format!(", {f}") };
        if i > 0 && title.len() + next.len() > 100 {
            return format!("{title} (+{} more)", files.len() - i);
        }
        title.push_str(&next);
    }
    title.chars().take(200).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tracked() -> Vec<String> {
        [
            "README.md",
            "src/a.rs",
            "src/b.rs",
            "src/x/c.rs",
            "src/x/d.rs",
            "src/x/e.py",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }

    #[test]
    fn files_are_grouped_in_path_order_with_disjoint_scopes() {
        let plan = shard_plan(
            "doc",
            &["src/**/*.rs".into()],
            &tracked(),
            ShardBy::Files(3),
        )
        .unwrap();
        let scopes: Vec<_> = plan.subtasks.iter().map(|s| s.scope.clone()).collect();
        assert_eq!(
            scopes,
            vec![
                vec!["src/a.rs", "src/b.rs", "src/x/c.rs"],
                vec!["src/x/d.rs"]
            ]
        );
        assert_eq!(plan.subtasks[1].id, "shard-2");
        assert!(plan.subtasks[1].instructions.starts_with("doc\n"));
        assert!(plan.subtasks[1].instructions.contains("- src/x/d.rs"));
    }

    #[test]
    fn by_dir_makes_one_subtask_per_directory_and_star_stays_in_one() {
        let plan = shard_plan(
            "doc",
            &["src/*.rs".into(), "src/x/*".into()],
            &tracked(),
            ShardBy::Dir,
        )
        .unwrap();
        assert_eq!(plan.subtasks.len(), 2);
        assert_eq!(plan.subtasks[0].scope, vec!["src/a.rs", "src/b.rs"]);
        assert_eq!(plan.subtasks[1].scope.len(), 3);
    }

    #[test]
    fn nothing_matching_and_bad_globs_say_so() {
        let err =
            shard_plan("doc", &["lib/*.rs".into()], &tracked(), ShardBy::Files(1)).unwrap_err();
        assert!(
            err.to_string()
                .contains("no tracked file matches `lib/*.rs`"),
            "{err}"
        );
        let err = shard_plan("doc", &["src/[".into()], &tracked(), ShardBy::Files(1)).unwrap_err();
        assert!(matches!(err, ShardError::BadGlob { .. }), "{err}");
    }
}
