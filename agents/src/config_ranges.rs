//! Range checks of the numeric configuration keys.
//!
//! Each numeric key of a config file has the range its command-line flag accepts (e.g.
//! `swarm.max_workers` and `--max-workers`: at least 1), or a sensible one where there is no
//! flag. A value outside it is an error naming the file, line and key, never a silent clamp:
//! `max_workers = 0` must not quietly mean 1.

use crate::config::{ConfigError, ConfigFile};
use std::path::Path;

/// The allowed values of one numeric key, inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyRange {
    /// Dotted key, e.g. `swarm.max_workers`.
    pub key: &'static str,
    /// Smallest allowed value.
    pub min: u64,
    /// Largest allowed value (`u64::MAX`: no upper bound).
    pub max: u64,
    /// The command-line flag with the same check, when there is one.
    pub flag: Option<&'static str>,
}

impl KeyRange {
    const fn new(key: &'static str, min: u64, max: u64, flag: Option<&'static str>) -> Self {
        KeyRange {
            key,
            min,
            max,
            flag,
        }
    }

    /// `at least 1` / `between 1 and 100`, plus `(as --flag)` when a flag has the same check.
    pub fn describe(&self) -> String {
        let range = if self.max == u64::MAX {
            format!("at least {}", self.min)
        } else {
            format!("between {} and {}", self.min, self.max)
        };
        match self.flag {
            Some(flag) => format!("{range} (as for {flag})"),
            None => range,
        }
    }
}

/// Milliseconds in an hour: the upper bound of the retry delays.
const HOUR_MS: u64 = 3_600_000;

/// Every numeric key with its range, in file order of the README's example.
pub const KEY_RANGES: [KeyRange; 18] = [
    KeyRange::new("max_output_tokens", 16, u64::MAX, None),
    KeyRange::new("context_window", 1_024, u64::MAX, None),
    KeyRange::new("retry.max_attempts", 1, 100, None),
    KeyRange::new("retry.base_delay_ms", 0, HOUR_MS, None),
    KeyRange::new("retry.max_delay_ms", 0, HOUR_MS, None),
    KeyRange::new("retry.idle_timeout_ms", 1, 24 * HOUR_MS, None),
    KeyRange::new("agent.max_turns", 1, u64::MAX, Some("--max-turns")),
    KeyRange::new("agent.repeat_limit", 2, u64::MAX, None),
    KeyRange::new("agent.max_tool_output_chars", 1_000, u64::MAX, None),
    KeyRange::new("agent.file_tool_timeout_s", 1, 3_600, None),
    KeyRange::new("swarm.max_workers", 1, u64::MAX, Some("--max-workers")),
    KeyRange::new("swarm.max_subtasks", 1, 1_000, Some("--max-subtasks")),
    KeyRange::new("swarm.worker_max_turns", 1, u64::MAX, None),
    KeyRange::new("swarm.token_budget", 1, u64::MAX, None),
    KeyRange::new("swarm.time_limit_s", 1, u64::MAX, None),
    KeyRange::new("swarm.max_file_mb", 1, u64::MAX / 1_000_000, None),
    // The PID namespace's pid_max (limit + 302) is at most 4,194,304.
    KeyRange::new(
        "sandbox.max_processes",
        crate::sandbox_os::MIN_MAX_PROCESSES as u64,
        4_194_002,
        None,
    ),
    KeyRange::new("sandbox.max_memory_mb", 0, u64::MAX >> 20, None),
];

/// The value `file` sets for `key` (one of [`KEY_RANGES`]), if any.
fn value_of(file: &ConfigFile, key: &str) -> Option<u64> {
    let as_u64 = |v: Option<usize>| v.map(|v| v as u64);
    match key {
        "max_output_tokens" => file.max_output_tokens.map(u64::from),
        "context_window" => file.context_window.map(u64::from),
        "retry.max_attempts" => file.retry.max_attempts.map(u64::from),
        "retry.base_delay_ms" => file.retry.base_delay_ms,
        "retry.max_delay_ms" => file.retry.max_delay_ms,
        "retry.idle_timeout_ms" => file.retry.idle_timeout_ms,
        "agent.max_turns" => file.agent.max_turns.map(u64::from),
        "agent.repeat_limit" => file.agent.repeat_limit.map(u64::from),
        "agent.max_tool_output_chars" => as_u64(file.agent.max_tool_output_chars),
        "agent.file_tool_timeout_s" => file.agent.file_tool_timeout_s,
        "swarm.max_workers" => as_u64(file.swarm.max_workers),
        "swarm.max_subtasks" => as_u64(file.swarm.max_subtasks),
        "swarm.worker_max_turns" => file.swarm.worker_max_turns.map(u64::from),
        "swarm.token_budget" => file.swarm.token_budget,
        "swarm.time_limit_s" => file.swarm.time_limit_s,
        "swarm.max_file_mb" => file.swarm.max_file_mb,
        "sandbox.max_processes" => file.sandbox.max_processes.map(u64::from),
        "sandbox.max_memory_mb" => file.sandbox.max_memory_mb,
        _ => None,
    }
}

