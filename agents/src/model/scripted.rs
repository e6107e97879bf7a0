//! An in-process [`ModelClient`] that plays scripted turns, for unit tests of the agent loop.
//!
//! HTTP behaviour is tested against real servers on 127.0.0.1; this client exists so the loop's
//! logic (tool execution, stop reasons, retries as seen by the consumer, cancellation) can be
//! tested without any network.

use super::types::{
    ModelClient, ModelError, ModelEvent, ModelRequest, ModelStream, StopReason, ToolCall,
};
use serde_json::Value;
use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

/// What one call of [`ScriptedClient::stream`] plays.
#[derive(Debug, Clone, PartialEq)]
pub enum ScriptedTurn {
    /// These events in order; the script should end them with [`ModelEvent::Stop`].
    Events(Vec<ModelEvent>),
    /// The stream fails at once with this error.
    Error(ModelError),
    /// Events and errors in order (e.g. partial text, `Retry`, more text, then `Stop`; or
    /// partial text then an error).
    Items(Vec<Result<ModelEvent, ModelError>>),
    /// These events, then the stream never ends (for cancellation tests).
    Stall(Vec<ModelEvent>),
}

impl From<Vec<ModelEvent>> for ScriptedTurn {
    fn from(events: Vec<ModelEvent>) -> Self {
        ScriptedTurn::Events(events)
    }
}

impl From<ModelError> for ScriptedTurn {
    fn from(error: ModelError) -> Self {
        ScriptedTurn::Error(error)
    }
}

impl From<Result<Vec<ModelEvent>, ModelError>> for ScriptedTurn {
    fn from(turn: Result<Vec<ModelEvent>, ModelError>) -> Self {
        match turn {
            Ok(events) => ScriptedTurn::Events(events),
            Err(error) => ScriptedTurn::Error(error),
        }
    }
}

impl ScriptedTurn {
    /// A turn that answers `text` and ends with `end_turn`.
    pub fn text(text: impl Into<String>) -> Self {
        ScriptedTurn::Events(vec![
            ModelEvent::TextDelta { text: text.into() },
            ModelEvent::Stop {
                reason: StopReason::EndTurn,
            },
        ])
    }

    /// A turn that makes the tool calls `(id, name, input)` in order and ends with `tool_use`.
    pub fn tool_calls<'a>(calls: impl IntoIterator<Item = (&'a str, &'a str, Value)>) -> Self {
        let mut events: Vec<ModelEvent> = calls
            .into_iter()
            .map(|(id, name, input)| {
                ModelEvent::ToolCall(ToolCall {
                    id: id.into(),
                    name: name.into(),
                    input,
                })
            })
            .collect();
        events.push(ModelEvent::Stop {
            reason: StopReason::ToolUse,
        });
        ScriptedTurn::Events(events)
    }

    fn into_items(self) -> (Vec<Result<ModelEvent, ModelError>>, bool) {
        match self {
            ScriptedTurn::Events(events) => (events.into_iter().map(Ok).collect(), false),
            ScriptedTurn::Error(error) => (vec![Err(error)], false),
            ScriptedTurn::Items(items) => (items, false),
            ScriptedTurn::Stall(events) => (events.into_iter().map(Ok).collect(), true),
        }
    }
}

/// A [`ModelClient`] that answers the n-th request with the n-th scripted turn and records
/// every request it receives.
///
/// When the script is used up, a request fails with [`ModelError::Api`] of kind
/// `scripted_turns_exhausted`, whose message says how many turns were scripted.
#[derive(Debug)]
pub struct ScriptedClient {
    turns: Mutex<VecDeque<ScriptedTurn>>,
    scripted: usize,
    requests: Mutex<Vec<ModelRequest>>,
    event_delay: Option<Duration>,
    name: String,
}

impl ScriptedClient {
    /// A client playing `turns` in order, e.g.
    /// `ScriptedClient::new(vec![ScriptedTurn::text("hi")])` or from `Vec<ModelEvent>` /
    /// `ModelError` / `Result<Vec<ModelEvent>, ModelError>` values.
    pub fn new<T: Into<ScriptedTurn>>(turns: impl IntoIterator<Item = T>) -> Self {
        let turns: VecDeque<ScriptedTurn> = turns.into_iter().map(Into::into).collect();
        ScriptedClient {
            scripted: turns.len(),
            turns: Mutex::new(turns),
            requests: Mutex::new(Vec::new()),
            event_delay: None,
            name: "scripted".to_string(),
        }
    }

