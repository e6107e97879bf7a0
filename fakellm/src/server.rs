//! The HTTP server: routing, recording, fault injection and chunked SSE delivery.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderValue, RETRY_AFTER};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::{JoinHandle, JoinSet};

use crate::condition::workdir_of;
use crate::reply::{Inspection, Reply, split_random, split_sse_events};
use crate::script::{
    DEFAULT_RETRY_AFTER_SECS, DEFAULT_STALL_MS, Fault, FaultKind, RequestFacts, Script, Selection,
    Turn,
};
use crate::{anthropic, openai};

type Body = UnsyncBoxBody<Bytes, std::io::Error>;

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The script cannot be played.
    #[error(transparent)]
    Script(#[from] crate::script::ScriptError),
    /// Binding 127.0.0.1:port failed.
    #[error(
        "cannot listen on 127.0.0.1:{port}: {source} (pick another --port, or 0 for a free one)"
    )]
    Bind {
        /// The port asked for (0 = any free port).
        port: u16,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The Tokio runtime of [`FakeLlm::start_blocking`] could not be built.
    #[error("cannot start the fake LLM server's runtime: {0}")]
    Runtime(std::io::Error),
}

/// Server settings other than the script.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerOptions {
    /// Port on 127.0.0.1; 0 picks a free one.
    pub port: u16,
    /// Print one line per request to stderr (method, path, conversation, turn, fault).
    pub log_requests: bool,
}

/// The wire format of a model request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WireFormat {
    /// Anthropic Messages (`POST /v1/messages`).
    Anthropic,
    /// OpenAI Chat Completions (`POST /v1/chat/completions` or `/chat/completions`).
    OpenAi,
}

/// One request as the server received it, with what the script made of it.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    /// Arrival order, starting at 1.
    pub serial: u64,
    /// HTTP method, e.g. `POST`.
    pub method: String,
    /// URI path without the query, e.g. `/v1/messages`.
    pub path: String,
    /// Query string, if any.
    pub query: Option<String>,
    /// Every header in arrival order; names are lower case (non-UTF-8 values lossily decoded).
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON; `Value::Null` when empty or not JSON.
    pub body: Value,
    /// The raw body bytes.
    pub body_bytes: Bytes,
    /// Wall-clock arrival time.
    pub received_at: SystemTime,
    /// Monotonic arrival time, for measuring gaps between requests.
    pub received: Instant,
    /// Monotonic time the response's last body frame was handed to the connection: the end of
    /// the model's reply as the client can first see it. `None` while the response is still
    /// being written, or when the client went away before its end.
    pub replied: Option<Instant>,
    /// Wire format, for model endpoints.
    pub format: Option<WireFormat>,
    /// Whether the request asked for `"stream": true`.
    pub stream: bool,
    /// Tool results counted in the request.
    pub tool_results: usize,
    /// Assistant messages counted in the request.
    pub assistant_messages: usize,
    /// The agent's working directory named in the request (see [`crate::condition`]).
    pub workdir: Option<PathBuf>,
    /// Index of the conversation that answered, if one matched.
    pub conversation: Option<usize>,
    /// Index of the turn played (the number of turns for the fallback text).
    pub turn: Option<usize>,
    /// The fault injected into this response, if any.
    pub fault: Option<FaultKind>,
}

impl RecordedRequest {
    /// The first header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

struct State {
    script: Script,
    log_requests: bool,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    requests: Vec<RecordedRequest>,
    served: HashMap<(usize, usize), u32>,
    conversation_counts: Vec<usize>,
    /// Conversation chosen for each (system prompt, first user message).
    pinned: HashMap<String, usize>,
    next_serial: u64,
}

impl State {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave `Inner` half-updated in a way that
        // matters for a test server, so a poisoned lock is used as is.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A running fake LLM server on 127.0.0.1. Dropping it (or [`FakeLlm::shutdown`]) stops it
/// and aborts open connections.
pub struct FakeLlm {
    addr: SocketAddr,
    state: Arc<State>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl std::fmt::Debug for FakeLlm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeLlm")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl FakeLlm {
    /// Starts serving `script` on a free port of 127.0.0.1, on the current Tokio runtime.
    ///
    /// Errors: [`ServerError::Script`] if the script is invalid or a `raw_sse` file is
    /// missing, [`ServerError::Bind`]. Panics outside a Tokio runtime.
    pub async fn start(script: Script) -> Result<FakeLlm, ServerError> {
        Self::start_with(script, ServerOptions::default()).await
    }

