//! Helpers shared by the modules of the suite.

pub mod canned_http;
pub mod model;
pub mod sse_cases;
