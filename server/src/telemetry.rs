//! Logging setup: `WB_LOG` (or `RUST_LOG`) filters; human-readable lines on stderr, or one
//! JSON object per line with `--log-format json` (each with the request's span: its
//! `request_id`, method and path, for lines written while a request runs).

use tracing_subscriber::EnvFilter;

/// How log lines are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

pub fn init(format: LogFormat) {
    let filter = std::env::var("WB_LOG")
        .ok()
        .or_else(|| std::env::var("RUST_LOG").ok())
        .unwrap_or_else(|| "info,sqlx=warn,tower_sessions=warn".to_string());
    let builder = tracing_subscriber::fmt().with_env_filter(EnvFilter::new(filter)).with_writer(std::io::stderr).with_target(false);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().with_current_span(true).with_span_list(false).flatten_event(true).try_init(),
    };
}
