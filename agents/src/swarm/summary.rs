//! The summary printed at the end of a run (and kept in `run.json`): the coordinator's
//! synthesis, per worker what happened with its own summary and verification, the fixers and
//! mergers, what is left undone, exactly what to run next, and — always the last two lines —
//! the verification of the integration branch and the result with its reason.

use super::state::{HelperRecord, HelperRole, RunRecord, RunStatus, WorkerRecord, WorkerStatus};
use crate::permissions::PermissionMode;
use crate::tools::ToolKind;
use crate::verify::{OffReason, VerifyChoice};
use std::fmt::Write;

/// Lines of a failing verification's output shown per worker in the summary (the record keeps
/// more, `swarm status` shows the same).
const OUTPUT_LINES_SHOWN: usize = 12;

/// Refused calls listed per worker in the summary.
const DENIED_SHOWN: usize = 5;

/// The summary: counts and tokens, why the run stopped, one block per worker, then what to run
/// next (permissions, conflicts, resume, review, logs and cleanup).
pub fn final_summary(record: &RunRecord) -> String {
    let mut s = String::new();
    counts_line(&mut s, record);
    if let Some(e) = &record.error {
        let _ = writeln!(s, "Stopped: {e}");
    }
    if let Some(text) = &record.synthesis {
        let _ = writeln!(
            s,
            "\nSummary (coordinator):\n{}\n",
            indent(text.trim(), "  ")
        );
    }
    for w in &record.workers {
        worker_lines(&mut s, record, w);
    }
    for h in &record.helpers {
        helper_lines(&mut s, h);
    }
    baseline_lines(&mut s, record);
    undone_lines(&mut s, record);
    next_steps(&mut s, record);
    if !record.flaky_verifications.is_empty() {
        let _ = writeln!(
            s,
            "flaky verification (failed on a batch, passed on retry): {}",
            record.flaky_verifications.join(", ")
        );
    }
    let _ = writeln!(s, "{}", verification_line(record));
    let _ = write!(s, "{}", result_line(record));
    s
}

/// The verification of the integration branch, one line: `integration branch verified:
/// python3 -m unittest passed (1 failure already at the base: test_legacy)`, `integration
/// branch NOT verified: …`, `verification off (--no-verify)`, ….
pub fn verification_line(record: &RunRecord) -> String {
    let command = match &record.verify {
        None => return "verification off (not configured for this run)".into(),
        Some(VerifyChoice::Off {
            reason: OffReason::NoVerifyFlag,
        }) => return "verification off (--no-verify)".into(),
        Some(VerifyChoice::Off {
            reason: OffReason::NothingDetected,
        }) => {
            return "verification off: no test command found (pass --verify \"<command>\" or set [swarm] verify)".into();
        }
        Some(VerifyChoice::On { command, .. }) => command,
    };
    match &record.final_verdict {
        Some(v) if !v.blocks_merge() => {
            format!("integration branch verified: {}", v.render(command))
        }
        Some(v) => format!("integration branch NOT verified: {}", v.render(command)),
        None => format!("integration branch not verified with `{command}`: nothing was merged"),
    }
}

/// The last line: `Result: success — …` or `Result: FAILED — <reason>` (exit status 1), or the
/// cancel reason.
pub fn result_line(record: &RunRecord) -> String {
    match (record.status, record.failure_reason()) {
        (_, None) => "Result: success — every subtask merged into the integration branch.".into(),
        (RunStatus::Cancelled, Some(reason)) => {
            format!(
                "Result: cancelled — {reason}; resume with `ahelper swarm resume {}`.",
                record.run_id
            )
        }
        (_, Some(reason)) if record.workers.iter().any(super::resume::is_retryable) => format!(
            "Result: FAILED — {reason}; resume with `ahelper swarm resume {}`.",
            record.run_id
        ),
        (_, Some(reason)) => format!("Result: FAILED — {reason}."),
    }
}

