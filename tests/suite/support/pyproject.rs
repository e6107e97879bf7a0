//! A tiny Python project for the verification end-to-end tests: `calc.py` with `add` and
//! `test_calc.py` with unittest tests, committed on `main` of a temporary git repository, and
//! the fake-model scripts (`tests/data/swarm-*.json`) that play swarm scenarios on it, deciding
//! by what is on disk in each agent's working directory:
//!
//! | script | scenario |
//! |---|---|
//! | `swarm-semantic-conflict` | `rename` (add→plus, with tests) and `report` (calls `calc.add`) are green alone, red merged; the fixer makes report.py call `calc.plus` |
//! | `swarm-semantic-conflict-fixer-fails` | the same, the fixer changes nothing useful: `report` stays unmerged |
//! | `swarm-textual-conflict` | `mul` and `sub` both append to calc.py; the merger writes calc.py with both |
//! | `swarm-failing-at-base` | on [`calc_repo_failing_at_base`]: `stats` adds a module; `test_legacy` is pre-existing |
//! | `swarm-hanging-test` | `slow` adds a test that sleeps an hour (verification times out); `stats` is green |
//! | `swarm-worker-self-fix` | `rename` forgets the tests, then fixes them in its first fix round |
//! | `swarm-worker-self-fix-exhausted` | `rename` forgets the tests and never fixes them |
//!
//! Every script has a `synthesis` conversation matching the synthesis prompt's heading
//! (`ahelper_agents::verify::prompts::SYNTHESIS_HEADING`), a `coordinator` conversation with
//! the plan, one conversation per subtask (matching ahelper's worker prompt `Your subtask
//! `id``) and, where a fixer or merger acts, a conversation chosen by a `when` condition on the
//! merged tree. Fixers and mergers change files with `run_command`, so run-wide file claims do
//! not get in their way. `suite/verify_fixtures.rs` replays every script on these repositories
//! without ahelper's swarm to prove that each scenario does what it says.
#![allow(dead_code)]

use super::{TestRepo, repo_with};
use ahelper_fake_llm::Script;
use std::path::PathBuf;

/// `calc.py` at the base.
pub const CALC: &str = "def add(a, b):\n    return a + b\n";

/// `test_calc.py` at the base: two passing unittest tests.
pub const TEST_CALC: &str = "import unittest\n\nimport calc\n\n\nclass TestCalc(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(calc.add(2, 3), 5)\n\n    def test_add_negative(self):\n        self.assertEqual(calc.add(-1, -1), -2)\n";

/// A test that fails at the base of [`calc_repo_failing_at_base`].
pub const TEST_LEGACY: &str =
    "\n    def test_legacy(self):\n        self.assertEqual(calc.add(2, 2), 5)\n";

/// Its name as `python3 -m unittest` reports it.
pub const TEST_LEGACY_NAME: &str = "test_calc.TestCalc.test_legacy";

/// The verification command of these projects (standard library only).
pub const UNITTEST: &str = "python3 -m unittest";

/// A verification command that never ends (until it is killed at the time limit).
pub const HANGING_VERIFY: &str = "python3 -c 'import time; time.sleep(3600)'";

/// A verification command whose program does not exist.
pub const MISSING_VERIFY: &str = "no-such-test-runner --all";

/// A repository with [`CALC`] and [`TEST_CALC`] committed on `main`; `python3 -m unittest`
/// passes.
pub fn calc_repo() -> TestRepo {
    repo_with(&[("calc.py", CALC), ("test_calc.py", TEST_CALC)])
}

/// Like [`calc_repo`], with [`TEST_LEGACY`] added to `TestCalc`: one test
/// ([`TEST_LEGACY_NAME`]) fails at the base.
pub fn calc_repo_failing_at_base() -> TestRepo {
    let test_calc = format!("{TEST_CALC}{TEST_LEGACY}");
    repo_with(&[("calc.py", CALC), ("test_calc.py", &test_calc)])
}

/// Writes `[swarm] verify`, `verify_timeout_s` (and leaves the other keys) to the repository's
/// `.ahelper/config.toml` (not committed).
pub fn write_verify_config(repo: &TestRepo, command: &str, timeout_s: u64) {
    let command = command.replace('\\', "\\\\").replace('"', "\\\"");
    repo.write(
        ".ahelper/config.toml",
        &format!("[swarm]\nverify = \"{command}\"\nverify_timeout_s = {timeout_s}\n"),
    );
}

/// Path of `tests/data/<name>.json`.
pub fn script_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(format!("{name}.json"))
}

/// The fake-model script `tests/data/<name>.json` (e.g. `swarm-semantic-conflict`).
pub fn script(name: &str) -> Script {
    Script::from_file(script_path(name)).unwrap_or_else(|e| panic!("tests/data/{name}.json: {e}"))
}

/// Every scenario script's name.
pub const SCRIPTS: [&str; 9] = [
    "swarm-batch-semantic-conflict",
    "swarm-batch",
    "swarm-semantic-conflict",
    "swarm-semantic-conflict-fixer-fails",
    "swarm-textual-conflict",
    "swarm-failing-at-base",
    "swarm-hanging-test",
    "swarm-worker-self-fix",
    "swarm-worker-self-fix-exhausted",
];
