//! workbench-server: the one axum process that serves the Leptos portal, /mcp, the REST API
//! (/v1) and health probes over the domain in `workbench-core`. `router` and `serve` are
//! public so tests run the real application on port 0.

// The OpenAPI document is one `json!` literal, deeper than the default limit.
#![recursion_limit = "512"]

pub mod api_auth;
pub mod api_error;
pub mod cli;
pub mod client_ip;
pub mod config;
pub mod config_client;
pub mod health;
pub mod keys;
pub mod mcp;
pub mod mcp_oauth;
mod metrics;
mod otel;
pub mod portal;
pub mod proxy;
mod proxy_slots;
mod request_id;
pub mod routes;
pub mod state;
pub mod telemetry;
mod unread_body;
pub mod v1;

use std::future::{Future, IntoFuture};
use std::net::SocketAddr;
use std::time::Duration;

use axum::http::{header, HeaderValue};
use axum::routing::get;
use axum::{middleware, Router};
use tokio::net::TcpListener;
use tower_http::set_header::SetResponseHeaderLayer;
use workbench_core::{Workbench, WorkbenchOptions};

pub use config::{ServeArgs, ServerConfig};
pub use state::AppState;

/// The whole application as one router.
pub fn router(state: AppState) -> Router {
    health_routes(&state)
        .into_router()
        .route("/metrics", get(metrics::metrics))
        .merge(v1::router(&state))
        .merge(mcp::routes(&state))
        .merge(mcp_oauth::routes())
        .merge(proxy::routes())
        .merge(portal::routes(&state))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            client_ip::layer,
        ))
        .layer(api_error::catch_panics())
        .layer(middleware::from_fn(unread_body::layer))
        .layer(middleware::from_fn(request_id::layer))
        .layer(SetResponseHeaderLayer::if_not_present(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static("frame-ancestors 'none'"),
        ))
        .layer(SetResponseHeaderLayer::if_not_present(
            header::X_FRAME_OPTIONS,
            HeaderValue::from_static("DENY"),
        ))
        .layer(SetResponseHeaderLayer::if_not_present(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ))
        .layer(SetResponseHeaderLayer::if_not_present(
            header::REFERRER_POLICY,
            HeaderValue::from_static("same-origin"),
        ))
        .with_state(state)
}

/// Every route of the server, declared: the REST and portal JSON routes as mounted, then the
/// ones mounted elsewhere (`routes::DECLARED`). The router mounts from the same builders, the
/// route-by-principal and OpenAPI tests walk this list.
pub fn route_table(state: &AppState) -> Vec<routes::RouteSpec> {
    let mut out = v1::routes(state).specs().to_vec();
    out.extend(health_routes(state).specs());
    out.extend(portal::json_routes(state).specs());
    out.extend_from_slice(routes::DECLARED);
    out
}

/// The probes: public, no credential.
pub fn health_routes(state: &AppState) -> routes::Routes {
    use workbench_core::auth::Operation;
    routes::Routes::new(state)
        .add(
            axum::http::Method::GET,
            "/healthz",
            routes::Credential::None,
            Operation::Health,
            health::healthz,
        )
        .add(
            axum::http::Method::GET,
            "/readyz",
            routes::Credential::None,
            Operation::Health,
            health::readyz,
        )
}

/// How long in-flight requests get to finish after a shutdown signal.
pub const DRAIN_DEADLINE: Duration = Duration::from_secs(10);
/// How long writing the queued call records may take after the last request.
pub const RECORDS_DEADLINE: Duration = Duration::from_secs(10);

/// Serves `router(state)` on `listener` until `shutdown` resolves, with background upkeep
/// (expired sessions, old sign-in failures) running alongside. On shutdown it stops
/// accepting, tells long waits to answer now (`wait_for_connection` answers TIMEOUT), lets
/// in-flight requests finish (cutting off whatever is still open after `DRAIN_DEADLINE`), then
/// writes the queued call records (at most `RECORDS_DEADLINE`).
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let upkeep = tokio::spawn(upkeep(
        state.wb.clone(),
        state.config.apps_reload_every,
        state.config.sso_recheck_every,
    ));
    let (stop_deliveries, deliveries_stopped) = tokio::sync::watch::channel(false);
    let deliveries = state.config.callback_worker.then(|| {
        let outbox = state.wb.deliveries().clone();
        tokio::spawn(async move { outbox.run_worker(deliveries_stopped).await })
    });
    let wb = state.wb.clone();
    let state_wb = state.wb.clone();
    let (signalled, drain_started) = tokio::sync::oneshot::channel::<()>();
    let graceful = async move {
        shutdown.await;
        tracing::info!("shutting down: draining in-flight requests");
        wb.begin_shutdown();
        let _ = signalled.send(());
    };
    let app = router(state).into_make_service_with_connect_info::<SocketAddr>();
    let server = axum::serve(listener, app)
        .with_graceful_shutdown(graceful)
        .into_future();
    tokio::pin!(server);
    let deadline = async {
        if drain_started.await.is_ok() {
            tokio::time::sleep(DRAIN_DEADLINE).await;
        } else {
            std::future::pending::<()>().await;
        }
    };
    let result = tokio::select! {
        r = &mut server => r,
        _ = deadline => {
            tracing::warn!("requests still open {} s after the shutdown signal were cut off", DRAIN_DEADLINE.as_secs());
            Ok(())
        }
    };
    upkeep.abort();
    // The delivery pass under way finishes (each attempt is bounded); a delivery cut off here
    // is delivered again once its lease runs out.
    let _ = stop_deliveries.send(true);
    if let Some(worker) = deliveries {
        let limit = workbench_core::delivery::ATTEMPT_TIMEOUT + Duration::from_secs(2);
        if tokio::time::timeout(limit, worker).await.is_err() {
            tracing::warn!("a delivery was still running at shutdown; it will be delivered again");
        }
    }
    // Records of the last calls are queued, not yet written: write them before exiting.
    if tokio::time::timeout(RECORDS_DEADLINE, state_wb.flush_records())
        .await
        .is_err()
    {
        tracing::error!(
            "queued call records were not all written within {} s of shutdown",
            RECORDS_DEADLINE.as_secs()
        );
    }
    result
}

