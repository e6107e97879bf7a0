//! The coordinator's plan: subtasks with scopes and dependencies, validated against a JSON
//! Schema (draft 7, <https://json-schema.org/draft-07>) and then for meaning (unique ids, known
//! dependencies, no cycles, the subtask cap).
//!
//! Draft 7, not 2020-12: the schema uses no keyword newer than draft 7, and the `jsonschema`
//! crate checks a schema against its draft's meta-schema when it compiles it — the 2020-12
//! meta-schema (vocabularies, `$dynamicRef`) compiles to ~15 MB of heap that stays for the
//! rest of the run, the draft-7 one to a fraction of that (issue 11 item 5; see
//! `benches/swarm_memory.rs`).

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};

/// One subtask of a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subtask {
    /// Short id, unique in the plan (`[A-Za-z0-9_-]{1,32}`), e.g. `docs-lexer`.
    pub id: String,
    /// One-line title shown in the status table.
    pub title: String,
    /// What the worker must do, self-contained.
    pub instructions: String,
    /// Paths or globs (relative to the repository root) the subtask expects to touch.
    pub scope: Vec<String>,
    /// Ids of subtasks that must be merged before this one starts.
    #[serde(default)]
    pub depends_on: Vec<String>,
}

/// A plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// One paragraph: the approach.
    #[serde(default)]
    pub summary: String,
    /// Subtasks in plan order (the merge order).
    pub subtasks: Vec<Subtask>,
}

/// The JSON Schema (draft 7) a plan must satisfy.
pub fn plan_schema() -> Value {
    json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "required": ["subtasks"],
        "additionalProperties": false,
        "properties": {
            "summary": {"type": "string"},
            "subtasks": {
                "type": "array",
                "minItems": 1,
                "items": {
                    "type": "object",
                    "required": ["id", "title", "instructions", "scope"],
                    "additionalProperties": false,
                    "properties": {
                        "id": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,32}$"},
                        "title": {"type": "string", "minLength": 1, "maxLength": 200},
                        "instructions": {"type": "string", "minLength": 1},
                        "scope": {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1}},
                        "depends_on": {"type": "array", "items": {"type": "string"}}
                    }
                }
            }
        }
    })
}

/// Why a plan was refused; the message is sent back to the model when it is re-asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// No JSON object found in the reply.
    #[error(
        "no JSON plan found in the reply; answer with one JSON object {{\"summary\": …, \"subtasks\": [ … ]}}"
    )]
    NoJson,
    /// The JSON does not parse.
    #[error("the plan is not valid JSON: {0}")]
    Json(String),
    /// Schema violations (each with its JSON pointer).
    #[error("the plan does not match the schema: {}", .0.join("; "))]
    Schema(Vec<String>),
    /// A semantic problem.
    #[error("the plan is invalid: {0}")]
    Invalid(String),
    /// The reply stopped at the output-token limit before the plan was complete.
    #[error(
        "the plan was cut off by the output-token limit ({max_output_tokens} tokens, setting \
         `max_output_tokens`); answer with a shorter plan: fewer subtasks, instructions of one or \
         two sentences, no text outside the JSON"
    )]
    Truncated {
        /// The limit in tokens.
        max_output_tokens: u32,
    },
    /// Subtasks that only find, read or check: workers are there to change files.
    #[error(
        "subtask(s) {} only find, read or check and change no file; every subtask must change \
         files (explore the repository yourself before you plan): split the work by files, each \
         subtask changes files",
        .ids.iter().map(|i| format!("`{i}`")).collect::<Vec<_>>().join(", ")
    )]
    ReadOnly {
        /// The read-only subtasks.
        ids: Vec<String>,
    },
    /// Every subtask depends on the one before and they touch the same files: the workers
    /// would only wait for each other.
    #[error(
        "the plan is a chain of steps over the same files ({}): its workers would only wait for \
         each other; split the work by files so that subtasks run in parallel and each changes \
         its own files, or answer with a single subtask",
        .ids.join(" → ")
    )]
    Chain {
        /// The chain, in order.
        ids: Vec<String>,
    },
    /// Two subtasks whose scopes overlap and neither of which depends on the other (directly or
    /// through other subtasks): they would change the same files on two branches that conflict.
    #[error(
        "subtasks `{first}` and `{second}` both change {} but neither depends on the other \
         (directly or through other subtasks): subtasks whose scopes overlap must form one \
         dependency chain per scope. Add `{first}` to the `depends_on` of `{second}` (or the \
         other way round), give them disjoint files, or merge them into one subtask",
        shared_paths(.first_scope, .second_scope)
    )]
    UnorderedOverlap {
        /// The earlier subtask in the plan.
        first: String,
        /// The later subtask in the plan.
        second: String,
        /// The scope pattern of `first` that overlaps.
        first_scope: String,
        /// The scope pattern of `second` that overlaps.
        second_scope: String,
    },
    /// Scope entries that name no tracked file, no existing directory and no plausible new file
    /// ([`super::repo_match`]).
    #[error(
        "these scopes match no file of the repository and are not plausible new files (no such \
         directory, no file of that type here): {}. Use the paths that exist; the repository's \
         tracked files are: {existing}",
        .entries.iter().map(|(id, e)| format!("`{e}` (subtask `{id}`)")).collect::<Vec<_>>().join(", ")
    )]
    Unmatched {
        /// (subtask id, scope entry).
        entries: Vec<(String, String)>,
        /// The tracked files, listed ([`super::repo_match::RepoFiles::listing`]).
        existing: String,
    },
    /// More subtasks than allowed.
    #[error(
        "the plan has {count} subtasks but at most {max} are allowed (--max-subtasks, swarm.max_subtasks); merge related subtasks"
    )]
    TooMany {
        /// Subtasks in the plan.
        count: usize,
        /// The cap.
        max: usize,
    },
}

