//! A JSON body extractor whose rejections (wrong content type, malformed or oversized JSON)
//! answer in the API's error shape instead of axum's plain text.

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use serde_json::Value;

use crate::api_error::ApiError;

pub struct JsonBody(pub Value);

impl<S: Send + Sync> FromRequest<S> for JsonBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<Value>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(JsonBody(v)),
            Err(JsonRejection::MissingJsonContentType(_)) => Err(ApiError::bad_request(
                "expected a JSON body; send Content-Type: application/json",
            )),
            Err(JsonRejection::JsonSyntaxError(e)) => Err(ApiError::bad_request(format!(
                "malformed JSON: {}",
                e.body_text()
            ))),
            Err(JsonRejection::JsonDataError(e)) => Err(ApiError::bad_request(format!(
                "unexpected JSON: {}",
                e.body_text()
            ))),
            Err(JsonRejection::BytesRejection(e))
                if e.status() == StatusCode::PAYLOAD_TOO_LARGE =>
            {
                Err(ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "payload_too_large",
                    format!("request body larger than {} bytes", super::MAX_BODY_BYTES),
                ))
            }
            Err(e) => Err(ApiError::bad_request(format!(
                "cannot read the request body: {}",
                e.body_text()
            ))),
        }
    }
}

/// Reads a JSON request body (checking the content type and the size limit) as raw bytes, for
/// handlers that need the exact bytes (idempotency hashes them).
pub async fn read_json_bytes(
    headers: &axum::http::HeaderMap,
    body: axum::body::Body,
) -> Result<axum::body::Bytes, ApiError> {
    read_json_bytes_up_to(headers, body, super::MAX_BODY_BYTES, || {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("request body larger than {} bytes", super::MAX_BODY_BYTES),
        )
    })
    .await
}

/// `read_json_bytes` with a route's own limit and refusal (a larger import document).
pub async fn read_json_bytes_up_to(
    headers: &axum::http::HeaderMap,
    body: axum::body::Body,
    limit: usize,
    too_large: impl FnOnce() -> ApiError,
) -> Result<axum::body::Bytes, ApiError> {
    let is_json = headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| {
            let v = v.trim().to_ascii_lowercase();
            v == "application/json" || (v.starts_with("application/") && v.ends_with("+json"))
        })
        .unwrap_or(false);
    if !is_json {
        return Err(ApiError::bad_request(
            "expected a JSON body; send Content-Type: application/json",
        ));
    }
    axum::body::to_bytes(body, limit)
        .await
        .map_err(|_| too_large())
}

pub fn parse_json(bytes: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(bytes).map_err(|e| ApiError::bad_request(format!("malformed JSON: {e}")))
}

/// A JSON object body read as `T`. Anything else is refused, even an array serde would read as
/// a struct's fields in order: 422 `invalid_request` saying what was `expected`.
pub fn object_as<T: serde::de::DeserializeOwned>(
    body: Value,
    expected: &str,
) -> Result<T, ApiError> {
    let why = if body.is_object() {
        match serde_json::from_value(body) {
            Ok(v) => return Ok(v),
            Err(e) => e.to_string(),
        }
    } else {
        "the body is not a JSON object".to_owned()
    };
    Err(invalid_request(format!("expected {expected}: {why}")))
}

/// 422 `invalid_request`: the body parsed but says something workbench cannot take.
pub fn invalid_request(message: impl Into<String>) -> ApiError {
    ApiError::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "invalid_request",
        message.into(),
    )
}

/// A domain error as the API answers it, with `Invalid` as 422 `invalid_request` (seed 004:
/// registration and rule problems are 422, not 400).
pub fn unprocessable(e: workbench_core::Error) -> ApiError {
    match e {
        workbench_core::Error::Invalid(m) => invalid_request(m),
        other => other.into(),
    }
}
