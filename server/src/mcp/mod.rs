//! `/mcp`: the MCP endpoint (streamable HTTP via rmcp, stateless so any instance can serve any
//! request). A middleware authenticates the bearer API key first; the handler answers
//! tools/list with the meta-tools and routes tools/call to core.

mod fast_path;
mod meta_tools;
mod relay;
pub mod sessions;
mod sets;

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer};
use serde::Deserialize;
use serde_json::{json, Value};
use tracing::Instrument;
use workbench_core::args::Arg;
use workbench_core::auth::Principal;
use workbench_core::connections::{ConnectOutcome, CurlSessionRequest, WaitOutcome, MAX_WAIT_SECS};
use workbench_core::engine::{
    parse_request, CallOptions, Client, ExecuteOutcome, Surface, SEARCH_LIMIT_DEFAULT,
};
use workbench_core::Workbench;

use crate::api_auth::ApiCaller;
use crate::state::AppState;

pub use fast_path::answered as fast_path_answered;
pub use meta_tools::list as meta_tool_list;

/// Largest JSON-RPC request body accepted on /mcp.
pub const MAX_REQUEST_BYTES: usize = 4 * 1024 * 1024;

#[derive(Clone)]
pub struct McpHandler {
    wb: Workbench,
    config: Arc<crate::config::ServerConfig>,
}

