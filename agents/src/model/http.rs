//! The HTTP part shared by both providers: one POST per attempt, status handling, idle timeout.

use super::retry::retry_after_from_headers;
use super::sse::{ByteStream, error_chain, truncate_bytes, with_idle_timeout};
use super::types::{ApiKey, ModelError, ModelEvent, ModelStream, ProviderSettings, SettingsOrigin};
use bytes::Bytes;
use futures::StreamExt;
use reqwest::header::{HeaderMap, HeaderValue};
use std::time::Duration;

/// Largest error-response body kept in [`ModelError::Http::body`], in bytes.
pub const MAX_ERROR_BODY_BYTES: usize = 2_000;

/// A successful (2xx) response body.
pub(crate) struct ResponseBody {
    /// The server answered with `application/json` (a non-streaming reply) rather than SSE.
    pub(crate) is_json: bool,
    /// The body, guarded by the idle timeout.
    pub(crate) bytes: ByteStream,
}

/// Collects a whole (non-streaming) body, at most `max_bytes`.
///
/// Errors: whatever the byte stream fails with; [`ModelError::Decode`] when the body is larger.
pub(crate) async fn collect_body(
    mut bytes: ByteStream,
    max_bytes: usize,
) -> Result<Vec<u8>, ModelError> {
    let mut body = Vec::new();
    while let Some(chunk) = bytes.next().await {
        body.extend_from_slice(&chunk?);
        if body.len() > max_bytes {
            return Err(ModelError::Decode(format!(
                "the model's JSON reply is larger than {max_bytes} bytes"
            )));
        }
    }
    Ok(body)
}

/// Turns a 2xx body into model events: SSE through `parse_sse`, or, when the server answered
/// with a whole JSON document (`application/json`), through `parse_json`.
pub(crate) fn reply_stream(
    body: ResponseBody,
    parse_sse: impl FnOnce(ByteStream) -> ModelStream,
    parse_json: fn(&[u8]) -> Vec<Result<ModelEvent, ModelError>>,
) -> ModelStream {
    if !body.is_json {
        return parse_sse(body.bytes);
    }
    Box::pin(
        futures::stream::once(collect_body(body.bytes, MAX_JSON_BODY_BYTES)).flat_map(
            move |collected| {
                futures::stream::iter(match collected {
                    Ok(bytes) => parse_json(&bytes),
                    Err(e) => vec![Err(e)],
                })
            },
        ),
    )
}

/// A stream holding only `error`.
pub(crate) fn error_stream(error: ModelError) -> ModelStream {
    Box::pin(futures::stream::once(async move { Err(error) }))
}

/// The model name and output-token limit of a request: the request's own, falling back to the
/// provider settings when empty / zero. Shared by both request-body builders.
pub(crate) fn model_and_limit<'a>(
    request: &'a super::types::ModelRequest,
    settings: &'a super::types::ProviderSettings,
) -> (&'a str, u32) {
    let model = if request.model.is_empty() {
        &settings.model
    } else {
        &request.model
    };
    let limit = if request.max_output_tokens == 0 {
        settings.max_output_tokens
    } else {
        request.max_output_tokens
    };
    (model, limit)
}

/// Largest non-streaming JSON reply accepted, in bytes.
pub(crate) const MAX_JSON_BODY_BYTES: usize = 64 * 1024 * 1024;

/// Sends streaming requests for one provider; cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct HttpTransport {
    client: reqwest::Client,
    idle_timeout: Duration,
    /// Only used to scrub the key from error text a server might echo back.
    api_key: ApiKey,
    /// The configured base URL, named in endpoint errors.
    base_url: String,
    /// Where the key and base URL came from, named in errors.
    origin: SettingsOrigin,
}

impl HttpTransport {
    /// A transport for `settings.base_url` with `settings.idle_timeout_ms` (no byte for that
    /// long → connection error; also bounds connecting and waiting for the response headers).
    /// The key and [`SettingsOrigin`] are kept for scrubbing and for errors.
    ///
    /// For a plain `http://` base URL (a local server: Ollama, llama.cpp, the fake model) the
    /// system's root certificates are not loaded: reading every file of `/etc/ssl/certs` was
    /// most of ahelper's start-up time, and no TLS connection is ever made to such a server.
    pub(crate) fn new(settings: &ProviderSettings) -> Self {
        let base_url = settings.base_url.as_str();
        let idle_timeout = Duration::from_millis(settings.idle_timeout_ms.max(1));
        let mut builder = reqwest::Client::builder()
            .connect_timeout(idle_timeout)
            .user_agent(concat!("ahelper/", env!("CARGO_PKG_VERSION")));
        if base_url.starts_with("http://") {
            builder = builder.tls_certs_only(Vec::<reqwest::Certificate>::new());
        }
        let client = builder.build().unwrap_or_else(|e| {
            tracing::warn!(error = %e, "custom HTTP client failed to build; using defaults");
            reqwest::Client::new()
        });
        HttpTransport {
            client,
            idle_timeout,
            api_key: settings.api_key.clone(),
            base_url: base_url.to_string(),
            origin: settings.origin.clone(),
        }
    }

