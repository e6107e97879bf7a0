//! Which verification command a run uses: `--verify`/`--no-verify`, `[swarm] verify`, or one
//! detected from the files at the repository root ([`detect_command`]).

use ignore::WalkBuilder;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// A command proposed from the repository's files, with the reason shown next to the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DetectedCommand {
    /// Shell command line, e.g. `cargo test --no-fail-fast`.
    pub command: String,
    /// Why it was chosen, e.g. `Cargo.toml at the repository root`.
    pub reason: String,
}

/// At most this many Python test files are read to choose between pytest and unittest.
const MAX_PYTHON_TEST_FILES: usize = 200;
/// Python test files are looked for this many directories deep.
const PYTHON_SEARCH_DEPTH: usize = 4;

/// Proposes a verification command from the files at `repo_root`, first match wins:
///
/// 1. `Cargo.toml` → `cargo test --no-fail-fast` (every test binary runs, so failures can be
///    compared by name; plain `cargo test` stops after the first failing binary);
/// 2. `package.json` whose `scripts.test` is set and is not npm's placeholder
///    (`echo "Error: no test specified" && exit 1`) → `npm test`;
/// 3. pytest configuration — `pytest.ini`, `[tool.pytest.ini_options]` in `pyproject.toml`,
///    `[tool:pytest]` in `setup.cfg`, `[pytest]` in `tox.ini`, or `conftest.py` →
///    `python3 -m pytest -q`;
/// 4. Python test files (`test_*.py`, `*_test.py`, up to 4 directories deep, `.gitignore`d and
///    hidden paths skipped): `python3 -m unittest` when every one is unittest-style (imports
///    `unittest` and never `pytest`), else `python3 -m pytest -q` (pytest also runs unittest
///    classes, but unittest does not collect bare `def test_…` functions). Importability of
///    pytest is not probed here: [`super::precheck`] reports a missing module before any
///    worker starts;
/// 5. `go.mod` → `go test ./...`;
/// 6. `Makefile`/`makefile`/`GNUmakefile` with a `test:` target → `make test`.
///
/// `None` when nothing matches.
pub fn detect_command(repo_root: &Path) -> Option<DetectedCommand> {
    let found = |command: &str, reason: String| {
        Some(DetectedCommand {
            command: command.to_string(),
            reason,
        })
    };
    if repo_root.join("Cargo.toml").is_file() {
        return found(
            "cargo test --no-fail-fast",
            "Cargo.toml at the repository root".into(),
        );
    }
    if let Some(script) = npm_test_script(repo_root) {
        return found(
            "npm test",
            format!("package.json has a \"test\" script: {script}"),
        );
    }
    if let Some(config) = pytest_config(repo_root) {
        return found(
            "python3 -m pytest -q",
            format!("pytest is configured in {config}"),
        );
    }
    if let Some((files, unittest_only)) = python_test_files(repo_root) {
        let what = if files == 1 {
            "1 Python test file".to_string()
        } else {
            format!("{files} Python test files")
        };
        return if unittest_only {
            found(
                "python3 -m unittest",
                format!("{what} (test_*.py / *_test.py), all written with unittest"),
            )
        } else {
            found(
                "python3 -m pytest -q",
                format!("{what} (test_*.py / *_test.py), some written for pytest"),
            )
        };
    }
    if repo_root.join("go.mod").is_file() {
        return found("go test ./...", "go.mod at the repository root".into());
    }
    if let Some(makefile) = make_test_target(repo_root) {
        return found("make test", format!("{makefile} has a `test` target"));
    }
    None
}

/// `scripts.test` of `package.json`, unless absent or npm's `npm init` placeholder.
fn npm_test_script(repo_root: &Path) -> Option<String> {
    let text = std::fs::read_to_string(repo_root.join("package.json")).ok()?;
    let json: serde_json::Value = serde_json::from_str(&text).ok()?;
    let script = json.get("scripts")?.get("test")?.as_str()?.trim();
    let placeholder = script.contains("no test specified");
    (!script.is_empty() && !placeholder).then(|| script.to_string())
}

