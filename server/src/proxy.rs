//! `/c/<integration>/<path>`: the credential-injecting proxy behind curl_session (D11). The
//! proxy token must list the integration; the caller's Authorization, Cookie, Host and
//! forwarding headers are dropped, the user's credential is injected, the request goes only to
//! the integration's base origin (path tricks are refused) with an allowed method, redirects
//! are not followed, the response streams back scrubbed of every secret of the project and of
//! the caller's credentials (headers and body), within a total deadline (504) and a cap on
//! requests in flight per user (429), and each request — refused ones too — is metered and
//! audited.

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
use futures::{Future, Stream};
use workbench_core::audit::ProxyEvent;
use workbench_core::auth::{Operation, Principal, Via};
use workbench_core::connections::{ConnectionProblem, ProxyBinding};
use workbench_core::integrations::{request, SendError};
use workbench_core::vault::StreamScrubber;

use crate::api_error::ApiError;
use crate::proxy_slots::ProxySlot;
use crate::state::AppState;

/// Largest request body forwarded.
pub const MAX_PROXY_BODY: usize = 10 * 1024 * 1024;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/c/{integration}", any(proxy))
        .route("/c/{integration}/{*rest}", any(proxy))
}

const DROPPED_HEADERS: &[&str] = &[
    "authorization",
    "cookie",
    "host",
    "forwarded",
    "x-forwarded-for",
    "x-forwarded-host",
    "x-forwarded-proto",
    "x-forwarded-port",
    "x-real-ip",
    "proxy-authorization",
    "proxy-connection",
    "connection",
    "keep-alive",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
    "origin",
    "referer",
];

/// The part of the raw (still percent-encoded) request path after `/c/<integration>`, refused
/// when it could climb or leave the base path.
fn upstream_path(raw: &str, integration: &str) -> Result<String, ApiError> {
    let prefix = format!("/c/{integration}");
    let rest = raw.strip_prefix(&prefix).unwrap_or("");
    let lower = rest.to_ascii_lowercase();
    let bad = lower.contains("%2e")
        || lower.contains("%2f")
        || lower.contains("%5c")
        || rest.contains('\\')
        || rest.contains("//")
        || rest.split('/').any(|seg| seg == "." || seg == "..");
    if bad {
        return Err(ApiError::bad_request(
            "the proxied path may not contain '..', '//', backslashes or encoded separators",
        ));
    }
    Ok(if rest.is_empty() {
        "/".into()
    } else {
        rest.to_owned()
    })
}

async fn proxy(State(state): State<AppState>, req: Request) -> Response {
    let method = req.method().to_string();
    let path = req.uri().path().to_owned();
    let mut refused_by: Option<Principal> = None;
    match handle(&state, req, &mut refused_by).await {
        Ok(r) => r,
        Err(e) => {
            // A refusal after the token named a user is audited like any proxied request.
            if let Some(who) = refused_by {
                let integration = path
                    .trim_start_matches("/c/")
                    .split('/')
                    .next()
                    .unwrap_or_default()
                    .to_owned();
                let event = ProxyEvent {
                    who: &who,
                    integration: &integration,
                    method: &method,
                    path: path
                        .strip_prefix(&format!("/c/{integration}"))
                        .unwrap_or(""),
                    status: e.status.as_u16(),
                    egress_bytes: 0,
                    duration_ms: 0,
                    at_ms: state.wb.clock().now_ms(),
                };
                state.wb.audit().record_proxy(&event).await;
            }
            e.into_response()
        }
    }
}

