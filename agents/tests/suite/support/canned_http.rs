//! A server on 127.0.0.1 that answers each connection with the next canned HTTP response
//! (chunked transfer encoding, `Connection: close`). Only for a sequence the fake LLM server
//! cannot play: it injects at most one kind of fault per turn, and a client's retries send the
//! same request, so "529, then an error event, then success" needs canned answers.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One canned HTTP response.
#[derive(Debug, Clone, Default)]
pub struct Canned {
    /// Status code.
    pub status: u16,
    /// Extra headers (`content-type` defaults to `text/event-stream`).
    pub headers: Vec<(String, String)>,
    /// Body, sent as one HTTP chunk per element.
    pub chunks: Vec<Vec<u8>>,
}

impl Canned {
    /// 200 with `body` split into chunks of `chunk_size` bytes.
    pub fn sse(body: &[u8], chunk_size: usize) -> Self {
        Canned {
            status: 200,
            chunks: body.chunks(chunk_size).map(<[u8]>::to_vec).collect(),
            ..Canned::default()
        }
    }

    /// `status` with a one-chunk body and extra headers.
    pub fn status(status: u16, body: &str, headers: &[(&str, &str)]) -> Self {
        Canned {
            status,
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            chunks: vec![body.as_bytes().to_vec()],
        }
    }
}

/// The number of requests a [`serve`] server has read.
#[derive(Debug, Clone, Default)]
pub struct RequestCount(Arc<AtomicUsize>);

impl RequestCount {
    /// Requests read so far.
    pub fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// Serves `responses` in order, one per connection, on a free 127.0.0.1 port; returns the
/// base URL (`http://127.0.0.1:<port>`) and the request counter. The server task ends with the
/// test's runtime.
pub async fn serve(responses: Vec<Canned>) -> (String, RequestCount) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let count = RequestCount::default();
    let counter = count.clone();
    tokio::spawn(async move {
        for canned in responses {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            read_request(&mut socket).await;
            counter.0.fetch_add(1, Ordering::SeqCst);
            let _ = respond(&mut socket, &canned).await;
        }
    });
    (base, count)
}

/// Reads one request: the head, then the body by `content-length`.
async fn read_request(socket: &mut TcpStream) {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 4096];
    let head_end = loop {
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
        let n = socket.read(&mut tmp).await.unwrap();
        assert!(n > 0, "client closed before sending a request");
        buf.extend_from_slice(&tmp[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map_or(0, |v| v.trim().parse().unwrap());
    while buf.len() < head_end + len {
        let n = socket.read(&mut tmp).await.unwrap();
        assert!(n > 0, "client closed mid-body");
        buf.extend_from_slice(&tmp[..n]);
    }
}

/// Writes `canned` with chunked transfer encoding, then closes the connection.
async fn respond(socket: &mut TcpStream, canned: &Canned) -> std::io::Result<()> {
    let mut out = format!("HTTP/1.1 {} X\r\n", canned.status);
    if !canned
        .headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
    {
        out.push_str("content-type: text/event-stream\r\n");
    }
    for (k, v) in &canned.headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str("transfer-encoding: chunked\r\nconnection: close\r\n\r\n");
    socket.write_all(out.as_bytes()).await?;
    for chunk in &canned.chunks {
        let mut frame = format!("{:x}\r\n", chunk.len()).into_bytes();
        frame.extend_from_slice(chunk);
        frame.extend_from_slice(b"\r\n");
        socket.write_all(&frame).await?;
        socket.flush().await?;
    }
    socket.write_all(b"0\r\n\r\n").await?;
    socket.shutdown().await
}