    /// Like [`FakeLlm::start`] with a port and logging choice.
    pub async fn start_with(
        script: Script,
        options: ServerOptions,
    ) -> Result<FakeLlm, ServerError> {
        Self::launch(script, options, &tokio::runtime::Handle::current(), None)
    }

    /// Starts the server on its own two-thread runtime, for tests that are not async
    /// (e.g. tests that run the `ahelper` binary). Works inside or outside a runtime.
    pub fn start_blocking(script: Script) -> Result<FakeLlm, ServerError> {
        Self::start_blocking_with(script, ServerOptions::default())
    }

    /// Like [`FakeLlm::start_blocking`] with a port and logging choice.
    pub fn start_blocking_with(
        script: Script,
        options: ServerOptions,
    ) -> Result<FakeLlm, ServerError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("fake-llm")
            .enable_all()
            .build()
            .map_err(ServerError::Runtime)?;
        let handle = runtime.handle().clone();
        Self::launch(script, options, &handle, Some(runtime))
    }

    fn launch(
        script: Script,
        options: ServerOptions,
        handle: &tokio::runtime::Handle,
        runtime: Option<tokio::runtime::Runtime>,
    ) -> Result<FakeLlm, ServerError> {
        script.validate()?;
        script.check_raw_files()?;
        let bind_err = |source| ServerError::Bind {
            port: options.port,
            source,
        };
        let listener =
            std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, options.port)).map_err(bind_err)?;
        listener.set_nonblocking(true).map_err(bind_err)?;
        let addr = listener.local_addr().map_err(bind_err)?;
        let listener = {
            let _guard = handle.enter();
            tokio::net::TcpListener::from_std(listener).map_err(bind_err)?
        };
        let state = Arc::new(State {
            inner: Mutex::new(Inner {
                conversation_counts: vec![0; script.conversations.len()],
                ..Inner::default()
            }),
            script,
            log_requests: options.log_requests,
        });
        let (stop, stopped) = oneshot::channel();
        let task = handle.spawn(accept_loop(listener, state.clone(), stopped));
        Ok(FakeLlm {
            addr,
            state,
            stop: Some(stop),
            task: Some(task),
            runtime,
        })
    }

    /// The bound address (127.0.0.1 and the port).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The bound port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `http://127.0.0.1:PORT`, the Anthropic base URL (requests go to `{base}/v1/messages`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `http://127.0.0.1:PORT/v1`, the OpenAI base URL (requests go to
    /// `{base}/chat/completions`).
    pub fn openai_base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Every request received so far, in arrival order (health checks included).
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.state.lock().requests.clone()
    }

    /// The requests to the model endpoints (`/v1/messages`, `/chat/completions`) only.
    pub fn model_requests(&self) -> Vec<RecordedRequest> {
        self.model_requests_since(0)
    }

    /// How many model requests ([`FakeLlm::model_requests`]) were received so far, without
    /// copying them.
    pub fn model_request_count(&self) -> usize {
        let inner = self.state.lock();
        inner.requests.iter().filter(|r| r.format.is_some()).count()
    }

    /// The model requests after the first `skip` ones, in arrival order: with `skip` from
    /// [`FakeLlm::model_request_count`], those received since, without copying the earlier
    /// ones (each holds its whole body).
    pub fn model_requests_since(&self, skip: usize) -> Vec<RecordedRequest> {
        let inner = self.state.lock();
        inner
            .requests
            .iter()
            .filter(|r| r.format.is_some())
            .skip(skip)
            .cloned()
            .collect()
    }

    /// Drops every request recorded so far (each holds its whole body), e.g. between the runs
    /// of a long benchmark whose own memory is measured; the counts per conversation
    /// ([`FakeLlm::conversation_counts`]) and the script's progress are kept. A response still
    /// being written records its end in no request.
    pub fn forget_requests(&self) {
        self.state.lock().requests.clear();
    }

    /// Model requests answered by each conversation, indexed like
    /// [`Script::conversations`].
    pub fn conversation_counts(&self) -> Vec<usize> {
        self.state.lock().conversation_counts.clone()
    }

    /// The script being played.
    pub fn script(&self) -> &Script {
        &self.state.script
    }

    /// Stops the server and aborts open connections (same as dropping it).
    pub fn shutdown(self) {}
}

