//! First prompts of the agents that act on verification results and of the coordinator's
//! closing turn. Every input is bounded: failure output keeps its head and tail
//! ([`MAX_FAILURE_OUTPUT_CHARS`]), summaries keep at most [`MAX_SUMMARY_CHARS`] characters,
//! the synthesis prompt at most [`MAX_SYNTHESIS_PROMPT_CHARS`].
//!
//! | prompt | agent (role) | runs in |
//! |---|---|---|
//! | [`worker_fix_prompt`] | the same worker, one more round | its worktree |
//! | [`fixer_prompt`] | `fixer` | a worktree on `ahelper/<run>/fix-<n>` at the red candidate |
//! | [`merger_prompt`] | `merger` | a worktree with the merge in progress (conflict markers) |
//! | [`synthesis_prompt`] | `coordinator`, no tools | the repository root |

use super::baseline::Verdict;
use super::run::VerifyRun;
use crate::swarm::plan::Plan;
use crate::swarm::state::{ConflictRecord, MAX_REPORT_SUMMARY_CHARS};
use crate::tools::truncate_middle;

/// Largest excerpt of a verification run's output in a prompt, in characters.
pub const MAX_FAILURE_OUTPUT_CHARS: usize = 12_000;
/// Largest summary of one side or one worker in a prompt, in characters.
pub const MAX_SUMMARY_CHARS: usize = MAX_REPORT_SUMMARY_CHARS;
/// Largest synthesis prompt, in characters.
pub const MAX_SYNTHESIS_PROMPT_CHARS: usize = 40_000;
/// Largest task text quoted in the synthesis prompt, in characters.
const MAX_TASK_CHARS: usize = 4_000;
/// Largest diffstat quoted in the synthesis prompt, in characters.
const MAX_DIFFSTAT_CHARS: usize = 4_000;
/// Smallest per-worker summary budget when many workers share the synthesis prompt.
const MIN_WORKER_SUMMARY_CHARS: usize = 200;

/// Marks the first user message of the coordinator's synthesis turn (scripts of the fake
/// model may look for it).
pub const SYNTHESIS_HEADING: &str = "# Swarm run finished: write the summary";

/// One side of a merge: who made it and what they reported.
#[derive(Debug, Clone, Copy)]
pub struct Side<'a> {
    /// E.g. `integration branch ahelper/0190… (merged: w1 rename-add)` or
    /// `w2 add-report: Add report.py (branch ahelper/0190…/w2)`.
    pub label: &'a str,
    /// What that side's agents said they did (the worker's final summary).
    pub summary: &'a str,
}

/// The first `max` characters of `text`, with `…` when cut.
pub fn cut_end(text: &str, max: usize) -> String {
    let text = text.trim();
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// The output of a run for a prompt: head (40 %) and tail (60 %, where test runners put their
/// summaries) within `max_chars`, with a marker where the middle was cut.
pub fn failure_excerpt(output: &str, max_chars: usize) -> String {
    let output = output.trim_end();
    if output.is_empty() {
        return "(no output)".to_string();
    }
    truncate_middle(output, max_chars)
}

fn push_side(out: &mut String, heading: &str, side: &Side<'_>) {
    out.push_str(&format!("\n## {heading}: {}\n", side.label));
    let summary = cut_end(side.summary, MAX_SUMMARY_CHARS);
    if summary.is_empty() {
        out.push_str("(no summary)\n");
    } else {
        out.push_str(&summary);
        out.push('\n');
    }
}

fn push_output(out: &mut String, run: &VerifyRun) {
    out.push_str("\n## Output of the verification command (head and tail)\n```\n");
    out.push_str(&failure_excerpt(&run.output, MAX_FAILURE_OUTPUT_CHARS));
    out.push_str("\n```\n");
}

fn pre_existing_note(out: &mut String, verdict: &Verdict) {
    let old = verdict.pre_existing();
    if !old.is_empty() {
        out.push_str(&format!(
            "\nThese failures exist at the base commit already and are not yours to fix: {}.\n",
            super::baseline::list_names(old)
        ));
    }
}

/// Inputs of [`worker_fix_prompt`].
#[derive(Debug, Clone, Copy)]
pub struct WorkerFixInput<'a> {
    /// The run in the worker's worktree.
    pub run: &'a VerifyRun,
    /// Its verdict against the base.
    pub verdict: &'a Verdict,
    /// This round, from 1.
    pub round: u32,
    /// `[swarm] worker_fix_rounds`.
    pub max_rounds: u32,
}

