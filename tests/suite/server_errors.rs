//! End-to-end: server answers that are no model reply (refused key, wrong URL, an HTML page,
//! foreign JSON) give an error naming the setting to check, are not retried, and `-p` gives no
//! `--resume` hint for them. Runs the built binary against the fake LLM server.

use super::support::*;
use ahelper_fake_llm::{Conversation, Fault, FaultKind, Script, Turn};
use serde_json::Value;

/// A script whose every request gets `kind` (up to 10 times: more than any retry budget).
fn always(kind: FaultKind) -> Script {
    Script::new().with_conversation(
        Conversation::new().turn(Turn::text("never shown").with_fault(Fault::new(kind).times(10))),
    )
}

/// Runs `ahelper -p hi` in a new repository against a server whose every reply is `kind`,
/// checks that it exits with 1, and returns (the repository, the server, stderr).
fn fails_with(kind: FaultKind) -> (TestRepo, ahelper_fake_llm::FakeLlm, String) {
    let repo = repo_with(&[("a.txt", "x\n")]);
    let server = start(always(kind));
    let (code, stderr) = run_p(&mut ahelper(&repo, &server, Wire::Anthropic));
    assert_eq!(code, 1, "{stderr}");
    (repo, server, stderr)
}

/// Runs `ahelper -p hi` and returns (exit code, stderr).
fn run_p(cmd: &mut assert_cmd::Command) -> (i32, String) {
    let out = cmd.args(["-p", "hi"]).output().expect("ahelper runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_refused_key_names_the_variable_and_is_not_retried_nor_resumable() {
    let (_repo, server, stderr) = fails_with(FaultKind::Http401);
    assert!(
        stderr.contains("the API key in ANTHROPIC_API_KEY was refused (HTTP 401): check it"),
        "{stderr}"
    );
    assert!(!stderr.contains("--resume"), "no resume hint: {stderr}");
    assert!(!stderr.contains("retrying"), "no retry: {stderr}");
    assert!(!stderr.contains("sk-test-secret-key-123"), "{stderr}");
    assert_eq!(server.model_requests().len(), 1, "exactly one request");
}

#[test]
fn a_refused_key_names_the_configured_api_key_env_also_for_403_and_openai() {
    let repo = repo_with(&[("a.txt", "x\n")]);
    repo.write(
        ".ahelper/config.toml",
        "provider = \"openai\"\napi_key_env = \"MY_PROXY_KEY\"\n",
    );
    let server = start(always(FaultKind::Http403));
    let mut cmd = ahelper(&repo, &server, Wire::OpenAi);
    cmd.env("MY_PROXY_KEY", "sk-proxy-key-456")
        .arg("--trust-project");
    let (code, stderr) = run_p(&mut cmd);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("the API key in MY_PROXY_KEY was refused (HTTP 403)"),
        "{stderr}"
    );
    assert!(!stderr.contains("--resume"), "{stderr}");
    assert_eq!(server.model_requests().len(), 1);
    let sent = &server.model_requests()[0];
    assert!(
        sent.headers
            .iter()
            .any(|(n, v)| n == "authorization" && v.contains("sk-proxy-key-456")),
        "the key of MY_PROXY_KEY was sent"
    );
}

#[test]
fn a_404_shows_the_url_called_and_where_base_url_was_set() {
    let repo = repo_with(&[("a.txt", "x\n")]);
    let server = start(always(FaultKind::Http500));
    let wrong = format!("{}/wrong", server.base_url());
    let mut cmd = ahelper(&repo, &server, Wire::Anthropic);
    cmd.env("ANTHROPIC_BASE_URL", &wrong);
    let (code, stderr) = run_p(&mut cmd);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains(&format!("HTTP 404 Not Found from {wrong}/v1/messages")),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "check base_url {wrong} (set by environment variable ANTHROPIC_BASE_URL)"
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("--resume"), "{stderr}");
    assert_eq!(server.requests().len(), 1, "no retry of a 404");

    let mut cmd = ahelper(&repo, &server, Wire::Anthropic);
    cmd.args(["--base-url", &wrong]);
    let (_, stderr) = run_p(&mut cmd);
    assert!(stderr.contains("(set by --base-url)"), "{stderr}");

    repo.write(".ahelper/config.toml", &format!("base_url = \"{wrong}\"\n"));
    let (_, stderr) = run_p(ahelper(&repo, &server, Wire::Anthropic).arg("--trust-project"));
    assert!(
        stderr.contains("(set by /") && stderr.contains("/.ahelper/config.toml)"),
        "the config file is named: {stderr}"
    );
}

