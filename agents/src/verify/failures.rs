//! Names of failed tests, read from a test runner's output.
//!
//! [`parse_failures`] recognises the closing lines of these runners and lists the failed tests
//! they name (formats as printed by the versions in `agents/tests/data/verify/`):
//!
//! | runner | recognised by | failure names from |
//! |---|---|---|
//! | libtest (`cargo test`) | `test result: ok.` / `FAILED.` | `test NAME ... FAILED` and the `failures:` list, per test binary (`Running tests/api.rs (…)`, `Doc-tests crate`) |
//! | pytest | the closing `N failed, M passed in 0.1s` line | short summary `FAILED nodeid - msg` / `ERROR nodeid` |
//! | unittest | `Ran N tests in 0.001s` | `FAIL: test_x (mod.Class.test_x)` / `ERROR:` headers, 3.11+ and older forms, subtests |
//! | go test | package lines `ok  \tpkg\t0.1s`, `FAIL\tpkg\t…`, `--- FAIL:` | `--- FAIL: TestX` and subtests `TestX/sub`, per package; `[build failed]` |
//! | jest | `Tests:  3 failed, …` | `● Suite › test` headers under `FAIL file` (else `✕` lines); `● Test suite failed to run` |
//! | vitest | `Test Files  …` | `FAIL  file > suite > test` headers (else `×` lines) |
//!
//! ANSI colour codes are removed first. A runner whose summary says tests failed but whose
//! output names none (e.g. a summary without the short list) counts as unparsed, so that the
//! comparison falls back to the exit status instead of trusting an empty list.

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::fmt;

/// A test runner whose output [`parse_failures`] understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TestRunner {
    /// Rust's libtest, as run by `cargo test`.
    Libtest,
    /// pytest.
    Pytest,
    /// Python's `unittest`.
    Unittest,
    /// `go test`.
    GoTest,
    /// Jest.
    Jest,
    /// Vitest.
    Vitest,
}

impl TestRunner {
    /// The runner's usual name, e.g. `cargo test`.
    pub fn label(self) -> &'static str {
        match self {
            TestRunner::Libtest => "cargo test",
            TestRunner::Pytest => "pytest",
            TestRunner::Unittest => "unittest",
            TestRunner::GoTest => "go test",
            TestRunner::Jest => "jest",
            TestRunner::Vitest => "vitest",
        }
    }
}

/// One failed test. Two runs are compared on the whole value; [`fmt::Display`] shows the name
/// only (`group` tells same-named tests of different binaries, packages or files apart).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct FailedTest {
    /// Where the test lives when the runner groups tests: the test binary for libtest
    /// (`src/lib.rs (calc)`, `tests/api.rs (api)`, `doc-tests calc`), the package for go test,
    /// the file for jest and vitest; empty for pytest and unittest (their names are complete).
    pub group: String,
    /// The test's name as the runner prints it: `tests::adds`, `test_p.py::test_legacy`,
    /// `test_calc.TestCalc.test_add`, `TestTable/negative`, `sum › adds`.
    pub name: String,
}

impl FailedTest {
    fn new(group: &str, name: impl Into<String>) -> Self {
        FailedTest {
            group: group.to_string(),
            name: name.into(),
        }
    }
}

impl fmt::Display for FailedTest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

/// What [`parse_failures`] read from one run's output.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct FailureReport {
    /// Runners whose closing lines were found (several when one command runs several).
    pub runners: Vec<TestRunner>,
    /// Every failed test named in the output.
    pub failed: BTreeSet<FailedTest>,
    /// True when the runner stopped before running everything: cargo's fail-fast stop after
    /// a failing test binary (`error: test failed, to rerun pass …` without `--no-fail-fast`'s
    /// `N targets failed` list), pytest's `Interrupted:` / `stopping after N failures`.
    pub stopped_early: bool,
    /// True when the middle of the output was cut by the output cap, so names may be missing.
    pub output_cut: bool,
}

impl FailureReport {
    /// True when every test the command would run was run and every failure is listed.
    pub fn is_complete(&self) -> bool {
        !self.stopped_early && !self.output_cut
    }

    /// The runners' labels joined with `+`, e.g. `cargo test`.
    pub fn runner_label(&self) -> String {
        self.runners
            .iter()
            .map(|r| r.label())
            .collect::<Vec<_>>()
            .join(" + ")
    }
}

