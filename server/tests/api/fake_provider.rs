//! A fake third party on loopback: an OAuth 2 authorization server (authorization code with
//! PKCE S256, refresh tokens, `iss` in the redirect), a GitHub-like REST API that checks the
//! bearer token, a Linear-like GraphQL endpoint checking an API key, and a Superset-like API
//! checking a session cookie. It records what it receives so tests can assert on it.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::{Form, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine as _;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use workbench_core::integrations::IntegrationSettings;

pub const CLIENT_ID: &str = "wb-client";
pub const CLIENT_SECRET: &str = "wb-client-secret";
pub const LINEAR_KEY: &str = "lin_api_good_key_123";
pub const SUPERSET_COOKIE: &str = "superset-session-abc123";

#[derive(Default)]
pub struct ProviderState {
    pub issuer: String,
    codes: Mutex<HashMap<String, (String, String)>>,
    pub valid_tokens: Mutex<HashMap<String, bool>>,
    refresh_tokens: Mutex<HashMap<String, bool>>,
    pub authorize_requests: AtomicUsize,
    pub token_requests: AtomicUsize,
    pub refresh_grants: AtomicUsize,
    pub expires_in: AtomicU64,
    pub fail_refresh: AtomicBool,
    pub cookie_valid: AtomicBool,
    pub last_headers: Mutex<Option<HeaderMap>>,
    pub last_body: Mutex<Option<Value>>,
    pub last_query: Mutex<Option<String>>,
    pub api_requests: AtomicUsize,
}

pub struct FakeProvider {
    pub addr: SocketAddr,
    pub state: Arc<ProviderState>,
}

impl FakeProvider {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// Settings pointing github (OAuth), linear (API key) and superset (cookie) at this fake.
    pub fn settings(
        &self,
        issuer: Option<&str>,
    ) -> std::collections::BTreeMap<String, IntegrationSettings> {
        let base = self.url("");
        let mut m = std::collections::BTreeMap::new();
        m.insert(
            "github".to_string(),
            IntegrationSettings {
                base_url: Some(base.clone()),
                authorize_url: Some(self.url("/authorize")),
                token_url: Some(self.url("/token")),
                client_id: Some(CLIENT_ID.into()),
                client_secret: Some(CLIENT_SECRET.into()),
                issuer: issuer.map(str::to_owned),
            },
        );
        m.insert(
            "linear".to_string(),
            IntegrationSettings {
                base_url: Some(base.clone()),
                ..Default::default()
            },
        );
        m.insert(
            "superset".to_string(),
            IntegrationSettings {
                base_url: Some(base),
                ..Default::default()
            },
        );
        m
    }

    /// The current valid access tokens.
    pub fn live_tokens(&self) -> Vec<String> {
        self.state
            .valid_tokens
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, v)| **v)
            .map(|(k, _)| k.clone())
            .collect()
    }

    pub fn revoke_all_access_tokens(&self) {
        for v in self.state.valid_tokens.lock().unwrap().values_mut() {
            *v = false;
        }
    }
}

fn random(n: usize) -> String {
    workbench_core::crypto::random_base62(n)
}

async fn authorize(
    State(s): State<Arc<ProviderState>>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    s.authorize_requests.fetch_add(1, Ordering::SeqCst);
    if q.get("client_id").map(String::as_str) != Some(CLIENT_ID)
        || q.get("code_challenge_method").map(String::as_str) != Some("S256")
        || q.get("response_type").map(String::as_str) != Some("code")
    {
        return (StatusCode::BAD_REQUEST, "bad authorize request").into_response();
    }
    let (Some(challenge), Some(redirect), Some(state)) = (
        q.get("code_challenge"),
        q.get("redirect_uri"),
        q.get("state"),
    ) else {
        return (StatusCode::BAD_REQUEST, "missing parameters").into_response();
    };
    let code = random(20);
    s.codes
        .lock()
        .unwrap()
        .insert(code.clone(), (challenge.clone(), redirect.clone()));
    let mut target = url::Url::parse(redirect).unwrap();
    target
        .query_pairs_mut()
        .append_pair("code", &code)
        .append_pair("state", state)
        .append_pair("iss", &s.issuer);
    Redirect::to(target.as_str()).into_response()
}

