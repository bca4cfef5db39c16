//! The W3C trace context (`traceparent`, `tracestate`) that requests to plugin APIs and upstream
//! MCP servers carry, so their work joins the caller's trace. Core knows no tracing backend: the
//! server installs a provider once at start (the OpenTelemetry propagator over the current
//! span); without one (tracing off) nothing is added. Only these two headers, well formed, ever
//! pass, so nothing but span ids (and the caller's own `tracestate`) can leave this way.

use std::sync::OnceLock;

use reqwest::header::{HeaderName, HeaderValue};

/// The trace headers of the current span.
pub type TraceContextProvider = fn() -> Vec<(HeaderName, HeaderValue)>;

static PROVIDER: OnceLock<TraceContextProvider> = OnceLock::new();

pub static TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
pub static TRACESTATE: HeaderName = HeaderName::from_static("tracestate");

/// Installs the provider (once per process; `false` when one was already set).
pub fn set_trace_context_provider(provider: TraceContextProvider) -> bool {
    PROVIDER.set(provider).is_ok()
}

/// The headers an outbound request should carry now: empty without a provider, and only
/// well-formed `traceparent` / `tracestate` headers with one.
pub fn trace_headers() -> Vec<(HeaderName, HeaderValue)> {
    let Some(provider) = PROVIDER.get() else {
        return Vec::new();
    };
    provider()
        .into_iter()
        .filter(|(name, value)| well_formed(name, value))
        .collect()
}

/// `builder` with the trace headers added.
pub fn with_trace_context(mut builder: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
    for (name, value) in trace_headers() {
        builder = builder.header(name, value);
    }
    builder
}

/// Whether a header names the trace context (a caller's own is replaced by ours).
pub fn is_trace_header(name: &str) -> bool {
    name.eq_ignore_ascii_case("traceparent") || name.eq_ignore_ascii_case("tracestate")
}

fn well_formed(name: &HeaderName, value: &HeaderValue) -> bool {
    let Ok(v) = value.to_str() else { return false };
    if *name == TRACEPARENT {
        traceparent_ok(v)
    } else if *name == TRACESTATE {
        tracestate_ok(v)
    } else {
        false
    }
}

/// `00-<32 hex trace id>-<16 hex span id>-<2 hex flags>`, lowercase, ids not all zero.
fn traceparent_ok(v: &str) -> bool {
    let parts: Vec<&str> = v.split('-').collect();
    let hex = |s: &str, n: usize| {
        s.len() == n && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    };
    parts.len() == 4
        && parts[0] == "00"
        && hex(parts[1], 32)
        && hex(parts[2], 16)
        && hex(parts[3], 2)
        && parts[1].bytes().any(|b| b != b'0')
        && parts[2].bytes().any(|b| b != b'0')
}

/// At most 32 `key=value` members in 512 bytes, with the W3C character sets.
fn tracestate_ok(v: &str) -> bool {
    if v.is_empty() || v.len() > 512 {
        return false;
    }
    let members: Vec<&str> = v
        .split(',')
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .collect();
    members.len() <= 32
        && members.iter().all(|m| {
            let Some((key, value)) = m.split_once('=') else {
                return false;
            };
            let key_ok = !key.is_empty()
                && key.len() <= 256
                && key.bytes().all(
                    |b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'_' | b'-' | b'*' | b'/' | b'@'),
                );
            let value_ok = !value.is_empty()
                && value.len() <= 256
                && value
                    .bytes()
                    .all(|b| (0x20..=0x7e).contains(&b) && b != b',' && b != b'=');
            key_ok && value_ok
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_well_formed_trace_headers_pass() {
        let h = |n: &str, v: &str| {
            well_formed(
                &HeaderName::from_bytes(n.as_bytes()).unwrap(),
                &HeaderValue::from_str(v).unwrap(),
            )
        };
        assert!(h(
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        ));
        assert!(
            !h(
                "traceparent",
                "00-00000000000000000000000000000000-00f067aa0ba902b7-01"
            ),
            "an all-zero trace id is invalid"
        );
        assert!(!h(
            "traceparent",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"
        ));
        assert!(!h(
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra"
        ));
        assert!(!h("traceparent", "Bearer sk-live-0123456789"));
        assert!(h("tracestate", "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"));
        assert!(!h("tracestate", "Key=value"));
        assert!(!h("tracestate", &format!("a={}", "x".repeat(600))));
        assert!(
            !h("authorization", "Bearer x"),
            "no other header can ride along"
        );
        assert!(trace_headers().is_empty(), "no provider: nothing is added");
    }
}
