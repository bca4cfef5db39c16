//! Server functions of the Tools page: the catalog as the project sees it, grouped by
//! integration (with its logo and the person's connection), filtered by side effects and
//! connection state, or searched with the ranking agents get from search_tools.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::AppError;

#[cfg(feature = "ssr")]
use crate::ssr;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolView {
    pub name: String,
    pub integration: String,
    pub source: String,
    pub description: String,
    pub side_effects: String,
    pub status: String,
    /// The person's connection to the tool's integration: connected, not connected, expired,
    /// revoked, or "no account needed".
    pub connection: String,
    pub avg_latency_ms: Option<i64>,
    pub input_schema: String,
    pub score: Option<f32>,
}

/// One integration's heading on the page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolGroupView {
    pub integration: String,
    pub display_name: String,
    pub logo: Option<String>,
    pub connection: String,
    /// Tools of this integration shown (after filters).
    pub count: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolsData {
    pub tools: Vec<ToolView>,
    /// Integrations with at least one tool shown, by display name (built-ins first).
    pub groups: Vec<ToolGroupView>,
    /// Every tool the project has, before filters.
    pub total: usize,
}

pub const NO_ACCOUNT: &str = "no account needed";

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
    let latency = wb.metering().average_latency_ms(&p).await?;
    let all = engine.tools(&p).await?;
    let total = all.len();
    let mine = wb.connections().list(&p).await?;
    let mut heads: HashMap<String, ToolGroupView> = HashMap::new();
    for i in wb.connections().all_for(&p.project_id) {
        let connection = if !i.needs_connection() {
            NO_ACCOUNT.to_owned()
        } else {
            mine.iter()
                .find(|c| c.integration == i.name())
                .map(|c| c.status.as_str().to_owned())
                .unwrap_or_else(|| "not connected".into())
        };
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
            connection: NO_ACCOUNT.to_owned(),
            count: 0,
        })
    };
    let view = |t: &workbench_core::catalog::Tool, score: Option<f32>| ToolView {
        name: t.spec.name.to_string(),
        integration: t.spec.integration.clone(),
        source: t.spec.source.to_string(),
        description: t.spec.description.clone(),
        side_effects: t.spec.side_effects.as_str().to_owned(),
        status: if t.current_status() == workbench_core::catalog::ToolStatus::Available {
            "available".into()
        } else {
            "unavailable".into()
        },
        connection: head(&t.spec.integration).connection,
        avg_latency_ms: latency.get(t.name()).copied(),
        input_schema: serde_json::to_string_pretty(&t.spec.input_schema).unwrap_or_default(),
        score,
    };
    let tools: Vec<ToolView> = match query.as_deref().map(str::trim).filter(|q| !q.is_empty()) {
        Some(q) => engine
            .search(&p, q, workbench_core::engine::SEARCH_LIMIT_MAX)
            .await?
            .into_iter()
            .filter_map(|hit| {
                all.iter()
                    .find(|t| t.name() == hit.name)
                    .map(|t| view(t, Some(hit.score)))
            })
            .collect(),
        None => all.iter().map(|t| view(t, None)).collect(),
    };
    let effects = effects.filter(|e| !e.is_empty());
    let connection = connection.filter(|c| !c.is_empty());
    let tools: Vec<ToolView> = tools
        .into_iter()
        .filter(|t| effects.as_deref().is_none_or(|e| t.side_effects == e))
        .filter(|t| match connection.as_deref() {
            Some("ready") => t.connection == "connected" || t.connection == NO_ACCOUNT,
            Some("needs_connection") => t.connection != "connected" && t.connection != NO_ACCOUNT,
            _ => true,
        })
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
