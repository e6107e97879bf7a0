//! The model layer: provider-neutral types, HTTP providers, retries and the text tool protocol.

pub mod anthropic;
pub mod openai;
pub mod retry;
pub mod scripted;
pub mod sse;
pub mod text_protocol;
mod types;

pub use types::*;

/// Builds the HTTP client for `settings` (stub until the providers land).
pub fn build_client(settings: &ProviderSettings) -> std::sync::Arc<dyn ModelClient> {
    let _ = settings;
    unimplemented_client()
}

fn unimplemented_client() -> std::sync::Arc<dyn ModelClient> {
    struct Nothing;
    impl ModelClient for Nothing {
        fn stream(&self, _r: ModelRequest) -> ModelStream {
            Box::pin(futures::stream::iter(vec![Err(ModelError::Decode(
                "providers not built yet".into(),
            ))]))
        }
        fn describe(&self) -> String {
            "none".into()
        }
    }
    std::sync::Arc::new(Nothing)
}
