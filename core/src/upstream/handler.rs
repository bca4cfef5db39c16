//! The handler behind every upstream MCP tool: the server's breaker first (open: UNAVAILABLE at
//! once, nothing sent), then its `max_concurrency` semaphore, then `tools/call` on the pooled
//! session within the server's `timeout_ms`; retries only for `side_effects: none` tools and
//! only when nothing was sent, at most twice with jittered backoff. The answer becomes the
//! result: `structuredContent`, else a single text block (parsed when it is JSON), else the
//! content array; `isError` is the tool's failure.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use super::breaker::Admission;
use super::client::RpcError;
use super::live::Live;
use crate::catalog::{CallContext, ClientRelay, HandlerError, ScrubbedRelay, ToolHandler};
use crate::vault::Scrubber;

/// Retries of a call that never reached the server (read-only tools only).
pub const MAX_RETRIES: u32 = 2;

/// Why the tools of the server `name` cannot run while its breaker is open.
fn breaker_open(name: &str, retry_in_ms: i64) -> String {
    format!(
        "the MCP server {name} is failing and its circuit breaker is open; retry in {} s",
        (retry_in_ms + 999) / 1000
    )
}

pub struct UpstreamTool {
    pub live: Arc<Live>,
    /// The tool's name at the upstream (without the prefix).
    pub name: String,
    /// Read-only tools may be retried.
    pub retryable: bool,
}

#[async_trait]
impl ToolHandler for UpstreamTool {
    fn unavailable(&self) -> Option<String> {
        let live = &self.live;
        live.breaker
            .open_for_ms(live.now())
            .map(|retry_in_ms| breaker_open(&live.name, retry_in_ms))
    }

    async fn call(&self, ctx: &CallContext<'_>, args: Value) -> Result<Value, HandlerError> {
        let live = &self.live;
        let (admission, _slot) = admitted(live).await?;
        // Who the call is for reaches the server in `_meta`, for its own authorization; a
        // client that can hear progress gets the server's (the call's id is the token).
        let mut meta = serde_json::Map::new();
        if let Some(u) = ctx.end_user_id {
            meta.insert(END_USER_META.into(), u.into());
        }
        if ctx.client.is_some() {
            meta.insert("progressToken".into(), ctx.call_id.into());
        }
        let meta = (!meta.is_empty()).then_some(Value::Object(meta));
        // A client-credentials token workbench got for the server is no vault value: what the
        // server asks the caller is cleaned of it here (the pipeline cleans the rest).
        let wrapped = ctx.client.map(|inner| TokenScrubbed { inner, live });
        let relay = wrapped.as_ref().map(|w| w as &dyn ClientRelay);
        let mut attempt = 0;
        let call = async {
            loop {
                let r = match live.auth.user_oauth() {
                    None => {
                        live.call_tool(&self.name, args.clone(), meta.clone(), relay)
                            .await
                    }
                    Some(_) => self.call_as_user(ctx, args.clone(), meta.clone()).await?,
                };
                match r {
                    Err(RpcError::NotSent(_)) if self.retryable && attempt < MAX_RETRIES => {
                        attempt += 1;
                        let jitter = (crate::crypto::random_bytes::<1>()[0] as u64) % 100;
                        tokio::time::sleep(Duration::from_millis(50 * attempt as u64 + jitter))
                            .await;
                    }
                    other => break Ok::<_, HandlerError>(other),
                }
            }
        };
        // A caller that cancels gives the request up, which cancels it at the server
        // (`client::Unanswered`); the call ends as failed.
        let result = match ctx.client {
            Some(client) => tokio::select! {
                r = call => r?,
                _ = client.cancelled() => {
                    live.breaker.record(admission, false, live.now());
                    return Err(HandlerError::failed("the caller cancelled the call"));
                }
            },
            None => call.await?,
        };
        settle(live, admission, &result);
        // An OAuth token workbench obtained is no vault value: scrub it here, whatever echoes it.
        let token = token_scrubber(live);
        let clean = |e: HandlerError| match (e, &token) {
            (HandlerError::Failed(m), Some(s)) => {
                HandlerError::Failed(s.scrub_str(&m).unwrap_or(m))
            }
            (other, _) => other,
        };
        let answer = result.map_err(|e| clean(failure(&live.name, e)))?;
        ctx.add_egress(answer.to_string().len() as u64);
        let mut v = shape(answer).map_err(clean)?;
        if let Some(s) = &token {
            s.scrub(&mut v);
        }
        Ok(v)
    }
}

