//! Server functions of the Tools page: the catalog as the project sees it, grouped by
//! integration (with its logo and the person's connection), filtered by side effects and
//! connection state, or searched with the ranking agents get from search_tools.

use leptos::prelude::*;

use crate::AppError;
pub use workbench_model::catalog::{
    ToolGroupView, ToolStatus, ToolView, ToolsData, TOOLS_PER_PAGE,
};
#[cfg(feature = "ssr")]
use workbench_model::{catalog::SideEffects, connections::AccountState};

/// The `connection` filter: tools usable now.
pub const READY: &str = "ready";
/// The `connection` filter: tools waiting for a connection.
pub const NEEDS_CONNECTION: &str = "needs_connection";

#[cfg(feature = "ssr")]
use crate::ssr;

/// One page of the catalog as the signed-in person's project sees it. `effects` keeps one
/// side-effects class (none, network, write, destructive); `connection` keeps the tools usable
/// now (`ready`) or those waiting for a connection (`needs_connection`). Without a query the
/// tools come grouped by integration (built-ins first), [`TOOLS_PER_PAGE`] to a `page` (from
/// 1; past the last, the last); with one, the search_tools ranking (up to 50) in rank order.
/// Only the page's tools are turned into views, so the cost of a page does not grow with the
/// catalog beyond filtering and sorting it.
#[server(endpoint = "tools_page")]
pub async fn tools_page(
    query: Option<String>,
    effects: Option<String>,
    connection: Option<String>,
    page: Option<usize>,
) -> Result<ToolsData, AppError> {
    use std::collections::HashMap;
    use std::sync::Arc;
    use workbench_core::catalog::Tool;
    let p = ssr::principal().await?;
    let wb = ssr::wb()?;
    let engine = wb.engine();
    let all = engine.tools(&p).await?;
    let total = all.len();
    let mine = wb.connections().list(&p).await?;
    let mut heads: HashMap<String, ToolGroupView> = HashMap::new();
    for i in wb.connections().all_for(&p.project_id) {
        let connection = super::connections::account_state(&i, &mine);
        heads.insert(
            i.name().to_owned(),
            ToolGroupView {
                integration: i.name().to_owned(),
                display_name: i.def.display_name.clone(),
                logo: i.def.logo.clone(),
                connection,
                count: 0,
            },
        );
    }
    let head = |name: &str| {
        heads.get(name).cloned().unwrap_or_else(|| ToolGroupView {
            integration: name.to_owned(),
            display_name: name.to_owned(),
            logo: None,
            connection: AccountState::NoAccountNeeded,
            count: 0,
        })
    };
    // An unknown class matches no tool.
    let effects = effects
        .filter(|e| !e.is_empty())
        .map(|e| SideEffects::parse(&e));
    let ready = match connection.as_deref() {
        Some(READY) => Some(true),
        Some(NEEDS_CONNECTION) => Some(false),
        _ => None,
    };
    let keep = |t: &Tool| {
        effects.is_none_or(|e| e == Some(t.spec.side_effects))
            && ready.is_none_or(|r| head(&t.spec.integration).connection.is_ready() == r)
    };
    let searching = query.as_deref().map(str::trim).filter(|q| !q.is_empty());
    let mut found: Vec<(Arc<Tool>, Option<f64>)> = match searching {
        Some(q) => engine
            .matches(&p, q, workbench_core::engine::SEARCH_LIMIT_MAX)
            .await?
            .tools
            .into_iter()
            .map(|(t, score)| (t, Some(score)))
            .collect(),
        None => all.iter().map(|t| (t.clone(), None)).collect(),
    };
    found.retain(|(t, _)| keep(t));
    let mut counts: HashMap<String, usize> = HashMap::new();
    for (t, _) in &found {
        *counts.entry(t.spec.integration.clone()).or_default() += 1;
    }
    let groups_of = |name: &str| ToolGroupView {
        count: counts.get(name).copied().unwrap_or_default(),
        ..head(name)
    };
    // Built-ins (no logo, no account) first, then by display name; the catalog's order within.
    let group_key = |g: &ToolGroupView| (g.logo.is_some(), g.display_name.to_lowercase());
    if searching.is_none() {
        let keys: HashMap<&str, (bool, String)> = counts
            .keys()
            .map(|name| (name.as_str(), group_key(&head(name))))
            .collect();
        found.sort_by(|(a, _), (b, _)| {
            let (ka, kb) = (
                &keys[a.spec.integration.as_str()],
                &keys[b.spec.integration.as_str()],
            );
            ka.cmp(kb)
                .then_with(|| a.spec.integration.cmp(&b.spec.integration))
        });
    }
    let matching = found.len();
    let pages = matching.div_ceil(TOOLS_PER_PAGE).max(1);
    let page = page.unwrap_or(1).clamp(1, pages);
    let shown =
        &found[((page - 1) * TOOLS_PER_PAGE).min(matching)..(page * TOOLS_PER_PAGE).min(matching)];
    let latency = wb.metering().latencies(&p).await?;
    let tools: Vec<ToolView> = shown
        .iter()
        .map(|(t, score)| {
            let availability = t.availability();
            ToolView {
                name: t.spec.name.to_string(),
                integration: t.spec.integration.clone(),
                source: t.spec.source.to_string(),
                description: t.spec.description.clone(),
                side_effects: t.spec.side_effects,
                status: availability.status(),
                unavailable_reason: availability.reason().map(str::to_owned),
                connection: head(&t.spec.integration).connection,
                avg_latency_ms: latency.get(t.name(), t.spec.source.is_shared()),
                input_schema: serde_json::to_string_pretty(&t.spec.input_schema)
                    .unwrap_or_default(),
                score: *score,
            }
        })
        .collect();
    let mut groups: Vec<ToolGroupView> = Vec::new();
    for t in &tools {
        if !groups.iter().any(|g| g.integration == t.integration) {
            groups.push(groups_of(&t.integration));
        }
    }
    groups.sort_by_key(group_key);
    Ok(ToolsData {
        tools,
        groups,
        total,
        matching,
        integrations: counts.len(),
        page,
        pages,
    })
}
