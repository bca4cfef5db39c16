//! `/mcp`: the MCP endpoint (streamable HTTP via rmcp, stateless so any instance can serve any
//! request). A middleware authenticates the bearer API key first; the handler answers
//! tools/list with the meta-tools and routes tools/call to core.

mod meta_tools;

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer};
use serde_json::{json, Value};
use workbench_core::auth::Principal;
use workbench_core::connections::WaitOutcome;
use workbench_core::engine::{parse_request, CallOptions, ExecuteOutcome, Surface, SEARCH_LIMIT_DEFAULT};
use workbench_core::Workbench;

use crate::api_auth::ApiCaller;
use crate::state::AppState;

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

    async fn dispatch(&self, who: &Principal, name: &str, args: Value) -> Result<Value, Value> {
        match name {
            meta_tools::SEARCH_TOOLS => {
                let query = args.get("query").and_then(Value::as_str).ok_or_else(|| invalid("query must be a string"))?;
                let limit = match args.get("limit") {
                    None | Some(Value::Null) => SEARCH_LIMIT_DEFAULT,
                    Some(v) => v.as_u64().map(|n| n as usize).ok_or_else(|| invalid("limit must be an integer between 1 and 50"))?,
                };
                let hits = self.wb.engine().search(who, query, limit).map_err(|e| invalid(&e.to_string()))?;
                Ok(json!({ "tools": hits }))
            }
            meta_tools::GET_TOOL_SCHEMA => {
                let name = args.get("tool").and_then(Value::as_str).ok_or_else(|| invalid("tool must be a tool name"))?;
                match self.wb.engine().tool(who, name) {
                    Some(t) => Ok(json!({ "schema": t.spec.input_schema })),
                    None => Err(json!({ "error": "Tool not found" })),
                }
            }
            meta_tools::EXECUTE_TOOLS => {
                let req = parse_request(&args).map_err(|m| invalid(&m))?;
                match self.wb.engine().execute_tools(who, req, &CallOptions::new(Surface::Mcp), None).await {
                    ExecuteOutcome::Ok(v) => Ok(v),
                    ExecuteOutcome::Failed(v) => Err(v),
                }
            }
            meta_tools::WHOAMI => match self.wb.accounts().user(&who.user_id).await {
                Ok(Some(u)) => Ok(json!({ "id": u.id, "email": u.email })),
                _ => Err(json!({ "error": "User not found" })),
            },
            meta_tools::LIST_INTEGRATIONS => {
                let list = self.wb.connections().statuses(who).await.map_err(|_| unavailable())?;
                Ok(json!({ "integrations": list }))
            }
            meta_tools::CONNECT | meta_tools::GET_AUTH_URL => self.connect(who, &args).await,
            meta_tools::WAIT_FOR_CONNECTION => {
                let id = args.get("connectionId").and_then(Value::as_str).ok_or_else(|| invalid("connectionId must be a string"))?;
                let timeout = match args.get("timeoutSec") {
                    None | Some(Value::Null) => workbench_core::connections::MAX_WAIT_SECS,
                    Some(v) => v
                        .as_u64()
                        .filter(|n| (1..=workbench_core::connections::MAX_WAIT_SECS).contains(n))
                        .ok_or_else(|| invalid("timeoutSec must be an integer from 1 to 600"))?,
                };
                match self.wb.connections().wait(who, id, std::time::Duration::from_secs(timeout)).await.map_err(|_| unavailable())? {
                    WaitOutcome::Connected => Ok(json!({ "status": "CONNECTED" })),
                    WaitOutcome::Timeout => Ok(json!({ "status": "TIMEOUT" })),
                    WaitOutcome::Expired => Ok(json!({ "status": "EXPIRED" })),
                    WaitOutcome::Unknown => Err(json!({ "error": "Unknown connectionId" })),
                }
            }
            meta_tools::CURL_SESSION => self.curl_session(who, &args).await,
            other => Err(json!({ "error": format!("unknown tool {other}; this server offers {}", meta_tools::list().iter().map(|t| t.name.to_string()).collect::<Vec<_>>().join(", ")), "code": "TOOL_NOT_FOUND" })),
        }
    }
}

