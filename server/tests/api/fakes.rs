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
}

async fn delay(State(s): State<Arc<FakeState>>, Query(q): Query<DelayQ>) -> Json<serde_json::Value> {
    s.requests.fetch_add(1, Ordering::SeqCst);
    let now = s.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    s.max_in_flight.fetch_max(now, Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(q.ms)).await;
    s.in_flight.fetch_sub(1, Ordering::SeqCst);
    Json(json!({ "ms": q.ms }))
}

async fn echo(method: Method, headers: HeaderMap, body: Bytes) -> Json<serde_json::Value> {
    let h: serde_json::Map<String, serde_json::Value> = headers
        .iter()
        .map(|(k, v)| (k.as_str().to_owned(), json!(v.to_str().unwrap_or(""))))
        .collect();
    Json(json!({ "method": method.as_str(), "headers": h, "body": String::from_utf8_lossy(&body) }))
}

async fn big(Query(q): Query<SizeQ>) -> String {
    "a".repeat(q.n)
}

async fn redirect(Query(q): Query<ToQ>) -> Response {
    (StatusCode::FOUND, [("location", q.to)]).into_response()
}

async fn binary() -> Vec<u8> {
    vec![0xff, 0x00, 0xfe, 0x01]
}

pub async fn start() -> FakeApi {
    let state = Arc::new(FakeState::default());
    let app = Router::new()
        .route("/delay", get(delay))
        .route("/echo", any(echo))
        .route("/big", get(big))
        .route("/redirect", get(redirect))
        .route("/binary", get(binary))
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    FakeApi { addr, state }
}
