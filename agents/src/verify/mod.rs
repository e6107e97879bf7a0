//! Verification: running the project's own tests on a worktree and judging the result.
//!
//! placeholder doc, rewritten below
pub mod failures;
