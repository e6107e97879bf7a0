//! Assertions on what the fake model was sent.

use ahelper_fake_llm::RecordedRequest;

/// Asserts that no request in `requests` carries `secret`; a failure names the request, shows
/// its body and then `context` (e.g. the run's stderr).
#[track_caller]
pub fn assert_never_sent(requests: &[RecordedRequest], secret: &str, context: &str) {
    for (i, request) in requests.iter().enumerate() {
        let body = request.body.to_string();
        assert!(
            !body.contains(secret),
            "the secret {secret:?} reached the model in request {i}: {body}\n{context}"
        );
    }
}
