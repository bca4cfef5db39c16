//! Server functions of the Tools page: the catalog as the project sees it, grouped by
//! integration (with its logo and the person's connection), filtered by side effects and
//! connection state, or searched with the ranking agents get from search_tools.

use leptos::prelude::*;

use crate::AppError;
pub use workbench_model::catalog::{ToolGroupView, ToolStatus, ToolView, ToolsData};
#[cfg(feature = "ssr")]
use workbench_model::{catalog::SideEffects, connections::AccountState};

/// The `connection` filter: tools usable now.
pub const READY: &str = "ready";
/// The `connection` filter: tools waiting for a connection.
pub const NEEDS_CONNECTION: &str = "needs_connection";

#[cfg(feature = "ssr")]
use crate::ssr;

/// The catalog as the signed-in person's project sees it. `effects` keeps one side-effects
/// class (none, network, write, destructive); `connection` keeps the tools usable now
/// (`ready`) or those waiting for a connection (`needs_connection`). With a query, the
/// search_tools ranking (up to 50) in rank order.
#[server(endpoint = "tools_page")]
pub async fn tools_page(
    query: Option<String>,
    effects: Option<String>,
    connection: Option<String>,
) -> Result<ToolsData, AppError> {
    use std::collections::HashMap;
    let p = ssr::principal().await?;
    let wb = ssr::wb()?;
    let engine = wb.engine();
    let latency = wb.metering().latencies(&p).await?;
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
    let view = |t: &workbench_core::catalog::Tool, score: Option<f64>| {
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
            input_schema: serde_json::to_string_pretty(&t.spec.input_schema).unwrap_or_default(),
            score,
        }
    };
    let tools: Vec<ToolView> = match query.as_deref().map(str::trim).filter(|q| !q.is_empty()) {
        Some(q) => engine
            .matches(&p, q, workbench_core::engine::SEARCH_LIMIT_MAX)
            .await?
            .tools
            .iter()
            .map(|(t, score)| view(t, Some(*score)))
            .collect(),
        None => all.iter().map(|t| view(t, None)).collect(),
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
    let tools: Vec<ToolView> = tools
        .into_iter()
        .filter(|t| effects.is_none_or(|e| e == Some(t.side_effects)))
        .filter(|t| ready.is_none_or(|r| t.connection.is_ready() == r))
        .collect();
    let mut groups: Vec<ToolGroupView> = Vec::new();
    for t in &tools {
        match groups.iter_mut().find(|g| g.integration == t.integration) {
            Some(g) => g.count += 1,
            None => groups.push(ToolGroupView {
                count: 1,
                ..head(&t.integration)
            }),
        }
    }
    // Built-ins (no logo, no account) first, then by display name.
    groups.sort_by_key(|g| (g.logo.is_some(), g.display_name.to_lowercase()));
    Ok(ToolsData {
        tools,
        groups,
        total,
    })
}
