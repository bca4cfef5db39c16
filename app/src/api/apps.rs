//! Server functions of the Apps page: list, create and delete custom apps.

use leptos::prelude::*;

use crate::AppError;
pub use workbench_model::apps::{AppView, AppsData};

#[cfg(feature = "ssr")]
use crate::ssr;

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
