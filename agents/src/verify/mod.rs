//! Verification: running the project's own tests in a worktree and judging the result against
//! the base commit, so that a swarm run ends in a verified integration branch.
//!
//! The building blocks, in the order a run uses them:
//!
//! 1. [`detect::choose_command`] — the command: `--no-verify` > `--verify CMD` >
//!    `[swarm] verify` > [`detect::detect_command`] (`Cargo.toml` → `cargo test
//!    --no-fail-fast`, `package.json` test script → `npm test`, pytest configuration or Python
//!    test files → `python3 -m pytest -q` / `python3 -m unittest`, `go.mod` → `go test ./...`,
//!    a Makefile `test` target → `make test`), with a one-line description for the plan.
//! 2. [`run::precheck`] — before any worker starts: the program exists (through `cd`, `bash -c`
//!    and wrappers), `python -m MODULE` is importable; else
//!    ``verify command `X` cannot start: … (set [swarm] verify or pass --verify)``.
//! 3. [`run::run_verification`] — runs it like `run_command` (own process group, time limit
//!    killing the whole group, output cap keeping head and tail, landlock, no API keys in the
//!    environment) and returns a [`run::VerifyRun`]: outcome (passed, failed with exit code,
//!    timed out, could not start, cancelled), duration, capped output and
//!    [`failures::FailureReport`] (failed-test names of cargo test, pytest, unittest, go test,
//!    jest, vitest).
//! 4. [`baseline::compare`] — the candidate's run against the base commit's: a typed
//!    [`baseline::Verdict`] (`Green`, `PreExistingOnly`, `NewFailures`, `Inconclusive`) with
//!    a one-line rendering such as `cargo test passed (2 failures already at the base:
//!    test_legacy, …)`.
//! 5. [`prompts`] — the first prompts of the agents that act on the result: the worker's
//!    self-fix round, the `fixer` role on a red merge candidate, the `merger` role on a textual
//!    conflict, and the coordinator's synthesis of the run; every input bounded.
//!
//! Nothing here depends on the swarm's actors: the functions take paths, strings and the
//! types above, so the single agent can use them too. That is why the module lives at the
//! crate root rather than under `swarm`.

pub mod baseline;
pub mod detect;
pub mod failures;
pub mod prompts;
pub mod run;

pub use baseline::{Comparison, NewFailure, Verdict, compare};
pub use detect::{
    CommandSource, DetectedCommand, OffReason, VerifyChoice, VerifyFlag, choose_command,
    detect_command,
};
pub use failures::{FailedTest, FailureReport, TestRunner, parse_failures};
pub use run::{
    ExitReason, VerifyError, VerifyOutcome, VerifyRun, VerifySpec, precheck, run_verification,
};
