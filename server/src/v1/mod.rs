//! The REST API (tier 0, seed 004) under /v1, and the batch form `/rest/{integration}`. Every
//! route needs a bearer API key; bodies are JSON and errors use the API's error shape.

mod api_keys;
mod apps;
mod audit;
mod body;
mod confirmations;
mod email;
mod mcp_servers;
mod openapi;
mod policies;
mod rest_batch;
mod schedules;
mod settings;
mod tools;
mod usage;

use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};

pub use body::JsonBody;

use crate::api_auth::ApiCaller;
use crate::api_error::ApiError;
use crate::state::AppState;

/// Largest request body /v1 and /rest accept.
pub const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/me", get(me))
        .route("/v1/openapi.json", get(openapi::document))
        .route("/v1/tools", get(tools::list))
        .route("/v1/tools/invoke", post(tools::invoke))
        .route("/v1/tools/calls/{id}", get(tools::get_call))
        .route("/v1/tools/confirmations", get(confirmations::list))
        .route("/v1/tools/confirmations/{id}", get(confirmations::get_one).post(confirmations::decide))
        .route("/v1/tools/{name}", get(tools::get_one))
        .route("/v1/usage", get(usage::usage))
        .route("/v1/apps", get(apps::list).post(apps::create))
        .route("/v1/apps/import", post(apps::import))
        .route("/v1/apps/{id}", axum::routing::delete(apps::delete))
        .route("/v1/mcp/servers", get(mcp_servers::list).post(mcp_servers::create))
        .route("/v1/mcp/servers/{id}", get(mcp_servers::get_one).delete(mcp_servers::delete))
        .route("/v1/mcp/servers/{id}/refresh", post(mcp_servers::refresh))
        .route("/v1/mcp/servers/{id}/approve", post(mcp_servers::approve))
        .route("/v1/mcp/servers/{id}/tools", get(mcp_servers::tools))
        .route("/v1/mcp/servers/{id}/tools/{name}", axum::routing::patch(mcp_servers::patch_tool))
        .route("/v1/policies", get(policies::list).post(policies::create))
        .route("/v1/policies/{id}", get(policies::get_one).put(policies::replace).delete(policies::delete))
        .route("/v1/api-keys", get(api_keys::list).post(api_keys::create))
        .route("/v1/api-keys/{id}", axum::routing::patch(api_keys::patch).delete(api_keys::revoke))
        .route("/v1/audit", get(audit::list))
        .route("/v1/audit/{id}", get(audit::get_one))
        .route("/v1/settings", get(settings::get).patch(settings::patch))
        .route("/v1/webhooks/deliveries", get(settings::deliveries))
        .route("/v1/schedules", get(schedules::list))
        .route("/v1/schedules/signing-secret", get(schedules::signing_secret))
        .route("/v1/schedules/{id}", get(schedules::get_one).delete(schedules::cancel))
        .route("/v1/email/domains", get(email::list).post(email::create))
        .route("/v1/email/domains/{id}", get(email::get_one).delete(email::delete))
        .route("/v1/email/domains/{id}/verify", post(email::verify))
        .route("/rest/{integration}", post(rest_batch::execute))
        .route("/v1", get(not_found))
        .route("/v1/{*rest}", get(not_found).post(not_found).put(not_found).patch(not_found).delete(not_found))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
}

/// The identity behind the key: user, project and key ids.
async fn me(ApiCaller(p): ApiCaller) -> Json<Value> {
    Json(json!({
        "id": p.user_id,
        "email": p.email,
        "project": { "id": p.project_id, "name": p.project_name },
        "role": p.role,
        "api_key_id": p.api_key_id,
        "policy_id": p.policy_id,
    }))
}

/// Unknown /v1 paths: authenticate first (so the API's shape is not probeable without a key),
/// then 404 in the API's error shape.
async fn not_found(_caller: ApiCaller) -> ApiError {
    ApiError::not_found()
}
