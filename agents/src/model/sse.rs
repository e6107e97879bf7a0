//! Server-sent events (SSE) framing shared by the HTTP providers.
//!
//! Both the Anthropic Messages API and OpenAI-compatible Chat Completions stream their replies as
//! SSE (<https://html.spec.whatwg.org/multipage/server-sent-events.html>). Framing (lines, `CRLF`,
//! comments such as `: OPENROUTER PROCESSING`, `data:` with or without a space, events split
//! across network reads, UTF-8 split across reads) is done by the `eventsource-stream` crate; this
//! module drives a provider-specific [`WireDecoder`] over the resulting events and turns the
//! whole thing into a [`ModelStream`]. Nothing here needs HTTP: tests feed plain byte chunks.

use super::types::{ModelError, ModelEvent, ModelStream};
use bytes::Bytes;
use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures::{Stream, StreamExt};
use std::collections::VecDeque;
use std::pin::Pin;
use std::time::Duration;

/// A boxed stream of raw response-body chunks whose errors are already [`ModelError`]s.
pub type ByteStream = Pin<Box<dyn Stream<Item = Result<Bytes, ModelError>> + Send + 'static>>;

/// What a [`WireDecoder`] wants after handling one event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flow {
    /// Keep reading events.
    Continue,
    /// The terminal event was seen; stop reading (anything after it is ignored).
    Done,
}

/// Turns the SSE events of one provider into [`ModelEvent`]s.
pub(crate) trait WireDecoder: Send + 'static {
    /// Handles one SSE event, pushing the model events it produces onto `out`.
    ///
    /// Returning `Err` ends the stream with that error (after the events already in `out`).
    fn on_event(&mut self, event: &Event, out: &mut Vec<ModelEvent>) -> Result<Flow, ModelError>;

    /// Called when the byte stream ended before [`Flow::Done`]: either completes the turn
    /// (pushing the final events) or reports why it is incomplete.
    fn on_eof(&mut self, out: &mut Vec<ModelEvent>) -> Result<(), ModelError>;
}

/// One chunk of bytes, as the decoders' unit tests feed them.
#[cfg(test)]
pub(crate) type TestChunks = futures::stream::Iter<std::vec::IntoIter<Result<Bytes, ModelError>>>;

/// The events `parser` (e.g. `parse_anthropic_stream`) makes of `text` arriving as one chunk;
/// for the decoders' unit tests.
#[cfg(test)]
pub(crate) async fn events_of(
    parser: fn(TestChunks) -> ModelStream,
    text: &str,
) -> Vec<Result<ModelEvent, ModelError>> {
    parser(futures::stream::iter(vec![Ok(Bytes::from(
        text.to_string(),
    ))]))
    .collect()
    .await
}

/// Turns a byte stream into a [`ModelStream`] with `decoder`.
///
/// The returned stream yields what the decoder produces, then ends after the terminal event, after
/// the first error (transport, framing, decoding or provider error), or at end of input.
pub(crate) fn decode_sse<S, E, D>(bytes: S, decoder: D) -> ModelStream
where
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: Into<ModelError> + Send + 'static,
    D: WireDecoder,
{
    struct State<D> {
        events: Pin<Box<dyn Stream<Item = Result<Event, ModelError>> + Send>>,
        decoder: D,
        queue: VecDeque<Result<ModelEvent, ModelError>>,
        finished: bool,
    }

    let events = bytes.eventsource().map(|item| match item {
        Ok(event) => Ok(event),
        Err(EventStreamError::Transport(e)) => Err(e.into()),
        Err(EventStreamError::Utf8(e)) => Err(ModelError::MalformedEvent(format!(
            "the reply stream is not valid UTF-8: {e}"
        ))),
        Err(EventStreamError::Parser(e)) => Err(ModelError::MalformedEvent(format!(
            "the reply stream is not valid server-sent events: {e:?}"
        ))),
    });
    let state = State {
        events: Box::pin(events),
        decoder,
        queue: VecDeque::new(),
        finished: false,
    };
    Box::pin(futures::stream::unfold(state, |mut st| async move {
        loop {
            if let Some(item) = st.queue.pop_front() {
                return Some((item, st));
            }
            if st.finished {
                return None;
            }
            let mut out = Vec::new();
            let result = match st.events.next().await {
                Some(Ok(event)) => match st.decoder.on_event(&event, &mut out) {
                    Ok(Flow::Continue) => Ok(()),
                    Ok(Flow::Done) => {
                        st.finished = true;
                        Ok(())
                    }
                    Err(e) => Err(e),
                },
                Some(Err(e)) => Err(e),
                None => {
                    st.finished = true;
                    st.decoder.on_eof(&mut out)
                }
            };
            st.queue.extend(out.into_iter().map(Ok));
            if let Err(e) = result {
                st.finished = true;
                st.queue.push_back(Err(e));
            }
        }
    }))
}