impl Drop for FakeLlm {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.abort();
        }
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// Accepts connections until `stopped` fires; dropping the `JoinSet` aborts open connections.
async fn accept_loop(
    listener: tokio::net::TcpListener,
    state: Arc<State>,
    mut stopped: oneshot::Receiver<()>,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut stopped => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    let state = state.clone();
                    connections.spawn(async move {
                        let service = hyper::service::service_fn(move |req| handle(state.clone(), req));
                        // Connection errors (client gone, injected drops) end only this connection.
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                            .await;
                    });
                }
                // Out of file descriptors and the like: back off instead of spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Route {
    Health,
    Models,
    Model(WireFormat),
    WrongMethod,
    NotFound,
}

fn route(method: &Method, path: &str) -> Route {
    let path = path.trim_end_matches('/');
    let (expected, route) = match path {
        "/health" => (Method::GET, Route::Health),
        "/v1/models" | "/models" => (Method::GET, Route::Models),
        "/v1/messages" => (Method::POST, Route::Model(WireFormat::Anthropic)),
        "/v1/chat/completions" | "/chat/completions" => {
            (Method::POST, Route::Model(WireFormat::OpenAi))
        }
        _ => return Route::NotFound,
    };
    if *method == expected {
        route
    } else {
        Route::WrongMethod
    }
}

/// A request as read off the connection, with what the server made of it.
struct Arrival {
    received_at: SystemTime,
    received: Instant,
    method: Method,
    path: String,
    query: Option<String>,
    headers: Vec<(String, String)>,
    body_bytes: Bytes,
    json: Value,
    route: Route,
    format: Option<WireFormat>,
    inspection: Inspection,
    workdir: Option<PathBuf>,
}

async fn handle(state: Arc<State>, req: Request<Incoming>) -> Result<Response<Body>, Infallible> {
    let arrival = read_request(req).await;
    let selection = select_turn(&state, &arrival);
    let (serial, fault) = record(&state, &arrival, selection.as_ref());
    if state.log_requests {
        log_request(
            &state.script,
            serial,
            &arrival,
            selection.as_ref(),
            fault.as_ref(),
        );
    }
    let response = respond(&state, &arrival, selection, serial, fault.as_ref()).await;
    Ok(response.map(|body| {
        MarkEnd {
            inner: body,
            state: Arc::clone(&state),
            serial,
            marked: false,
        }
        .boxed_unsync()
    }))
}

/// A response body that records in the request log ([`RecordedRequest::replied`]) when its
/// last frame was handed to the connection.
struct MarkEnd {
    inner: Body,
    state: Arc<State>,
    serial: u64,
    marked: bool,
}

impl MarkEnd {
    fn mark(&mut self) {
        if !self.marked {
            self.marked = true;
            let now = Instant::now();
            let mut inner = self.state.lock();
            if let Some(request) = inner.requests.iter_mut().find(|r| r.serial == self.serial) {
                request.replied = Some(now);
            }
        }
    }
}

