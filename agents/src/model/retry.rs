//! Retries with exponential backoff, jitter and `retry-after`, shared by both HTTP providers.
//!
//! What is retried is decided by [`ModelError::is_retryable`]: HTTP 408/409/429/500/502–504/529,
//! provider error events (e.g. `overloaded_error`), incomplete streams, malformed stream events
//! (a frame a proxy corrupted) and connection errors (including the idle timeout). Other 4xx statuses are never retried.
//!
//! Before each new attempt the stream yields [`ModelEvent::Retry`]; the consumer discards
//! everything it received since the request started.

use super::types::{ModelError, ModelEvent, ModelStream, ProviderSettings};
use chrono::{DateTime, Utc};
use futures::StreamExt;
use rand::Rng;
use reqwest::header::HeaderMap;
use std::future::Future;

/// Longest `retry-after` we wait, in milliseconds, unless the configured maximum backoff
/// ([`RetryPolicy::max_delay_ms`]) is longer. A server asking for more gets this much.
pub const MAX_RETRY_AFTER_MS: u64 = 60_000;

/// When and how long to wait between attempts of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Total attempts per request, at least 1 (1 = no retry).
    pub max_attempts: u32,
    /// Backoff before the first retry, in milliseconds; doubles with each further retry.
    pub base_delay_ms: u64,
    /// Upper bound of one backoff delay, in milliseconds.
    pub max_delay_ms: u64,
}

impl RetryPolicy {
    /// The policy configured in `settings` (`max_attempts`, `retry_base_delay_ms`,
    /// `retry_max_delay_ms`); `max_attempts` of 0 is treated as 1.
    pub fn from_settings(settings: &ProviderSettings) -> Self {
        RetryPolicy {
            max_attempts: settings.max_attempts.max(1),
            base_delay_ms: settings.retry_base_delay_ms,
            max_delay_ms: settings
                .retry_max_delay_ms
                .max(settings.retry_base_delay_ms),
        }
    }

    /// Backoff before the retry that follows failed attempt `failed_attempt` (1-based), without
    /// jitter: `base_delay_ms * 2^(failed_attempt - 1)`, capped at `max_delay_ms`.
    pub fn backoff_ms(&self, failed_attempt: u32) -> u64 {
        let exp = failed_attempt.saturating_sub(1).min(30);
        self.base_delay_ms
            .saturating_mul(1u64 << exp)
            .min(self.max_delay_ms)
    }

    /// Wait before the attempt that follows failed attempt `failed_attempt` (1-based), in ms.
    ///
    /// A `retry-after` carried by `error` ([`ModelError::Http::retry_after_ms`]) is honoured as
    /// is, capped at `max(MAX_RETRY_AFTER_MS, max_delay_ms)`. Otherwise the delay is the
    /// [`backoff_ms`](Self::backoff_ms) with "equal jitter": uniformly random in
    /// `[backoff / 2, backoff]`, so parallel agents hitting the same limit spread out.
    pub fn delay_ms(&self, failed_attempt: u32, error: &ModelError, rng: &mut impl Rng) -> u64 {
        if let ModelError::Http {
            retry_after_ms: Some(ms),
            ..
        } = error
        {
            return (*ms).min(MAX_RETRY_AFTER_MS.max(self.max_delay_ms));
        }
        let backoff = self.backoff_ms(failed_attempt);
        let half = backoff / 2;
        half + rng.random_range(0..=backoff - half)
    }
}

/// Parses a `retry-after` header value into milliseconds from `now`: either delay-seconds
/// (`"120"`, fractional seconds accepted) or an HTTP-date (`"Wed, 21 Oct 2015 07:28:00 GMT"`,
/// RFC 9110 §10.2.3). A date in the past gives 0. Returns `None` for anything else.
pub fn parse_retry_after(value: &str, now: DateTime<Utc>) -> Option<u64> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<f64>() {
        if secs.is_finite() && secs >= 0.0 {
            return Some((secs * 1000.0).min(u64::MAX as f64 / 2.0) as u64);
        }
        return None;
    }
    let date = DateTime::parse_from_rfc2822(value).ok()?;
    let ms = date
        .with_timezone(&Utc)
        .signed_duration_since(now)
        .num_milliseconds();
    Some(ms.max(0) as u64)
}

