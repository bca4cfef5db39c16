//! A client of the MCP streamable HTTP transport (protocol 2025-06-18; the older HTTP+SSE
//! transport is in sse.rs, both behind connection.rs), over the guarded
//! outbound client: JSON-RPC requests by POST, answered as JSON or as a server-sent event
//! stream; the `Mcp-Session-Id` the server assigns at `initialize` is sent on every later
//! request, and a 404 for it means the session is gone (the caller re-initializes). Every
//! request carries the trace context when tracing is on. Failures are classified for the
//! breaker and for retries.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{json, Value};
use zeroize::Zeroizing;

use super::exchange::{converse, outside_a_call, Routed};
use crate::catalog::ClientRelay;
use crate::egress::trace_context::with_trace_context;

pub(super) use super::rpc_error::answer_of;
pub use super::rpc_error::RpcError;

pub const PROTOCOL_VERSION: &str = "2025-06-18";
/// Largest answer read from an upstream.
pub const MAX_ANSWER_BYTES: usize = 10 * 1024 * 1024;

/// One MCP session with one upstream: reused by every call (initialize once).
pub struct Session {
    http: reqwest::Client,
    url: url::Url,
    authorization: Option<Zeroizing<String>>,
    session_id: Mutex<Option<String>>,
    next_id: AtomicU64,
    /// The stream of server-initiated messages, when the server offers one.
    listener: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// The server's requests being relayed now (by id), and where the call that has each one
    /// hears about it: a server may withdraw one on its standalone stream rather than the
    /// call's.
    asked: Asked,
    /// What the server's initialize answer said it offers.
    capabilities: std::sync::OnceLock<Value>,
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(l) = self.listener.lock().expect("listener lock").take() {
            l.abort();
        }
    }
}

type Asked = std::sync::Arc<Mutex<std::collections::HashMap<String, Sender>>>;
type Sender = tokio::sync::mpsc::UnboundedSender<Routed>;

/// Called with a server's notice (`is_notice`): one of its lists changed, or a resource
/// someone subscribed to was updated.
pub type OnToolsChanged = std::sync::Arc<dyn Fn(&Value) + Send + Sync>;

/// Whether a JSON-RPC message is a notice the server's owner acts on: one of its lists changed
/// (tools, prompts or resources: each one is refreshed and reviewed the same way), or
/// `notifications/resources/updated` (passed on to whoever subscribed).
pub(super) fn is_notice(v: &Value) -> bool {
    matches!(
        v.get("method").and_then(Value::as_str),
        Some(
            "notifications/tools/list_changed"
                | "notifications/prompts/list_changed"
                | "notifications/resources/list_changed"
                | "notifications/resources/updated"
        )
    )
}

/// What workbench tells a server it can do, on every transport: elicitation and sampling
/// requests made during a call are relayed to the MCP client that made it
/// (`exchange::converse`), or refused with -32601 when it cannot answer them.
pub(super) fn offered() -> Value {
    json!({ "elicitation": {}, "sampling": {} })
}

/// The `capabilities` of an initialize answer (an object; empty when absent or malformed).
pub(super) fn capabilities_of(init: &Value) -> Value {
    match init.get("capabilities") {
        Some(c @ Value::Object(_)) => c.clone(),
        _ => Value::Object(Default::default()),
    }
}

impl Session {
    /// What the server's initialize answer said it offers.
    pub fn capabilities(&self) -> Value {
        self.capabilities.get().cloned().unwrap_or(Value::Null)
    }
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("url", &self.url.as_str())
            .finish()
    }
}

impl Session {
    /// Connects and initializes; `authorization` is the whole header value.
    pub async fn open(
        http: reqwest::Client,
        url: url::Url,
        authorization: Option<Zeroizing<String>>,
        timeout: Duration,
    ) -> Result<Session, RpcError> {
        let s = Session {
            http,
            url,
            authorization,
            session_id: Mutex::new(None),
            next_id: AtomicU64::new(1),
            listener: Mutex::new(None),
            asked: Asked::default(),
            capabilities: std::sync::OnceLock::new(),
        };
        let params = json!({
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": offered(),
            "clientInfo": { "name": "workbench", "version": env!("CARGO_PKG_VERSION") }
        });
        let init = s.request("initialize", params, timeout).await?;
        if init
            .get("protocolVersion")
            .and_then(Value::as_str)
            .is_none()
        {
            return Err(RpcError::Protocol(
                "the initialize answer has no protocolVersion; is this an MCP server?".into(),
            ));
        }
        let _ = s.capabilities.set(capabilities_of(&init));
        s.notify("notifications/initialized", timeout).await?;
        Ok(s)
    }

