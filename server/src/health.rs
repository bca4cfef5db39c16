//! Liveness and readiness probes for load balancers and orchestrators.

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