impl UpstreamTool {
    /// The call with the caller's own token (a server each user signs in to); a refused token
    /// is refreshed once through the caller's connection and the call made again. The outer
    /// error is the connection's (not connected, expired, unavailable).
    async fn call_as_user(
        &self,
        ctx: &CallContext<'_>,
        args: Value,
        meta: Option<Value>,
    ) -> Result<Result<Value, RpcError>, HandlerError> {
        let live = &self.live;
        let not_connected = || HandlerError::NotConnected {
            integration: live.name.clone(),
            expired: false,
        };
        let credential = ctx.credential.as_ref().ok_or_else(not_connected)?;
        let user = &ctx.principal.user_id;
        let first = live
            .call_tool_as(
                user,
                credential.token(),
                &self.name,
                args.clone(),
                meta.clone(),
                ctx.client,
            )
            .await;
        let source = ctx.connection.ok_or_else(not_connected)?;
        match first {
            Err(RpcError::Unauthorized(_)) => {}
            Err(RpcError::InsufficientScope { scopes }) => {
                return Err(source
                    .step_up(ctx.principal, &self.step_up_scopes(scopes))
                    .await)
            }
            other => return Ok(other),
        }
        let fresh = source.refresh_after_unauthorized(ctx.principal).await?;
        let second = live
            .call_tool_as(user, fresh.token(), &self.name, args, meta, ctx.client)
            .await;
        match second {
            Err(RpcError::Unauthorized(_)) => Err(HandlerError::NotConnected {
                integration: live.name.clone(),
                expired: true,
            }),
            Err(RpcError::InsufficientScope { scopes }) => Err(source
                .step_up(ctx.principal, &self.step_up_scopes(scopes))
                .await),
            other => Ok(other),
        }
    }

    /// What a step-up asks for: the scopes the server's challenge named, else every scope its
    /// metadata says it supports (the MCP authorization spec's scope selection).
    fn step_up_scopes(&self, named: Vec<String>) -> Vec<String> {
        if !named.is_empty() {
            return named;
        }
        self.live
            .auth
            .user_oauth()
            .and_then(|u| u.discovered.as_ref())
            .map(|d| d.scopes_supported.clone())
            .unwrap_or_default()
    }
}

/// The caller's relay, cleaned at each message of the client-credentials token workbench holds
/// for the server at that moment: the token may be fetched or renewed while the call runs (a
/// session opened or reopened during it), so it is not read once up front.
struct TokenScrubbed<'a> {
    inner: &'a dyn ClientRelay,
    live: &'a Live,
}

#[async_trait]
impl ClientRelay for TokenScrubbed<'_> {
    fn supports(&self, capability: &str) -> bool {
        self.inner.supports(capability)
    }

    async fn request(&self, method: &str, params: Value) -> Result<Value, (i64, String)> {
        match token_scrubber(self.live) {
            Some(scrubber) => {
                let inner = self.inner;
                ScrubbedRelay {
                    inner,
                    scrubber: &scrubber,
                }
                .request(method, params)
                .await
            }
            None => self.inner.request(method, params).await,
        }
    }

    async fn progress(&self, progress: f64, total: Option<f64>, message: Option<String>) {
        match token_scrubber(self.live) {
            Some(scrubber) => {
                let inner = self.inner;
                ScrubbedRelay {
                    inner,
                    scrubber: &scrubber,
                }
                .progress(progress, total, message)
                .await
            }
            None => self.inner.progress(progress, total, message).await,
        }
    }

    async fn cancelled(&self) {
        self.inner.cancelled().await
    }
}

/// Tells the server's breaker how an admitted request went (only the server's own failures
/// count against it).
fn settle(live: &Live, admission: Admission, result: &Result<Value, RpcError>) {
    let failed = result
        .as_ref()
        .err()
        .is_some_and(RpcError::is_server_failure);
    live.breaker.record(admission, failed, live.now());
}

/// A scrubber of the client-credentials token in use, if there is one.
fn token_scrubber(live: &Live) -> Option<Scrubber> {
    let mut s = Scrubber::new();
    live.scrub_token_into(&mut s);
    (!s.is_empty()).then_some(s)
}

/// The server's guards, in order: its breaker (open: UNAVAILABLE at once, nothing sent), then
/// a slot of its `max_concurrency` semaphore, held while the request runs.
async fn admitted(
    live: &Live,
) -> Result<(Admission, tokio::sync::SemaphorePermit<'_>), HandlerError> {
    let admission = live.breaker.admit(live.now());
    if let Admission::Refused { retry_in_ms } = admission {
        return Err(HandlerError::Unavailable(breaker_open(
            &live.name,
            retry_in_ms,
        )));
    }
    let slot = live
        .limit
        .acquire()
        .await
        .map_err(|_| HandlerError::Unavailable("the server is shutting down".into()))?;
    Ok((admission, slot))
}

/// One request to the server other than a tool call (`prompts/get`, `resources/read`) on the
/// same guards as its tools: the breaker first, then the semaphore, within the server's
/// timeout, never retried. The answer and any failure are cleaned of the token workbench got
/// for the server (the caller scrubs the project's secrets).
pub async fn guarded(live: &Live, method: &str, params: Value) -> Result<Value, HandlerError> {
    let (admission, _slot) = admitted(live).await?;
    let result = live.request(method, params, live.timeout).await;
    settle(live, admission, &result);
    let mut token = Scrubber::new();
    live.scrub_token_into(&mut token);
    answer_without(&live.name, &token, result)
}