/// `` `src/lib.rs` `` when both patterns are the same path, else
/// `` `src/**` / `src/lib.rs` (overlapping scopes) ``.
fn shared_paths(first: &str, second: &str) -> String {
    if first == second {
        format!("`{first}`")
    } else {
        format!("`{first}` / `{second}` (overlapping scopes)")
    }
}

/// Extracts the plan JSON from a model reply: the whole text, a fenced ```json block, or the
/// first balanced `{…}` object that parses.
pub fn extract_json(text: &str) -> Option<Value> {
    let trimmed = text.trim();
    if let Ok(v) = serde_json::from_str::<Value>(trimmed) {
        return v.is_object().then_some(v);
    }
    // fenced blocks
    let mut rest = trimmed;
    while let Some(start) = rest.find("```") {
        let after = &rest[start + 3..];
        let body_start = after.find('\n').map(|i| i + 1).unwrap_or(0);
        let body = &after[body_start..];
        let Some(end) = body.find("```") else { break };
        if let Ok(v) = serde_json::from_str::<Value>(body[..end].trim())
            && v.is_object()
        {
            return Some(v);
        }
        rest = &body[end + 3..];
    }
    // first object that parses, scanning each '{'
    for (i, _) in trimmed.match_indices('{') {
        let mut stream = serde_json::Deserializer::from_str(&trimmed[i..]).into_iter::<Value>();
        if let Some(Ok(v)) = stream.next()
            && v.get("subtasks").is_some()
        {
            return Some(v);
        }
    }
    None
}

/// Parses and validates a plan from a model reply.
///
/// # Errors
/// [`PlanError`] saying exactly what is wrong.
pub fn parse_plan(text: &str, max_subtasks: usize) -> Result<Plan, PlanError> {
    PlanValidator::new().parse(text, max_subtasks)
}

/// Validates a plan given as JSON.
///
/// # Errors
/// [`PlanError`].
pub fn validate_plan_value(value: &Value, max_subtasks: usize) -> Result<Plan, PlanError> {
    PlanValidator::new().validate(value, max_subtasks)
}

/// The plan schema ([`plan_schema`]) compiled: ~7 ms of CPU (the `jsonschema` crate checks the
/// schema against the draft-7 meta-schema first), so the coordinator compiles it while its
/// planning request is in flight, not after the answer, where it would hold up every worker.
pub struct PlanValidator(jsonschema::Validator);

impl Default for PlanValidator {
    fn default() -> Self {
        Self::new()
    }
}

impl PlanValidator {
    /// Compiles the plan schema.
    pub fn new() -> Self {
        let validator =
            jsonschema::validator_for(&plan_schema()).expect("the plan schema is valid");
        PlanValidator(validator)
    }