fn indent(text: &str, prefix: &str) -> String {
    text.lines()
        .map(|l| format!("{prefix}{l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn helper_lines(s: &mut String, h: &HelperRecord) {
    let role = match h.role {
        HelperRole::Fixer => "fixer",
        HelperRole::Merger => "merger",
    };
    let outcome = if h.merged {
        "its result merged"
    } else {
        "not merged"
    };
    let _ = writeln!(
        s,
        "  {} {role} for {} — {outcome} (branch {})",
        h.id, h.worker, h.branch
    );
    if !h.summary.trim().is_empty() {
        let _ = writeln!(s, "{}", indent(h.summary.trim(), "      "));
    }
    if let Some(v) = &h.verification {
        let _ = writeln!(s, "      verification: {v}");
    }
}

fn baseline_lines(s: &mut String, record: &RunRecord) {
    if let Some(base) = record.baseline.as_ref().filter(|b| !b.passed()) {
        let _ = writeln!(s, "{}", baseline_line(base));
    }
}

/// One line on the baseline run: `baseline: `python3 -m unittest` passes at the base commit
/// (0.4 s)`, `baseline: … fails at the base commit: 1 failure (test_legacy) — pre-existing,
/// never blamed on a worker`, or why it did not run to the end.
pub fn baseline_line(base: &crate::verify::VerifyRun) -> String {
    use crate::verify::VerifyOutcome;
    let command = &base.command;
    let secs = base.duration_ms as f64 / 1000.0;
    match &base.outcome {
        VerifyOutcome::Passed => {
            format!("baseline: `{command}` passes at the base commit ({secs:.1} s)")
        }
        VerifyOutcome::Failed { exit } => {
            match base.failures.as_ref().filter(|f| !f.failed.is_empty()) {
                Some(report) => {
                    let names: Vec<String> =
                        report.failed.iter().map(ToString::to_string).collect();
                    format!(
                        "baseline: `{command}` fails at the base commit: {} failure(s) ({}) — pre-existing, never blamed on a worker",
                        names.len(),
                        crate::verify::baseline::list_names(
                            &report.failed.iter().cloned().collect::<Vec<_>>()
                        )
                    )
                }
                None => format!(
                    "baseline: `{command}` fails at the base commit ({exit}) — merges are judged by their exit status against it"
                ),
            }
        }
        VerifyOutcome::TimedOut { after_s } => {
            format!("baseline: `{command}` timed out at the base commit after {after_s} s")
        }
        VerifyOutcome::CouldNotStart { reason } => {
            format!("baseline: `{command}` could not start at the base commit: {reason}")
        }
        VerifyOutcome::Cancelled => format!("baseline: `{command}` was cancelled"),
    }
}

fn undone_lines(s: &mut String, record: &RunRecord) {
    let undone: Vec<String> = record
        .workers
        .iter()
        .filter(|w| !matches!(w.status, WorkerStatus::Merged | WorkerStatus::NoChanges))
        .map(|w| {
            format!(
                "{} `{}` ({}, branch {})",
                w.id,
                w.title,
                w.status.label(),
                w.branch
            )
        })
        .collect();
    if !undone.is_empty() {
        let _ = writeln!(s, "Left undone: {}", undone.join("; "));
    }
}

/// The hazards of the workers merged into the integration branch, with the worker's id: what
/// `--apply` would bring into the user's branch.
pub fn merged_hazards(record: &RunRecord) -> Vec<(&str, &ahelper_worktrees::Hazard)> {
    record
        .workers
        .iter()
        .filter(|w| w.status == WorkerStatus::Merged)
        .flat_map(|w| {
            let hazards = w.report.as_ref().map_or(&[][..], |r| r.hazards.as_slice());
            hazards.iter().map(|h| (w.id.as_str(), h))
        })
        .collect()
}

/// The first 12 hex digits of a commit id.
pub fn short_commit(id: &str) -> &str {
    &id[..id.len().min(12)]
}

/// What `swarm resume` would run again, and the exact command: the failed workers by name
/// (their work so far is on their branches), and how to retry only them or one of them.
fn resume_lines(s: &mut String, record: &RunRecord) {
    let run_id = &record.run_id;
    if !record.workers.iter().any(super::resume::is_retryable) {
        return;
    }
    let failed: Vec<&WorkerRecord> = record
        .workers
        .iter()
        .filter(|w| w.status == WorkerStatus::Failed)
        .collect();
    if let Some(first) = failed.first() {
        let named: Vec<String> = failed
            .iter()
            .map(|w| format!("{} (branch {})", w.id, w.branch))
            .collect();
        let _ = writeln!(
            s,
            "Failed workers: {}. Their work so far is kept on their branches; `swarm resume` retries them from there.",
            named.join(", ")
        );
        let _ = writeln!(
            s,
            "Retry only them: ahelper swarm resume {run_id} --only-failed   one of them: ahelper swarm resume {run_id} --worker {}",
            first.id
        );
    }
    let _ = writeln!(s, "Resume with: ahelper swarm resume {run_id}");
}

/// The run's totals: how many subtasks ended each way ("verify failed" only when some did),
/// and — when a run stopped with workers still queued, running, or committed and waiting for
/// the merge queue — how many are in none of those (so the counts add up to the subtasks).
fn counts_line(s: &mut String, record: &RunRecord) {
    let count = |st: WorkerStatus| record.workers.iter().filter(|w| w.status == st).count();
    let pending = record
        .workers
        .iter()
        .filter(|w| !w.status.is_terminal() && w.status != WorkerStatus::Cancelled)
        .count();
    let mut rest = String::new();
    if count(WorkerStatus::VerifyFailed) > 0 {
        rest.push_str(&format!(
            ", {} verify failed",
            count(WorkerStatus::VerifyFailed)
        ));
    }
    if pending > 0 {
        rest.push_str(&format!(", {pending} not merged yet"));
    }
    let _ = writeln!(
        s,
        "Run {} {} — {} merged, {} conflict, {} failed, {} cancelled, {} no changes, {} skipped{rest} of {} subtasks; {} tokens in{} / {} out.",
        record.run_id,
        record.status.as_str(),
        count(WorkerStatus::Merged),
        count(WorkerStatus::Conflict),
        count(WorkerStatus::Failed),
        count(WorkerStatus::Cancelled),
        count(WorkerStatus::NoChanges),
        count(WorkerStatus::Skipped),
        record.workers.len(),
        record.usage.input_tokens,
        cache_note(record.usage),
        record.usage.output_tokens,
    );
}

/// ` (R from the prompt cache, W written to it)` when the provider reported cache use.
fn cache_note(usage: crate::model::Usage) -> String {
    if usage.cache_read_tokens == 0 && usage.cache_write_tokens == 0 {
        return String::new();
    }
    format!(
        " ({} from the prompt cache, {} written to it)",
        usage.cache_read_tokens, usage.cache_write_tokens
    )
}

fn worker_lines(s: &mut String, record: &RunRecord, w: &WorkerRecord) {
    let report = w.report.as_ref();
    let files = report.map_or(0, |r| r.files_changed.len());
    let (ins, del) = report.map_or((0, 0), |r| (r.insertions, r.deletions));
    let _ = writeln!(
        s,
        "  {} {:<11} {} — {files} files, +{ins} -{del}",
        w.id,
        w.status.label(),
        w.title
    );
    if let Some(summary) = report.map(|r| r.summary.trim()).filter(|t| !t.is_empty()) {
        let _ = writeln!(s, "{}", indent(summary, "      "));
    }
    if let Some(v) = &w.verification {
        let _ = writeln!(s, "      verification: {v}");
    }
    if let Some(output) = &w.verify_output {
        let lines: Vec<&str> = output.lines().collect();
        let from = lines.len().saturating_sub(OUTPUT_LINES_SHOWN);
        let _ = writeln!(
            s,
            "      failing output (last {} lines; all in run.json):\n{}",
            lines.len() - from,
            indent(&lines[from..].join("\n"), "        ")
        );
    }
    if let Some(err) = report.and_then(|r| r.error.as_ref()) {
        let _ = writeln!(s, "      error: {err}");
    }
    if let Some(line) = out_of_scope_line(record, w) {
        let _ = writeln!(s, "      {line}");
    }
    for hazard in report.map_or(&[][..], |r| r.hazards.as_slice()) {
        let _ = writeln!(s, "      hazard: {hazard}");
    }
    if !w.denied.is_empty() {
        let shown: Vec<&str> = w
            .denied
            .iter()
            .take(DENIED_SHOWN)
            .map(String::as_str)
            .collect();
        let more = if w.denied.len() > DENIED_SHOWN {
            "; …"
        } else {
            ""
        };
        let _ = writeln!(
            s,
            "      {} tool call(s) refused by permissions: {}{more}",
            w.denied.len(),
            shown.join("; "),
        );
    }
}

/// `edited outside its scope (a.txt): other.txt, Makefile` when its branch changes files
/// outside the subtask's declared scope; `None` otherwise.
pub fn out_of_scope_line(record: &RunRecord, w: &WorkerRecord) -> Option<String> {
    let outside = &w.report.as_ref()?.out_of_scope;
    if outside.is_empty() {
        return None;
    }
    let scope = record
        .plan
        .as_ref()
        .and_then(|p| p.subtasks.iter().find(|s| s.id == w.subtask_id))
        .map(|s| format!(" ({})", s.scope.join(", ")))
        .unwrap_or_default();
    Some(format!(
        "edited outside its scope{scope}: {}",
        outside.join(", ")
    ))
}

/// The advice after refused calls: the exact allow rules that would let them run (as
/// `--allowedTools` flags and as config), the wider permission mode that would (never the run's
/// own), and how many calls no allow rule would let run.
fn refused_advice(record: &RunRecord) -> Option<String> {
    if record.workers.iter().all(|w| w.denied.is_empty()) {
        return None;
    }
    let mut rules: Vec<&str> = Vec::new();
    for rule in record.workers.iter().flat_map(|w| &w.allow_rules) {
        if !rules.contains(&rule.as_str()) {
            rules.push(rule);
        }
    }
    let mode = record.permission_mode.unwrap_or_default();
    let mut advice = String::from("Refused calls:");
    if !rules.is_empty() {
        let flags: Vec<String> = rules
            .iter()
            .map(|r| format!("--allowedTools '{r}'"))
            .collect();
        let config: Vec<String> = rules.iter().map(|r| format!("{r:?}")).collect();
        let _ = write!(
            advice,
            " to let them run, start the swarm again with {}, or add `allow = [{}]` under \
             [permissions] in .ahelper/config.toml",
            flags.join(" "),
            config.join(", ")
        );
        if let Some(wider) = wider_mode(&rules, mode) {
            let _ = write!(
                advice,
                ", or use --permission-mode {} (this run used {})",
                mode_name(wider),
                mode_name(mode)
            );
        }
        if record.headless {
            advice.push_str("; or run in a terminal to answer the questions");
        }
        advice.push('.');
    }
    let for_good: usize = record.workers.iter().map(|w| w.refused_for_good).sum();
    if for_good > 0 {
        let _ = write!(
            advice,
            " {for_good} call(s) were refused by a deny rule, a protected path, the permission \
             mode {} or a hook; no allow rule lets them run.",
            mode_name(mode)
        );
    }
    Some(advice)
}

/// The permission mode that would allow every call `rules` name, when it is wider than `mode`.
fn wider_mode(rules: &[&str], mode: PermissionMode) -> Option<PermissionMode> {
    let tools = crate::tools::ToolRegistry::standard();
    let kind = |rule: &&str| {
        let name = rule.split('(').next().unwrap_or(rule);
        tools.get(name).map(|t| t.kind())
    };
    let kinds: Vec<Option<ToolKind>> = rules.iter().map(kind).collect();
    if kinds.iter().any(|k| *k != Some(ToolKind::Edit)) {
        (mode != PermissionMode::Bypass).then_some(PermissionMode::Bypass)
    } else {
        matches!(mode, PermissionMode::Default).then_some(PermissionMode::AcceptEdits)
    }
}

/// `--permission-mode`'s name of `mode`.
fn mode_name(mode: PermissionMode) -> &'static str {
    match mode {
        PermissionMode::Default => "default",
        PermissionMode::AcceptEdits => "accept-edits",
        PermissionMode::Plan => "plan",
        PermissionMode::Bypass => "bypass",
    }
}

fn next_steps(s: &mut String, record: &RunRecord) {
    let any = |f: &dyn Fn(&WorkerRecord) -> bool| record.workers.iter().any(f);
    if let Some(advice) = refused_advice(record) {
        let _ = writeln!(s, "{advice}");
    }
    let integration = &record.integration_branch;
    let base = short_commit(&record.base_commit);
    let _ = writeln!(s, "Integration branch: {integration} (base {base}).");
    for w in record
        .workers
        .iter()
        .filter(|w| w.status == WorkerStatus::Conflict)
    {
        let files: Vec<&str> = w.conflicts.iter().map(|c| c.path.as_str()).collect();
        let _ = writeln!(
            s,
            "Conflict: {} ({}) conflicts in {}. Both branches are kept. To resolve:\n  git checkout {integration} && git merge {}\n  # fix the files, then: git add -A && git commit",
            w.id,
            w.branch,
            files.join(", "),
            w.branch
        );
    }
    let hazards = merged_hazards(record).len();
    if hazards > 0 {
        let _ = writeln!(
            s,
            "Hazards: {hazards} flagged above in merged work; review them before merging \
             {integration} (`--apply` asks first, or needs --allow-hazards without a terminal)."
        );
    }
    let run_id = &record.run_id;
    resume_lines(s, record);
    if any(&|w| w.status == WorkerStatus::Merged) {
        let _ = writeln!(
            s,
            "Review with: git diff {base}...{integration}   Apply with: git merge {integration}"
        );
    }
    let _ = writeln!(
        s,
        "Logs: ahelper swarm logs {run_id} [worker]   Clean up: ahelper swarm clean {run_id}"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::swarm::state::RunStatus;
    use std::path::PathBuf;

    /// A run stopped while its committed workers waited for the merge queue: the totals count
    /// them (they were in no bucket: "0 … of 3 subtasks"), and a worker whose merge failed
    /// verification as ended, not as waiting.
    #[test]
    fn the_totals_count_workers_that_did_not_end() {
        let mut record = RunRecord::new("r1".into(), PathBuf::from("/r"), RunStatus::Cancelled);
        for (i, status) in [
            WorkerStatus::Finished,
            WorkerStatus::Verifying,
            WorkerStatus::Merged,
            WorkerStatus::VerifyFailed,
        ]
        .into_iter()
        .enumerate()
        {
            let mut w = WorkerRecord::queued(
                format!("w{i}"),
                format!("s{i}"),
                "t".into(),
                "b".into(),
                PathBuf::new(),
            );
            w.status = status;
            record.workers.push(w);
        }
        let mut s = String::new();
        counts_line(&mut s, &record);
        assert!(
            s.contains("1 merged, 0 conflict, 0 failed, 0 cancelled, 0 no changes, 0 skipped, 1 verify failed, 2 not merged yet of 4 subtasks"),
            "{s}"
        );
        record.workers.truncate(0);
        let mut s = String::new();
        counts_line(&mut s, &record);
        assert!(s.contains("0 skipped of 0 subtasks"), "{s}");
    }
}
