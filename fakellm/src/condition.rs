//! Conditions on the files in the requesting agent's working directory, so that a scripted
//! model decides by what is on disk rather than by prompt wording.
//!
//! The working directory is read from the request: the first line of the system prompt (else
//! the first user message) that contains `Working directory: ` — else `Workspace root: ` —
//! gives the path after it (ahelper's system prompt has `- Working directory: /path`). The
//! server reads files there: it is a test tool that runs on the same machine as the agent.
//!
//! Paths in conditions are relative to that directory and may not leave it (`..`, absolute
//! paths are rejected when the script is loaded).

use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Directories [`Condition::HasConflictMarkers`] does not enter.
const SKIPPED_DIRS: [&str; 4] = [".git", "node_modules", "target", "__pycache__"];
/// Files [`Condition::HasConflictMarkers`] reads at most (a safety bound for big trees).
const MAX_SCANNED_FILES: usize = 5_000;
/// Files larger than this are not searched for conflict markers, in bytes.
const MAX_SCANNED_BYTES: u64 = 1024 * 1024;

/// A condition on the working directory. JSON: an object with exactly one key.
///
/// | JSON | true when |
/// |---|---|
/// | `{"file_exists": "report.py"}` | the path exists (file or directory) |
/// | `{"file_missing": "report.py"}` | the path does not exist |
/// | `{"file_contains": {"path": "calc.py", "text": "def plus"}}` | the file exists and contains the text (case-sensitive) |
/// | `{"file_lacks": {"path": "calc.py", "text": "def add"}}` | the file is missing or does not contain the text |
/// | `{"has_conflict_markers": true}` | some file under the directory (not in `.git`, `node_modules`, `target`, `__pycache__`) has a line starting with `<<<<<<<` and one starting with `>>>>>>>`; `false` inverts |
/// | `{"all": [c, …]}` | every condition holds (an empty list holds) |
/// | `{"any": [c, …]}` | at least one holds |
/// | `{"not": c}` | `c` does not hold |
///
/// Every condition is false when the request names no working directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Condition {
    /// The path exists.
    FileExists(PathBuf),
    /// The path does not exist.
    FileMissing(PathBuf),
    /// The file contains the text.
    FileContains(FileText),
    /// The file is missing or does not contain the text.
    FileLacks(FileText),
    /// Whether some file has git conflict markers.
    HasConflictMarkers(bool),
    /// Every condition holds.
    All(Vec<Condition>),
    /// At least one condition holds.
    Any(Vec<Condition>),
    /// The condition does not hold.
    Not(Box<Condition>),
}

/// A path and a text, for [`Condition::FileContains`] and [`Condition::FileLacks`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileText {
    /// File relative to the working directory.
    pub path: PathBuf,
    /// Text searched for (case-sensitive substring).
    pub text: String,
}

impl Condition {
    /// `{"file_exists": path}`.
    pub fn file_exists(path: impl Into<PathBuf>) -> Self {
        Condition::FileExists(path.into())
    }

    /// `{"file_missing": path}`.
    pub fn file_missing(path: impl Into<PathBuf>) -> Self {
        Condition::FileMissing(path.into())
    }

    /// `{"file_contains": {"path": …, "text": …}}`.
    pub fn file_contains(path: impl Into<PathBuf>, text: impl Into<String>) -> Self {
        Condition::FileContains(FileText {
            path: path.into(),
            text: text.into(),
        })
    }

    /// `{"file_lacks": {"path": …, "text": …}}`.
    pub fn file_lacks(path: impl Into<PathBuf>, text: impl Into<String>) -> Self {
        Condition::FileLacks(FileText {
            path: path.into(),
            text: text.into(),
        })
    }

    /// Evaluates the condition in `workdir`; false for every condition when `workdir` is
    /// `None`.
    pub fn holds(&self, workdir: Option<&Path>) -> bool {
        let Some(dir) = workdir else {
            return false;
        };
        match self {
            Condition::FileExists(p) => dir.join(p).exists(),
            Condition::FileMissing(p) => !dir.join(p).exists(),
            Condition::FileContains(f) => file_contains(dir, f),
            Condition::FileLacks(f) => !file_contains(dir, f),
            Condition::HasConflictMarkers(wanted) => has_conflict_markers(dir) == *wanted,
            Condition::All(cs) => cs.iter().all(|c| c.holds(workdir)),
            Condition::Any(cs) => cs.iter().any(|c| c.holds(workdir)),
            Condition::Not(c) => !c.holds(workdir),
        }
    }

    /// Checks that every path is relative and stays inside the working directory.
    ///
    /// Errors: a message naming the path.
    pub fn validate(&self) -> Result<(), String> {
        let check = |p: &Path| {
            let escapes = p
                .components()
                .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir));
            if escapes || p.as_os_str().is_empty() {
                Err(format!(
                    "condition path `{}` must be relative to the working directory, without `..`",
                    p.display()
                ))
            } else {
                Ok(())
            }
        };
        match self {
            Condition::FileExists(p) | Condition::FileMissing(p) => check(p),
            Condition::FileContains(f) | Condition::FileLacks(f) => check(&f.path),
            Condition::HasConflictMarkers(_) => Ok(()),
            Condition::All(cs) | Condition::Any(cs) => cs.iter().try_for_each(Condition::validate),
            Condition::Not(c) => c.validate(),
        }
    }
}

