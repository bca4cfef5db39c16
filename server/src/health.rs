//! Liveness and readiness probes for load balancers and orchestrators, and the client side
//! `workbench health` uses where a container image has no HTTP client.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};

use crate::state::AppState;

/// The process is up and answering.
pub async fn healthz() -> Json<Value> {
    Json(json!({ "status": "ok" }))
}

/// The database answers; 503 otherwise, so a balancer stops sending traffic here.
pub async fn readyz(State(state): State<AppState>) -> (StatusCode, Json<Value>) {
    let audit_write_failures = state.wb.engine().audit_write_failures();
    if state.wb.db().ping().await {
        (
            StatusCode::OK,
            Json(
                json!({ "status": "ok", "database": "ok", "audit_write_failures": audit_write_failures }),
            ),
        )
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({ "status": "unavailable", "database": "unreachable" })),
        )
    }
}

/// Where to reach the server listening on `bind` from this machine: loopback when `bind` is an
/// unspecified address (0.0.0.0, [::]).
pub fn loopback(bind: &str) -> Result<std::net::SocketAddr, String> {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
    let mut addr: SocketAddr = bind
        .parse()
        .map_err(|_| format!("--bind {bind:?} is not an address like 127.0.0.1:3000"))?;
    if addr.ip().is_unspecified() {
        addr.set_ip(match addr.ip() {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
        });
    }
    Ok(addr)
}

/// Asks the server listening on `bind` for `path` with a plain HTTP/1.1 GET (loopback when
/// `bind` is an unspecified address); `Ok` when it answers 200 within five seconds.
pub fn probe(bind: &str, path: &str) -> Result<(), String> {
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::time::Duration;

    let addr = loopback(bind)?;
    let timeout = Duration::from_secs(5);
    let mut stream = TcpStream::connect_timeout(&addr, timeout)
        .map_err(|e| format!("nothing answers on {addr}: {e}"))?;
    stream.set_read_timeout(Some(timeout)).ok();
    stream.set_write_timeout(Some(timeout)).ok();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| format!("{addr}: {e}"))?;
    let mut head = Vec::new();
    stream
        .take(4096)
        .read_to_end(&mut head)
        .map_err(|e| format!("{addr} did not answer: {e}"))?;
    let head = String::from_utf8_lossy(&head);
    let status = head.lines().next().unwrap_or_default();
    if status.split_whitespace().nth(1) == Some("200") {
        Ok(())
    } else {
        Err(format!("{addr}{path} answered {status:?}"))
    }
}
