//! The MCP HTTP+SSE transport (protocol 2024-11-05), for servers that predate streamable HTTP:
//! a GET opens an event stream whose first `endpoint` event names where to POST messages (it
//! must be on the same origin); answers arrive on the stream as `message` events and are handed
//! to the waiting request by JSON-RPC id, and so are the server's requests and progress during
//! one (`exchange`); a `notifications/tools/list_changed` on the stream triggers a refresh. When the stream ends, every waiting request fails
//! and the session is reopened by the next call.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot};
use zeroize::Zeroizing;

use crate::egress::trace_context::with_trace_context;

use super::client::{
    event_end, is_notice, send_error, status_error, OnToolsChanged, RpcError, MAX_ANSWER_BYTES,
};
use super::exchange::{request_on, SharedStream, Waiters};
use crate::catalog::ClientRelay;

pub const SSE_PROTOCOL_VERSION: &str = "2024-11-05";

/// How long answering one of the server's own requests may take.
const REPLY_TIMEOUT: Duration = Duration::from_secs(30);

pub struct SseSession {
    /// Where and how messages are posted.
    poster: Poster,
    waiters: Arc<Waiters>,
    next_id: AtomicU64,
    reader: tokio::task::JoinHandle<()>,
    /// Posts what the reader must answer at once (`ping`, requests that belong to no call).
    replier: tokio::task::JoinHandle<()>,
    /// What the server's initialize answer said it offers.
    capabilities: std::sync::OnceLock<Value>,
}

impl SseSession {
    /// What the server's initialize answer said it offers.
    pub fn capabilities(&self) -> Value {
        self.capabilities.get().cloned().unwrap_or(Value::Null)
    }
}

impl Drop for SseSession {
    fn drop(&mut self) {
        self.reader.abort();
        self.replier.abort();
    }
}

impl SseSession {
    pub async fn open(
        http: reqwest::Client,
        url: url::Url,
        authorization: Option<Zeroizing<String>>,
        timeout: Duration,
        on_changed: OnToolsChanged,
    ) -> Result<SseSession, RpcError> {
        let mut get =
            with_trace_context(http.get(url.clone()).header("accept", "text/event-stream"));
        if let Some(a) = &authorization {
            get = get.header("authorization", a.as_str());
        }
        let res = tokio::time::timeout(timeout, get.send())
            .await
            .map_err(|_| RpcError::Timeout(timeout.as_millis() as u64))?
            .map_err(|e| send_error(e, timeout))?;
        status_error(&res, false)?;
        let waiters: Arc<Waiters> = Arc::default();
        let (endpoint_tx, endpoint_rx) = oneshot::channel();
        let (replies, mut to_reply) = mpsc::unbounded_channel::<Value>();
        let reader = tokio::spawn(read_stream(
            res,
            waiters.clone(),
            endpoint_tx,
            replies,
            on_changed,
        ));
        let endpoint = match tokio::time::timeout(timeout, endpoint_rx).await {
            Ok(Ok(path)) => url
                .join(&path)
                .map_err(|e| RpcError::Protocol(format!("the endpoint event is not a URL: {e}")))?,
            Ok(Err(_)) => {
                return Err(RpcError::Protocol(
                    "the event stream ended before naming its message endpoint".into(),
                ))
            }
            Err(_) => return Err(RpcError::Timeout(timeout.as_millis() as u64)),
        };
        if endpoint.origin() != url.origin() {
            reader.abort();
            return Err(RpcError::Protocol(
                "the server's message endpoint is on another origin; refused".into(),
            ));
        }
        let poster = Poster {
            http,
            endpoint,
            authorization,
        };
        let replying = poster.clone();
        let replier = tokio::spawn(async move {
            while let Some(reply) = to_reply.recv().await {
                let _ = replying.post(&reply, REPLY_TIMEOUT).await;
            }
        });
        let s = SseSession {
            poster,
            waiters,
            next_id: AtomicU64::new(1),
            reader,
            replier,
            capabilities: std::sync::OnceLock::new(),
        };
        let init = s
            .request(
                "initialize",
                json!({ "protocolVersion": SSE_PROTOCOL_VERSION, "capabilities": super::client::offered(), "clientInfo": { "name": "workbench", "version": env!("CARGO_PKG_VERSION") } }),
                timeout,
            )
            .await?;
        if init
            .get("protocolVersion")
            .and_then(Value::as_str)
            .is_none()
        {
            return Err(RpcError::Protocol(
                "the initialize answer has no protocolVersion; is this an MCP server?".into(),
            ));
        }
        let _ = s.capabilities.set(super::client::capabilities_of(&init));
        s.post(
            &json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }),
            timeout,
        )
        .await?;
        Ok(s)
    }

    async fn post(&self, body: &Value, timeout: Duration) -> Result<(), RpcError> {
        self.poster.post(body, timeout).await
    }

    pub async fn request(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, RpcError> {
        self.request_relayed(method, params, timeout, None).await
    }

    /// A request and its result, with what the server asks meanwhile relayed
    /// (`exchange::request_on`).
    pub async fn request_relayed(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
        relay: Option<&dyn ClientRelay>,
    ) -> Result<Value, RpcError> {
        request_on(self, method, params, timeout, relay).await
    }
}