fn file_contains(dir: &Path, f: &FileText) -> bool {
    std::fs::read(dir.join(&f.path))
        .is_ok_and(|bytes| String::from_utf8_lossy(&bytes).contains(&f.text))
}

/// True when a file under `dir` has both a `<<<<<<<` and a `>>>>>>>` line.
fn has_conflict_markers(dir: &Path) -> bool {
    let mut stack = vec![dir.to_path_buf()];
    let mut scanned = 0;
    while let Some(current) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&current) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let name = entry.file_name();
            if kind.is_dir() {
                if !SKIPPED_DIRS.iter().any(|s| name == *s) {
                    stack.push(entry.path());
                }
                continue;
            }
            if !kind.is_file()
                || entry
                    .metadata()
                    .map_or(true, |m| m.len() > MAX_SCANNED_BYTES)
            {
                continue;
            }
            scanned += 1;
            if scanned > MAX_SCANNED_FILES {
                return false;
            }
            if std::fs::read(entry.path()).is_ok_and(|bytes| text_has_markers(&bytes)) {
                return true;
            }
        }
    }
    false
}

fn text_has_markers(bytes: &[u8]) -> bool {
    let text = String::from_utf8_lossy(bytes);
    let marker = |prefix: &str| {
        text.lines().any(|l| {
            l.strip_prefix(prefix)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with(' '))
        })
    };
    marker("<<<<<<<") && marker(">>>>>>>")
}

/// The agent's working directory named in a request: the text after `Working directory: `
/// on the first line of `texts` that has it, else after `Workspace root: `.
pub fn workdir_of(texts: &[&str]) -> Option<PathBuf> {
    ["Working directory: ", "Workspace root: "]
        .iter()
        .find_map(|label| {
            texts.iter().find_map(|text| {
                text.lines().find_map(|line| {
                    let (_, rest) = line.split_once(label)?;
                    let path = rest.trim();
                    (!path.is_empty()).then(|| PathBuf::from(path))
                })
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_read_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        let d = Some(dir.path());
        std::fs::write(
            dir.path().join("calc.py"),
            "def plus(a, b):\n    return a + b\n",
        )
        .unwrap();
        assert!(Condition::file_exists("calc.py").holds(d));
        assert!(Condition::file_missing("report.py").holds(d));
        assert!(Condition::file_contains("calc.py", "def plus").holds(d));
        assert!(!Condition::file_contains("report.py", "x").holds(d));
        assert!(Condition::file_lacks("calc.py", "def add").holds(d));
        assert!(Condition::file_lacks("report.py", "x").holds(d));
        assert!(Condition::HasConflictMarkers(false).holds(d));
        std::fs::create_dir(dir.path().join("pkg")).unwrap();
        std::fs::write(
            dir.path().join("pkg/m.py"),
            "<<<<<<< HEAD\na = 1\n=======\na = 2\n>>>>>>> ahelper/r/w2\n",
        )
        .unwrap();
        assert!(Condition::HasConflictMarkers(true).holds(d));
        let both = Condition::All(vec![
            Condition::file_exists("calc.py"),
            Condition::Not(Box::new(Condition::file_exists("report.py"))),
        ]);
        assert!(both.holds(d));
        assert!(!Condition::Any(vec![]).holds(d));
        assert!(Condition::All(vec![]).holds(d));
        assert!(!Condition::file_missing("x").holds(None));
    }

    #[test]
    fn markers_in_git_and_mid_line_do_not_count() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".git")).unwrap();
        std::fs::write(dir.path().join(".git/x"), "<<<<<<< a\n>>>>>>> b\n").unwrap();
        std::fs::write(
            dir.path().join("doc.md"),
            "write `<<<<<<<` and\n x >>>>>>> y\n",
        )
        .unwrap();
        assert!(!Condition::HasConflictMarkers(true).holds(Some(dir.path())));
    }

    #[test]
    fn json_shape_and_validation() {
        let c: Condition = serde_json::from_str(
            r#"{"all": [{"file_contains": {"path": "calc.py", "text": "def plus"}},
                        {"not": {"has_conflict_markers": true}}]}"#,
        )
        .unwrap();
        assert!(c.validate().is_ok());
        let err = serde_json::from_str::<Condition>(r#"{"file_exist": "x"}"#).unwrap_err();
        assert!(
            err.to_string().contains("unknown variant `file_exist`"),
            "{err}"
        );
        let err =
            serde_json::from_str::<Condition>(r#"{"file_contains": {"path": "a", "txt": "b"}}"#)
                .unwrap_err();
        assert!(err.to_string().contains("unknown field `txt`"), "{err}");
        for bad in [
            r#"{"file_exists": "../x"}"#,
            r#"{"file_missing": "/etc/passwd"}"#,
        ] {
            let c: Condition = serde_json::from_str(bad).unwrap();
            assert!(
                c.validate().unwrap_err().contains("must be relative"),
                "{bad}"
            );
        }
    }

    #[test]
    fn workdir_comes_from_the_system_prompt() {
        let system =
            "You are ahelper.\n# Environment\n- Workspace root: /r\n- Working directory: /r/sub\n";
        assert_eq!(workdir_of(&[system, ""]), Some(PathBuf::from("/r/sub")));
        assert_eq!(
            workdir_of(&["- Workspace root: /w\n", ""]),
            Some(PathBuf::from("/w"))
        );
        assert_eq!(workdir_of(&["hello", "world"]), None);
    }
}
