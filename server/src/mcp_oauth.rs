//! The MCP authorization endpoints: protected resource metadata (RFC 9728), authorization
//! server metadata (RFC 8414), dynamic client registration (RFC 7591), the token endpoint and
//! revocation (RFC 7009). The consent page itself is a portal page (`/oauth/authorize`); core
//! does the checking. These endpoints are called by MCP clients, not the portal: no cookies,
//! no CSRF, CORS open to any origin.

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine as _;
use serde_json::{json, Value};
use workbench_core::auth::ClientIp;
use workbench_core::oauth::{Registration, TokenError, TokenRequest};

use crate::api_error::ApiError;
use crate::state::AppState;

/// The largest registration, token or revocation request body.
const MAX_BODY_BYTES: usize = 64 * 1024;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/.well-known/oauth-protected-resource",
            get(protected_resource),
        )
        .route(
            "/.well-known/oauth-protected-resource/mcp",
            get(protected_resource),
        )
        .route(
            "/.well-known/oauth-protected-resource/mcp/sets/{slug}",
            get(set_protected_resource),
        )
        .route(
            "/.well-known/oauth-authorization-server",
            get(authorization_server),
        )
        .route(
            workbench_core::upstream::discovery::CLIENT_METADATA_PATH,
            get(client_metadata),
        )
        .route("/oauth/register", post(register))
        .route("/oauth/token", post(token))
        .route("/oauth/revoke", post(revoke))
        .layer(middleware::from_fn(cors))
}

/// The value of `WWW-Authenticate` on a 401 from the MCP endpoint at `path` (`/mcp` or
/// `/mcp/sets/<slug>`): where the client learns how to authorize.
pub fn www_authenticate(state: &AppState, path: &str, invalid_token: bool) -> HeaderValue {
    let metadata = state
        .config
        .public_link(&format!("/.well-known/oauth-protected-resource{path}"));
    let value = if invalid_token {
        format!("Bearer error=\"invalid_token\", resource_metadata=\"{metadata}\"")
    } else {
        format!("Bearer resource_metadata=\"{metadata}\"")
    };
    HeaderValue::from_str(&value).unwrap_or_else(|_| HeaderValue::from_static("Bearer"))
}

/// Any origin may call these endpoints (browser-based MCP clients do); they use no cookies.
async fn cors(req: Request, next: Next) -> Response {
    let preflight = req.method() == Method::OPTIONS;
    let mut res = if preflight {
        StatusCode::NO_CONTENT.into_response()
    } else {
        next.run(req).await
    };
    let h = res.headers_mut();
    h.insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    if preflight {
        h.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static("GET, POST, OPTIONS"),
        );
        h.insert(
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            HeaderValue::from_static("authorization, content-type, mcp-protocol-version"),
        );
        h.insert(
            header::ACCESS_CONTROL_MAX_AGE,
            HeaderValue::from_static("600"),
        );
    }
    res
}

async fn protected_resource(State(state): State<AppState>) -> Json<Value> {
    resource_metadata(&state, &state.config.oauth_context())
}

/// A tool set's endpoint as a protected resource of its own: tokens for it work there only.
/// Answered for any well-formed slug (which sets exist depends on the caller's project).
async fn set_protected_resource(
    State(state): State<AppState>,
    axum::extract::Path(slug): axum::extract::Path<String>,
) -> Response {
    if !workbench_core::toolsets::valid_slug(&slug) {
        return ApiError::not_found().into_response();
    }
    resource_metadata(&state, &state.config.oauth_context().for_set(&slug)).into_response()
}

fn resource_metadata(state: &AppState, ctx: &workbench_core::oauth::OAuthContext) -> Json<Value> {
    Json(json!({
        "resource": ctx.resource,
        "authorization_servers": [ctx.issuer],
        "bearer_methods_supported": ["header"],
        "scopes_supported": ["mcp"],
        "resource_name": "workbench",
        "resource_documentation": state.config.public_link("/"),
    }))
}

/// workbench's own client ID metadata document: how it introduces itself to the authorization
/// servers of remote MCP servers its users sign in to.
async fn client_metadata(State(state): State<AppState>) -> Json<Value> {
    let public = state.config.public_link("/");
    let ours = workbench_core::upstream::discovery::OurClient::for_public_url(&public);
    Json(ours.metadata_document(public.trim_end_matches('/')))
}

async fn authorization_server(State(state): State<AppState>) -> Json<Value> {
    let ctx = state.config.oauth_context();
    let link = |p: &str| state.config.public_link(p);
    Json(json!({
        "issuer": ctx.issuer,
        "authorization_endpoint": link("/oauth/authorize"),
        "token_endpoint": link("/oauth/token"),
        "registration_endpoint": link("/oauth/register"),
        "revocation_endpoint": link("/oauth/revoke"),
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none", "client_secret_post", "client_secret_basic"],
        "revocation_endpoint_auth_methods_supported": ["none", "client_secret_post", "client_secret_basic"],
        "scopes_supported": ["mcp"],
        "authorization_response_iss_parameter_supported": true,
        "client_id_metadata_document_supported": true,
    }))
}

fn oauth_error(e: TokenError) -> Response {
    let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::BAD_REQUEST);
    let mut res = (
        status,
        Json(json!({ "error": e.error, "error_description": e.description })),
    )
        .into_response();
    res.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if status == StatusCode::UNAUTHORIZED {
        res.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Basic realm=\"workbench\""),
        );
    }
    res
}

