//! `GET /v1/usage`: metered usage of the caller's project per day, key, tool and meter (D17).

use axum::extract::{Query, State};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::api_auth::ApiCaller;
use crate::api_error::ApiError;
use crate::state::AppState;
use workbench_core::metering::Meter;

#[derive(Deserialize)]
pub struct UsageQuery {
    from: Option<String>,
    to: Option<String>,
}

fn valid_day(s: &str) -> bool {
    s.len() == 10 && time::Date::parse(s, time::macros::format_description!("[year]-[month]-[day]")).is_ok()
}

pub async fn usage(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    Query(q): Query<UsageQuery>,
) -> Result<Json<Value>, ApiError> {
    let today = workbench_core::clock::rfc3339(state.wb.clock().now_ms())[..10].to_owned();
    let from = q.from.unwrap_or_else(|| format!("{}-01", &today[..7]));
    let to = q.to.unwrap_or(today);
    if !valid_day(&from) || !valid_day(&to) {
        return Err(ApiError::bad_request("from and to must be days as YYYY-MM-DD"));
    }
    let rows = state.wb.metering().usage(&who, &from, &to).await?;
    let data: Vec<Value> = rows
        .into_iter()
        .map(|r| {
            let mut v = json!({ "day": r.day, "api_key_id": r.api_key_id, "tool": r.tool, "meter": r.meter, "value": r.value });
            if r.meter == Meter::EgressBytes {
                v["egress_gb"] = json!(r.value as f64 / 1e9);
            }
            v
        })
        .collect();
    Ok(Json(json!({ "object": "list", "from": from, "to": to, "data": data })))
}
