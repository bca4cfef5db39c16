//! Confirmations over REST (seed 004, D15): `GET /v1/tools/confirmations?status=…`,
//! `GET /v1/tools/confirmations/{id}` and `POST /v1/tools/confirmations/{id}`
//! `{decision: "approve"|"deny", reason?}`, for an admin key with no policy attached, never the
//! key that made the call. Approve answers the finished call; a second decision, or one after
//! the hold expired, is 409 with the confirmation's status.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use workbench_core::engine::DecideError;

use super::body::{invalid_request, object_as};
use super::tools::call_json;
use super::JsonBody;
use crate::api_auth::ApiCaller;
use crate::api_error::ApiError;
use crate::state::AppState;

#[derive(Deserialize)]
pub struct ListQuery {
    status: Option<String>,
}

pub async fn list(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    Query(q): Query<ListQuery>,
) -> Result<Json<Value>, ApiError> {
    let data = state
        .wb
        .engine()
        .confirmations(&who, q.status.as_deref())
        .await?;
    Ok(Json(json!({ "object": "list", "data": data })))
}

pub async fn get_one(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(json!(
        state.wb.engine().confirmation(&who, &id).await?
    )))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Decision {
    decision: String,
    #[serde(default)]
    reason: Option<String>,
}

pub async fn decide(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    Path(id): Path<String>,
    JsonBody(body): JsonBody,
) -> Result<Json<Value>, ApiError> {
    let d: Decision = object_as(body, r#"{"decision": "approve"|"deny", "reason"?}"#)?;
    let approve = match d.decision.as_str() {
        "approve" => true,
        "deny" => false,
        other => {
            return Err(invalid_request(format!(
                "decision must be \"approve\" or \"deny\", not {other:?}"
            )))
        }
    };
    match state.wb.engine().decide(&who, &id, approve, d.reason).await {
        Ok(call) => {
            let mut v = call_json(call);
            v["confirmation_id"] = json!(id);
            Ok(Json(v))
        }
        Err(DecideError::NotFound) => Err(ApiError::not_found()),
        Err(DecideError::Forbidden(m)) => Err(ApiError::new(StatusCode::FORBIDDEN, "forbidden", m)),
        Err(DecideError::Invalid(m)) => Err(invalid_request(m)),
        Err(e @ DecideError::Closed { status }) => {
            Err(
                ApiError::new(StatusCode::CONFLICT, "confirmation_closed", e.to_string())
                    .with_meta_field("status", json!(status)),
            )
        }
        Err(DecideError::Failed(e)) => Err(e.into()),
    }
}