/// The user message that sends a worker back to work after its verification showed new
/// failures: the verdict line, the output's head and tail, and what to do.
pub fn worker_fix_prompt(input: &WorkerFixInput<'_>) -> String {
    let command = &input.run.command;
    let mut out = format!(
        "# Verification failed (fix round {} of {})\n\nahelper ran `{command}` in your working \
         directory after you finished: {}.\n",
        input.round,
        input.max_rounds,
        input.verdict.render(command)
    );
    pre_existing_note(&mut out, input.verdict);
    push_output(&mut out, input.run);
    out.push_str(&format!(
        "\nFix the new failures within your subtask: read the failing tests and the code they \
         call, change what your subtask broke, and run `{command}` yourself to check. Do not \
         delete or weaken tests to make them pass. Do not commit. When done, reply with a \
         short summary of what you changed.\n"
    ));
    out
}

/// Inputs of [`fixer_prompt`].
#[derive(Debug, Clone, Copy)]
pub struct FixerInput<'a> {
    /// The run on the merge candidate.
    pub run: &'a VerifyRun,
    /// Its verdict against the base.
    pub verdict: &'a Verdict,
    /// The integration branch before this merge (the work merged so far).
    pub integration: Side<'a>,
    /// The branch whose merge made the candidate red.
    pub incoming: Side<'a>,
    /// This attempt, from 1.
    pub attempt: u32,
    /// `[swarm] merge_fix_attempts`.
    pub max_attempts: u32,
}

/// The first user message of a `fixer` agent, whose worktree is checked out at the red merge
/// candidate: what was merged, the verdict, the output's head and tail, both sides' summaries.
pub fn fixer_prompt(input: &FixerInput<'_>) -> String {
    let command = &input.run.command;
    let mut out = format!(
        "# Make the merged code pass verification (attempt {} of {})\n\nYour working directory \
         holds a merge of two lines of work that each passed on their own: the integration \
         branch and `{}`. Together they fail: {}.\n",
        input.attempt,
        input.max_attempts,
        input.incoming.label,
        input.verdict.render(command)
    );
    pre_existing_note(&mut out, input.verdict);
    push_output(&mut out, input.run);
    push_side(&mut out, "Integration branch", &input.integration);
    push_side(&mut out, "Incoming branch", &input.incoming);
    out.push_str(&format!(
        "\nMake `{command}` pass while keeping what BOTH sides intended: usually one side \
         changed something (renamed a function, changed a signature or a file format) that the \
         other side's new code still uses the old way; adapt that code to the change rather than \
         undoing the change. Do not delete or weaken tests. Run `{command}` yourself to check. \
         Do not commit. When done, reply with a short summary of the cause and your fix.\n"
    ));
    out
}

/// Inputs of [`merger_prompt`].
#[derive(Debug, Clone, Copy)]
pub struct MergerInput<'a> {
    /// The conflicted files (paths relative to the repository root).
    pub conflicts: &'a [ConflictRecord],
    /// The integration branch: the `<<<<<<<` ("ours") side of the markers.
    pub integration: Side<'a>,
    /// The branch being merged: the `>>>>>>>` ("theirs") side.
    pub incoming: Side<'a>,
    /// The verification command, when verification is on.
    pub verify_command: Option<&'a str>,
}

