//! One `ahelper` run against a fresh fake model, in one call.

use super::{TestRepo, Wire, ahelper, start};
use ahelper_fake_llm::{FakeLlm, Script};
use assert_cmd::assert::Assert;

/// Starts the fake model playing `script`, runs `ahelper args…` in `repo` against it (Anthropic
/// format) and asserts it succeeds; (the server, for its requests; the assertion, for more
/// checks).
#[track_caller]
pub fn run_ok(repo: &TestRepo, script: Script, args: &[&str]) -> (FakeLlm, Assert) {
    let server = start(script);
    let assert = ahelper(repo, &server, Wire::Anthropic)
        .args(args)
        .assert()
        .success();
    (server, assert)
}

/// [`run_ok`], then the run's stderr as text.
#[track_caller]
pub fn stderr_of_run(repo: &TestRepo, script: Script, args: &[&str]) -> (FakeLlm, String) {
    let (server, assert) = run_ok(repo, script, args);
    let stderr = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    (server, stderr)
}
