//! CSRF defence for everything behind the session cookie: a state-changing request (any method
//! but GET/HEAD/OPTIONS) must come from our own origin, as `Sec-Fetch-Site` and `Origin` say.
//! A request with neither header is refused too: every browser that can carry our cookie sends
//! at least one of them on a POST.

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::state::AppState;

pub async fn layer(State(state): State<AppState>, req: Request, next: Next) -> Response {
    if is_same_origin(req.method(), req.headers(), &state.config.public_origin) {
        next.run(req).await
    } else {
        tracing::warn!(method = %req.method(), path = %req.uri().path(), "cross-site request refused");
        (StatusCode::FORBIDDEN, "cross-site request refused").into_response()
    }
}

/// True for safe methods, and for unsafe ones whose headers prove they come from our origin:
/// `public_origin` or the origin of the `Host` the request was sent to.
pub fn is_same_origin(method: &Method, headers: &HeaderMap, public_origin: &str) -> bool {
    if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
        return true;
    }
    let fetch_site = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok());
    if let Some(site) = fetch_site {
        if !matches!(site, "same-origin" | "none") {
            return false;
        }
    }
    match headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) {
        Some(origin) => origin_matches(origin, headers, public_origin),
        None => fetch_site.is_some(),
    }
}

fn origin_matches(origin: &str, headers: &HeaderMap, public_origin: &str) -> bool {
    if origin.eq_ignore_ascii_case(public_origin) {
        return true;
    }
    let Ok(url) = url::Url::parse(origin) else {
        return false; // includes the opaque "null" origin
    };
    let Some(host) = headers.get(header::HOST).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let authority = match (url.host_str(), url.port()) {
        (Some(h), Some(p)) => format!("{h}:{p}"),
        (Some(h), None) => h.to_string(),
        _ => return false,
    };
    matches!(url.scheme(), "http" | "https") && authority.eq_ignore_ascii_case(host)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_static(v));
        }
        h
    }

    const PUBLIC: &str = "https://wb.example.com";

    #[test]
    fn safe_methods_always_pass() {
        assert!(is_same_origin(
            &Method::GET,
            &headers(&[("origin", "https://evil.example")]),
            PUBLIC
        ));
    }

    #[test]
    fn posts_from_our_origin_pass() {
        assert!(is_same_origin(
            &Method::POST,
            &headers(&[("origin", "https://wb.example.com")]),
            PUBLIC
        ));
        assert!(is_same_origin(
            &Method::POST,
            &headers(&[
                ("origin", "http://127.0.0.1:3000"),
                ("host", "127.0.0.1:3000")
            ]),
            PUBLIC
        ));
        assert!(is_same_origin(
            &Method::POST,
            &headers(&[("sec-fetch-site", "same-origin")]),
            PUBLIC
        ));
    }

    #[test]
    fn cross_site_posts_are_refused() {
        for h in [
            headers(&[
                ("origin", "https://evil.example"),
                ("host", "wb.example.com"),
            ]),
            headers(&[("origin", "null"), ("host", "wb.example.com")]),
            headers(&[
                ("sec-fetch-site", "cross-site"),
                ("origin", "https://wb.example.com"),
            ]),
            headers(&[("sec-fetch-site", "same-site")]),
            headers(&[("host", "wb.example.com")]),
            headers(&[
                ("origin", "https://wb.example.com.evil.example"),
                ("host", "wb.example.com"),
            ]),
        ] {
            assert!(!is_same_origin(&Method::POST, &h, PUBLIC), "{h:?}");
        }
    }
}
