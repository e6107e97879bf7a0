//! Choosing conversations and turns by what is on disk in the requesting agent's working
//! directory, through real HTTP on 127.0.0.1 in both wire formats.

use ahelper_fake_llm::{Condition, Conversation, FakeLlm, Script, Turn, TurnIndex};
use serde_json::{Value, json};
use std::path::Path;

fn system_prompt(workdir: &Path) -> String {
    format!(
        "You are ahelper.\n\n# Environment\n- Workspace root: {0}\n- Working directory: {0}\n",
        workdir.display()
    )
}

/// An Anthropic request from an agent in `workdir`: the first user message, then `rounds`
/// (tool call, tool result) pairs, then optional extra user text.
fn anthropic(workdir: &Path, user: &str, rounds: usize, extra_user: Option<&str>) -> Value {
    let mut messages = super::server::anthropic_messages(user, rounds);
    if let Some(extra) = extra_user {
        messages.push(json!({"role": "assistant", "content": [{"type": "text", "text": "Done."}]}));
        messages.push(json!({"role": "user", "content": extra}));
    }
    json!({"model": "claude-test", "max_tokens": 100, "stream": false,
           "system": system_prompt(workdir), "messages": messages})
}

fn openai(workdir: &Path, user: &str) -> Value {
    json!({"model": "gpt-test", "stream": false, "messages": [
        {"role": "system", "content": system_prompt(workdir)},
        {"role": "user", "content": user}]})
}

async fn post(url: String, body: &Value) -> Value {
    let response = reqwest::Client::new()
        .post(url)
        .header("x-api-key", "sk-test")
        .json(body)
        .send()
        .await
        .expect("request sent");
    assert!(response.status().is_success(), "{}", response.status());
    response.json().await.expect("JSON body")
}

/// The text and tool names of an Anthropic message body.
fn anthropic_reply(body: &Value) -> (String, Vec<String>) {
    let mut text = String::new();
    let mut tools = Vec::new();
    for block in body["content"].as_array().unwrap() {
        match block["type"].as_str() {
            Some("text") => text.push_str(block["text"].as_str().unwrap()),
            Some("tool_use") => tools.push(block["name"].as_str().unwrap().to_string()),
            _ => {}
        }
    }
    (text, tools)
}

fn fixer_script() -> Script {
    Script::new()
        .with_conversation(
            Conversation::new()
                .named("merger")
                .when(Condition::HasConflictMarkers(true))
                .turn(Turn::text("resolving the conflict")),
        )
        .with_conversation(
            Conversation::new()
                .named("fixer")
                .when(Condition::All(vec![
                    Condition::file_contains("calc.py", "def plus"),
                    Condition::file_contains("report.py", "calc.add"),
                ]))
                .turn(Turn::tool_call(
                    "edit_file",
                    json!({"path": "report.py", "old": "calc.add", "new": "calc.plus"}),
                ))
                .turn(Turn::text("report.py now calls calc.plus")),
        )
        .with_conversation(
            Conversation::new()
                .named("idle")
                .turn(Turn::text("nothing to fix")),
        )
}

/// Starts the fake server on `script`: (the server, its Anthropic messages URL).
async fn serve_anthropic(script: Script) -> (FakeLlm, String) {
    let server = FakeLlm::start(script).await.unwrap();
    let url = format!("{}/v1/messages", server.base_url());
    (server, url)
}

#[tokio::test]
async fn the_conversation_is_chosen_by_disk_and_kept_for_the_agent() {
    let (server, url) = serve_anthropic(fixer_script()).await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("calc.py"), "def plus(a, b):\n    return a + b\n").unwrap();

    let idle = post(url.clone(), &anthropic(d, "go", 0, None)).await;
    assert_eq!(anthropic_reply(&idle).0, "nothing to fix");

    std::fs::write(d.join("report.py"), "import calc\nprint(calc.add(1, 2))\n").unwrap();
    let first = post(url.clone(), &anthropic(d, "fix it", 0, None)).await;
    assert_eq!(anthropic_reply(&first).1, ["edit_file"]);
    // The agent's edit makes the condition false; its conversation stays chosen.
    std::fs::write(d.join("report.py"), "import calc\nprint(calc.plus(1, 2))\n").unwrap();
    let second = post(url.clone(), &anthropic(d, "fix it", 1, None)).await;
    assert_eq!(anthropic_reply(&second).0, "report.py now calls calc.plus");

    // A new agent in a directory with conflict markers gets the merger.
    let other = tempfile::tempdir().unwrap();
    std::fs::write(
        other.path().join("calc.py"),
        "<<<<<<< HEAD\ndef mul(a, b): ...\n=======\ndef sub(a, b): ...\n>>>>>>> ahelper/r/w2\n",
    )
    .unwrap();
    let merger = post(url.clone(), &anthropic(other.path(), "resolve", 0, None)).await;
    assert_eq!(anthropic_reply(&merger).0, "resolving the conflict");

    let requests = server.model_requests();
    assert_eq!(requests.len(), 4);
    assert_eq!(requests[1].workdir.as_deref(), Some(d));
    let conversations: Vec<Option<usize>> = requests.iter().map(|r| r.conversation).collect();
    assert_eq!(conversations, [Some(2), Some(1), Some(1), Some(0)]);
}

