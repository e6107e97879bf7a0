//! Comparing a candidate's verification run with the base commit's ([`compare`]): failures
//! that already exist at the base are *pre-existing* — reported by name, never blamed on a
//! worker, never a reason to refuse a merge.

use super::failures::FailedTest;
use super::run::{ExitReason, VerifyOutcome, VerifyRun};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// How two runs were compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "by")]
pub enum Comparison {
    /// By failed-test names. `complete` is false when either run stopped early or had its
    /// output cut, so a failure may be missing from a list.
    ByName {
        /// Both lists are complete.
        complete: bool,
    },
    /// By exit status: a run's output named no tests (unknown runner, build error, crash).
    ByExitStatus,
}

/// What the base commit's run did, for messages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "base")]
pub enum BaseState {
    /// Exit status 0.
    Passed,
    /// Failed with this exit code or signal.
    Failed {
        /// Exit code or signal.
        exit: ExitReason,
    },
    /// No usable baseline (not run, timed out, cancelled or could not start).
    NotRun,
}

/// What is new in a red candidate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum NewFailure {
    /// Tests that fail in the candidate and not at the base.
    Tests {
        /// Their names.
        names: Vec<FailedTest>,
    },
    /// No names to compare, and the exit status differs from the base's.
    ExitStatusChanged {
        /// The base's result.
        base: BaseState,
        /// The candidate's exit.
        candidate: ExitReason,
    },
    /// The candidate ran into the time limit (the base did not).
    TimedOut {
        /// The limit, in seconds.
        after_s: u64,
    },
    /// The command could not start in the candidate although it did at the base (e.g. the
    /// change removed the test script).
    CouldNotStart {
        /// Why.
        reason: String,
    },
}

/// The verdict on a candidate (a worker's worktree or a merge candidate).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "verdict")]
pub enum Verdict {
    /// Exit status 0.
    Green,
    /// It fails, but only with failures the base has too: never blamed, never blocks.
    PreExistingOnly {
        /// The failures (empty when compared by exit status).
        failures: Vec<FailedTest>,
        /// How it was compared.
        comparison: Comparison,
    },
    /// It fails in a way the base does not.
    NewFailures {
        /// What is new.
        new: NewFailure,
        /// Failures the base has too (compared by name only).
        pre_existing: Vec<FailedTest>,
        /// How it was compared.
        comparison: Comparison,
    },
    /// Nothing can be said: the candidate run was cancelled, or the command could start
    /// neither at the base nor in the candidate.
    Inconclusive {
        /// Why.
        reason: String,
    },
}

/// Judges `candidate` against `base` (the base commit's run; `None` when there is none):
///
/// - the candidate exited 0 → [`Verdict::Green`];
/// - cancelled → [`Verdict::Inconclusive`]; could not start → [`NewFailure::CouldNotStart`]
///   unless the base could not start either (then inconclusive);
/// - timed out → pre-existing when the base timed out too, else [`NewFailure::TimedOut`];
/// - failed, and both runs name their failed tests (the candidate at least one) → by name:
///   failures missing at the base are [`NewFailure::Tests`], the rest are pre-existing;
/// - failed otherwise → by exit status: the same exit code or signal as a failing base is
///   pre-existing, anything else is [`NewFailure::ExitStatusChanged`].
pub fn compare(base: Option<&VerifyRun>, candidate: &VerifyRun) -> Verdict {
    let base_state = base.map_or(BaseState::NotRun, base_state);
    match &candidate.outcome {
        VerifyOutcome::Passed => Verdict::Green,
        VerifyOutcome::Cancelled => Verdict::Inconclusive {
            reason: "the verification run was cancelled".into(),
        },
        VerifyOutcome::CouldNotStart { reason } => {
            if base.is_some_and(|b| matches!(b.outcome, VerifyOutcome::CouldNotStart { .. })) {
                Verdict::Inconclusive {
                    reason: format!("the command cannot start here nor at the base: {reason}"),
                }
            } else {
                new_failure(NewFailure::CouldNotStart {
                    reason: reason.clone(),
                })
            }
        }
        VerifyOutcome::TimedOut { after_s } => {
            if base.is_some_and(|b| matches!(b.outcome, VerifyOutcome::TimedOut { .. })) {
                Verdict::PreExistingOnly {
                    failures: Vec::new(),
                    comparison: Comparison::ByExitStatus,
                }
            } else {
                new_failure(NewFailure::TimedOut { after_s: *after_s })
            }
        }
        VerifyOutcome::Failed { exit } => match by_name(base, candidate) {
            Some(verdict) => verdict,
            None => by_exit_status(base_state, *exit),
        },
    }
}

