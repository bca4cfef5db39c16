//! `/metrics`: the Prometheus text exposition of `Workbench::metrics_text`, off unless the
//! operator sets `--metrics-token`, and then only for requests bearing that token (compared in
//! constant time). Off, it is an unknown path like any other.

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::api_error::ApiError;
use crate::state::AppState;

pub async fn metrics(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let Some(token) = state.config.metrics_token.as_deref() else {
        return ApiError::not_found().into_response();
    };
    let given = crate::api_auth::bearer_token(&headers).unwrap_or_default();
    if !workbench_core::crypto::ct_eq(given.as_bytes(), token.as_bytes()) {
        let mut res = ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "/metrics needs the operator's metrics token as a bearer token",
        )
        .into_response();
        res.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            axum::http::HeaderValue::from_static("Bearer"),
        );
        return res;
    }
    match state.wb.metrics_text().await {
        Ok(text) => (
            [(
                header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8",
            )],
            text,
        )
            .into_response(),
        Err(e) => ApiError::from(e).into_response(),
    }
}
