//! Upstream MCP servers over REST (seed 004): `POST/GET /v1/mcp/servers`,
//! `GET/DELETE /v1/mcp/servers/{id}`, `POST /v1/mcp/servers/{id}/refresh`, the review
//! endpoints `GET /v1/mcp/servers/{id}/tools` and `POST /v1/mcp/servers/{id}/approve`, and
//! `PATCH /v1/mcp/servers/{id}/tools/{name}` for a side-effects override. Changing anything
//! needs an admin's key; a registration that does not validate or connect is 422.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use workbench_core::catalog::SideEffects;

use super::body::{object_as, unprocessable};
use super::JsonBody;
use crate::api_auth::ApiCaller;
use crate::api_error::ApiError;
use crate::state::AppState;

pub async fn create(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    JsonBody(body): JsonBody,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let view = state
        .wb
        .upstreams()
        .register(&who, &body)
        .await
        .map_err(unprocessable)?;
    Ok((StatusCode::CREATED, Json(json!(view))))
}

pub async fn list(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
) -> Result<Json<Value>, ApiError> {
    let data = state.wb.upstreams().list(&who).await?;
    Ok(Json(json!({ "object": "list", "data": data })))
}

pub async fn get_one(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(json!(state.wb.upstreams().get(&who, &id).await?)))
}

pub async fn delete(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.wb.upstreams().delete(&who, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub async fn refresh(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(json!(state.wb.upstreams().refresh(&who, &id).await?)))
}

pub async fn tools(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let data = state.wb.upstreams().tools(&who, &id).await?;
    Ok(Json(json!({ "object": "list", "data": data })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Approval {
    tools: Vec<String>,
}

pub async fn approve(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody,
) -> Result<Json<Value>, ApiError> {
    let a: Approval = object_as(body, r#"{"tools": [names]}"#)?;
    Ok(Json(json!(state
        .wb
        .upstreams()
        .approve(&who, &id, &a.tools)
        .await
        .map_err(unprocessable)?)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Override {
    side_effects: Option<SideEffects>,
}

pub async fn patch_tool(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    Path((id, name)): Path<(String, String)>,
    JsonBody(body): JsonBody,
) -> Result<Json<Value>, ApiError> {
    let o: Override = object_as(
        body,
        r#"{"side_effects": "none"|"network"|"write"|"destructive"|null}"#,
    )?;
    Ok(Json(json!(
        state
            .wb
            .upstreams()
            .set_side_effects(&who, &id, &name, o.side_effects)
            .await?
    )))
}