fn new_failure(new: NewFailure) -> Verdict {
    Verdict::NewFailures {
        new,
        pre_existing: Vec::new(),
        comparison: Comparison::ByExitStatus,
    }
}

fn base_state(base: &VerifyRun) -> BaseState {
    match &base.outcome {
        VerifyOutcome::Passed => BaseState::Passed,
        VerifyOutcome::Failed { exit } => BaseState::Failed { exit: *exit },
        _ => BaseState::NotRun,
    }
}

/// The by-name verdict of a failed candidate, when the candidate names failures and the base
/// either passed or names its own.
fn by_name(base: Option<&VerifyRun>, candidate: &VerifyRun) -> Option<Verdict> {
    let cand = candidate.failures.as_ref()?;
    if cand.failed.is_empty() {
        return None;
    }
    let (base_names, base_complete) = match base.map(|b| (&b.outcome, &b.failures)) {
        Some((VerifyOutcome::Passed, _)) => (BTreeSet::new(), true),
        Some((VerifyOutcome::Failed { .. }, Some(report))) if !report.failed.is_empty() => {
            (report.failed.clone(), report.is_complete())
        }
        Some((VerifyOutcome::Failed { .. }, _)) => return None,
        // No usable baseline: every named failure is new.
        _ => (BTreeSet::new(), true),
    };
    let comparison = Comparison::ByName {
        complete: base_complete && cand.is_complete(),
    };
    let (old, new): (Vec<FailedTest>, Vec<FailedTest>) = cand
        .failed
        .iter()
        .cloned()
        .partition(|t| base_names.contains(t));
    Some(if new.is_empty() {
        Verdict::PreExistingOnly {
            failures: old,
            comparison,
        }
    } else {
        Verdict::NewFailures {
            new: NewFailure::Tests { names: new },
            pre_existing: old,
            comparison,
        }
    })
}

fn by_exit_status(base: BaseState, candidate: ExitReason) -> Verdict {
    match base {
        BaseState::Failed { exit } if exit == candidate => Verdict::PreExistingOnly {
            failures: Vec::new(),
            comparison: Comparison::ByExitStatus,
        },
        base => new_failure(NewFailure::ExitStatusChanged { base, candidate }),
    }
}

/// Longest list of names in a one-line rendering, in characters (then `…`).
const NAMES_LINE_CHARS: usize = 120;

/// `a, b, c` within 120 characters, then `, …`.
pub fn list_names(names: &[FailedTest]) -> String {
    let mut out = String::new();
    for (i, name) in names.iter().enumerate() {
        let piece = name.to_string();
        if i > 0 && out.chars().count() + piece.chars().count() + 2 > NAMES_LINE_CHARS {
            out.push_str(", …");
            break;
        }
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(&piece);
    }
    out
}

fn plural(n: usize, one: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {one}s")
    }
}

impl Verdict {
    /// True when the candidate must not advance the integration branch as verified: new
    /// failures, or an inconclusive run.
    pub fn blocks_merge(&self) -> bool {
        matches!(
            self,
            Verdict::NewFailures { .. } | Verdict::Inconclusive { .. }
        )
    }

    /// The failures the candidate shares with the base.
    pub fn pre_existing(&self) -> &[FailedTest] {
        match self {
            Verdict::PreExistingOnly { failures, .. } => failures,
            Verdict::NewFailures { pre_existing, .. } => pre_existing,
            _ => &[],
        }
    }

