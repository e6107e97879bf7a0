//! The faults that play a server which is no model API (`html_page`, `foreign_json`) and the
//! `http_403` fault, through real HTTP on 127.0.0.1 with reqwest.

use ahelper_fake_llm::{Conversation, FakeLlm, Fault, FaultKind, Script, Turn};
use serde_json::{Value, json};

async fn answer(kind: FaultKind, path: &str, body: Value) -> (u16, String, String) {
    let server = FakeLlm::start(Script::new().with_conversation(
        Conversation::new().turn(Turn::text("ok").with_fault(Fault::new(kind))),
    ))
    .await
    .unwrap();
    let response = reqwest::Client::new()
        .post(format!("{}{path}", server.base_url()))
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let text = response.text().await.unwrap();
    assert_eq!(server.model_requests()[0].fault, Some(kind));
    (status, content_type, text)
}

fn anthropic() -> Value {
    json!({"model": "m", "max_tokens": 10, "stream": true,
           "messages": [{"role": "user", "content": "hi"}]})
}

#[tokio::test]
async fn html_page_is_a_200_html_page() {
    let (status, content_type, text) =
        answer(FaultKind::HtmlPage, "/v1/messages", anthropic()).await;
    assert_eq!(status, 200);
    assert!(content_type.starts_with("text/html"), "{content_type}");
    assert!(
        text.contains("<html>") && text.contains("Sign in"),
        "{text}"
    );
}

#[tokio::test]
async fn foreign_json_is_a_200_json_without_a_reply() {
    let openai = json!({"model": "m", "stream": true,
                        "messages": [{"role": "user", "content": "hi"}]});
    let (status, content_type, text) =
        answer(FaultKind::ForeignJson, "/v1/chat/completions", openai).await;
    assert_eq!(status, 200);
    assert_eq!(content_type, "application/json");
    assert_eq!(text, r#"{"hello":"world"}"#);
}

#[tokio::test]
async fn http_403_is_a_permission_error() {
    let (status, _, text) = answer(FaultKind::Http403, "/v1/messages", anthropic()).await;
    assert_eq!(status, 403);
    let body: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(body["error"]["type"], "permission_error");
}
