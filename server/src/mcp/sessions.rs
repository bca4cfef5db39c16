//! Sessions on `/mcp` and the set endpoints (issue 33). `/mcp` is stateless, which keeps the hot
//! path fast and lets any instance answer any request. A client that declares it can be asked
//! things (`elicitation`, `sampling`) gets a session instead, so that an upstream server's
//! request during a call reaches it on the call's event stream and its answer comes back, and so
//! does every client of a set endpoint (list changes, resource subscriptions): its
//! `initialize`, and every request carrying `Mcp-Session-Id`, go to rmcp's stateful service,
//! everything else to the stateless one. A session belongs to the endpoint and the credential
//! that opened it; anyone else presenting its id is told it does not exist. Sessions live in the
//! memory of the instance that opened it; with `--advertise-url` each instance records where its
//! sessions live (core's `McpSessions`) and the others forward a session's requests there, so a
//! load balancer may send them anywhere. Without it a request that reaches another instance is
//! answered 404, and the client opens a new session.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::Request;
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use serde_json::Value;
use tower::ServiceExt;
use workbench_core::auth::Principal;

use crate::api_auth::ApiCaller;

pub const SESSION_HEADER: &str = "mcp-session-id";

/// Marks a request answered by the stateful service (a session's, or the initialize opening
/// one), for handlers that offer more in a session.
#[derive(Clone, Copy)]
pub struct InSession;

/// Headers of one connection, which a forwarded request and its answer do not carry (RFC 9110
/// 7.6.1; the body's length is set again by whoever sends it on).
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "content-length",
    "transfer-encoding",
    "keep-alive",
    "upgrade",
    "te",
    "trailer",
    "proxy-authorization",
    "proxy-connection",
];

/// Marks a request one instance forwarded to another (which never forwards it again).
const FORWARDED_HEADER: &str = "x-workbench-forwarded";

/// What forwarding needs: where sessions live, this instance's own address, and a client.
#[derive(Clone)]
pub struct Forward {
    wb: workbench_core::Workbench,
    /// This instance's advertised address; None: sessions are neither recorded nor forwarded.
    me: Option<String>,
    http: reqwest::Client,
}

impl Forward {
    pub fn new(state: &crate::state::AppState) -> Forward {
        Forward {
            wb: state.wb.clone(),
            me: state.config.advertise_url.clone(),
            // Instances reach each other directly: no proxy, no redirects, no body limit but
            // the one this side already applied.
            http: reqwest::Client::builder()
                .no_proxy()
                .redirect(reqwest::redirect::Policy::none())
                .connect_timeout(std::time::Duration::from_secs(5))
                .build()
                .expect("a plain HTTP client builds"),
        }
    }

    /// The instance holding `session`, when it is another one this instance may forward to.
    async fn elsewhere(&self, session: &str, headers: &http::HeaderMap) -> Option<String> {
        let me = self.me.as_ref()?;
        if headers.contains_key(FORWARDED_HEADER) {
            return None;
        }
        match self.wb.mcp_sessions().locate(session).await {
            Ok(Some(url)) if &url != me => Some(url),
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(error = %e, "where an MCP session lives cannot be read");
                None
            }
        }
    }

    /// Sends the request on to the instance at `to` and streams its answer back.
    async fn to(&self, to: &str, req: Request) -> Response {
        let (parts, body) = req.into_parts();
        let Ok(bytes) = axum::body::to_bytes(body, super::MAX_REQUEST_BYTES).await else {
            return StatusCode::PAYLOAD_TOO_LARGE.into_response();
        };
        let path = parts
            .uri
            .path_and_query()
            .map(|p| p.as_str())
            .unwrap_or("/");
        let mut out = self
            .http
            .request(parts.method.clone(), format!("{to}{path}"))
            .header(FORWARDED_HEADER, "1")
            .body(bytes);
        for (name, value) in &parts.headers {
            if !HOP_BY_HOP.contains(&name.as_str()) {
                out = out.header(name, value);
            }
        }
        match out.send().await {
            Ok(res) => {
                let mut answer = Response::builder().status(res.status().as_u16());
                for (name, value) in res.headers() {
                    if !HOP_BY_HOP.contains(&name.as_str()) {
                        answer = answer.header(name.as_str(), value.as_bytes());
                    }
                }
                answer
                    .body(Body::from_stream(res.bytes_stream()))
                    .unwrap_or_else(|_| StatusCode::BAD_GATEWAY.into_response())
            }
            Err(e) => {
                tracing::warn!(to, error = %e.without_url(), "forwarding an MCP session's request failed");
                not_found()
            }
        }
    }
}

