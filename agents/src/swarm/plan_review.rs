//! Plans a weak model gets wrong, caught before any worker starts: subtasks that only find,
//! read or check (a worker that changes nothing merges nothing), and a dependency chain of
//! steps over the same files (N workers that only wait for each other). The coordinator is
//! re-asked once with specific feedback ([`review_plan`]); a re-asked plan that is still a chain
//! runs as one worker ([`collapse_chain`]).

use super::plan::{Plan, PlanError, Subtask, subtasks_overlap};

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

/// Refuses a plan a weak model got wrong, with the feedback for the re-ask.
///
/// # Errors
/// [`PlanError::ReadOnly`], [`PlanError::Chain`].
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
    Ok(())
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
}
