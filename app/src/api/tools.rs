//! Server functions of the Tools page: the catalog as the project sees it, optionally searched.

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
    pub avg_latency_ms: Option<i64>,
    pub input_schema: String,
    pub score: Option<f32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolsData {
    pub tools: Vec<ToolView>,
    pub total: usize,
}

/// The catalog as the signed-in person's project sees it; with a query, the search_tools
/// ranking (up to 50), otherwise every tool.
#[server(endpoint = "tools_page")]
pub async fn tools_page(query: Option<String>) -> Result<ToolsData, AppError> {
    let p = ssr::principal().await?;
    let wb = ssr::wb()?;
    let engine = wb.engine();
    let latency = wb.metering().average_latency_ms(&p).await?;
    let all = engine.tools(&p).await?;
    let total = all.len();
    let view = |t: &workbench_core::catalog::Tool, score: Option<f32>| ToolView {
        name: t.spec.name.to_string(),
        integration: t.spec.integration.clone(),
        source: t.spec.source.to_string(),
        description: t.spec.description.clone(),
        side_effects: t.spec.side_effects.as_str().to_owned(),
        status: if t.current_status() == workbench_core::catalog::ToolStatus::Available { "available".into() } else { "unavailable".into() },
        avg_latency_ms: latency.get(t.name()).copied(),
        input_schema: serde_json::to_string_pretty(&t.spec.input_schema).unwrap_or_default(),
        score,
    };
    let tools = match query.as_deref().map(str::trim).filter(|q| !q.is_empty()) {
        Some(q) => engine
            .search(&p, q, workbench_core::engine::SEARCH_LIMIT_MAX)
            .await?
            .into_iter()
            .filter_map(|hit| all.iter().find(|t| t.name() == hit.name).map(|t| view(t, Some(hit.score))))
            .collect(),
        None => all.iter().map(|t| view(t, None)).collect(),
    };
    Ok(ToolsData { tools, total })
}
