//! Sender domains over REST: `GET/POST /v1/email/domains`, `GET/DELETE /v1/email/domains/{id}`
//! and `POST /v1/email/domains/{id}/verify`, which looks the domain's TXT record up. Members
//! see the domains (what they may send from); admins add, verify and remove them.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use workbench_core::email::VerifyError;

use super::body::{object_as, unprocessable};
use super::JsonBody;
use crate::api_auth::ApiCaller;
use crate::api_error::ApiError;
use crate::state::AppState;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewDomain {
    domain: String,
}

pub async fn list(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
) -> Result<Json<Value>, ApiError> {
    let email = state.wb.email();
    Ok(Json(
        json!({ "object": "list", "data": email.list_domains(&who).await?, "sending": email.status(&who).await? }),
    ))
}

pub async fn create(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    JsonBody(body): JsonBody,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let input: NewDomain = object_as(body, r#"{"domain": "example.com"}"#)?;
    let domain = state
        .wb
        .email()
        .add_domain(&who, &input.domain)
        .await
        .map_err(unprocessable)?;
    Ok((StatusCode::CREATED, Json(json!(domain))))
}

pub async fn get_one(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    match state.wb.email().get_domain(&who, &id).await? {
        Some(d) => Ok(Json(json!(d))),
        None => Err(ApiError::not_found()),
    }
}

pub async fn verify(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    match state.wb.email().verify_domain(&who, &id).await {
        Ok(d) => Ok(Json(json!(d))),
        Err(VerifyError::NotProven(m)) => Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "verification_failed",
            m,
        )),
        Err(VerifyError::Lookup(m)) => Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "dns_unavailable",
            m,
        )),
        Err(VerifyError::Other(e)) => Err(e.into()),
    }
}

pub async fn delete(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    if state.wb.email().delete_domain(&who, &id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found())
    }
}
