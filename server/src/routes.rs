//! The route table (D21): every route the server mounts, with the credential it takes and the
//! operation of core's permission table it performs. REST and the portal's JSON routes are
//! mounted through `Routes::add`, which checks the caller before the handler runs, so no such
//! route exists without a declared permission; `/mcp`, `/c`, `/metrics` and the OAuth endpoints
//! authenticate in their own code and are declared here for the route-by-principal test. The
//! portal's server functions are declared in `SERVER_FNS` and checked by `server_fn_layer`.

use axum::extract::{Request, State};
use axum::handler::Handler;
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{on, MethodFilter};
use axum::Router;
use tower_sessions::Session;
use workbench_app::AppError;
use workbench_core::auth::{Operation, Principal, SESSION_USER_KEY};

use crate::api_auth::ApiCaller;
use crate::api_error::ApiError;
use crate::state::AppState;

/// The credential a route takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Credential {
    /// None: the route is public.
    None,
    /// `Authorization: Bearer <api key>`.
    ApiKey,
    /// An API key or an MCP OAuth access token issued for `/mcp`.
    ApiKeyOrOAuth,
    /// An API key or an MCP OAuth access token issued for that tool set's endpoint.
    ApiKeyOrSetOAuth,
    /// The portal's session cookie.
    Session,
    /// The portal's session cookie on a page a browser navigates to: signed out, it sends the
    /// person to sign in (and back) instead of answering 401.
    SessionPage,
    /// A curl_session proxy token.
    ProxyToken,
    /// The operator's metrics token.
    MetricsToken,
}

/// One route: method, path (axum syntax), credential and operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RouteSpec {
    pub method: &'static str,
    pub path: &'static str,
    pub credential: Credential,
    pub op: Operation,
}

/// Routes mounted elsewhere (nested services, catch-alls), declared here so the table is whole.
pub const DECLARED: &[RouteSpec] = &[
    RouteSpec {
        method: "POST",
        path: "/mcp",
        credential: Credential::ApiKeyOrOAuth,
        op: Operation::ToolsRun,
    },
    RouteSpec {
        method: "GET",
        path: "/mcp",
        credential: Credential::ApiKeyOrOAuth,
        op: Operation::ToolsRun,
    },
    RouteSpec {
        method: "DELETE",
        path: "/mcp",
        credential: Credential::ApiKeyOrOAuth,
        op: Operation::ToolsRun,
    },
    RouteSpec {
        method: "POST",
        path: "/mcp/sets/{slug}",
        credential: Credential::ApiKeyOrSetOAuth,
        op: Operation::ToolSetCall,
    },
    RouteSpec {
        method: "GET",
        path: "/mcp/sets/{slug}",
        credential: Credential::ApiKeyOrSetOAuth,
        op: Operation::ToolSetCall,
    },
    RouteSpec {
        method: "DELETE",
        path: "/mcp/sets/{slug}",
        credential: Credential::ApiKeyOrSetOAuth,
        op: Operation::ToolSetCall,
    },
    RouteSpec {
        method: "ANY",
        path: "/c/{integration}",
        credential: Credential::ProxyToken,
        op: Operation::ProxyRequest,
    },
    RouteSpec {
        method: "ANY",
        path: "/c/{integration}/{*rest}",
        credential: Credential::ProxyToken,
        op: Operation::ProxyRequest,
    },
    RouteSpec {
        method: "GET",
        path: "/metrics",
        credential: Credential::MetricsToken,
        op: Operation::Metrics,
    },
    RouteSpec {
        method: "POST",
        path: "/sso/{slug}/start",
        credential: Credential::None,
        op: Operation::SignIn,
    },
    RouteSpec {
        method: "GET",
        path: "/sso/{slug}/callback",
        credential: Credential::None,
        op: Operation::SignIn,
    },
    RouteSpec {
        method: "GET",
        path: "/oauth/callback",
        credential: Credential::SessionPage,
        op: Operation::OwnConnections,
    },
    RouteSpec {
        method: "GET",
        path: "/.well-known/oauth-protected-resource",
        credential: Credential::None,
        op: Operation::Discovery,
    },
    RouteSpec {
        method: "GET",
        path: "/.well-known/oauth-protected-resource/mcp",
        credential: Credential::None,
        op: Operation::Discovery,
    },
    RouteSpec {
        method: "GET",
        path: "/.well-known/oauth-protected-resource/mcp/sets/{slug}",
        credential: Credential::None,
        op: Operation::Discovery,
    },
    RouteSpec {
        method: "GET",
        path: "/.well-known/oauth-authorization-server",
        credential: Credential::None,
        op: Operation::Discovery,
    },
    RouteSpec {
        method: "GET",
        path: "/oauth/client-metadata",
        credential: Credential::None,
        op: Operation::Discovery,
    },
    RouteSpec {
        method: "POST",
        path: "/oauth/register",
        credential: Credential::None,
        op: Operation::OAuthAuthorization,
    },
    RouteSpec {
        method: "POST",
        path: "/oauth/token",
        credential: Credential::None,
        op: Operation::OAuthAuthorization,
    },
    RouteSpec {
        method: "POST",
        path: "/oauth/revoke",
        credential: Credential::None,
        op: Operation::OAuthAuthorization,
    },
];

