//! The REST API under /v1 (tier 0). Every route needs a bearer API key.

use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};

use crate::api_auth::ApiCaller;
use crate::api_error::ApiError;
use crate::state::AppState;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/me", get(me))
        .route("/v1", get(not_found))
        .route("/v1/{*rest}", get(not_found).post(not_found).put(not_found).patch(not_found).delete(not_found))
}

/// The identity behind the key: user, project and key ids.
async fn me(ApiCaller(p): ApiCaller) -> Json<Value> {
    Json(json!({
        "id": p.user_id,
        "email": p.email,
        "project": { "id": p.project_id, "name": p.project_name },
        "role": p.role,
        "api_key_id": p.api_key_id,
    }))
}

/// Unknown /v1 paths: authenticate first (so the API's shape is not probeable without a key),
/// then 404 in the API's error shape.
async fn not_found(_caller: ApiCaller) -> ApiError {
    ApiError::not_found()
}
