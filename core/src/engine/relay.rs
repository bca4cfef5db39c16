//! What an upstream server asks the calling MCP client during a call (issue 33: elicitation,
//! sampling, progress) passes the call's scrubber first, as the call's result does: a server
//! that echoes a secret workbench sent it, or one of the project's, cannot hand it to the
//! client (and so to a person or a model) this way. The client's answers go back as given.

use async_trait::async_trait;
use serde_json::Value;

use crate::catalog::ClientRelay;
use crate::vault::Scrubber;

pub(super) struct Scrubbed<'a> {
    pub inner: &'a dyn ClientRelay,
    pub scrubber: &'a Scrubber,
}

#[async_trait]
impl ClientRelay for Scrubbed<'_> {
    fn supports(&self, capability: &str) -> bool {
        self.inner.supports(capability)
    }

    async fn request(&self, method: &str, mut params: Value) -> Result<Value, (i64, String)> {
        self.scrubber.scrub(&mut params);
        self.inner.request(method, params).await
    }

    async fn progress(&self, progress: f64, total: Option<f64>, message: Option<String>) {
        let message = message.map(|m| self.scrubber.scrub_str(&m).unwrap_or(m));
        self.inner.progress(progress, total, message).await
    }

    async fn cancelled(&self) {
        self.inner.cancelled().await
    }
}
