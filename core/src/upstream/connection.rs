//! One MCP session with an upstream over any transport (streamable HTTP, HTTP+SSE, or a stdio
//! process's pipes), and what they share: listing tools page by page.

use std::time::Duration;

use serde_json::{json, Value};
use zeroize::Zeroizing;

use super::client::{OnToolsChanged, RpcError, Session};
use super::sse::SseSession;
use super::stdio::session::StdioSession;
use crate::catalog::ClientRelay;

/// A session over one of the transports.
pub enum Connection {
    Http(Session),
    Sse(SseSession),
    /// The running process's session (its supervisor owns the process).
    Stdio(std::sync::Arc<StdioSession>),
}

impl Connection {
    /// Connects and initializes over `transport` (`http` or `sse`); `on_changed` hears the
    /// server's `notifications/tools/list_changed`.
    pub async fn open(
        transport: &str,
        http: reqwest::Client,
        url: url::Url,
        authorization: Option<Zeroizing<String>>,
        timeout: Duration,
        on_changed: OnToolsChanged,
    ) -> Result<Connection, RpcError> {
        Ok(match transport {
            "sse" => Connection::Sse(
                SseSession::open(http, url, authorization, timeout, on_changed).await?,
            ),
            _ => {
                let s = Session::open(http, url, authorization, timeout).await?;
                s.listen(on_changed).await;
                Connection::Http(s)
            }
        })
    }

    pub async fn request(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, RpcError> {
        match self {
            Connection::Http(s) => s.request(method, params, timeout).await,
            Connection::Sse(s) => s.request(method, params, timeout).await,
            Connection::Stdio(s) => s.request(method, params, timeout).await,
        }
    }

    /// `request`, with what the server asks meanwhile relayed to the calling client. Over
    /// streamable HTTP a request's own event stream says what belongs to it; over the older SSE
    /// transport and stdio a server's request is passed on only while it is the only request in
    /// flight on the session, and refused otherwise (`exchange::Waiters`).
    pub async fn request_relayed(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
        relay: Option<&dyn ClientRelay>,
    ) -> Result<Value, RpcError> {
        match self {
            Connection::Http(s) => s.request_relayed(method, params, timeout, relay).await,
            Connection::Sse(s) => s.request_relayed(method, params, timeout, relay).await,
            Connection::Stdio(s) => s.request_relayed(method, params, timeout, relay).await,
        }
    }

    /// What the server's initialize answer said it offers (an object; Null if unknown).
    pub fn capabilities(&self) -> Value {
        match self {
            Connection::Http(s) => s.capabilities(),
            Connection::Sse(s) => s.capabilities(),
            Connection::Stdio(s) => s.capabilities.get().cloned().unwrap_or(Value::Null),
        }
    }

    /// Every tool the server lists (following `nextCursor`, at most 50 pages).
    pub async fn list_tools(&self, timeout: Duration) -> Result<Vec<Value>, RpcError> {
        self.list_all("tools/list", "tools", timeout).await
    }

    /// Every entry of a paginated list (`method` answering its entries in `field`), following
    /// `nextCursor` for at most 50 pages.
    pub async fn list_all(
        &self,
        method: &str,
        field: &str,
        timeout: Duration,
    ) -> Result<Vec<Value>, RpcError> {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..50 {
            let params = match &cursor {
                Some(c) => json!({ "cursor": c }),
                None => json!({}),
            };
            let page = self.request(method, params, timeout).await?;
            tools.extend(
                page.get(field)
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default(),
            );
            cursor = page
                .get("nextCursor")
                .and_then(Value::as_str)
                .map(str::to_owned);
            if cursor.is_none() {
                break;
            }
        }
        Ok(tools)
    }
}

/// Whether an initialize answer's capabilities offer resource subscriptions.
pub(super) fn offers_subscriptions(capabilities: &Value) -> bool {
    capabilities.pointer("/resources/subscribe") == Some(&Value::Bool(true))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_a_server_that_says_so_offers_subscriptions() {
        assert!(offers_subscriptions(
            &json!({ "resources": { "subscribe": true } })
        ));
        assert!(!offers_subscriptions(
            &json!({ "resources": { "listChanged": true } })
        ));
        assert!(!offers_subscriptions(
            &json!({ "resources": { "subscribe": "yes" } })
        ));
        assert!(!offers_subscriptions(&Value::Null));
    }
}