    /// [`parse_plan`] with this validator.
    ///
    /// # Errors
    /// [`PlanError`].
    pub fn parse(&self, text: &str, max_subtasks: usize) -> Result<Plan, PlanError> {
        let value = extract_json(text).ok_or(PlanError::NoJson)?;
        self.validate(&value, max_subtasks)
    }

    /// [`validate_plan_value`] with this validator.
    ///
    /// # Errors
    /// [`PlanError`].
    pub fn validate(&self, value: &Value, max_subtasks: usize) -> Result<Plan, PlanError> {
        check_plan(&self.0, value, max_subtasks)
    }
}

/// The schema errors of `value` (at most 10), then its meaning: the subtask cap, unique ids,
/// scopes inside the repository, known dependencies, no cycles.
fn check_plan(
    validator: &jsonschema::Validator,
    value: &Value,
    max_subtasks: usize,
) -> Result<Plan, PlanError> {
    let errors: Vec<String> = validator
        .iter_errors(value)
        .take(10)
        .map(|e| format!("at `{}`: {}", e.instance_path, e))
        .collect();
    if !errors.is_empty() {
        return Err(PlanError::Schema(errors));
    }
    let plan: Plan =
        serde_json::from_value(value.clone()).map_err(|e| PlanError::Json(e.to_string()))?;
    if plan.subtasks.len() > max_subtasks {
        return Err(PlanError::TooMany {
            count: plan.subtasks.len(),
            max: max_subtasks,
        });
    }
    let mut ids = BTreeSet::new();
    for s in &plan.subtasks {
        if !ids.insert(s.id.as_str()) {
            return Err(PlanError::Invalid(format!(
                "subtask id `{}` is used twice",
                s.id
            )));
        }
        for scope in &s.scope {
            if scope.starts_with('/') || scope.split('/').any(|c| c == "..") {
                return Err(PlanError::Invalid(format!(
                    "subtask `{}` has scope `{scope}`; scopes are paths relative to the repository root without `..`",
                    s.id
                )));
            }
        }
    }
    for s in &plan.subtasks {
        for d in &s.depends_on {
            if !ids.contains(d.as_str()) {
                return Err(PlanError::Invalid(format!(
                    "subtask `{}` depends on unknown subtask `{d}`",
                    s.id
                )));
            }
            if d == &s.id {
                return Err(PlanError::Invalid(format!(
                    "subtask `{}` depends on itself",
                    s.id
                )));
            }
        }
    }
    // cycle check (Kahn)
    let mut indegree: BTreeMap<&str, usize> = plan
        .subtasks
        .iter()
        .map(|s| (s.id.as_str(), s.depends_on.len()))
        .collect();
    let mut ready: Vec<&str> = indegree
        .iter()
        .filter(|(_, d)| **d == 0)
        .map(|(k, _)| *k)
        .collect();
    let mut seen = 0;
    while let Some(id) = ready.pop() {
        seen += 1;
        for s in plan
            .subtasks
            .iter()
            .filter(|s| s.depends_on.iter().any(|d| d == id))
        {
            let e = indegree.get_mut(s.id.as_str()).expect("known id");
            *e -= 1;
            if *e == 0 {
                ready.push(s.id.as_str());
            }
        }
    }
    if seen != plan.subtasks.len() {
        return Err(PlanError::Invalid("the dependencies form a cycle".into()));
    }
    Ok(plan)
}

/// A valid plan cut to at most `max` subtasks: the first batch — the first `max` subtasks of a
/// dependency order that keeps plan order where it can (a subtask comes once everything it
/// depends on has come), listed in plan order — and the rest (`None` when the plan fits), whose
/// dependencies on the first batch are dropped: they run in a later run on top of it.
pub fn split_batch(plan: Plan, max: usize) -> (Plan, Option<Plan>) {
    if plan.subtasks.len() <= max {
        return (plan, None);
    }
    let mut placed: BTreeSet<String> = BTreeSet::new();
    while placed.len() < max {
        let next = plan
            .subtasks
            .iter()
            .find(|s| !placed.contains(&s.id) && s.depends_on.iter().all(|d| placed.contains(d)));
        match next {
            Some(s) => placed.insert(s.id.clone()),
            None => break,
        };
    }
    let (first, mut rest): (Vec<Subtask>, Vec<Subtask>) = plan
        .subtasks
        .into_iter()
        .partition(|s| placed.contains(&s.id));
    for s in &mut rest {
        s.depends_on.retain(|d| !placed.contains(d));
    }
    let batch = |subtasks, what: &str| Plan {
        summary: format!("{} ({what})", plan.summary),
        subtasks,
    };
    let first_count = first.len();
    let first_batch = batch(first, "first batch");
    let rest = batch(rest, &format!("after the first {first_count} subtasks"));
    (first_batch, Some(rest))
}