    /// POSTs `body` (JSON) to `url` with `headers` and returns the response body as a byte
    /// stream guarded by the idle timeout, with its media type.
    ///
    /// Errors: [`ModelError::Connection`] when connecting fails or no response headers arrive
    /// within the idle timeout; [`ModelError::Http`] for a non-2xx status, with the body cut to
    /// [`MAX_ERROR_BODY_BYTES`] and `retry-after`/`retry-after-ms` in milliseconds.
    pub(crate) async fn post_stream(
        &self,
        url: &str,
        headers: HeaderMap,
        body: Bytes,
    ) -> Result<ResponseBody, ModelError> {
        let send = self
            .client
            .post(url)
            .headers(headers)
            .header(
                reqwest::header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )
            .header(
                reqwest::header::ACCEPT,
                HeaderValue::from_static("text/event-stream"),
            )
            .body(body)
            .send();
        let response = match tokio::time::timeout(self.idle_timeout, send).await {
            Err(_) => {
                return Err(ModelError::Connection(format!(
                    "no response from {url} within {} ms (idle timeout; slow local models may need a larger `retry.idle_timeout_ms`)",
                    self.idle_timeout.as_millis()
                )));
            }
            Ok(Err(e)) => return Err(ModelError::Connection(self.scrub(&error_chain(&e)))),
            Ok(Ok(r)) => r,
        };
        let status = response.status();
        if !status.is_success() {
            let retry_after_ms = retry_after_from_headers(response.headers(), chrono::Utc::now());
            let html =
                matches!(body_kind(response.headers()), BodyKind::Other(t) if t == "text/html");
            let body = self.read_error_body(response).await;
            let body = if html { html_summary(&body) } else { body };
            return Err(self.status_error(url, status.as_u16(), body, retry_after_ms));
        }
        let is_json = match body_kind(response.headers()) {
            BodyKind::Sse => false,
            BodyKind::Json => true,
            BodyKind::Other(content_type) => {
                return Err(
                    ModelError::not_an_endpoint(format!("content-type {content_type}"))
                        .with_endpoint(url, &self.base_url, &self.origin),
                );
            }
        };
        Ok(ResponseBody {
            is_json,
            bytes: with_idle_timeout(response.bytes_stream(), self.idle_timeout),
        })
    }

    /// The error for a non-2xx `status` from `url`: [`ModelError::Auth`] for 401/403 (naming
    /// the key's environment variable), [`ModelError::NotFound`] for 404 (naming `base_url` and
    /// where it was set), [`ModelError::NotAnEndpoint`] for 405/501 (the server takes no POST
    /// there: a web server, not a model API), else [`ModelError::Http`].
    fn status_error(
        &self,
        url: &str,
        status: u16,
        body: String,
        retry_after_ms: Option<u64>,
    ) -> ModelError {
        match status {
            401 | 403 => ModelError::Auth {
                status,
                api_key_env: self.origin.api_key_env.clone(),
                body,
            },
            404 => ModelError::NotFound {
                url: url.to_string(),
                base_url: self.base_url.clone(),
                base_url_origin: self.origin.base_url.clone(),
                body,
            },
            405 | 501 => ModelError::not_an_endpoint(format!(
                "HTTP {status} {}: {body}",
                if status == 405 {
                    "Method Not Allowed"
                } else {
                    "Not Implemented"
                }
            ))
            .with_endpoint(url, &self.base_url, &self.origin),
            _ => ModelError::Http {
                status,
                body,
                retry_after_ms,
            },
        }
    }

    /// Reads at most [`MAX_ERROR_BODY_BYTES`] (plus one chunk) of an error body, within the idle
    /// timeout, as lossy UTF-8 with the API key scrubbed.
    async fn read_error_body(&self, response: reqwest::Response) -> String {
        let mut bytes = Vec::new();
        let mut stream = with_idle_timeout(response.bytes_stream(), self.idle_timeout);
        while bytes.len() <= MAX_ERROR_BODY_BYTES {
            match stream.next().await {
                Some(Ok(chunk)) => bytes.extend_from_slice(&chunk),
                _ => break,
            }
        }
        let text = String::from_utf8_lossy(&bytes);
        truncate_bytes(&self.scrub(text.trim()), MAX_ERROR_BODY_BYTES)
    }

