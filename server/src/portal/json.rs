//! JSON endpoints of the portal (D19): they take the session cookie, never API keys (the
//! route table checks the session and hands the handler its principal).

use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};

use crate::api_auth::ApiCaller;
use crate::api_error::ApiError;
use crate::state::AppState;

/// `GET /api/integrations`: every integration with what the portal shows of it (D19).
pub async fn integrations(
    State(state): State<AppState>,
    ApiCaller(p): ApiCaller,
) -> Result<Json<Value>, ApiError> {
    let statuses = state.wb.connections().statuses(&p).await?;
    let list: Vec<Value> = state
        .wb
        .connections()
        .all_for(&p.project_id)
        .iter()
        .map(|i| {
            json!({
                "name": i.name(),
                "displayName": i.def.display_name,
                "logo": i.def.logo,
                "authType": i.def.auth.kind(),
                "toolCount": i.def.tools.len(),
                "connected": statuses.iter().any(|s| s.name == i.name() && s.connected),
            })
        })
        .collect();
    Ok(Json(json!(list)))
}

/// `GET /me`: the signed-in user, like whoami.
pub async fn me(ApiCaller(p): ApiCaller) -> Json<Value> {
    Json(json!({
        "id": p.user_id,
        "email": p.email,
        "project": { "id": p.project_id, "name": p.project_name },
        "role": p.role,
    }))
}