/// The first user message of a `merger` agent, whose worktree has the merge in progress with
/// conflict markers in the files: the conflicted paths, which side is which, both summaries.
pub fn merger_prompt(input: &MergerInput<'_>) -> String {
    let mut out = format!(
        "# Resolve a merge conflict\n\nA merge of `{}` into the integration branch is in \
         progress in your working directory. These files contain conflict markers:\n",
        input.incoming.label
    );
    for c in input.conflicts {
        out.push_str(&format!("- {} ({})\n", c.path, c.sides));
    }
    out.push_str(
        "\nIn each conflict, the part between `<<<<<<<` and `=======` is the integration \
         branch's version and the part between `=======` and `>>>>>>>` is the incoming \
         branch's.\n",
    );
    push_side(&mut out, "Integration branch", &input.integration);
    push_side(&mut out, "Incoming branch", &input.incoming);
    out.push_str(
        "\nEdit every listed file so that it keeps the changes of BOTH sides, and remove every \
         marker line (`<<<<<<<`, `=======`, `>>>>>>>`). Then search the files for leftover \
         markers. Leave the tree ready to commit: do not run git commit, git merge --continue \
         or git merge --abort; ahelper commits the merge.",
    );
    if let Some(command) = input.verify_command {
        out.push_str(&format!(
            " Run `{command}` to check the result; ahelper verifies it again before it is \
             merged."
        ));
    }
    out.push_str(" When done, reply with one line per file saying how you resolved it.\n");
    out
}

/// What became of one subtask, for [`synthesis_prompt`].
#[derive(Debug, Clone, Copy)]
pub struct SubtaskOutcome<'a> {
    /// Worker id, e.g. `w1`.
    pub worker_id: &'a str,
    /// Subtask id from the plan.
    pub subtask_id: &'a str,
    /// Subtask title.
    pub title: &'a str,
    /// Final state, e.g. `merged`, `verify failed`, `conflict`, `no changes`, `failed`.
    pub status: &'a str,
    /// The worker's final summary (and a fixer's or merger's, when one acted).
    pub summary: &'a str,
    /// Verification line of its merge, e.g. `python3 -m unittest passed`.
    pub verification: Option<&'a str>,
}

/// Inputs of [`synthesis_prompt`].
#[derive(Debug, Clone, Copy)]
pub struct SynthesisInput<'a> {
    /// The user's task.
    pub task: &'a str,
    /// The plan that was run.
    pub plan: &'a Plan,
    /// Every subtask, in plan order.
    pub subtasks: &'a [SubtaskOutcome<'a>],
    /// The integration branch's final verification, e.g. `integration branch verified: cargo
    /// test passed`, or `verification off (--no-verify)`.
    pub verification: &'a str,
    /// `git diff --stat` of the integration branch against the base.
    pub diffstat: &'a str,
}