impl McpHandler {
    fn principal(context: &RequestContext<RoleServer>) -> Result<Principal, ErrorData> {
        context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|p| p.extensions.get::<ApiCaller>())
            .map(|c| c.0.clone())
            .ok_or_else(|| ErrorData::invalid_request("unauthenticated", None))
    }

    /// One meta-tool call, as the result MCP sends (rmcp's handler and the fast path share it);
    /// `client`: the caller, when upstream servers may ask it things during the call.
    async fn call(
        &self,
        who: &Principal,
        request: CallToolRequestParams,
        client: Option<Client>,
    ) -> CallToolResult {
        let args = Value::Object(request.arguments.unwrap_or_default());
        match self.dispatch(who, &request.name, args, client).await {
            Ok(v) => CallToolResult::structured(v),
            Err(v) => CallToolResult::structured_error(v),
        }
    }

    async fn dispatch(
        &self,
        who: &Principal,
        name: &str,
        args: Value,
        client: Option<Client>,
    ) -> Result<Value, Value> {
        if let Some(op) = meta_tools::operation(name) {
            if let Err(e) = who.require(op) {
                return Err(json!({ "error": e.to_string(), "code": "NOT_ALLOWED" }));
            }
        }
        match name {
            meta_tools::SEARCH_TOOLS => {
                let a: SearchArgs = parse(args)?;
                let query = a
                    .query
                    .and_then(Arg::ok)
                    .ok_or_else(|| invalid("query must be a string"))?;
                let limit = match a.limit {
                    None => SEARCH_LIMIT_DEFAULT,
                    Some(v) => v
                        .ok()
                        .map(|n| n as usize)
                        .ok_or_else(|| invalid("limit must be an integer between 1 and 50"))?,
                };
                let found =
                    self.wb
                        .engine()
                        .search(who, &query, limit)
                        .await
                        .map_err(|e| match e {
                            workbench_core::Error::Invalid(m) => invalid(&m),
                            other => failed(&other),
                        })?;
                Ok(json!(found))
            }
            meta_tools::GET_TOOL_SCHEMA => {
                let a: ToolArgs = parse(args)?;
                let name = a
                    .tool
                    .and_then(Arg::ok)
                    .ok_or_else(|| invalid("tool must be a tool name"))?;
                match self.wb.engine().tool(who, &name).await {
                    Ok(Some(t)) => {
                        // The seed's `{ schema }`, with whether the tool can run now and why not.
                        let availability = t.availability();
                        let mut out = json!({
                            "schema": t.spec.input_schema,
                            "status": availability.status(),
                        });
                        if let Some(reason) = availability.reason() {
                            out["unavailable_reason"] = json!(reason);
                        }
                        Ok(out)
                    }
                    Ok(None) => Err(json!({ "error": "Tool not found" })),
                    Err(e) => Err(failed(&e)),
                }
            }
            meta_tools::EXECUTE_TOOLS => {
                let req = parse_request(&args).map_err(|e| invalid(&e.to_string()))?;
                let mut opts = CallOptions::new(Surface::Mcp);
                opts.client = client;
                match self.wb.engine().execute_tools(who, req, &opts, None).await {
                    ExecuteOutcome::Ok(v) => Ok(v),
                    ExecuteOutcome::Failed(v) => Err(v),
                }
            }
            meta_tools::WHOAMI => match self.wb.accounts().user(&who.user_id).await {
                Ok(Some(u)) => Ok(json!({ "id": u.id, "email": u.email })),
                _ => Err(json!({ "error": "User not found" })),
            },
            meta_tools::LIST_INTEGRATIONS => {
                let list = self
                    .wb
                    .engine()
                    .integrations(who)
                    .await
                    .map_err(|_| unavailable())?;
                Ok(json!({ "integrations": list }))
            }
            meta_tools::CONNECT | meta_tools::GET_AUTH_URL => {
                let a: ConnectArgs = parse(args)?;
                let name = a
                    .integration
                    .and_then(Arg::ok)
                    .ok_or_else(|| invalid("integration must be a string"))?;
                match self.wb.engine().connect(who, &name).await {
                    Ok(ConnectOutcome::NoAccountNeeded) => Ok(json!({ "status": "CONNECTED" })),
                    Ok(ConnectOutcome::Pending(p)) => Ok(json!({
                        "connectionId": p.id,
                        "url": self.config.public_link(&format!("/connect/{}", p.id)),
                        "expiresAt": workbench_core::clock::rfc3339(p.expires_at),
                        "integration": p.integration,
                        "authType": p.auth_type,
                    })),
                    Err(workbench_core::Error::Invalid(m)) => Err(json!({ "error": m })),
                    Err(_) => Err(unavailable()),
                }
            }
            meta_tools::WAIT_FOR_CONNECTION => {
                let a: WaitArgs = parse(args)?;
                let id = a
                    .connection_id
                    .and_then(Arg::ok)
                    .ok_or_else(|| invalid("connectionId must be a string"))?;
                let timeout = match a.timeout_sec {
                    None => MAX_WAIT_SECS,
                    Some(v) => v
                        .ok()
                        .filter(|n| (1..=MAX_WAIT_SECS).contains(n))
                        .ok_or_else(|| invalid("timeoutSec must be an integer from 1 to 600"))?,
                };
                match self
                    .wb
                    .connections()
                    .wait(who, &id, std::time::Duration::from_secs(timeout))
                    .await
                    .map_err(|_| unavailable())?
                {
                    WaitOutcome::Connected => Ok(json!({ "status": "CONNECTED" })),
                    WaitOutcome::Timeout => Ok(json!({ "status": "TIMEOUT" })),
                    WaitOutcome::Expired => Ok(json!({ "status": "EXPIRED" })),
                    WaitOutcome::Unknown => Err(json!({ "error": "Unknown connectionId" })),
                }
            }
            meta_tools::CURL_SESSION => {
                let req: CurlSessionRequest = parse(args)?;
                match self
                    .wb
                    .engine()
                    .curl_session(self.wb.proxy_tokens(), who, req)
                    .await
                {
                    Ok(s) => {
                        let base = self.config.public_link("/c");
                        Ok(json!({
                            "token": s.token,
                            "expiresIn": s.expires_in,
                            "proxyBaseUrl": base,
                            "usage": format!("Send requests to {base}/<integration>/<path> with Authorization: Bearer <token>"),
                        }))
                    }
                    Err(workbench_core::Error::Invalid(m)) => Err(json!({ "error": m })),
                    Err(_) => Err(unavailable()),
                }
            }
            other => Err(
                json!({ "error": format!("unknown tool {other}; this server offers {}", meta_tools::list().iter().map(|t| t.name.to_string()).collect::<Vec<_>>().join(", ")), "code": "TOOL_NOT_FOUND" }),
            ),
        }
    }
}