/// The literal directory prefix of a scope pattern: everything before the first component that
/// contains a glob character (`*?[{`).
fn literal_prefix(scope: &str) -> Vec<&str> {
    scope
        .trim_start_matches("./")
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .take_while(|c| !c.contains(['*', '?', '[', '{']))
        .collect()
}

/// Whether two scope patterns may name a common file. Conservative: two patterns overlap when
/// the literal prefix of one is a component-wise prefix of the other's, or when one matches the
/// other as a path (glob semantics of `globset`). A pattern made only of globs overlaps
/// everything.
pub fn scopes_overlap(a: &str, b: &str) -> bool {
    let pa = literal_prefix(a);
    let pb = literal_prefix(b);
    let a_is_glob = a.contains(['*', '?', '[', '{']);
    let b_is_glob = b.contains(['*', '?', '[', '{']);
    if !a_is_glob && !b_is_glob {
        // plain paths: equal, or one is a directory containing the other
        return pa.starts_with(&pb) || pb.starts_with(&pa);
    }
    let prefix_related = pa.starts_with(&pb) || pb.starts_with(&pa);
    if !prefix_related {
        return false;
    }
    // Same subtree: refine with glob matching where one side is a plain path.
    let matches = |glob: &str, path: &str| {
        globset::Glob::new(glob)
            .map(|g| g.compile_matcher().is_match(path))
            .unwrap_or(true)
    };
    // A glob against a plain path: they are apart only when the path names a file (its last
    // component has an extension) below the glob's literal prefix that the glob does not match.
    let glob_vs_path = |glob: &str, glob_prefix: &[&str], path: &str, path_parts: &[&str]| {
        let names_file = path_parts.last().is_some_and(|c| c.contains('.'));
        path_parts.len() <= glob_prefix.len() || !names_file || matches(glob, path)
    };
    match (a_is_glob, b_is_glob) {
        (true, false) => glob_vs_path(a, &pa, b, &pb),
        (false, true) => glob_vs_path(b, &pb, a, &pa),
        _ => true,
    }
}

/// The first pair of scope patterns (`a`'s, `b`'s) that overlap ([`scopes_overlap`]), if any.
pub fn shared_scope<'a>(a: &'a Subtask, b: &'a Subtask) -> Option<(&'a str, &'a str)> {
    a.scope.iter().find_map(|x| {
        b.scope
            .iter()
            .find(|y| scopes_overlap(x, y))
            .map(|y| (x.as_str(), y.as_str()))
    })
}

/// Whether two subtasks' scopes overlap anywhere.
pub fn subtasks_overlap(a: &Subtask, b: &Subtask) -> bool {
    shared_scope(a, b).is_some()
}

/// Whether `path` (relative to the repository root, `/`-separated) lies in `scope`: equal to a
/// plain entry or inside it as a directory (`src` and `src/` hold `src/a.rs`), or matched by a
/// glob entry (`globset` syntax, `*` also crossing `/`). An entry that is not a valid glob counts
/// as matching, so a malformed scope never reports edits as outside it.
pub fn in_scope(path: &str, scope: &[String]) -> bool {
    let path = path.trim_start_matches("./");
    scope.iter().any(|entry| {
        let entry = entry.trim_start_matches("./").trim_end_matches('/');
        if entry.is_empty() || entry == "." {
            return true;
        }
        if entry.contains(['*', '?', '[', '{']) {
            return globset::Glob::new(entry)
                .map(|g| g.compile_matcher().is_match(path))
                .unwrap_or(true);
        }
        path == entry
            || path
                .strip_prefix(entry)
                .is_some_and(|rest| rest.starts_with('/'))
    })
}

