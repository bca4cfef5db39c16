//! OpenTelemetry traces over OTLP/HTTP (protobuf), off unless a collector is named
//! (`--otlp-endpoint`, see config.rs). The request span (request_id.rs) and the `tool.execute`
//! spans core opens become OTel spans, batched and exported; an incoming W3C `traceparent`
//! continues the caller's trace, and the requests core sends to plugin APIs and upstream MCP
//! servers carry the current one (core's trace-context hook, installed here). Only those spans
//! are exported, never log events, so no argument, result or secret reaches a collector.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::extract::{MatchedPath, Request};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{Status, TraceContextExt, TracerProvider as _};
use opentelemetry::KeyValue;
use opentelemetry_http::{Bytes, HeaderExtractor, HeaderInjector, HttpClient, HttpError};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracerProvider, Tracer};
use opentelemetry_sdk::Resource;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::filter::{filter_fn, FilterFn, LevelFilter};
use url::Url;

/// Whether spans are exported (a provider was started).
static EXPORTING: AtomicBool = AtomicBool::new(false);

/// The `service.name` unless `OTEL_SERVICE_NAME` says otherwise.
pub const SERVICE_NAME: &str = "workbench";
/// How long one export may take.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long shutting down may take to send what is still queued.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

pub fn exporting() -> bool {
    EXPORTING.load(Ordering::Relaxed)
}

/// A tracer provider exporting to `endpoint` (the collector's `/v1/traces`), its HTTP requests
/// run on `runtime` (the SDK's batch processor works on a thread of its own). Installs the
/// trace-context hook of core's outbound clients.
pub fn start(
    endpoint: &Url,
    runtime: tokio::runtime::Handle,
) -> Result<(SdkTracerProvider, Tracer), String> {
    let client = reqwest::Client::builder()
        .timeout(EXPORT_TIMEOUT)
        .user_agent(concat!("workbench/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| format!("cannot build the OTLP client: {e}"))?;
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(endpoint.as_str())
        .with_http_client(OtlpHttp { client, runtime })
        .build()
        .map_err(|e| format!("cannot set up the OTLP exporter: {e}"))?;
    let mut resource = Resource::builder();
    if std::env::var("OTEL_SERVICE_NAME").map_or(true, |v| v.trim().is_empty()) {
        resource = resource.with_service_name(SERVICE_NAME);
    }
    let resource = resource
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
        .build();
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build();
    let tracer = provider.tracer("workbench");
    workbench_core::egress::trace_context::set_trace_context_provider(outbound_trace_headers);
    EXPORTING.store(true, Ordering::Relaxed);
    Ok((provider, tracer))
}

/// Sends what is still queued and stops the exporter. Call it outside async code, while the
/// runtime the exporter was given still runs.
pub fn shutdown(provider: SdkTracerProvider) {
    if let Err(e) = provider.shutdown_with_timeout(SHUTDOWN_TIMEOUT) {
        tracing::warn!(error = %e, "queued trace spans were not all exported at shutdown");
    }
}

/// The target of the request span `request_id` opens; the trace layer keeps spans of it.
pub const REQUEST_SPAN_TARGET: &str = "workbench_server::request_id";

/// What the OpenTelemetry layer sees: the request span and core's trace spans, no events
/// (log lines can quote errors; a trace holds only what the spans record).
pub fn span_filter() -> FilterFn<impl Fn(&tracing::Metadata<'_>) -> bool> {
    filter_fn(|m: &tracing::Metadata<'_>| {
        m.is_span()
            && (m.target() == workbench_core::engine::TRACE_TARGET
                || m.target() == REQUEST_SPAN_TARGET)
    })
    .with_max_level_hint(LevelFilter::INFO)
}

/// The request span continues the caller's trace (a valid `traceparent`) and is named for
/// its route. Nothing happens when tracing is off.
pub fn continue_trace(span: &Span, req: &Request) {
    if !exporting() {
        return;
    }
    let parent = TraceContextPropagator::new().extract(&HeaderExtractor(req.headers()));
    if parent.span().span_context().is_valid() {
        let _ = span.set_parent(parent);
    }
    let name = match req.extensions().get::<MatchedPath>() {
        Some(route) => format!("{} {}", req.method(), route.as_str()),
        None => req.method().to_string(),
    };
    span.record("otel.name", name);
    span.record("otel.kind", "server");
}

/// The response's status on the request span (an error status for 5xx).
pub fn finish(span: &Span, status: StatusCode) {
    if !exporting() {
        return;
    }
    span.set_attribute("http.response.status_code", i64::from(status.as_u16()));
    if status.is_server_error() {
        span.set_status(Status::error(""));
    }
}

/// `traceparent` (and `tracestate`) of the current OpenTelemetry context, derived from its span
/// ids by the W3C propagator; nothing outside a sampled or remote trace.
fn outbound_trace_headers() -> Vec<(HeaderName, HeaderValue)> {
    let cx = opentelemetry::Context::current();
    if !cx.span().span_context().is_valid() {
        return Vec::new();
    }
    let mut headers = axum::http::HeaderMap::new();
    TraceContextPropagator::new().inject_context(&cx, &mut HeaderInjector(&mut headers));
    headers
        .into_iter()
        .filter_map(|(name, value)| Some((name?, value)))
        .collect()
}

/// The exporter's HTTP client: the workspace's reqwest, each request run on the tokio runtime
/// (the batch processor calls from its own thread, outside any runtime).
#[derive(Debug)]
struct OtlpHttp {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

/// The most of a collector's answer read.
const MAX_ANSWER_BYTES: usize = 1024 * 1024;

#[async_trait::async_trait]
impl HttpClient for OtlpHttp {
    async fn send_bytes(
        &self,
        request: axum::http::Request<Bytes>,
    ) -> Result<axum::http::Response<Bytes>, HttpError> {
        let request = reqwest::Request::try_from(request)?;
        let client = self.client.clone();
        let sent = self.runtime.spawn(async move {
            let mut res = client.execute(request).await?;
            let status = res.status();
            let headers = std::mem::take(res.headers_mut());
            let mut body = Vec::new();
            while let Some(chunk) = res.chunk().await? {
                if body.len() + chunk.len() > MAX_ANSWER_BYTES {
                    break;
                }
                body.extend_from_slice(&chunk);
            }
            Ok::<_, reqwest::Error>((status, headers, body))
        });
        let (status, headers, body) = sent.await??;
        let mut response = axum::http::Response::new(Bytes::from(body));
        *response.status_mut() = status;
        *response.headers_mut() = headers;
        Ok(response)
    }
}
