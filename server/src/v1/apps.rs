//! Custom apps over REST: `POST /v1/apps` (a definition in the plugin format), `GET /v1/apps`,
//! `DELETE /v1/apps/{id}`. Creating and deleting needs an admin's key.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};

use super::JsonBody;
use crate::api_auth::ApiCaller;
use crate::api_error::ApiError;
use crate::state::AppState;

pub async fn create(State(state): State<AppState>, ApiCaller(who): ApiCaller, JsonBody(body): JsonBody) -> Result<(StatusCode, Json<Value>), ApiError> {
    let app = state.wb.apps().create(&who, &body).await?;
    Ok((StatusCode::CREATED, Json(json!(app))))
}

pub async fn list(State(state): State<AppState>, ApiCaller(who): ApiCaller) -> Result<Json<Value>, ApiError> {
    let apps = state.wb.apps().list(&who).await?;
    Ok(Json(json!({ "object": "list", "data": apps })))
}

pub async fn delete(State(state): State<AppState>, ApiCaller(who): ApiCaller, Path(id): Path<String>) -> Result<StatusCode, ApiError> {
    state.wb.apps().delete(&who, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}