fn issue(s: &ProviderState) -> Value {
    let access = format!("gho_{}", random(24));
    let refresh = format!("ghr_{}", random(24));
    s.valid_tokens.lock().unwrap().insert(access.clone(), true);
    s.refresh_tokens
        .lock()
        .unwrap()
        .insert(refresh.clone(), true);
    json!({ "access_token": access, "token_type": "bearer", "expires_in": s.expires_in.load(Ordering::SeqCst), "refresh_token": refresh, "scope": "repo,read:user" })
}

fn client_ok(headers: &HeaderMap, form: &HashMap<String, String>) -> bool {
    let basic = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Basic "))
        .and_then(|b| {
            base64::engine::general_purpose::STANDARD
                .decode(b)
                .ok()
                .and_then(|d| String::from_utf8(d).ok())
        });
    match basic {
        Some(pair) => pair == format!("{CLIENT_ID}:{CLIENT_SECRET}"),
        None => {
            form.get("client_id").map(String::as_str) == Some(CLIENT_ID)
                && form.get("client_secret").map(String::as_str) == Some(CLIENT_SECRET)
        }
    }
}

async fn token(
    State(s): State<Arc<ProviderState>>,
    headers: HeaderMap,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    s.token_requests.fetch_add(1, Ordering::SeqCst);
    if !client_ok(&headers, &form) {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({ "error": "invalid_client" })),
        )
            .into_response();
    }
    match form.get("grant_type").map(String::as_str) {
        Some("authorization_code") => {
            let code = form.get("code").cloned().unwrap_or_default();
            let Some((challenge, redirect)) = s.codes.lock().unwrap().remove(&code) else {
                return (
                    StatusCode::BAD_REQUEST,
                    Json(json!({ "error": "invalid_grant" })),
                )
                    .into_response();
            };
            let verifier = form.get("code_verifier").cloned().unwrap_or_default();
            let computed = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .encode(Sha256::digest(verifier.as_bytes()));
            if computed != challenge || form.get("redirect_uri") != Some(&redirect) {
                return (StatusCode::BAD_REQUEST, Json(json!({ "error": "invalid_grant", "error_description": "pkce or redirect mismatch" }))).into_response();
            }
            Json(issue(&s)).into_response()
        }
        Some("client_credentials") => {
            let access = format!("cc_{}", random(24));
            s.valid_tokens.lock().unwrap().insert(access.clone(), true);
            Json(json!({ "access_token": access, "token_type": "bearer", "expires_in": 3600, "scope": form.get("scope") })).into_response()
        }
        Some("refresh_token") => {
            s.refresh_grants.fetch_add(1, Ordering::SeqCst);
            let rt = form.get("refresh_token").cloned().unwrap_or_default();
            let known = s
                .refresh_tokens
                .lock()
                .unwrap()
                .get(&rt)
                .copied()
                .unwrap_or(false);
            if s.fail_refresh.load(Ordering::SeqCst) || !known {
                return (
                    StatusCode::BAD_REQUEST,
                    Json(json!({ "error": "invalid_grant" })),
                )
                    .into_response();
            }
            Json(issue(&s)).into_response()
        }
        _ => (
            StatusCode::BAD_REQUEST,
            Json(json!({ "error": "unsupported_grant_type" })),
        )
            .into_response(),
    }
}

fn bearer_ok(s: &ProviderState, headers: &HeaderMap) -> bool {
    let token = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    s.valid_tokens
        .lock()
        .unwrap()
        .get(token)
        .copied()
        .unwrap_or(false)
}

fn record(s: &ProviderState, headers: &HeaderMap, body: Option<Value>, query: Option<String>) {
    s.api_requests.fetch_add(1, Ordering::SeqCst);
    *s.last_headers.lock().unwrap() = Some(headers.clone());
    *s.last_body.lock().unwrap() = body;
    *s.last_query.lock().unwrap() = query;
}

async fn user(
    State(s): State<Arc<ProviderState>>,
    headers: HeaderMap,
    uri: axum::http::Uri,
) -> Response {
    record(&s, &headers, None, uri.query().map(str::to_owned));
    if !bearer_ok(&s, &headers) {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({ "message": "Bad credentials" })),
        )
            .into_response();
    }
    Json(json!({ "login": "octocat", "id": 583231, "name": "The Octocat", "email": "octo@example.com", "html_url": "https://github.com/octocat", "site_admin": false })).into_response()
}

async fn create_issue(
    State(s): State<Arc<ProviderState>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    record(&s, &headers, Some(body.clone()), None);
    if !bearer_ok(&s, &headers) {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({ "message": "Bad credentials" })),
        )
            .into_response();
    }
    (StatusCode::CREATED, Json(json!({ "number": 7, "title": body["title"], "state": "open", "html_url": "https://github.com/acme/demo/issues/7", "node_id": "x" }))).into_response()
}