    /// One model request with retries: POSTs `body` to `path` under the base URL of `settings`
    /// with `headers` (or fails with the header error), turns each reply into events with
    /// `parse_sse` (streaming reply) or `parse_json` (an `application/json` reply), scrubs the
    /// key from every error, and retries per the retry settings of `settings`. Shared by both
    /// providers.
    pub(crate) fn stream_with_retries<P>(
        &self,
        settings: &ProviderSettings,
        path: &str,
        headers: Result<HeaderMap, ModelError>,
        body: &serde_json::Value,
        parse_sse: P,
        parse_json: fn(&[u8]) -> Vec<Result<ModelEvent, ModelError>>,
    ) -> ModelStream
    where
        P: Fn(ByteStream) -> ModelStream + Clone + Send + Sync + 'static,
    {
        let policy = super::retry::RetryPolicy::from_settings(settings);
        let url = join_url(&settings.base_url, path);
        let body = Bytes::from(body.to_string());
        let transport = self.clone();
        super::retry::with_retries(policy, move || {
            let (url, headers, body, transport, parse_sse) = (
                url.clone(),
                headers.clone(),
                body.clone(),
                transport.clone(),
                parse_sse.clone(),
            );
            async move {
                let sent = match headers {
                    Ok(h) => transport.post_stream(&url, h, body).await,
                    Err(e) => Err(e),
                };
                match sent {
                    Ok(reply) => transport.scrub_errors(
                        transport.locate_errors(reply_stream(reply, parse_sse, parse_json), &url),
                    ),
                    Err(e) => error_stream(e),
                }
            }
        })
    }

    /// `stream` with the URL `url` and this transport's `base_url` filled into every
    /// [`ModelError::NotAnEndpoint`] a reply parser yields (parsers do not know them).
    fn locate_errors(&self, stream: ModelStream, url: &str) -> ModelStream {
        let (url, base_url, origin) = (url.to_string(), self.base_url.clone(), self.origin.clone());
        Box::pin(
            stream.map(move |item| item.map_err(|e| e.with_endpoint(&url, &base_url, &origin))),
        )
    }

    /// `stream` with the API key replaced by `<redacted>` in every error it yields, so a key a
    /// server echoes back inside a 200 stream (an `error` event, a malformed line quoted in a
    /// decode error) reaches neither the error nor the [`ModelEvent::Retry`] reason built from it.
    pub(crate) fn scrub_errors(&self, stream: ModelStream) -> ModelStream {
        let transport = self.clone();
        Box::pin(stream.map(move |item| item.map_err(|e| transport.scrub_error(e))))
    }

    /// `error` with the API key replaced by `<redacted>` in all its text.
    fn scrub_error(&self, error: ModelError) -> ModelError {
        match error {
            ModelError::Http {
                status,
                body,
                retry_after_ms,
            } => ModelError::Http {
                status,
                body: self.scrub(&body),
                retry_after_ms,
            },
            ModelError::Api { kind, message } => ModelError::Api {
                kind: self.scrub(&kind),
                message: self.scrub(&message),
            },
            ModelError::Auth {
                status,
                api_key_env,
                body,
            } => ModelError::Auth {
                status,
                api_key_env,
                body: self.scrub(&body),
            },
            ModelError::NotFound {
                url,
                base_url,
                base_url_origin,
                body,
            } => ModelError::NotFound {
                url,
                base_url,
                base_url_origin,
                body: self.scrub(&body),
            },
            ModelError::NotAnEndpoint {
                what,
                url,
                base_url,
                base_url_origin,
            } => ModelError::NotAnEndpoint {
                what: self.scrub(&what),
                url,
                base_url,
                base_url_origin,
            },
            ModelError::Incomplete(m) => ModelError::Incomplete(self.scrub(&m)),
            ModelError::Connection(m) => ModelError::Connection(self.scrub(&m)),
            ModelError::Decode(m) => ModelError::Decode(self.scrub(&m)),
            ModelError::MalformedEvent(m) => ModelError::MalformedEvent(self.scrub(&m)),
            ModelError::Cancelled => ModelError::Cancelled,
        }
    }

