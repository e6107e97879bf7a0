//! Plans a weak model gets wrong, caught before any worker starts: subtasks that only find,
//! read or check (a worker that changes nothing merges nothing), and a dependency chain of
//! steps over the same files (N workers that only wait for each other), and subtasks whose
//! scopes overlap but that are not ordered by their dependencies (two branches changing the
//! same files conflict: overlapping subtasks must form one dependency chain per scope). The coordinator is
//! re-asked once with specific feedback ([`review_plan`]); a re-asked plan that is still a chain
//! runs as one worker ([`collapse_chain`]).

use super::plan::{Plan, PlanError, Subtask, shared_scope, subtasks_overlap};
use std::collections::BTreeSet;

/// First words of a subtask that only looks at the code.
const READ_VERBS: &[&str] = &[
    "find",
    "read",
    "check",
    "inspect",
    "review",
    "investigate",
    "explore",
    "look",
    "analyze",
    "analyse",
    "list",
    "search",
    "identify",
    "locate",
    "understand",
    "examine",
    "determine",
    "study",
    "scan",
    "verify",
];

/// Words that say a subtask changes something.
const CHANGE_VERBS: &[&str] = &[
    "add",
    "change",
    "modify",
    "implement",
    "write",
    "fix",
    "rename",
    "update",
    "create",
    "remove",
    "delete",
    "refactor",
    "edit",
    "replace",
    "move",
    "convert",
    "extract",
    "introduce",
    "append",
    "insert",
    "migrate",
    "port",
    "split",
    "document",
    "rewrite",
    "adapt",
    "apply",
    "set",
    "make",
];

fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
}

/// Whether the subtask only finds, reads or checks: its title starts with such a verb and
/// neither its title nor its instructions name a change.
pub fn is_read_only(subtask: &Subtask) -> bool {
    let starts_reading = words(&subtask.title)
        .next()
        .is_some_and(|w| READ_VERBS.contains(&w.as_str()));
    let changes = words(&subtask.title)
        .chain(words(&subtask.instructions))
        .any(|w| CHANGE_VERBS.contains(&w.as_str()));
    starts_reading && !changes
}

/// Whether the plan is one chain (each subtask after the first depends exactly on the one
/// before it) over the same files (each step's scope overlaps the previous step's).
pub fn is_chain(plan: &Plan) -> bool {
    let s = &plan.subtasks;
    s.len() >= 2
        && s[0].depends_on.is_empty()
        && s.windows(2).all(|pair| {
            pair[1].depends_on == [pair[0].id.clone()] && subtasks_overlap(&pair[0], &pair[1])
        })
}

/// Indices of the subtasks that subtask `index` depends on, directly or through others.
fn ancestors(plan: &Plan, index: usize) -> BTreeSet<usize> {
    let position = |id: &String| plan.subtasks.iter().position(|s| &s.id == id);
    let mut found = BTreeSet::new();
    let mut todo: Vec<usize> = plan.subtasks[index]
        .depends_on
        .iter()
        .filter_map(position)
        .collect();
    while let Some(i) = todo.pop() {
        if found.insert(i) {
            todo.extend(plan.subtasks[i].depends_on.iter().filter_map(position));
        }
    }
    found
}

/// The first pair of subtasks (in plan order) whose scopes overlap ([`shared_scope`], the
/// scheduler's overlap) while neither depends on the other, directly or transitively.
pub fn unordered_overlap(plan: &Plan) -> Option<PlanError> {
    let s = &plan.subtasks;
    let ancestors: Vec<BTreeSet<usize>> = (0..s.len()).map(|i| ancestors(plan, i)).collect();
    for j in 0..s.len() {
        for i in 0..j {
            if ancestors[i].contains(&j) || ancestors[j].contains(&i) {
                continue;
            }
            if let Some((first_scope, second_scope)) = shared_scope(&s[i], &s[j]) {
                return Some(PlanError::UnorderedOverlap {
                    first: s[i].id.clone(),
                    second: s[j].id.clone(),
                    first_scope: first_scope.to_string(),
                    second_scope: second_scope.to_string(),
                });
            }
        }
    }
    None
}