impl McpHandler {
    async fn connect(&self, who: &Principal, args: &Value) -> Result<Value, Value> {
        let name = args.get("integration").and_then(Value::as_str).ok_or_else(|| invalid("integration must be a string"))?;
        let Some(i) = self.wb.connections().lookup(&who.project_id, name) else {
            let known: Vec<String> = self.wb.connections().all_for(&who.project_id).iter().map(|i| i.name().to_owned()).collect();
            return Err(json!({ "error": format!("unknown integration {name}; known: {}", known.join(", ")) }));
        };
        if !i.needs_connection() {
            return Ok(json!({ "status": "CONNECTED" }));
        }
        let pending = self.wb.connections().begin(who, &i).await.map_err(|_| unavailable())?;
        Ok(json!({
            "connectionId": pending.id,
            "url": self.config.public_link(&format!("/connect/{}", pending.id)),
            "expiresAt": workbench_core::clock::rfc3339(pending.expires_at),
            "integration": pending.integration,
            "authType": pending.auth_type,
        }))
    }

    async fn curl_session(&self, who: &Principal, args: &Value) -> Result<Value, Value> {
        use workbench_core::connections::proxy_token::{DEFAULT_TTL_SECS, MAX_TTL_SECS, MIN_TTL_SECS};
        let mut problems = Vec::new();
        let names: Vec<String> = match args.get("integrations").and_then(Value::as_array) {
            Some(list) => list
                .iter()
                .filter_map(|v| {
                    let s = v.as_str().map(str::to_owned);
                    if s.is_none() {
                        problems.push(format!("integration names must be strings, got {v}"));
                    }
                    s
                })
                .collect(),
            None => {
                problems.push("integrations must be an array of integration names".to_string());
                Vec::new()
            }
        };
        let ttl = match args.get("expiresInSeconds") {
            None | Some(Value::Null) => DEFAULT_TTL_SECS,
            Some(v) => match v.as_u64().filter(|n| (MIN_TTL_SECS..=MAX_TTL_SECS).contains(n)) {
                Some(n) => n,
                None => {
                    problems.push(format!("expiresInSeconds must be an integer from {MIN_TTL_SECS} to {MAX_TTL_SECS}"));
                    DEFAULT_TTL_SECS
                }
            },
        };
        let checked = if names.is_empty() && !problems.is_empty() {
            Err(String::new())
        } else {
            self.wb.connections().check_proxy_request(who, &names).await
        };
        match checked {
            Ok(valid) if problems.is_empty() => {
                let (token, _) = self.wb.proxy_tokens().mint(who, valid, ttl).await.map_err(|_| unavailable())?;
                let base = self.config.public_link("/c");
                Ok(json!({
                    "token": token,
                    "expiresIn": ttl,
                    "proxyBaseUrl": base,
                    "usage": format!("Send requests to {base}/<integration>/<path> with Authorization: Bearer <token>"),
                }))
            }
            Ok(_) => Err(json!({ "error": problems.join("; ") })),
            Err(more) => {
                if !more.is_empty() {
                    problems.push(more);
                }
                Err(json!({ "error": problems.join("; ") }))
            }
        }
    }
}

fn unavailable() -> Value {
    json!({ "error": "workbench cannot answer right now; try again", "code": "UNAVAILABLE" })
}

fn invalid(message: &str) -> Value {
    json!({ "error": message, "code": "INVALID_ARGUMENTS" })
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
        let args = Value::Object(request.arguments.unwrap_or_default());
        let result = match self.dispatch(&who, &request.name, args).await {
            Ok(v) => CallToolResult::structured(v),
            Err(v) => CallToolResult::structured_error(v),
        };
        Ok(result.into())
    }
}

/// The /mcp service, nested into the main router.
pub fn routes(state: &AppState) -> Router<AppState> {
    let handler = McpHandler { wb: state.wb.clone(), config: state.config.clone() };
    let origins: Vec<String> = vec![
        state.config.public_origin.clone(),
        "http://localhost:*".into(),
        "http://127.0.0.1:*".into(),
        "http://[::1]:*".into(),
    ];
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .with_allowed_hosts(state.config.allowed_hosts.clone())
        .with_allowed_origins(origins)
        .with_max_request_body_bytes(MAX_REQUEST_BYTES);
    let service = StreamableHttpService::new(move || Ok(handler.clone()), Arc::new(LocalSessionManager::default()), config);
    Router::new()
        .nest_service("/mcp", service)
        .layer(middleware::from_fn_with_state(state.clone(), authenticate))
}

/// Bearer API key first: nothing reaches the MCP machinery without one.
async fn authenticate(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let (mut parts, body) = req.into_parts();
    match <ApiCaller as axum::extract::FromRequestParts<AppState>>::from_request_parts(&mut parts, &state).await {
        Ok(_) => next.run(Request::from_parts(parts, body)).await,
        Err(rejection) => rejection.into_response(),
    }
}