/// The file that configures pytest, if any.
fn pytest_config(repo_root: &Path) -> Option<&'static str> {
    let read = |name: &str| std::fs::read_to_string(repo_root.join(name)).ok();
    if repo_root.join("pytest.ini").is_file() {
        return Some("pytest.ini");
    }
    if let Some(text) = read("pyproject.toml")
        && let Ok(doc) = text.parse::<toml::Table>()
        && doc
            .get("tool")
            .and_then(|t| t.get("pytest"))
            .and_then(|p| p.get("ini_options"))
            .is_some()
    {
        return Some("pyproject.toml ([tool.pytest.ini_options])");
    }
    let has_section = |text: &str, section: &str| text.lines().any(|l| l.trim() == section);
    if read("setup.cfg").is_some_and(|t| has_section(&t, "[tool:pytest]")) {
        return Some("setup.cfg ([tool:pytest])");
    }
    if read("tox.ini").is_some_and(|t| has_section(&t, "[pytest]")) {
        return Some("tox.ini ([pytest])");
    }
    if repo_root.join("conftest.py").is_file() {
        return Some("conftest.py");
    }
    None
}

/// Number of Python test files (up to [`MAX_PYTHON_TEST_FILES`]) and whether all of them are
/// unittest-style. `None` when there is none.
fn python_test_files(repo_root: &Path) -> Option<(usize, bool)> {
    let mut count = 0;
    let mut unittest_only = true;
    let walk = WalkBuilder::new(repo_root)
        .max_depth(Some(PYTHON_SEARCH_DEPTH))
        .require_git(false)
        .filter_entry(|e| {
            let name = e.file_name().to_string_lossy();
            !matches!(
                name.as_ref(),
                "node_modules" | "venv" | ".venv" | "__pycache__" | "site-packages"
            )
        })
        .build();
    for entry in walk.flatten() {
        let name = entry.file_name().to_string_lossy();
        let is_test =
            name.ends_with(".py") && (name.starts_with("test_") || name.ends_with("_test.py"));
        if !is_test || !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        count += 1;
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        unittest_only &= is_unittest_style(&text);
        if count >= MAX_PYTHON_TEST_FILES {
            break;
        }
    }
    (count > 0).then_some((count, unittest_only))
}

/// True when a test file uses unittest and not pytest.
fn is_unittest_style(text: &str) -> bool {
    let mut uses_unittest = false;
    for line in text.lines().map(str::trim_start) {
        if line.starts_with("import pytest") || line.starts_with("from pytest") {
            return false;
        }
        if line.starts_with("import unittest") || line.starts_with("from unittest") {
            uses_unittest = true;
        }
    }
    uses_unittest
}

/// The makefile with a `test` target, if any.
fn make_test_target(repo_root: &Path) -> Option<&'static str> {
    ["GNUmakefile", "makefile", "Makefile"]
        .into_iter()
        .find(|name| {
            std::fs::read_to_string(repo_root.join(name))
                .is_ok_and(|text| text.lines().any(defines_test_target))
        })
}

/// True for a rule line whose targets include `test` (`test:`, `lint test: deps`, `test::`),
/// not a variable assignment (`test := 1`, `test ?= 1`) or a recipe line.
fn defines_test_target(line: &str) -> bool {
    if line.starts_with(['\t', ' ', '#', '.']) {
        return false;
    }
    let Some((targets, rest)) = line.split_once(':') else {
        return false;
    };
    !rest.starts_with('=')
        && !rest.starts_with(":=")
        && !targets.contains('=')
        && targets.split_whitespace().any(|t| t == "test")
}

/// What the command line said about verification (`--verify CMD`, `--no-verify`, neither).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum VerifyFlag {
    /// Neither flag.
    #[default]
    Unset,
    /// `--verify CMD`.
    Command(String),
    /// `--no-verify`.
    Off,
}

/// Where the chosen command came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum CommandSource {
    /// `--verify`.
    Flag,
    /// `[swarm] verify` in a config file.
    Config,
    /// Proposed by [`detect_command`]; the user accepts or edits it with the plan (`--yes`
    /// accepts).
    Detected {
        /// Why, e.g. `Cargo.toml at the repository root`.
        reason: String,
    },
}

