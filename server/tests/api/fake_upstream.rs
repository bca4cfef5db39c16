//! A controllable upstream MCP server on loopback, built with the official Rust SDK (rmcp) in
//! its default stateful mode (session ids, answers as event streams): tools can be added,
//! changed and removed while it runs, and it can hang, answer 5xx or slow down, so tests
//! exercise registration, refresh and review, timeouts, the breaker and the semaphores.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CustomRequest,
    GetPromptRequestParams, GetPromptResponse, GetPromptResult, Implementation, ListPromptsResult,
    ListToolsResult, PaginatedRequestParams, ProgressNotificationParam, ServerCapabilities,
    ServerConfig, ServerRequest, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer};
use serde_json::{json, Value};

#[derive(Default)]
pub struct UpstreamState {
    /// (name, description, input schema, read-only)
    pub tools: Mutex<Vec<(String, String, Value, bool)>>,
    /// A tool's full annotations (`readOnlyHint`, `destructiveHint`, …), by name, in place of
    /// the read-only flag above.
    pub annotations: Mutex<std::collections::HashMap<String, Value>>,
    /// Answer every HTTP request with 500.
    pub fail: AtomicBool,
    /// Cut every tools/call answer off mid-stream: the event stream starts, then the connection
    /// drops before the result (the call counts as received).
    pub drop_calls: AtomicBool,
    /// Answer every request with a JSON-RPC error that quotes the Authorization it received.
    pub echo_auth_in_errors: AtomicBool,
    /// How long `slow` takes, in ms.
    pub slow_ms: AtomicU64,
    pub calls: AtomicUsize,
    pub initializes: AtomicUsize,
    pub requests: AtomicUsize,
    pub in_flight: AtomicUsize,
    pub max_in_flight: AtomicUsize,
    pub last_authorization: Mutex<Option<String>>,
    /// (JSON-RPC method, `traceparent` header) of every POST, in order.
    pub traceparents: Mutex<Vec<(String, Option<String>)>>,
    /// The client of the last tools/list, to send it notifications.
    pub peer: Mutex<Option<rmcp::Peer<RoleServer>>>,
    /// Prompts (name, description), offered only once `set_prompt` was called: `greet` says
    /// hello to its `name` argument, `whoami` quotes the Authorization it received.
    pub prompts: Mutex<Option<Vec<(String, String)>>>,
    /// Notified by a POST to `/heard` (the client of `ask_then_withdraw` saying it was asked).
    pub heard: tokio::sync::Notify,
}

pub struct FakeUpstream {
    pub addr: SocketAddr,
    pub state: Arc<UpstreamState>,
    /// Stops the running server (see `stop`).
    stop: Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
}

impl FakeUpstream {
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    pub fn set_tool(&self, name: &str, description: &str, schema: Value, read_only: bool) {
        let mut tools = self.state.tools.lock().unwrap();
        tools.retain(|t| t.0 != name);
        tools.push((name.into(), description.into(), schema, read_only));
    }

    /// Lists `name` with these annotations (JSON as MCP spells them) instead of its read-only flag.
    pub fn set_annotations(&self, name: &str, annotations: Value) {
        self.state
            .annotations
            .lock()
            .unwrap()
            .insert(name.into(), annotations);
    }

    /// Offers only the named tools (of those it has).
    pub fn keep_only(&self, names: &[&str]) {
        self.state
            .tools
            .lock()
            .unwrap()
            .retain(|t| names.contains(&t.0.as_str()));
    }

    /// Offers the prompt `name` (and, from the first call on, the prompts capability).
    pub fn set_prompt(&self, name: &str, description: &str) {
        let mut prompts = self.state.prompts.lock().unwrap();
        let list = prompts.get_or_insert_with(Vec::new);
        list.retain(|p| p.0 != name);
        list.push((name.into(), description.into()));
    }

    pub fn remove_tool(&self, name: &str) {
        self.state.tools.lock().unwrap().retain(|t| t.0 != name);
    }

