//! Sign-in providers over REST (issue 34): `GET /v1/sso/providers`, `PUT/DELETE
//! /v1/sso/providers/{slug}` and `POST /v1/sso/providers/{slug}/preview` (what a person with
//! some groups would get). Only an unrestricted admin of the project may use them.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use workbench_core::model::sso::ProviderInput;

use super::body::{object_as, unprocessable};
use super::JsonBody;
use crate::api_auth::ApiCaller;
use crate::api_error::ApiError;
use crate::state::AppState;

const SHAPE: &str = "{\"name\", \"issuer\", \"client_id\", \"client_secret_ref\"?: \"vault:NAME\"|\"env:WB_SSO_<SLUG>_SECRET\"|null, \"scopes\"?, \"groups_claim\"?, \"mappings\"?: [{\"group\", \"role\", \"policy_id\"?}], \"default_role\"?, \"default_policy_id\"?, \"recheck_minutes\"?}";

pub async fn list(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
) -> Result<Json<Value>, ApiError> {
    let data = state.wb.sso().list(&who).await?;
    Ok(Json(json!({ "object": "list", "data": data })))
}

pub async fn put(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    Path(slug): Path<String>,
    JsonBody(body): JsonBody,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let input: ProviderInput = object_as(body, SHAPE)?;
    let (provider, created) = state
        .wb
        .sso()
        .put(&who, &slug, input)
        .await
        .map_err(unprocessable)?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(json!(provider))))
}

pub async fn delete(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    Path(slug): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.wb.sso().delete(&who, &slug).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PreviewBody {
    groups: Vec<String>,
}

pub async fn preview(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    Path(slug): Path<String>,
    JsonBody(body): JsonBody,
) -> Result<Json<Value>, ApiError> {
    let body: PreviewBody = object_as(body, "{\"groups\": [\"name\", …]}")?;
    let preview = state
        .wb
        .sso()
        .preview(&who, &slug, &body.groups)
        .await
        .map_err(unprocessable)?;
    Ok(Json(json!(preview)))
}
