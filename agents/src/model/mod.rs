//! The model layer: provider-neutral types, HTTP providers, retries and the text tool protocol.

pub mod anthropic;
pub mod openai;
pub mod retry;
pub mod scripted;
pub mod sse;
pub mod text_protocol;
mod types;

pub use types::*;