/// One runner's reading of the output: the names, whether it said something failed, and
/// whether it stopped early.
struct RunnerReading {
    failed: Vec<FailedTest>,
    reports_failure: bool,
    stopped_early: bool,
}

/// A runner's reader: its reading of the output's lines, `None` when its output is absent.
type Reader = fn(&[&str]) -> Option<RunnerReading>;

/// Reads failure names from `output` (stdout and stderr interleaved). `None` when no known
/// runner's closing lines are in it, or when a runner says tests failed but names none: then
/// only the exit status can be compared.
pub fn parse_failures(output: &str) -> Option<FailureReport> {
    let clean = strip_ansi(output);
    let lines: Vec<&str> = clean.lines().map(|l| l.trim_end_matches('\r')).collect();
    let readers: [(TestRunner, Reader); 6] = [
        (TestRunner::Libtest, libtest),
        (TestRunner::Pytest, pytest),
        (TestRunner::Unittest, unittest),
        (TestRunner::GoTest, go_test),
        (TestRunner::Jest, jest),
        (TestRunner::Vitest, vitest),
    ];
    let mut report = FailureReport::default();
    for (runner, read) in readers {
        let Some(reading) = read(&lines) else {
            continue;
        };
        if reading.reports_failure && reading.failed.is_empty() {
            return None;
        }
        report.runners.push(runner);
        report.failed.extend(reading.failed);
        report.stopped_early |= reading.stopped_early;
    }
    (!report.runners.is_empty()).then_some(report)
}

/// Removes ANSI escape sequences (CSI `ESC [ … final`, and two-byte `ESC x`).
pub fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            skip_escape(&mut chars);
        } else {
            out.push(c);
        }
    }
    out
}

/// Skips what follows an `ESC`: a CSI sequence up to its final byte, an OSC one up to BEL or
/// `ESC \`, else the one character of a two-byte sequence.
fn skip_escape(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    match chars.next() {
        Some('[') => {
            chars.find(|c| ('@'..='~').contains(c));
        }
        Some(']') => {
            while let Some(c) = chars.next() {
                if c == '\u{7}' || (c == '\u{1b}' && chars.next_if_eq(&'\\').is_some()) {
                    break;
                }
            }
        }
        _ => {}
    }
}

/// libtest: `test NAME ... FAILED`, the `failures:` name list, `test result:` lines, binaries
/// announced by `Running …` / `Doc-tests …`.
fn libtest(lines: &[&str]) -> Option<RunnerReading> {
    let mut seen = false;
    let mut reports_failure = false;
    let mut group = String::new();
    let mut failed = Vec::new();
    let mut in_list = false;
    for line in lines {
        let trimmed = line.trim();
        if let Some(rest) = trimmed.strip_prefix("Running ") {
            group = libtest_group(rest);
            in_list = false;
        } else if let Some(krate) = trimmed.strip_prefix("Doc-tests ") {
            group = format!("doc-tests {krate}");
            in_list = false;
        } else if let Some(result) = trimmed.strip_prefix("test result: ") {
            seen = true;
            reports_failure |= result.starts_with("FAILED");
            in_list = false;
        } else if trimmed == "failures:" {
            in_list = true;
        } else if in_list && line.starts_with("    ") && !trimmed.is_empty() {
            failed.push(FailedTest::new(&group, trimmed));
        } else if in_list && !trimmed.is_empty() && !trimmed.starts_with("---- ") {
            in_list = false;
        } else if let Some(name) = trimmed
            .strip_prefix("test ")
            .and_then(|r| r.strip_suffix(" ... FAILED"))
        {
            let name = name.strip_suffix(" - should panic").unwrap_or(name);
            failed.push(FailedTest::new(&group, name));
        }
    }
    if !seen {
        return None;
    }
    let rerun_hint = lines
        .iter()
        .any(|l| l.starts_with("error: test failed, to rerun pass"));
    let all_targets_listed = lines.iter().any(|l| {
        l.strip_prefix("error: ")
            .is_some_and(|r| r.ends_with(" targets failed:") || r.ends_with(" target failed:"))
    });
    Some(RunnerReading {
        failed,
        reports_failure,
        stopped_early: rerun_hint && !all_targets_listed,
    })
}

