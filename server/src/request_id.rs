//! A request id for every request: the caller's `X-Request-Id` when it is a plain token (at
//! most 64 letters, digits, `-`, `_`, `.`), else a new `req_…`. Every log line written while
//! the request runs carries it (a `request` span), and every response, errors included,
//! answers it in `X-Request-Id`, so a person reporting an error can be matched to the logs.
//! With tracing on, the same span is the request's trace span (otel.rs): it continues the
//! caller's `traceparent` and carries the response status.

use axum::extract::Request;
use axum::http::{HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;

pub static HEADER: HeaderName = HeaderName::from_static("x-request-id");

/// The target of the request span (declared by `otel`, whose trace layer keeps it).
pub use crate::otel::REQUEST_SPAN_TARGET as SPAN_TARGET;

/// The request's span, for rmcp's handlers: they run inside rmcp's own spans, and enter this
/// one again so their log lines and traces hang off the request.
#[derive(Clone)]
pub struct RequestSpan(pub tracing::Span);

fn usable(v: &str) -> bool {
    !v.is_empty()
        && v.len() <= 64
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

pub async fn layer(mut req: Request, next: Next) -> Response {
    let id = req
        .headers()
        .get(&HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|v| usable(v))
        .map(str::to_owned)
        .unwrap_or_else(|| format!("req_{}", workbench_core::crypto::random_base62(20)));
    let value = HeaderValue::from_str(&id).expect("a request id is a valid header value");
    req.headers_mut().insert(HEADER.clone(), value.clone());
    let span = tracing::info_span!(
        target: SPAN_TARGET,
        "request",
        request_id = %id,
        method = %req.method(),
        path = %req.uri().path(),
        otel.name = tracing::field::Empty,
        otel.kind = tracing::field::Empty,
    );
    crate::otel::continue_trace(&span, &req);
    req.extensions_mut().insert(RequestSpan(span.clone()));
    let started = std::time::Instant::now();
    let request_span = span.clone();
    let mut res = async move {
        let res = next.run(req).await;
        crate::otel::finish(&request_span, res.status());
        // The access log, at debug: `WB_LOG=info,workbench_server=debug` turns it on.
        tracing::debug!(
            status = res.status().as_u16(),
            ms = started.elapsed().as_secs_f64() * 1e3,
            "request finished"
        );
        res
    }
    .instrument(span)
    .await;
    res.headers_mut().insert(HEADER.clone(), value);
    res
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_request_span_target_is_this_modules_path() {
        // Log filters written as `workbench_server::request_id=…` keep matching the span.
        assert_eq!(
            super::SPAN_TARGET,
            module_path!().trim_end_matches("::tests")
        );
    }

    #[test]
    fn only_plain_tokens_are_taken_from_the_caller() {
        assert!(super::usable("4bf92f3577b34da6-a3ce929d0e0e4736"));
        assert!(!super::usable("a b"));
        assert!(!super::usable("x\r\nSet-Cookie: y"));
        assert!(!super::usable(&"a".repeat(65)));
    }
}