impl SharedStream for SseSession {
    fn waiters(&self) -> &Waiters {
        &self.waiters
    }

    fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    fn gone(&self) -> Option<RpcError> {
        self.reader
            .is_finished()
            .then(|| RpcError::Transport("the event stream closed".into()))
    }

    async fn send(&self, message: &Value) -> Result<(), RpcError> {
        self.post(message, REPLY_TIMEOUT).await
    }

    fn send_later(&self, message: Value) {
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let poster = self.poster.clone();
        rt.spawn(async move {
            let _ = poster.post(&message, Duration::from_secs(5)).await;
        });
    }
}

/// Where and how messages are posted to the server.
#[derive(Clone)]
struct Poster {
    http: reqwest::Client,
    endpoint: url::Url,
    authorization: Option<Zeroizing<String>>,
}

impl Poster {
    async fn post(&self, body: &Value, timeout: Duration) -> Result<(), RpcError> {
        let mut b = with_trace_context(
            self.http
                .post(self.endpoint.clone())
                .header("content-type", "application/json")
                .body(body.to_string()),
        );
        if let Some(a) = &self.authorization {
            b = b.header("authorization", a.as_str());
        }
        let res = tokio::time::timeout(timeout, b.send())
            .await
            .map_err(|_| RpcError::Timeout(timeout.as_millis() as u64))?
            .map_err(|e| send_error(e, timeout))?;
        status_error(&res, true)
    }
}

/// Reads the event stream: the first `endpoint` event, then answers by id.
async fn read_stream(
    mut res: reqwest::Response,
    waiters: Arc<Waiters>,
    endpoint: oneshot::Sender<String>,
    replies: mpsc::UnboundedSender<Value>,
    on_changed: OnToolsChanged,
) {
    let mut endpoint = Some(endpoint);
    let mut buf: Vec<u8> = Vec::new();
    loop {
        while let Some(end) = event_end(&buf) {
            let event: Vec<u8> = buf.drain(..end.1).collect();
            let text = String::from_utf8_lossy(&event[..end.0]).into_owned();
            let mut kind = "message";
            let mut data = Vec::new();
            for line in text.lines() {
                if let Some(k) = line.strip_prefix("event:") {
                    kind = if k.trim() == "endpoint" {
                        "endpoint"
                    } else {
                        "message"
                    };
                } else if let Some(d) = line.strip_prefix("data:") {
                    data.push(d.strip_prefix(' ').unwrap_or(d));
                }
            }
            let data = data.join("\n");
            if kind == "endpoint" {
                if let Some(tx) = endpoint.take() {
                    let _ = tx.send(data.trim().to_owned());
                }
                continue;
            }
            if let Ok(v) = serde_json::from_str::<Value>(&data) {
                if is_notice(&v) {
                    on_changed(&v);
                }
                if let Some(reply) = waiters.route(v) {
                    let _ = replies.send(reply);
                }
            }
        }
        match res.chunk().await {
            Ok(Some(chunk)) if buf.len() + chunk.len() <= MAX_ANSWER_BYTES => {
                buf.extend_from_slice(&chunk)
            }
            _ => break,
        }
    }
    // The stream is gone: every waiting request fails now.
    waiters.fail_all("the event stream closed before the answer");
}
