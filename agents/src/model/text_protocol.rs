//! (being written)
use super::*;
/// Stub.
pub struct TextToolProtocol(std::sync::Arc<dyn ModelClient>);
impl TextToolProtocol {
    /// Stub.
    pub fn new(inner: std::sync::Arc<dyn ModelClient>) -> Self {
        TextToolProtocol(inner)
    }
}
impl ModelClient for TextToolProtocol {
    fn stream(&self, r: ModelRequest) -> ModelStream {
        self.0.stream(r)
    }
    fn describe(&self) -> String {
        self.0.describe()
    }
}