/// The portal's server functions (`/api/<endpoint>`, session cookie) and what each does. A
/// server function missing here is refused (and the route-by-principal test fails).
pub const SERVER_FNS: &[(&str, Operation)] = &[
    ("viewer", Operation::SignIn),
    ("sign_in", Operation::SignIn),
    ("sign_out", Operation::SignIn),
    ("set_up", Operation::SignIn),
    ("sign_in_options", Operation::SignIn),
    ("sso_page", Operation::SsoManage),
    ("sso_preview", Operation::SsoManage),
    ("tools_page", Operation::ToolsRead),
    ("usage_page", Operation::UsageRead),
    ("audit_page", Operation::AuditRead),
    ("audit_detail", Operation::AuditRead),
    ("callbacks_page", Operation::SchedulesRead),
    ("cancel_callback", Operation::SchedulesRead),
    ("apps_page", Operation::AppsRead),
    ("mcp_servers_page", Operation::McpServersRead),
    ("mcp_server_page", Operation::McpServersRead),
    ("vault_page", Operation::VaultRead),
    ("set_secret", Operation::VaultWrite),
    ("delete_secret", Operation::VaultWrite),
    ("confirmations_page", Operation::ConfirmationsDecide),
    ("confirmation_page", Operation::ConfirmationsDecide),
    ("pending_confirmations", Operation::ConfirmationsDecide),
    ("decide_confirmation", Operation::ConfirmationsDecide),
    ("api_keys_page", Operation::OwnKeys),
    ("create_api_key", Operation::OwnKeys),
    ("revoke_api_key", Operation::OwnKeys),
    ("connections_page", Operation::OwnConnections),
    ("open_connect_link", Operation::OwnConnections),
    ("submit_connection", Operation::OwnConnections),
    ("start_connection", Operation::OwnConnections),
    ("disconnect", Operation::OwnConnections),
    ("oauth_consent", Operation::OwnMcpClients),
    ("oauth_decide", Operation::OwnMcpClients),
    ("authorized_clients", Operation::OwnMcpClients),
    ("revoke_authorized_client", Operation::OwnMcpClients),
    ("create_app", Operation::AppsManage),
    ("delete_app", Operation::AppsManage),
    ("preview_app_import", Operation::AppsManage),
    ("create_imported_app", Operation::AppsManage),
    ("egress_page", Operation::EgressRead),
    ("add_egress_rule", Operation::EgressManage),
    ("remove_egress_rule", Operation::EgressManage),
    ("overview_page", Operation::Identity),
    ("policies_page", Operation::PoliciesManage),
    ("tool_sets_page", Operation::ToolSetsRead),
    ("save_tool_set", Operation::ToolSetsManage),
    ("delete_tool_set", Operation::ToolSetsManage),
    ("save_policy", Operation::PoliciesManage),
    ("delete_policy", Operation::PoliciesManage),
    ("set_key_policy", Operation::PoliciesManage),
    ("policy_preview", Operation::PoliciesManage),
    ("check_patterns", Operation::PoliciesManage),
    ("members_page", Operation::MembersRead),
    ("add_member", Operation::MembersManage),
    ("remove_member", Operation::MembersManage),
    // The confirmations page asks everyone; it answers nothing to whoever may not manage settings.
    ("webhook_settings", Operation::ConfirmationsDecide),
    ("save_webhook", Operation::SettingsManage),
    ("save_retention", Operation::AuditManage),
    ("email_page", Operation::EmailDomainsRead),
    ("add_email_domain", Operation::EmailDomainsManage),
    ("verify_email_domain", Operation::EmailDomainsManage),
    ("remove_email_domain", Operation::EmailDomainsManage),
    ("callback_signing_secret", Operation::SigningSecretRead),
    ("register_mcp_server", Operation::McpServersManage),
    ("refresh_mcp_server", Operation::McpServersManage),
    ("delete_mcp_server", Operation::McpServersManage),
    ("approve_mcp_tool", Operation::McpServersReview),
    ("approve_mcp_item", Operation::McpServersReview),
    ("set_mcp_tool_side_effects", Operation::McpServersReview),
    ("set_mcp_tool_text", Operation::McpServersReview),
];