    /// Opens the server's stream of server-initiated messages (a GET with the session id) and
    /// calls `on_changed` for every `notifications/tools/list_changed`. A server without such a
    /// stream (405, or no session) is fine: refreshes then come from an admin or the schedule.
    pub async fn listen(&self, on_changed: OnToolsChanged) {
        let Some(id) = self.session_id.lock().expect("session id lock").clone() else {
            return;
        };
        let mut get = with_trace_context(
            self.http
                .get(self.url.clone())
                .header("accept", "text/event-stream")
                .header("mcp-session-id", id.clone())
                .header("mcp-protocol-version", PROTOCOL_VERSION),
        );
        if let Some(a) = &self.authorization {
            get = get.header("authorization", a.as_str());
        }
        let Ok(Ok(mut res)) = tokio::time::timeout(Duration::from_secs(10), get.send()).await
        else {
            return;
        };
        if !res.status().is_success() {
            return;
        }
        let asked = self.asked.clone();
        let (http, url, authorization) = (
            self.http.clone(),
            self.url.clone(),
            self.authorization.clone(),
        );
        let task = tokio::spawn(async move {
            let mut buf: Vec<u8> = Vec::new();
            while let Ok(Some(chunk)) = res.chunk().await {
                if buf.len() + chunk.len() > MAX_ANSWER_BYTES {
                    break;
                }
                buf.extend_from_slice(&chunk);
                while let Some(data) = next_event_data(&mut buf) {
                    let Ok(v) = serde_json::from_str::<Value>(&data) else {
                        continue;
                    };
                    if is_notice(&v) {
                        on_changed(&v);
                    }
                    // A request of the server's that belongs to no call is answered here.
                    if let Some(answer) = outside_a_call(&v) {
                        let auth = authorization.as_deref().map(String::as_str);
                        let post = post_builder(&http, &url, auth, Some(&id), &answer);
                        let _ = post.timeout(Duration::from_secs(30)).send().await;
                        continue;
                    }
                    if v.get("method").and_then(Value::as_str) == Some("notifications/cancelled") {
                        let withdrawn = v.pointer("/params/requestId").map(Value::to_string);
                        let to = withdrawn
                            .and_then(|id| asked.lock().expect("asked lock").get(&id).cloned());
                        if let Some(tx) = to {
                            let _ = tx.send(Routed::Server(v));
                        }
                    }
                }
            }
        });
        *self.listener.lock().expect("listener lock") = Some(task);
    }

    fn builder(&self, body: &Value) -> reqwest::RequestBuilder {
        let id = self.session_id.lock().expect("session id lock").clone();
        post_builder(
            &self.http,
            &self.url,
            self.authorization.as_deref().map(String::as_str),
            id.as_deref(),
            body,
        )
    }

    async fn send(&self, body: &Value, timeout: Duration) -> Result<reqwest::Response, RpcError> {
        let res = tokio::time::timeout(timeout, self.builder(body).send())
            .await
            .map_err(|_| RpcError::Timeout(timeout.as_millis() as u64))?
            .map_err(|e| send_error(e, timeout))?;
        let has_session = self.session_id.lock().expect("session id lock").is_some();
        status_error(&res, has_session)?;
        Ok(res)
    }

    /// A notification (no answer expected beyond 202).
    async fn notify(&self, method: &str, timeout: Duration) -> Result<(), RpcError> {
        self.send(&json!({ "jsonrpc": "2.0", "method": method }), timeout)
            .await
            .map(|_| ())
    }

