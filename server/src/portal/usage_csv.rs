//! `GET /usage.csv?chart=calls|latency|egress|tools|keys&from&to`: the table behind each chart of
//! the Usage page, as CSV, for the signed-in person's project.

use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use tower_sessions::Session;

use crate::api_error::ApiError;
use crate::state::AppState;

#[derive(Deserialize)]
pub struct CsvQuery {
    chart: String,
    from: Option<String>,
    to: Option<String>,
}

/// A CSV field: quoted when it holds a comma, quote or line break; a leading `=`, `+`, `-` or
/// `@` is prefixed with `'` so a spreadsheet never runs it as a formula.
fn field(s: &str) -> String {
    let s = if s.starts_with(['=', '+', '-', '@']) { format!("'{s}") } else { s.to_owned() };
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s
    }
}

pub async fn csv(State(state): State<AppState>, session: Session, Query(q): Query<CsvQuery>) -> Result<Response, ApiError> {
    let p = super::json::signed_in(&state, &session).await?;
    let today = workbench_core::clock::rfc3339(state.wb.clock().now_ms())[..10].to_owned();
    let from = q.from.filter(|s| !s.is_empty()).unwrap_or_else(|| format!("{}-01", &today[..7]));
    let to = q.to.filter(|s| !s.is_empty()).unwrap_or(today);
    let r = state.wb.metering().report(&p, &from, &to).await?;
    let mut out = String::new();
    let mut line = |cells: &[String]| {
        out.push_str(&cells.iter().map(|c| field(c)).collect::<Vec<_>>().join(","));
        out.push_str("\r\n");
    };
    match q.chart.as_str() {
        "calls" => {
            line(&["day".into(), "succeeded".into(), "failed".into(), "denied".into(), "other".into()]);
            for d in &r.days {
                line(&[d.day.clone(), d.succeeded.to_string(), d.failed.to_string(), d.denied.to_string(), d.other.to_string()]);
            }
        }
        "latency" => {
            line(&["tool".into(), "calls".into(), "p50_ms".into(), "p95_ms".into()]);
            for l in &r.latency {
                line(&[l.tool.clone(), l.calls.to_string(), l.p50_ms.to_string(), l.p95_ms.to_string()]);
            }
        }
        "egress" => {
            line(&["day".into(), "egress_bytes".into(), "egress_gb".into()]);
            for (day, bytes) in &r.egress {
                line(&[day.clone(), bytes.to_string(), format!("{:.9}", *bytes as f64 / 1e9)]);
            }
        }
        "tools" | "keys" => {
            let (name, rows) = if q.chart == "tools" { ("tool", &r.top_tools) } else { ("api_key_id", &r.top_keys) };
            line(&[name.into(), "tool_call".into(), "tool_call_ms".into(), "egress_bytes".into()]);
            for g in rows {
                line(&[g.group.clone(), g.tool_call.to_string(), g.tool_call_ms.to_string(), g.egress_bytes.to_string()]);
            }
        }
        _ => return Err(ApiError::bad_request("chart must be calls, latency, egress, tools or keys")),
    }
    let disposition = format!("attachment; filename=\"usage-{}-{from}-{to}.csv\"", q.chart);
    Ok((StatusCode::OK, [(header::CONTENT_TYPE, "text/csv; charset=utf-8".to_owned()), (header::CONTENT_DISPOSITION, disposition)], out).into_response())
}

#[cfg(test)]
mod tests {
    use super::field;

    #[test]
    fn csv_fields_are_quoted_and_never_formulas() {
        assert_eq!(field("storage.get"), "storage.get");
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(field("=HYPERLINK(1)"), "'=HYPERLINK(1)");
        assert_eq!(field("-1"), "'-1");
    }
}
