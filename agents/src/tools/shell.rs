//! Shell tool (stub; being written).
use super::files::stub_tool;
use super::*;
stub_tool!(RunCommand, "run_command", ToolKind::Execute);
