//! The handler behind every plugin and custom-app tool: build the request from the tool's
//! template, inject the user's credential (refreshing an OAuth token once after a 401), send
//! it without following redirects, and shape the response.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::definition::{AuthDef, ToolDef};
use super::request::{self, Prepared};
use super::Integration;
use crate::connections::{Connections, Credential};
use crate::engine::{CallContext, HandlerError, ToolHandler};

/// Largest response body read from an integration.
pub const MAX_RESPONSE_BYTES: usize = 5 * 1024 * 1024;

#[derive(Clone)]
pub struct PluginTool {
    pub(super) integration: Arc<Integration>,
    pub(super) tool: ToolDef,
    pub(super) http: reqwest::Client,
    pub(super) connections: Connections,
    /// For custom apps: refuse IP-literal destinations in blocked ranges (names are checked by
    /// the guarded client's resolver).
    pub(super) guard: Option<crate::egress::PrivateAllowance>,
}

/// A response as read: status and body.
pub struct Reply {
    pub status: u16,
    pub body: bytes::Bytes,
}

impl PluginTool {
    pub fn new(integration: Arc<Integration>, tool: ToolDef, http: reqwest::Client, connections: Connections) -> Self {
        PluginTool { integration, tool, http, connections, guard: None }
    }

    fn display(&self) -> &str {
        &self.integration.def.display_name
    }

    /// Sends a prepared request with the integration's headers and the credential.
    pub async fn send(&self, ctx: &CallContext<'_>, mut p: Prepared, credential: Option<&Credential>) -> Result<Reply, HandlerError> {
        if let Some(c) = credential {
            match &self.integration.def.auth {
                AuthDef::Oauth2 { inject, .. } | AuthDef::ApiKey { inject, .. } => request::inject(&mut p, inject, c.token()),
                AuthDef::Cookie { cookie_name, .. } => p.headers.push(("Cookie".into(), format!("{cookie_name}={}", c.token()))),
                AuthDef::None => {}
            }
        }
        if let Some(guard) = &self.guard {
            let ip = match p.url.host() {
                Some(url::Host::Ipv4(v4)) => Some(std::net::IpAddr::V4(v4)),
                Some(url::Host::Ipv6(v6)) => Some(std::net::IpAddr::V6(v6)),
                _ => None,
            };
            if let Some(reason) = ip.and_then(|ip| guard.check(ip)) {
                return Err(HandlerError::failed(format!("refusing to connect to {}: {reason}", p.url.host_str().unwrap_or_default())));
            }
        }
        let mut builder = self.http.request(p.method.clone(), p.url.clone());
        for (k, v) in &self.integration.def.headers {
            builder = builder.header(k, v);
        }
        for (k, v) in &p.headers {
            builder = builder.header(k, v);
        }
        if let Some(body) = &p.body {
            let bytes = serde_json::to_vec(body).unwrap_or_default();
            ctx.add_egress(bytes.len() as u64);
            builder = builder.header("content-type", "application/json").body(bytes);
        }
        let mut res = builder.send().await.map_err(|e| {
            if let Some((host, reason)) = crate::egress::blocked_cause(&e) {
                return HandlerError::failed(format!("refusing to connect to {host}: {reason}"));
            }
            let why = if e.is_timeout() { "timed out".to_string() } else if e.is_connect() { "cannot connect".to_string() } else { e.without_url().to_string() };
            HandlerError::Unavailable(format!("{} is unreachable: {why}", self.display()))
        })?;
        let status = res.status().as_u16();
        let mut buf = bytes::BytesMut::new();
        while let Some(chunk) = res.chunk().await.map_err(|e| HandlerError::failed(format!("{}: reading the response failed: {}", self.display(), e.without_url())))? {
            ctx.add_egress(chunk.len() as u64);
            if buf.len() + chunk.len() > MAX_RESPONSE_BYTES {
                return Err(HandlerError::failed(format!("{} sent more than {MAX_RESPONSE_BYTES} bytes", self.display())));
            }
            buf.extend_from_slice(&chunk);
        }
        Ok(Reply { status, body: buf.freeze() })
    }

    /// Sends with the call's credential; an OAuth 401 refreshes the token once and retries.
    pub async fn send_authorized(&self, ctx: &CallContext<'_>, build: impl Fn() -> Result<Prepared, HandlerError>) -> Result<Reply, HandlerError> {
        let mut credential = ctx.credential.clone();
        let reply = self.send(ctx, build()?, credential.as_ref()).await?;
        if reply.status == 401 && matches!(self.integration.def.auth, AuthDef::Oauth2 { .. }) && credential.is_some() {
            credential = Some(self.connections.refresh_after_unauthorized(ctx.principal, &self.integration).await?);
            return self.send(ctx, build()?, credential.as_ref()).await;
        }
        Ok(reply)
    }

    /// A JSON (or text) body from a 2xx reply; any other status is a tool error with the API's
    /// own reason.
    pub fn body_of(&self, reply: Reply) -> Result<Value, HandlerError> {
        if !(200..300).contains(&reply.status) {
            return Err(HandlerError::failed(format!(
                "{} answered {}: {}",
                self.display(),
                reply.status,
                request::error_reason(&reply.body)
            )));
        }
        if reply.body.is_empty() {
            return Ok(json!({ "ok": true }));
        }
        Ok(serde_json::from_slice(&reply.body).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&reply.body).into_owned())))
    }
}

#[async_trait]
impl ToolHandler for PluginTool {
    async fn call(&self, ctx: &CallContext<'_>, args: Value) -> Result<Value, HandlerError> {
        if let Some(name) = &self.tool.handler {
            return super::logic::run(name, self, ctx, args).await;
        }
        let Some(req) = &self.tool.request else {
            return Err(HandlerError::Unavailable("this tool has no request".into()));
        };
        let base = self.integration.base_url.clone();
        let reply = self.send_authorized(ctx, || request::prepare(&base, req, &args)).await?;
        let body = self.body_of(reply)?;
        request::shape(self.display(), self.tool.result.as_ref(), body)
    }
}
