//! `http.fetch`: an HTTP request to a destination in the project's egress allowlist, through
//! the SSRF-safe client. The input schema is seed 004's, word for word.

use async_trait::async_trait;
use base64::Engine as _;
use serde_json::{json, Map, Value};

use super::make_spec;
use crate::catalog::{CallContext, HandlerError, ToolHandler};
use crate::catalog::{SideEffects, ToolSpec};
use crate::egress::{FetchError, FetchRequest, GuardedClient};
use crate::store::{self, Db};
use crate::Result;

/// Largest response body read; larger responses fail rather than fill memory.
pub const MAX_RESPONSE_BYTES: usize = 5 * 1024 * 1024;
/// Largest request body sent.
pub const MAX_REQUEST_BYTES: usize = 1024 * 1024;

pub fn spec() -> Result<ToolSpec> {
    make_spec(
        "http.fetch",
        "Perform an HTTP request to an allowlisted destination.",
        SideEffects::Network,
        json!({
            "type": "object",
            "required": ["url"],
            "properties": {
                "url": { "type": "string", "format": "uri" },
                "method": { "type": "string", "enum": ["GET", "POST", "PUT", "PATCH", "DELETE"], "default": "GET" },
                "headers": { "type": "object" },
                "body": { "type": "string" }
            }
        }),
        Some(
            json!({ "type": "object", "properties": { "status": { "type": "integer" }, "body": { "type": "string" } } }),
        ),
    )
}

pub struct HttpFetch {
    pub db: Db,
    pub http: GuardedClient,
}

#[async_trait]
impl ToolHandler for HttpFetch {
    async fn call(&self, ctx: &CallContext<'_>, args: Value) -> Result<Value, HandlerError> {
        let url = args["url"].as_str().unwrap_or_default().to_owned();
        let method = args["method"].as_str().unwrap_or("GET");
        let method = reqwest::Method::from_bytes(method.as_bytes())
            .map_err(|_| HandlerError::invalid("/method", "unknown method"))?;
        let mut headers = Vec::new();
        let mut secret_headers = Vec::new();
        let written = |field: &str| ctx.template.and_then(|t| t.get(field));
        if let Some(h) = args.get("headers").and_then(Value::as_object) {
            for (k, v) in h {
                if written("headers").and_then(|w| w.get(k)) != Some(v) {
                    // The agent's value held a reference: it may carry a secret.
                    secret_headers.push(k.clone());
                }
                let v = v.as_str().ok_or_else(|| {
                    HandlerError::invalid(format!("/headers/{k}"), "header values must be strings")
                })?;
                if reqwest::header::HeaderName::from_bytes(k.as_bytes()).is_err()
                    || reqwest::header::HeaderValue::from_str(v).is_err()
                {
                    return Err(HandlerError::invalid(
                        format!("/headers/{k}"),
                        "not a valid http header",
                    ));
                }
                headers.push((k.clone(), v.to_owned()));
            }
        }
        let body = match args.get("body").and_then(Value::as_str) {
            Some(b) if b.len() > MAX_REQUEST_BYTES => {
                return Err(HandlerError::invalid(
                    "/body",
                    format!("body larger than {MAX_REQUEST_BYTES} bytes"),
                ))
            }
            Some(b) => Some(bytes::Bytes::from(b.to_owned())),
            None => None,
        };
        let patterns = store::egress::list(self.db.pool(), &ctx.principal.project_id)
            .await
            .map_err(|_| HandlerError::Unavailable("cannot read the egress allowlist".into()))?;
        let secret_body = body.is_some() && written("body") != args.get("body");
        // A url that held a reference is named as the agent wrote it, never by its substituted
        // host (which would hand back a secret in a transformed form: lowercased, as an address).
        let shown = ctx
            .substituted("url", &url)
            .then(|| format!("the host of {}", ctx.quote("url", &url)));
        let request = FetchRequest {
            method,
            url,
            headers,
            body,
            secret_headers,
            secret_body,
        };
        let res = self
            .http
            .fetch(request, &patterns, MAX_RESPONSE_BYTES)
            .await
            .map_err(|e| {
                let e = match (&shown, e) {
                    (Some(host), FetchError::NotAllowlisted(_)) => {
                        FetchError::NotAllowlisted(host.clone())
                    }
                    (Some(host), FetchError::Blocked { reason, .. }) => FetchError::Blocked {
                        host: host.clone(),
                        reason,
                    },
                    (Some(host), FetchError::Transport(_)) => {
                        FetchError::Transport(format!("{host} could not be reached"))
                    }
                    (_, other) => other,
                };
                match e {
                    FetchError::InvalidUrl(m) => HandlerError::invalid("/url", m),
                    other => HandlerError::Failed(other.to_string()),
                }
            })?;
        ctx.add_egress(res.transferred);
        let mut out = Map::new();
        out.insert("status".into(), json!(res.status));
        let mut hmap = Map::new();
        for (k, v) in res.headers {
            match hmap.get_mut(&k) {
                Some(Value::String(existing)) => {
                    existing.push_str(", ");
                    existing.push_str(&v);
                }
                _ => {
                    hmap.insert(k, Value::String(v));
                }
            }
        }
        out.insert("headers".into(), Value::Object(hmap));
        match String::from_utf8(res.body.to_vec()) {
            Ok(text) => {
                out.insert("body".into(), json!(text));
            }
            Err(_) => {
                out.insert(
                    "body".into(),
                    json!(base64::engine::general_purpose::STANDARD.encode(&res.body)),
                );
                out.insert("body_encoding".into(), json!("base64"));
            }
        }
        if res.final_url != args["url"].as_str().unwrap_or_default() {
            out.insert("url".into(), json!(res.final_url));
        }
        Ok(Value::Object(out))
    }
}
