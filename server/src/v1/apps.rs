//! Custom apps over REST: `POST /v1/apps` (a definition in the plugin format), `GET /v1/apps`,
//! `DELETE /v1/apps/{id}`, and `POST /v1/apps/import` (an OpenAPI document → a definition to
//! review). Creating, deleting and importing need an admin's key.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use serde_json::{json, Value};

use super::JsonBody;
use crate::api_auth::ApiCaller;
use crate::api_error::ApiError;
use crate::state::AppState;
use workbench_core::integrations::openapi::{self, Filter, MAX_DOCUMENT_BYTES};
use workbench_core::plugins::{DocumentSource, ImportRequest};

pub async fn create(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    JsonBody(body): JsonBody,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let app = state.wb.apps().create(&who, &body).await?;
    Ok((StatusCode::CREATED, Json(json!(app))))
}

pub async fn list(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
) -> Result<Json<Value>, ApiError> {
    let apps = state.wb.apps().list(&who).await?;
    Ok(Json(json!({ "object": "list", "data": apps })))
}

pub async fn delete(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.wb.apps().delete(&who, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Largest `POST /v1/apps/import` body: a 5 MiB document with room for JSON escaping.
const MAX_IMPORT_BODY_BYTES: usize = 8 * 1024 * 1024;

/// `POST /v1/apps/import`: an OpenAPI 3.0/3.1 document (`document`: JSON or YAML text, or the
/// document as JSON; or `url`) with `name`, optional `display_name`, `base_url`, `auth` and
/// `filter` `{tags, operation_ids, methods}` → the app definition to review (nothing stored).
/// A document over 5 MiB, or one that expands past 8 MiB (YAML aliases, `$ref` inlining), is 413.
pub async fn import(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    let too_large = || {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("an OpenAPI document may be at most {MAX_DOCUMENT_BYTES} bytes (5 MiB)"),
        )
    };
    let bytes =
        super::body::read_json_bytes_up_to(&headers, body, MAX_IMPORT_BODY_BYTES, too_large)
            .await?;
    let req: ImportBody = serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::bad_request(format!("malformed import request: {e}")))?;
    let source = match (req.document, req.url) {
        (Some(Value::String(text)), None) if text.len() > MAX_DOCUMENT_BYTES => {
            return Err(too_large())
        }
        (Some(Value::String(text)), None) => DocumentSource::Text(text),
        (Some(doc @ Value::Object(_)), None) => DocumentSource::Json(doc),
        (Some(_), None) => {
            return Err(ApiError::bad_request(
                "document must be the OpenAPI document as text (JSON or YAML) or as a JSON object",
            ))
        }
        (None, Some(url)) => DocumentSource::Url(url),
        (Some(_), Some(_)) => return Err(ApiError::bad_request("give document or url, not both")),
        (None, None) => {
            return Err(ApiError::bad_request(
                "give the OpenAPI document as document (text or JSON) or its url",
            ))
        }
    };
    let preview = state
        .wb
        .apps()
        .import(
            &who,
            ImportRequest {
                name: req.name,
                display_name: req.display_name,
                base_url: req.base_url,
                auth: req.auth,
                filter: req.filter.unwrap_or_default(),
                source,
            },
        )
        .await
        .map_err(|e| {
            if openapi::is_too_large(&e) {
                ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "payload_too_large",
                    e.to_string(),
                )
            } else {
                e.into()
            }
        })?;
    Ok(Json(json!(preview)))
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ImportBody {
    name: String,
    #[serde(default)]
    display_name: Option<String>,
    #[serde(default)]
    base_url: Option<String>,
    #[serde(default)]
    auth: Option<Value>,
    #[serde(default)]
    filter: Option<Filter>,
    #[serde(default)]
    document: Option<Value>,
    #[serde(default)]
    url: Option<String>,
}
