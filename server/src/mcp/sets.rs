//! `/mcp/sets/{slug}`: a tool set's own MCP endpoint (issue 33). `tools/list` lists the set's
//! tools directly, under the names, descriptions and schemas the set gives them; `tools/call`
//! runs one through core's tool sets, which map the name and add the fixed values, then hand it
//! to the engine's one pipeline. Every client gets a session (`sessions.rs`), so it hears list
//! changes and may subscribe to resources; the same host and origin checks as `/mcp`. It
//! takes API keys and MCP OAuth access tokens issued for this endpoint (a set is a protected
//! resource of its own); an unknown set, or one the key is not limited to, is 404 before rmcp
//! runs. A set that says so also publishes the prompts and resources of its tools' MCP servers
//! (`prompts/*`, `resources/*`; core's `toolsets/items.rs` decides and audits them).

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use rmcp::handler::server::ServerHandler;
use rmcp::model::SubscriptionFilter;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, DiscoverResult,
    GetPromptRequestParams, GetPromptResponse, GetPromptResult, Implementation,
    InitializeRequestParams, InitializeResult, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, ResourceUpdatedNotificationParam, ServerCapabilities,
    ServerConfig, SubscribeRequestParams, Tool, ToolAnnotations, UnsubscribeRequestParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::StreamableHttpService;
use rmcp::{ErrorData, RoleServer};
use serde_json::Value;
use tracing::Instrument;
use workbench_core::auth::{Operation, Principal};
use workbench_core::catalog::{HandlerError, SideEffects};
use workbench_core::engine::{CallOptions, Client, Surface};
use workbench_core::toolsets::{endpoint_path, valid_slug, ExposedTool, Heard, ItemError, ToolSet};
use workbench_core::Workbench;

use crate::api_auth::ApiCaller;
use crate::api_error::ApiError;
use crate::state::AppState;

/// Where set endpoints live.
pub const PREFIX: &str = "/mcp/sets/";

/// The set a request's path names, as the caller may use it (put there by `resolve`).
#[derive(Clone)]
struct SetEndpoint(Arc<ToolSet>);

#[derive(Clone)]
pub struct SetHandler {
    wb: Workbench,
    /// A session's resource subscriptions, by the URI the set shows (each handler of the
    /// stateful service is one session's; the stateless one has none).
    watching: Arc<std::sync::Mutex<HashMap<String, Watch>>>,
}

/// Resource subscriptions one session may hold.
const MAX_SUBSCRIPTIONS: usize = 100;

