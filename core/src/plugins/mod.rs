//! Plugin and custom-app tools: the catalog tools of an integration, run by one handler that
//! builds the request from the tool's template, injects the user's credential and shapes the
//! response (handler.rs, client.rs), with a Rust escape hatch for tools that need logic
//! (logic/), the service that creates, loads and deletes custom apps (apps.rs) and the import of
//! an app from an OpenAPI document (import.rs).

mod apps;
mod client;
mod handler;
mod import;
mod logic;

use std::collections::BTreeMap;
use std::sync::Arc;

pub use apps::{AppInfo, Apps, MAX_APPS_PER_PROJECT};
pub use client::MAX_RESPONSE_BYTES;
pub use handler::PluginTool;
pub use import::{DocumentSource, ImportPreview, ImportRequest};

use crate::catalog::Tool;
use crate::connections::Connections;
use crate::integrations::{Integration, IntegrationSettings, Integrations};
use crate::Result;

/// The shipped plugins with the operator's settings; a tool naming a Rust handler that does
/// not exist stops start-up like any broken definition.
pub fn load_integrations(
    settings: &BTreeMap<String, IntegrationSettings>,
    http: &reqwest::Client,
) -> Result<Integrations> {
    Integrations::load(settings, http, logic::exists)
}

/// The catalog tools of one integration (plugin or custom app). Tools of an integration that
/// needs a connection carry it, so the pipeline fetches the user's credential before the call;
/// those of one nobody can connect (its OAuth client not configured) are listed unavailable.
pub fn integration_tools(i: &Arc<Integration>, connections: &Connections) -> Result<Vec<Tool>> {
    let connection = i
        .needs_connection()
        .then(|| connections.source_for(i.clone()));
    let unconfigured = i.unconfigured();
    let mut tools = Vec::new();
    for (spec, def) in i.specs()?.into_iter().zip(i.def.tools.iter()) {
        let handler = PluginTool::new(i.clone(), def.clone());
        let mut tool = Tool::new(spec, Arc::new(handler))?;
        if let Some(reason) = &unconfigured {
            tool = tool.unavailable_because(reason.clone());
        }
        tools.push(match &connection {
            Some(c) => tool.with_connection(c.clone()),
            None => tool,
        });
    }
    Ok(tools)
}

/// Catalog tools of every shipped plugin.
pub fn plugin_tools(integrations: &Integrations, connections: &Connections) -> Result<Vec<Tool>> {
    let mut tools = Vec::new();
    for i in integrations.all() {
        tools.extend(integration_tools(i, connections)?);
    }
    Ok(tools)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rust_handler_a_shipped_plugin_names_exists() {
        let all = load_integrations(&BTreeMap::new(), &crate::integrations::api_client()).unwrap();
        let named: Vec<&str> = all
            .all()
            .iter()
            .flat_map(|i| i.def.tools.iter().filter_map(|t| t.handler.as_deref()))
            .collect();
        assert!(named.contains(&"hackernews_top_stories"), "{named:?}");
        assert!(named.iter().all(|h| logic::exists(h)));
    }
}