/// The verification setting of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum VerifyChoice {
    /// Verify with `command`.
    On {
        /// Shell command line.
        command: String,
        /// Where it came from.
        source: CommandSource,
    },
    /// No verification.
    Off {
        /// `--no-verify`, or nothing configured and nothing detected.
        reason: OffReason,
    },
}

/// Why verification is off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OffReason {
    /// `--no-verify` was given.
    NoVerifyFlag,
    /// Nothing configured and [`detect_command`] found nothing.
    NothingDetected,
}

/// Chooses the verification command: `--no-verify` > `--verify CMD` > `configured`
/// (`[swarm] verify`) > [`detect_command`] on `repo_root`.
pub fn choose_command(
    flag: &VerifyFlag,
    configured: Option<&str>,
    repo_root: &Path,
) -> VerifyChoice {
    match (flag, configured) {
        (VerifyFlag::Off, _) => VerifyChoice::Off {
            reason: OffReason::NoVerifyFlag,
        },
        (VerifyFlag::Command(command), _) => VerifyChoice::On {
            command: command.clone(),
            source: CommandSource::Flag,
        },
        (VerifyFlag::Unset, Some(command)) => VerifyChoice::On {
            command: command.to_string(),
            source: CommandSource::Config,
        },
        (VerifyFlag::Unset, None) => match detect_command(repo_root) {
            Some(detected) => VerifyChoice::On {
                command: detected.command,
                source: CommandSource::Detected {
                    reason: detected.reason,
                },
            },
            None => VerifyChoice::Off {
                reason: OffReason::NothingDetected,
            },
        },
    }
}

impl VerifyChoice {
    /// The command, when verification is on.
    pub fn command(&self) -> Option<&str> {
        match self {
            VerifyChoice::On { command, .. } => Some(command),
            VerifyChoice::Off { .. } => None,
        }
    }

    /// True when the command was detected and the user should accept or edit it.
    pub fn needs_confirmation(&self) -> bool {
        matches!(
            self,
            VerifyChoice::On {
                source: CommandSource::Detected { .. },
                ..
            }
        )
    }