    /// A request and its result.
    pub async fn request(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, RpcError> {
        self.request_relayed(method, params, timeout, None).await
    }

    /// A request and its result; what the server asks meanwhile on the answer's event stream
    /// (elicitation, sampling) goes to `relay`, and so does its progress. A request given up
    /// before its answer (the caller cancelled, or timed out) is cancelled at the server.
    pub async fn request_relayed(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
        relay: Option<&dyn ClientRelay>,
    ) -> Result<Value, RpcError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let body = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        let started = tokio::time::Instant::now();
        let mut unanswered = Unanswered {
            session: self,
            id,
            armed: false,
        };
        let res = self.send(&body, timeout).await?;
        // Sent and taken: from here a caller giving up is the server's to know.
        unanswered.armed = method != "initialize";
        if let Some(sid) = res
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
        {
            *self.session_id.lock().expect("session id lock") = Some(sid.to_owned());
        }
        let is_sse = res
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|c| c.starts_with("text/event-stream"));
        let left = timeout.saturating_sub(started.elapsed());
        let answer = tokio::time::timeout(left, self.read_answer(res, id, is_sse, relay))
            .await
            .map_err(|_| RpcError::Timeout(timeout.as_millis() as u64))??;
        unanswered.armed = false;
        answer_of(answer)
    }

    /// Sends the answer to one of the server's own requests.
    async fn reply(&self, answer: Value) {
        if let Err(e) = self.send(&answer, Duration::from_secs(30)).await {
            tracing::debug!(error = %e, "answering the MCP server's request failed");
        }
    }

    /// The JSON-RPC answer with `id`, from a JSON body or an event stream; requests and
    /// progress the server sends on the stream meanwhile go to `relay` (or are refused), while
    /// the stream is still read (`exchange::converse`).
    async fn read_answer(
        &self,
        res: reqwest::Response,
        id: u64,
        sse: bool,
        relay: Option<&dyn ClientRelay>,
    ) -> Result<Value, RpcError> {
        if !sse {
            return read_json_answer(res, id).await;
        }
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let mut forget = Forget {
            asked: &self.asked,
            ids: Vec::new(),
        };
        let ids = &mut forget.ids;
        let reading = async move {
            if let Err(e) = read_events(res, id, &tx, &self.asked, ids).await {
                let _ = tx.send(Routed::Answer(Err(e)));
            }
            // The answer (or why there is none) is on its way; the conversation ends with it.
            std::future::pending::<()>().await
        };
        tokio::select! {
            answer = converse(&mut rx, relay, |v| self.reply(v)) => answer,
            () = reading => unreachable!("reading never ends by itself"),
        }
    }
}

/// A POST of `body` to the server in session `session_id`, with its credential.
fn post_builder(
    http: &reqwest::Client,
    url: &url::Url,
    authorization: Option<&str>,
    session_id: Option<&str>,
    body: &Value,
) -> reqwest::RequestBuilder {
    let mut b = http
        .post(url.clone())
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", PROTOCOL_VERSION)
        .body(body.to_string());
    b = with_trace_context(b);
    if let Some(a) = authorization {
        b = b.header("authorization", a);
    }
    if let Some(id) = session_id {
        b = b.header("mcp-session-id", id);
    }
    b
}

/// Reads a request's event stream until its answer: the server's messages before it go to
/// `tx` as they come, then the answer.
async fn read_events(
    mut res: reqwest::Response,
    id: u64,
    tx: &Sender,
    asked: &Asked,
    ids: &mut Vec<String>,
) -> Result<(), RpcError> {
    let mut buf: Vec<u8> = Vec::new();
    let broken = |e: reqwest::Error| {
        RpcError::Transport(format!("the answer broke off: {}", e.without_url()))
    };
    loop {
        // Whole events so far.
        while let Some(data) = next_event_data(&mut buf) {
            if let Ok(v) = serde_json::from_str::<Value>(&data) {
                if v.get("method").is_some() {
                    if let Some(asking) = v.get("id").filter(|i| !i.is_null()) {
                        let asking = asking.to_string();
                        asked
                            .lock()
                            .expect("asked lock")
                            .insert(asking.clone(), tx.clone());
                        ids.push(asking);
                    }
                    let _ = tx.send(Routed::Server(v));
                    continue;
                }
                if let Some(answer) = find_answer(v, id) {
                    let _ = tx.send(Routed::Answer(Ok(answer)));
                    return Ok(());
                }
            }
        }
        match res.chunk().await.map_err(broken)? {
            Some(chunk) => {
                if buf.len() + chunk.len() > MAX_ANSWER_BYTES {
                    return Err(RpcError::Protocol(format!(
                        "the answer is larger than {MAX_ANSWER_BYTES} bytes"
                    )));
                }
                buf.extend_from_slice(&chunk);
            }
            None => {
                return Err(RpcError::Transport(
                    "the event stream ended without an answer".into(),
                ))
            }
        }
    }
}

