//! `AppState`: everything a handler may need, cloned cheaply into every request. Handlers take
//! the parts they use through `FromRef` or `State<AppState>`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::extract::FromRef;
use leptos::config::LeptosOptions;
use workbench_core::Workbench;

use crate::config::ServerConfig;
use crate::keys::Keys;

/// Cloned into every request (several times: middleware, handler), so a clone is one
/// reference count.
#[derive(Clone)]
pub struct AppState(Arc<StateParts>);

pub struct StateParts {
    /// The domain services (database, accounts, …).
    pub wb: Workbench,
    /// Derived server configuration.
    pub config: Arc<ServerConfig>,
    /// Vault master key and proxy-token signing key.
    pub keys: Arc<Keys>,
    /// How Leptos renders the portal and where its assets live.
    pub leptos: LeptosOptions,
    /// Curl proxy requests in flight per user.
    pub proxy_slots: Arc<crate::proxy_slots::ProxySlots>,
    /// Caches "the first admin exists" once true (it never becomes false again).
    set_up: AtomicBool,
}

impl std::ops::Deref for AppState {
    type Target = StateParts;
    fn deref(&self) -> &StateParts {
        &self.0
    }
}

impl AppState {
    pub fn new(wb: Workbench, config: ServerConfig, keys: Keys) -> AppState {
        let leptos = LeptosOptions::builder()
            .output_name("workbench")
            .site_root(config.site_root.to_string_lossy().to_string())
            .site_pkg_dir("pkg")
            .site_addr(config.bind)
            .env(leptos::config::Env::PROD)
            .build();
        AppState(Arc::new(StateParts {
            wb,
            config: Arc::new(config),
            keys: Arc::new(keys),
            leptos,
            proxy_slots: Arc::default(),
            set_up: AtomicBool::new(false),
        }))
    }

    /// Whether a first admin exists; asks the database until the answer is yes.
    pub async fn is_set_up(&self) -> bool {
        if self.set_up.load(Ordering::Relaxed) {
            return true;
        }
        let yes = self.wb.accounts().is_set_up().await.unwrap_or(false);
        if yes {
            self.set_up.store(true, Ordering::Relaxed);
        }
        yes
    }
}

impl FromRef<AppState> for LeptosOptions {
    fn from_ref(state: &AppState) -> Self {
        state.leptos.clone()
    }
}

impl FromRef<AppState> for Workbench {
    fn from_ref(state: &AppState) -> Self {
        state.wb.clone()
    }
}
