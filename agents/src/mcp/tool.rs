//! An MCP server's tool as one of the agent's tools: `mcp__<server>__<tool>`, the server's
//! JSON Schema as input schema, the `tools/call` result as the tool result.
//!
//! Permissions: every MCP tool is [`ToolKind::Execute`] — it asks unless a rule allows it
//! (`mcp__github__*`, `mcp__everything__echo`) and plan mode refuses it — whatever its
//! `readOnlyHint`: annotations are hints from the server, and the MCP specification says
//! clients must not make tool use decisions on them for untrusted servers.

use super::hub::{Connection, ToolSummary};
use crate::tools::{Tool, ToolContext, ToolError, ToolKind, ToolOutput};
use rmcp::model::CallToolRequestParams;
use serde_json::Value;
use std::sync::Arc;

/// Longest tool name offered to the model (the providers' limit).
const MAX_TOOL_NAME_CHARS: usize = 64;

/// `mcp__<server>__<tool>`, each part reduced to letters, digits, `_` and `-` (other
/// characters become `_`), cut to 64 characters.
pub fn qualified_name(server: &str, tool: &str) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    let name = format!("mcp__{}__{}", clean(server), clean(tool));
    name.chars().take(MAX_TOOL_NAME_CHARS).collect()
}

/// One tool of a connected server.
pub struct McpTool {
    name: String,
    server_tool: String,
    description: String,
    schema: Value,
    read_only_hint: bool,
    connection: Arc<Connection>,
}

impl McpTool {
    /// The tool `listed` of `connection`'s server, offered as `name`.
    pub fn new(name: String, listed: &rmcp::model::Tool, connection: Arc<Connection>) -> Self {
        let description = listed
            .description
            .as_deref()
            .filter(|d| !d.trim().is_empty())
            .map(str::to_string)
            .unwrap_or_else(|| {
                format!(
                    "Tool `{}` of MCP server `{}`.",
                    listed.name, connection.server
                )
            });
        McpTool {
            name,
            server_tool: listed.name.to_string(),
            description,
            schema: Value::Object((*listed.input_schema).clone()),
            read_only_hint: listed
                .annotations
                .as_ref()
                .and_then(|a| a.read_only_hint)
                .unwrap_or(false),
            connection,
        }
    }

    /// What `/mcp` lists.
    pub fn summary(&self) -> ToolSummary {
        ToolSummary {
            name: self.name.clone(),
            server_tool: self.server_tool.clone(),
            read_only_hint: self.read_only_hint,
        }
    }
}

#[async_trait::async_trait]
impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn input_schema(&self) -> Value {
        self.schema.clone()
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Execute
    }

    fn permission_subject(&self, _input: &Value) -> Option<String> {
        None
    }

    fn is_available(&self) -> bool {
        !self.connection.is_closed()
    }

    async fn call(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        if self.connection.is_closed() {
            return Err(ToolError::new(self.connection.stopped_message()));
        }
        let mut params = CallToolRequestParams::new(self.server_tool.clone());
        match input {
            Value::Object(map) => params = params.with_arguments(map),
            Value::Null => {}
            other => {
                return Err(ToolError::new(format!(
                    "arguments of `{}` must be a JSON object, got {other}",
                    self.name
                )));
            }
        }
        let call = tokio::time::timeout(
            self.connection.tool_timeout,
            self.connection.peer.call_tool(params),
        );
        let result = tokio::select! {
            r = call => r.map_err(|_| ToolError::new(format!(
                "MCP server `{}` did not answer the call of `{}` within {} s (its entry's \
                 `tool_timeout_s`)",
                self.connection.server,
                self.server_tool,
                self.connection.tool_timeout.as_secs()
            )))?,
            () = ctx.cancel.cancelled() => {
                return Err(ToolError::new("Cancelled."));
            }
        };
        match result {
            Ok(result) => Ok(ToolOutput {
                content: render_result(&result),
                is_error: result.is_error.unwrap_or(false),
                usage: crate::model::Usage::default(),
            }),
            Err(_) if self.connection.is_closed() => {
                Err(ToolError::new(self.connection.stopped_message()))
            }
            Err(e) => Err(ToolError::new(format!(
                "MCP server `{}` failed the call of `{}`: {e}",
                self.connection.server, self.server_tool
            ))),
        }
    }
}

/// The text the model reads for a `tools/call` result: text blocks as they are, images and
/// audio as a note (`[image: image/png, 1234 bytes]`), embedded text resources as their text,
/// other resources by URI, then the structured content as JSON unless a text block already is
/// that JSON.
pub fn render_result(result: &rmcp::model::CallToolResult) -> String {
    let mut parts: Vec<String> = result
        .content
        .iter()
        .filter_map(|block| serde_json::to_value(block).ok())
        .map(|block| render_block(&block))
        .collect();
    if let Some(structured) = &result.structured_content {
        let already = parts
            .iter()
            .any(|p| serde_json::from_str::<Value>(p).is_ok_and(|v| v == *structured));
        if !already {
            parts.push(format!("structured content: {structured}"));
        }
    }
    parts.join("\n")
}

/// One content block (as JSON, `type`-tagged as in the MCP schema).
fn render_block(block: &Value) -> String {
    let field = |k: &str| block.get(k).and_then(Value::as_str).unwrap_or_default();
    match field("type") {
        "text" => field("text").to_string(),
        kind @ ("image" | "audio") => format!(
            "[{kind}: {}, {} bytes]",
            field("mimeType"),
            base64_decoded_len(field("data"))
        ),
        "resource" => {
            let resource = block.get("resource").cloned().unwrap_or_default();
            let uri = resource.get("uri").and_then(Value::as_str).unwrap_or("?");
            match resource.get("text").and_then(Value::as_str) {
                Some(text) => format!("[resource {uri}]\n{text}"),
                None => format!("[resource: {uri}]"),
            }
        }
        "resource_link" => format!("[resource link: {}]", field("uri")),
        other => format!("[{other} content]"),
    }
}

/// Bytes encoded by a base64 string (without decoding it).
fn base64_decoded_len(data: &str) -> usize {
    let data = data.trim_end();
    let padding = data.chars().rev().take_while(|c| *c == '=').count();
    (data.len() / 4) * 3
        + match data.len() % 4 {
            2 => 1,
            3 => 2,
            _ => 0,
        }
        - padding.min((data.len() / 4) * 3)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_are_sanitised_and_capped() {
        assert_eq!(
            qualified_name("everything", "echo"),
            "mcp__everything__echo"
        );
        assert_eq!(
            qualified_name("my.server", "get sum"),
            "mcp__my_server__get_sum"
        );
        assert_eq!(qualified_name("s", &"x".repeat(100)).len(), 64);
    }

    #[test]
    fn results_render_text_images_and_structured_content() {
        let result: rmcp::model::CallToolResult = serde_json::from_value(json!({
            "content": [
                {"type": "text", "text": "Echo: hi"},
                {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"},
                {"type": "resource_link", "uri": "test://r/1", "name": "r1"}
            ],
            "structuredContent": {"sum": 3},
            "isError": false
        }))
        .unwrap();
        let text = render_result(&result);
        assert_eq!(
            text,
            "Echo: hi\n[image: image/png, 5 bytes]\n[resource link: test://r/1]\nstructured content: {\"sum\":3}"
        );
        let result: rmcp::model::CallToolResult = serde_json::from_value(json!({
            "content": [{"type": "text", "text": "{\"sum\":3}"}],
            "structuredContent": {"sum": 3}
        }))
        .unwrap();
        assert_eq!(render_result(&result), "{\"sum\":3}");
    }
}
