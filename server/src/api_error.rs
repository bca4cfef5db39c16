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
        ApiError {
            status,
            code,
            message: message.into(),
            meta: json!({}),
        }
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
            Error::Db(e) => match e.unavailable_reason() {
                Some(reason) => {
                    tracing::error!(error = %e, "database unavailable");
                    ApiError::new(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "unavailable",
                        format!("service unavailable: {reason}; try again shortly"),
                    )
                    .with_meta(json!({ "retry_after": DB_RETRY_AFTER_SECS }))
                }
                None => {
                    tracing::error!(error = %e, "database error");
                    ApiError::new(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "internal_error",
                        "internal error",
                    )
                }
            },
            Error::Internal(detail) => {
                tracing::error!(%detail, "internal error");
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal_error",
                    "internal error",
                )
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

/// What a request whose handler panicked gets: the documented 500 `internal_error` shape
/// instead of a dropped connection (a client would see "server disconnected" and retry into the
/// same bug). The panic message goes to the log only, never to the caller.
pub fn panic_response(panic: Box<dyn std::any::Any + Send + 'static>) -> Response {
    let detail = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-text panic".to_owned());
    tracing::error!(%detail, "request handler panicked");
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal_error",
        "internal error",
    )
    .into_response()
}

/// The layer that turns a handler's panic into [`panic_response`].
pub fn catch_panics(
) -> tower_http::catch_panic::CatchPanicLayer<fn(Box<dyn std::any::Any + Send + 'static>) -> Response>
{
    tower_http::catch_panic::CatchPanicLayer::custom(panic_response as fn(_) -> Response)
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::routing::get;
    use axum::Router;
    use tower::ServiceExt;

    #[tokio::test]
    async fn a_panicking_handler_answers_the_internal_error_shape_without_its_message() {
        let app = Router::new()
            .route(
                "/boom",
                get(|| async {
                    if true {
                        panic!("secret-ish detail 42");
                    }
                    "unreachable"
                }),
            )
            .route("/fine", get(|| async { "ok" }))
            .layer(super::catch_panics());
        let res = app
            .clone()
            .oneshot(
                axum::http::Request::get("/boom")
                    .body(Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(res.status(), 500);
        let body = axum::body::to_bytes(res.into_body(), 1 << 16)
            .await
            .unwrap();
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(json["error"]["code"], "internal_error", "{json}");
        assert!(
            !String::from_utf8_lossy(&body).contains("42"),
            "the panic message stays in the log"
        );
        let res = app
            .oneshot(
                axum::http::Request::get("/fine")
                    .body(Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(
            res.status(),
            200,
            "the service keeps answering after a panic"
        );
    }
}