/// A request's result as the handler's, cleaned of the credential in `token`.
fn answer_without(
    server: &str,
    token: &Scrubber,
    result: Result<Value, RpcError>,
) -> Result<Value, HandlerError> {
    match result {
        Ok(mut v) => {
            token.scrub(&mut v);
            Ok(v)
        }
        Err(e) => Err(match failure(server, e) {
            HandlerError::Failed(m) => HandlerError::Failed(token.scrub_str(&m).unwrap_or(m)),
            other => other,
        }),
    }
}

/// `guarded` for a server each user signs in to: the request made with the caller's own
/// connection, refreshed once after a 401, on the server's breaker and semaphore; the
/// caller's token is scrubbed from the answer. Not connected (or expired): `NotConnected`.
pub async fn guarded_as(
    live: &Live,
    who: &crate::auth::Principal,
    method: &str,
    params: Value,
) -> Result<Value, HandlerError> {
    let not_connected = |expired| HandlerError::NotConnected {
        integration: live.name.clone(),
        expired,
    };
    let source = live.sign_in.as_ref().ok_or_else(|| not_connected(false))?;
    let user = &who.user_id;
    let mut credential = source.credential(who).await?;
    let mut refreshed = false;
    let result = loop {
        let (admission, _slot) = admitted(live).await?;
        let result = live
            .request_as(user, credential.token(), method, params.clone())
            .await;
        settle(live, admission, &result);
        match result {
            Err(RpcError::Unauthorized(_)) if !refreshed => {
                refreshed = true;
                credential = source.refresh_after_unauthorized(who).await?;
            }
            Err(RpcError::Unauthorized(_)) => return Err(not_connected(true)),
            Err(RpcError::InsufficientScope { scopes }) => {
                return Err(source.step_up(who, &scopes).await)
            }
            other => break other,
        }
    };
    let mut token = Scrubber::new();
    token.add(&format!("{}_credential", live.name), credential.token());
    answer_without(&live.name, &token, result)
}

/// The `_meta` key carrying the REST caller's `end_user_id` to upstream servers.
pub const END_USER_META: &str = "workbench/end_user_id";

fn failure(server: &str, e: RpcError) -> HandlerError {
    match e {
        RpcError::Timeout(ms) => HandlerError::Timeout { timeout_ms: ms },
        RpcError::Remote {
            code: -32602,
            message,
        } => HandlerError::invalid("", message),
        RpcError::Remote { message, .. } => HandlerError::failed(format!("{server}: {message}")),
        RpcError::Unauthorized(_) => HandlerError::Unavailable(format!(
            "the MCP server {server} refused workbench's credential"
        )),
        RpcError::InsufficientScope { scopes } => HandlerError::Unavailable(format!(
            "the MCP server {server} says workbench's credential lacks access{}; an admin gives the server's credential more access",
            if scopes.is_empty() { String::new() } else { format!(" (scopes: {})", scopes.join(" ")) }
        )),
        other => HandlerError::Unavailable(format!(
            "the MCP server {server} cannot be reached: {other}"
        )),
    }
}

/// A `tools/call` result as the tool's result.
fn shape(answer: Value) -> Result<Value, HandlerError> {
    let content = answer
        .get("content")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let text = || {
        content
            .iter()
            .filter_map(|c| c.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n")
    };
    if answer.get("isError").and_then(Value::as_bool) == Some(true) {
        let message = text();
        return Err(HandlerError::failed(if message.is_empty() {
            "the tool reported an error".to_owned()
        } else {
            message
        }));
    }
    if let Some(structured) = answer.get("structuredContent").filter(|v| !v.is_null()) {
        return Ok(structured.clone());
    }
    if let [only] = content.as_slice() {
        if only.get("type").and_then(Value::as_str) == Some("text") {
            let t = only.get("text").and_then(Value::as_str).unwrap_or_default();
            return Ok(serde_json::from_str(t).unwrap_or_else(|_| Value::String(t.to_owned())));
        }
    }
    Ok(Value::Array(content))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn results_are_structured_content_then_text_then_the_content() {
        assert_eq!(shape(json!({ "content": [{ "type": "text", "text": "{\"a\":1}" }], "structuredContent": { "b": 2 } })).unwrap(), json!({ "b": 2 }));
        assert_eq!(
            shape(json!({ "content": [{ "type": "text", "text": "{\"a\":1}" }] })).unwrap(),
            json!({ "a": 1 })
        );
        assert_eq!(
            shape(json!({ "content": [{ "type": "text", "text": "hello" }] })).unwrap(),
            json!("hello")
        );
        let two = json!([{ "type": "text", "text": "a" }, { "type": "image", "data": "x", "mimeType": "image/png" }]);
        assert_eq!(shape(json!({ "content": two })).unwrap(), two);
        assert_eq!(
            shape(json!({ "content": [{ "type": "text", "text": "boom" }], "isError": true }))
                .unwrap_err(),
            HandlerError::failed("boom")
        );
    }
}