/// `unittests src/lib.rs (target/debug/deps/calc-c6626fb655a8d231)` → `src/lib.rs (calc)`: the
/// source and the binary's name without its hash (which changes between checkouts).
fn libtest_group(running: &str) -> String {
    let running = running.strip_prefix("unittests ").unwrap_or(running);
    let (source, binary) = match running.split_once(" (") {
        Some((source, rest)) => (source, rest.trim_end_matches(')')),
        None => (running, ""),
    };
    let file = binary.rsplit('/').next().unwrap_or(binary);
    let stem = match file.rsplit_once('-') {
        Some((stem, hash)) if hash.chars().all(|c| c.is_ascii_hexdigit()) => stem,
        _ => file,
    };
    if stem.is_empty() {
        source.to_string()
    } else {
        format!("{source} ({stem})")
    }
}

/// pytest: the closing counts line and the short summary `FAILED`/`ERROR` lines.
fn pytest(lines: &[&str]) -> Option<RunnerReading> {
    let summary = lines.iter().rev().find_map(|l| pytest_summary(l))?;
    let failed = lines
        .iter()
        .filter_map(|line| {
            let rest = line
                .strip_prefix("FAILED ")
                .or_else(|| line.strip_prefix("ERROR "))?;
            let id = rest.split(" - ").next().unwrap_or(rest).trim();
            (!id.is_empty()).then(|| FailedTest::new("", id))
        })
        .collect();
    let stopped_early = lines.iter().any(|l| {
        let t = l.trim_matches(|c| c == '!' || c == ' ');
        t.starts_with("Interrupted: ") || t.starts_with("stopping after ")
    });
    Some(RunnerReading {
        failed,
        reports_failure: summary,
        stopped_early,
    })
}

/// A pytest closing line such as `3 failed, 3 passed, 1 error in 0.05s` (optionally framed by
/// `=`): `Some(true)` when it counts failures or errors, `Some(false)` when it does not.
fn pytest_summary(line: &str) -> Option<bool> {
    let line = line.trim().trim_matches('=').trim();
    let (counts, time) = line.rsplit_once(" in ")?;
    let time = time.split_whitespace().next()?;
    let seconds = time.strip_suffix('s')?;
    if seconds.parse::<f64>().is_err() {
        return None;
    }
    if counts == "no tests ran" {
        return Some(false);
    }
    let mut failing = false;
    for part in counts.split(", ") {
        let (n, what) = part.split_once(' ')?;
        n.parse::<u64>().ok()?;
        match what {
            "failed" | "error" | "errors" => failing = true,
            "passed" | "skipped" | "xfailed" | "xpassed" | "deselected" | "warning"
            | "warnings" | "rerun" => {}
            _ => return None,
        }
    }
    Some(failing)
}

/// unittest: `FAIL:` / `ERROR:` / `UNEXPECTED SUCCESS:` headers and `Ran N tests in …`.
fn unittest(lines: &[&str]) -> Option<RunnerReading> {
    let ran = lines.iter().any(|l| {
        l.strip_prefix("Ran ")
            .and_then(|r| r.split_once(" in "))
            .is_some_and(|(n, _)| n.ends_with(" tests") || n.ends_with(" test"))
    });
    if !ran {
        return None;
    }
    let reports_failure = lines.iter().any(|l| l.starts_with("FAILED ("));
    let failed = lines
        .iter()
        .filter_map(|line| {
            let rest = ["FAIL: ", "ERROR: ", "UNEXPECTED SUCCESS: "]
                .iter()
                .find_map(|p| line.strip_prefix(p))?;
            unittest_name(rest).map(|name| FailedTest::new("", name))
        })
        .collect();
    Some(RunnerReading {
        failed,
        reports_failure,
        stopped_early: false,
    })
}

/// `test_sub (test_calc.TestCalc.test_sub) (n=0)` → `test_calc.TestCalc.test_sub (n=0)`;
/// the pre-3.11 form `test_add (test_calc.TestCalc)` → `test_calc.TestCalc.test_add`.
fn unittest_name(header: &str) -> Option<String> {
    let (method, rest) = header.split_once(" (")?;
    let (id, after) = rest.split_once(')')?;
    let full = if id == method || id.ends_with(&format!(".{method}")) {
        id.to_string()
    } else {
        format!("{id}.{method}")
    };
    let subtest = after.trim();
    Some(if subtest.is_empty() {
        full
    } else {
        format!("{full} {subtest}")
    })
}

