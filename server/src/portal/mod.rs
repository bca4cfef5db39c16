//! The portal surface: Leptos pages and server functions behind cookie sessions, with the
//! sign-in gate, Host (DNS rebinding) and CSRF checks and the portal's JSON endpoints (D19).

mod audit_csv;
mod csrf;
mod csv;
mod gate;
mod host;
mod json;
mod usage_csv;
mod oauth;
mod session_store;

use axum::middleware;
use axum::routing::get;
use axum::Router;
use leptos::prelude::provide_context;
use leptos_axum::{generate_route_list, LeptosRoutes};
use tower_sessions::cookie::SameSite;
use tower_sessions::{Expiry, SessionManagerLayer};
use workbench_app::{shell, App};

pub use csrf::is_same_origin;
pub use session_store::DbSessionStore;

use crate::state::AppState;

/// Portal sessions end after this long without a request.
pub const SESSION_IDLE_HOURS: i64 = 12;

pub fn routes(state: &AppState) -> Router<AppState> {
    let wb = state.wb.clone();
    let portal = workbench_app::PortalConfig { public_url: state.config.public_url.to_string() };
    let context = move || {
        provide_context(wb.clone());
        provide_context(portal.clone());
    };
    let leptos_routes = generate_route_list(App);
    let pages = Router::new()
        .leptos_routes_with_context(state, leptos_routes, context.clone(), {
            let options = state.leptos.clone();
            move || shell(options.clone())
        })
        .route_layer(middleware::from_fn_with_state(state.clone(), gate::layer));
    let secure = state.config.secure_cookies;
    let sessions = SessionManagerLayer::new(DbSessionStore::new(state.wb.clone()))
        .with_name(if secure { "__Host-wb_session" } else { "wb_session" })
        .with_secure(secure)
        .with_http_only(true)
        .with_same_site(SameSite::Lax)
        .with_path("/")
        .with_expiry(Expiry::OnInactivity(time::Duration::hours(SESSION_IDLE_HOURS)));
    Router::new()
        .route("/me", get(json::me))
        .route("/api/integrations", get(json::integrations))
        .route("/usage.csv", get(usage_csv::csv))
        .route("/audit.csv", get(audit_csv::csv))
        .route("/oauth/callback", get(oauth::callback))
        .merge(pages)
        .fallback(leptos_axum::file_and_error_handler_with_context::<AppState, _>(context, shell))
        .layer(middleware::from_fn_with_state(state.clone(), csrf::layer))
        .layer(sessions)
        .layer(middleware::from_fn_with_state(state.clone(), host::layer))
}
