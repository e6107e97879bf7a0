//! Bounded tools (issue 29.5) through the built binary, a fake model playing the hostile turns:
//! a FIFO handed to `read_file` (it used to hang `-p` for ever), a huge one-line file (it used
//! to be held whole in memory), and commands that hit the process or memory limit.

use super::support::*;
use ahelper_fake_llm::Turn;
use serde_json::json;
use std::ffi::CString;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::time::{Duration, Instant};

/// The tool result the model got for its first call (the text of request 1).
fn first_result(requests: &[ahelper_fake_llm::RecordedRequest]) -> String {
    requests
        .get(1)
        .map(|r| r.body.to_string())
        .unwrap_or_default()
}

#[test]
fn read_file_of_a_fifo_fails_at_once_and_p_ends() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    let pipe = CString::new(repo.path().join("pipe").as_os_str().as_bytes()).unwrap();
    // SAFETY: a NUL-terminated path and a mode.
    assert_eq!(unsafe { libc::mkfifo(pipe.as_ptr(), 0o644) }, 0);
    let server = start(scripts::agent([
        Turn::tool_call("read_file", json!({"path": "pipe"})),
        Turn::text("done"),
    ]));
    let started = Instant::now();
    let (code, _, stderr) = outcome_of(
        ahelper(&repo, &server, Wire::Anthropic)
            .args(["-p", "go"])
            .timeout(Duration::from_secs(60)),
    );
    let took = started.elapsed();
    assert_eq!(code, 0, "{stderr}");
    assert!(took < Duration::from_secs(30), "took {took:?}");
    let result = first_result(&server.model_requests());
    assert!(
        result.contains("is a FIFO (named pipe), not a regular file"),
        "{result}"
    );
}

/// Runs `ahelper -p go` in `repo` against `server` and waits for it with `wait4(2)`; (its stderr,
/// its peak resident set in KiB — `ru_maxrss` of that one child).
fn run_measuring_rss(repo: &TestRepo, server: &ahelper_fake_llm::FakeLlm) -> (String, i64) {
    let mut child = ahelper_process(repo, server, Wire::Anthropic)
        .args(["-p", "go"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("ahelper starts");
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: plain out-parameters; `pid` is our child, not yet reaped.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(reaped, pid);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{stderr}"
    );
    (stderr, usage.ru_maxrss)
}

#[test]
fn read_file_of_a_huge_line_keeps_memory_bounded() {
    let repo = repo_with(&[("a.txt", "a\n")]);
    // One line of 256 MiB: 8 KiB of text, then a hole (NUL bytes, no newline) — sparse, so it
    // costs no disk; read_file only sniffs the first 8 KiB for NULs.
    let size: u64 = 256 << 20;
    let big = std::fs::File::create(repo.path().join("big.txt")).unwrap();
    std::io::Write::write_all(&mut &big, &[b'x'; 8192]).unwrap();
    big.set_len(size).unwrap();
    let server = start(scripts::agent([
        Turn::tool_call("read_file", json!({"path": "big.txt"})),
        Turn::text("done"),
    ]));
    let (stderr, peak_kib) = run_measuring_rss(&repo, &server);
    eprintln!("peak RSS of ahelper reading a {size}-byte line: {peak_kib} KiB");
    // The code before held the whole line (and a copy): ≥ 512 MiB.
    assert!(peak_kib < 120 * 1024, "peak RSS {peak_kib} KiB");
    let result = first_result(&server.model_requests());
    assert!(
        result.contains(&format!("line cut at 2000 characters: {size} in total")),
        "{stderr}\n{}",
        &result[..result.len().min(3000)]
    );
}