#[test]
fn an_html_page_is_not_an_endpoint_and_is_not_retried() {
    let (_repo, server, stderr) = fails_with(FaultKind::HtmlPage);
    assert!(
        stderr.contains(&format!(
            "this does not look like an Anthropic/OpenAI-compatible endpoint (content-type text/html from {}/v1/messages)",
            server.base_url()
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("retrying"), "{stderr}");
    assert!(!stderr.contains("--resume"), "{stderr}");
    assert_eq!(server.model_requests().len(), 1);
}

#[test]
fn foreign_json_is_not_an_api_error_on_either_wire() {
    for wire in [Wire::Anthropic, Wire::OpenAi] {
        let repo = repo_with(&[("a.txt", "x\n")]);
        let server = start(always(FaultKind::ForeignJson));
        let out = ahelper(&repo, &server, wire)
            .args(["-p", "hi", "--output-format", "json"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        let result: Value = serde_json::from_slice(&out.stdout).expect("one JSON result");
        let error = result["error"].as_str().unwrap_or_default();
        assert!(!error.contains("api_error"), "{wire:?}: {error}");
        assert!(
            error.contains("this does not look like an Anthropic/OpenAI-compatible endpoint")
                && error.contains(r#"{"hello":"world"}"#),
            "{wire:?}: {error}"
        );
        assert_eq!(result["is_error"], true);
        assert_eq!(server.model_requests().len(), 1, "{wire:?}: no retry");
    }
}

#[test]
fn a_refused_key_while_planning_a_swarm_is_a_key_error() {
    let repo = repo_with(&[("a.txt", "x\n")]);
    let server = start(always(FaultKind::Http401));
    let out = ahelper(&repo, &server, Wire::Anthropic)
        .args(["swarm", "do it", "--yes"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("the API key in ANTHROPIC_API_KEY was refused (HTTP 401): check it"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("could not produce a valid plan"),
        "{stderr}"
    );
    assert_eq!(server.model_requests().len(), 1);
}

/// `base_url` pointing at a plain web server (here one that answers every request as
/// `python3 -m http.server` answers a POST: 501 with an HTML error page): one request, an
/// error naming the URL and `base_url` with the page's title, not the whole page, no retries.
#[test]
fn a_web_server_that_takes_no_post_is_not_an_endpoint_and_is_not_retried() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let requests = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = requests.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut buf = [0u8; 65536];
            let _ = stream.read(&mut buf);
            let page = "<!DOCTYPE HTML>\n<html><head><title>Error response</title></head>\
                        <body><h1>Error response</h1><p>Error code: 501</p></body></html>\n";
            let _ = write!(
                stream,
                "HTTP/1.1 501 Not Implemented\r\nContent-Type: text/html;charset=utf-8\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n{page}",
                page.len()
            );
        }
    });
    let repo = repo_with(&[("a.txt", "x\n")]);
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("ahelper"));
    isolate(&mut cmd, &repo)
        .env("ANTHROPIC_API_KEY", "sk-test")
        .env("ANTHROPIC_BASE_URL", &url);
    let (code, stderr) = run_p(&mut assert_cmd::Command::from_std(cmd));
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "this does not look like an Anthropic/OpenAI-compatible endpoint (HTTP 501 Not \
             Implemented: an HTML page titled \"Error response\" from {url}/v1/messages)"
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("<h1>"), "{stderr}");
    assert!(!stderr.contains("retrying"), "{stderr}");
    assert!(!stderr.contains("--resume"), "{stderr}");
    assert_eq!(requests.load(std::sync::atomic::Ordering::SeqCst), 1);
}