/// The server's requests a call was handed, forgotten when the call ends.
struct Forget<'a> {
    asked: &'a Asked,
    ids: Vec<String>,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        let mut asked = self.asked.lock().expect("asked lock");
        for id in &self.ids {
            asked.remove(id);
        }
    }
}

/// A request sent and not yet answered: dropped so (the caller gave up: cancelled, or timed
/// out), the server is told `notifications/cancelled` so it can stop working on it.
struct Unanswered<'a> {
    session: &'a Session,
    id: u64,
    armed: bool,
}

impl Drop for Unanswered<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let body = json!({ "jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": { "requestId": self.id, "reason": "the caller gave up on the call" } });
        let send = self
            .session
            .builder(&body)
            .timeout(Duration::from_secs(5))
            .send();
        rt.spawn(async move {
            let _ = send.await;
        });
    }
}

/// An error of sending a request (before any answer).
pub(super) fn send_error(e: reqwest::Error, timeout: Duration) -> RpcError {
    if e.is_connect() {
        RpcError::NotSent(format!("cannot connect to the server: {}", e.without_url()))
    } else if e.is_timeout() {
        RpcError::Timeout(timeout.as_millis() as u64)
    } else {
        RpcError::Transport(format!("the connection failed: {}", e.without_url()))
    }
}

/// What an answer's HTTP status says; `has_session`: a 404 means the session is gone.
pub(super) fn status_error(res: &reqwest::Response, has_session: bool) -> Result<(), RpcError> {
    let status = res.status().as_u16();
    match status {
        200..=299 => Ok(()),
        404 if has_session => Err(RpcError::SessionGone),
        403 => Err(insufficient_scope(res.headers()).unwrap_or(RpcError::Unauthorized(403))),
        401 => Err(RpcError::Unauthorized(status)),
        500..=599 => Err(RpcError::ServerError(status)),
        other => Err(RpcError::Protocol(format!(
            "the server answered HTTP {other}"
        ))),
    }
}

/// A 403's `WWW-Authenticate: Bearer error="insufficient_scope", scope="…"` challenge: the
/// token is valid but the operation needs more scopes (the MCP authorization spec's step-up).
fn insufficient_scope(headers: &reqwest::header::HeaderMap) -> Option<RpcError> {
    headers
        .get_all("www-authenticate")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter_map(super::discovery::bearer_challenge)
        .find_map(|params| {
            let param = |n: &str| params.iter().find(|(k, _)| k == n).map(|(_, v)| v.as_str());
            (param("error") == Some("insufficient_scope")).then(|| RpcError::InsufficientScope {
                scopes: param("scope")
                    .unwrap_or_default()
                    .split_whitespace()
                    .filter(|s| s.len() <= 200 && s.chars().all(|c| c.is_ascii_graphic()))
                    .take(50)
                    .map(str::to_owned)
                    .collect(),
            })
        })
}

/// The JSON-RPC answer with `id` from a JSON body.
async fn read_json_answer(mut res: reqwest::Response, id: u64) -> Result<Value, RpcError> {
    let mut buf: Vec<u8> = Vec::new();
    let broken = |e: reqwest::Error| {
        RpcError::Transport(format!("the answer broke off: {}", e.without_url()))
    };
    while let Some(chunk) = res.chunk().await.map_err(broken)? {
        if buf.len() + chunk.len() > MAX_ANSWER_BYTES {
            return Err(RpcError::Protocol(format!(
                "the answer is larger than {MAX_ANSWER_BYTES} bytes"
            )));
        }
        buf.extend_from_slice(&chunk);
    }
    let v: Value = serde_json::from_slice(&buf)
        .map_err(|e| RpcError::Protocol(format!("the answer is not JSON: {e}")))?;
    find_answer(v, id)
        .ok_or_else(|| RpcError::Protocol("the answer does not carry the request's id".into()))
}

