//! The hot path of `/mcp`: a plain stateless `tools/call` POST (the request every agent sends
//! most) is answered here, in the request's own task, instead of through rmcp's per-request
//! service (a spawned service loop and channel hops, about 0.4 ms on this kind of machine). The
//! answer is the one rmcp would give: the same handler, the same result types, the same legacy
//! shaping. Anything this path is not sure of — an `Origin` header, a session id, `_meta`, a
//! protocol version with standard headers, an unusual `Accept`, a body without a length, any
//! other method — goes to rmcp untouched, which validates and answers it. This path never
//! refuses a request; it only answers the ones that are certainly fine.

use std::sync::atomic::{AtomicU64, Ordering};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientJsonRpcMessage, ClientRequest, RequestId,
    ServerJsonRpcMessage, ServerResult,
};
use tracing::Instrument;
use workbench_core::auth::Principal;

use super::{McpHandler, MAX_REQUEST_BYTES};
use crate::api_auth::ApiCaller;
use crate::state::AppState;

/// Calls this path has answered since start (the rest went to rmcp).
static ANSWERED: AtomicU64 = AtomicU64::new(0);

pub fn answered() -> u64 {
    ANSWERED.load(Ordering::Relaxed)
}

/// Protocol versions whose requests need no standard headers (all before 2026-07-28) and get
/// the legacy result shape.
const PLAIN_VERSIONS: &[&str] = &["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// Whether the headers are ones rmcp would accept for a stateless JSON POST, judged strictly.
fn plain_headers(headers: &HeaderMap, allowed_hosts: &[String]) -> bool {
    let one = |name: header::HeaderName| {
        let mut all = headers.get_all(name).iter();
        match (all.next(), all.next()) {
            (Some(v), None) => v.to_str().ok(),
            _ => None,
        }
    };
    // DNS-rebinding protection: a Host we answer to, and no Origin (browsers go to rmcp).
    let Some(host) = one(header::HOST) else {
        return false;
    };
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(h, port)| {
            if port.bytes().all(|b| b.is_ascii_digit()) {
                h
            } else {
                host
            }
        }),
    };
    if !allowed_hosts.iter().any(|h| h.eq_ignore_ascii_case(name))
        || headers.contains_key(header::ORIGIN)
    {
        return false;
    }
    if headers.contains_key("mcp-session-id") || headers.contains_key("last-event-id") {
        return false;
    }
    match headers
        .get_all("mcp-protocol-version")
        .iter()
        .collect::<Vec<_>>()
        .as_slice()
    {
        [] => {}
        [v] if v.to_str().is_ok_and(|v| PLAIN_VERSIONS.contains(&v)) => {}
        _ => return false,
    }
    if one(header::CONTENT_TYPE).is_none_or(|ct| {
        !ct.split(';')
            .next()
            .unwrap_or("")
            .trim()
            .eq_ignore_ascii_case("application/json")
    }) {
        return false;
    }
    let Some(accept) = one(header::ACCEPT) else {
        return false;
    };
    let entries: Vec<&str> = accept.split(',').map(str::trim).collect();
    if entries.iter().any(|e| e.contains(';') || e.contains('"')) {
        return false;
    }
    let has = |m: &str| entries.iter().any(|e| e.eq_ignore_ascii_case(m));
    has("application/json") && has("text/event-stream")
}

/// A plain stateless `tools/call` of an authenticated caller.
pub(super) struct PlainCall {
    pub id: RequestId,
    pub params: CallToolRequestParams,
    pub who: Principal,
    /// The request's parts: whatever else the endpoint's middleware put there.
    pub parts: Parts,
}

/// What a request to an MCP endpoint is, for this path. (One per request, moved once: its
/// variants' sizes matter less than not allocating on the hot path.)
#[allow(clippy::large_enum_variant)]
pub(super) enum Plain {
    Call(PlainCall),
    /// Anything else, whole again, for rmcp.
    Other(Request),
    /// The body broke off: nothing can be answered, by rmcp or here.
    Broken,
}

/// Reads a POST to the endpoint at `path` when it is one this path may answer (its caller
/// authenticated already).
pub(super) async fn plain(state: &AppState, req: Request, path: &str) -> Plain {
    let length = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok());
    let eligible = req.method() == Method::POST
        && req.uri().path() == path
        && req.uri().query().is_none()
        && length.is_some_and(|n| n > 0 && n <= MAX_REQUEST_BYTES)
        && plain_headers(req.headers(), &state.config.allowed_hosts);
    let who = match req.extensions().get::<ApiCaller>() {
        Some(ApiCaller(who)) if eligible => who.clone(),
        _ => return Plain::Other(req),
    };
    let (parts, body) = req.into_parts();
    let bytes: Bytes = match axum::body::to_bytes(body, MAX_REQUEST_BYTES).await {
        Ok(b) => b,
        Err(_) => return Plain::Broken,
    };
    match serde_json::from_slice::<ClientJsonRpcMessage>(&bytes) {
        Ok(ClientJsonRpcMessage::Request(r)) => match r.request {
            ClientRequest::CallToolRequest(c)
                if c.params.meta.is_none()
                    && c.params.input_responses.is_none()
                    && c.params.request_state.is_none() =>
            {
                Plain::Call(PlainCall {
                    id: r.id,
                    params: c.params,
                    who,
                    parts,
                })
            }
            _ => Plain::Other(Request::from_parts(parts, Body::from(bytes))),
        },
        _ => Plain::Other(Request::from_parts(parts, Body::from(bytes))),
    }
}

/// Runs `call` in its own task (as under rmcp: a client that hangs up does not cut a call off
/// half-way) and answers with its result as rmcp would shape it.
pub(super) async fn answer(
    id: RequestId,
    call: impl std::future::Future<Output = CallToolResult> + Send + 'static,
) -> Response {
    let answer = tokio::spawn(call.instrument(tracing::Span::current()));
    let mut result: ServerResult = match answer.await {
        Ok(r) => r.into(),
        Err(_) => return axum::http::StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    };
    result.strip_result_type_for_legacy_peer();
    result.strip_non_object_output_for_legacy_peer();
    match serde_json::to_vec(&ServerJsonRpcMessage::response(result, id)) {
        Ok(body) => {
            ANSWERED.fetch_add(1, Ordering::Relaxed);
            ([(header::CONTENT_TYPE, "application/json")], body).into_response()
        }
        Err(_) => axum::http::StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// Answers a plain stateless `tools/call` to `/mcp` itself; hands everything else to rmcp.
pub async fn tools_call(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let PlainCall {
        id, params, who, ..
    } = match plain(&state, req, "/mcp").await {
        Plain::Call(c) => c,
        Plain::Other(req) => return next.run(req).await,
        Plain::Broken => return axum::http::StatusCode::BAD_REQUEST.into_response(),
    };
    let handler = McpHandler {
        wb: state.wb.clone(),
        config: state.config.clone(),
    };
    answer(id, async move { handler.call(&who, params, None).await }).await
}
