//! Scheduled callbacks over REST: `GET /v1/schedules` (newest first, `?status=` and `?cursor=`),
//! `GET /v1/schedules/{id}` (with each delivery attempt), `DELETE /v1/schedules/{id}` (cancel a
//! callback still waiting) and, for admins, `GET /v1/schedules/signing-secret` (what receivers
//! check `Workbench-Signature` with). Members see and cancel their own callbacks.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use workbench_core::schedule::Cancelled;

use crate::api_auth::ApiCaller;
use crate::api_error::ApiError;
use crate::state::AppState;

#[derive(Deserialize)]
pub struct ListQuery {
    status: Option<String>,
    cursor: Option<String>,
}

pub async fn list(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    Query(q): Query<ListQuery>,
) -> Result<Json<Value>, ApiError> {
    let page = state
        .wb
        .schedules()
        .page(&who, q.status.as_deref(), q.cursor.as_deref())
        .await?;
    Ok(Json(
        json!({ "object": "list", "data": page.data, "next_cursor": page.next_cursor }),
    ))
}

pub async fn get_one(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    match state.wb.schedules().get(&who, &id).await? {
        Some(v) => Ok(Json(json!(v))),
        None => Err(ApiError::not_found()),
    }
}

pub async fn cancel(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    match state.wb.schedules().cancel(&who, &id).await? {
        Cancelled::Done => Ok(StatusCode::NO_CONTENT),
        Cancelled::NotFound => Err(ApiError::not_found()),
        Cancelled::Finished(status) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "conflict",
            format!(
                "callback {id} is already {}; only a scheduled callback can be cancelled",
                status.as_str()
            ),
        )),
    }
}

pub async fn signing_secret(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
) -> Result<impl axum::response::IntoResponse, ApiError> {
    let secret = state.wb.schedules().signing_secret(&who).await?;
    Ok((
        [(axum::http::header::CACHE_CONTROL, "no-store")],
        Json(json!({
            "object": "callback_signing_secret",
            "secret": secret.as_str(),
            "header": "Workbench-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of \"<t>.<raw body>\" under this secret>",
        })),
    ))
}
