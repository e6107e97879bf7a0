//! The summary printed at the end of a run (and kept in `run.json`): per worker what happened,
//! the integration branch, and exactly what to run next.

use super::state::{RunRecord, WorkerRecord, WorkerStatus};
use std::fmt::Write;

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
    for w in &record.workers {
        worker_lines(&mut s, w);
    }
    next_steps(&mut s, record);
    s
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

fn counts_line(s: &mut String, record: &RunRecord) {
    let count = |st: WorkerStatus| record.workers.iter().filter(|w| w.status == st).count();
    let _ = writeln!(
        s,
        "Run {} {} — {} merged, {} conflict, {} failed, {} cancelled, {} no changes, {} skipped of {} subtasks; {} tokens in / {} out.",
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
        record.usage.output_tokens,
    );
}

fn worker_lines(s: &mut String, w: &WorkerRecord) {
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
    if let Some(err) = report.and_then(|r| r.error.as_ref()) {
        let _ = writeln!(s, "      error: {err}");
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

fn next_steps(s: &mut String, record: &RunRecord) {
    let any = |f: &dyn Fn(&WorkerRecord) -> bool| record.workers.iter().any(f);
    if any(&|w| !w.denied.is_empty()) {
        s.push_str(
            "Refused calls: allow what the workers need with rules in .ahelper/config.toml (e.g. `run_command(cargo test:*)`) or --permission-mode accept-edits, or run in a terminal to answer prompts.\n",
        );
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
    if any(&|w| w.status == WorkerStatus::Cancelled || !w.status.is_terminal()) {
        let _ = writeln!(s, "Resume with: ahelper swarm resume {run_id}");
    }
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