/// go test: `--- FAIL: TestX (…)` (indented for subtests) named per package by the following
/// `FAIL\tpkg\t…` line; `FAIL\tpkg [build failed]`.
fn go_test(lines: &[&str]) -> Option<RunnerReading> {
    let mut seen = false;
    let mut reports_failure = false;
    let mut pending: Vec<String> = Vec::new();
    let mut failed = Vec::new();
    for line in lines {
        let trimmed = line.trim_start();
        if let Some(rest) = trimmed.strip_prefix("--- FAIL: ") {
            seen = true;
            reports_failure = true;
            let name = rest.split(" (").next().unwrap_or(rest).trim();
            pending.push(name.to_string());
        } else if let Some((status, package, detail)) = go_package_line(line) {
            seen = true;
            if status == "FAIL" {
                reports_failure = true;
                for name in pending.drain(..) {
                    failed.push(FailedTest::new(package, name));
                }
                if detail.starts_with('[') {
                    // `[build failed]`, `[setup failed]`: the package's tests did not run.
                    failed.push(FailedTest::new(package, detail));
                }
            }
            pending.clear();
        } else if trimmed.starts_with("--- PASS: ") || trimmed.starts_with("--- SKIP: ") {
            seen = true;
        }
    }
    failed.extend(pending.into_iter().map(|n| FailedTest::new("", n)));
    seen.then_some(RunnerReading {
        failed,
        reports_failure,
        stopped_early: false,
    })
}

/// `ok  \tpkg\t0.01s`, `FAIL\tpkg\t0.01s`, `FAIL\tpkg [build failed]` → (status, package,
/// detail). `?   \tpkg\t[no test files]` is not a result.
fn go_package_line(line: &str) -> Option<(&str, &str, &str)> {
    let (status, rest) = line.split_once('\t').or_else(|| {
        let (s, r) = line.split_once(' ')?;
        Some((s, r.trim_start()))
    })?;
    let status = status.trim_end();
    if status != "ok" && status != "FAIL" {
        return None;
    }
    let (package, detail) = rest
        .split_once('\t')
        .or_else(|| rest.split_once(' '))
        .unwrap_or((rest, ""));
    let detail = detail.trim();
    let timing = detail.ends_with('s') && detail[..detail.len() - 1].parse::<f64>().is_ok();
    let known =
        timing || detail == "[build failed]" || detail == "[setup failed]" || detail == "(cached)";
    (known && !package.is_empty() && !package.contains(' ')).then_some((status, package, detail))
}

/// Jest: `FAIL file` headers, `● title` failure headers (else `✕ title` lines), `Tests:` line.
fn jest(lines: &[&str]) -> Option<RunnerReading> {
    let summary = lines
        .iter()
        .find_map(|l| l.strip_prefix("Tests:").map(str::trim))?;
    let reports_failure = summary.contains("failed");
    let mut file = String::new();
    let mut bullets: Vec<FailedTest> = Vec::new();
    let mut crosses: Vec<FailedTest> = Vec::new();
    for line in lines {
        if let Some(f) = line.strip_prefix("FAIL ") {
            file = f.trim().to_string();
        } else if line.starts_with("PASS ") {
            file.clear();
        } else if let Some(title) = line.trim_start().strip_prefix("● ") {
            if file.is_empty() {
                continue;
            }
            let title = title.trim();
            let name = if title == "Test suite failed to run" {
                "(test suite failed to run)"
            } else {
                title
            };
            bullets.push(FailedTest::new(&file, name));
        } else if let Some(title) = line.trim_start().strip_prefix("✕ ") {
            crosses.push(FailedTest::new(&file, strip_duration(title)));
        }
    }
    let files_with_bullets: BTreeSet<String> = bullets.iter().map(|t| t.group.clone()).collect();
    crosses.retain(|t| !files_with_bullets.contains(&t.group));
    bullets.extend(crosses);
    Some(RunnerReading {
        failed: bullets,
        reports_failure,
        stopped_early: false,
    })
}