/// Wraps a byte stream so that a gap of more than `idle` without any chunk ends it with a
/// retryable [`ModelError::Connection`] ("no data … for N ms"). Errors of the inner stream are
/// converted with `Into<ModelError>`; the stream ends after the first error.
pub fn with_idle_timeout<S, E>(bytes: S, idle: Duration) -> ByteStream
where
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: Into<ModelError> + Send + 'static,
{
    let inner = Box::pin(bytes);
    Box::pin(futures::stream::unfold(
        Some(inner),
        move |state| async move {
            let mut inner = state?;
            match tokio::time::timeout(idle, inner.next()).await {
                Err(_) => Some((
                    Err(ModelError::Connection(format!(
                        "no data from the model provider for {} ms (idle timeout; slow local models \
                         may need a larger `retry.idle_timeout_ms`)",
                        idle.as_millis()
                    ))),
                    None,
                )),
                Ok(None) => None,
                Ok(Some(Ok(chunk))) => Some((Ok(chunk), Some(inner))),
                Ok(Some(Err(e))) => Some((Err(e.into()), None)),
            }
        },
    ))
}

impl From<reqwest::Error> for ModelError {
    /// Every reqwest failure (connect, reset, timeout, body read) is a connection-level error.
    /// The message includes the error's source chain; request headers (and so the API key) are
    /// never part of it.
    fn from(e: reqwest::Error) -> Self {
        ModelError::Connection(error_chain(&e))
    }
}

/// `e` and its sources joined with `": "`, without repeating a source already contained in the
/// text so far.
pub(crate) fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let part = s.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    text
}

/// `text` cut to at most `max_bytes` bytes (marker included) on a character boundary, ending
/// with `…` when cut.
pub(crate) fn truncate_bytes(text: &str, max_bytes: usize) -> String {
    if text.len() <= max_bytes {
        return text.to_string();
    }
    let mut end = max_bytes.saturating_sub('…'.len_utf8());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncate_bytes_respects_char_boundaries() {
        assert_eq!(truncate_bytes("abc", 5), "abc");
        assert_eq!(truncate_bytes("abcdefgh", 6), "abc…");
        assert_eq!(truncate_bytes("abcdefgh", 6).len(), 6);
        // "é" is two bytes; cutting inside it backs off to the boundary.
        assert_eq!(truncate_bytes("aééé", 5), "a…");
    }

    #[tokio::test]
    async fn idle_timeout_ends_a_silent_stream_with_a_connection_error() {
        let silent = futures::stream::pending::<Result<Bytes, ModelError>>();
        let mut s = with_idle_timeout(silent, Duration::from_millis(20));
        let item = s.next().await.expect("an error item");
        match item {
            Err(ModelError::Connection(msg)) => assert!(msg.contains("idle timeout"), "{msg}"),
            other => panic!("unexpected {other:?}"),
        }
        assert!(s.next().await.is_none());
    }

    #[tokio::test]
    async fn idle_timeout_passes_chunks_through() {
        let chunks = futures::stream::iter(vec![
            Ok::<_, ModelError>(Bytes::from_static(b"a")),
            Ok(Bytes::from_static(b"b")),
        ]);
        let got: Vec<_> = with_idle_timeout(chunks, Duration::from_secs(5))
            .collect()
            .await;
        assert_eq!(got.len(), 2);
        assert!(got.iter().all(|c| c.is_ok()));
    }
}
