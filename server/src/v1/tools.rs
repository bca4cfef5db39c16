//! The catalog and invocation endpoints of seed 004: `GET /v1/tools`, `GET /v1/tools/{name}`,
//! `POST /v1/tools/invoke` and `GET /v1/tools/calls/{id}`.

use std::collections::BTreeMap;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use workbench_core::args::Arg;
use workbench_core::catalog::Tool;
use workbench_core::engine::{
    Begin, CallOptions, Idempotency, Invocation, Surface, ToolError, MAX_TIMEOUT,
};
use workbench_core::metering::Latencies;
use workbench_core::model::calls::CallStatus;

use crate::api_auth::ApiCaller;
use crate::api_error::ApiError;
use crate::state::AppState;

/// A catalog entry as seed 004 shows it (plus integration, status and, for a tool that cannot
/// run, `unavailable_reason`).
pub fn tool_json(t: &Tool, latency: &Latencies) -> Value {
    let mut m = Map::new();
    m.insert("name".into(), json!(t.spec.name.as_str()));
    m.insert("source".into(), json!(t.spec.source.to_string()));
    m.insert("integration".into(), json!(t.spec.integration));
    m.insert("description".into(), json!(t.spec.description));
    m.insert("input_schema".into(), t.spec.input_schema.clone());
    if let Some(o) = &t.spec.output_schema {
        m.insert("output_schema".into(), o.clone());
    }
    m.insert("side_effects".into(), json!(t.spec.side_effects.as_str()));
    m.insert(
        "avg_latency_ms".into(),
        json!(latency.get(t.name(), t.spec.source.is_shared())),
    );
    let availability = t.availability();
    m.insert("status".into(), json!(availability.status()));
    if let Some(reason) = availability.reason() {
        m.insert("unavailable_reason".into(), json!(reason));
    }
    Value::Object(m)
}

/// `GET /v1/tools`: the catalog, or with `q` the search_tools ranking (best first, `limit`
/// 1–50, default 10), each entry with its `score`, and `no_match` (D27).
#[derive(Deserialize)]
pub struct ListQuery {
    q: Option<String>,
    limit: Option<String>,
}

pub async fn list(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    axum::extract::Query(query): axum::extract::Query<ListQuery>,
) -> Result<Json<Value>, ApiError> {
    let latency = state.wb.metering().latencies(&who).await?;
    let engine = state.wb.engine();
    let Some(q) = query.q else {
        if query.limit.is_some() {
            return Err(workbench_core::Error::invalid("limit is only taken with q").into());
        }
        let data: Vec<Value> = engine
            .tools(&who)
            .await?
            .iter()
            .map(|t| tool_json(t, &latency))
            .collect();
        return Ok(Json(json!({ "object": "list", "data": data })));
    };
    let limit = match query.limit.as_deref() {
        None => workbench_core::engine::SEARCH_LIMIT_DEFAULT,
        Some(l) => l.parse::<usize>().map_err(|_| {
            workbench_core::Error::invalid("limit must be an integer between 1 and 50")
        })?,
    };
    let found = engine.matches(&who, &q, limit).await?;
    let data: Vec<Value> = found
        .tools
        .iter()
        .map(|(t, score)| {
            let mut v = tool_json(t, &latency);
            v["score"] = json!(score);
            v
        })
        .collect();
    let mut out = json!({ "object": "list", "data": data, "no_match": found.no_match });
    if let Some(hint) = found.hint() {
        out["hint"] = json!(hint);
    }
    Ok(Json(out))
}

pub async fn get_one(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let tool = state
        .wb
        .engine()
        .tool(&who, &name)
        .await?
        .ok_or_else(|| tool_not_found(&name))?;
    let latency = state.wb.metering().latencies(&who).await?;
    Ok(Json(tool_json(&tool, &latency)))
}

fn tool_not_found(name: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "tool_not_found",
        format!("tool not found: {name}"),
    )
}

struct InvokeRequest {
    tool: String,
    arguments: Value,
    end_user_id: Option<String>,
    timeout: Duration,
}

