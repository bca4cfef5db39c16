//! Project settings over REST: `GET /v1/settings` and `PATCH /v1/settings` with
//! `audit_retention_days` (days, or null to keep everything), `webhook` (`{url, secret_ref}`, or
//! null to remove it) and `email_hourly_limit` (1 up to the operator's limit, or null for it);
//! `GET /v1/webhooks/deliveries` lists how the newest webhook deliveries went. Only an admin
//! whose key has no policy may change them.

use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};
use workbench_core::notify::WebhookConfig;

use super::body::{invalid_request, unprocessable};
use super::JsonBody;
use crate::api_auth::ApiCaller;
use crate::api_error::ApiError;
use crate::state::AppState;

async fn current(
    state: &AppState,
    who: &workbench_core::auth::Principal,
) -> Result<Value, ApiError> {
    Ok(json!({
        "object": "project_settings",
        "audit_retention_days": state.wb.audit().retention_days(who).await?,
        "webhook": state.wb.webhooks().get(who).await?,
        "email_hourly_limit": state.wb.email().project_hourly_limit(who).await?,
        "email_hourly_limit_max": state.wb.email().operator_hourly_limit(),
    }))
}

pub async fn get(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(current(&state, &who).await?))
}

pub async fn patch(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    JsonBody(body): JsonBody,
) -> Result<Json<Value>, ApiError> {
    let Value::Object(fields) = body else {
        return Err(invalid_request("expected {\"audit_retention_days\"?: days|null, \"webhook\"?: {\"url\", \"secret_ref\"}|null, \"email_hourly_limit\"?: n|null}"));
    };
    if let Some(k) = fields.keys().find(|k| {
        !matches!(
            k.as_str(),
            "audit_retention_days" | "webhook" | "email_hourly_limit"
        )
    }) {
        return Err(invalid_request(format!("unknown setting {k:?}; settings are audit_retention_days, webhook and email_hourly_limit")));
    }
    // Check everything before changing anything.
    let retention = match fields.get("audit_retention_days") {
        None => None,
        Some(Value::Null) => Some(None),
        Some(v) => match v.as_i64() {
            Some(d) => Some(Some(d)),
            None => return Err(invalid_request(
                "audit_retention_days must be a whole number of days, or null to keep everything",
            )),
        },
    };
    let webhook = match fields.get("webhook") {
        None => None,
        Some(Value::Null) => Some(None),
        Some(v) => Some(Some(
            serde_json::from_value::<WebhookConfig>(v.clone()).map_err(|e| {
                invalid_request(format!(
                    "webhook: expected {{\"url\", \"secret_ref\"}}: {e}"
                ))
            })?,
        )),
    };
    let email_limit = match fields.get("email_hourly_limit") {
        None => None,
        Some(Value::Null) => Some(None),
        Some(v) => match v.as_i64() {
            Some(n) => Some(Some(n)),
            None => return Err(invalid_request("email_hourly_limit must be a whole number of messages, or null for the operator's limit")),
        },
    };
    if let Some(days) = retention {
        workbench_core::audit::check_retention_days(days).map_err(unprocessable)?;
    }
    if let Some(limit) = email_limit {
        state
            .wb
            .email()
            .check_hourly_limit(limit)
            .map_err(unprocessable)?;
    }
    if let Some(w) = webhook {
        state
            .wb
            .webhooks()
            .set(&who, w)
            .await
            .map_err(unprocessable)?;
    }
    if let Some(r) = retention {
        state
            .wb
            .audit()
            .set_retention_days(&who, r)
            .await
            .map_err(unprocessable)?;
    }
    if let Some(l) = email_limit {
        state
            .wb
            .email()
            .set_hourly_limit(&who, l)
            .await
            .map_err(unprocessable)?;
    }
    Ok(Json(current(&state, &who).await?))
}

pub async fn deliveries(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(
        json!({ "object": "list", "data": state.wb.webhooks().deliveries(&who).await? }),
    ))
}
