//! File tools against what could hang them or fill memory (issue 29.5): FIFOs, sockets, one
//! huge line, and the time limit of a call.

use super::support::tools::Workspace;
use serde_json::json;
use std::ffi::CString;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Makes a FIFO at `path`.
fn mkfifo(path: &Path) {
    let c = CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: a NUL-terminated path and a mode.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
}

/// Releases whoever blocks on the FIFO at `path` after `after` (opens both ends and closes
/// them), so that a tool that hangs on it (the code before issue 29.5) fails the test instead
/// of hanging the test binary.
fn unblock_later(path: PathBuf, after: Duration) {
    std::thread::spawn(move || {
        std::thread::sleep(after);
        for _ in 0..50 {
            let _ = fs::OpenOptions::new().read(true).write(true).open(&path);
            std::thread::sleep(Duration::from_millis(20));
        }
    });
}

#[tokio::test]
async fn file_tools_refuse_a_fifo_at_once() {
    let f = Workspace::new();
    let pipe = f.ws.join("pipe");
    mkfifo(&pipe);
    unblock_later(pipe.clone(), Duration::from_secs(10));
    let calls = [
        ("read_file", json!({"path": "pipe"})),
        ("write_file", json!({"path": "pipe", "content": "x"})),
        (
            "edit_file",
            json!({"path": "pipe", "old_string": "a", "new_string": "b"}),
        ),
    ];
    for (tool, input) in calls {
        let started = Instant::now();
        let e = f.err(tool, input).await;
        let took = started.elapsed();
        assert!(took < Duration::from_secs(5), "{tool} took {took:?}: {e}");
        assert!(
            e.contains("FIFO") && e.contains("not a regular file"),
            "{tool}: {e}"
        );
    }
    let out = f.ok("grep", json!({"pattern": "x", "path": "pipe"})).await;
    assert!(out.starts_with("No matches"), "{out}");
}

#[tokio::test]
async fn file_tools_refuse_a_socket() {
    let f = Workspace::new();
    let _listener = std::os::unix::net::UnixListener::bind(f.ws.join("sock")).unwrap();
    let e = f.err("read_file", json!({"path": "sock"})).await;
    assert!(e.contains("not a regular file"), "{e}");
}

/// A one-line file of `bytes` bytes of `x` (written in 1 MiB pieces) at `ws/rel`.
fn one_line(f: &Workspace, rel: &str, bytes: usize) {
    use std::io::Write;
    let mut file = fs::File::create(f.ws.join(rel)).unwrap();
    let piece = vec![b'x'; 1 << 20];
    for _ in 0..bytes / piece.len() {
        file.write_all(&piece).unwrap();
    }
}

#[tokio::test]
async fn read_file_says_where_a_huge_line_was_cut() {
    let f = Workspace::new();
    one_line(&f, "big.txt", 24 << 20);
    let out = f.ok("read_file", json!({"path": "big.txt"})).await;
    let expected = format!("[…line cut at 2000 characters: {} in total]", 24 << 20);
    assert!(out.contains(&expected), "{}", &out[out.len() - 200..]);
    assert!(out.len() < 3000, "{} characters", out.len());
}

#[tokio::test]
async fn grep_stops_at_a_line_over_its_memory_cap_and_says_so() {
    let f = Workspace::new();
    one_line(&f, "big.txt", 24 << 20);
    f.put("small.txt", "xx marks the spot\n");
    let out = f.ok("grep", json!({"pattern": "spot|^x"})).await;
    assert!(out.contains("small.txt:1:xx marks the spot"), "{out}");
    assert!(
        out.contains("1 file(s) were not searched to their end")
            && out.contains("longer than 16 MiB")
            && out.contains("big.txt"),
        "{out}"
    );
}

#[tokio::test]
async fn a_file_tool_over_its_time_limit_fails_naming_the_limit() {
    let f = Workspace::new();
    let text: String = (0..2_000_000).map(|i| format!("line {i}\n")).collect();
    f.put("long.txt", &text);
    let mut ctx = f.ctx.clone();
    ctx.file_tool_timeout = Duration::from_millis(1);
    let started = Instant::now();
    let e = f
        .call_in(&ctx, "read_file", json!({"path": "long.txt"}))
        .await
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5));
    let e = e.message();
    assert!(
        e.contains("read_file did not finish within the time limit of file tools (0.001 s")
            && e.contains("agent.file_tool_timeout_s"),
        "{e}"
    );
}

#[tokio::test]
async fn edit_file_refuses_a_file_too_large_to_hold() {
    let f = Workspace::new();
    let big = fs::File::create(f.ws.join("big.txt")).unwrap();
    big.set_len(65 << 20).unwrap();
    let e = f
        .err(
            "edit_file",
            json!({"path": "big.txt", "old_string": "a", "new_string": "b"}),
        )
        .await;
    assert!(
        e.contains("is 65 MiB; edit_file changes files of at most 64 MiB"),
        "{e}"
    );
}
