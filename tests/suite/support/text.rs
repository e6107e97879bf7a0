//! Assertions on the text a run printed or sent.

/// Asserts that `text` holds every one of `parts`; a failure names the part it lacks and shows
/// `text`.
#[track_caller]
pub fn assert_contains_all(text: &str, parts: &[&str]) {
    for part in parts {
        assert!(text.contains(part), "no {part:?} in:\n{text}");
    }
}
