//! The figures every benchmark report prints: medians, milliseconds, the load average. `std`
//! only, so that the worktrees crate's benchmark includes it too (`#[path]`).
#![allow(dead_code, reason = "each benchmark uses a part of this module")]

use std::time::Duration;

/// The median of `values` (the upper middle one for an even count).
pub fn median<T: Copy + PartialOrd>(mut values: Vec<T>) -> T {
    values.sort_by(|a, b| a.partial_cmp(b).expect("comparable figures"));
    values[values.len() / 2]
}

/// `d` in milliseconds.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The 1, 5 and 15 minute load averages, or `unknown`.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// Prints, after `label`, a swarm's worker phase and whole process (`measured`) against their
/// ideals as ratios, with the target of the worker phase's ratio.
pub fn print_against_ideal(
    label: &str,
    measured: (Duration, Duration),
    ideal: (Duration, Duration),
    target: f64,
) {
    let ratio = |d: Duration, ideal: Duration| d.as_secs_f64() / ideal.as_secs_f64();
    println!(
        "  {label}worker phase {:>7.1} ms = {:.3}x ideal {:.0} ms (target <= {target:.2}x); \
         whole process {:>7.1} ms = {:.3}x ideal {:.0} ms",
        ms(measured.0),
        ratio(measured.0, ideal.0),
        ms(ideal.0),
        ms(measured.1),
        ratio(measured.1, ideal.1),
        ms(ideal.1),
    );
}

/// A warning to print before the figures when the temp dir (where the benchmarks build their
/// repositories, worktrees and clones; `TMPDIR`) is on an ext4 file system mounted without a
/// journal; `None` on any other file system or when it cannot be told. Without a journal,
/// ext4 does not reuse an inode deleted in the last 60–300 s (`recently_deleted` in
/// `fs/ext4/ialloc.c`, checked only when `s_journal` is `NULL`): for minutes after a run that
/// deleted thousands of files (another benchmark, the test suite) every file creation reads
/// inode-table blocks one by one, and the figures below read high. Read from
/// `/proc/self/mountinfo` (proc(5)) and `/sys/fs/ext4/<device>/journal_task`.
pub fn journal_less_temp_dir() -> Option<String> {
    let temp = std::env::temp_dir().canonicalize().ok()?;
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let (_, fs_type, source) = mounts
        .lines()
        .filter_map(mount_of_line)
        .filter(|(point, _, _)| temp.starts_with(point))
        .max_by_key(|(point, _, _)| point.components().count())?;
    let device = std::path::Path::new(source).file_name()?.to_str()?;
    let journal = std::fs::read_to_string(format!("/sys/fs/ext4/{device}/journal_task")).ok()?;
    (fs_type == "ext4" && journal.trim() == "<none>").then(|| {
        format!(
            "note: the temp dir {} is on ext4 without a journal ({source}): for 60-300 s after \
             many files are deleted (another benchmark, a test run) file creation is slow and \
             these figures read high; wait a few minutes, or set TMPDIR to a journaled file system",
            temp.display()
        )
    })
}

/// The mount point, file system type and source of one `/proc/self/mountinfo` line:
/// `id parent major:minor root mount-point options [optional fields] - type source options`.
fn mount_of_line(line: &str) -> Option<(std::path::PathBuf, &str, &str)> {
    let (before, after) = line.split_once(" - ")?;
    let point = before.split(' ').nth(4)?;
    let mut after = after.split(' ');
    let fs_type = after.next()?;
    let source = after.next()?;
    Some((point.into(), fs_type, source))
}
