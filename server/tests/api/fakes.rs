//! A fake third-party HTTP API on loopback for http.fetch: delays, echo, redirects, large and
//! binary bodies, with a count of requests in flight.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;

#[derive(Default)]
pub struct FakeState {
    pub in_flight: AtomicUsize,
    pub max_in_flight: AtomicUsize,
    pub requests: AtomicUsize,
    /// Headers and body of the last /echo or /reflect request, as received.
    pub last: std::sync::Mutex<Option<(HeaderMap, String)>>,
}

pub struct FakeApi {
    pub addr: SocketAddr,
    pub state: Arc<FakeState>,
}

impl FakeApi {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }
}

#[derive(Deserialize)]
struct DelayQ {
    ms: u64,
}

#[derive(Deserialize)]
struct SizeQ {
    n: usize,
}

#[derive(Deserialize)]
struct ToQ {
    to: String,
    /// The redirect status (default 302).
    code: Option<u16>,
}

async fn delay(
    State(s): State<Arc<FakeState>>,
    Query(q): Query<DelayQ>,
) -> Json<serde_json::Value> {
    s.requests.fetch_add(1, Ordering::SeqCst);
    let now = s.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    s.max_in_flight.fetch_max(now, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(q.ms)).await;
    s.in_flight.fetch_sub(1, Ordering::SeqCst);
    Json(json!({ "ms": q.ms }))
}

async fn echo(
    State(s): State<Arc<FakeState>>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Json<serde_json::Value> {
    *s.last.lock().unwrap() = Some((headers.clone(), String::from_utf8_lossy(&body).into_owned()));
    let h: serde_json::Map<String, serde_json::Value> = headers
        .iter()
        .map(|(k, v)| (k.as_str().to_owned(), json!(v.to_str().unwrap_or(""))))
        .collect();
    Json(json!({ "method": method.as_str(), "headers": h, "body": String::from_utf8_lossy(&body) }))
}

/// Returns the `x-secret` header in several encodings, as a careless API might.
async fn reflect(State(s): State<Arc<FakeState>>, headers: HeaderMap) -> Json<serde_json::Value> {
    use base64::Engine as _;
    *s.last.lock().unwrap() = Some((headers.clone(), String::new()));
    let x = headers
        .get("x-secret")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let b64 = base64::engine::general_purpose::STANDARD.encode(&x);
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("user:{x}"));
    let url: String = url::form_urlencoded::byte_serialize(x.as_bytes()).collect();
    Json(
        json!({ "raw": x, "b64": b64, "basic": format!("Basic {basic}"), "url": format!("https://x.example/?t={url}"), "json": serde_json::to_string(&json!({ "t": x })).unwrap() }),
    )
}

async fn big(Query(q): Query<SizeQ>) -> String {
    "a".repeat(q.n)
}

async fn redirect(Query(q): Query<ToQ>) -> Response {
    let status = q
        .code
        .and_then(|c| StatusCode::from_u16(c).ok())
        .unwrap_or(StatusCode::FOUND);
    (status, [("location", q.to)]).into_response()
}

async fn binary() -> Vec<u8> {
    vec![0xff, 0x00, 0xfe, 0x01]
}

pub async fn start() -> FakeApi {
    let state = Arc::new(FakeState::default());
    let app = Router::new()
        .route("/delay", get(delay))
        .route("/echo", any(echo))
        .route("/reflect", get(reflect))
        .route("/big", get(big))
        .route("/redirect", any(redirect))
        .route("/binary", get(binary))
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    FakeApi { addr, state }
}