/// `POST /v1/tools/invoke`'s body as sent; `parse_invoke` checks it.
#[derive(Deserialize)]
struct InvokeBody {
    #[serde(default)]
    tool: Option<Arg<String>>,
    #[serde(default)]
    arguments: Option<Arg<Map<String, Value>>>,
    #[serde(default)]
    end_user_id: Option<Arg<String>>,
    #[serde(default)]
    timeout_ms: Option<Arg<u64>>,
    #[serde(flatten)]
    unknown: BTreeMap<String, Value>,
}

fn parse_invoke(body: Value) -> Result<InvokeRequest, ApiError> {
    let body: InvokeBody = serde_json::from_value(body)
        .map_err(|_| ApiError::bad_request("expected a JSON object { tool, arguments }"))?;
    if let Some(key) = body.unknown.keys().next() {
        return Err(ApiError::bad_request(format!(
            "unknown field {key:?}; expected tool, arguments, end_user_id, timeout_ms"
        )));
    }
    let tool = body
        .tool
        .and_then(Arg::ok)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| ApiError::bad_request("tool must be a tool name"))?;
    let arguments = match body.arguments {
        None => Map::new(),
        Some(a) => a
            .ok()
            .ok_or_else(|| ApiError::bad_request("arguments must be an object"))?,
    };
    let end_user_id = match body.end_user_id {
        None => None,
        Some(Arg::Ok(s)) if !s.is_empty() && s.len() <= 256 && !s.chars().any(char::is_control) => {
            Some(s)
        }
        Some(_) => {
            return Err(ApiError::bad_request(
                "end_user_id must be a string of 1 to 256 printable characters",
            ))
        }
    };
    let max = MAX_TIMEOUT.as_millis() as u64;
    let timeout = match body.timeout_ms {
        None => workbench_core::engine::DEFAULT_TIMEOUT,
        Some(v) => match v.ok() {
            Some(ms) if (1..=max).contains(&ms) => Duration::from_millis(ms),
            _ => {
                return Err(ApiError::bad_request(format!(
                    "timeout_ms must be an integer from 1 to {max}"
                )))
            }
        },
    };
    Ok(InvokeRequest {
        tool,
        arguments: Value::Object(arguments),
        end_user_id,
        timeout,
    })
}

/// Runs one invoke request and renders the response: status and the exact body bytes.
async fn run_invoke(
    state: &AppState,
    who: &workbench_core::auth::Principal,
    body: Value,
    idempotency_key: Option<&str>,
) -> (StatusCode, String) {
    let req = match parse_invoke(body) {
        Ok(r) => r,
        Err(e) => return (e.status, e.body().to_string()),
    };
    let opts = CallOptions {
        timeout: req.timeout,
        end_user_id: req.end_user_id,
        surface: Surface::Rest,
        rest_result_max_bytes: Some(state.config.rest_result_max_bytes),
        idempotency_key: idempotency_key.map(str::to_owned),
        tool_set: None,
        // REST cannot be asked anything back.
        client: None,
    };
    let outcome = state
        .wb
        .engine()
        .run(
            who,
            Invocation {
                tool: req.tool,
                args: req.arguments,
            },
            &opts,
        )
        .await;
    let usage = json!({ "tool_call": 1, "tool_call_ms": outcome.duration_ms });
    match outcome.result {
        Ok(result) => (
            StatusCode::OK,
            json!({
                "id": outcome.id,
                "object": "tool_call",
                "tool": outcome.tool,
                "status": CallStatus::Succeeded,
                "result": result,
                "duration_ms": outcome.duration_ms,
                "usage": usage,
            })
            .to_string(),
        ),
        // Held for a person's confirmation: 202 with the seed's shape (not an error).
        Err(ToolError::AwaitingConfirmation {
            confirmation_id,
            expires_at,
            url,
        }) => (
            StatusCode::ACCEPTED,
            json!({
                "id": outcome.id,
                "object": "tool_call",
                "tool": outcome.tool,
                "status": CallStatus::AwaitingConfirmation,
                "confirmation_id": confirmation_id,
                "expires_at": expires_at,
                "url": url,
            })
            .to_string(),
        ),
        Err(e) => {
            let e = ApiError::from(e).with_meta_field("tool_call_id", json!(outcome.id));
            (e.status, e.body().to_string())
        }
    }
}