/// The operation of a server function, by its endpoint name.
pub fn server_fn_operation(endpoint: &str) -> Option<Operation> {
    SERVER_FNS
        .iter()
        .find(|(name, _)| *name == endpoint)
        .map(|(_, op)| *op)
}

/// A router whose every route declares its credential and operation.
pub struct Routes {
    state: AppState,
    router: Router<AppState>,
    specs: Vec<RouteSpec>,
}

#[derive(Clone)]
struct Guard {
    state: AppState,
    credential: Credential,
    op: Operation,
}

impl Routes {
    pub fn new(state: &AppState) -> Routes {
        Routes {
            state: state.clone(),
            router: Router::new(),
            specs: Vec::new(),
        }
    }

    /// Mounts `handler` for `method path` behind a check that the caller has `credential` and
    /// may perform `op`.
    pub fn add<H, T>(
        mut self,
        method: Method,
        path: &'static str,
        credential: Credential,
        op: Operation,
        handler: H,
    ) -> Routes
    where
        H: Handler<T, AppState>,
        T: 'static,
    {
        // The other credentials are checked by their own surfaces (/mcp, /c, /metrics).
        assert!(
            matches!(credential, Credential::None | Credential::ApiKey | Credential::Session | Credential::SessionPage),
            "{path}: {credential:?} is not checked by Routes::add; declare the route in DECLARED and check it in its surface"
        );
        let filter = MethodFilter::try_from(method.clone()).expect("a routable method");
        let guard = Guard {
            state: self.state.clone(),
            credential,
            op,
        };
        let route = on(filter, handler).route_layer(middleware::from_fn_with_state(guard, check));
        self.router = self.router.route(path, route);
        let method: &'static str = match method {
            Method::GET => "GET",
            Method::POST => "POST",
            Method::PUT => "PUT",
            Method::PATCH => "PATCH",
            Method::DELETE => "DELETE",
            _ => "ANY",
        };
        self.specs.push(RouteSpec {
            method,
            path,
            credential,
            op,
        });
        self
    }

    pub fn specs(&self) -> &[RouteSpec] {
        &self.specs
    }

    pub fn into_router(self) -> Router<AppState> {
        self.router
    }
}

