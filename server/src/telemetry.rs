//! Logging and tracing setup: `WB_LOG` (or `RUST_LOG`) filters; human-readable lines on stderr, or one
//! JSON object per line with `--log-format json` (each with the request's span: its
//! `request_id`, method and path, for lines written while a request runs). With a collector
//! named, spans are also exported as OpenTelemetry traces (otel.rs).

use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};
use url::Url;

/// How log lines are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// What `init` set up that must be shut down: the trace exporter, when there is one.
#[must_use = "shut it down so queued spans are exported"]
pub struct Telemetry {
    provider: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
}

impl Telemetry {
    /// Exports the spans still queued. Call it outside async code while `runtime` (given to
    /// `init`) still runs.
    pub fn shutdown(self) {
        if let Some(p) = self.provider {
            crate::otel::shutdown(p);
        }
    }
}

/// Installs the global subscriber: log lines as `format` says and, with `traces` (the
/// collector's `/v1/traces` URL), the OpenTelemetry export whose requests run on `runtime`.
pub fn init(
    format: LogFormat,
    traces: Option<&Url>,
    runtime: &tokio::runtime::Handle,
) -> Telemetry {
    let filter = std::env::var("WB_LOG")
        .ok()
        .or_else(|| std::env::var("RUST_LOG").ok())
        .unwrap_or_else(|| "info,sqlx=warn,tower_sessions=warn".to_string());
    let (provider, problem) = match traces.map(|url| crate::otel::start(url, runtime.clone())) {
        Some(Ok((provider, tracer))) => (Some((provider, tracer)), None),
        Some(Err(e)) => (None, Some(e)),
        None => (None, None),
    };
    let tracer = provider.as_ref().map(|(_, tracer)| tracer.clone());
    let _ = subscriber(format, &filter, tracer, std::io::stderr).try_init();
    if let Some(e) = problem {
        tracing::error!("traces are not exported: {e}");
    } else if let Some(url) = traces {
        tracing::info!(endpoint = %url, "exporting traces over OTLP");
    }
    Telemetry {
        provider: provider.map(|(p, _)| p),
    }
}

/// Log lines filtered by `filter` (never showing trace-only spans, so a line keeps the
/// request's span as its own) written to `writer`, and with `tracer` the spans it exports.
fn subscriber<W>(
    format: LogFormat,
    filter: &str,
    tracer: Option<opentelemetry_sdk::trace::Tracer>,
    writer: W,
) -> impl tracing::Subscriber + Send + Sync + 'static
where
    W: for<'a> tracing_subscriber::fmt::MakeWriter<'a> + Send + Sync + 'static,
{
    let mut filter = EnvFilter::new(filter);
    if let Ok(d) = format!("{}=off", workbench_core::engine::TRACE_TARGET).parse() {
        filter = filter.add_directive(d);
    }
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(writer)
        .with_target(false);
    let fmt = match format {
        LogFormat::Text => fmt.boxed(),
        LogFormat::Json => fmt
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .flatten_event(true)
            .boxed(),
    };
    let otel = tracer.map(|tracer| {
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_threads(false)
            .with_tracked_inactivity(false)
            .with_filter(crate::otel::span_filter())
    });
    tracing_subscriber::registry()
        .with(otel)
        .with(fmt.with_filter(filter))
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use opentelemetry::trace::TracerProvider as _;

    use super::*;

    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn log_lines_inside_an_execution_keep_the_request_span_while_traces_are_on() {
        let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
        let out = Buffer::default();
        let writer = out.clone();
        let sub = subscriber(
            LogFormat::Json,
            "info",
            Some(provider.tracer("test")),
            move || writer.clone(),
        );
        tracing::subscriber::with_default(sub, || {
            let request = tracing::info_span!(target: crate::request_id::SPAN_TARGET, "request", request_id = "req_probe");
            let _r = request.enter();
            let execution = tracing::info_span!(target: workbench_core::engine::TRACE_TARGET, "tool.execute", tool.name = "probe");
            let _e = execution.enter();
            tracing::info!("inside an execution");
        });
        let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
        let line: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
        assert_eq!(
            (
                line["span"]["name"].as_str(),
                line["span"]["request_id"].as_str()
            ),
            (Some("request"), Some("req_probe")),
            "{text}"
        );
    }
}
