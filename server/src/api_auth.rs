//! Bearer API key authentication as an axum extractor, shared by /mcp and /v1: a missing,
//! malformed, unknown or revoked key is a 401 with the JSON error body.

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use workbench_core::auth::Principal;

use crate::api_error::ApiError;
use crate::state::AppState;

/// The caller behind `Authorization: Bearer <api key>`.
#[derive(Debug, Clone)]
pub struct ApiCaller(pub Principal);

/// The token of an `Authorization: Bearer …` header, if well-formed.
pub fn bearer_token(headers: &axum::http::HeaderMap) -> Option<&str> {
    let value = headers.get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| token.trim())
        .filter(|t| !t.is_empty())
}

impl FromRequestParts<AppState> for ApiCaller {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        if let Some(caller) = parts.extensions.get::<ApiCaller>() {
            return Ok(caller.clone());
        }
        let token = bearer_token(&parts.headers).ok_or_else(|| {
            ApiError::unauthorized("missing api key; send Authorization: Bearer <api key>")
        })?;
        let principal = state.wb.accounts().authenticate_api_key(token).await?;
        let caller = ApiCaller(principal);
        parts.extensions.insert(caller.clone());
        Ok(caller)
    }
}