fn json_response(status: StatusCode, body: String, replayed: bool) -> Response {
    // A rate-limited call says when to come back, in the header too.
    let retry_after = (status == StatusCode::TOO_MANY_REQUESTS)
        .then(|| {
            serde_json::from_str::<Value>(&body)
                .ok()
                .and_then(|v| v["error"]["meta"]["retry_after_s"].as_u64())
        })
        .flatten();
    let mut res = (
        status,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response();
    if let Some(s) = retry_after {
        res.headers_mut().insert(
            axum::http::header::RETRY_AFTER,
            axum::http::HeaderValue::from(s),
        );
    }
    if replayed {
        res.headers_mut().insert(
            "idempotent-replayed",
            axum::http::HeaderValue::from_static("true"),
        );
    }
    res
}

/// `POST /v1/tools/invoke`, with `Idempotency-Key` (D13): the first request with a key runs
/// and its response is stored; the same key and body replay it byte for byte.
pub async fn invoke(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    req: axum::extract::Request,
) -> Result<Response, ApiError> {
    let idempotency_key = req
        .headers()
        .get("idempotency-key")
        .map(|v| v.to_str().map(str::to_owned));
    let (parts, body) = req.into_parts();
    let bytes = super::body::read_json_bytes(&parts.headers, body).await?;
    let value: Value = super::body::parse_json(&bytes)?;
    let Some(key) = idempotency_key else {
        let (status, body) = run_invoke(&state, &who, value, None).await;
        return Ok(json_response(status, body, false));
    };
    let key = key.map_err(|_| {
        ApiError::bad_request("invalid Idempotency-Key; use visible ASCII characters")
    })?;
    let api_key_id = who
        .api_key_id
        .clone()
        .ok_or_else(|| ApiError::unauthorized("an api key is required"))?;
    let hash = Idempotency::request_hash("POST /v1/tools/invoke", &bytes);
    match state.wb.idempotency().begin(&api_key_id, &key, &hash).await? {
        Begin::Proceed => {
            let _lease = state.wb.idempotency().hold(&api_key_id, &key);
            let (status, body) = run_invoke(&state, &who, value, Some(&key)).await;
            state.wb.idempotency().complete(&api_key_id, &key, status.as_u16(), &body).await?;
            Ok(json_response(status, body, false))
        }
        Begin::Replay { status, body } => {
            // A held call's 202 is replayed as the call stands now, once it was decided.
            if status == 202 {
                let id = serde_json::from_str::<Value>(&body).ok().and_then(|v| v["id"].as_str().map(str::to_owned));
                if let Some(call) = match id {
                    Some(id) => state.wb.engine().get_call(&who, &id).await?,
                    None => None,
                } {
                    if call.status != CallStatus::AwaitingConfirmation {
                        return Ok(json_response(StatusCode::OK, call_json(call).to_string(), true));
                    }
                }
            }
            Ok(json_response(StatusCode::from_u16(status).unwrap_or(StatusCode::OK), body, true))
        }
        Begin::InFlight => Err(ApiError::new(
            StatusCode::CONFLICT,
            "idempotency_key_in_use",
            "a request with this Idempotency-Key is still running; retry after it finishes",
        )),
        Begin::Interrupted => Err(ApiError::new(
            StatusCode::CONFLICT,
            "idempotency_key_interrupted",
            "the request with this Idempotency-Key was interrupted before it finished (the instance running it stopped); it may have taken effect, so it is not run again: check its effect, then use a new key",
        )),
        Begin::Reused => Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "idempotency_key_reused",
            "this Idempotency-Key was used with a different request body; use a new key",
        )),
    }
}

pub async fn get_call(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let call = state
        .wb
        .engine()
        .get_call(&who, &id)
        .await?
        .ok_or_else(ApiError::not_found)?;
    Ok(Json(call_json(call)))
}

/// A recorded call as `GET /v1/tools/calls/{id}` shows it.
pub(super) fn call_json(call: workbench_core::engine::ToolCallView) -> Value {
    let mut v = json!({
        "id": call.id,
        "object": "tool_call",
        "tool": call.tool,
        "status": call.status,
        "duration_ms": call.duration_ms,
        "created_at": call.created_at,
        "usage": { "tool_call": 1, "tool_call_ms": call.duration_ms },
    });
    if let Some(r) = call.result {
        v["result"] = r;
    }
    if let Some(e) = call.error {
        v["error"] = e;
    }
    if let Some(u) = call.end_user_id {
        v["end_user_id"] = json!(u);
    }
    v
}
