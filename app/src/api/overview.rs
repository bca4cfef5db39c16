//! Server function of the Overview page: today's calls by outcome, rate-limit refusals, held
//! calls waiting, upstream servers needing attention, connections to renew.

use leptos::prelude::*;

use crate::AppError;
pub use workbench_model::overview::OverviewData;

#[cfg(feature = "ssr")]
use crate::ssr;

#[server(endpoint = "overview_page")]
pub async fn overview_page() -> Result<OverviewData, AppError> {
    use workbench_core::auth::Operation;
    use workbench_core::connections::ConnectionStatus;
    use workbench_core::upstream::BreakerState;
    let p = ssr::principal().await?;
    let wb = ssr::wb()?;
    let now = wb.clock().now_ms();
    let midnight = now - now.rem_euclid(24 * 60 * 60 * 1000);
    let calls = wb.audit().calls_since(&p, midnight).await?;
    let pending_confirmations = if p.allows(Operation::ConfirmationsDecide) {
        wb.engine().pending_confirmations(&p).await?
    } else {
        0
    };
    let (mut open_breakers, mut awaiting_review) = (Vec::new(), Vec::new());
    if p.allows(Operation::McpServersRead) {
        for s in wb.upstreams().list(&p).await? {
            if s.breaker != BreakerState::Closed {
                open_breakers.push((s.name.clone(), s.id.clone(), s.breaker.as_str().to_owned()));
            }
            if s.tool_counts.pending_review > 0 {
                awaiting_review.push((s.name.clone(), s.id.clone(), s.tool_counts.pending_review));
            }
        }
    }
    let reconnect = wb
        .connections()
        .list(&p)
        .await?
        .into_iter()
        .filter(|c| c.status != ConnectionStatus::Connected)
        .map(|c| (c.integration, c.status.as_str().to_owned()))
        .collect();
    Ok(OverviewData {
        project_wide: p.sees_project_records(),
        calls_today_total: calls.by_status.iter().map(|(_, n)| n).sum(),
        calls_today: calls
            .by_status
            .into_iter()
            .map(|(s, n)| (s.as_str().to_owned(), n))
            .collect(),
        rate_limited_today: calls.rate_limited,
        pending_confirmations,
        open_breakers,
        awaiting_review,
        reconnect,
    })
}
