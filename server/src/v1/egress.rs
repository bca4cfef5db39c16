//! The project's egress allowlist over REST, so automation never needs the portal:
//! `GET /v1/egress` lists the host patterns outbound calls may reach, `POST /v1/egress
//! {"pattern"}` adds one (normalised; adding one that exists is not an error) and
//! `DELETE /v1/egress/{pattern}` removes one. Everyone in the project reads it; admins whose
//! key has no policy change it.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::body::{object_as, unprocessable};
use super::JsonBody;
use crate::api_auth::ApiCaller;
use crate::api_error::ApiError;
use crate::state::AppState;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewRule {
    pattern: String,
}

fn rule(pattern: &str) -> Value {
    json!({ "object": "egress_rule", "pattern": pattern })
}

pub async fn list(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
) -> Result<Json<Value>, ApiError> {
    let patterns = state.wb.egress().list(&who).await?;
    let data: Vec<Value> = patterns.iter().map(|p| rule(p)).collect();
    Ok(Json(json!({ "object": "list", "data": data })))
}

pub async fn create(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    JsonBody(body): JsonBody,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let input: NewRule = object_as(body, r#"{"pattern": "api.example.com" or "*.example.com"}"#)?;
    let pattern = state
        .wb
        .egress()
        .add(&who, &input.pattern)
        .await
        .map_err(unprocessable)?;
    Ok((StatusCode::CREATED, Json(rule(&pattern))))
}

pub async fn delete(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    Path(pattern): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.wb.egress().remove(&who, &pattern).await?;
    Ok(StatusCode::NO_CONTENT)
}