    /// Waits `delay` before each event (to test streaming display and cancellation).
    pub fn with_event_delay(mut self, delay: Duration) -> Self {
        self.event_delay = Some(delay);
        self
    }

    /// Sets the name [`ModelClient::describe`] reports after `scripted ` (default: none).
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = format!("scripted {}", name.into());
        self
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<ModelRequest> {
        self.requests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// How many scripted turns have not been played yet.
    pub fn remaining(&self) -> usize {
        self.turns.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

impl ModelClient for ScriptedClient {
    fn stream(&self, request: ModelRequest) -> ModelStream {
        let received = {
            let mut requests = self.requests.lock().unwrap_or_else(|e| e.into_inner());
            requests.push(request);
            requests.len()
        };
        let turn = self
            .turns
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop_front()
            .unwrap_or_else(|| {
                ScriptedTurn::Error(ModelError::Api {
                    kind: "scripted_turns_exhausted".to_string(),
                    message: format!(
                        "the scripted client has {} turns but received request {received}; \
                         add turns to the script",
                        self.scripted
                    ),
                })
            });
        let (items, stall) = turn.into_items();
        let delay = self.event_delay;
        let items = futures::stream::iter(items);
        let stream: ModelStream = match delay {
            Some(d) => Box::pin(futures::StreamExt::then(items, move |item| async move {
                tokio::time::sleep(d).await;
                item
            })),
            None => Box::pin(items),
        };
        if stall {
            Box::pin(futures::StreamExt::chain(
                stream,
                futures::stream::pending(),
            ))
        } else {
            stream
        }
    }

    fn describe(&self) -> String {
        self.name.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use serde_json::json;

    fn request(text: &str) -> ModelRequest {
        ModelRequest {
            model: "m".into(),
            system_shared_len: 0,
            system: String::new(),
            messages: vec![crate::model::Message::user_text(text)],
            tools: vec![],
            max_output_tokens: 100,
        }
    }

    #[tokio::test]
    async fn plays_turns_in_order_and_records_requests() {
        let client = ScriptedClient::new(vec![
            ScriptedTurn::tool_calls([("t1", "list_dir", json!({"path": "."}))]),
            ScriptedTurn::text("done"),
        ]);
        let first: Vec<_> = client.stream(request("one")).collect().await;
        assert_eq!(first.len(), 2);
        assert!(matches!(&first[0], Ok(ModelEvent::ToolCall(c)) if c.name == "list_dir"));
        let second: Vec<_> = client.stream(request("two")).collect().await;
        assert_eq!(
            second[0],
            Ok(ModelEvent::TextDelta {
                text: "done".into()
            })
        );
        assert_eq!(client.remaining(), 0);
        let third: Vec<_> = client.stream(request("three")).collect().await;
        assert!(
            matches!(&third[0], Err(ModelError::Api { kind, .. }) if kind == "scripted_turns_exhausted")
        );
        let texts: Vec<_> = client
            .requests()
            .iter()
            .map(|r| r.messages[0].text())
            .collect();
        assert_eq!(texts, vec!["one", "two", "three"]);
        assert_eq!(client.describe(), "scripted");
    }

    #[tokio::test]
    async fn errors_and_stalls_are_played() {
        let client = ScriptedClient::new(vec![
            ScriptedTurn::Error(ModelError::Cancelled),
            ScriptedTurn::Stall(vec![ModelEvent::TextDelta { text: "a".into() }]),
        ])
        .with_name("x");
        assert_eq!(client.describe(), "scripted x");
        let first: Vec<_> = client.stream(request("1")).collect().await;
        assert_eq!(first, vec![Err(ModelError::Cancelled)]);
        let mut stalled = client.stream(request("2"));
        assert!(stalled.next().await.is_some());
        let next = tokio::time::timeout(Duration::from_millis(20), stalled.next()).await;
        assert!(next.is_err(), "the stream stays open");
    }
}
