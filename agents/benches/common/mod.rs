//! What the runtime's benchmarks share: running again without cargo's `LD_LIBRARY_PATH`, the
//! number of runs from the environment, and medians.

use std::time::Duration;

/// `cargo bench` puts every build-script output directory on `LD_LIBRARY_PATH`, which makes
/// each dynamically linked child (bash) probe dozens of paths and inflates every measured
/// command; when it is set, runs this benchmark again without it (as ahelper's commands run)
/// and exits with that run's status.
pub fn rerun_without_cargo_library_path() {
    if std::env::var_os("LD_LIBRARY_PATH").is_some() {
        let status = std::process::Command::new(std::env::current_exe().expect("own path"))
            .env_remove("LD_LIBRARY_PATH")
            .status()
            .expect("re-run the benchmark");
        std::process::exit(status.code().unwrap_or(1));
    }
}

/// How many runs to measure: the number in the environment variable `var`, or 200.
pub fn runs_from(var: &str) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200)
}

/// The median of `samples`, in microseconds.
pub fn median_us(mut samples: Vec<Duration>) -> f64 {
    samples.sort();
    samples[samples.len() / 2].as_secs_f64() * 1e6
}