    /// `text` with every occurrence of the API key replaced by `<redacted>`; a key shorter than
    /// [`crate::redact::MIN_SECRET_LEN`] (a local server's dummy, `local`) is no secret and would
    /// shred words of the message, as for every other redaction.
    fn scrub(&self, text: &str) -> String {
        let key = self.api_key.0.trim();
        if key.len() < crate::redact::MIN_SECRET_LEN {
            return text.to_string();
        }
        text.replace(key, "<redacted>")
    }
}

/// How a 2xx body is read, by its `content-type`.
#[derive(Debug, PartialEq, Eq)]
enum BodyKind {
    /// `text/event-stream`, or no content type at all (lenient for minimal local servers).
    Sse,
    /// `application/json` or another `…+json` / `…/json` type: a non-streaming reply.
    Json,
    /// Anything else (`text/html`, `text/plain`, …): not a model API; the type as sent.
    Other(String),
}

/// The [`BodyKind`] of a response by its `content-type` header.
fn body_kind(headers: &HeaderMap) -> BodyKind {
    let Some(value) = headers.get(reqwest::header::CONTENT_TYPE) else {
        return BodyKind::Sse;
    };
    let raw = String::from_utf8_lossy(value.as_bytes()).trim().to_string();
    let essence = raw
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    if essence.is_empty() || essence == "text/event-stream" {
        BodyKind::Sse
    } else if essence.ends_with("/json") || essence.ends_with("+json") {
        BodyKind::Json
    } else {
        BodyKind::Other(essence)
    }
}

/// An HTML error page in a few words: `an HTML page titled "502 Bad Gateway"` (or `an HTML
/// page` without a title), instead of the whole page in the error message.
fn html_summary(body: &str) -> String {
    let lower = body.to_ascii_lowercase();
    let title = lower.find("<title>").and_then(|start| {
        let start = start + "<title>".len();
        let end = start + lower[start..].find("</title>")?;
        body.get(start..end)
    });
    match title.map(str::trim).filter(|t| !t.is_empty()) {
        Some(t) => format!("an HTML page titled \"{}\"", truncate_bytes(t, 200)),
        None => "an HTML page".to_string(),
    }
}

/// `base_url` without trailing slashes joined with `path` (which starts with `/`).
pub(crate) fn join_url(base_url: &str, path: &str) -> String {
    format!("{}{}", base_url.trim_end_matches('/'), path)
}

/// Parses a whole (non-streaming) reply body as JSON; the error says why and quotes the start of
/// the body.
pub(crate) fn parse_reply_json(body: &[u8]) -> Result<serde_json::Value, String> {
    serde_json::from_slice(body).map_err(|e| {
        format!(
            "the JSON reply does not parse ({e}): {}",
            truncate_bytes(&String::from_utf8_lossy(body), 200)
        )
    })
}