/// The coordinator's closing turn (no tools): the plan, each subtask's outcome and summary,
/// the final verification and the diffstat, at most [`MAX_SYNTHESIS_PROMPT_CHARS`] characters
/// (worker summaries are shortened evenly when many share the budget).
pub fn synthesis_prompt(input: &SynthesisInput<'_>) -> String {
    let mut head = format!(
        "{SYNTHESIS_HEADING}\n\nThe workers have finished and their branches went through the \
         merge queue. Write the summary of this run for the user. Plain text, no tool calls, \
         at most about 200 words: what was done (by whom), what the final verification says, \
         and what is left undone or needs the user's attention (unmerged branches, failures). \
         Be exact: do not claim anything the facts below do not show.\n\n## Task\n{}\n\n## Plan\n{}\n",
        cut_end(input.task, MAX_TASK_CHARS),
        cut_end(&input.plan.summary, 1_000)
    );
    head.push_str(&format!(
        "\n## Final verification\n{}\n\n## Changes on the integration branch (diffstat)\n{}\n",
        input.verification,
        if input.diffstat.trim().is_empty() {
            "(no changes)".to_string()
        } else {
            truncate_middle(input.diffstat.trim_end(), MAX_DIFFSTAT_CHARS)
        }
    ));
    head.push_str("\n## Subtasks\n");
    let entries: Vec<(String, &str)> = input
        .subtasks
        .iter()
        .map(|s| {
            let mut line = format!(
                "\n### {} `{}` — {}\nstatus: {}\n",
                s.worker_id, s.subtask_id, s.title, s.status
            );
            if let Some(v) = s.verification {
                line.push_str(&format!("verification: {v}\n"));
            }
            (line, s.summary)
        })
        .collect();
    let fixed: usize = head.chars().count()
        + entries
            .iter()
            .map(|(l, _)| l.chars().count() + 12)
            .sum::<usize>();
    let per_summary = (MAX_SYNTHESIS_PROMPT_CHARS.saturating_sub(fixed))
        .checked_div(entries.len())
        .unwrap_or(MAX_SUMMARY_CHARS)
        .clamp(MIN_WORKER_SUMMARY_CHARS, MAX_SUMMARY_CHARS);
    let mut out = head;
    for (line, summary) in entries {
        out.push_str(&line);
        let summary = cut_end(summary, per_summary);
        out.push_str("summary: ");
        out.push_str(if summary.is_empty() {
            "(none)"
        } else {
            &summary
        });
        out.push('\n');
    }
    truncate_middle(&out, MAX_SYNTHESIS_PROMPT_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::swarm::plan::Subtask;
    use crate::verify::baseline::compare;
    use crate::verify::failures::parse_failures;
    use crate::verify::run::{ExitReason, VerifyOutcome};

    fn unittest_run(failing: &[&str], filler_lines: usize) -> VerifyRun {
        let mut out = String::from("HEAD-MARKER\n");
        for i in 0..filler_lines {
            out.push_str(&format!("noise line {i}\n"));
        }
        for name in failing {
            out.push_str(&format!(
                "======================================================================\n\
                 ERROR: {name} (test_report.TestReport.{name})\n\
                 ----------------------------------------------------------------------\n\
                 AttributeError: module 'calc' has no attribute 'add'\n\n"
            ));
        }
        out.push_str("Ran 4 tests in 0.002s\n\nFAILED (errors=1)\nTAIL-MARKER\n");
        VerifyRun {
            command: "python3 -m unittest".into(),
            outcome: VerifyOutcome::Failed {
                exit: ExitReason::Code(1),
            },
            duration_ms: 5,
            failures: parse_failures(&out),
            output: out,
        }
    }

    fn green_base() -> VerifyRun {
        VerifyRun {
            command: "python3 -m unittest".into(),
            outcome: VerifyOutcome::Passed,
            duration_ms: 5,
            output: "Ran 3 tests in 0.001s\n\nOK\n".into(),
            failures: None,
        }
    }

    #[test]
    fn fixer_prompt_has_verdict_output_head_and_tail_and_both_summaries() {
        let run = unittest_run(&["test_total"], 20_000);
        let verdict = compare(Some(&green_base()), &run);
        let long_summary = "renamed calc.add to calc.plus. ".repeat(200);
        let prompt = fixer_prompt(&FixerInput {
            run: &run,
            verdict: &verdict,
            integration: Side {
                label: "integration branch (merged: w1 rename-add)",
                summary: &long_summary,
            },
            incoming: Side {
                label: "w2 add-report",
                summary: "Added report.py calling calc.add, with tests.",
            },
            attempt: 1,
            max_attempts: 2,
        });
        assert!(prompt.contains("attempt 1 of 2"));
        assert!(prompt.contains(
            "python3 -m unittest failed: 1 new failure: test_report.TestReport.test_total"
        ));
        assert!(prompt.contains("HEAD-MARKER") && prompt.contains("TAIL-MARKER"));
        assert!(prompt.contains("has no attribute 'add'"));
        assert!(prompt.contains("characters cut from the middle"));
        assert!(prompt.contains("Added report.py calling calc.add"));
        assert!(prompt.contains("renamed calc.add to calc.plus"));
        let bound = MAX_FAILURE_OUTPUT_CHARS + 2 * MAX_SUMMARY_CHARS + 3_000;
        assert!(prompt.chars().count() < bound, "{}", prompt.chars().count());
    }

    #[test]
    fn worker_fix_prompt_names_the_round_and_the_pre_existing_failures() {
        let base = unittest_run(&["test_legacy"], 0);
        let run = unittest_run(&["test_legacy", "test_total"], 0);
        let verdict = compare(Some(&base), &run);
        let prompt = worker_fix_prompt(&WorkerFixInput {
            run: &run,
            verdict: &verdict,
            round: 2,
            max_rounds: 2,
        });
        assert!(prompt.contains("fix round 2 of 2"));
        assert!(prompt.contains("1 new failure: test_report.TestReport.test_total"));
        assert!(prompt.contains(
            "exist at the base commit already and are not yours to fix: \
             test_report.TestReport.test_legacy"
        ));
    }

    #[test]
    fn merger_prompt_lists_conflicts_sides_and_rules() {
        let conflicts = [ConflictRecord {
            path: "calc.py".into(),
            sides: "both modified".into(),
        }];
        let prompt = merger_prompt(&MergerInput {
            conflicts: &conflicts,
            integration: Side {
                label: "integration branch",
                summary: "Added mul to calc.py.",
            },
            incoming: Side {
                label: "w2 add-sub",
                summary: "Added sub to calc.py.",
            },
            verify_command: Some("python3 -m unittest"),
        });
        assert!(prompt.contains("- calc.py (both modified)"));
        assert!(prompt.contains("Added mul") && prompt.contains("Added sub"));
        assert!(prompt.contains("remove every marker line"));
        assert!(prompt.contains("do not run git commit"));
        assert!(prompt.contains("Run `python3 -m unittest`"));
    }

    #[test]
    fn synthesis_prompt_is_bounded_and_keeps_every_subtask() {
        let plan = Plan {
            summary: "Split by file.".into(),
            subtasks: (0..40)
                .map(|i| Subtask {
                    id: format!("s{i}"),
                    title: format!("Subtask {i}"),
                    instructions: "x".into(),
                    scope: vec![format!("f{i}.py")],
                    depends_on: vec![],
                })
                .collect(),
        };
        let summaries: Vec<String> = (0..40)
            .map(|i| format!("W{i}-START {}", "detail ".repeat(600)))
            .collect();
        let ids: Vec<String> = (0..40).map(|i| format!("w{}", i + 1)).collect();
        let outcomes: Vec<SubtaskOutcome<'_>> = plan
            .subtasks
            .iter()
            .enumerate()
            .map(|(i, s)| SubtaskOutcome {
                worker_id: &ids[i],
                subtask_id: &s.id,
                title: &s.title,
                status: if i == 3 { "verify failed" } else { "merged" },
                summary: &summaries[i],
                verification: Some("python3 -m unittest passed"),
            })
            .collect();
        let diffstat = " f0.py | 2 +-\n".repeat(2_000) + " 40 files changed, 80 insertions(+)\n";
        let prompt = synthesis_prompt(&SynthesisInput {
            task: "Do the thing.",
            plan: &plan,
            subtasks: &outcomes,
            verification: "integration branch verified: python3 -m unittest passed",
            diffstat: &diffstat,
        });
        assert!(prompt.starts_with(SYNTHESIS_HEADING));
        assert!(prompt.chars().count() <= MAX_SYNTHESIS_PROMPT_CHARS + 100);
        for i in 0..40 {
            assert!(prompt.contains(&format!("W{i}-START")), "w{i} missing");
        }
        assert!(prompt.contains("status: verify failed"));
        assert!(prompt.contains("40 files changed"));
        assert!(prompt.contains("integration branch verified"));

        let few = &outcomes[..2];
        let prompt = synthesis_prompt(&SynthesisInput {
            task: "Do the thing.",
            plan: &plan,
            subtasks: few,
            verification: "verification off (--no-verify)",
            diffstat: "",
        });
        let kept = prompt.split("summary: ").nth(1).unwrap();
        assert!(
            kept.chars().count() >= MAX_SUMMARY_CHARS - 1,
            "short worker summaries are kept whole up to 2,000 chars"
        );
        assert!(prompt.contains("(no changes)"));
    }
}