#[tokio::test]
async fn a_turn_chooses_by_disk_and_assistant_messages_move_past_a_text_turn() {
    let script = Script::new().with_conversation(
        Conversation::new()
            .with_turn_index(TurnIndex::AssistantMessages)
            .turn(Turn::tool_call("write_file", json!({"path": "calc.py"})))
            .turn(Turn::text("renamed add to plus"))
            .turn(
                Turn::tool_call("edit_file", json!({"path": "test_calc.py"})).when(
                    Condition::file_contains("test_calc.py", "calc.add"),
                    Turn::text("tests already use plus"),
                ),
            )
            .turn(Turn::text("fixed the tests")),
    );
    let (server, url) = serve_anthropic(script).await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("test_calc.py"), "calc.add(1, 2)\n").unwrap();
    let end = post(url.clone(), &anthropic(d, "rename", 1, None)).await;
    assert_eq!(anthropic_reply(&end).0, "renamed add to plus");
    // ahelper sends the worker back with failing tests: a new user message after a text turn.
    let fix = post(url.clone(), &anthropic(d, "rename", 1, Some("tests fail"))).await;
    assert_eq!(anthropic_reply(&fix).1, ["edit_file"]);
    std::fs::write(d.join("test_calc.py"), "calc.plus(1, 2)\n").unwrap();
    let again = post(url.clone(), &anthropic(d, "rename", 1, Some("tests fail"))).await;
    assert_eq!(anthropic_reply(&again).0, "tests already use plus");
    assert_eq!(server.model_requests()[1].assistant_messages, 2);
}

#[tokio::test]
async fn openai_requests_carry_the_working_directory_too() {
    let server = FakeLlm::start(fixer_script()).await.unwrap();
    let url = format!("{}/chat/completions", server.openai_base_url());
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("calc.py"), "def plus(a, b): ...\n").unwrap();
    std::fs::write(dir.path().join("report.py"), "calc.add(1, 2)\n").unwrap();
    let body = post(url, &openai(dir.path(), "fix it")).await;
    let call = &body["choices"][0]["message"]["tool_calls"][0]["function"];
    assert_eq!(call["name"], "edit_file");
    assert_eq!(
        server.model_requests()[0].workdir.as_deref(),
        Some(dir.path())
    );
}

#[tokio::test]
async fn no_fitting_conversation_names_the_working_directory() {
    let script = Script::new().with_conversation(
        Conversation::new()
            .when(Condition::file_exists("never.txt"))
            .turn(Turn::text("x")),
    );
    let server = FakeLlm::start(script).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let response = reqwest::Client::new()
        .post(format!("{}/v1/messages", server.base_url()))
        .json(&anthropic(dir.path(), "hi", 0, None))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let text = response.text().await.unwrap();
    assert!(
        text.contains("whose `when` holds in the working directory"),
        "{text}"
    );
    assert!(text.contains(&dir.path().display().to_string()), "{text}");
}

#[test]
fn json_scripts_with_conditions_load() {
    let script = Script::from_json_str(
        r#"{"conversations": [
            {"name": "fixer", "when": {"file_lacks": {"path": "report.py", "text": "calc.plus"}},
             "turn_index": "assistant_messages",
             "turns": [{"when": {"file_missing": "report.py"}, "text": "no report",
                        "otherwise": {"tool_calls": [{"name": "read_file", "arguments": {"path": "report.py"}}]}}]}
        ]}"#,
    )
    .unwrap();
    assert_eq!(
        script.conversations[0].turn_index,
        TurnIndex::AssistantMessages
    );
    let back = serde_json::to_string(&script).unwrap();
    assert_eq!(Script::from_json_str(&back).unwrap(), script);
}
