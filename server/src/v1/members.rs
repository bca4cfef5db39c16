//! The project's members over REST, as the portal's Members page manages them:
//! `GET /v1/members` lists them, `POST /v1/members {"email", "password", "role"}` adds a new
//! person (a password they sign in with; role admin or member), `DELETE /v1/members/{id}`
//! removes one and with them every key, grant, proxy token and connection they held here.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use workbench_core::auth::{Member, Role};

use super::body::{invalid_request, object_as, unprocessable};
use super::JsonBody;
use crate::api_auth::ApiCaller;
use crate::api_error::ApiError;
use crate::state::AppState;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NewMember {
    email: String,
    password: String,
    role: String,
}

fn member(m: &Member) -> Value {
    json!({
        "object": "member",
        "id": m.user_id,
        "email": m.email,
        "role": m.role,
        "joined_at": m.joined_at,
    })
}

pub async fn list(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
) -> Result<Json<Value>, ApiError> {
    let members = state.wb.accounts().members(&who).await?;
    let data: Vec<Value> = members.iter().map(member).collect();
    Ok(Json(json!({ "object": "list", "data": data })))
}

pub async fn create(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    JsonBody(body): JsonBody,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let input: NewMember = object_as(body, r#"{"email", "password", "role": "admin"|"member"}"#)?;
    let role =
        Role::parse(&input.role).ok_or_else(|| invalid_request("role must be admin or member"))?;
    let added = state
        .wb
        .accounts()
        .add_member(&who, &input.email, &input.password, role)
        .await
        .map_err(unprocessable)?;
    Ok((StatusCode::CREATED, Json(member(&added))))
}

pub async fn delete(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state
        .wb
        .remove_member(&who, &id)
        .await
        .map_err(unprocessable)?;
    Ok(StatusCode::NO_CONTENT)
}