async fn upkeep(wb: Workbench, apps_reload_every: Duration, sso_recheck_every: Duration) {
    let mut tick = tokio::time::interval(Duration::from_secs(600));
    let mut apps = tokio::time::interval(apps_reload_every);
    apps.tick().await; // the first tick is immediate, and open() has just loaded them
                       // People signed in through identity providers: those due are asked about (once a minute).
    let mut sso = tokio::time::interval(sso_recheck_every);
    sso.tick().await;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = sso.tick() => {
                if let Err(e) = wb.sso().recheck_due().await {
                    tracing::warn!(error = %e, "sign-in re-checks failed");
                }
                continue;
            }
            _ = apps.tick() => {
                // Other instances may have added or removed custom apps.
                if let Err(e) = wb.apps().reload_all().await {
                    tracing::warn!(error = %e, "reloading custom apps failed");
                }
                // And MCP servers registered, deleted, refreshed or approved elsewhere.
                if let Err(e) = wb.upstreams().reload_all().await {
                    tracing::warn!(error = %e, "reloading MCP servers failed");
                }
                continue;
            }
        }
        if let Err(e) = wb.accounts().purge_expired().await {
            tracing::warn!(error = %e, "upkeep failed");
        }
        if let Err(e) = wb.engine().limits().purge_ended().await {
            tracing::warn!(error = %e, "upkeep failed");
        }
        if let Err(e) = wb.idempotency().purge_expired().await {
            tracing::warn!(error = %e, "upkeep failed");
        }
        if let Err(e) = wb.mcp_sessions().purge().await {
            tracing::warn!(error = %e, "upkeep failed");
        }
        if let Err(e) = wb.oauth().purge_expired().await {
            tracing::warn!(error = %e, "upkeep failed");
        }
        if let Err(e) = wb.connections().purge_expired().await {
            tracing::warn!(error = %e, "upkeep failed");
        }
        // Audit retention: rows older than each project's setting go, in small batches.
        match wb.audit().apply_retention().await {
            Ok(r)
                if r.audit_rows
                    + r.tool_calls
                    + r.confirmations
                    + r.webhook_deliveries
                    + r.callbacks
                    > 0 =>
            {
                tracing::info!(
                    audit_rows = r.audit_rows,
                    tool_calls = r.tool_calls,
                    confirmations = r.confirmations,
                    webhook_deliveries = r.webhook_deliveries,
                    callbacks = r.callbacks,
                    "audit retention deleted old rows"
                )
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "audit retention failed"),
        }
    }
}

/// `workbench serve`: open the database (migrating it), load keys, bind, serve until Ctrl-C or
/// SIGTERM.
pub async fn serve_from_args(args: ServeArgs) -> Result<(), cli::CliError> {
    let config = ServerConfig::from_args(&args)?;
    let keys = keys::Keys::load_or_create(&config.data_dir)?;
    let options = WorkbenchOptions {
        object_store_url: config.object_store_url.clone(),
        egress_allow_private: config.egress_allow_private.clone(),
        master_keys: keys.master.clone(),
        integrations: workbench_core::integrations::IntegrationSettings::from_env(std::env::vars()),
        proxy_token_key: *keys.jwt.bytes(),
        connect_ttl_secs: config.connect_ttl_secs,
        confirmations: workbench_core::engine::ConfirmSettings {
            public_url: config.public_url.to_string(),
            ttl_secs: config.confirmation_ttl_secs,
        },
        web_search: config.web_search.clone(),
        email: config.email.clone(),
        stdio: config.stdio.clone(),
        password_sign_in: config.password_sign_in,
        ..WorkbenchOptions::default()
    };
    let wb = Workbench::open(&args.database_url, options).await?;
    let listener =
        TcpListener::bind(config.bind)
            .await
            .map_err(|source| cli::CliError::Listen {
                addr: config.bind,
                source,
            })?;
    let public_url = config.public_url.clone();
    let state = AppState::new(wb.clone(), config, keys);
    tracing::info!(%public_url, "workbench listening on http://{}", listener.local_addr()?);
    serve(listener, state, shutdown_signal()).await?;
    wb.db().close().await;
    Ok(())
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        if let Ok(mut s) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            s.recv().await;
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
    tracing::info!("shutting down");
}