/// One resource subscription of a session: the task telling the client of updates, which owns
/// the subscription at the server (let go when the task ends: unsubscribed, the session ended,
/// or the client is gone).
struct Watch {
    task: tokio::task::AbortHandle,
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Whether the request came in a session, or opens one (`sessions.rs` gives one to every set
/// client).
fn in_session(extensions: &rmcp::model::Extensions) -> bool {
    extensions
        .get::<http::request::Parts>()
        .is_some_and(|p| p.extensions.get::<super::sessions::InSession>().is_some())
}

impl SetHandler {
    fn new(wb: Workbench) -> SetHandler {
        SetHandler {
            wb,
            watching: Arc::default(),
        }
    }

    fn caller(
        context: &RequestContext<RoleServer>,
    ) -> Result<(Principal, Arc<ToolSet>), ErrorData> {
        let parts = context.extensions.get::<http::request::Parts>();
        let who = parts.and_then(|p| p.extensions.get::<ApiCaller>());
        let set = parts.and_then(|p| p.extensions.get::<SetEndpoint>());
        match (who, set) {
            (Some(w), Some(s)) => Ok((w.0.clone(), s.0.clone())),
            _ => Err(ErrorData::invalid_request("unauthenticated", None)),
        }
    }

    /// One call, as the result MCP sends; `client`: the caller, when upstream servers may ask
    /// it things during the call.
    async fn call(
        &self,
        who: &Principal,
        set: &ToolSet,
        request: CallToolRequestParams,
        client: Option<Client>,
    ) -> CallToolResult {
        let args = request.arguments.unwrap_or_default();
        let mut opts = CallOptions::new(Surface::Mcp);
        opts.client = client;
        let outcome = self
            .wb
            .tool_sets()
            .call(who, set, &request.name, args, opts)
            .await;
        match outcome.and_then(|o| o.result) {
            Ok(v) => result(v),
            Err(e) => CallToolResult::structured_error(e.to_mcp()),
        }
    }
}

/// A tool's result as MCP content: an object is also structured content; anything else is
/// one text block (a string as itself, other values as JSON).
fn result(v: Value) -> CallToolResult {
    match v {
        Value::Object(_) => CallToolResult::structured(v),
        Value::String(s) => CallToolResult::success(vec![ContentBlock::text(s)]),
        other => CallToolResult::success(vec![ContentBlock::text(other.to_string())]),
    }
}

/// A set's tool as `tools/list` shows it: the exposed name, description and schema, and hints
/// from the tool's side effects.
fn listed(t: &ExposedTool) -> Tool {
    let schema = match &t.input_schema {
        Value::Object(m) => Arc::new(m.clone()),
        _ => Arc::new(serde_json::Map::new()),
    };
    let effects = t.tool.spec.side_effects;
    Tool::new(t.name().to_owned(), t.description().to_owned(), schema).with_annotations(
        ToolAnnotations::new()
            .read_only(matches!(effects, SideEffects::None | SideEffects::Network))
            .destructive(effects == SideEffects::Destructive),
    )
}

fn info() -> ServerConfig {
    ServerConfig::new(
        ServerCapabilities::builder()
            .enable_prompts()
            .enable_prompts_list_changed()
            .enable_resources()
            .enable_resources_list_changed()
            .enable_tools()
            .enable_tool_list_changed()
            .build(),
    )
    .with_server_info(Implementation::new("workbench", env!("CARGO_PKG_VERSION")))
}

/// The changes of a set's lists its caller should hear (`ToolSets::heard`), one at a time,
/// for `subscriptions/listen` and for a session's stream; none once workbench shuts down.
struct SetChanges {
    sets: workbench_core::toolsets::ToolSets,
    who: Principal,
    set: Arc<ToolSet>,
    notices: tokio::sync::broadcast::Receiver<workbench_core::upstream::ListChanged>,
    stopping: tokio::sync::watch::Receiver<bool>,
}

impl SetChanges {
    fn new(wb: &Workbench, who: Principal, set: Arc<ToolSet>) -> SetChanges {
        let sets = wb.tool_sets().clone();
        SetChanges {
            notices: sets.notices(),
            sets,
            who,
            set,
            stopping: wb.stopping(),
        }
    }

    /// The next change to pass on (a listener that fell behind hears everything).
    async fn next(&mut self) -> Option<Heard> {
        use tokio::sync::broadcast::error::RecvError;
        loop {
            let received = tokio::select! {
                _ = self.stopping.wait_for(|s| *s) => return None,
                n = self.notices.recv() => n,
            };
            let heard = match received {
                Ok(change) => self.sets.heard(&self.who, &self.set, &change),
                Err(RecvError::Lagged(_)) => Heard::ALL,
                Err(RecvError::Closed) => return None,
            };
            if heard.any() {
                return Some(heard);
            }
        }
    }
}

/// A listing core could not read, as MCP's error (the cause is logged, never sent).
fn unanswerable(e: workbench_core::Error) -> ErrorData {
    tracing::error!(error = ?e, "a tool set's prompts or resources could not be listed");
    ErrorData::internal_error("workbench cannot answer right now; try again", None)
}

/// Items as rmcp's types; one that does not fit is left out (and logged).
fn typed<T: serde::de::DeserializeOwned>(items: Vec<Value>) -> Vec<T> {
    items
        .into_iter()
        .filter_map(|v| match serde_json::from_value(v) {
            Ok(t) => Some(t),
            Err(e) => {
                tracing::warn!(error = %e, "an upstream prompt or resource does not fit MCP's shape; left out");
                None
            }
        })
        .collect()
}

/// Why a prompt or resource could not be given, as MCP's error: what the set does not publish
/// (or the caller's policy does not allow, D2) is not found; a server's failure carries its
/// scrubbed reason.
fn item_error(e: ItemError, what: &str, resource: bool) -> ErrorData {
    match e {
        ItemError::NotFound | ItemError::Denied if resource => {
            ErrorData::resource_not_found(format!("this tool set has no resource {what}"), None)
        }
        ItemError::NotFound | ItemError::Denied => {
            ErrorData::invalid_params(format!("this tool set has no prompt named {what}"), None)
        }
        ItemError::Invalid(m) => ErrorData::invalid_params(m, None),
        ItemError::TooLarge { limit } => ErrorData::internal_error(
            format!("the answer is larger than {limit} bytes, the most a tool set passes on"),
            None,
        ),
        ItemError::Failed(HandlerError::InvalidArgument { message, .. }) => {
            ErrorData::invalid_params(message, None)
        }
        ItemError::Failed(HandlerError::Timeout { timeout_ms }) => ErrorData::internal_error(
            format!("the MCP server did not answer within {timeout_ms} ms"),
            None,
        ),
        ItemError::Failed(HandlerError::Failed(m) | HandlerError::Unavailable(m)) => {
            ErrorData::internal_error(m, None)
        }
        ItemError::Failed(HandlerError::NotConnected {
            integration,
            expired,
        }) => ErrorData::invalid_request(
            format!(
                "{} {integration}: connect it (the connect tool or the portal) and try again",
                if expired {
                    "your connection has expired to"
                } else {
                    "you have not connected"
                }
            ),
            None,
        ),
        ItemError::Failed(HandlerError::ScopeNeeded {
            integration,
            scopes,
        }) => ErrorData::invalid_request(
            format!(
                "{integration} needs more access ({}): connect it again and try again",
                scopes.join(" ")
            ),
            None,
        ),
    }
}

/// The answer core gave, as rmcp's type.
fn answer<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, ErrorData> {
    serde_json::from_value(v).map_err(|e| {
        tracing::warn!(error = %e, "an upstream answer does not fit MCP's shape");
        ErrorData::internal_error("the MCP server's answer does not fit MCP's shape", None)
    })
}

impl ServerHandler for SetHandler {
    fn get_info(&self) -> ServerConfig {
        info()
    }

    /// The set's name and description become the server's title and instructions.
    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        let (_, set) = Self::caller(&context)?;
        context.peer.set_peer_info(request.clone());
        let mut out = self.negotiate_initialize(&request)?;
        out.server_info = Implementation::new(
            format!("workbench: {}", set.name),
            env!("CARGO_PKG_VERSION"),
        );
        if !set.description.is_empty() {
            out.instructions = Some(set.description.clone());
        }
        if !set.prompts_and_resources {
            out.capabilities.prompts = None;
            out.capabilities.resources = None;
        }
        // A stateless client of an older revision has no stream to hear list changes or
        // resource updates on (only 2026-07-28's subscriptions/listen does); one in a session
        // (`sessions.rs`) hears them on the session's stream.
        let in_session = in_session(&context.extensions);
        if let Some(resources) = out.capabilities.resources.as_mut() {
            resources.subscribe = in_session.then_some(true);
        }
        for list_changed in [
            out.capabilities.tools.as_mut().map(|c| &mut c.list_changed),
            out.capabilities
                .prompts
                .as_mut()
                .map(|c| &mut c.list_changed),
            out.capabilities
                .resources
                .as_mut()
                .map(|c| &mut c.list_changed),
        ]
        .into_iter()
        .flatten()
        .filter(|_| !in_session)
        {
            *list_changed = None;
        }
        Ok(out)
    }

    /// A client in a session hears its set's list changes on the session's stream, until the
    /// session ends (seen at the next change) or workbench shuts down.
    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        if !in_session(&context.extensions) {
            return;
        }
        let parts = context.extensions.get::<http::request::Parts>();
        let who = parts.and_then(|p| p.extensions.get::<ApiCaller>());
        let set = parts.and_then(|p| p.extensions.get::<SetEndpoint>());
        let (Some(who), Some(set)) = (who.map(|w| w.0.clone()), set.map(|s| s.0.clone())) else {
            return;
        };
        let mut changes = SetChanges::new(&self.wb, who, set);
        let peer = context.peer.clone();
        tokio::spawn(async move {
            while let Some(heard) = changes.next().await {
                let sent = async {
                    if heard.tools {
                        peer.notify_tool_list_changed().await?;
                    }
                    if heard.prompts {
                        peer.notify_prompt_list_changed().await?;
                    }
                    if heard.resources {
                        peer.notify_resource_list_changed().await?;
                    }
                    Ok::<(), rmcp::service::ServiceError>(())
                }
                .await;
                if sent.is_err() {
                    return;
                }
            }
        });
    }

