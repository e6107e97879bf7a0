//! Assertions on what the fake model was sent.

use ahelper_fake_llm::{FakeLlm, RecordedRequest};
use serde_json::Value;

/// Asserts that no request in `requests` carries `secret`; a failure names the request, shows
/// its body and then `context` (e.g. the run's stderr).
#[track_caller]
pub fn assert_never_sent(requests: &[RecordedRequest], secret: &str, context: &str) {
    for (i, request) in requests.iter().enumerate() {
        let body = request.body.to_string();
        assert!(
            !body.contains(secret),
            "the secret {secret:?} reached the model in request {i}: {body}\n{context}"
        );
    }
}

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