impl hyper::body::Body for MarkEnd {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        let polled = std::pin::Pin::new(&mut self.inner).poll_frame(cx);
        // A body of known length is not polled again after its last frame: it ends there.
        let ended = match &polled {
            std::task::Poll::Ready(None) => true,
            std::task::Poll::Ready(Some(Ok(_))) => self.inner.is_end_stream(),
            _ => false,
        };
        if ended {
            self.mark();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

/// Reads the body and works out the route, the wire format and the agent's working directory.
async fn read_request(req: Request<Incoming>) -> Arrival {
    let received_at = SystemTime::now();
    let received = Instant::now();
    let (parts, body) = req.into_parts();
    let body_bytes = body
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    let json: Value = serde_json::from_slice(&body_bytes).unwrap_or(Value::Null);
    let path = parts.uri.path().to_owned();
    let route = route(&parts.method, &path);
    let (format, inspection) = match route {
        Route::Model(WireFormat::Anthropic) => {
            (Some(WireFormat::Anthropic), anthropic::inspect(&json))
        }
        Route::Model(WireFormat::OpenAi) => (Some(WireFormat::OpenAi), openai::inspect(&json)),
        _ => (None, Inspection::default()),
    };
    let workdir = format.and_then(|_| workdir_of(&[&inspection.system, &inspection.first_user]));
    let headers = parts
        .headers
        .iter()
        .map(|(n, v)| {
            (
                n.as_str().to_owned(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    Arrival {
        received_at,
        received,
        query: parts.uri.query().map(str::to_owned),
        method: parts.method,
        path,
        headers,
        body_bytes,
        json,
        route,
        format,
        inspection,
        workdir,
    }
}

/// Chooses the turn of a model request. The conversation chosen for an agent's first request
/// is kept for later requests with the same system prompt and first user message, so that
/// disk conditions decide once per conversation.
fn select_turn(state: &State, arrival: &Arrival) -> Option<Selection> {
    arrival.format?;
    let inspection = &arrival.inspection;
    let facts = RequestFacts {
        texts: [&inspection.system, &inspection.first_user],
        tool_results: inspection.tool_results,
        assistant_messages: inspection.assistant_messages,
        workdir: arrival.workdir.as_deref(),
    };
    let key = format!("{}\u{0}{}", inspection.system, inspection.first_user);
    let pinned = state.lock().pinned.get(&key).copied();
    let selection = state.script.select(&facts, pinned)?;
    state
        .lock()
        .pinned
        .entry(key)
        .or_insert(selection.conversation);
    Some(selection)
}

/// Records the request and decides whether this serving of the turn gets its fault.
fn record(state: &State, arrival: &Arrival, selection: Option<&Selection>) -> (u64, Option<Fault>) {
    let mut inner = state.lock();
    inner.next_serial += 1;
    let serial = inner.next_serial;
    let mut fault = None;
    if let Some(sel) = selection {
        inner.conversation_counts[sel.conversation] += 1;
        let served = inner
            .served
            .entry((sel.conversation, sel.turn_index))
            .or_insert(0);
        fault = sel.turn.fault.clone().filter(|f| *served < f.times);
        *served += 1;
    }
    inner.requests.push(RecordedRequest {
        serial,
        method: arrival.method.to_string(),
        path: arrival.path.clone(),
        query: arrival.query.clone(),
        headers: arrival.headers.clone(),
        body: arrival.json.clone(),
        body_bytes: arrival.body_bytes.clone(),
        received_at: arrival.received_at,
        received: arrival.received,
        replied: None,
        format: arrival.format,
        stream: arrival.inspection.stream,
        tool_results: arrival.inspection.tool_results,
        assistant_messages: arrival.inspection.assistant_messages,
        workdir: arrival.workdir.clone(),
        conversation: selection.map(|s| s.conversation),
        turn: selection.map(|s| s.turn_index),
        fault: fault.as_ref().map(|f| f.kind),
    });
    (serial, fault)
}

/// The response for a routed request.
async fn respond(
    state: &State,
    arrival: &Arrival,
    selection: Option<Selection>,
    serial: u64,
    fault: Option<&Fault>,
) -> Response<Body> {
    let latency = Duration::from_millis(state.script.latency_ms);
    match arrival.route {
        Route::Health => json_response(StatusCode::OK, &json!({"status": "ok"})),
        Route::NotFound | Route::WrongMethod => {
            let status = if arrival.route == Route::NotFound {
                StatusCode::NOT_FOUND
            } else {
                StatusCode::METHOD_NOT_ALLOWED
            };
            let message = format!(
                "ahelper-fake-llm serves POST /v1/messages, POST /v1/chat/completions, POST /chat/completions, GET /v1/models and GET /health, not {} {}",
                arrival.method, arrival.path
            );
            json_response(
                status,
                &anthropic::error_body("not_found_error", &message, serial),
            )
        }
        Route::Models => {
            pause(latency).await;
            json_response(StatusCode::OK, &models_body(state.script.model_name()))
        }
        Route::Model(format) => {
            let delay = selection.as_ref().map_or(0, |s| s.turn.delay_ms);
            pause(latency + Duration::from_millis(delay)).await;
            respond_model(state, arrival, format, selection, serial, fault).await
        }
    }
}

/// Waits `duration`; no wait at all when it is zero. (A zero `tokio::time::sleep` still waits
/// for the timer's next 1 ms tick, which a 0 ms latency script must not add to every reply.)
async fn pause(duration: Duration) {
    if !duration.is_zero() {
        tokio::time::sleep(duration).await;
    }
}

/// The response of a model endpoint: the selected turn, or a 400 explaining what is wrong.
async fn respond_model(
    state: &State,
    arrival: &Arrival,
    format: WireFormat,
    selection: Option<Selection>,
    serial: u64,
    fault: Option<&Fault>,
) -> Response<Body> {
    let inspection = &arrival.inspection;
    if !arrival.json.is_object() {
        return invalid_request(format, serial, "the request body is not a JSON object");
    }
    let Some(sel) = selection else {
        let message = format!(
            "no conversation of the ahelper-fake-llm script matches this request: add a conversation without `match` and `when`, or one whose `match` occurs in the system prompt or the first user message (which starts {:?}) and whose `when` holds in the working directory ({})",
            inspection.first_user.chars().take(80).collect::<String>(),
            arrival
                .workdir
                .as_ref()
                .map_or("none named in the request".to_string(), |d| d
                    .display()
                    .to_string())
        );
        return invalid_request(format, serial, &message);
    };
    let model = inspection
        .model
        .clone()
        .unwrap_or_else(|| state.script.model_name().to_owned());
    let reply = Reply::new(serial, model, &sel.turn, arrival.body_bytes.len());
    respond_turn(&state.script, format, inspection, &sel, fault, &reply).await
}

fn log_request(
    script: &Script,
    serial: u64,
    arrival: &Arrival,
    selection: Option<&Selection>,
    fault: Option<&Fault>,
) {
    let mut line = format!("fake-llm: #{serial} {} {}", arrival.method, arrival.path);
    if let Some(sel) = selection {
        let name = script.conversations[sel.conversation]
            .name
            .as_deref()
            .unwrap_or("");
        line.push_str(&format!(
            " tool_results={} -> conversation {} {name} turn {}",
            arrival.inspection.tool_results, sel.conversation, sel.turn_index
        ));
    }
    if let Some(dir) = &arrival.workdir {
        line.push_str(&format!(" workdir={}", dir.display()));
    }
    if let Some(fault) = fault {
        line.push_str(&format!(" fault={}", fault.kind.as_str()));
    }
    eprintln!("{line}");
}

fn models_body(model: &str) -> Value {
    json!({"object": "list", "data": [{"id": model, "object": "model", "type": "model",
            "created": 0, "created_at": "2025-01-01T00:00:00Z", "owned_by": "ahelper-fake-llm",
            "display_name": model}],
           "has_more": false, "first_id": model, "last_id": model})
}

fn full_body(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

fn json_response(status: StatusCode, body: &Value) -> Response<Body> {
    let mut response = Response::new(full_body(body.to_string()));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

fn invalid_request(format: WireFormat, serial: u64, message: &str) -> Response<Body> {
    let body = match format {
        WireFormat::Anthropic => anthropic::error_body("invalid_request_error", message, serial),
        WireFormat::OpenAi => openai::error_body("invalid_request_error", message, None),
    };
    json_response(StatusCode::BAD_REQUEST, &body)
}

/// One step of a response body plan.
enum Step {
    Chunk(Bytes),
    Sleep(Duration),
    /// Abort the connection without the terminating chunk.
    Abort(&'static str),
}

/// A chunked body that releases each chunk as its own frame, `chunk_delay` apart.
fn planned_body(steps: Vec<Step>, chunk_delay: Duration) -> Body {
    let stream = futures::stream::unfold(
        (steps.into_iter(), false),
        move |(mut steps, mut sent)| async move {
            loop {
                match steps.next()? {
                    Step::Chunk(bytes) => {
                        if sent && !chunk_delay.is_zero() {
                            tokio::time::sleep(chunk_delay).await;
                        }
                        sent = true;
                        return Some((Ok(Frame::data(bytes)), (steps, sent)));
                    }
                    Step::Sleep(duration) => tokio::time::sleep(duration).await,
                    Step::Abort(why) => {
                        // Hyper flushes buffered chunks only when the body is pending; pause so
                        // the chunks already sent reach the client before the connection dies.
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        return Some((
                            Err(std::io::Error::other(why)),
                            (Vec::new().into_iter(), sent),
                        ));
                    }
                }
            }
        },
    );
    StreamBody::new(stream).boxed_unsync()
}

/// Status and error types of the HTTP-status faults: (status, Anthropic type, OpenAI type,
/// OpenAI code, default message).
fn http_fault(
    kind: FaultKind,
) -> Option<(
    u16,
    &'static str,
    &'static str,
    Option<&'static str>,
    &'static str,
)> {
    Some(match kind {
        FaultKind::Http429 => (
            429,
            "rate_limit_error",
            "requests",
            Some("rate_limit_exceeded"),
            "Rate limit exceeded",
        ),
        FaultKind::Http500 => (
            500,
            "api_error",
            "server_error",
            None,
            "Internal server error",
        ),
        FaultKind::Http529 => (
            529,
            "overloaded_error",
            "overloaded_error",
            None,
            "Overloaded",
        ),
        FaultKind::Http400 => (
            400,
            "invalid_request_error",
            "invalid_request_error",
            None,
            "Invalid request",
        ),
        FaultKind::Http401 => (
            401,
            "authentication_error",
            "invalid_request_error",
            Some("invalid_api_key"),
            "invalid x-api-key",
        ),
        FaultKind::Http403 => (
            403,
            "permission_error",
            "invalid_request_error",
            None,
            "Your API key does not have permission to use the specified resource",
        ),
        _ => return None,
    })
}

async fn respond_turn(
    script: &Script,
    format: WireFormat,
    inspection: &Inspection,
    selection: &Selection,
    fault: Option<&Fault>,
    reply: &Reply,
) -> Response<Body> {
    let turn = &selection.turn;
    let serial = reply.serial;
    if let Some(response) = fault.and_then(foreign_page) {
        return response;
    }
    if let Some(response) = fault.and_then(|f| http_fault_response(format, f, serial)) {
        return response;
    }
    let raw = match raw_body(script, turn).await {
        Ok(raw) => raw,
        Err(message) => {
            return json_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                &anthropic::error_body("api_error", &message, serial),
            );
        }
    };
    let streaming = raw.is_some() || inspection.stream;
    let chunks = body_chunks(format, inspection, turn, reply, raw, streaming);
    let chunk_delay = Duration::from_millis(turn.chunk_delay_ms);
    let body = match fault {
        None if !streaming => full_body(chunks.concat()),
        None => planned_body(chunks.into_iter().map(Step::Chunk).collect(), chunk_delay),
        Some(fault) if streaming => planned_body(
            stream_fault_steps(format, fault, chunks, serial),
            chunk_delay,
        ),
        Some(fault) => planned_body(
            json_fault_steps(format, fault, chunks.concat().into(), serial),
            chunk_delay,
        ),
    };
    with_turn_headers(Response::new(body), streaming, serial)
}

/// The error response of an HTTP-status fault; `None` for body faults.
fn http_fault_response(format: WireFormat, fault: &Fault, serial: u64) -> Option<Response<Body>> {
    let (status, anthropic_type, openai_type, code, default) = http_fault(fault.kind)?;
    let message = fault
        .message
        .clone()
        .unwrap_or_else(|| format!("{default} (fault injected by ahelper-fake-llm)"));
    // 529 carries Anthropic's overloaded_error body on both routes; it also has error.message.
    let body = if format == WireFormat::Anthropic || fault.kind == FaultKind::Http529 {
        anthropic::error_body(anthropic_type, &message, serial)
    } else {
        openai::error_body(openai_type, &message, code)
    };
    let mut response = json_response(
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        &body,
    );
    let retry_after = fault
        .retry_after
        .or((fault.kind == FaultKind::Http429).then_some(DEFAULT_RETRY_AFTER_SECS));
    if let Some(secs) = retry_after {
        response
            .headers_mut()
            .insert(RETRY_AFTER, HeaderValue::from(secs));
    }
    Some(response)
}

/// The turn's raw SSE body (`raw_sse` file or `raw_sse_inline`), if it has one.
///
/// Errors: the message for a 500 when the file cannot be read.
async fn raw_body(script: &Script, turn: &Turn) -> Result<Option<Vec<u8>>, String> {
    if let Some(path) = &turn.raw_sse {
        let path = script.resolve(path);
        return tokio::fs::read(&path).await.map(Some).map_err(|err| {
            format!(
                "ahelper-fake-llm cannot read raw_sse file {}: {err}",
                path.display()
            )
        });
    }
    Ok(turn.raw_sse_inline.clone().map(String::into_bytes))
}

/// The body in the chunks it is released in: raw bytes cut as the turn says, SSE events, or
/// one JSON body.
fn body_chunks(
    format: WireFormat,
    inspection: &Inspection,
    turn: &Turn,
    reply: &Reply,
    raw: Option<Vec<u8>>,
    streaming: bool,
) -> Vec<Bytes> {
    match raw {
        Some(bytes) => match (turn.raw_chunk_seed, turn.raw_chunk_bytes) {
            (Some(seed), max) => split_random(&bytes, seed, max.unwrap_or(16)),
            (None, Some(n)) => bytes.chunks(n).map(Bytes::copy_from_slice).collect(),
            (None, None) => split_sse_events(&bytes),
        },
        None if streaming => match format {
            WireFormat::Anthropic => anthropic::stream_events(reply),
            WireFormat::OpenAi => openai::stream_events(reply, inspection.include_usage),
        },
        None => {
            let body = match format {
                WireFormat::Anthropic => anthropic::json_body(reply),
                WireFormat::OpenAi => openai::json_body(reply),
            };
            vec![Bytes::from(body.to_string())]
        }
    }
}

/// Content type, cache control and request-id headers of a turn's response.
fn with_turn_headers(mut response: Response<Body>, streaming: bool, serial: u64) -> Response<Body> {
    let content_type = if streaming {
        "text/event-stream; charset=utf-8"
    } else {
        "application/json"
    };
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Ok(id) = HeaderValue::from_str(&format!("req_fake{serial:06}")) {
        headers.insert("request-id", id.clone());
        headers.insert("x-request-id", id);
    }
    response
}

/// The 200 answer of a fault that plays a server which is no model API (`html_page`,
/// `foreign_json`); `None` for other faults.
fn foreign_page(fault: &Fault) -> Option<Response<Body>> {
    let (content_type, body) = match fault.kind {
        FaultKind::HtmlPage => (
            "text/html; charset=utf-8",
            format!(
                "<!DOCTYPE html>\n<html><head><title>Sign in</title></head><body><h1>{}</h1></body></html>\n",
                error_message(fault, "Sign in to continue")
            ),
        ),
        FaultKind::ForeignJson => (
            "application/json",
            json!({ "hello": error_message(fault, "world") }).to_string(),
        ),
        _ => return None,
    };
    let mut response = Response::new(full_body(body));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    Some(response)
}

fn error_message(fault: &Fault, default: &str) -> String {
    fault.message.clone().unwrap_or_else(|| default.to_owned())
}

/// Body plan of a streamed response with a body fault.
fn stream_fault_steps(
    format: WireFormat,
    fault: &Fault,
    chunks: Vec<Bytes>,
    serial: u64,
) -> Vec<Step> {
    let len = chunks.len();
    let mut chunks = chunks.into_iter().map(Step::Chunk);
    let mut steps: Vec<Step> = Vec::new();
    match fault.kind {
        FaultKind::DropMidStream => {
            let n = fault
                .after_chunks
                .unwrap_or((len / 2).max(1))
                .min(len.saturating_sub(1));
            steps.extend(chunks.take(n));
            steps.push(Step::Abort(
                "connection dropped mid-stream (fault injected by ahelper-fake-llm)",
            ));
        }
        FaultKind::MalformedLine => {
            let n = fault.after_chunks.unwrap_or(1).min(len);
            steps.extend(chunks.by_ref().take(n));
            steps.push(Step::Chunk(match format {
                WireFormat::Anthropic => anthropic::malformed_event(),
                WireFormat::OpenAi => openai::malformed_event(),
            }));
            steps.extend(chunks);
        }
        FaultKind::Stall => {
            steps.extend(chunks.take(fault.after_chunks.unwrap_or(1).min(len)));
            steps.push(Step::Sleep(Duration::from_millis(
                fault.stall_ms.unwrap_or(DEFAULT_STALL_MS),
            )));
            steps.push(Step::Abort(
                "stalled stream gave up (fault injected by ahelper-fake-llm)",
            ));
        }
        FaultKind::ErrorEvent => {
            steps.extend(chunks.take(fault.after_chunks.unwrap_or(2).min(len)));
            match format {
                WireFormat::Anthropic => {
                    steps.push(Step::Chunk(anthropic::error_event(
                        &error_message(fault, "Overloaded"),
                        serial,
                    )));
                }
                WireFormat::OpenAi => {
                    let message = error_message(fault, "engine queue is full, request rejected");
                    steps.extend(openai::error_events(&message).into_iter().map(Step::Chunk));
                }
            }
        }
        _ => steps.extend(chunks),
    }
    steps
}

/// Body plan of a non-streaming (single JSON) response with a body fault.
fn json_fault_steps(format: WireFormat, fault: &Fault, body: Bytes, serial: u64) -> Vec<Step> {
    let half = body.slice(..body.len() / 2);
    match fault.kind {
        FaultKind::DropMidStream => vec![
            Step::Chunk(half),
            Step::Abort("connection dropped mid-body (fault injected by ahelper-fake-llm)"),
        ],
        FaultKind::MalformedLine => vec![Step::Chunk(half)],
        FaultKind::Stall => {
            let mut steps = Vec::new();
            if fault.after_chunks.unwrap_or(0) > 0 {
                steps.push(Step::Chunk(half));
            }
            steps.push(Step::Sleep(Duration::from_millis(
                fault.stall_ms.unwrap_or(DEFAULT_STALL_MS),
            )));
            steps.push(Step::Abort(
                "stalled response gave up (fault injected by ahelper-fake-llm)",
            ));
            steps
        }
        FaultKind::ErrorEvent => {
            let error = match format {
                WireFormat::Anthropic => anthropic::error_body(
                    "overloaded_error",
                    &error_message(fault, "Overloaded"),
                    serial,
                ),
                WireFormat::OpenAi => openai::error_body(
                    "server_error",
                    &error_message(fault, "engine queue is full, request rejected"),
                    Some("503"),
                ),
            };
            vec![Step::Chunk(Bytes::from(error.to_string()))]
        }
        _ => vec![Step::Chunk(body)],
    }
}