/// The principal behind a request's credential, or the 401 for its absence.
async fn principal(
    state: &AppState,
    credential: Credential,
    req: &mut Request,
) -> Result<Option<Principal>, ApiError> {
    match credential {
        Credential::None => Ok(None),
        Credential::ApiKeyOrOAuth
        | Credential::ApiKeyOrSetOAuth
        | Credential::ProxyToken
        | Credential::MetricsToken => Err(ApiError::unauthorized(
            "this credential is not accepted here",
        )),
        Credential::ApiKey => {
            let (mut parts, body) = std::mem::take(req).into_parts();
            let caller =
                <ApiCaller as axum::extract::FromRequestParts<AppState>>::from_request_parts(
                    &mut parts, state,
                )
                .await;
            *req = Request::from_parts(parts, body);
            Ok(Some(caller?.0))
        }
        Credential::Session | Credential::SessionPage => {
            session_principal(state, req.extensions().get::<Session>())
                .await
                .map(Some)
        }
    }
}

/// The signed-in person of a portal request.
pub async fn session_principal(
    state: &AppState,
    session: Option<&Session>,
) -> Result<Principal, ApiError> {
    let not_signed_in = || ApiError::unauthorized("sign in to the portal first");
    let session = session.ok_or_else(not_signed_in)?;
    let user_id = session
        .get::<String>(SESSION_USER_KEY)
        .await
        .ok()
        .flatten()
        .ok_or_else(not_signed_in)?;
    state
        .wb
        .accounts()
        .principal_for_user(&user_id)
        .await?
        .ok_or_else(not_signed_in)
}

async fn check(State(guard): State<Guard>, mut req: Request, next: Next) -> Response {
    match principal(&guard.state, guard.credential, &mut req).await {
        Ok(Some(who)) => {
            if let Err(e) = who.require(guard.op) {
                return ApiError::from(e).into_response();
            }
            req.extensions_mut().insert(ApiCaller(who));
            next.run(req).await
        }
        Ok(None) => next.run(req).await,
        Err(e) => e.into_response(),
    }
}

/// In front of the portal's server functions: each must be declared in `SERVER_FNS`, and a
/// signed-in caller must be allowed its operation (public ones run for anyone; the function
/// itself still authenticates and core checks again).
pub async fn server_fn_layer(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let Some(endpoint) = req.uri().path().strip_prefix("/api/") else {
        return next.run(req).await;
    };
    if endpoint == "integrations" {
        return next.run(req).await;
    }
    let Some(op) = server_fn_operation(endpoint) else {
        let path = req.uri().path().to_owned();
        return server_fn_error(
            &path,
            StatusCode::NOT_FOUND,
            AppError::Message(format!("no such server function {endpoint}")),
        );
    };
    if op.access() == workbench_core::auth::Access::Public {
        return next.run(req).await;
    }
    let path = req.uri().path().to_owned();
    let mut req = req;
    match session_principal(&state, req.extensions().get::<Session>()).await {
        Ok(who) => match who.require(op) {
            Ok(()) => {
                // The function takes the principal from here instead of looking it up again.
                req.extensions_mut().insert(who);
                next.run(req).await
            }
            Err(e) => server_fn_error(
                &path,
                StatusCode::FORBIDDEN,
                AppError::Message(e.to_string()),
            ),
        },
        Err(_) => server_fn_error(&path, StatusCode::UNAUTHORIZED, AppError::NotSignedIn),
    }
}

/// A refusal in the server functions' own error encoding, so the page shows it as it shows
/// any other error of the function.
fn server_fn_error(path: &str, status: StatusCode, error: AppError) -> Response {
    let body = serde_json::to_string(&error).unwrap_or_default();
    let mut res = (status, [(header::CONTENT_TYPE, "application/json")], body).into_response();
    if let Ok(v) = HeaderValue::from_str(path) {
        res.headers_mut()
            .insert(leptos::server_fn::error::SERVER_FN_ERROR_HEADER, v);
    }
    res
}

/// The server functions the portal registers that `SERVER_FNS` does not declare (the
/// route-by-principal test wants none).
pub fn undeclared_server_fns() -> Vec<String> {
    leptos::server_fn::axum::server_fn_paths()
        .map(|(path, _)| path)
        .filter(|path| {
            path.strip_prefix("/api/")
                .and_then(server_fn_operation)
                .is_none()
        })
        .map(str::to_owned)
        .collect()
}