/// Sessions remembered per instance, at most (the oldest are ended first; rmcp ends idle
/// sessions on its own).
const MAX_SESSIONS: usize = 10_000;

/// Sessions one credential may hold open on one endpoint of an instance; opening another ends
/// its oldest, so a client that never closes its sessions (or a hostile one opening them in a
/// loop) holds a bounded amount of memory.
pub const MAX_SESSIONS_PER_OWNER: usize = 32;

/// Who opened each session this instance holds: its endpoint and credential, with the order
/// sessions were opened in (the oldest is ended first). A session this instance forgot is ended
/// at rmcp too, and is not found for anyone.
#[derive(Clone)]
pub struct Owners {
    opened: Arc<Mutex<Opened>>,
    manager: Arc<LocalSessionManager>,
    /// Every client that initializes gets a session (set endpoints), not only those that can
    /// be asked things.
    every_client: bool,
}

#[derive(Default)]
struct Opened {
    /// How many sessions were ever opened here: the next one's place in the order.
    count: u64,
    by_session: HashMap<String, (u64, String)>,
}

impl Owners {
    /// The owners of the sessions `manager` (the stateful service's) holds; `every_client`:
    /// whether every initialize opens one (set endpoints) or only one declaring it can be asked
    /// things (`/mcp`).
    pub fn new(manager: Arc<LocalSessionManager>, every_client: bool) -> Owners {
        Owners {
            opened: Arc::default(),
            manager,
            every_client,
        }
    }

    fn opened(&self) -> std::sync::MutexGuard<'_, Opened> {
        self.opened.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn insert(&self, session: String, owner: String) {
        let ended = {
            let mut opened = self.opened();
            let mut ended = Vec::new();
            let theirs: Vec<(u64, String)> = opened
                .by_session
                .iter()
                .filter(|(_, (_, o))| *o == owner)
                .map(|(k, (n, _))| (*n, k.clone()))
                .collect();
            if theirs.len() >= MAX_SESSIONS_PER_OWNER {
                if let Some((_, oldest)) = theirs.into_iter().min() {
                    ended.push(oldest);
                }
            } else if opened.by_session.len() >= MAX_SESSIONS {
                if let Some(oldest) = opened
                    .by_session
                    .iter()
                    .min_by_key(|(_, (n, _))| *n)
                    .map(|(k, _)| k.clone())
                {
                    ended.push(oldest);
                }
            }
            for id in &ended {
                opened.by_session.remove(id);
            }
            opened.count += 1;
            let n = opened.count;
            opened.by_session.insert(session, (n, owner));
            ended
        };
        for id in ended {
            let manager = self.manager.clone();
            tokio::spawn(async move {
                use rmcp::transport::streamable_http_server::session::SessionManager;
                let _ = manager.close_session(&id.into()).await;
            });
        }
    }

    fn owner(&self, session: &str) -> Option<String> {
        self.opened()
            .by_session
            .get(session)
            .map(|(_, o)| o.clone())
    }

    fn remove(&self, session: &str) {
        self.opened().by_session.remove(session);
    }
}

/// Who a request is, for a session's ownership: the endpoint, the user and the credential.
fn owner_of(who: &Principal, path: &str) -> String {
    format!(
        "{path}\n{}\n{}\n{}",
        who.user_id,
        who.api_key_id.as_deref().unwrap_or(""),
        who.oauth_grant_id.as_deref().unwrap_or("")
    )
}

