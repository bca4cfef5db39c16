//! Logging setup: `WB_LOG` (or `RUST_LOG`) filters, human-readable lines on stderr.

use tracing_subscriber::EnvFilter;

pub fn init() {
    let filter = std::env::var("WB_LOG")
        .ok()
        .or_else(|| std::env::var("RUST_LOG").ok())
        .unwrap_or_else(|| "info,sqlx=warn,tower_sessions=warn".to_string());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::new(filter))
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}
