//! Sending a tool's request to its integration and reading the reply: the integration's headers
//! and the call's credential, one refresh and retry after an OAuth 401 (through the call's
//! connection hook), a bounded body, and the API's own error reason on a non-2xx answer.

use std::sync::Arc;

use serde_json::{json, Value};

use crate::catalog::{CallContext, Credential, HandlerError};
use crate::integrations::request::{self, Prepared};
use crate::integrations::{AuthDef, Integration, SendError};

/// Largest response body read from an integration.
pub const MAX_RESPONSE_BYTES: usize = 5 * 1024 * 1024;

/// A response as read: status, the `Link` header (pagination) and body.
pub struct Reply {
    pub status: u16,
    pub link: Option<String>,
    pub body: bytes::Bytes,
}

/// Requests of one integration's tools.
#[derive(Clone)]
pub struct Client {
    pub(super) integration: Arc<Integration>,
}

impl Client {
    fn display(&self) -> &str {
        &self.integration.def.display_name
    }

    /// Sends a prepared request with the integration's headers and the credential.
    pub async fn send(
        &self,
        ctx: &CallContext<'_>,
        mut p: Prepared,
        credential: Option<&Credential>,
    ) -> Result<Reply, HandlerError> {
        if let Some(c) = credential {
            self.integration.authorize(&mut p, c);
        }
        let mut builder = self.integration.builder(&p).map_err(send_error)?;
        if let Some(body) = &p.body {
            let (content_type, bytes) = body.encode();
            ctx.add_egress(bytes.len() as u64);
            builder = builder.header("content-type", content_type).body(bytes);
        }
        let mut res = self.integration.send(builder).await.map_err(send_error)?;
        let status = res.status().as_u16();
        let link = res
            .headers()
            .get(reqwest::header::LINK)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let mut buf = bytes::BytesMut::new();
        while let Some(chunk) = res.chunk().await.map_err(|e| {
            HandlerError::failed(format!(
                "{}: reading the response failed: {}",
                self.display(),
                e.without_url()
            ))
        })? {
            ctx.add_egress(chunk.len() as u64);
            if buf.len() + chunk.len() > MAX_RESPONSE_BYTES {
                return Err(HandlerError::failed(format!(
                    "{} sent more than {MAX_RESPONSE_BYTES} bytes",
                    self.display()
                )));
            }
            buf.extend_from_slice(&chunk);
        }
        Ok(Reply {
            status,
            link,
            body: buf.freeze(),
        })
    }

    /// Sends with the call's credential; an OAuth 401 refreshes the token once (through the
    /// call's connection hook) and retries.
    pub async fn send_authorized(
        &self,
        ctx: &CallContext<'_>,
        build: impl Fn() -> Result<Prepared, HandlerError>,
    ) -> Result<Reply, HandlerError> {
        let credential = ctx.credential.clone();
        let reply = self.send(ctx, build()?, credential.as_ref()).await?;
        if reply.status == 401
            && matches!(self.integration.def.auth, AuthDef::Oauth2 { .. })
            && credential.is_some()
        {
            if let Some(fresh) = ctx.refresh_credential().await? {
                return self.send(ctx, build()?, Some(&fresh)).await;
            }
        }
        Ok(reply)
    }

    /// Any status but 2xx is a tool error with the API's own reason.
    fn check_status(&self, reply: &Reply) -> Result<(), HandlerError> {
        if (200..300).contains(&reply.status) {
            return Ok(());
        }
        Err(HandlerError::failed(format!(
            "{} answered {}: {}",
            self.display(),
            reply.status,
            request::error_reason(&reply.body)
        )))
    }

    /// The body of a 2xx reply as text (CSV exports, file contents).
    pub fn text_of(&self, reply: Reply) -> Result<String, HandlerError> {
        self.check_status(&reply)?;
        Ok(String::from_utf8_lossy(&reply.body).into_owned())
    }

    /// A JSON (or text) body from a 2xx reply.
    pub fn body_of(&self, reply: Reply) -> Result<Value, HandlerError> {
        self.check_status(&reply)?;
        if reply.body.is_empty() {
            return Ok(json!({ "ok": true }));
        }
        Ok(serde_json::from_slice(&reply.body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&reply.body).into_owned())))
    }
}

/// A refused destination is the tool's failure; an unreachable API is unavailability.
fn send_error(e: SendError) -> HandlerError {
    match e {
        SendError::Blocked(m) => HandlerError::failed(m),
        SendError::Unreachable(m) => HandlerError::Unavailable(m),
    }
}
