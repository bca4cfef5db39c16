//! `GET /usage.csv?chart=calls|latency|egress|tools|keys&from&to`: the table behind each chart of
//! the Usage page, as CSV, for the signed-in person's project.

use axum::extract::{Query, State};
use axum::response::Response;
use serde::Deserialize;
use workbench_core::model::calls::CallStatus;

use super::csv::Csv;
use crate::api_auth::ApiCaller;
use crate::api_error::ApiError;
use crate::state::AppState;

#[derive(Deserialize)]
pub struct CsvQuery {
    chart: String,
    from: Option<String>,
    to: Option<String>,
}

pub async fn csv(
    State(state): State<AppState>,
    ApiCaller(p): ApiCaller,
    Query(q): Query<CsvQuery>,
) -> Result<Response, ApiError> {
    let (from, to) = state.wb.metering().range_or_this_month(
        q.from.filter(|s| !s.is_empty()),
        q.to.filter(|s| !s.is_empty()),
    );
    let r = state.wb.metering().report(&p, &from, &to).await?;
    let mut csv = Csv::default();
    let mut line = |cells: &[String]| csv.line(cells);
    match q.chart.as_str() {
        "calls" => {
            line(&[
                "day".into(),
                CallStatus::Succeeded.to_string(),
                CallStatus::Failed.to_string(),
                CallStatus::Denied.to_string(),
                "other".into(),
            ]);
            for d in &r.days {
                line(&[
                    d.day.clone(),
                    d.succeeded.to_string(),
                    d.failed.to_string(),
                    d.denied.to_string(),
                    d.other.to_string(),
                ]);
            }
        }
        "latency" => {
            line(&[
                "tool".into(),
                "calls".into(),
                "p50_ms".into(),
                "p95_ms".into(),
            ]);
            for l in &r.latency {
                line(&[
                    l.tool.clone(),
                    l.calls.to_string(),
                    l.p50_ms.to_string(),
                    l.p95_ms.to_string(),
                ]);
            }
        }
        "egress" => {
            line(&["day".into(), "egress_bytes".into(), "egress_gb".into()]);
            for (day, bytes) in &r.egress {
                line(&[
                    day.clone(),
                    bytes.to_string(),
                    format!("{:.9}", *bytes as f64 / 1e9),
                ]);
            }
        }
        "tools" | "keys" => {
            let (name, rows) = if q.chart == "tools" {
                ("tool", &r.top_tools)
            } else {
                ("api_key_id", &r.top_keys)
            };
            line(&[
                name.into(),
                "tool_call".into(),
                "tool_call_ms".into(),
                "egress_bytes".into(),
            ]);
            for g in rows {
                line(&[
                    g.group.clone(),
                    g.tool_call.to_string(),
                    g.tool_call_ms.to_string(),
                    g.egress_bytes.to_string(),
                ]);
            }
        }
        _ => {
            return Err(ApiError::bad_request(
                "chart must be calls, latency, egress, tools or keys",
            ))
        }
    }
    Ok(csv.download(&format!("usage-{}-{from}-{to}.csv", q.chart)))
}