/// Where the first event in `buf` ends: (end of its text, end including the blank line).
pub(super) fn event_end(buf: &[u8]) -> Option<(usize, usize)> {
    let lf = buf
        .windows(2)
        .position(|w| w == b"\n\n")
        .map(|i| (i, i + 2));
    let crlf = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, i + 4));
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.0 < b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

/// The next whole event in `buf` (taken out of it): its `data:` lines joined; None until a
/// whole event has arrived.
fn next_event_data(buf: &mut Vec<u8>) -> Option<String> {
    let end = event_end(buf)?;
    let event: Vec<u8> = buf.drain(..end.1).collect();
    let text = String::from_utf8_lossy(&event[..end.0]);
    let data: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(|d| d.strip_prefix(' ').unwrap_or(d))
        .collect();
    Some(data.join("\n"))
}

fn find_answer(v: Value, id: u64) -> Option<Value> {
    match v {
        Value::Array(items) => items.into_iter().find_map(|i| find_answer(i, id)),
        Value::Object(ref m)
            if m.get("id").and_then(Value::as_u64) == Some(id)
                && (m.contains_key("result") || m.contains_key("error")) =>
        {
            Some(v)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_found_in_json_and_batches_by_id() {
        assert_eq!(
            find_answer(json!({ "jsonrpc": "2.0", "id": 3, "result": 1 }), 3).unwrap()["result"],
            1
        );
        assert!(find_answer(json!({ "jsonrpc": "2.0", "id": 4, "result": 1 }), 3).is_none());
        assert!(find_answer(
            json!({ "jsonrpc": "2.0", "method": "notifications/progress" }),
            3
        )
        .is_none());
        let batch = json!([{ "jsonrpc": "2.0", "method": "x" }, { "jsonrpc": "2.0", "id": 7, "error": { "code": -1, "message": "m" } }]);
        assert_eq!(find_answer(batch, 7).unwrap()["error"]["code"], -1);
        assert_eq!(event_end(b"data: 1\n\ndata: 2\n\n"), Some((7, 9)));
        assert_eq!(event_end(b"data: 1\r\n\r\n"), Some((7, 11)));
        assert_eq!(event_end(b"data: 1\n"), None);
        let mut buf = b"event: message\ndata: {\"a\":\ndata: 1}\n\ndata: 2".to_vec();
        assert_eq!(next_event_data(&mut buf).as_deref(), Some("{\"a\":\n1}"));
        assert_eq!(
            next_event_data(&mut buf),
            None,
            "the second is not whole yet"
        );
        assert_eq!(buf, b"data: 2");
    }

    #[test]
    fn a_403_insufficient_scope_challenge_names_the_scopes_to_step_up_to() {
        let headers = |v: &[&str]| {
            let mut h = reqwest::header::HeaderMap::new();
            for v in v {
                h.append("www-authenticate", v.parse().unwrap());
            }
            h
        };
        assert_eq!(
            insufficient_scope(&headers(&[
                r#"Basic realm="x""#,
                r#"Bearer error="insufficient_scope", scope="files:read  files:write", resource_metadata="https://s/.well-known/oauth-protected-resource""#
            ])),
            Some(RpcError::InsufficientScope {
                scopes: vec!["files:read".into(), "files:write".into()]
            })
        );
        assert_eq!(
            insufficient_scope(&headers(&[r#"Bearer error="insufficient_scope""#])),
            Some(RpcError::InsufficientScope { scopes: vec![] })
        );
        // Another error, or none, is a refused credential.
        assert_eq!(
            insufficient_scope(&headers(&[r#"Bearer error="invalid_token", scope="a""#])),
            None
        );
        assert_eq!(insufficient_scope(&headers(&[])), None);
        // Hostile scope lists are bounded.
        let many = format!(
            r#"Bearer error="insufficient_scope", scope="{}""#,
            "s ".repeat(500)
        );
        let Some(RpcError::InsufficientScope { scopes }) = insufficient_scope(&headers(&[&many]))
        else {
            panic!("no challenge")
        };
        assert_eq!(scopes.len(), 50);
    }
}
