//! The portal surface: Leptos pages and server functions behind cookie sessions, with the
//! sign-in gate, Host (DNS rebinding) and CSRF checks and the portal's JSON endpoints (D19).

mod audit_csv;
mod csrf;
mod csv;
mod gate;
mod host;
mod json;
mod oauth;
mod session_store;
mod sso;
mod usage_csv;

use axum::middleware;
use axum::routing::get;
use axum::Router;
use leptos::prelude::provide_context;
use leptos_axum::{generate_route_list, AxumRouteListing, LeptosRoutes};
use tower_sessions::cookie::SameSite;
use tower_sessions::{Expiry, SessionManagerLayer};
use workbench_app::{shell, App};

pub use csrf::is_same_origin;
pub use session_store::DbSessionStore;

use crate::routes::{Credential, Routes};
use crate::state::AppState;

/// Portal sessions end after this long without a request.
pub const SESSION_IDLE_HOURS: i64 = 12;

/// The portal's JSON and CSV routes (session cookie), each with its operation (D21).
pub fn json_routes(state: &AppState) -> Routes {
    use axum::http::Method as M;
    use workbench_core::auth::Operation as Op;
    use Credential::Session;
    Routes::new(state)
        .add(M::GET, "/me", Session, Op::Identity, json::me)
        .add(
            M::GET,
            "/api/integrations",
            Session,
            Op::IntegrationsRead,
            json::integrations,
        )
        .add(M::GET, "/usage.csv", Session, Op::UsageRead, usage_csv::csv)
        .add(M::GET, "/audit.csv", Session, Op::AuditRead, audit_csv::csv)
}

/// The portal's pages, listed once per process. leptos_router lists them by rendering the app
/// with a process-wide flag set (`SuppressResourceLoad`) that leaves every resource polled
/// meanwhile, on any thread, pending forever: a page rendering while a second router is built
/// (tests run many servers in one process) would never answer.
fn page_routes() -> Vec<AxumRouteListing> {
    static ROUTES: std::sync::OnceLock<Vec<AxumRouteListing>> = std::sync::OnceLock::new();
    ROUTES.get_or_init(|| generate_route_list(App)).clone()
}

pub fn routes(state: &AppState) -> Router<AppState> {
    let wb = state.wb.clone();
    let portal = workbench_app::PortalConfig {
        public_url: state.config.public_url.to_string(),
    };
    let context = move || {
        provide_context(wb.clone());
        provide_context(portal.clone());
    };
    let leptos_routes = page_routes();
    let pages = Router::new()
        .leptos_routes_with_context(state, leptos_routes, context.clone(), {
            let options = state.leptos.clone();
            move || shell(options.clone())
        })
        .route_layer(middleware::from_fn_with_state(state.clone(), gate::layer));
    let secure = state.config.secure_cookies;
    let sessions = SessionManagerLayer::new(DbSessionStore::new(state.wb.clone()))
        .with_name(if secure {
            "__Host-wb_session"
        } else {
            "wb_session"
        })
        .with_secure(secure)
        .with_http_only(true)
        .with_same_site(SameSite::Lax)
        .with_path("/")
        .with_expiry(Expiry::OnInactivity(time::Duration::hours(
            SESSION_IDLE_HOURS,
        )));
    json_routes(state)
        .into_router()
        // Signed out, the OAuth callback sends the person to sign in and back (a page, not JSON).
        .route("/oauth/callback", get(oauth::callback))
        .route("/sso/{slug}/start", axum::routing::post(sso::start))
        .route("/sso/{slug}/callback", get(sso::callback))
        .merge(pages)
        .fallback(leptos_axum::file_and_error_handler_with_context::<AppState, _>(context, shell))
        .layer(middleware::from_fn_with_state(state.clone(), crate::routes::server_fn_layer))
        .layer(middleware::from_fn_with_state(state.clone(), csrf::layer))
        .layer(sessions)
        .layer(middleware::from_fn_with_state(state.clone(), host::layer))
}