/// The paths of `changed` that lie outside `scope` ([`in_scope`]), in their order.
pub fn outside_scope(changed: &[String], scope: &[String]) -> Vec<String> {
    changed
        .iter()
        .filter(|p| !in_scope(p, scope))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan_json(n: usize) -> String {
        let subtasks: Vec<Value> = (0..n)
            .map(|i| json!({"id": format!("s{i}"), "title": "t", "instructions": "do", "scope": [format!("src/f{i}.rs")]}))
            .collect();
        json!({"summary": "x", "subtasks": subtasks}).to_string()
    }

    #[test]
    fn parses_fenced_and_prose_wrapped_plans() {
        let text = format!("Here is my plan:\n```json\n{}\n```\nDone.", plan_json(2));
        assert_eq!(parse_plan(&text, 12).unwrap().subtasks.len(), 2);
        let text = format!("Plan follows {} end", plan_json(3));
        assert_eq!(parse_plan(&text, 12).unwrap().subtasks.len(), 3);
    }

    #[test]
    fn rejects_bad_plans_with_clear_errors() {
        assert_eq!(parse_plan("no plan here", 12), Err(PlanError::NoJson));
        let e = parse_plan(r#"{"subtasks": [{"id": "a", "title": "t"}]}"#, 12).unwrap_err();
        assert!(e.to_string().contains("instructions"), "{e}");
        let e = parse_plan(&plan_json(13), 12).unwrap_err();
        assert!(matches!(e, PlanError::TooMany { count: 13, max: 12 }));
        let dup = r#"{"subtasks": [{"id":"a","title":"t","instructions":"i","scope":["x"]},{"id":"a","title":"t","instructions":"i","scope":["y"]}]}"#;
        assert!(
            parse_plan(dup, 12)
                .unwrap_err()
                .to_string()
                .contains("twice")
        );
        let cyc = r#"{"subtasks": [{"id":"a","title":"t","instructions":"i","scope":["x"],"depends_on":["b"]},{"id":"b","title":"t","instructions":"i","scope":["y"],"depends_on":["a"]}]}"#;
        assert!(
            parse_plan(cyc, 12)
                .unwrap_err()
                .to_string()
                .contains("cycle")
        );
        let unknown = r#"{"subtasks": [{"id":"a","title":"t","instructions":"i","scope":["x"],"depends_on":["zz"]}]}"#;
        assert!(
            parse_plan(unknown, 12)
                .unwrap_err()
                .to_string()
                .contains("zz")
        );
        let escape =
            r#"{"subtasks": [{"id":"a","title":"t","instructions":"i","scope":["../x"]}]}"#;
        assert!(parse_plan(escape, 12).is_err());
    }

    #[test]
    fn paths_in_and_outside_a_scope() {
        let scope: Vec<String> = ["a.txt", "src/", "docs/**/*.md", "./lib"]
            .map(String::from)
            .to_vec();
        for inside in ["a.txt", "src/x/y.rs", "docs/guide/intro.md", "lib/m.py"] {
            assert!(in_scope(inside, &scope), "{inside}");
        }
        for outside in [
            "b.txt",
            "a.txt.bak",
            "srcs/x.rs",
            "docs/a.txt",
            "library.py",
        ] {
            assert!(!in_scope(outside, &scope), "{outside}");
        }
        let changed = ["a.txt", "other.txt", "src/m.rs", "Makefile"].map(String::from);
        assert_eq!(outside_scope(&changed, &scope), ["other.txt", "Makefile"]);
        assert!(outside_scope(&changed, &["**".into()]).is_empty());
    }

    #[test]
    fn scope_overlap() {
        assert!(scopes_overlap("src/a.rs", "src/a.rs"));
        assert!(!scopes_overlap("src/a.rs", "src/b.rs"));
        assert!(scopes_overlap("src", "src/b.rs"));
        assert!(scopes_overlap("src/**/*.rs", "src/x/y.rs"));
        assert!(!scopes_overlap("src/**/*.rs", "docs/a.md"));
        assert!(!scopes_overlap("src/*.rs", "src/readme.md"));
        assert!(scopes_overlap("**/*.rs", "docs/a.rs"));
        assert!(scopes_overlap("src/parser/**", "src/**"));
        assert!(!scopes_overlap("src/parser/**", "src/lexer/**"));
    }
}