/// Checks every numeric key `file` (parsed from `text`, read from `path`) sets against
/// [`KEY_RANGES`].
///
/// # Errors
/// [`ConfigError::Invalid`] for the first value out of range, with `origin`
/// `<path> line <n>` (1-based line of the value) and a message giving the value and the range.
pub fn check_ranges(file: &ConfigFile, text: &str, path: &Path) -> Result<(), ConfigError> {
    for range in &KEY_RANGES {
        let Some(value) = value_of(file, range.key) else {
            continue;
        };
        if (range.min..=range.max).contains(&value) {
            continue;
        }
        let origin = match line_of(text, range.key) {
            Some(line) => format!("{} line {line}", path.display()),
            None => path.display().to_string(),
        };
        return Err(ConfigError::Invalid {
            key: range.key.to_string(),
            origin,
            message: format!("{value} is out of range; allowed: {}", range.describe()),
        });
    }
    Ok(())
}

/// The 1-based line of the value of dotted `key` in TOML `text`, when it can be located.
fn line_of(text: &str, key: &str) -> Option<usize> {
    let doc = toml_edit::Document::parse(text).ok()?;
    let mut item = doc.as_item();
    for part in key.split('.') {
        item = item.get(part)?;
    }
    let span = item.span()?;
    Some(text.get(..span.start)?.matches('\n').count() + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str) -> Result<(), String> {
        let path = Path::new("/p/.ahelper/config.toml");
        let file = ConfigFile::parse(text, path).map_err(|e| e.to_string())?;
        check_ranges(&file, text, path).map_err(|e| e.to_string())
    }

    #[test]
    fn values_in_range_pass_and_out_of_range_name_file_line_key_and_range() {
        assert_eq!(check("[swarm]\nmax_workers = 1\n"), Ok(()));
        assert_eq!(
            check("model = \"m\"\n\n[swarm]\nmax_workers = 0\n").unwrap_err(),
            "invalid setting `swarm.max_workers` in /p/.ahelper/config.toml line 4: 0 is out of \
             range; allowed: at least 1 (as for --max-workers)"
        );
        let e = check("[retry]\nmax_attempts = 1000\n").unwrap_err();
        assert!(
            e.contains("line 2") && e.contains("between 1 and 100"),
            "{e}"
        );
        let e = check("context_window = 10\n").unwrap_err();
        assert!(
            e.contains("`context_window`") && e.contains("line 1"),
            "{e}"
        );
    }

    #[test]
    fn dotted_and_inline_tables_are_located_too() {
        let e = check("agent.max_turns = 0\n").unwrap_err();
        assert!(e.contains("line 1") && e.contains("--max-turns"), "{e}");
        let e = check("model = \"m\"\nswarm = { max_workers = 0 }\n").unwrap_err();
        assert!(e.contains("line 2"), "{e}");
    }

    #[test]
    fn every_range_key_reads_a_value() {
        let text = "max_output_tokens = 1\ncontext_window = 1\n[retry]\nmax_attempts = 1\n\
                    base_delay_ms = 1\nmax_delay_ms = 1\nidle_timeout_ms = 1\n[agent]\n\
                    max_turns = 1\nrepeat_limit = 1\nmax_tool_output_chars = 1\nfile_tool_timeout_s = 1\n[swarm]\n\
                    max_workers = 1\nmax_subtasks = 1\nworker_max_turns = 1\ntoken_budget = 1\n\
                    time_limit_s = 1\nmax_file_mb = 1\n[sandbox]\nmax_processes = 1\n\
                    max_memory_mb = 1\n";
        let file = ConfigFile::parse(text, Path::new("x")).unwrap();
        for range in &KEY_RANGES {
            assert_eq!(value_of(&file, range.key), Some(1), "{}", range.key);
            assert!(line_of(text, range.key).is_some(), "{}", range.key);
        }
    }
}