/// Vitest: `FAIL  file > suite > test` headers (`FAIL  file [ file ]` for a failed suite),
/// else `×` lines; `Test Files` / `Tests` summary lines.
fn vitest(lines: &[&str]) -> Option<RunnerReading> {
    let summary = lines
        .iter()
        .find_map(|l| l.trim_start().strip_prefix("Test Files "))?;
    let reports_failure = summary.contains("failed")
        || lines.iter().any(|l| {
            l.trim_start()
                .strip_prefix("Tests ")
                .is_some_and(|t| t.contains("failed"))
        });
    let mut failed = Vec::new();
    for line in lines {
        let Some(rest) = line.trim_start().strip_prefix("FAIL ") else {
            continue;
        };
        let rest = rest.trim();
        if let Some((file, test)) = rest.split_once(" > ") {
            failed.push(FailedTest::new(file.trim(), test.trim()));
        } else {
            let file = rest.split(" [").next().unwrap_or(rest).trim();
            failed.push(FailedTest::new(file, "(test file failed to run)"));
        }
    }
    if failed.is_empty() {
        failed = lines
            .iter()
            .filter_map(|l| l.trim_start().strip_prefix("× "))
            .map(|t| FailedTest::new("", strip_duration(t)))
            .collect();
    }
    Some(RunnerReading {
        failed,
        reports_failure,
        stopped_early: false,
    })
}

