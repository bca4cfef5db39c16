//! Tool sets over REST (issue 33): `POST/GET /v1/tool-sets`, `GET/PUT/DELETE
//! /v1/tool-sets/{id}`. Any caller of the project may list them with their endpoints (fixed
//! argument values only for admins); only an unrestricted admin may change them.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};
use workbench_core::auth::{Operation, Principal};
use workbench_core::toolsets::{endpoint_path, ToolSet, ToolSetInput};

use super::body::{object_as, unprocessable};
use super::JsonBody;
use crate::api_auth::ApiCaller;
use crate::api_error::ApiError;
use crate::state::AppState;

const SHAPE: &str = "{\"slug\", \"name\", \"description\"?, \"tools\": [{\"tool\", \"name\"?, \"description\"?, \"fixed\"?: {...}}]}";

fn input(body: Value) -> Result<ToolSetInput, ApiError> {
    object_as(body, SHAPE)
}

/// The set with its endpoint; fixed values are shown to those who may change them, others see
/// which arguments are fixed.
pub fn view(state: &AppState, who: &Principal, set: &ToolSet) -> Value {
    let mut v = json!(set);
    v["endpoint"] = json!(state.config.public_link(&endpoint_path(&set.slug)));
    if !who.allows(Operation::ToolSetsManage) {
        if let Some(tools) = v["tools"].as_array_mut() {
            for t in tools {
                if let Some(fixed) = t.as_object_mut().and_then(|o| o.remove("fixed")) {
                    let keys: Vec<&String> = fixed
                        .as_object()
                        .map(|m| m.keys().collect())
                        .unwrap_or_default();
                    t["fixed_arguments"] = json!(keys);
                }
            }
        }
    }
    v
}

pub async fn create(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    JsonBody(body): JsonBody,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let set = state
        .wb
        .tool_sets()
        .create(&who, &input(body)?)
        .await
        .map_err(unprocessable)?;
    Ok((StatusCode::CREATED, Json(view(&state, &who, &set))))
}

pub async fn list(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
) -> Result<Json<Value>, ApiError> {
    let sets = state.wb.tool_sets().list(&who).await?;
    Ok(Json(json!({
        "object": "list",
        "data": sets.iter().map(|s| view(&state, &who, s)).collect::<Vec<_>>(),
    })))
}

pub async fn get_one(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let set = state.wb.tool_sets().get(&who, &id).await?;
    Ok(Json(view(&state, &who, &set)))
}

pub async fn replace(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody,
) -> Result<Json<Value>, ApiError> {
    let set = state
        .wb
        .tool_sets()
        .replace(&who, &id, &input(body)?)
        .await
        .map_err(unprocessable)?;
    Ok(Json(view(&state, &who, &set)))
}

pub async fn delete(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.wb.tool_sets().delete(&who, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}