async fn moved(State(s): State<Arc<ProviderState>>, headers: HeaderMap) -> Response {
    record(&s, &headers, None, None);
    Redirect::temporary("http://169.254.169.254/latest/meta-data/").into_response()
}

async fn graphql(
    State(s): State<Arc<ProviderState>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    record(&s, &headers, Some(body), None);
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(LINEAR_KEY) {
        return (
            StatusCode::BAD_REQUEST,
            Json(
                json!({ "errors": [{ "message": "Authentication required, not authenticated" }] }),
            ),
        )
            .into_response();
    }
    Json(json!({ "data": { "viewer": { "id": "u1", "name": "Lin Ear", "email": "lin@example.com" } } })).into_response()
}

fn cookie_ok(s: &ProviderState, headers: &HeaderMap) -> bool {
    s.cookie_valid.load(Ordering::SeqCst)
        && headers.get("cookie").and_then(|v| v.to_str().ok())
            == Some(&format!("session={SUPERSET_COOKIE}"))
}

async fn superset_me(State(s): State<Arc<ProviderState>>, headers: HeaderMap) -> Response {
    record(&s, &headers, None, None);
    if !cookie_ok(&s, &headers) {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({ "msg": "Not authorized" })),
        )
            .into_response();
    }
    Json(json!({ "result": { "username": "admin" } })).into_response()
}

async fn dashboards(
    State(s): State<Arc<ProviderState>>,
    headers: HeaderMap,
    uri: axum::http::Uri,
) -> Response {
    record(&s, &headers, None, uri.query().map(str::to_owned));
    if !cookie_ok(&s, &headers) {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({ "msg": "Not authorized" })),
        )
            .into_response();
    }
    Json(json!({ "count": 1, "result": [{ "id": 3, "dashboard_title": "Sales", "url": "/superset/dashboard/3/", "changed_on_delta_humanized": "a day ago", "owners": [] }] })).into_response()
}

/// A careless API: echoes the key it was sent (the Linear API key is the whole Authorization
/// header) in a pagination `Link` header and in a body streamed one byte at a time.
async fn echo_key(
    State(s): State<Arc<ProviderState>>,
    headers: HeaderMap,
    uri: axum::http::Uri,
) -> Response {
    record(&s, &headers, None, uri.query().map(str::to_owned));
    let key = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let reflected = uri
        .query()
        .and_then(|q| q.strip_prefix("v="))
        .unwrap_or("")
        .to_owned();
    let body = format!("{{\"you_sent\": \"{key}\", \"next\": \"/items?api_key={key}&page=2\", \"echo\": \"{reflected}\"}}");
    let chunks: Vec<Result<axum::body::Bytes, std::io::Error>> = body
        .into_bytes()
        .into_iter()
        .map(|b| Ok(axum::body::Bytes::from(vec![b])))
        .collect();
    let mut res = axum::body::Body::from_stream(futures::stream::iter(chunks)).into_response();
    res.headers_mut().insert(
        "link",
        format!("</items?api_key={key}&page=2>; rel=\"next\"")
            .parse()
            .unwrap(),
    );
    res
}

/// Answers after `ms` milliseconds.
async fn slow(
    State(s): State<Arc<ProviderState>>,
    headers: HeaderMap,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    record(&s, &headers, None, None);
    let ms = q.get("ms").and_then(|m| m.parse().ok()).unwrap_or(1000);
    tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
    Json(json!({ "slept_ms": ms })).into_response()
}

pub async fn start() -> FakeProvider {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let state = Arc::new(ProviderState {
        issuer: format!("http://{addr}"),
        ..Default::default()
    });
    state.expires_in.store(3600, Ordering::SeqCst);
    state.cookie_valid.store(true, Ordering::SeqCst);
    let app = Router::new()
        .route("/authorize", get(authorize))
        .route("/token", post(token))
        .route("/user", get(user))
        .route("/repos/{owner}/{repo}/issues", post(create_issue))
        .route("/moved", get(moved))
        .route("/graphql", post(graphql))
        .route("/echo-key", axum::routing::any(echo_key))
        .route("/slow", get(slow))
        .route("/api/v1/me/", get(superset_me))
        .route("/api/v1/dashboard/", get(dashboards))
        .with_state(state.clone());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    FakeProvider { addr, state }
}
