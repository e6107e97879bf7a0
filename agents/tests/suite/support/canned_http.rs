//! A minimal HTTP/1.1 server on 127.0.0.1 for the model-client tests: it answers each
//! connection with the next canned response (chunked transfer encoding, `Connection: close`)
//! and records every request. Richer scripting lives in the `ahelper-fake-llm` crate.

use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// One canned HTTP response.
#[derive(Debug, Clone, Default)]
pub struct Canned {
    /// Status code.
    pub status: u16,
    /// Extra headers (`content-type` defaults to `text/event-stream`).
    pub headers: Vec<(String, String)>,
    /// Body, sent as one HTTP chunk per element.
    pub chunks: Vec<Vec<u8>>,
    /// Close the connection after this many chunks, without the terminating chunk.
    pub drop_after: Option<usize>,
    /// Keep the connection open without sending anything after the chunks.
    pub stall: bool,
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
            ..Canned::default()
        }
    }
}

/// A request as received: method, path, lower-cased headers and body.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: serde_json::Value,
}

impl Recorded {
    /// The value of header `name` (lower case), if sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Serves `responses` in order, one per connection, on a free 127.0.0.1 port; returns the
/// base URL (`http://127.0.0.1:<port>`) and the recorded requests. The server task ends with the
/// test's runtime.
pub async fn serve(responses: Vec<Canned>) -> (String, Arc<Mutex<Vec<Recorded>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let recorded = Arc::new(Mutex::new(Vec::new()));
    let log = recorded.clone();
    tokio::spawn(async move {
        for canned in responses {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            // Read the head, then the body by content-length.
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
            let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
            let mut lines = head.split("\r\n");
            let mut first = lines.next().unwrap().split(' ');
            let (method, path) = (
                first.next().unwrap().to_string(),
                first.next().unwrap().to_string(),
            );
            let headers: Vec<(String, String)> = lines
                .filter_map(|l| l.split_once(':'))
                .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
                .collect();
            let len: usize = headers
                .iter()
                .find(|(k, _)| k == "content-length")
                .map(|(_, v)| v.parse().unwrap())
                .unwrap_or(0);
            while buf.len() < head_end + len {
                let n = socket.read(&mut tmp).await.unwrap();
                assert!(n > 0, "client closed mid-body");
                buf.extend_from_slice(&tmp[..n]);
            }
            let body = serde_json::from_slice(&buf[head_end..head_end + len]).unwrap_or_default();
            log.lock().unwrap().push(Recorded {
                method,
                path,
                headers,
                body,
            });

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
            if socket.write_all(out.as_bytes()).await.is_err() {
                continue;
            }
            let limit = canned.drop_after.unwrap_or(usize::MAX);
            for chunk in canned.chunks.iter().take(limit) {
                let mut frame = format!("{:x}\r\n", chunk.len()).into_bytes();
                frame.extend_from_slice(chunk);
                frame.extend_from_slice(b"\r\n");
                if socket.write_all(&frame).await.is_err() {
                    break;
                }
                let _ = socket.flush().await;
            }
            if canned.stall {
                tokio::time::sleep(Duration::from_secs(60)).await;
            }
            if canned.drop_after.is_none() {
                let _ = socket.write_all(b"0\r\n\r\n").await;
            }
            let _ = socket.shutdown().await;
        }
    });
    (base, recorded)
}