/// Methods the proxy forwards; anything else (TRACE, CONNECT, WebDAV verbs) is refused.
const METHODS: &[&str] = &["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

async fn handle(
    state: &AppState,
    req: Request,
    refused_by: &mut Option<Principal>,
) -> Result<Response, ApiError> {
    let started = Instant::now();
    let deadline = tokio::time::Instant::now() + state.config.proxy_timeout;
    let raw_path = req.uri().path().to_owned();
    let integration_name = raw_path
        .trim_start_matches("/c/")
        .split('/')
        .next()
        .unwrap_or_default()
        .to_owned();
    let token = req
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim)
        .ok_or_else(|| {
            ApiError::unauthorized(
                "missing proxy token; send Authorization: Bearer <token from curl_session>",
            )
        })?;
    let (claims, binding) = state.wb.proxy_tokens().verify(token).await?;
    // The caller is the key or grant that minted the token, as it is now (D21): revoking it
    // ends the token at once, and its policy is asked again on every request.
    let minter = match &binding {
        ProxyBinding::ApiKey(key) => {
            state
                .wb
                .accounts()
                .principal_for_key(&claims.prj, key)
                .await?
        }
        ProxyBinding::OAuthGrant(grant) => state.wb.oauth().principal_for_grant(grant).await?,
    };
    let mut who: Principal = minter
        .filter(|p| p.project_id == claims.prj && p.user_id == claims.sub)
        .ok_or_else(|| {
            ApiError::unauthorized(
                "the key or authorization that minted this proxy token was revoked",
            )
        })?;
    who.via = Via::ProxyToken;
    who.require(Operation::ProxyRequest)?;
    *refused_by = Some(who.clone());
    if !METHODS.contains(&req.method().as_str()) {
        return Err(ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            format!("the proxy forwards {} only", METHODS.join(", ")),
        ));
    }
    if !claims.integrations.contains(&integration_name) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!("this proxy token does not cover {integration_name}"),
        ));
    }
    if !state.wb.engine().may_proxy(&who, &integration_name).await? {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!("the policy of the key that minted this token does not allow the curl proxy for {integration_name}"),
        ));
    }
    let slot = state
        .proxy_slots
        .take(&who.user_id, state.config.proxy_max_concurrent_per_user)
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limited",
                "too many proxy requests in flight for this user; retry when one finishes",
            )
            .with_meta(serde_json::json!({ "retry_after": 1 }))
        })?;
    let integration = state
        .wb
        .connections()
        .lookup(&who.project_id, &integration_name)
        .filter(|i| i.def.curl_proxy)
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                format!("{integration_name} does not have the curl proxy enabled"),
            )
        })?;
    let credential = match state
        .wb
        .connections()
        .credential(&who, &integration)
        .await?
    {
        Ok(c) => Some(c),
        Err(problem) if integration.needs_connection() => {
            let message = match problem {
                ConnectionProblem::Expired => {
                    format!("the connection to {integration_name} expired; reconnect with connect")
                }
                ConnectionProblem::NotConnected => {
                    format!("{integration_name} is not connected; call connect first")
                }
            };
            return Err(
                ApiError::new(StatusCode::CONFLICT, "not_connected", message)
                    .with_meta(serde_json::json!({ "integration": integration_name })),
            );
        }
        Err(_) => None,
    };
    // Everything sent back is scrubbed of the project's secrets and the caller's credentials,
    // the one injected here included (D7).
    let mut scrubber =
        state.wb.engine().scrubber(&who).await.map_err(|e| {
            ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", e.message())
        })?;
    if let Some(c) = &credential {
        for secret in c.secrets() {
            scrubber.add(&format!("{integration_name}_credential"), secret);
        }
    }

    let path = upstream_path(&raw_path, &integration_name)?;
    let mut url = request::join(&integration.base_url, &path);
    url.set_query(req.uri().query());
    if url.origin() != integration.base_url.origin()
        || !url
            .path()
            .starts_with(integration.base_url.path().trim_end_matches('/'))
    {
        return Err(ApiError::bad_request(
            "the proxied path must stay on the integration's API",
        ));
    }
    let method = req.method().clone();
    let mut prepared = request::Prepared {
        method: reqwest::Method::from_bytes(method.as_str().as_bytes())
            .unwrap_or(reqwest::Method::GET),
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
    // The request body streams through, counted, and is cut off past the limit.
    let sent = Arc::new(AtomicU64::new(0));
    let body = LimitedBody {
        inner: req.into_body().into_data_stream(),
        seen: 0,
        counter: sent.clone(),
    };
    let builder = integration.builder(&prepared).map_err(proxy_send_error)?;
    let upstream = match tokio::time::timeout_at(
        deadline,
        integration.send(builder.body(reqwest::Body::wrap_stream(body))),
    )
    .await
    {
        Ok(r) => r.map_err(proxy_send_error)?,
        Err(_) => {
            return Err(ApiError::new(
                StatusCode::GATEWAY_TIMEOUT,
                "upstream_timeout",
                format!(
                    "{integration_name} did not answer within {} s",
                    state.config.proxy_timeout.as_secs()
                ),
            ))
        }
    };
    let status = upstream.status().as_u16();
    let mut headers = HeaderMap::new();
    for (k, v) in upstream.headers() {
        if matches!(
            k.as_str(),
            "connection" | "keep-alive" | "transfer-encoding" | "set-cookie" | "content-length"
        ) {
            continue;
        }
        let value = match v.to_str() {
            Ok(text) => match scrubber.scrub_str(text) {
                Some(clean) => HeaderValue::from_str(&clean).ok(),
                None => Some(v.clone()),
            },
            Err(_) => Some(v.clone()),
        };
        if let (Ok(name), Some(value)) = (HeaderName::from_bytes(k.as_str().as_bytes()), value) {
            headers.append(name, value);
        }
    }
    let counter = Arc::new(AtomicU64::new(0));
    let audit = state.wb.audit().clone();
    let clock = state.wb.clock().clone();
    let method_s = method.to_string();
    let path_s = path.clone();
    let finish = move |received: u64| {
        tokio::spawn(async move {
            let event = ProxyEvent {
                who: &who,
                integration: &integration_name,
                method: &method_s,
                path: &path_s,
                status,
                egress_bytes: received + sent.load(Ordering::Relaxed),
                duration_ms: started.elapsed().as_millis() as u64,
                at_ms: clock.now_ms(),
            };
            audit.record_proxy(&event).await;
        });
    };
    let stream = Metered {
        inner: Box::pin(upstream.bytes_stream()),
        counter,
        finish: Some(Box::new(finish)),
        scrubber: scrubber.stream(),
        deadline: Box::pin(tokio::time::sleep_until(deadline)),
        done: false,
        _slot: slot,
    };
    let mut res = Response::new(Body::from_stream(stream));
    *res.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
    *res.headers_mut() = headers;
    Ok(res)
}

