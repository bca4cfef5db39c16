//! JSON endpoints of the portal (D19): they take the session cookie, never API keys.

use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};
use tower_sessions::Session;
use workbench_core::auth::SESSION_USER_KEY;

use crate::api_error::ApiError;
use crate::state::AppState;

pub(super) async fn signed_in(state: &AppState, session: &Session) -> Result<workbench_core::auth::Principal, ApiError> {
    let user_id = session
        .get::<String>(SESSION_USER_KEY)
        .await
        .ok()
        .flatten()
        .ok_or_else(|| ApiError::unauthorized("not signed in"))?;
    state
        .wb
        .accounts()
        .principal_for_user(&user_id)
        .await?
        .ok_or_else(|| ApiError::unauthorized("not signed in"))
}

/// `GET /api/integrations`: every integration with what the portal shows of it (D19).
pub async fn integrations(State(state): State<AppState>, session: Session) -> Result<Json<Value>, ApiError> {
    let p = signed_in(&state, &session).await?;
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
pub async fn me(State(state): State<AppState>, session: Session) -> Result<Json<Value>, ApiError> {
    let p = signed_in(&state, &session).await?;
    Ok(Json(json!({
        "id": p.user_id,
        "email": p.email,
        "project": { "id": p.project_id, "name": p.project_name },
        "role": p.role,
    })))
}
