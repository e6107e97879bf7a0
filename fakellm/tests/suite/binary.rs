//! The `ahelper-fake-llm` binary and the blocking start, outside any async runtime.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ahelper_fake_llm::{FakeLlm, Script};

/// Sends one HTTP/1.1 request with `Connection: close` and returns the whole response.
fn http(port: u16, method: &str, path: &str, body: &str) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read response");
    response
}

const DEMO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/demo.json");

#[test]
fn binary_prints_its_url_writes_the_port_file_and_serves_the_script() {
    let dir = tempfile::tempdir().unwrap();
    let port_file = dir.path().join("port");
    let mut child = Command::new(env!("CARGO_BIN_EXE_ahelper-fake-llm"))
        .args(["--script", DEMO, "--latency-ms", "1", "--port-file"])
        .arg(&port_file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port: u16 = line
        .trim()
        .strip_prefix("listening on http://127.0.0.1:")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .parse()
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(&port_file).unwrap(),
        port.to_string()
    );

    let request =
        r#"{"model":"m","stream":true,"messages":[{"role":"user","content":"look around"}]}"#;
    let response = http(port, "POST", "/v1/chat/completions", request);
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(
        response
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
    );
    assert!(response.contains(r#""name":"list_dir""#) && response.contains("data: [DONE]"));

    // The demo's `flaky` conversation is rate-limited once, then answers.
    let flaky = r#"{"model":"m","messages":[{"role":"user","content":"a flaky task"}]}"#;
    let response = http(port, "POST", "/v1/messages", flaky);
    assert!(response.starts_with("HTTP/1.1 429"), "{response}");
    assert!(response.to_ascii_lowercase().contains("retry-after: 1"));
    let response = http(port, "POST", "/v1/messages", flaky);
    assert!(response.contains("rate-limited attempt"), "{response}");

    child.kill().unwrap();
    child.wait().unwrap();
    let stderr = std::io::read_to_string(child.stderr.take().unwrap()).unwrap();
    for logged in ["POST /v1/chat/completions", "fault=http_429"] {
        assert!(stderr.contains(logged), "{logged:?} not in {stderr}");
    }
}

#[test]
fn binary_rejects_a_bad_script_with_its_path_and_position() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("bad.json");
    let bad = "{\"conversations\": [\n  {\"turns\": [{\"text\": 1}]}\n]}";
    std::fs::write(&script, bad).unwrap();
    let mut binary = Command::new(env!("CARGO_BIN_EXE_ahelper-fake-llm"));
    let output = binary.arg("--script").arg(&script).output().unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    for place in ["bad.json", "line 2"] {
        assert!(stderr.contains(place), "{place:?} not in {stderr}");
    }
    assert!(output.stdout.is_empty());
}

#[test]
fn start_blocking_serves_without_a_runtime_and_stops_on_drop() {
    let script = Script::from_file(Path::new(DEMO)).unwrap();
    let server = FakeLlm::start_blocking(script).unwrap();
    let port = server.port();
    assert_eq!(server.base_url(), format!("http://127.0.0.1:{port}"));
    assert_eq!(
        server.openai_base_url(),
        format!("http://127.0.0.1:{port}/v1")
    );
    let body = r#"{"stream":true,"messages":[{"role":"user","content":"hi"},
        {"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":"ok"}]}]}"#;
    let response = http(port, "POST", "/v1/messages", body);
    assert!(
        response.contains("event: message_stop") && response.contains("read_file"),
        "{response}"
    );
    assert_eq!(server.model_requests()[0].turn, Some(1));
    drop(server);
    let deadline = Instant::now() + Duration::from_secs(2);
    while TcpStream::connect(("127.0.0.1", port)).is_ok() {
        assert!(Instant::now() < deadline, "still listening after drop");
        std::thread::sleep(Duration::from_millis(10));
    }
}
