//! `GET /v1/config` and `POST /v1/config/apply`: the project's configuration as a file, for
//! `workbench config export|apply` and for automation (core's `config_file` does the work).

use axum::body::Body;
use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use workbench_core::config_file::{self, ConfigFile, MAX_FILE_BYTES};

use super::body::{invalid_request, unprocessable};
use crate::api_auth::ApiCaller;
use crate::api_error::ApiError;
use crate::state::AppState;

/// The media type of the YAML file.
pub const YAML: &str = "application/yaml";

/// The query's parameters, each named in `known`; anything else is refused in the API's error
/// shape.
fn params(raw: Option<String>, known: &[&str]) -> Result<Vec<(String, String)>, ApiError> {
    let pairs: Vec<(String, String)> =
        url::form_urlencoded::parse(raw.unwrap_or_default().as_bytes())
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
    if let Some((k, _)) = pairs.iter().find(|(k, _)| !known.contains(&k.as_str())) {
        return Err(ApiError::bad_request(format!(
            "unknown query parameter {k:?}; this endpoint takes {}",
            known.join(", ")
        )));
    }
    Ok(pairs)
}

fn param<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .rev()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

pub async fn export(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let pairs = params(query, &["format"])?;
    let format = param(&pairs, "format").unwrap_or("yaml");
    if !matches!(format, "yaml" | "json") {
        return Err(ApiError::bad_request(format!(
            "format must be yaml or json, not {format:?}"
        )));
    }
    let file = config_file::export(&state.wb, &who).await?;
    match format {
        "yaml" => Ok((
            [(header::CONTENT_TYPE, format!("{YAML}; charset=utf-8"))],
            file.to_yaml()?,
        )
            .into_response()),
        _ => Ok(Json(file).into_response()),
    }
}

pub async fn apply(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Result<(StatusCode, Json<config_file::Outcome>), ApiError> {
    let pairs = params(query, &["dry_run"])?;
    let dry_run = match param(&pairs, "dry_run") {
        None | Some("false") | Some("0") => false,
        Some("true") | Some("1") | Some("") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "dry_run must be true or false, not {other:?}"
            )))
        }
    };
    let kind = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase())
        .unwrap_or_default();
    if !matches!(
        kind.as_str(),
        "application/yaml" | "application/x-yaml" | "text/yaml" | "application/json"
    ) {
        return Err(ApiError::bad_request(
            "send the file as Content-Type: application/yaml (or application/json)",
        ));
    }
    let bytes = axum::body::to_bytes(body, MAX_FILE_BYTES)
        .await
        .map_err(|_| {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                format!("a configuration file may be at most {MAX_FILE_BYTES} bytes"),
            )
        })?;
    let text = std::str::from_utf8(&bytes)
        .map_err(|_| ApiError::bad_request("the file is not UTF-8 text"))?;
    let file = ConfigFile::parse(text).map_err(|e| match e {
        workbench_core::Error::Invalid(m) => invalid_request(m),
        other => other.into(),
    })?;
    let outcome = config_file::apply(&state.wb, &who, &file, dry_run)
        .await
        .map_err(unprocessable)?;
    Ok((StatusCode::OK, Json(outcome)))
}
