//! Server functions of the Connections page and connect links: list, start, redeem, submit and disconnect.

use leptos::prelude::*;

use crate::AppError;
pub use workbench_model::connections::{AccountState, ConnectView, IntegrationView};

#[cfg(feature = "ssr")]
use crate::ssr;

/// Redeems a connect link: the same signed-in user only. OAuth redirects to the provider with
/// PKCE and a fresh single-use state; API key and cookie integrations show a form.
#[server(endpoint = "open_connect_link")]
pub async fn open_connect_link(id: String) -> Result<ConnectView, AppError> {
    use workbench_core::integrations::AuthDef;
    let p = ssr::principal().await?;
    let wb = ssr::wb()?;
    let page = match wb.connections().link(&p.user_id, &id).await {
        Ok(page) => page,
        Err(workbench_core::Error::NotFound) => {
            ssr::not_found_status();
            return Ok(ConnectView::NotFound);
        }
        Err(e) => return Err(e.into()),
    };
    let display_name = page.integration.def.display_name.clone();
    if page.pending.status == workbench_core::connections::PendingStatus::Connected {
        return Ok(ConnectView::Connected { display_name });
    }
    Ok(match &page.integration.def.auth {
        AuthDef::Oauth2 { .. } => {
            let url = wb
                .connections()
                .authorization_url(&p.user_id, &id, &ssr::oauth_redirect_uri()?)
                .await?;
            leptos_axum::redirect(&url);
            ConnectView::Redirecting { display_name }
        }
        AuthDef::ApiKey { label, help, .. } => ConnectView::Form {
            display_name,
            auth_type: "api_key".into(),
            label: label.clone().unwrap_or_else(|| "API key".into()),
            help: help.clone(),
        },
        AuthDef::Cookie {
            cookie_name,
            domain,
            help,
            ..
        } => ConnectView::Form {
            display_name,
            auth_type: "cookie".into(),
            label: format!("Value of the \"{cookie_name}\" cookie of {domain}"),
            help: help.clone(),
        },
        AuthDef::None => ConnectView::Connected { display_name },
    })
}

/// The API key / cookie form of a connect link; the value is checked by the integration's
/// probe before it is stored, and never shown again.
#[server(endpoint = "submit_connection")]
pub async fn submit_connection(id: String, value: String) -> Result<String, AppError> {
    let p = ssr::principal().await?;
    let value = workbench_core::vault::Secret::from(value);
    match ssr::wb()?
        .connections()
        .submit_secret(&p.user_id, &id, &value)
        .await
    {
        Err(workbench_core::Error::NotFound) => Err(AppError::Message("not found".into())),
        other => Ok(other?),
    }
}

#[server(endpoint = "connections_page")]
pub async fn connections_page() -> Result<Vec<IntegrationView>, AppError> {
    let p = ssr::principal().await?;
    let wb = ssr::wb()?;
    let mine = wb.connections().list(&p).await?;
    Ok(wb
        .connections()
        .all_for(&p.project_id)
        .iter()
        .map(|i| IntegrationView {
            name: i.name().to_owned(),
            display_name: i.def.display_name.clone(),
            description: i.def.description.clone(),
            logo: i.def.logo.clone(),
            auth_type: i.def.auth.kind().to_owned(),
            tool_count: i.def.tools.len(),
            status: account_state(i, &mine),
        })
        .collect())
}

/// The person's account at integration `i`, given their connections `mine`.
#[cfg(feature = "ssr")]
pub(crate) fn account_state(
    i: &workbench_core::integrations::Integration,
    mine: &[workbench_core::connections::ConnectionInfo],
) -> AccountState {
    if !i.needs_connection() {
        return AccountState::NoAccountNeeded;
    }
    AccountState::of(
        mine.iter()
            .find(|c| c.integration == i.name())
            .map(|c| c.status),
    )
}

/// Starts connecting from the portal: a pending connection, then its connect page.
#[server(endpoint = "start_connection")]
pub async fn start_connection(integration: String) -> Result<(), AppError> {
    let p = ssr::principal().await?;
    let wb = ssr::wb()?;
    let i = wb
        .connections()
        .lookup(&p.project_id, &integration)
        .ok_or_else(|| AppError::Message("unknown integration".into()))?;
    let pending = wb.connections().begin(&p, &i).await?;
    leptos_axum::redirect(&format!("/connect/{}", pending.id));
    Ok(())
}

#[server(endpoint = "disconnect")]
pub async fn disconnect(integration: String) -> Result<(), AppError> {
    let p = ssr::principal().await?;
    ssr::wb()?
        .connections()
        .disconnect(&p, &integration)
        .await?;
    Ok(())
}
