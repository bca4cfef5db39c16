//! One module per portal page.

mod api_keys;
mod app_import;
mod apps;
mod audit;
mod audit_detail;
mod auth;
mod callbacks;
mod confirmations;
mod connections;
mod egress;
mod email;
mod mcp_servers;
mod members;
mod oauth;
mod overview;
mod policies;
mod sso;
mod tool_sets;
mod tools;
mod usage;
mod vault;

pub use api_keys::ApiKeys;
pub use apps::Apps;
pub use audit::Audit;
pub use audit_detail::AuditEventPage;
pub use auth::{Login, Setup};
pub use callbacks::Callbacks;
pub use confirmations::{ConfirmationPage, Confirmations};
pub use connections::{Connect, Connected, ConnectionsPage};
pub use egress::Egress;
pub use email::Email;
pub use mcp_servers::{McpServerPage, McpServers};
pub use members::Members;
pub use oauth::{McpClients, OAuthAuthorize};
pub use overview::Overview;
pub use policies::Policies;
pub use sso::SsoSettings;
pub use tool_sets::ToolSets;
pub use tools::Tools;
pub use usage::Usage;
pub use vault::Vault;

use leptos::prelude::*;

#[component]
pub fn NotFound() -> impl IntoView {
    #[cfg(feature = "ssr")]
    {
        if let Some(res) = use_context::<leptos_axum::ResponseOptions>() {
            res.set_status(http::StatusCode::NOT_FOUND);
        }
    }
    view! {
        <div class="mx-auto mt-24 max-w-md text-center">
            <h1 class="text-2xl font-semibold">"Not found"</h1>
            <p class="mt-2 text-sm text-slate-600">"There is nothing here, or it is not yours to see."</p>
            <a href="/" class="mt-6 inline-block text-sm text-indigo-600 underline">"Back to workbench"</a>
        </div>
    }
}