/// `adds 1 + 2 (3 ms)` / `adds 5ms` → `adds 1 + 2` / `adds`.
fn strip_duration(title: &str) -> String {
    let title = title.trim();
    if let Some((name, last)) = title.rsplit_once(" (")
        && last.ends_with("ms)")
    {
        return name.trim().to_string();
    }
    if let Some((name, last)) = title.rsplit_once(' ')
        && last
            .strip_suffix("ms")
            .is_some_and(|n| n.parse::<u64>().is_ok())
    {
        return name.trim().to_string();
    }
    title.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(name: &str) -> String {
        let path = format!("{}/tests/data/verify/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    fn names(report: &FailureReport) -> Vec<String> {
        report
            .failed
            .iter()
            .map(|t| {
                if t.group.is_empty() {
                    t.name.clone()
                } else {
                    format!("{} :: {}", t.group, t.name)
                }
            })
            .collect()
    }

    /// Parses the sample `file` and checks its runner and the names of its failed tests.
    fn parsed(file: &str, runner: TestRunner, failed: &[&str]) -> FailureReport {
        let r = parse_failures(&sample(file)).unwrap_or_else(|| panic!("{file}: not parsed"));
        assert_eq!(r.runners, [runner], "{file}");
        assert_eq!(names(&r), failed, "{file}");
        r
    }

    #[test]
    fn cargo_no_fail_fast_lists_every_binary() {
        let r = parsed(
            "cargo-no-fail-fast.txt",
            TestRunner::Libtest,
            &[
                "doc-tests calc :: src/lib.rs - add (line 3)",
                "src/lib.rs (calc) :: tests::legacy_parse",
                "src/lib.rs (calc) :: tests::panics_loudly",
                "tests/api.rs (api) :: api_roundtrip",
                "tests/api.rs (api) :: nested::adds",
            ],
        );
        assert!(r.is_complete());
    }

    #[test]
    fn cargo_fail_fast_is_marked_stopped_early() {
        let r = parsed(
            "cargo-fail-fast.txt",
            TestRunner::Libtest,
            &[
                "src/lib.rs (calc) :: tests::legacy_parse",
                "src/lib.rs (calc) :: tests::panics_loudly",
            ],
        );
        assert!(r.stopped_early);
        let one = parse_failures(&sample("cargo-one-target.txt")).unwrap();
        assert!(!one.stopped_early, "`1 target failed` lists all targets");
    }

    #[test]
    fn cargo_pass_and_compile_error() {
        parsed("cargo-pass.txt", TestRunner::Libtest, &[]);
        assert_eq!(parse_failures(&sample("cargo-compile-error.txt")), None);
    }

    #[test]
    fn unittest_failures_errors_subtests_and_import_errors() {
        for file in ["unittest-fail.txt", "unittest-verbose.txt"] {
            parsed(
                file,
                TestRunner::Unittest,
                &[
                    "test_calc.TestCalc.test_legacy",
                    "test_calc.TestCalc.test_negative",
                    "test_calc.TestCalc.test_sub (n=0)",
                    "test_calc.TestCalc.test_sub (n=2)",
                    "unittest.loader._FailedTest.test_report",
                ],
            );
        }
        parsed("unittest-pass.txt", TestRunner::Unittest, &[]);
    }

    #[test]
    fn unittest_before_3_11_names_the_class_only() {
        let out = "F\n======================================================================\n\
                   FAIL: test_add (test_calc.TestCalc)\n\
                   ----------------------------------------------------------------------\n\
                   Traceback (most recent call last):\nAssertionError: 1 != 2\n\n\
                   ----------------------------------------------------------------------\n\
                   Ran 1 test in 0.000s\n\nFAILED (failures=1)\n";
        let r = parse_failures(out).unwrap();
        assert_eq!(names(&r), ["test_calc.TestCalc.test_add"]);
    }

    #[test]
    fn pytest_short_summary() {
        for file in ["pytest-q-fail.txt", "pytest-default-fail.txt"] {
            let r = parsed(
                file,
                TestRunner::Pytest,
                &[
                    "test_p.py::TestCalc::test_method",
                    "test_p.py::test_legacy",
                    "test_p.py::test_param[2-2]",
                    "test_p.py::test_uses_fixture",
                ],
            );
            assert!(r.is_complete(), "{file}");
        }
        let r = parsed(
            "pytest-collection-error.txt",
            TestRunner::Pytest,
            &["test_report.py"],
        );
        assert!(r.stopped_early);
        parsed("pytest-q-pass.txt", TestRunner::Pytest, &[]);
    }

    #[test]
    fn pytest_without_a_short_summary_is_unparsed() {
        let out =
            "F.\n=== FAILURES ===\n___ test_x ___\nE assert 1 == 2\n1 failed, 1 passed in 0.02s\n";
        assert_eq!(parse_failures(out), None);
    }

    #[test]
    fn go_test_tests_subtests_and_build_failures_per_package() {
        parsed(
            "go-fail.txt",
            TestRunner::GoTest,
            &[
                "example.com/calc :: TestAdd",
                "example.com/calc :: TestTable",
                "example.com/calc :: TestTable/negative_numbers",
                "example.com/calc/broken :: [build failed]",
            ],
        );
        parsed("go-pass.txt", TestRunner::GoTest, &[]);
    }

    #[test]
    fn jest_bullets_suites_and_single_file_crosses() {
        parsed(
            "jest-fail.txt",
            TestRunner::Jest,
            &[
                "src/broken.test.js :: (test suite failed to run)",
                "src/sum.test.js :: sum › adds 1 + 2 to equal 3",
                "src/sum.test.js :: sum › nested › negative numbers",
                "src/sum.test.js :: top level legacy",
            ],
        );
        let r = parse_failures(&sample("jest-single-file.txt")).unwrap();
        assert_eq!(r.failed.len(), 3, "{:?}", names(&r));
        parsed("jest-pass.txt", TestRunner::Jest, &[]);
    }

    #[test]
    fn vitest_fail_headers_and_failed_suites() {
        parsed(
            "vitest-fail.txt",
            TestRunner::Vitest,
            &[
                "src/broken.test.js :: (test file failed to run)",
                "src/sum.test.js :: sum > adds 1 + 2 to equal 3",
                "src/sum.test.js :: sum > nested > negative numbers",
                "src/sum.test.js :: top level legacy",
            ],
        );
        parsed("vitest-pass.txt", TestRunner::Vitest, &[]);
    }

    #[test]
    fn a_vitest_header_at_column_0_is_not_a_go_package_line() {
        let out = "FAIL  src/a.test.js [ src/a.test.js ]\n Test Files  1 failed (1)\n";
        let r = parse_failures(out).unwrap();
        assert_eq!(r.runners, [TestRunner::Vitest]);
    }

    #[test]
    fn unknown_output_is_unparsed() {
        assert_eq!(parse_failures("make: *** [test] Error 1\n"), None);
        assert_eq!(parse_failures(""), None);
    }

    #[test]
    fn ansi_sequences_are_removed() {
        assert_eq!(
            strip_ansi("\u{1b}[41m\u{1b}[1m FAIL \u{1b}[22m\u{1b}[49m x"),
            " FAIL  x"
        );
        assert_eq!(strip_ansi("a\u{1b}]8;;http://x\u{7}b"), "ab");
    }
}