/// Refuses a plan a weak model got wrong, with the feedback for the re-ask.
///
/// # Errors
/// [`PlanError::ReadOnly`], [`PlanError::Chain`], [`PlanError::UnorderedOverlap`].
pub fn review_plan(plan: &Plan) -> Result<(), PlanError> {
    let read_only: Vec<String> = plan
        .subtasks
        .iter()
        .filter(|s| is_read_only(s))
        .map(|s| s.id.clone())
        .collect();
    if !read_only.is_empty() {
        return Err(PlanError::ReadOnly { ids: read_only });
    }
    if is_chain(plan) {
        return Err(PlanError::Chain {
            ids: plan.subtasks.iter().map(|s| s.id.clone()).collect(),
        });
    }
    match unordered_overlap(plan) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// The chain as one subtask: the first id, the titles joined, the steps' instructions in
/// order, the union of the scopes.
pub fn collapse_chain(plan: &Plan) -> Plan {
    let first = &plan.subtasks[0];
    let mut scope: Vec<String> = Vec::new();
    for s in &plan.subtasks {
        for p in &s.scope {
            if !scope.contains(p) {
                scope.push(p.clone());
            }
        }
    }
    let instructions = plan
        .subtasks
        .iter()
        .enumerate()
        .map(|(i, s)| format!("Step {} ({}): {}", i + 1, s.title, s.instructions))
        .collect::<Vec<_>>()
        .join("\n");
    let title = plan
        .subtasks
        .iter()
        .map(|s| s.title.as_str())
        .collect::<Vec<_>>()
        .join("; ");
    Plan {
        summary: format!(
            "{} (the steps depend on each other over the same files, so one worker does them in order)",
            plan.summary
        ),
        subtasks: vec![Subtask {
            id: first.id.clone(),
            title,
            instructions,
            scope,
            depends_on: Vec::new(),
        }],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subtask(id: &str, title: &str, scope: &str, deps: &[&str]) -> Subtask {
        Subtask {
            id: id.into(),
            title: title.into(),
            instructions: format!("{title}."),
            scope: vec![scope.into()],
            depends_on: deps.iter().map(|d| d.to_string()).collect(),
        }
    }

    fn plan(subtasks: Vec<Subtask>) -> Plan {
        Plan {
            summary: "s".into(),
            subtasks,
        }
    }

    #[test]
    fn read_only_subtasks_are_refused_by_name() {
        let p = plan(vec![
            subtask("find", "Find the public functions", "src/lib.rs", &[]),
            subtask(
                "doc",
                "Document the public functions",
                "src/lib.rs",
                &["find"],
            ),
        ]);
        let err = review_plan(&p).unwrap_err();
        assert_eq!(
            err,
            PlanError::ReadOnly {
                ids: vec!["find".into()]
            }
        );
        assert!(err.to_string().contains("each subtask changes files"));
        // "check and fix" changes something
        assert!(!is_read_only(&subtask(
            "c",
            "Check and fix the parser",
            "a",
            &[]
        )));
    }

    #[test]
    fn a_chain_over_the_same_files_is_refused_and_collapses_into_one_subtask() {
        let p = plan(vec![
            subtask("a", "Add the type", "src/lib.rs", &[]),
            subtask("b", "Use the type", "src/lib.rs", &["a"]),
            subtask("c", "Test the type", "src/*.rs", &["b"]),
        ]);
        assert!(matches!(review_plan(&p), Err(PlanError::Chain { .. })));
        let one = collapse_chain(&p);
        assert_eq!(one.subtasks.len(), 1);
        assert_eq!(one.subtasks[0].scope, vec!["src/lib.rs", "src/*.rs"]);
        assert!(
            one.subtasks[0]
                .instructions
                .starts_with("Step 1 (Add the type)")
        );
        // a chain over different files is a real dependency, not refused
        let q = plan(vec![
            subtask("a", "Add the type", "src/a.rs", &[]),
            subtask("b", "Use the type", "src/b.rs", &["a"]),
        ]);
        assert!(review_plan(&q).is_ok());
    }

    #[test]
    fn two_independent_chains_over_the_same_file_are_refused_by_name_and_path() {
        // what a real model planned: w1 → w2 and w3 → w4, all four on src/lib.rs
        let p = plan(vec![
            subtask("w1", "Add the parser", "src/lib.rs", &[]),
            subtask("w2", "Use the parser", "src/lib.rs", &["w1"]),
            subtask("w3", "Add the printer", "src/lib.rs", &[]),
            subtask("w4", "Use the printer", "src/lib.rs", &["w3"]),
        ]);
        let err = review_plan(&p).unwrap_err();
        assert_eq!(
            err,
            PlanError::UnorderedOverlap {
                first: "w1".into(),
                second: "w3".into(),
                first_scope: "src/lib.rs".into(),
                second_scope: "src/lib.rs".into(),
            }
        );
        let text = err.to_string();
        for part in [
            "`w1` and `w3` both change `src/lib.rs`",
            "one dependency chain per scope",
        ] {
            assert!(text.contains(part), "{part}: {text}");
        }
    }

    #[test]
    fn overlapping_globs_and_directories_must_be_ordered_transitively() {
        // a directory and a glob overlap the file: unordered, refused with both patterns
        let p = plan(vec![
            subtask("api", "Add the endpoint", "src/**", &[]),
            subtask("docs", "Document the guide", "docs/guide.md", &[]),
            subtask("cli", "Add the flag", "src/cli.rs", &["docs"]),
        ]);
        let err = review_plan(&p).unwrap_err();
        assert!(
            err.to_string()
                .contains("`src/**` / `src/cli.rs` (overlapping scopes)"),
            "{err}"
        );
        // ordered through another subtask (cli → mid → api): one chain, accepted
        let q = plan(vec![
            subtask("api", "Add the endpoint", "src/**", &[]),
            subtask("mid", "Add the docs", "docs/guide.md", &["api"]),
            subtask("cli", "Add the flag", "src/cli.rs", &["mid"]),
        ]);
        assert_eq!(unordered_overlap(&q), None);
        assert!(review_plan(&q).is_ok());
        // a fork over one file (a → b, a → c) is two chains: b and c are refused
        let r = plan(vec![
            subtask("a", "Add the type", "src/lib.rs", &[]),
            subtask("b", "Add a user", "src/lib.rs", &["a"]),
            subtask("c", "Add another user", "src/lib.rs", &["a"]),
        ]);
        assert!(matches!(
            review_plan(&r),
            Err(PlanError::UnorderedOverlap { first, second, .. }) if first == "b" && second == "c"
        ));
    }
}
