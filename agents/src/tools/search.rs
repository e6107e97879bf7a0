//! Search tools (stub; being written).
use super::files::stub_tool;
use super::*;
stub_tool!(Glob, "glob", ToolKind::Read);
stub_tool!(Grep, "grep", ToolKind::Read);
