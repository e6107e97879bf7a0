//! The model layer: provider-neutral types, HTTP providers, retries and the text tool protocol.

pub mod anthropic;
mod http;
pub mod openai;
pub mod retry;
pub mod scripted;
pub mod sse;
pub mod text_protocol;
pub mod tool_args;
mod types;

pub use http::MAX_ERROR_BODY_BYTES;
pub use types::*;

/// The HTTP client for `settings.kind`: [`anthropic::AnthropicClient`] or
/// [`openai::OpenAiClient`]. The text tool protocol (`settings.tool_protocol`) is not applied
/// here; the caller wraps the result when it is [`ToolProtocol::Text`].
pub fn build_client(settings: &ProviderSettings) -> std::sync::Arc<dyn ModelClient> {
    match settings.kind {
        ProviderKind::Anthropic => {
            std::sync::Arc::new(anthropic::AnthropicClient::new(settings.clone()))
        }
        ProviderKind::Openai => std::sync::Arc::new(openai::OpenAiClient::new(settings.clone())),
    }
}
