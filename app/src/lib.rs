//! workbench-app: the server-rendered Leptos portal (pages, layout, server functions). It
//! hydrates in the browser when WASM loads, and every form also works as a plain HTML post.
//! Depends on workbench-core only with the `ssr` feature.

// The Apps page (its import picker inside a Suspense) is a deep view type for the WASM build.
#![recursion_limit = "256"]

pub mod api;
/// A page's data: `load` now, and again after each run of any of the `actions` (their
/// versions are what the resource watches).
macro_rules! reloaded_after {
    ($load:expr; $($action:expr),+ $(,)?) => {
        leptos::prelude::Resource::new(move || ($($action.version().get(),)+), |_| $load)
    };
}
mod components;
mod error;
mod pages;
#[cfg(feature = "ssr")]
mod ssr;
#[cfg(feature = "ssr")]
pub use ssr::{begin_session, PortalConfig};

use leptos::prelude::*;
use leptos_meta::{provide_meta_context, MetaTags, Title};
use leptos_router::components::{Route, Router, Routes};
use leptos_router::{path, SsrMode};

pub use error::AppError;

/// The HTML document around the app, rendered on the server.
pub fn shell(options: LeptosOptions) -> impl IntoView {
    view! {
        <!DOCTYPE html>
        <html lang="en" class="h-full bg-slate-50">
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                <link rel="stylesheet" id="leptos" href="/pkg/workbench.css"/>
                <link rel="icon" href="/favicon.ico"/>
                <HydrationScripts options/>
                <MetaTags/>
            </head>
            <body class="h-full text-slate-900 antialiased">
                <App/>
            </body>
        </html>
    }
}

#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    view! {
        <Title formatter=|text: String| if text.is_empty() { "workbench".to_string() } else { format!("{text} · workbench") }/>
        <Router>
            <Routes fallback=pages::NotFound>
                <Route path=path!("/") view=pages::Overview ssr=SsrMode::Async/>
                <Route path=path!("/login") view=pages::Login ssr=SsrMode::Async/>
                <Route path=path!("/setup") view=pages::Setup ssr=SsrMode::Async/>
                <Route path=path!("/api-keys") view=pages::ApiKeys ssr=SsrMode::Async/>
                <Route path=path!("/members") view=pages::Members ssr=SsrMode::Async/>
                <Route path=path!("/tools") view=pages::Tools ssr=SsrMode::Async/>
                <Route path=path!("/egress") view=pages::Egress ssr=SsrMode::Async/>
                <Route path=path!("/tool-sets") view=pages::ToolSets ssr=SsrMode::Async/>
                <Route path=path!("/audit") view=pages::Audit ssr=SsrMode::Async/>
                <Route path=path!("/audit/:id") view=pages::AuditEventPage ssr=SsrMode::Async/>
                <Route path=path!("/vault") view=pages::Vault ssr=SsrMode::Async/>
                <Route path=path!("/connections") view=pages::ConnectionsPage ssr=SsrMode::Async/>
                <Route path=path!("/apps") view=pages::Apps ssr=SsrMode::Async/>
                <Route path=path!("/mcp-servers") view=pages::McpServers ssr=SsrMode::Async/>
                <Route path=path!("/mcp-servers/:id") view=pages::McpServerPage ssr=SsrMode::Async/>
                <Route path=path!("/confirmations") view=pages::Confirmations ssr=SsrMode::Async/>
                <Route path=path!("/callbacks") view=pages::Callbacks ssr=SsrMode::Async/>
                <Route path=path!("/email") view=pages::Email ssr=SsrMode::Async/>
                <Route path=path!("/policies") view=pages::Policies ssr=SsrMode::Async/>
                <Route path=path!("/sso") view=pages::SsoSettings ssr=SsrMode::Async/>
                <Route path=path!("/usage") view=pages::Usage ssr=SsrMode::Async/>
                <Route path=path!("/confirmations/:id") view=pages::ConfirmationPage ssr=SsrMode::Async/>
                <Route path=path!("/connect/:id") view=pages::Connect ssr=SsrMode::Async/>
                <Route path=path!("/connected") view=pages::Connected ssr=SsrMode::Async/>
                <Route path=path!("/oauth/authorize") view=pages::OAuthAuthorize ssr=SsrMode::Async/>
                <Route path=path!("/mcp-clients") view=pages::McpClients ssr=SsrMode::Async/>
            </Routes>
        </Router>
    }
}
