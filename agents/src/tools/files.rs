//! File tools (stub; being written).
use super::*;
macro_rules! stub_tool { ($t:ident, $n:literal, $k:expr) => {
    /// Stub.
    pub struct $t;
    #[async_trait::async_trait]
    impl Tool for $t {
        fn name(&self) -> &'static str { $n }
        fn description(&self) -> &'static str { $n }
        fn input_schema(&self) -> Value { serde_json::json!({"type":"object"}) }
        fn kind(&self) -> ToolKind { $k }
        fn permission_subject(&self, _input: &Value) -> Option<String> { None }
        async fn call(&self, _input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> { Err(ToolError::new("stub")) }
    }
}}
pub(crate) use stub_tool;
stub_tool!(ReadFile, "read_file", ToolKind::Read);
stub_tool!(WriteFile, "write_file", ToolKind::Edit);
stub_tool!(EditFile, "edit_file", ToolKind::Edit);
stub_tool!(ListDir, "list_dir", ToolKind::Read);
