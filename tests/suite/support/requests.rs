//! What the fake model was sent.

use ahelper_fake_llm::FakeLlm;
use serde_json::Value;

/// Every `tool_result` block of the last request `server` received, in call order: (what the
/// tool returned, as text; whether it is marked as an error).
pub fn last_tool_results(server: &FakeLlm) -> Vec<(String, bool)> {
    let requests = server.model_requests();
    let last = requests.last().expect("the model was asked");
    last.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|b| b["type"] == "tool_result")
        .map(|b| {
            let content = match &b["content"] {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (content, b["is_error"] == true)
        })
        .collect()
}