/// Arguments of search_tools.
#[derive(Deserialize)]
struct SearchArgs {
    #[serde(default)]
    query: Option<Arg<String>>,
    #[serde(default)]
    limit: Option<Arg<u64>>,
}

/// Arguments of get_tool_schema.
#[derive(Deserialize)]
struct ToolArgs {
    #[serde(default)]
    tool: Option<Arg<String>>,
}

/// Arguments of connect and get_auth_url.
#[derive(Deserialize)]
struct ConnectArgs {
    #[serde(default)]
    integration: Option<Arg<String>>,
}

/// Arguments of wait_for_connection.
#[derive(Deserialize)]
struct WaitArgs {
    #[serde(default, rename = "connectionId")]
    connection_id: Option<Arg<String>>,
    #[serde(default, rename = "timeoutSec")]
    timeout_sec: Option<Arg<u64>>,
}

/// A meta-tool's arguments; every field is an `Arg`, so only a non-object fails here.
fn parse<T: serde::de::DeserializeOwned>(args: Value) -> Result<T, Value> {
    serde_json::from_value(args).map_err(|e| invalid(&format!("arguments must be an object: {e}")))
}

fn unavailable() -> Value {
    json!({ "error": "workbench cannot answer right now; try again", "code": "UNAVAILABLE" })
}

fn invalid(message: &str) -> Value {
    json!({ "error": message, "code": "INVALID_ARGUMENTS" })
}

/// A failure of workbench itself (its database): logged, answered without detail.
fn failed(e: &workbench_core::Error) -> Value {
    tracing::error!(error = ?e, "a meta-tool failed");
    unavailable()
}

impl ServerHandler for McpHandler {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("workbench", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "workbench gives you every tool your project may use through a few meta-tools: search_tools to find a tool, get_tool_schema to read its arguments, execute_tools to run it.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(meta_tools::list()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let who = Self::principal(&context)?;
        // A client's cancellation reaches the upstream request under way (`PeerRelay`); the
        // call then ends, recorded like any other.
        Ok(self
            .call(&who, request, relay::PeerRelay::of(&context))
            .instrument(request_span(&context))
            .await
            .into())
    }
}

/// The request's own span: rmcp runs handlers inside its service loop's spans, so entering the
/// request's span again hangs log lines and the execution's trace span off the request.
fn request_span(context: &RequestContext<RoleServer>) -> tracing::Span {
    context
        .extensions
        .get::<http::request::Parts>()
        .and_then(|p| p.extensions.get::<crate::request_id::RequestSpan>())
        .map(|s| s.0.clone())
        .unwrap_or_else(tracing::Span::current)
}

/// The /mcp service, nested into the main router.
pub fn routes(state: &AppState) -> Router<AppState> {
    let handler = McpHandler {
        wb: state.wb.clone(),
        config: state.config.clone(),
    };
    let stateful_handler = handler.clone();
    let service = StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(LocalSessionManager::default()),
        service_config(state),
    );
    let manager = Arc::new(LocalSessionManager::default());
    let stateful = StreamableHttpService::new(
        move || Ok(stateful_handler.clone()),
        manager.clone(),
        session_config(state),
    );
    let owners = sessions::Owners::new(manager, false);
    let forward = sessions::Forward::new(state);
    let endpoint = move |req: Request| {
        let (service, stateful, owners, forward) = (
            service.clone(),
            stateful.clone(),
            owners.clone(),
            forward.clone(),
        );
        async move { sessions::route(service, stateful, owners, forward, req).await }
    };
    // Exactly /mcp (and /mcp/): a path below it is another endpoint's (a tool set's) or none.
    Router::new()
        .route("/mcp", axum::routing::any(endpoint.clone()))
        .route("/mcp/", axum::routing::any(endpoint))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            fast_path::tools_call,
        ))
        .layer(middleware::from_fn_with_state(state.clone(), authenticate))
        // After the layers above: set endpoints authenticate in their own way.
        .merge(sets::routes(state))
}