async fn register(State(state): State<AppState>, req: Request) -> Response {
    let from = req
        .extensions()
        .get::<ClientIp>()
        .and_then(|c| c.0)
        .map(|ip| ip.to_string())
        .unwrap_or_else(|| "unknown".into());
    let bytes = match axum::body::to_bytes(req.into_body(), MAX_BODY_BYTES).await {
        Ok(b) => b,
        Err(_) => {
            return registration_error(
                "invalid_client_metadata",
                &format!(
                    "the registration must be a JSON object of at most {MAX_BODY_BYTES} bytes"
                ),
            )
        }
    };
    let registration: Registration = match serde_json::from_slice::<Value>(&bytes) {
        Ok(v @ Value::Object(_)) => match serde_json::from_value(v) {
            Ok(r) => r,
            Err(e) => return registration_error("invalid_client_metadata", &e.to_string()),
        },
        _ => {
            return registration_error(
                "invalid_client_metadata",
                "the registration must be a JSON object",
            )
        }
    };
    match state.wb.oauth().register(registration, &from).await {
        Ok(client) => {
            let mut res = (StatusCode::CREATED, Json(client)).into_response();
            res.headers_mut()
                .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            res
        }
        Err(workbench_core::Error::Invalid(m)) if m.starts_with("redirect_uris") => {
            registration_error("invalid_redirect_uri", &m)
        }
        Err(workbench_core::Error::Invalid(m)) => registration_error("invalid_client_metadata", &m),
        Err(e) => ApiError::from(e).into_response(),
    }
}

fn registration_error(error: &str, description: &str) -> Response {
    (
        StatusCode::BAD_REQUEST,
        Json(json!({ "error": error, "error_description": description })),
    )
        .into_response()
}

/// The form fields of a token or revocation request, with HTTP Basic client credentials.
fn token_request(headers: &HeaderMap, body: &Bytes) -> Result<TokenRequest, TokenError> {
    let bad = |d: &str| TokenError {
        status: 400,
        error: "invalid_request",
        description: d.into(),
    };
    let form: Vec<(String, String)> = url::form_urlencoded::parse(body).into_owned().collect();
    let mut seen = std::collections::HashSet::new();
    for (k, _) in &form {
        if !seen.insert(k.as_str()) {
            return Err(bad(&format!("the parameter {k} is repeated")));
        }
    }
    let get = |k: &str| form.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let mut req = TokenRequest {
        grant_type: get("grant_type"),
        client_id: get("client_id"),
        client_secret: get("client_secret"),
        basic: false,
        code: get("code"),
        redirect_uri: get("redirect_uri"),
        code_verifier: get("code_verifier"),
        refresh_token: get("refresh_token"),
        resource: get("resource"),
        token: get("token"),
    };
    if let Some(auth) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    {
        let (scheme, value) = auth.split_once(' ').unwrap_or((auth, ""));
        if !scheme.eq_ignore_ascii_case("basic") {
            return Err(TokenError {
                status: 401,
                error: "invalid_client",
                description: "use HTTP Basic or form fields for client credentials".into(),
            });
        }
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(value.trim())
            .ok()
            .and_then(|d| String::from_utf8(d).ok())
            .ok_or_else(|| bad("the Basic credentials are not base64 text"))?;
        let (id, secret) = decoded
            .split_once(':')
            .ok_or_else(|| bad("the Basic credentials lack a colon"))?;
        let decode = |s: &str| {
            url::form_urlencoded::parse(format!("x={s}").as_bytes())
                .next()
                .map(|(_, v)| v.into_owned())
                .unwrap_or_default()
        };
        let (id, secret) = (decode(id), decode(secret));
        if req.client_id.as_deref().is_some_and(|c| c != id) {
            return Err(bad("client_id differs from the Basic credentials"));
        }
        req.client_id = Some(id);
        req.client_secret = Some(secret);
        req.basic = true;
    }
    Ok(req)
}

async fn read_form(req: Request) -> Result<(HeaderMap, Bytes), TokenError> {
    let (parts, body) = req.into_parts();
    let form = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
    if !form {
        return Err(TokenError {
            status: 400,
            error: "invalid_request",
            description: "send the parameters as application/x-www-form-urlencoded".into(),
        });
    }
    let bytes = axum::body::to_bytes(body, MAX_BODY_BYTES)
        .await
        .map_err(|_| TokenError {
            status: 400,
            error: "invalid_request",
            description: format!("the request body is larger than {MAX_BODY_BYTES} bytes"),
        })?;
    Ok((parts.headers, bytes))
}

async fn token(State(state): State<AppState>, req: Request) -> Response {
    let result = async {
        let (headers, body) = read_form(req).await?;
        let req = token_request(&headers, &body)?;
        state
            .wb
            .oauth()
            .token(&state.config.oauth_context(), &req)
            .await
    };
    match result.await {
        Ok(tokens) => {
            let mut res = Json(tokens).into_response();
            res.headers_mut()
                .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            res
        }
        Err(e) => oauth_error(e),
    }
}

async fn revoke(State(state): State<AppState>, req: Request) -> Response {
    let result = async {
        let (headers, body) = read_form(req).await?;
        let req = token_request(&headers, &body)?;
        state.wb.oauth().revoke(&req).await
    };
    match result.await {
        Ok(()) => StatusCode::OK.into_response(),
        Err(e) => oauth_error(e),
    }
}
