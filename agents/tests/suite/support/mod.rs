//! Helpers shared by the modules of the suite.

pub mod canned_http;
pub mod model;
pub mod permissions;
pub mod process;
pub mod sse_cases;
pub mod tools;

/// The git CLI helpers of the end-to-end tests (std only).
#[path = "../../../../tests/suite/support/git.rs"]
pub mod git;

/// A real full disk: a tmpfs and a filler (std and `tempfile` only), shared with the
/// end-to-end tests.
#[path = "../../../../tests/suite/support/tmpfs.rs"]
pub mod tmpfs;
