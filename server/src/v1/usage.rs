//! `GET /v1/usage`: metered usage of the caller's project per day, key, tool and meter (D17),
//! or summed by day, tool, key or integration (`group_by`). Egress is reported as the seed's
//! meter `egress_gb`, with `egress_bytes` beside it. `GET /v1/usage/calls`: calls per tool,
//! user, key or day with outcomes, limit refusals, error rate and latency percentiles.

use axum::extract::{Query, State};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::api_auth::ApiCaller;
use crate::api_error::ApiError;
use crate::state::AppState;
use workbench_core::metering::{integration_of, GroupBy, Meter, StatsBy};

#[derive(Deserialize)]
pub struct UsageQuery {
    from: Option<String>,
    to: Option<String>,
    group_by: Option<String>,
}

fn valid_day(s: &str) -> bool {
    s.len() == 10
        && time::Date::parse(s, time::macros::format_description!("[year]-[month]-[day]")).is_ok()
}

/// The asked range of days (this month so far by default), each a valid `YYYY-MM-DD`.
fn range(state: &AppState, q: &UsageQuery) -> Result<(String, String), ApiError> {
    let (from, to) = state
        .wb
        .metering()
        .range_or_this_month(q.from.clone(), q.to.clone());
    if !valid_day(&from) || !valid_day(&to) {
        return Err(ApiError::bad_request(
            "from and to must be days as YYYY-MM-DD",
        ));
    }
    Ok((from, to))
}

pub async fn usage(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    Query(q): Query<UsageQuery>,
) -> Result<Json<Value>, ApiError> {
    let (from, to) = range(&state, &q)?;
    if let Some(by) = q.group_by.as_deref().filter(|s| !s.is_empty()) {
        let by = GroupBy::parse(by).ok_or_else(|| {
            ApiError::bad_request("group_by must be day, tool, key or integration")
        })?;
        let snapshot = state.wb.engine().snapshot(&who);
        let integration = |tool: &str| {
            integration_of(tool, |t| {
                snapshot.get(t).map(|t| t.spec.integration.clone())
            })
        };
        let groups = state
            .wb
            .metering()
            .grouped(&who, &from, &to, by, integration)
            .await?;
        let data: Vec<Value> = groups
            .into_iter()
            .map(|g| {
                json!({
                    by.as_str(): g.group,
                    "tool_call": g.tool_call,
                    "tool_call_ms": g.tool_call_ms,
                    "egress_gb": g.egress_bytes as f64 / 1e9,
                    "egress_bytes": g.egress_bytes,
                })
            })
            .collect();
        return Ok(Json(
            json!({ "object": "list", "from": from, "to": to, "group_by": by.as_str(), "data": data }),
        ));
    }
    let rows = state.wb.metering().usage(&who, &from, &to).await?;
    let data: Vec<Value> = rows
        .into_iter()
        .map(|r| match r.meter {
            Meter::EgressBytes => json!({
                "day": r.day, "api_key_id": r.api_key_id, "tool": r.tool,
                "meter": "egress_gb", "value": r.value as f64 / 1e9, "egress_bytes": r.value,
            }),
            _ => json!({ "day": r.day, "api_key_id": r.api_key_id, "tool": r.tool, "meter": r.meter, "value": r.value }),
        })
        .collect();
    Ok(Json(
        json!({ "object": "list", "from": from, "to": to, "data": data }),
    ))
}

/// `GET /v1/usage/calls?from&to&group_by=tool|user|key|day` (tool by default).
pub async fn calls(
    State(state): State<AppState>,
    ApiCaller(who): ApiCaller,
    Query(q): Query<UsageQuery>,
) -> Result<Json<Value>, ApiError> {
    let (from, to) = range(&state, &q)?;
    let by = match q.group_by.as_deref().filter(|s| !s.is_empty()) {
        None => StatsBy::Tool,
        Some(s) => StatsBy::parse(s)
            .ok_or_else(|| ApiError::bad_request("group_by must be tool, user, key or day"))?,
    };
    let stats = state.wb.metering().call_stats(&who, &from, &to, by).await?;
    let data: Vec<Value> = stats
        .into_iter()
        .map(|s| {
            let mut v = serde_json::to_value(&s).unwrap_or(Value::Null);
            if let Some(m) = v.as_object_mut() {
                if let Some(g) = m.remove("group") {
                    m.insert(by.as_str().to_owned(), g);
                }
            }
            v
        })
        .collect();
    Ok(Json(
        json!({ "object": "list", "from": from, "to": to, "group_by": by.as_str(), "data": data }),
    ))
}