/// How rmcp serves `/mcp` and the set endpoints: stateless JSON answers, the hosts and origins
/// this server answers to, the body limit.
fn service_config(state: &AppState) -> StreamableHttpServerConfig {
    let origins: Vec<String> = vec![
        state.config.public_origin.clone(),
        "http://localhost:*".into(),
        "http://127.0.0.1:*".into(),
        "http://[::1]:*".into(),
    ];
    StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .with_allowed_hosts(state.config.allowed_hosts.clone())
        .with_allowed_origins(origins)
        .with_max_request_body_bytes(MAX_REQUEST_BYTES)
}

/// How rmcp serves the sessions of clients that can be asked things (`sessions.rs`): as
/// `service_config`, with sessions, ended when workbench shuts down.
fn session_config(state: &AppState) -> StreamableHttpServerConfig {
    let stop = tokio_util::sync::CancellationToken::new();
    if let Ok(rt) = tokio::runtime::Handle::try_current() {
        let (stop, mut stopping) = (stop.clone(), state.wb.stopping());
        rt.spawn(async move {
            let _ = stopping.wait_for(|s| *s).await;
            stop.cancel();
        });
    }
    service_config(state)
        .with_legacy_session_mode(true)
        .with_cancellation_token(stop)
}

/// A bearer API key or an OAuth access token issued for this server's /mcp first: nothing
/// reaches the MCP machinery without one.
async fn authenticate(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let (mut parts, body) = req.into_parts();
    // A key limited to tool sets uses their endpoints only: it may not read tools here.
    match caller(
        &state,
        &mut parts,
        &state.config.oauth_context(),
        Some("/mcp"),
        workbench_core::auth::Operation::ToolsRead,
    )
    .await
    {
        Ok(_) => next.run(Request::from_parts(parts, body)).await,
        Err(refused) => refused,
    }
}

/// The caller of an MCP endpoint (`/mcp` or a tool set's): a bearer API key, or an MCP OAuth
/// access token issued for that endpoint (`ctx.resource`, RFC 8707), that may perform `op`; it
/// is put in the request's extensions for the handlers. Refused, the answer: a 401 names the
/// protected resource metadata of the endpoint at `path` (RFC 9728), where a client learns how
/// to get a token.
async fn caller(
    state: &AppState,
    parts: &mut http::request::Parts,
    ctx: &workbench_core::oauth::OAuthContext,
    path: Option<&str>,
    op: workbench_core::auth::Operation,
) -> Result<Principal, Response> {
    let token = crate::api_auth::bearer_token(&parts.headers).map(str::to_owned);
    let who = match token.as_deref() {
        Some(t) if t.starts_with(workbench_core::oauth::ACCESS_TOKEN_PREFIX) => state
            .wb
            .oauth()
            .authenticate(ctx, t)
            .await
            .map_err(crate::api_error::ApiError::from),
        _ => <ApiCaller as axum::extract::FromRequestParts<AppState>>::from_request_parts(
            parts, state,
        )
        .await
        .map(|ApiCaller(who)| who),
    }
    .and_then(|who| {
        who.require(op)
            .map(|()| who)
            .map_err(crate::api_error::ApiError::from)
    });
    match who {
        Ok(who) => {
            parts.extensions.insert(ApiCaller(who.clone()));
            Ok(who)
        }
        Err(rejection) => {
            let unauthorized = rejection.status == axum::http::StatusCode::UNAUTHORIZED;
            let mut res = rejection.into_response();
            if let Some(path) = path.filter(|_| unauthorized) {
                res.headers_mut().insert(
                    axum::http::header::WWW_AUTHENTICATE,
                    crate::mcp_oauth::www_authenticate(state, path, token.is_some()),
                );
            }
            Err(res)
        }
    }
}
