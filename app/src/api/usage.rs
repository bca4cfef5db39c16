//! Server functions of the Usage page: the project's usage report for a date range (the
//! current month by default).

use leptos::prelude::*;

use crate::AppError;
pub use workbench_model::usage::{DayBar, LatencyBar, TopRow, UsageData, UserRow};

#[cfg(feature = "ssr")]
use crate::ssr;

#[server(endpoint = "usage_page")]
pub async fn usage_page(from: Option<String>, to: Option<String>) -> Result<UsageData, AppError> {
    let p = ssr::principal().await?;
    let wb = ssr::wb()?;
    let (from, to) = wb
        .metering()
        .range_or_this_month(from.filter(|s| !s.is_empty()), to.filter(|s| !s.is_empty()));
    let r = wb.metering().report(&p, &from, &to).await?;
    let mut people = wb
        .metering()
        .call_stats(&p, &r.from, &r.to, workbench_core::metering::StatsBy::User)
        .await?;
    people.sort_by(|a, b| b.calls.cmp(&a.calls).then(a.group.cmp(&b.group)));
    people.truncate(20);
    let keys = wb.accounts().list_api_keys(&p).await.unwrap_or_default();
    let key_name = |id: &str| {
        if id.is_empty() {
            return "portal / proxy".to_owned();
        }
        keys.iter()
            .find(|k| k.id == id)
            .map(|k| format!("{} ({}…)", k.name, k.prefix))
            .unwrap_or_else(|| id.to_owned())
    };
    let egress: std::collections::HashMap<String, i64> = r.egress.iter().cloned().collect();
    let top = |g: &workbench_core::metering::UsageGroup, name: String| TopRow {
        name,
        calls: g.tool_call,
        total_ms: g.tool_call_ms,
        egress_bytes: g.egress_bytes,
    };
    Ok(UsageData {
        days: r
            .days
            .iter()
            .map(|d| DayBar {
                day: d.day.clone(),
                succeeded: d.succeeded,
                failed: d.failed,
                denied: d.denied,
                other: d.other,
                egress_bytes: egress.get(&d.day).copied().unwrap_or(0),
            })
            .collect(),
        latency: r
            .latency
            .iter()
            .map(|l| LatencyBar {
                tool: l.tool.clone(),
                calls: l.calls,
                p50_ms: l.p50_ms,
                p95_ms: l.p95_ms,
            })
            .collect(),
        top_tools: r
            .top_tools
            .iter()
            .map(|g| top(g, g.group.clone()))
            .collect(),
        top_keys: r
            .top_keys
            .iter()
            .map(|g| top(g, key_name(&g.group)))
            .collect(),
        by_user: people
            .into_iter()
            .map(|s| UserRow {
                email: s.email.filter(|e| !e.is_empty()).unwrap_or(s.group),
                calls: s.calls,
                failed: s.failed,
                rate_limited: s.rate_limited,
                p50_ms: s.p50_ms,
                p95_ms: s.p95_ms,
            })
            .collect(),
        from: r.from,
        to: r.to,
    })
}
