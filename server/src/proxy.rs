//! `/c/<integration>/<path>`: the credential-injecting proxy behind curl_session (D11). The
//! proxy token must list the integration; the caller's Authorization, Cookie, Host and
//! forwarding headers are dropped, the user's credential is injected, the request goes only to
//! the integration's base origin (path tricks are refused), redirects are not followed, the
//! response streams back, and each request is metered and audited.

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use axum::Router;
use futures::Stream;
use workbench_core::audit::ProxyEvent;
use workbench_core::auth::Principal;
use workbench_core::connections::ConnectionProblem;
use workbench_core::integrations::{request, SendError};

use crate::api_error::ApiError;
use crate::state::AppState;

/// Largest request body forwarded.
pub const MAX_PROXY_BODY: usize = 10 * 1024 * 1024;

pub fn routes() -> Router<AppState> {
    Router::new().route("/c/{integration}", any(proxy)).route("/c/{integration}/{*rest}", any(proxy))
}

const DROPPED_HEADERS: &[&str] = &[
    "authorization", "cookie", "host", "forwarded", "x-forwarded-for", "x-forwarded-host", "x-forwarded-proto",
    "x-forwarded-port", "x-real-ip", "proxy-authorization", "proxy-connection", "connection", "keep-alive", "te",
    "trailer", "transfer-encoding", "upgrade", "content-length", "origin", "referer",
];

/// The part of the raw (still percent-encoded) request path after `/c/<integration>`, refused
/// when it could climb or leave the base path.
fn upstream_path(raw: &str, integration: &str) -> Result<String, ApiError> {
    let prefix = format!("/c/{integration}");
    let rest = raw.strip_prefix(&prefix).unwrap_or("");
    let lower = rest.to_ascii_lowercase();
    let bad = lower.contains("%2e") || lower.contains("%2f") || lower.contains("%5c") || rest.contains('\\') || rest.contains("//")
        || rest.split('/').any(|seg| seg == "." || seg == "..");
    if bad {
        return Err(ApiError::bad_request("the proxied path may not contain '..', '//', backslashes or encoded separators"));
    }
    Ok(if rest.is_empty() { "/".into() } else { rest.to_owned() })
}

