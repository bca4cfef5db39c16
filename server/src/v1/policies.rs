//! Policies over REST (D14, D20): `POST/GET /v1/policies`, `GET/PUT/DELETE /v1/policies/{id}`.
//! Only an admin whose key has no policy attached may change them; a pattern that is not a
//! tool name or a prefix with one trailing `*` is 422 naming it.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};
use workbench_core::policy::PolicyInput;

use super::body::{object_as, unprocessable};
use super::JsonBody;
use crate::api_auth::ApiCaller;
use crate::api_error::ApiError;
use crate::state::AppState;

const SHAPE: &str = "{\"name\", \"tool_allowlist\": {\"mode\": \"allowlist\"|\"open\", \"allow\": [...], \"deny\": [...], \"require_confirmation\": [...]}, \"limits\"?: [{\"tools\"?, \"calls\"|\"egress_bytes\", \"every\", \"per\"}], \"default\"?: bool}";

fn input(body: Value) -> Result<PolicyInput, ApiError> {
    object_as(body, SHAPE)
}

pub async fn create(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    JsonBody(body): JsonBody,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let policy = state
        .wb
        .policies()
        .create(&who, &input(body)?)
        .await
        .map_err(unprocessable)?;
    Ok((StatusCode::CREATED, Json(json!(policy))))
}

pub async fn list(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(
        json!({ "object": "list", "data": state.wb.policies().list(&who).await? }),
    ))
}

pub async fn get_one(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(json!(state.wb.policies().get(&who, &id).await?)))
}

pub async fn replace(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(json!(state
        .wb
        .policies()
        .replace(&who, &id, &input(body)?)
        .await
        .map_err(unprocessable)?)))
}

pub async fn delete(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.wb.policies().delete(&who, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}