    /// Stops listening and closes idle connections: connecting is refused until `restart`.
    pub async fn stop(&self) {
        if let Some(stop) = self.stop.lock().unwrap().take() {
            let _ = stop.send(());
        }
        // The port is free once a connect is refused.
        for _ in 0..200 {
            if tokio::net::TcpStream::connect(self.addr).await.is_err() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("the fake upstream did not stop");
    }

    /// Listens again on the same address, with the same tools and counters (sessions are new).
    pub async fn restart(&self) {
        let listener = tokio::net::TcpListener::bind(self.addr)
            .await
            .expect("the fake's port is free again");
        *self.stop.lock().unwrap() = Some(serve(listener, self.state.clone()));
    }

    /// Tells the client that listed the tools that the list changed.
    pub async fn notify_tools_changed(&self) {
        let peer = self
            .state
            .peer
            .lock()
            .unwrap()
            .clone()
            .expect("a client listed the tools");
        peer.notify_tool_list_changed()
            .await
            .expect("the notification is sent");
    }
}

#[derive(Clone)]
struct Handler(Arc<UpstreamState>);

impl ServerHandler for Handler {
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .build();
        if self.0.prompts.lock().unwrap().is_some() {
            capabilities.prompts = Some(Default::default());
        }
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("fake-upstream", "1.0.0"))
    }

    async fn list_prompts(
        &self,
        _r: Option<PaginatedRequestParams>,
        _c: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let prompts = self.0.prompts.lock().unwrap().clone().unwrap_or_default();
        Ok(ListPromptsResult::with_all_items(
            prompts
                .into_iter()
                .map(|(name, description)| {
                    serde_json::from_value(json!({ "name": name, "description": description, "arguments": [{ "name": "name", "required": false }] }))
                        .expect("a prompt as MCP spells it")
                })
                .collect(),
        ))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _c: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let text = match request.name.as_str() {
            "greet" => format!(
                "Say hello to {}.",
                args.get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("everyone")
            ),
            "whoami" => format!(
                "You called with {}",
                self.0
                    .last_authorization
                    .lock()
                    .unwrap()
                    .clone()
                    .unwrap_or_default()
            ),
            other => {
                return Err(ErrorData::invalid_params(
                    format!("no prompt {other}"),
                    None,
                ))
            }
        };
        let result: GetPromptResult = serde_json::from_value(json!({
            "messages": [{ "role": "user", "content": { "type": "text", "text": text } }]
        }))
        .expect("a prompt result as MCP spells it");
        Ok(GetPromptResponse::Complete(result))
    }

    async fn list_tools(
        &self,
        _r: Option<PaginatedRequestParams>,
        c: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        *self.0.peer.lock().unwrap() = Some(c.peer.clone());
        let tools = self.0.tools.lock().unwrap().clone();
        let annotations = self.0.annotations.lock().unwrap().clone();
        Ok(ListToolsResult::with_all_items(
            tools
                .into_iter()
                .map(|(name, description, schema, read_only)| {
                    let Value::Object(m) = schema else {
                        unreachable!("schemas are objects")
                    };
                    let hints = match annotations.get(&name) {
                        Some(a) => serde_json::from_value(a.clone())
                            .expect("annotations as MCP spells them"),
                        None => ToolAnnotations::new().read_only(read_only),
                    };
                    Tool::new(name, description, Arc::new(m)).with_annotations(hints)
                })
                .collect(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        c: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let s = &self.0;
        s.calls.fetch_add(1, Ordering::SeqCst);
        let now = s.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        s.max_in_flight.fetch_max(now, Ordering::SeqCst);
        let args = Value::Object(request.arguments.clone().unwrap_or_default());
        let result = match request.name.as_ref() {
            "echo" => CallToolResult::success(vec![ContentBlock::text(format!(
                "Echo: {}",
                args["message"].as_str().unwrap_or("")
            ))]),
            "whoami" => CallToolResult::structured(
                json!({ "authorization": s.last_authorization.lock().unwrap().clone() }),
            ),
            "add" => CallToolResult::success(vec![ContentBlock::text(
                json!({ "sum": args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0) })
                    .to_string(),
            )]),
            "slow" => {
                tokio::time::sleep(Duration::from_millis(s.slow_ms.load(Ordering::SeqCst))).await;
                CallToolResult::success(vec![ContentBlock::text("done")])
            }
            "boom" => CallToolResult::error(vec![ContentBlock::text("the widget exploded")]),
            // Reports progress, then asks the client (elicitation), both quoting the
            // Authorization it received; answers with what the client said.
            "ask" => {
                let auth = s
                    .last_authorization
                    .lock()
                    .unwrap()
                    .clone()
                    .unwrap_or_default();
                if let Some(token) = c.meta.get_progress_token() {
                    let _ = c
                        .peer
                        .notify_progress(
                            ProgressNotificationParam::new(token, 1.0)
                                .with_total(2.0)
                                .with_message(format!("asking, as {auth}")),
                        )
                        .await;
                }
                let ask = ServerRequest::CustomRequest(CustomRequest::new(
                    "elicitation/create",
                    Some(
                        json!({ "message": format!("Who are you? I was called with {auth}"),
                        "requestedSchema": { "type": "object", "properties": { "name": { "type": "string" } } } }),
                    ),
                ));
                match c.peer.send_request(ask).await {
                    Ok(answer) => CallToolResult::success(vec![ContentBlock::text(format!(
                        "answered: {}",
                        serde_json::to_string(&answer).unwrap()
                    ))]),
                    Err(e) => CallToolResult::error(vec![ContentBlock::text(format!(
                        "could not ask: {e}"
                    ))]),
                }
            }
            // Asks the client, and once the client says (POST `args.heard`) it was asked,
            // withdraws the question, and finishes once the client says it let go of it.
            "ask_then_withdraw" => {
                let ask = ServerRequest::CustomRequest(CustomRequest::new(
                    "elicitation/create",
                    Some(
                        json!({ "message": format!("Withdraw me; tell {}", args["heard"].as_str().unwrap_or_default()),
                        "requestedSchema": { "type": "object", "properties": { "name": { "type": "string" } } } }),
                    ),
                ));
                match c
                    .peer
                    .send_cancellable_request(ask, rmcp::service::PeerRequestOptions::no_options())
                    .await
                {
                    Ok(handle) => {
                        let wait =
                            || tokio::time::timeout(Duration::from_secs(20), s.heard.notified());
                        let text = match wait().await {
                            Err(_) => "the client never said it was asked",
                            Ok(()) => {
                                let _ = handle.cancel(Some("no longer needed".into())).await;
                                match wait().await {
                                    Ok(()) => "withdrawn, and the client let go",
                                    Err(_) => "withdrawn, but the client kept asking its user",
                                }
                            }
                        };
                        CallToolResult::success(vec![ContentBlock::text(text)])
                    }
                    Err(e) => CallToolResult::error(vec![ContentBlock::text(format!(
                        "could not ask: {e}"
                    ))]),
                }
            }
            // Seed 004's `crm.contact.get` (served under the prefix `crm.`).
            "contact.get" => match args["email"].as_str() {
                Some("ada@example.com") => CallToolResult::structured(
                    json!({ "id": "c_118", "name": "Ada Lovelace", "plan": "scale" }),
                ),
                _ => CallToolResult::error(vec![ContentBlock::text("no such contact")]),
            },
            "whoami_error" => CallToolResult::error(vec![ContentBlock::text(format!(
                "refused {}",
                s.last_authorization
                    .lock()
                    .unwrap()
                    .clone()
                    .unwrap_or_default()
            ))]),
            other => CallToolResult::error(vec![ContentBlock::text(format!("no tool {other}"))]),
        };
        s.in_flight.fetch_sub(1, Ordering::SeqCst);
        Ok(result.into())
    }
}

async fn observe(State(s): State<Arc<UpstreamState>>, req: Request, next: Next) -> Response {
    s.requests.fetch_add(1, Ordering::SeqCst);
    if s.fail.load(Ordering::SeqCst) {
        return (
            axum::http::StatusCode::BAD_GATEWAY,
            "upstream of the upstream is down",
        )
            .into_response();
    }
    if let Some(a) = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
    {
        *s.last_authorization.lock().unwrap() = Some(a.to_owned());
    }
    let (parts, body) = req.into_parts();
    let bytes = axum::body::to_bytes(body, 1 << 20)
        .await
        .unwrap_or_default();
    if s.echo_auth_in_errors.load(Ordering::SeqCst) {
        let id = serde_json::from_slice::<Value>(&bytes)
            .ok()
            .and_then(|v| v.get("id").cloned())
            .unwrap_or(Value::Null);
        let auth = s
            .last_authorization
            .lock()
            .unwrap()
            .clone()
            .unwrap_or_default();
        return axum::Json(json!({ "jsonrpc": "2.0", "id": id, "error": { "code": -32000, "message": format!("bad credential {auth}") } })).into_response();
    }
    let method = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .and_then(|v| v["method"].as_str().map(str::to_owned));
    if let Some(m) = method {
        let traceparent = parts
            .headers
            .get("traceparent")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        s.traceparents.lock().unwrap().push((m, traceparent));
    }
    if String::from_utf8_lossy(&bytes).contains("\"initialize\"") {
        s.initializes.fetch_add(1, Ordering::SeqCst);
    }
    if s.drop_calls.load(Ordering::SeqCst)
        && String::from_utf8_lossy(&bytes).contains("\"tools/call\"")
    {
        s.calls.fetch_add(1, Ordering::SeqCst);
        let chunks: Vec<Result<axum::body::Bytes, std::io::Error>> = vec![
            Ok(axum::body::Bytes::from_static(
                b"event: message\ndata: {\"jsonrpc\":\"2.0\",",
            )),
            Err(std::io::Error::new(
                std::io::ErrorKind::ConnectionReset,
                "dropped mid-stream",
            )),
        ];
        return Response::builder()
            .header("content-type", "text/event-stream")
            .body(axum::body::Body::from_stream(futures::stream::iter(chunks)))
            .unwrap();
    }
    next.run(Request::from_parts(parts, axum::body::Body::from(bytes)))
        .await
}

/// Starts the fake with an `echo` (read-only), `add`, `slow`, `boom` and `whoami` tool.
pub async fn start() -> FakeUpstream {
    let state = Arc::new(UpstreamState::default());
    state.slow_ms.store(2000, Ordering::SeqCst);
    let up = FakeUpstream {
        addr: "127.0.0.1:0".parse().unwrap(),
        state: state.clone(),
        stop: Mutex::new(None),
    };
    up.set_tool("echo", "Echo a message back.", json!({ "type": "object", "properties": { "message": { "type": "string" } }, "required": ["message"] }), true);
    up.set_tool("add", "Add two numbers.", json!({ "type": "object", "properties": { "a": { "type": "integer" }, "b": { "type": "integer" } } }), false);
    up.set_tool(
        "slow",
        "Take a while.",
        json!({ "type": "object", "properties": {} }),
        true,
    );
    up.set_tool(
        "boom",
        "Always fails.",
        json!({ "type": "object", "properties": {} }),
        false,
    );
    up.set_tool(
        "whoami",
        "Show the credential the server received.",
        json!({ "type": "object", "properties": {} }),
        true,
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = serve(listener, state.clone());
    FakeUpstream {
        addr,
        state,
        stop: Mutex::new(Some(stop)),
    }
}

/// Serves the fake on `listener` until the returned sender fires.
fn serve(
    listener: tokio::net::TcpListener,
    state: Arc<UpstreamState>,
) -> tokio::sync::oneshot::Sender<()> {
    let handler = Handler(state.clone());
    let service = StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let heard = state.clone();
    let app = Router::new()
        .route(
            "/heard",
            axum::routing::post(move || async move {
                heard.heard.notify_one();
            }),
        )
        .nest_service("/mcp", service)
        .layer(middleware::from_fn_with_state(state, observe));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stopped.await;
            })
            .await;
    });
    stop
}