/// The server's requested wait in milliseconds from response headers: `retry-after-ms` (sent by
/// OpenAI) when present and numeric, else `retry-after` via [`parse_retry_after`].
pub fn retry_after_from_headers(headers: &HeaderMap, now: DateTime<Utc>) -> Option<u64> {
    if let Some(ms) = headers
        .get("retry-after-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v >= 0.0)
    {
        return Some(ms as u64);
    }
    headers
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| parse_retry_after(v, now))
}

/// A short human-readable cause for a [`ModelEvent::Retry`], e.g. `HTTP 429 Too Many Requests`
/// or `overloaded_error: Overloaded` (at most about 300 bytes).
pub fn retry_reason(error: &ModelError) -> String {
    let text = match error {
        ModelError::Http { status, .. } => {
            let name = reqwest::StatusCode::from_u16(*status)
                .ok()
                .and_then(|s| s.canonical_reason())
                .unwrap_or(match status {
                    529 => "Overloaded",
                    _ => "",
                });
            format!("HTTP {status} {name}").trim_end().to_string()
        }
        ModelError::Api { kind, message } => format!("{kind}: {message}"),
        other => other.to_string(),
    };
    super::sse::truncate_bytes(&text, 300)
}

/// Runs `make_attempt` until a stream ends with [`ModelEvent::Stop`], a non-retryable error, or
/// `policy.max_attempts` attempts have failed.
///
/// Events of each attempt are passed through as they arrive. When an attempt fails with a
/// retryable error and attempts remain, a [`ModelEvent::Retry`] is yielded, the stream waits
/// [`RetryPolicy::delay_ms`], then starts the next attempt. An attempt stream that ends with
/// neither `Stop` nor an error counts as [`ModelError::Incomplete`]. Dropping the returned stream
/// cancels the attempt in flight and any pending wait.
pub fn with_retries<F, Fut>(policy: RetryPolicy, make_attempt: F) -> ModelStream
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = ModelStream> + Send + 'static,
{
    enum Phase {
        /// Start attempt `n` (1-based) after waiting `delay_ms`.
        Start {
            attempt: u32,
            delay_ms: u64,
        },
        /// Reading attempt `n`.
        Reading {
            attempt: u32,
            stream: ModelStream,
        },
        Finished,
    }
    struct State<F> {
        phase: Phase,
        make_attempt: F,
        policy: RetryPolicy,
    }

    let state = State {
        phase: Phase::Start {
            attempt: 1,
            delay_ms: 0,
        },
        make_attempt,
        policy,
    };
    Box::pin(futures::stream::unfold(state, |mut st| async move {
        loop {
            match std::mem::replace(&mut st.phase, Phase::Finished) {
                Phase::Finished => return None,
                Phase::Start { attempt, delay_ms } => {
                    if delay_ms > 0 {
                        tokio::time::sleep(std::time::Duration::from_millis(delay_ms)).await;
                    }
                    let stream = (st.make_attempt)().await;
                    st.phase = Phase::Reading { attempt, stream };
                }
                Phase::Reading {
                    attempt,
                    mut stream,
                } => {
                    let error = match stream.next().await {
                        Some(Ok(event)) => {
                            if !matches!(event, ModelEvent::Stop { .. }) {
                                st.phase = Phase::Reading { attempt, stream };
                            }
                            return Some((Ok(event), st));
                        }
                        Some(Err(e)) => e,
                        None => ModelError::Incomplete(
                            "the reply ended without a stop event".to_string(),
                        ),
                    };
                    if !error.is_retryable() || attempt >= st.policy.max_attempts {
                        return Some((Err(error), st));
                    }
                    let delay_ms = st.policy.delay_ms(attempt, &error, &mut rand::rng());
                    tracing::warn!(
                        attempt,
                        max_attempts = st.policy.max_attempts,
                        delay_ms,
                        error = %error,
                        "model request failed; retrying"
                    );
                    st.phase = Phase::Start {
                        attempt: attempt + 1,
                        delay_ms,
                    };
                    let retry = ModelEvent::Retry {
                        attempt: attempt + 1,
                        max_attempts: st.policy.max_attempts,
                        delay_ms,
                        reason: retry_reason(&error),
                    };
                    return Some((Ok(retry), st));
                }
            }
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{StopReason, Usage};
    use rand::SeedableRng;
    use rand::rngs::StdRng;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// `max_attempts`, then the backoff of the first retry and its cap, in milliseconds.
    fn policy_of(max_attempts: u32, base_delay_ms: u64, max_delay_ms: u64) -> RetryPolicy {
        RetryPolicy {
            max_attempts,
            base_delay_ms,
            max_delay_ms,
        }
    }

    fn policy(max_attempts: u32) -> RetryPolicy {
        policy_of(max_attempts, 1, 4)
    }

    fn http(status: u16, retry_after_ms: Option<u64>) -> ModelError {
        ModelError::Http {
            status,
            body: String::new(),
            retry_after_ms,
        }
    }

    #[test]
    fn classification_matches_the_retry_rules() {
        for status in [408, 409, 429, 500, 502, 503, 504, 529] {
            assert!(http(status, None).is_retryable(), "{status} retried");
        }
        for status in [400, 401, 403, 404, 405, 413, 422, 501, 505] {
            assert!(!http(status, None).is_retryable(), "{status} not retried");
        }
        let api = |kind: &str| ModelError::Api {
            kind: kind.into(),
            message: String::new(),
        };
        assert!(api("overloaded_error").is_retryable());
        assert!(api("server_error").is_retryable());
        assert!(api("api_error").is_retryable());
        assert!(!api("invalid_request_error").is_retryable());
        assert!(!api("authentication_error").is_retryable());
        assert!(ModelError::Incomplete(String::new()).is_retryable());
        assert!(ModelError::Connection(String::new()).is_retryable());
        assert!(!ModelError::Decode(String::new()).is_retryable());
        assert!(!ModelError::Cancelled.is_retryable());
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        let p = policy_of(10, 500, 8_000);
        let got: Vec<u64> = (1..=7).map(|n| p.backoff_ms(n)).collect();
        assert_eq!(got, vec![500, 1000, 2000, 4000, 8000, 8000, 8000]);
        assert_eq!(p.backoff_ms(u32::MAX), 8000, "no overflow");
    }

    #[test]
    fn jittered_delay_stays_within_half_and_full_backoff() {
        let p = policy_of(5, 1000, 30_000);
        let mut rng = StdRng::seed_from_u64(7);
        let err = http(503, None);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..200 {
            let d = p.delay_ms(2, &err, &mut rng);
            assert!((1000..=2000).contains(&d), "{d}");
            seen.insert(d);
        }
        assert!(seen.len() > 10, "jitter varies the delay");
    }

    #[test]
    fn retry_after_is_honoured_and_capped() {
        let p = policy_of(3, 1000, 10_000);
        let mut rng = StdRng::seed_from_u64(1);
        assert_eq!(p.delay_ms(1, &http(429, Some(3_000)), &mut rng), 3_000);
        assert_eq!(p.delay_ms(1, &http(429, Some(0)), &mut rng), 0);
        assert_eq!(
            p.delay_ms(1, &http(429, Some(3_600_000)), &mut rng),
            MAX_RETRY_AFTER_MS
        );
    }

    #[test]
    fn retry_after_parses_seconds_and_http_dates() {
        let now = DateTime::parse_from_rfc3339("2015-10-21T07:28:00Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(parse_retry_after("2", now), Some(2_000));
        assert_eq!(parse_retry_after(" 0 ", now), Some(0));
        assert_eq!(parse_retry_after("1.5", now), Some(1_500));
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:30 GMT", now),
            Some(30_000)
        );
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:00:00 GMT", now),
            Some(0),
            "a past date means now"
        );
        assert_eq!(parse_retry_after("soon", now), None);
        assert_eq!(parse_retry_after("-3", now), None);

        let mut headers = HeaderMap::new();
        headers.insert("retry-after", "7".parse().unwrap());
        assert_eq!(retry_after_from_headers(&headers, now), Some(7_000));
        headers.insert("retry-after-ms", "250".parse().unwrap());
        assert_eq!(retry_after_from_headers(&headers, now), Some(250));
        assert_eq!(retry_after_from_headers(&HeaderMap::new(), now), None);
    }

    #[test]
    fn retry_reasons_name_the_cause() {
        assert_eq!(retry_reason(&http(429, None)), "HTTP 429 Too Many Requests");
        assert_eq!(retry_reason(&http(529, None)), "HTTP 529 Overloaded");
        assert_eq!(
            retry_reason(&ModelError::Api {
                kind: "overloaded_error".into(),
                message: "Overloaded".into()
            }),
            "overloaded_error: Overloaded"
        );
    }

    /// A `make_attempt` that plays `attempts` in order and counts calls.
    fn scripted_attempts(
        attempts: Vec<Vec<Result<ModelEvent, ModelError>>>,
    ) -> (
        Arc<AtomicU32>,
        impl FnMut() -> futures::future::Ready<ModelStream> + Send + 'static,
    ) {
        let calls = Arc::new(AtomicU32::new(0));
        let counter = calls.clone();
        let make = move || {
            let n = counter.fetch_add(1, Ordering::SeqCst) as usize;
            let items = attempts.get(n).cloned().unwrap_or_default();
            futures::future::ready(Box::pin(futures::stream::iter(items)) as ModelStream)
        };
        (calls, make)
    }

    fn stop() -> Result<ModelEvent, ModelError> {
        Ok(ModelEvent::Stop {
            reason: StopReason::EndTurn,
        })
    }

    #[tokio::test]
    async fn retryable_failure_then_success_yields_retry_then_the_answer() {
        let (calls, make) = scripted_attempts(vec![
            vec![
                Ok(ModelEvent::TextDelta { text: "par".into() }),
                Err(ModelError::Connection("reset".into())),
            ],
            vec![Ok(ModelEvent::Usage(Usage::default())), stop()],
        ]);
        let got: Vec<_> = with_retries(policy(3), make).collect().await;
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        assert_eq!(got.len(), 4, "{got:?}");
        assert!(matches!(
            &got[1],
            Ok(ModelEvent::Retry {
                attempt: 2,
                max_attempts: 3,
                ..
            })
        ));
        assert_eq!(got[3], stop());
    }

    #[tokio::test]
    async fn non_retryable_errors_end_the_stream_at_once() {
        let (calls, make) = scripted_attempts(vec![vec![Err(http(400, None))], vec![stop()]]);
        let got: Vec<_> = with_retries(policy(3), make).collect().await;
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(got, vec![Err(http(400, None))]);
    }

    #[tokio::test]
    async fn attempts_are_bounded_and_the_last_error_is_returned() {
        let (calls, make) = scripted_attempts(vec![
            vec![Err(http(500, None))],
            vec![Err(http(502, None))],
            vec![Err(http(503, None))],
            vec![stop()],
        ]);
        let got: Vec<_> = with_retries(policy(3), make).collect().await;
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        assert_eq!(got.len(), 3, "two Retry events then the error: {got:?}");
        assert_eq!(got[2], Err(http(503, None)));
    }

    #[tokio::test]
    async fn an_attempt_ending_without_stop_is_incomplete_and_retried() {
        let (calls, make) = scripted_attempts(vec![vec![], vec![stop()]]);
        let got: Vec<_> = with_retries(policy(2), make).collect().await;
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        assert!(
            matches!(&got[0], Ok(ModelEvent::Retry { reason, .. }) if reason.contains("ended"))
        );
        assert_eq!(got[1], stop());
    }

    #[tokio::test]
    async fn events_after_stop_are_not_read() {
        let (_, make) = scripted_attempts(vec![vec![
            stop(),
            Err(ModelError::Connection("late".into())),
        ]]);
        let got: Vec<_> = with_retries(policy(2), make).collect().await;
        assert_eq!(got, vec![stop()]);
    }
}
