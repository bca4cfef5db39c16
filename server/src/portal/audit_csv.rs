//! `GET /audit.csv?tool&status&key`: the audit log as the Audit page filters it (members: their
//! own rows), newest first, as CSV; at most `MAX_ROWS` rows.

use axum::extract::{Query, State};
use axum::response::Response;
use serde::Deserialize;
use workbench_core::audit::AuditQuery;

use super::csv::Csv;
use crate::api_auth::ApiCaller;
use crate::api_error::ApiError;
use crate::state::AppState;

/// Rows one export holds at most (narrow the filters for more).
pub const MAX_ROWS: usize = 10_000;

#[derive(Deserialize)]
pub struct Filters {
    tool: Option<String>,
    status: Option<String>,
    key: Option<String>,
}

pub async fn csv(
    State(state): State<AppState>,
    ApiCaller(p): ApiCaller,
    Query(f): Query<Filters>,
) -> Result<Response, ApiError> {
    let mut q = AuditQuery {
        tool: f.tool,
        tool_set: None,
        status: f.status,
        api_key_id: f.key,
        cursor: None,
    };
    let mut csv = Csv::default();
    csv.line(
        &[
            "at",
            "action",
            "tool",
            "status",
            "error_code",
            "duration_ms",
            "api_key_id",
            "user_id",
            "surface",
            "tool_call_id",
            "tool_set",
        ]
        .map(String::from),
    );
    let mut rows = 0;
    loop {
        let page = state.wb.audit().page(&p, &q).await?;
        for e in &page.entries {
            if rows == MAX_ROWS {
                break;
            }
            rows += 1;
            csv.line(&[
                e.at.clone(),
                e.action.clone(),
                e.tool.clone().unwrap_or_default(),
                e.status.to_string(),
                e.error_code.clone().unwrap_or_default(),
                e.duration_ms.map(|d| d.to_string()).unwrap_or_default(),
                e.api_key_id.clone().unwrap_or_default(),
                e.user_id.clone().unwrap_or_default(),
                e.surface.clone(),
                e.tool_call_id.clone().unwrap_or_default(),
                e.tool_set.clone().unwrap_or_default(),
            ]);
        }
        match page.next {
            Some(next) if rows < MAX_ROWS => q.cursor = Some(next),
            _ => break,
        }
    }
    Ok(csv.download("audit.csv"))
}
