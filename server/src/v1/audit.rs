//! The audit log over REST: `GET /v1/audit` (newest first, filtered by tool, status and key,
//! paged by cursor) and `GET /v1/audit/{id}` (one row in full). Members see their own rows.

use axum::extract::{Path, Query, State};
use axum::Json;
use serde_json::{json, Value};
use workbench_core::audit::AuditQuery;

use crate::api_auth::ApiCaller;
use crate::api_error::ApiError;
use crate::state::AppState;

pub async fn list(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    Query(q): Query<AuditQuery>,
) -> Result<Json<Value>, ApiError> {
    let page = state.wb.audit().page(&who, &q).await?;
    Ok(Json(
        json!({ "object": "list", "data": page.entries, "next_cursor": page.next }),
    ))
}

pub async fn get_one(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(json!(state.wb.audit().detail(&who, &id).await?)))
}