/// A header value holding a secret: marked sensitive so reqwest/http never print it.
pub(crate) fn secret_header(value: &str) -> Result<HeaderValue, ModelError> {
    let mut v = HeaderValue::from_str(value).map_err(|_| ModelError::Api {
        kind: "authentication_error".to_string(),
        message: "the API key contains characters that cannot be sent in an HTTP header; \
                  check the environment variable named by api_key_env"
            .to_string(),
    })?;
    v.set_sensitive(true);
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transport_for_tests(key: &str) -> HttpTransport {
        HttpTransport::new(&ProviderSettings {
            origin: SettingsOrigin {
                api_key_env: "MY_KEY".into(),
                base_url: "--base-url".into(),
            },
            ..ProviderSettings::for_tests(
                super::super::types::ProviderKind::Anthropic,
                "http://127.0.0.1:1",
                key,
            )
        })
    }

    #[test]
    fn statuses_401_403_404_become_typed_errors_naming_the_settings() {
        let t = transport_for_tests("sk-secret-123");
        let url = "http://127.0.0.1:1/v1/messages";
        let e = t.status_error(url, 401, "invalid x-api-key".into(), None);
        assert_eq!(
            e.to_string(),
            "the API key in MY_KEY was refused (HTTP 401): check it (the server said: invalid x-api-key)"
        );
        assert!(!e.is_retryable() && e.is_settings_error());
        let e = t.status_error(url, 403, String::new(), None);
        assert!(
            e.to_string().contains("MY_KEY was refused (HTTP 403)"),
            "{e}"
        );
        let e = t.status_error(url, 404, "no route".into(), Some(5));
        let text = e.to_string();
        assert!(text.contains(url), "{text}");
        assert!(
            text.contains("check base_url http://127.0.0.1:1 (set by --base-url)"),
            "{text}"
        );
        assert!(!e.is_retryable());
        assert!(matches!(
            t.status_error(url, 500, String::new(), None),
            ModelError::Http { status: 500, .. }
        ));
        // a web server that takes no POST: not a model API, not retried
        let e = t.status_error(url, 501, html_summary(PYTHON_501), None);
        let text = e.to_string();
        assert!(
            text.starts_with(
                "this does not look like an Anthropic/OpenAI-compatible endpoint (HTTP 501 Not \
                 Implemented: an HTML page titled \"Error response\" from http://127.0.0.1:1/v1/messages)"
            ),
            "{text}"
        );
        assert!(!e.is_retryable() && e.is_settings_error());
        assert_eq!(html_summary("<html>x</html>"), "an HTML page");
    }

    /// What `python3 -m http.server` answers to a POST.
    const PYTHON_501: &str = "<!DOCTYPE HTML>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
        <title>Error response</title>\n</head>\n<body>\n<h1>Error response</h1>\n\
        <p>Error code: 501</p>\n</body>\n</html>";

    #[tokio::test]
    async fn a_foreign_reply_echoing_the_key_is_scrubbed() {
        let t = transport_for_tests("sk-secret-123");
        let stream: ModelStream = Box::pin(futures::stream::iter(vec![Err(
            ModelError::not_an_endpoint(
                r#"a JSON reply without "content": {"x-api-key":"sk-secret-123"}"#,
            ),
        )]));
        let got: Vec<_> = t
            .scrub_errors(t.locate_errors(stream, "http://127.0.0.1:1/v1/messages"))
            .collect()
            .await;
        let text = got[0].as_ref().unwrap_err().to_string();
        assert!(!text.contains("sk-secret-123"), "{text}");
        assert!(
            text.contains("<redacted>") && text.contains("from http://127.0.0.1:1/v1/messages"),
            "{text}"
        );
    }

    #[test]
    fn content_types_decide_how_a_body_is_read() {
        let kind = |ct: Option<&str>| {
            let mut h = HeaderMap::new();
            if let Some(ct) = ct {
                h.insert(
                    reqwest::header::CONTENT_TYPE,
                    HeaderValue::from_str(ct).unwrap(),
                );
            }
            body_kind(&h)
        };
        assert_eq!(kind(None), BodyKind::Sse);
        assert_eq!(
            kind(Some("text/event-stream; charset=utf-8")),
            BodyKind::Sse
        );
        assert_eq!(kind(Some("application/json")), BodyKind::Json);
        assert_eq!(kind(Some("application/problem+json")), BodyKind::Json);
        assert_eq!(
            kind(Some("text/html; charset=UTF-8")),
            BodyKind::Other("text/html".into())
        );
    }

    #[test]
    fn join_url_handles_trailing_slashes() {
        assert_eq!(
            join_url("https://api.anthropic.com/", "/v1/messages"),
            "https://api.anthropic.com/v1/messages"
        );
        assert_eq!(
            join_url("http://127.0.0.1:8089/v1", "/chat/completions"),
            "http://127.0.0.1:8089/v1/chat/completions"
        );
    }

    #[test]
    fn scrub_leaves_a_short_dummy_key_alone() {
        let t = transport_for_tests("local");
        assert_eq!(
            t.scrub("slow local models may need more time"),
            "slow local models may need more time"
        );
    }

    #[test]
    fn scrub_removes_the_key() {
        let t = transport_for_tests("sk-secret-123");
        assert_eq!(
            t.scrub("bad key sk-secret-123 given"),
            "bad key <redacted> given"
        );
    }

    #[tokio::test]
    async fn errors_inside_a_stream_are_scrubbed() {
        let t = transport_for_tests("sk-secret-123");
        let stream: ModelStream = Box::pin(futures::stream::iter(vec![
            Ok(ModelEvent::TextDelta { text: "ok".into() }),
            Err(ModelError::Api {
                kind: "overloaded_error".into(),
                message: "echo: x-api-key: sk-secret-123".into(),
            }),
        ]));
        let got: Vec<_> = t.scrub_errors(stream).collect().await;
        assert_eq!(
            got[1],
            Err(ModelError::Api {
                kind: "overloaded_error".into(),
                message: "echo: x-api-key: <redacted>".into(),
            })
        );
    }

    #[test]
    fn secret_headers_are_sensitive_and_invalid_keys_are_reported_without_the_key() {
        assert!(secret_header("abc").unwrap().is_sensitive());
        let err = secret_header("bad\nkey-xyz").unwrap_err();
        assert!(!err.to_string().contains("key-xyz"));
    }
}