    /// One line for people, e.g. `cargo test passed (2 failures already at the base:
    /// test_legacy, test_old)`, `python3 -m unittest failed: 1 new failure:
    /// test_report.TestReport.test_total`, `make test timed out after 600 s`.
    pub fn render(&self, command: &str) -> String {
        let mut line = match self {
            Verdict::Green => format!("{command} passed"),
            Verdict::PreExistingOnly { failures, .. } if failures.is_empty() => {
                format!("{command} passed (it fails at the base too, with the same exit status)")
            }
            Verdict::PreExistingOnly { failures, .. } => format!(
                "{command} passed ({} already at the base: {})",
                plural(failures.len(), "failure"),
                list_names(failures)
            ),
            Verdict::NewFailures {
                new, pre_existing, ..
            } => {
                let mut line = render_new(command, new);
                if !pre_existing.is_empty() {
                    line.push_str(&format!(
                        " ({} already at the base: {})",
                        plural(pre_existing.len(), "failure"),
                        list_names(pre_existing)
                    ));
                }
                line
            }
            Verdict::Inconclusive { reason } => format!("{command} was not verified: {reason}"),
        };
        match self {
            Verdict::PreExistingOnly { comparison, .. }
            | Verdict::NewFailures { comparison, .. }
                if *comparison == (Comparison::ByName { complete: false }) =>
            {
                line.push_str(
                    " [a run stopped early or its output was cut: names were compared on what \
                     it printed]",
                );
            }
            _ => {}
        }
        line
    }
}

