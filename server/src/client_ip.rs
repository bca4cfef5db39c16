//! The client address used for sign-in throttling: the socket peer, or the last
//! X-Forwarded-For entry when the operator says a proxy in front sets it.

use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use workbench_core::auth::ClientIp;

use crate::state::AppState;

pub async fn layer(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let peer = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(addr)| addr.ip());
    let forwarded = state
        .config
        .trust_forwarded_for
        .then(|| {
            req.headers()
                .get_all("x-forwarded-for")
                .iter()
                .filter_map(|v| v.to_str().ok())
                .flat_map(|v| v.split(','))
                .last()
                .and_then(|s| s.trim().parse::<IpAddr>().ok())
        })
        .flatten();
    req.extensions_mut().insert(ClientIp(forwarded.or(peer)));
    next.run(req).await
}