    /// One line for the plan, e.g. ``verify: `cargo test --no-fail-fast` (detected: Cargo.toml
    /// at the repository root)``, ``verify: `make check` (from [swarm] verify)``,
    /// `verify: off (--no-verify)`.
    pub fn describe(&self) -> String {
        match self {
            VerifyChoice::On { command, source } => {
                let from = match source {
                    CommandSource::Flag => "from --verify".to_string(),
                    CommandSource::Config => "from [swarm] verify".to_string(),
                    CommandSource::Detected { reason } => format!("detected: {reason}"),
                };
                format!("verify: `{command}` ({from})")
            }
            VerifyChoice::Off {
                reason: OffReason::NoVerifyFlag,
            } => "verify: off (--no-verify)".to_string(),
            VerifyChoice::Off {
                reason: OffReason::NothingDetected,
            } => "verify: off (no test command found: no Cargo.toml, package.json test script, \
                  pytest configuration, Python test files, go.mod or Makefile `test` target; set \
                  [swarm] verify or pass --verify)"
                .to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let p = dir.path().join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        dir
    }

    fn detected(files: &[(&str, &str)]) -> Option<String> {
        detect_command(repo(files).path()).map(|d| d.command)
    }

    #[test]
    fn each_ecosystem_is_detected() {
        let unittest = "import unittest\nclass T(unittest.TestCase):\n    pass\n";
        type Files<'a> = &'a [(&'a str, &'a str)];
        let cases: [(Files<'_>, Option<&str>); 15] = [
            (
                &[("Cargo.toml", "[package]")],
                Some("cargo test --no-fail-fast"),
            ),
            (
                &[("package.json", r#"{"scripts": {"test": "jest"}}"#)],
                Some("npm test"),
            ),
            (
                &[(
                    "package.json",
                    r#"{"scripts": {"test": "echo \"Error: no test specified\" && exit 1"}}"#,
                )],
                None,
            ),
            (&[("package.json", r#"{"name": "x"}"#)], None),
            (
                &[("pytest.ini", "[pytest]\n")],
                Some("python3 -m pytest -q"),
            ),
            (
                &[(
                    "pyproject.toml",
                    "[tool.pytest.ini_options]\naddopts = \"-q\"\n",
                )],
                Some("python3 -m pytest -q"),
            ),
            (&[("pyproject.toml", "[project]\nname = \"x\"\n")], None),
            (
                &[("setup.cfg", "[metadata]\n[tool:pytest]\n")],
                Some("python3 -m pytest -q"),
            ),
            (&[("conftest.py", "")], Some("python3 -m pytest -q")),
            (&[("test_calc.py", unittest)], Some("python3 -m unittest")),
            (
                &[
                    ("test_calc.py", unittest),
                    ("pkg/calc_test.py", "def test_x():\n    assert 1\n"),
                ],
                Some("python3 -m pytest -q"),
            ),
            (
                &[("go.mod", "module example.com/x\n")],
                Some("go test ./..."),
            ),
            (
                &[("Makefile", "all:\n\tcc x.c\n\ntest: all\n\t./run\n")],
                Some("make test"),
            ),
            (
                &[("makefile", "lint test:: deps\n\t./run\n")],
                Some("make test"),
            ),
            (
                &[("Makefile", "test := 1\n.PHONY: test\ntests:\n\tx\n")],
                None,
            ),
        ];
        for (files, expected) in cases {
            assert_eq!(detected(files).as_deref(), expected, "{files:?}");
        }
    }

    #[test]
    fn precedence_and_reasons() {
        let dir = repo(&[
            ("Cargo.toml", ""),
            ("package.json", r#"{"scripts": {"test": "jest"}}"#),
            ("Makefile", "test:\n\ttrue\n"),
        ]);
        let d = detect_command(dir.path()).unwrap();
        assert_eq!(d.command, "cargo test --no-fail-fast");
        assert_eq!(d.reason, "Cargo.toml at the repository root");
        let dir = repo(&[
            ("package.json", r#"{"scripts": {"test": "vitest run"}}"#),
            ("Makefile", "test:\n\ttrue\n"),
        ]);
        let d = detect_command(dir.path()).unwrap();
        assert_eq!(d.reason, "package.json has a \"test\" script: vitest run");
        let dir = repo(&[
            ("test_a.py", "import unittest\n"),
            ("tests/test_b.py", "from unittest import TestCase\n"),
            (".venv/lib/test_zz.py", "import pytest\n"),
            ("node_modules/x/test_y.py", "import pytest\n"),
        ]);
        let d = detect_command(dir.path()).unwrap();
        assert_eq!(d.command, "python3 -m unittest");
        assert!(d.reason.starts_with("2 Python test files"), "{}", d.reason);
        assert_eq!(detect_command(repo(&[("README.md", "hi")]).path()), None);
    }

    #[test]
    fn choice_precedence() {
        let dir = repo(&[("go.mod", "module x\n")]);
        let root = dir.path();
        let off = choose_command(&VerifyFlag::Off, Some("make check"), root);
        assert_eq!(off.command(), None);
        assert_eq!(off.describe(), "verify: off (--no-verify)");
        let flag = choose_command(&VerifyFlag::Command("pytest".into()), Some("x"), root);
        assert_eq!(flag.describe(), "verify: `pytest` (from --verify)");
        let config = choose_command(&VerifyFlag::Unset, Some("make check"), root);
        assert_eq!(
            config.describe(),
            "verify: `make check` (from [swarm] verify)"
        );
        assert!(!config.needs_confirmation());
        let detected = choose_command(&VerifyFlag::Unset, None, root);
        assert_eq!(
            detected.describe(),
            "verify: `go test ./...` (detected: go.mod at the repository root)"
        );
        assert!(detected.needs_confirmation());
        let empty = tempfile::tempdir().unwrap();
        let none = choose_command(&VerifyFlag::Unset, None, empty.path());
        assert!(
            none.describe()
                .contains("set [swarm] verify or pass --verify")
        );
        let json = serde_json::to_value(&detected).unwrap();
        assert_eq!(json["state"], "on");
        assert_eq!(json["source"]["kind"], "detected");
    }
}
