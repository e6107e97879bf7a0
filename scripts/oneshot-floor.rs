//! The floor of `benches/oneshot.rs`: the least a client can do on the bench's path, to tell
//! what of `ahelper -p`'s exit tail is ahelper's and what is the kernel's, the fake server's
//! and the bench's own wake-up.
//!
//! A small binary (std only, one thread, blocking I/O) that plays the bench's scripted task
//! against the fake LLM (`ANTHROPIC_BASE_URL`): three streamed Messages requests carrying 0, 1
//! and 2 tool results, each on a new connection; it reads the final reply up to its
//! `message_stop` event, prints the text of its deltas and exits. `--version` prints a line.
//!
//! ```sh
//! rustc -O -C strip=symbols scripts/oneshot-floor.rs -o /tmp/oneshot-floor
//! cp target/release/ahelper /tmp/ahelper-build
//! ONESHOT_BENCH_BIN=/tmp/oneshot-floor:/tmp/ahelper-build cargo bench --bench oneshot
//! ```
use std::io::{Read, Write};
use std::net::TcpStream;

/// Sends one streamed Messages request with `body` to `host` (`127.0.0.1:<port>`).
fn request(host: &str, body: &str) -> TcpStream {
    let mut stream = TcpStream::connect(host).expect("the fake server accepts");
    stream.set_nodelay(true).expect("TCP_NODELAY");
    let head = format!(
        "POST /v1/messages HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\n\
         x-api-key: floor\r\nanthropic-version: 2023-06-01\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    let mut all = head.into_bytes();
    all.extend_from_slice(body.as_bytes());
    stream.write_all(&all).expect("the request is sent");
    stream
}

/// The reply's bytes up to the chunk that holds `message_stop` (or the body's last chunk).
fn read_reply(stream: &mut TcpStream) -> Vec<u8> {
    let mut reply = Vec::with_capacity(16 * 1024);
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = stream.read(&mut buf).expect("the reply is read");
        if n == 0 {
            return reply;
        }
        reply.extend_from_slice(&buf[..n]);
        let stopped = reply.windows(12).any(|w| w == b"message_stop");
        if (stopped && reply.ends_with(b"\n\n\r\n")) || reply.ends_with(b"0\r\n\r\n") {
            return reply;
        }
    }
}

/// The text of the reply's deltas (`"text":"…"`, JSON escapes of quotes, backslashes and
/// newlines undone: enough for the bench's answer).
fn text_of(reply: &[u8]) -> String {
    let reply = String::from_utf8_lossy(reply);
    let key = "\"text\":\"";
    let mut text = String::new();
    let mut rest = &reply[..];
    while let Some(at) = rest.find(key) {
        rest = &rest[at + key.len()..];
        let mut chars = rest.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => {
                    rest = &rest[i + 1..];
                    break;
                }
                '\\' => match chars.next() {
                    Some((_, 'n')) => text.push('\n'),
                    Some((_, escaped)) => text.push(escaped),
                    None => {}
                },
                c => text.push(c),
            }
        }
    }
    text
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--version") {
        println!("oneshot-floor");
        return;
    }
    let base = std::env::var("ANTHROPIC_BASE_URL").expect("ANTHROPIC_BASE_URL is set");
    let host = base.trim_start_matches("http://").trim_end_matches('/');
    let prompt = args
        .iter()
        .position(|a| a == "-p")
        .and_then(|i| args.get(i + 1))
        .cloned()
        .unwrap_or_default();
    let mut messages = format!("{{\"role\":\"user\",\"content\":{prompt:?}}}");
    for turn in 0..3 {
        if turn > 0 {
            messages.push_str(&format!(
                ",{{\"role\":\"assistant\",\"content\":[{{\"type\":\"tool_use\",\"id\":\"t{turn}\",\
                 \"name\":\"tool\",\"input\":{{}}}}]}},{{\"role\":\"user\",\"content\":[{{\"type\":\
                 \"tool_result\",\"tool_use_id\":\"t{turn}\",\"content\":\"ok\"}}]}}"
            ));
        }
        let body = format!(
            "{{\"model\":\"floor\",\"max_tokens\":1024,\"stream\":true,\"messages\":[{messages}]}}"
        );
        let reply = read_reply(&mut request(host, &body));
        if turn == 2 {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{}", text_of(&reply));
            let _ = out.flush();
            std::process::exit(0);
        }
    }
}