async fn proxy(State(state): State<AppState>, req: Request) -> Response {
    match handle(state, req).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

async fn handle(state: AppState, req: Request) -> Result<Response, ApiError> {
    let started = Instant::now();
    let raw_path = req.uri().path().to_owned();
    let integration_name = raw_path.trim_start_matches("/c/").split('/').next().unwrap_or_default().to_owned();
    let token = req
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .map(str::trim)
        .ok_or_else(|| ApiError::unauthorized("missing proxy token; send Authorization: Bearer <token from curl_session>"))?;
    let claims = state.wb.proxy_tokens().verify(token).await?;
    if !claims.integrations.iter().any(|i| *i == integration_name) {
        return Err(ApiError::new(StatusCode::FORBIDDEN, "forbidden", format!("this proxy token does not cover {integration_name}")));
    }
    let who: Principal = state
        .wb
        .accounts()
        .principal_for_user(&claims.sub)
        .await?
        .filter(|p| p.project_id == claims.prj)
        .ok_or_else(|| ApiError::unauthorized("the token's user is no longer in the project"))?;
    let integration = state
        .wb
        .connections()
        .lookup(&who.project_id, &integration_name)
        .filter(|i| i.def.curl_proxy)
        .ok_or_else(|| ApiError::new(StatusCode::FORBIDDEN, "forbidden", format!("{integration_name} does not have the curl proxy enabled")))?;
    let credential = match state.wb.connections().credential(&who, &integration).await? {
        Ok(c) => Some(c),
        Err(problem) if integration.needs_connection() => {
            let message = match problem {
                ConnectionProblem::Expired => format!("the connection to {integration_name} expired; reconnect with connect"),
                ConnectionProblem::NotConnected => format!("{integration_name} is not connected; call connect first"),
            };
            return Err(ApiError::new(StatusCode::CONFLICT, "not_connected", message)
                .with_meta(serde_json::json!({ "integration": integration_name })));
        }
        Err(_) => None,
    };

    let path = upstream_path(&raw_path, &integration_name)?;
    let mut url = request::join(&integration.base_url, &path);
    url.set_query(req.uri().query());
    if url.origin() != integration.base_url.origin() || !url.path().starts_with(integration.base_url.path().trim_end_matches('/')) {
        return Err(ApiError::bad_request("the proxied path must stay on the integration's API"));
    }
    let method = req.method().clone();
    let mut prepared = request::Prepared {
        method: reqwest::Method::from_bytes(method.as_str().as_bytes()).unwrap_or(reqwest::Method::GET),
        url,
        headers: Vec::new(),
        body: None,
    };
    for (k, v) in req.headers() {
        if DROPPED_HEADERS.contains(&k.as_str()) {
            continue;
        }
        if let Ok(v) = v.to_str() {
            prepared.headers.push((k.as_str().to_owned(), v.to_owned()));
        }
    }
    if let Some(c) = &credential {
        integration.authorize(&mut prepared, c);
    }
    let body = axum::body::to_bytes(req.into_body(), MAX_PROXY_BODY)
        .await
        .map_err(|_| ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", format!("request body larger than {MAX_PROXY_BODY} bytes")))?;
    let sent = body.len() as u64;
    let builder = integration.builder(&prepared).map_err(proxy_send_error)?;
    let upstream = integration.send(builder.body(body)).await.map_err(proxy_send_error)?;
    let status = upstream.status().as_u16();
    let mut headers = HeaderMap::new();
    for (k, v) in upstream.headers() {
        if matches!(k.as_str(), "connection" | "keep-alive" | "transfer-encoding" | "set-cookie" | "content-length") {
            continue;
        }
        if let (Ok(name), Ok(value)) = (HeaderName::from_bytes(k.as_str().as_bytes()), HeaderValue::from_bytes(v.as_bytes())) {
            headers.append(name, value);
        }
    }
    let counter = Arc::new(AtomicU64::new(sent));
    let audit = state.wb.audit().clone();
    let clock = state.wb.clock().clone();
    let method_s = method.to_string();
    let path_s = path.clone();
    let finish = move |bytes: u64| {
        tokio::spawn(async move {
            let event = ProxyEvent {
                who: &who,
                integration: &integration_name,
                method: &method_s,
                path: &path_s,
                status,
                egress_bytes: bytes,
                duration_ms: started.elapsed().as_millis() as u64,
                at_ms: clock.now_ms(),
            };
            if let Err(e) = audit.record_proxy(&event).await {
                tracing::error!(error = %e, "could not record a proxy request");
            }
        });
    };
    let stream = Metered { inner: Box::pin(upstream.bytes_stream()), counter, finish: Some(Box::new(finish)) };
    let mut res = Response::new(Body::from_stream(stream));
    *res.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
    *res.headers_mut() = headers;
    Ok(res)
}

type Finish = Box<dyn FnOnce(u64) + Send>;

/// Counts the bytes streamed back and records the request once the stream ends (or is
/// dropped by a client that went away).
struct Metered {
    inner: Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>,
    counter: Arc<AtomicU64>,
    finish: Option<Finish>,
}

impl Stream for Metered {
    type Item = reqwest::Result<Bytes>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let next = self.inner.as_mut().poll_next(cx);
        if let Poll::Ready(Some(Ok(chunk))) = &next {
            self.counter.fetch_add(chunk.len() as u64, Ordering::Relaxed);
        }
        if let Poll::Ready(None) = &next {
            if let Some(f) = self.finish.take() {
                f(self.counter.load(Ordering::Relaxed));
            }
        }
        next
    }
}

impl Drop for Metered {
    fn drop(&mut self) {
        if let Some(f) = self.finish.take() {
            f(self.counter.load(Ordering::Relaxed));
        }
    }
}

fn proxy_send_error(e: SendError) -> ApiError {
    match e {
        SendError::Blocked(m) => ApiError::new(StatusCode::FORBIDDEN, "forbidden", m),
        SendError::Unreachable(m) => ApiError::new(StatusCode::BAD_GATEWAY, "upstream_unreachable", m),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_tricks_are_refused() {
        assert_eq!(upstream_path("/c/github/repos/a/b", "github").unwrap(), "/repos/a/b");
        assert_eq!(upstream_path("/c/github", "github").unwrap(), "/");
        for bad in ["/c/github/..%2fadmin", "/c/github//evil.example/x", "/c/github/a/../b", "/c/github/%2E%2E/x", "/c/github/a%5cb", "/c/github/./x"] {
            assert!(upstream_path(bad, "github").is_err(), "{bad}");
        }
    }
}
