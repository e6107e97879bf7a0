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
