//! JSON endpoints of the portal (D19): they take the session cookie, never API keys.

use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};
use tower_sessions::Session;
use workbench_core::auth::SESSION_USER_KEY;

use crate::api_error::ApiError;
use crate::state::AppState;

/// `GET /me`: the signed-in user, like whoami.
pub async fn me(State(state): State<AppState>, session: Session) -> Result<Json<Value>, ApiError> {
    let user_id = session
        .get::<String>(SESSION_USER_KEY)
        .await
        .ok()
        .flatten()
        .ok_or_else(|| ApiError::unauthorized("not signed in"))?;
    let p = state
        .wb
        .accounts()
        .principal_for_user(&user_id)
        .await?
        .ok_or_else(|| ApiError::unauthorized("not signed in"))?;
    Ok(Json(json!({
        "id": p.user_id,
        "email": p.email,
        "project": { "id": p.project_id, "name": p.project_name },
        "role": p.role,
    })))
}
