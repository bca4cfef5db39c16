//! API keys over REST (D20): `POST/GET /v1/api-keys`, `PATCH/DELETE /v1/api-keys/{id}`, for an
//! admin whose key has no policy attached. A new key is shown once, in the 201 answer; listings
//! never carry it.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use workbench_core::auth::ApiKeyInfo;
use workbench_core::clock::rfc3339;

use super::body::{invalid_request, object_as, unprocessable};
use super::JsonBody;
use crate::api_auth::ApiCaller;
use crate::api_error::ApiError;
use crate::state::AppState;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewKey {
    name: String,
    #[serde(default)]
    policy_id: Option<String>,
    #[serde(default)]
    rate_limit_per_minute: Option<i64>,
    /// The tool sets (slugs) the key is limited to.
    #[serde(default)]
    tool_sets: Option<Vec<String>>,
}

fn view(k: &ApiKeyInfo) -> Value {
    json!({
        "id": k.id,
        "object": "api_key",
        "name": k.name,
        "policy_id": k.policy_id,
        "rate_limit_per_minute": k.rate_limit_per_minute,
        "tool_sets": k.tool_sets,
        "prefix": k.prefix,
        "owner_email": k.owner_email,
        "created_at": rfc3339(k.created_at),
        "last_used_at": k.last_used_at.map(rfc3339),
        "revoked_at": k.revoked_at.map(rfc3339),
    })
}

pub async fn create(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    JsonBody(body): JsonBody,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let req: NewKey = object_as(
        body,
        r#"{"name", "policy_id"?, "rate_limit_per_minute"?, "tool_sets"?: ["slug", ...]}"#,
    )?;
    let limit = req.rate_limit_per_minute;
    if limit.is_some_and(|n| !(1..=workbench_core::auth::MAX_RATE_LIMIT).contains(&n)) {
        return Err(unprocessable(workbench_core::Error::invalid(format!(
            "rate_limit_per_minute must be 1 to {}",
            workbench_core::auth::MAX_RATE_LIMIT
        ))));
    }
    // Checked before the key exists, so a refused request leaves no unlimited key behind.
    if let Some(slugs) = &req.tool_sets {
        state
            .wb
            .tool_sets()
            .check_slugs(&who, slugs)
            .await
            .map_err(unprocessable)?;
    }
    let key = state
        .wb
        .accounts()
        .create_api_key_with_policy(&who, &req.name, req.policy_id.as_deref())
        .await
        .map_err(unprocessable)?;
    if let Some(slugs) = &req.tool_sets {
        state
            .wb
            .tool_sets()
            .limit_key(&who, &key.info.id, Some(slugs))
            .await
            .map_err(unprocessable)?;
    }
    if limit.is_some() {
        state
            .wb
            .accounts()
            .set_rate_limit(&who, &key.info.id, limit)
            .await
            .map_err(unprocessable)?;
    }
    Ok((
        StatusCode::CREATED,
        Json(json!({
            "id": key.info.id,
            "object": "api_key",
            "name": key.info.name,
            "policy_id": key.info.policy_id,
            "rate_limit_per_minute": limit,
            "tool_sets": req.tool_sets,
            "key": key.secret.expose(),
            "created_at": rfc3339(key.info.created_at),
        })),
    ))
}

pub async fn list(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
) -> Result<Json<Value>, ApiError> {
    let keys = state.wb.accounts().list_api_keys(&who).await?;
    Ok(Json(
        json!({ "object": "list", "data": keys.iter().map(view).collect::<Vec<_>>() }),
    ))
}

pub async fn patch(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody,
) -> Result<Json<Value>, ApiError> {
    // `policy_id`: a policy to attach, or null to detach; `rate_limit_per_minute`: a number, or
    // null for no limit. At least one, nothing else.
    let expected = || {
        invalid_request(
            "expected any of {\"policy_id\": \"pol_…\"|null, \"rate_limit_per_minute\": number|null, \"tool_sets\": [\"slug\", …]|null}",
        )
    };
    let fields = body
        .as_object()
        .filter(|m| !m.is_empty())
        .ok_or_else(expected)?;
    if fields.keys().any(|k| {
        !matches!(
            k.as_str(),
            "policy_id" | "rate_limit_per_minute" | "tool_sets"
        )
    }) {
        return Err(expected());
    }
    let policy_id = match fields.get("policy_id") {
        None => None,
        Some(Value::Null) => Some(None),
        Some(Value::String(s)) => Some(Some(s.clone())),
        Some(_) => return Err(expected()),
    };
    let limit = match fields.get("rate_limit_per_minute") {
        None => None,
        Some(Value::Null) => Some(None),
        Some(v) => Some(Some(v.as_i64().ok_or_else(expected)?)),
    };
    let tool_sets: Option<Option<Vec<String>>> = match fields.get("tool_sets") {
        None => None,
        Some(Value::Null) => Some(None),
        Some(v) => Some(Some(
            serde_json::from_value(v.clone()).map_err(|_| expected())?,
        )),
    };
    if let Some(policy_id) = policy_id {
        state
            .wb
            .policies()
            .attach(&who, &id, policy_id.as_deref())
            .await
            .map_err(unprocessable)?;
    }
    if let Some(limit) = limit {
        state
            .wb
            .accounts()
            .set_rate_limit(&who, &id, limit)
            .await
            .map_err(unprocessable)?;
    }
    if let Some(slugs) = tool_sets {
        state
            .wb
            .tool_sets()
            .limit_key(&who, &id, slugs.as_deref())
            .await
            .map_err(unprocessable)?;
    }
    let keys = state.wb.accounts().list_api_keys(&who).await?;
    let key = keys
        .iter()
        .find(|k| k.id == id)
        .ok_or_else(ApiError::not_found)?;
    Ok(Json(view(key)))
}

pub async fn revoke(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.wb.accounts().revoke_api_key(&who, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}