fn render_new(command: &str, new: &NewFailure) -> String {
    match new {
        NewFailure::Tests { names } => format!(
            "{command} failed: {}: {}",
            plural(names.len(), "new failure"),
            list_names(names)
        ),
        NewFailure::ExitStatusChanged { base, candidate } => {
            let base = match base {
                BaseState::Passed => "the base passes".to_string(),
                BaseState::Failed { exit } => format!("the base: {exit}"),
                BaseState::NotRun => "no baseline to compare with".to_string(),
            };
            format!("{command} failed: {candidate} ({base})")
        }
        NewFailure::TimedOut { after_s } => format!(
            "{command} timed out after {after_s} s (the command and every process it started \
             were killed)"
        ),
        NewFailure::CouldNotStart { reason } => {
            format!("{command} could not start: {reason}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::failures::parse_failures;

    fn run(outcome: VerifyOutcome, output: &str) -> VerifyRun {
        VerifyRun {
            command: "python3 -m unittest".into(),
            outcome,
            duration_ms: 10,
            output: output.into(),
            failures: parse_failures(output),
        }
    }

    fn failed(code: i32, output: &str) -> VerifyRun {
        run(
            VerifyOutcome::Failed {
                exit: ExitReason::Code(code),
            },
            output,
        )
    }

    fn unittest_output(failing: &[&str]) -> String {
        let mut out = String::new();
        for name in failing {
            out.push_str(&format!(
                "======================================================================\n\
                 FAIL: {name} (test_calc.TestCalc.{name})\n\
                 ----------------------------------------------------------------------\n\
                 AssertionError: 1 != 2\n\n"
            ));
        }
        out.push_str("----------------------------------------------------------------------\nRan 5 tests in 0.001s\n\n");
        if failing.is_empty() {
            out.push_str("OK\n");
        } else {
            out.push_str(&format!("FAILED (failures={})\n", failing.len()));
        }
        out
    }

    #[test]
    fn green_and_pre_existing_by_name() {
        let base = failed(1, &unittest_output(&["test_legacy", "test_old"]));
        let ok = run(VerifyOutcome::Passed, &unittest_output(&[]));
        assert_eq!(compare(Some(&base), &ok), Verdict::Green);
        let same = failed(1, &unittest_output(&["test_legacy", "test_old"]));
        let v = compare(Some(&base), &same);
        assert!(!v.blocks_merge());
        assert_eq!(
            v.render("python3 -m unittest"),
            "python3 -m unittest passed (2 failures already at the base: \
             test_calc.TestCalc.test_legacy, test_calc.TestCalc.test_old)"
        );
        let fewer = failed(1, &unittest_output(&["test_old"]));
        assert!(matches!(
            compare(Some(&base), &fewer),
            Verdict::PreExistingOnly { ref failures, comparison: Comparison::ByName { complete: true } }
                if failures.len() == 1
        ));
    }

    #[test]
    fn new_failures_by_name_keep_the_pre_existing_apart() {
        let base = failed(1, &unittest_output(&["test_legacy"]));
        let cand = failed(1, &unittest_output(&["test_legacy", "test_total"]));
        let v = compare(Some(&base), &cand);
        assert!(v.blocks_merge());
        assert_eq!(v.pre_existing().len(), 1);
        assert_eq!(
            v.render("python3 -m unittest"),
            "python3 -m unittest failed: 1 new failure: test_calc.TestCalc.test_total \
             (1 failure already at the base: test_calc.TestCalc.test_legacy)"
        );
        let green_base = run(VerifyOutcome::Passed, &unittest_output(&[]));
        let v = compare(Some(&green_base), &cand);
        assert!(
            matches!(v, Verdict::NewFailures { new: NewFailure::Tests { ref names }, .. } if names.len() == 2)
        );
        let v = compare(None, &cand);
        assert!(
            matches!(v, Verdict::NewFailures { new: NewFailure::Tests { ref names }, .. } if names.len() == 2)
        );
    }

    #[test]
    fn unparsed_output_is_compared_by_exit_status() {
        let base = failed(2, "make: *** [test] Error 2\n");
        let same = failed(2, "make: *** [test] Error 2\n");
        let v = compare(Some(&base), &same);
        assert_eq!(
            v,
            Verdict::PreExistingOnly {
                failures: vec![],
                comparison: Comparison::ByExitStatus
            }
        );
        assert!(!v.blocks_merge());
        let other = failed(1, "boom\n");
        assert_eq!(
            compare(Some(&base), &other).render("make test"),
            "make test failed: exit status 1 (the base: exit status 2)"
        );
        let green = run(VerifyOutcome::Passed, "");
        assert_eq!(
            compare(Some(&green), &other).render("make test"),
            "make test failed: exit status 1 (the base passes)"
        );
        // Named at the base but not in the candidate (e.g. a compile error): exit status.
        let named_base = failed(1, &unittest_output(&["test_legacy"]));
        let v = compare(
            Some(&named_base),
            &failed(1, "SyntaxError: invalid syntax\n"),
        );
        assert_eq!(
            v,
            Verdict::PreExistingOnly {
                failures: vec![],
                comparison: Comparison::ByExitStatus
            }
        );
    }

    #[test]
    fn timeouts_cancellation_and_start_failures() {
        let timed_out = run(VerifyOutcome::TimedOut { after_s: 600 }, "");
        let green = run(VerifyOutcome::Passed, "");
        let v = compare(Some(&green), &timed_out);
        assert!(v.blocks_merge());
        assert_eq!(
            v.render("cargo test"),
            "cargo test timed out after 600 s (the command and every process it started were killed)"
        );
        assert!(!compare(Some(&timed_out), &timed_out).blocks_merge());
        let cancelled = run(VerifyOutcome::Cancelled, "");
        assert!(matches!(
            compare(Some(&green), &cancelled),
            Verdict::Inconclusive { .. }
        ));
        let cannot = run(
            VerifyOutcome::CouldNotStart {
                reason: "npm is not on PATH".into(),
            },
            "",
        );
        assert!(matches!(
            compare(Some(&green), &cannot),
            Verdict::NewFailures {
                new: NewFailure::CouldNotStart { .. },
                ..
            }
        ));
        assert!(matches!(
            compare(Some(&cannot), &cannot),
            Verdict::Inconclusive { .. }
        ));
    }

    #[test]
    fn incomplete_runs_say_so_and_long_lists_are_cut() {
        let names: Vec<String> = (0..30).map(|i| format!("test_number_{i:02}")).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let base = failed(1, &unittest_output(&refs));
        let mut cand = failed(1, &unittest_output(&refs));
        cand.failures.as_mut().unwrap().output_cut = true;
        let line = compare(Some(&base), &cand).render("python3 -m unittest");
        assert!(
            line.starts_with("python3 -m unittest passed (30 failures already at the base: "),
            "{line}"
        );
        assert!(line.contains(", …)"), "{line}");
        assert!(
            line.ends_with("names were compared on what it printed]"),
            "{line}"
        );
        assert!(line.chars().count() < 330, "{line}");
    }

    #[test]
    fn verdicts_serialise_with_tags() {
        let base = failed(1, &unittest_output(&["test_legacy"]));
        let cand = failed(1, &unittest_output(&["test_legacy", "test_total"]));
        let v = compare(Some(&base), &cand);
        let json = serde_json::to_value(&v).unwrap();
        assert_eq!(json["verdict"], "new_failures");
        assert_eq!(json["new"]["kind"], "tests");
        assert_eq!(json["comparison"]["by"], "by_name");
        let back: Verdict = serde_json::from_value(json).unwrap();
        assert_eq!(back, v);
    }
}
