//! Assertions on the files a run leaves behind.

use std::path::Path;

/// Asserts that the file at `path` holds exactly `expected`; the failure names the file.
#[track_caller]
pub fn assert_file(path: &Path, expected: &str) {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{} cannot be read: {e}", path.display()));
    assert_eq!(text, expected, "the contents of {}", path.display());
}
