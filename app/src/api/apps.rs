//! Server functions of the Apps page: list, create and delete custom apps.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::AppError;

#[cfg(feature = "ssr")]
use crate::ssr;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppView {
    pub id: String,
    pub name: String,
    pub display_name: String,
    pub auth_type: String,
    pub base_url: String,
    pub tools: Vec<String>,
    pub created_at: String,
    /// Why the stored app is not loaded (its tools are not in the catalog).
    pub load_error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppsData {
    pub apps: Vec<AppView>,
    pub can_manage: bool,
    /// What an OAuth app registers at its provider as redirect URI.
    pub redirect_uri: String,
}

#[server(endpoint = "apps_page")]
pub async fn apps_page() -> Result<AppsData, AppError> {
    let p = ssr::principal().await?;
    let apps = ssr::wb()?.apps().list(&p).await?;
    Ok(AppsData {
        apps: apps
            .into_iter()
            .map(|a| AppView {
                id: a.id,
                name: a.name,
                display_name: a.display_name,
                auth_type: a.auth_type.to_owned(),
                base_url: a.base_url,
                tools: a.tools,
                created_at: a.created_at,
                load_error: a.load_error,
            })
            .collect(),
        can_manage: p.allows(workbench_core::auth::Operation::AppsManage),
        redirect_uri: ssr::oauth_redirect_uri()?,
    })
}

/// Creates a custom app from its JSON definition (the plugin format).
#[server(endpoint = "create_app")]
pub async fn create_app(definition: String) -> Result<(), AppError> {
    let p = ssr::principal().await?;
    let value: serde_json::Value = serde_json::from_str(&definition)
        .map_err(|e| AppError::Message(format!("the definition is not valid JSON: {e}")))?;
    ssr::wb()?.apps().create(&p, &value).await?;
    Ok(())
}

#[server(endpoint = "delete_app")]
pub async fn delete_app(id: String) -> Result<(), AppError> {
    let p = ssr::principal().await?;
    ssr::wb()?.apps().delete(&p, &id).await?;
    Ok(())
}