/// Whether an `initialize` body opens a session: always when `every_client` (set endpoints:
/// their clients hear list changes and may subscribe to resources), else (`/mcp`) when it
/// declares a capability that needs one.
fn wants_session(body: &[u8], every_client: bool) -> bool {
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        return false;
    };
    let caps = &v["params"]["capabilities"];
    v["method"] == "initialize"
        && (every_client
            || caps.get("elicitation").is_some_and(|c| !c.is_null())
            || caps.get("sampling").is_some_and(|c| !c.is_null()))
}

fn not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        axum::Json(serde_json::json!({ "jsonrpc": "2.0", "id": null,
            "error": { "code": -32001, "message": "Session not found; initialize again" } })),
    )
        .into_response()
}

/// Sends a request to the stateless or the stateful service, or to the instance holding its
/// session, as above.
pub async fn route<S, B>(
    stateless: S,
    stateful: S,
    owners: Owners,
    forward: Forward,
    req: Request,
) -> Response
where
    S: tower::Service<Request, Response = http::Response<B>, Error = Infallible> + Clone,
    B: http_body::Body<Data = axum::body::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    let path = req.uri().path().to_owned();
    let who = req.extensions().get::<ApiCaller>().map(|c| c.0.clone());
    let session = req
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    if let Some(id) = session {
        let owner = who.as_ref().map(|w| owner_of(w, &path));
        match owners.owner(&id) {
            Some(o) if owner.as_deref() != Some(o.as_str()) => return not_found(),
            Some(_) => {}
            None => {
                if let Some(to) = forward.elsewhere(&id, req.headers()).await {
                    return forward.to(&to, req).await;
                }
                // Not one this instance holds for anyone (never opened here, or ended).
                return not_found();
            }
        }
        if req.method() == Method::DELETE {
            owners.remove(&id);
            if forward.me.is_some() {
                if let Err(e) = forward.wb.mcp_sessions().forget(&id).await {
                    tracing::warn!(error = %e, "an ended MCP session cannot be forgotten");
                }
            }
        }
        let mut req = req;
        req.extensions_mut().insert(InSession);
        return answer(stateful, req).await;
    }
    if req.method() != Method::POST {
        return answer(stateless, req).await;
    }
    let (parts, body) = req.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, super::MAX_REQUEST_BYTES).await else {
        return StatusCode::PAYLOAD_TOO_LARGE.into_response();
    };
    let opens = wants_session(&bytes, owners.every_client);
    let mut req = Request::from_parts(parts, Body::from(bytes));
    if !opens {
        return answer(stateless, req).await;
    }
    req.extensions_mut().insert(InSession);
    let res = answer(stateful, req).await;
    if let (Some(id), Some(who)) = (
        res.headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok()),
        who,
    ) {
        owners.insert(id.to_owned(), owner_of(&who, &path));
        if let Some(me) = &forward.me {
            if let Err(e) = forward.wb.mcp_sessions().record(id, me).await {
                tracing::warn!(error = %e, "where an MCP session lives cannot be recorded; other instances answer 404 for it");
            }
        }
    }
    res
}

async fn answer<S, B>(service: S, req: Request) -> Response
where
    S: tower::Service<Request, Response = http::Response<B>, Error = Infallible> + Clone,
    B: http_body::Body<Data = axum::body::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    match service.oneshot(req).await {
        Ok(res) => res.map(Body::new),
        Err(never) => match never {},
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_initialize_opens_a_session_on_a_set_or_when_it_can_be_asked_things() {
        let init = |caps: &str| {
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{caps},"clientInfo":{{"name":"c","version":"1"}}}}}}"#
            )
        };
        let wants = |body: &[u8]| wants_session(body, false);
        assert!(wants(init(r#"{"elicitation":{}}"#).as_bytes()));
        assert!(wants(init(r#"{"sampling":{}}"#).as_bytes()));
        assert!(!wants(init(r#"{"roots":{}}"#).as_bytes()));
        assert!(!wants(init("{}").as_bytes()));
        assert!(!wants(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"capabilities":{"sampling":{}}}}"#));
        assert!(!wants(b"not json"));
        // A set's clients all get one.
        assert!(wants_session(init("{}").as_bytes(), true));
        assert!(!wants_session(b"{}", true));
    }
}
