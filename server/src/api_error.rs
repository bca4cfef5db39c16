//! REST error responses: `{ "error": { "code", "message", "meta" } }` (seed 004 / D4), with one
//! exhaustive mapping from the domain error to status and code.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use workbench_core::engine::ToolError;
use workbench_core::Error;

/// The Retry-After a caller gets while the database is unavailable (restarting, unreachable).
pub const DB_RETRY_AFTER_SECS: u64 = 5;

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub meta: Value,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError { status, code, message: message.into(), meta: json!({}) }
    }

    pub fn with_meta(mut self, meta: Value) -> Self {
        self.meta = meta;
        self
    }

    /// Adds one field to `meta`.
    pub fn with_meta_field(mut self, key: &str, value: Value) -> Self {
        if let Value::Object(m) = &mut self.meta {
            m.insert(key.to_owned(), value);
        }
        self
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    pub fn not_found() -> Self {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", "not found")
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    /// The JSON body this error renders to.
    pub fn body(&self) -> serde_json::Value {
        json!({ "error": { "code": self.code, "message": self.message, "meta": self.meta } })
    }
}

impl From<ToolError> for ApiError {
    /// A tool execution's failure (seed 004): its status, code, message and details as meta.
    fn from(e: ToolError) -> Self {
        let (status, code) = e.rest_status_and_code();
        ApiError {
            status: StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY),
            code,
            message: e.message(),
            meta: Value::Object(e.details()),
        }
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        match e {
            Error::NotFound => ApiError::not_found(),
            Error::Invalid(m) => ApiError::bad_request(m),
            Error::Unauthorized(m) => ApiError::unauthorized(m),
            Error::Forbidden(m) => ApiError::new(StatusCode::FORBIDDEN, "forbidden", m),
            Error::Conflict(m) => ApiError::new(StatusCode::CONFLICT, "conflict", m),
            Error::Throttled { retry_after_secs } => ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limited",
                Error::Throttled { retry_after_secs }.to_string(),
            )
            .with_meta(json!({ "retry_after": retry_after_secs })),
            Error::Db(e) if e.unavailable_reason().is_some() => {
                tracing::error!(error = %e, "database unavailable");
                let reason = e.unavailable_reason().unwrap_or_default();
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", format!("service unavailable: {reason}; try again shortly"))
                    .with_meta(json!({ "retry_after": DB_RETRY_AFTER_SECS }))
            }
            Error::Db(e) => {
                tracing::error!(error = %e, "database error");
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal_error", "internal error")
            }
            Error::Internal(detail) => {
                tracing::error!(%detail, "internal error");
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal_error", "internal error")
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut res = (self.status, Json(self.body())).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            res.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if let Some(secs) = self.meta.get("retry_after").and_then(Value::as_u64) {
            if let Ok(v) = HeaderValue::from_str(&secs.to_string()) {
                res.headers_mut().insert(header::RETRY_AFTER, v);
            }
        }
        res
    }
}
