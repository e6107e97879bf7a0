//! Waiting in the end-to-end tests: a condition is checked again and again until it holds, and
//! the test fails, naming what it waited for, when it does not hold in time.

use std::time::{Duration, Instant};

/// Waits up to `timeout` for `condition`, checking it every 100 ms.
#[track_caller]
pub fn wait_for(what: &str, timeout: Duration, condition: impl FnMut() -> bool) {
    wait_for_or_show(what, timeout, condition, String::new);
}

/// Waits up to `timeout` for `condition`, checking it every 100 ms; on timeout the panic shows
/// `context()` (logs, the state it saw).
#[track_caller]
pub fn wait_for_or_show(
    what: &str,
    timeout: Duration,
    condition: impl FnMut() -> bool,
    context: impl Fn() -> String,
) {
    poll_every(
        Duration::from_millis(100),
        what,
        timeout,
        condition,
        context,
    );
}

/// Waits up to `timeout` for `condition`, checking it every `every` (a test that measures how
/// soon something happens checks often); on timeout the panic shows `context()`.
#[track_caller]
pub fn poll_every(
    every: Duration,
    what: &str,
    timeout: Duration,
    mut condition: impl FnMut() -> bool,
    context: impl Fn() -> String,
) {
    let deadline = Instant::now() + timeout;
    while !condition() {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}\n{}",
            context()
        );
        std::thread::sleep(every);
    }
}

/// Waits up to `timeout` (checking every 50 ms) until `found` finds something; returns it.
#[track_caller]
pub fn wait_for_some<T>(what: &str, timeout: Duration, mut found: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = found() {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
