//! Server functions of the Tool sets page: the project's sets with their endpoints, saving one
//! (create or replace, its tools one per line as `tool` or `tool as name`), deleting one.

use leptos::prelude::*;

use crate::AppError;
pub use workbench_model::toolsets::{SetToolItem, ToolSetItem, ToolSetsData};

#[cfg(feature = "ssr")]
use crate::ssr;

#[server(endpoint = "tool_sets_page")]
pub async fn tool_sets_page() -> Result<ToolSetsData, AppError> {
    let p = ssr::principal().await?;
    let wb = ssr::wb()?;
    let public_url = use_context::<ssr::PortalConfig>()
        .map(|c| c.public_url.trim_end_matches('/').to_owned())
        .unwrap_or_default();
    let can_manage = p.allows(workbench_core::auth::Operation::ToolSetsManage);
    let sets = wb.tool_sets().list(&p).await?;
    let keys: Vec<_> = if can_manage {
        wb.accounts()
            .list_api_keys(&p)
            .await?
            .into_iter()
            .filter(|k| k.revoked_at.is_none())
            .collect()
    } else {
        Vec::new()
    };
    let snapshot = wb.engine().snapshot(&p);
    Ok(ToolSetsData {
        sets: sets
            .into_iter()
            .map(|s| ToolSetItem {
                keys: keys
                    .iter()
                    .filter(|k| k.tool_sets.as_ref().is_some_and(|t| t.contains(&s.slug)))
                    .map(|k| k.name.clone())
                    .collect(),
                endpoint: format!(
                    "{public_url}{}",
                    workbench_core::toolsets::endpoint_path(&s.slug)
                ),
                tools: s
                    .tools
                    .iter()
                    .map(|e| SetToolItem {
                        name: e.exposed().to_owned(),
                        tool: e.tool.clone(),
                        description: e.description.clone(),
                        fixed: e.fixed.keys().cloned().collect(),
                        missing: snapshot.get(&e.tool).is_none(),
                    })
                    .collect(),
                id: s.id,
                slug: s.slug,
                name: s.name,
                description: s.description,
                updated_at: s.updated_at,
                prompts_and_resources: s.prompts_and_resources,
            })
            .collect(),
        can_manage,
    })
}

/// Creates a set (no `id`) or replaces one. `tools` is one tool per line, `tool` or
/// `tool as name`; a tool the set already lists keeps its description and fixed values.
#[server(endpoint = "save_tool_set")]
pub async fn save_tool_set(
    id: Option<String>,
    slug: String,
    name: String,
    description: String,
    tools: String,
    /// The checkbox: "on" when ticked, absent otherwise.
    prompts_and_resources: Option<String>,
) -> Result<(), AppError> {
    use workbench_core::toolsets::{SetEntry, ToolSetInput};
    let p = ssr::principal().await?;
    let wb = ssr::wb()?;
    let id = id.filter(|i| !i.is_empty());
    let existing: Vec<SetEntry> = match &id {
        Some(id) => wb.tool_sets().get(&p, id).await?.tools,
        None => Vec::new(),
    };
    let mut entries = Vec::new();
    for line in tools.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (tool, exposed) = match line.split_once(" as ") {
            Some((t, n)) => (t.trim().to_owned(), Some(n.trim().to_owned())),
            None => (line.to_owned(), None),
        };
        let kept = existing.iter().find(|e| e.tool == tool);
        entries.push(SetEntry {
            name: exposed.filter(|n| *n != tool),
            description: kept.and_then(|e| e.description.clone()),
            fixed: kept.map(|e| e.fixed.clone()).unwrap_or_default(),
            tool,
        });
    }
    let input = ToolSetInput {
        slug: slug.trim().to_owned(),
        name,
        description,
        tools: entries,
        prompts_and_resources: prompts_and_resources.is_some_and(|v| v == "on" || v == "true"),
    };
    let sets = wb.tool_sets().clone();
    match id {
        Some(id) => sets.replace(&p, &id, &input).await?,
        None => sets.create(&p, &input).await?,
    };
    Ok(())
}

#[server(endpoint = "delete_tool_set")]
pub async fn delete_tool_set(id: String) -> Result<(), AppError> {
    let p = ssr::principal().await?;
    ssr::wb()?.tool_sets().delete(&p, &id).await?;
    Ok(())
}
