//! DNS-rebinding defence for the portal: a request must name workbench in its `Host` header
//! (the public URL's host, loopback names, or an `--allowed-hosts` entry), as /mcp requires.
//! Without it a page on an attacker's domain that resolves to workbench's address would be
//! same-origin with itself and pass the CSRF check (e.g. set up the first admin of a fresh
//! localhost instance).

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::state::AppState;

pub async fn layer(State(state): State<AppState>, req: Request, next: Next) -> Response {
    if host_allowed(req.headers(), &state.config.allowed_hosts) {
        next.run(req).await
    } else {
        tracing::warn!(host = ?req.headers().get(header::HOST), path = %req.uri().path(), "request for an unknown host refused");
        (
            StatusCode::MISDIRECTED_REQUEST,
            "this workbench does not answer to that host name",
        )
            .into_response()
    }
}

/// Whether the `Host` header (port ignored) is one of `allowed` (case-insensitive). A request
/// without one (HTTP/1.0) is refused.
pub fn host_allowed(headers: &HeaderMap, allowed: &[String]) -> bool {
    let Some(host) = headers.get(header::HOST).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host
            .rsplit_once(':')
            .map(|(h, port)| {
                if port.chars().all(|c| c.is_ascii_digit()) {
                    h
                } else {
                    host
                }
            })
            .unwrap_or(host),
    };
    allowed.iter().any(|a| a.eq_ignore_ascii_case(name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn with_host(h: &'static str) -> HeaderMap {
        let mut m = HeaderMap::new();
        m.insert(header::HOST, HeaderValue::from_static(h));
        m
    }

    #[test]
    fn only_our_own_names_pass() {
        let allowed: Vec<String> = ["localhost", "127.0.0.1", "::1", "wb.example.com"]
            .map(String::from)
            .to_vec();
        for ok in [
            "localhost:3000",
            "127.0.0.1:3000",
            "[::1]:3000",
            "WB.example.com",
            "wb.example.com:443",
        ] {
            assert!(host_allowed(&with_host(ok), &allowed), "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:3000",
            "wb.example.com.evil.example",
            "127.0.0.1.nip.io:3000",
        ] {
            assert!(!host_allowed(&with_host(bad), &allowed), "{bad}");
        }
        assert!(!host_allowed(&HeaderMap::new(), &allowed));
    }
}