/// The caller's request body on its way upstream: counted, and failed past `MAX_PROXY_BODY`.
struct LimitedBody {
    inner: axum::body::BodyDataStream,
    seen: usize,
    counter: Arc<AtomicU64>,
}

impl Stream for LimitedBody {
    type Item = Result<Bytes, std::io::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match Pin::new(&mut self.inner).poll_next(cx) {
            Poll::Ready(Some(Ok(chunk))) => {
                self.seen += chunk.len();
                self.counter
                    .fetch_add(chunk.len() as u64, Ordering::Relaxed);
                if self.seen > MAX_PROXY_BODY {
                    return Poll::Ready(Some(Err(std::io::Error::other(format!(
                        "request body larger than {MAX_PROXY_BODY} bytes"
                    )))));
                }
                Poll::Ready(Some(Ok(chunk)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(std::io::Error::other(e)))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

type Finish = Box<dyn FnOnce(u64) + Send>;

/// The upstream body on its way back: scrubbed as it streams, counted, cut off at the request's
/// deadline, and recorded once the stream ends (or is dropped by a client that went away). It
/// holds the user's proxy slot until then.
struct Metered {
    inner: Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>,
    counter: Arc<AtomicU64>,
    finish: Option<Finish>,
    scrubber: StreamScrubber,
    deadline: Pin<Box<tokio::time::Sleep>>,
    done: bool,
    _slot: ProxySlot,
}

impl Stream for Metered {
    type Item = Result<Bytes, std::io::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            if self.done {
                return Poll::Ready(None);
            }
            if self.deadline.as_mut().poll(cx).is_ready() {
                self.done = true;
                self.record();
                return Poll::Ready(Some(Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "the proxy request took too long",
                ))));
            }
            match self.inner.as_mut().poll_next(cx) {
                Poll::Ready(Some(Ok(chunk))) => {
                    self.counter
                        .fetch_add(chunk.len() as u64, Ordering::Relaxed);
                    let out = self.scrubber.push(&chunk);
                    if out.is_empty() {
                        continue;
                    }
                    return Poll::Ready(Some(Ok(Bytes::from(out))));
                }
                Poll::Ready(Some(Err(e))) => {
                    self.done = true;
                    self.record();
                    return Poll::Ready(Some(Err(std::io::Error::other(e.without_url()))));
                }
                Poll::Ready(None) => {
                    self.done = true;
                    self.record();
                    let rest = self.scrubber.finish();
                    return Poll::Ready(if rest.is_empty() {
                        None
                    } else {
                        Some(Ok(Bytes::from(rest)))
                    });
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

impl Metered {
    fn record(&mut self) {
        if let Some(f) = self.finish.take() {
            f(self.counter.load(Ordering::Relaxed));
        }
    }
}

impl Drop for Metered {
    fn drop(&mut self) {
        self.record();
    }
}

fn proxy_send_error(e: SendError) -> ApiError {
    match e {
        SendError::Blocked(m) => ApiError::new(StatusCode::FORBIDDEN, "forbidden", m),
        SendError::Unreachable(m) => {
            ApiError::new(StatusCode::BAD_GATEWAY, "upstream_unreachable", m)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_tricks_are_refused() {
        assert_eq!(
            upstream_path("/c/github/repos/a/b", "github").unwrap(),
            "/repos/a/b"
        );
        assert_eq!(upstream_path("/c/github", "github").unwrap(), "/");
        for bad in [
            "/c/github/..%2fadmin",
            "/c/github//evil.example/x",
            "/c/github/a/../b",
            "/c/github/%2E%2E/x",
            "/c/github/a%5cb",
            "/c/github/./x",
        ] {
            assert!(upstream_path(bad, "github").is_err(), "{bad}");
        }
    }
}
