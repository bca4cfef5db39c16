//! `POST /rest/{integration}`: the REST form of execute_tools for one integration's tools.
//! Batch only: `compose` and `return` are MCP-only and answer 400.

use axum::extract::{Path, State};
use axum::Json;
use serde_json::Value;
use workbench_core::engine::{parse_request, CallOptions, Surface};

use super::JsonBody;
use crate::api_auth::ApiCaller;
use crate::api_error::ApiError;
use crate::state::AppState;

pub async fn execute(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    Path(integration): Path<String>,
    JsonBody(body): JsonBody,
) -> Result<Json<Value>, ApiError> {
    if body.get("compose").is_some() || body.get("return").is_some() {
        return Err(ApiError::bad_request("compose and return are MCP-only; POST /rest/{integration} runs a plain batch of executions"));
    }
    let req = parse_request(&body).map_err(|e| ApiError::bad_request(e.to_string()))?;
    let out = state
        .wb
        .engine()
        .execute_tools(
            &who,
            req,
            &CallOptions::new(Surface::RestBatch),
            Some(&integration),
        )
        .await;
    Ok(Json(out.into_value()))
}
