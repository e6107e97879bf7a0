//! Bypasses found by testing: commands that ran a denied program (or wrote a protected file) in
//! bypass mode. Each row of `tests/data/decisions/bypasses.toml` is a real input that used to be
//! allowed; its groups name the tests they came from.

use super::support::permissions::check_table;

/// Shells and interpreters fed a program, opaque code runners, hidden code, protected writes and
/// `/dev/tcp`: every group of `tests/data/decisions/bypasses.toml`.
#[test]
fn decision_table() {
    check_table(include_str!("../data/decisions/bypasses.toml"));
}