    /// 2026-07-28's `server/discover`: what `initialize` says, for clients without a handshake
    /// (the set's name and instructions; prompts and resources only when it publishes them).
    async fn discover(
        &self,
        context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        let (_, set) = Self::caller(&context)?;
        let mut config = info().with_server_info(Implementation::new(
            format!("workbench: {}", set.name),
            env!("CARGO_PKG_VERSION"),
        ));
        if !set.description.is_empty() {
            config = config.with_instructions(set.description.clone());
        }
        if !set.prompts_and_resources {
            config.capabilities.prompts = None;
            config.capabilities.resources = None;
        }
        Ok(DiscoverResult::from_server_info(
            self.supported_protocol_versions().into_owned(),
            config,
        ))
    }

    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(
            SubscriptionFilter::builder()
                .tools_list_changed()
                .prompts_list_changed()
                .resources_list_changed()
                .build(),
        )
    }

    /// `subscriptions/listen` (2026-07-28): the set's tool, prompt and resource lists changed
    /// whenever a server of the set changes what it exposes, until the client closes the
    /// stream or workbench shuts down.
    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let (who, set) = Self::caller(context.request_context())?;
        let mut changes = SetChanges::new(&self.wb, who, set);
        loop {
            let heard = tokio::select! {
                _ = context.cancelled() => return Ok(()),
                h = changes.next() => match h {
                    Some(h) => h,
                    None => return Ok(()),
                },
            };
            let sink = context.sink();
            let wants = |f: Option<bool>| f == Some(true);
            let accepted = context.accepted();
            // Only what the client asked for (and was acknowledged); a closed stream ends the
            // listen.
            let sent = async {
                if heard.tools && wants(accepted.tools_list_changed) {
                    sink.notify_tool_list_changed().await?;
                }
                if heard.prompts && wants(accepted.prompts_list_changed) {
                    sink.notify_prompt_list_changed().await?;
                }
                if heard.resources && wants(accepted.resources_list_changed) {
                    sink.notify_resource_list_changed().await?;
                }
                Ok::<(), rmcp::service::SubscriptionSendError>(())
            }
            .await;
            if let Err(e) = sent {
                tracing::debug!(error = ?e, "a set listener's stream ended");
                return Ok(());
            }
        }
    }

    /// `resources/subscribe`, in a session: the resource is looked up and decided like a read
    /// (core's `ToolSets::subscribe`), the server subscribed to, and each update it sends
    /// passed on under the set's URI until the client unsubscribes or the session ends.
    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let (who, set) = Self::caller(&context)?;
        if !in_session(&context.extensions) {
            return Err(ErrorData::invalid_request(
                "resource subscriptions need a session: initialize first and send its Mcp-Session-Id",
                None,
            ));
        }
        let uri = request.uri;
        {
            let watching = self.watching.lock().unwrap_or_else(|e| e.into_inner());
            if watching.contains_key(&uri) {
                return Ok(());
            }
            if watching.len() >= MAX_SUBSCRIPTIONS {
                return Err(ErrorData::invalid_request(
                    format!("a session holds at most {MAX_SUBSCRIPTIONS} resource subscriptions"),
                    None,
                ));
            }
        }
        let sets = self.wb.tool_sets();
        let mut updates = sets.resource_updates();
        let subscription = sets
            .subscribe(&who, &set, &uri)
            .await
            .map_err(|e| item_error(e, &uri, true))?;
        let (peer, exposed) = (context.peer.clone(), uri.clone());
        let mut stopping = self.wb.stopping();
        let task = tokio::spawn(async move {
            use tokio::sync::broadcast::error::RecvError;
            loop {
                let update = tokio::select! {
                    _ = stopping.wait_for(|s| *s) => return,
                    u = updates.recv() => u,
                };
                let ours = match update {
                    Ok(u) => subscription.hears(&u),
                    // Fallen behind: it may have been one of ours.
                    Err(RecvError::Lagged(_)) => true,
                    Err(RecvError::Closed) => return,
                };
                if ours {
                    let param = ResourceUpdatedNotificationParam::new(exposed.clone());
                    if peer.notify_resource_updated(param).await.is_err() {
                        return;
                    }
                }
            }
        })
        .abort_handle();
        self.watching
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(uri, Watch { task });
        Ok(())
    }

    /// `resources/unsubscribe`: the session stops hearing of the resource (and workbench lets
    /// go of it at the server when nobody else here listens). Unknown URIs are fine.
    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        Self::caller(&context)?;
        let gone = self
            .watching
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&request.uri);
        drop(gone);
        Ok(())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let (who, set) = Self::caller(&context)?;
        let prompts = self.wb.tool_sets().prompts(&who, &set).await;
        Ok(ListPromptsResult::with_all_items(typed(
            prompts.map_err(unanswerable)?,
        )))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let (who, set) = Self::caller(&context)?;
        let got = self
            .wb
            .tool_sets()
            .get_prompt(
                &who,
                &set,
                &request.name,
                request.arguments.unwrap_or_default(),
            )
            .instrument(super::request_span(&context))
            .await
            .map_err(|e| item_error(e, &request.name, false))?;
        Ok(GetPromptResponse::Complete(answer::<GetPromptResult>(got)?))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let (who, set) = Self::caller(&context)?;
        let resources = self.wb.tool_sets().resources(&who, &set).await;
        Ok(ListResourcesResult::with_all_items(typed(
            resources.map_err(unanswerable)?,
        )))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let (who, set) = Self::caller(&context)?;
        let templates = self.wb.tool_sets().resource_templates(&who, &set).await;
        Ok(ListResourceTemplatesResult::with_all_items(typed(
            templates.map_err(unanswerable)?,
        )))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let (who, set) = Self::caller(&context)?;
        let read = self
            .wb
            .tool_sets()
            .read_resource(&who, &set, &request.uri)
            .instrument(super::request_span(&context))
            .await
            .map_err(|e| item_error(e, &request.uri, true))?;
        Ok(ReadResourceResponse::Complete(
            answer::<ReadResourceResult>(read)?,
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let (who, set) = Self::caller(&context)?;
        let tools = self.wb.tool_sets().tools(&who, &set).await.map_err(|e| {
            tracing::error!(error = ?e, "a tool set's tools could not be listed");
            ErrorData::internal_error("workbench cannot answer right now; try again", None)
        })?;
        Ok(ListToolsResult::with_all_items(
            tools.iter().map(listed).collect(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let (who, set) = Self::caller(&context)?;
        Ok(self
            .call(&who, &set, request, super::relay::PeerRelay::of(&context))
            .instrument(super::request_span(&context))
            .await
            .into())
    }
}

/// The set endpoints, nested into the main router.
pub fn routes(state: &AppState) -> Router<AppState> {
    let handler = SetHandler::new(state.wb.clone());
    let wb = state.wb.clone();
    let service = StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(LocalSessionManager::default()),
        super::service_config(state),
    );
    // Each session gets its own handler, so its subscriptions are its own and end with it.
    let manager = Arc::new(LocalSessionManager::default());
    let stateful = StreamableHttpService::new(
        move || Ok(SetHandler::new(wb.clone())),
        manager.clone(),
        super::session_config(state),
    );
    let owners = super::sessions::Owners::new(manager, true);
    let forward = super::sessions::Forward::new(state);
    let endpoint = move |req: Request| {
        let (service, stateful, owners, forward) = (
            service.clone(),
            stateful.clone(),
            owners.clone(),
            forward.clone(),
        );
        async move { super::sessions::route(service, stateful, owners, forward, req).await }
    };
    Router::new()
        .route("/mcp/sets/{slug}", axum::routing::any(endpoint))
        .layer(middleware::from_fn_with_state(state.clone(), tools_call))
        .layer(middleware::from_fn_with_state(state.clone(), resolve))
}

/// A plain stateless `tools/call` answered in the request's own task, as on `/mcp`
/// (`fast_path.rs`); everything else goes to rmcp.
async fn tools_call(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let path = req.uri().path().to_owned();
    match super::fast_path::plain(&state, req, &path).await {
        super::fast_path::Plain::Call(c) => {
            let super::fast_path::PlainCall {
                id,
                params,
                who,
                parts,
            } = c;
            let Some(SetEndpoint(set)) = parts.extensions.get::<SetEndpoint>().cloned() else {
                return axum::http::StatusCode::INTERNAL_SERVER_ERROR.into_response();
            };
            let handler = SetHandler::new(state.wb.clone());
            super::fast_path::answer(
                id,
                async move { handler.call(&who, &set, params, None).await },
            )
            .await
        }
        super::fast_path::Plain::Other(req) => next.run(req).await,
        super::fast_path::Plain::Broken => axum::http::StatusCode::BAD_REQUEST.into_response(),
    }
}

/// A credential first (an API key, or an access token issued for this set's endpoint; one for
/// `/mcp` or another set is refused), then the set the path names as the caller may use it;
/// nothing reaches rmcp without both. A 401 names the set's protected resource metadata.
async fn resolve(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let (mut parts, body) = req.into_parts();
    let slug = parts
        .uri
        .path()
        .strip_prefix(PREFIX)
        .unwrap_or_default()
        .to_owned();
    // An access token must be one issued for this set's endpoint, and for nothing else.
    let ctx = state.config.oauth_context().for_set(&slug);
    let metadata = valid_slug(&slug).then(|| endpoint_path(&slug));
    let who = match super::caller(
        &state,
        &mut parts,
        &ctx,
        metadata.as_deref(),
        Operation::ToolSetCall,
    )
    .await
    {
        Ok(who) => who,
        Err(refused) => return refused,
    };
    match state.wb.tool_sets().endpoint(&who, &slug).await {
        Ok(set) => {
            parts.extensions.insert(SetEndpoint(set));
            next.run(Request::from_parts(parts, body)).await
        }
        Err(e) => ApiError::from(e).into_response(),
    }
}
