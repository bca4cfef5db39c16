//! search.web against a fake SearXNG and a fake Brave Search API on loopback: one result shape
//! from both, the query options each provider understands, provider errors as TOOL_ERROR with
//! the status, the key never shown, the provider's address checked like any outbound request,
//! and start-up refusing provider settings that could never work.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use clap::Parser;
use serde_json::{json, Value};
use workbench_core::builtin::SearchProvider;

use crate::helpers::{admin_with_key, execute, Options, TestApp};
use crate::{app, db_test};

const BRAVE_KEY: &str = "BSA-test-key-4f9a1c";

#[derive(Default)]
struct Seen {
    /// Query parameters and headers of every request, in order.
    requests: Mutex<Vec<(HashMap<String, String>, HeaderMap)>>,
}

async fn searxng(
    State(seen): State<Arc<Seen>>,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    seen.requests.lock().unwrap().push((q.clone(), headers));
    if q.get("format").map(String::as_str) != Some("json") {
        return StatusCode::FORBIDDEN.into_response();
    }
    match q.get("q").map(String::as_str) {
        Some(s) if s.starts_with("boom") => {
            return (StatusCode::INTERNAL_SERVER_ERROR, "upstream engines failed").into_response()
        }
        Some(s) if s.starts_with("garbage") => return "<html>not json</html>".into_response(),
        _ => {}
    }
    Json(json!({
        "query": q.get("q"),
        "results": [
            { "title": "The <b>Rust</b> Book", "url": "https://doc.rust-lang.org/book/", "content": "Learn <b>Rust</b> &amp; more", "publishedDate": "2024-05-01T00:00:00" },
            { "title": "tokio", "url": "https://tokio.rs/", "content": "An async runtime", "publishedDate": null },
            { "title": "no url" },
            { "title": "axum", "url": "https://docs.rs/axum", "content": "Web framework" }
        ]
    }))
    .into_response()
}

async fn brave(
    State(seen): State<Arc<Seen>>,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let ok = headers
        .get("x-subscription-token")
        .and_then(|v| v.to_str().ok())
        == Some(BRAVE_KEY);
    seen.requests.lock().unwrap().push((q.clone(), headers));
    if !ok {
        return (StatusCode::UNAUTHORIZED, Json(json!({ "error": { "detail": "invalid subscription token", "code": "SUBSCRIPTION_TOKEN_INVALID" } }))).into_response();
    }
    Json(json!({
        "type": "search",
        "web": { "results": [
            { "title": "Brave <strong>result</strong>", "url": "https://example.org/a", "description": "A <strong>snippet</strong>", "page_age": "2025-01-02T03:04:05" },
            { "title": "Second", "url": "https://example.org/b", "description": "Another" }
        ] }
    }))
    .into_response()
}

async fn start_fake() -> (SocketAddr, Arc<Seen>) {
    let seen = Arc::new(Seen::default());
    let app = Router::new()
        .route("/searx/search", get(searxng))
        .route("/res/v1/web/search", get(brave))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (addr, seen)
}

fn searx_at(addr: SocketAddr) -> SearchProvider {
    SearchProvider::searxng(format!("http://{addr}/searx").parse().unwrap())
}

fn brave_at(addr: SocketAddr, key: &str) -> SearchProvider {
    SearchProvider::brave(
        format!("http://{addr}/res/v1/web/search").parse().unwrap(),
        key.to_owned(),
    )
}

async fn search(app: &TestApp, key: &str, args: Value) -> Value {
    execute(app, key, json!([{ "tool": "search.web", "args": args }]))
        .await
        .remove(0)
}

fn tool_error(out: &Value) -> String {
    assert_eq!(out["code"], "TOOL_ERROR", "{out}");
    out["handler_error"].as_str().unwrap().to_owned()
}

db_test!(
    search_web_says_which_setting_to_set_when_no_provider_is_configured,
    |backend| {
        let app = app!(backend);
        let (_, key) = admin_with_key(&app).await;
        let out = search(&app, &key, json!({ "query": "rust async" })).await;
        assert_eq!(out["code"], "UNAVAILABLE", "{out}");
        let msg = out.to_string();
        assert!(
            msg.contains("WB_SEARXNG_URL") && msg.contains("BRAVE_SEARCH_API_KEY"),
            "{msg}"
        );
    }
);

db_test!(
    search_web_through_searxng_returns_plain_results_with_the_options_applied,
    |backend| {
        let (addr, seen) = start_fake().await;
        let app = app!(
            backend,
            Options {
                egress_allow_private: vec!["127.0.0.1"],
                web_search: Some(searx_at(addr)),
                ..Default::default()
            }
        );
        let (_, key) = admin_with_key(&app).await;
        let out = search(&app, &key, json!({ "query": "rust book", "count": 2, "site": "doc.rust-lang.org", "freshness": "week" })).await;
        assert_eq!(
            out["result"],
            json!({ "results": [
            { "title": "The Rust Book", "url": "https://doc.rust-lang.org/book/", "snippet": "Learn Rust & more", "published": "2024-05-01T00:00:00" },
            { "title": "tokio", "url": "https://tokio.rs/", "snippet": "An async runtime" }
        ] }),
            "{out}"
        );
        let (q, _) = seen.requests.lock().unwrap().last().cloned().unwrap();
        assert_eq!(q["q"], "rust book site:doc.rust-lang.org");
        assert_eq!(q["format"], "json");
        assert_eq!(q["time_range"], "week");
        // A result without a URL is dropped, so the default count returns the other three.
        let all = search(&app, &key, json!({ "query": "rust" })).await;
        assert_eq!(
            all["result"]["results"].as_array().unwrap().len(),
            3,
            "{all}"
        );
        // A bad argument is answered before anything is sent.
        let before = seen.requests.lock().unwrap().len();
        let bad = search(&app, &key, json!({ "query": "x", "count": 21 })).await;
        assert_eq!(bad["code"], "INVALID_ARGUMENTS", "{bad}");
        let bad = search(
            &app,
            &key,
            json!({ "query": "x", "site": "evil.com&format=html" }),
        )
        .await;
        assert_eq!(bad["code"], "INVALID_ARGUMENTS", "{bad}");
        assert_eq!(seen.requests.lock().unwrap().len(), before);
    }
);

db_test!(
    search_web_through_brave_sends_the_key_and_never_shows_it,
    |backend| {
        let (addr, seen) = start_fake().await;
        let app = app!(
            backend,
            Options {
                egress_allow_private: vec!["127.0.0.1"],
                web_search: Some(brave_at(addr, BRAVE_KEY)),
                ..Default::default()
            }
        );
        let (_, key) = admin_with_key(&app).await;
        let out = search(
            &app,
            &key,
            json!({ "query": "workbench", "count": 5, "freshness": "day" }),
        )
        .await;
        assert_eq!(
            out["result"]["results"][0],
            json!({ "title": "Brave result", "url": "https://example.org/a", "snippet": "A snippet", "published": "2025-01-02T03:04:05" }),
            "{out}"
        );
        let (q, headers) = seen.requests.lock().unwrap().last().cloned().unwrap();
        assert_eq!(
            (
                q["q"].as_str(),
                q["count"].as_str(),
                q["freshness"].as_str()
            ),
            ("workbench", "5", "pd")
        );
        assert_eq!(headers["x-subscription-token"], BRAVE_KEY);
        // The audit trail of the call holds no key.
        let audit: Value = app
            .http()
            .get(app.url("/v1/audit?tool=search.web"))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let id = audit["data"][0]["id"]
            .as_str()
            .unwrap_or_else(|| panic!("no audit row: {audit}"))
            .to_owned();
        let detail = app
            .http()
            .get(app.url(&format!("/v1/audit/{id}")))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(
            detail.contains("search.web") && !detail.contains(BRAVE_KEY),
            "{detail}"
        );
    }
);

db_test!(
    search_provider_failures_are_tool_errors_with_the_status_and_a_hint,
    |backend| {
        let (addr, _) = start_fake().await;
        let app = app!(
            backend,
            Options {
                egress_allow_private: vec!["127.0.0.1"],
                web_search: Some(searx_at(addr)),
                ..Default::default()
            }
        );
        let (_, key) = admin_with_key(&app).await;
        let msg = tool_error(&search(&app, &key, json!({ "query": "boom" })).await);
        assert!(msg.contains("SearXNG answered HTTP 500"), "{msg}");
        let msg = tool_error(&search(&app, &key, json!({ "query": "garbage" })).await);
        assert!(msg.contains("not JSON"), "{msg}");

        let wrong = app!(
            backend,
            Options {
                egress_allow_private: vec!["127.0.0.1"],
                web_search: Some(brave_at(addr, "not-the-key")),
                ..Default::default()
            }
        );
        let (_, key) = admin_with_key(&wrong).await;
        let out = search(&wrong, &key, json!({ "query": "x" })).await;
        let msg = tool_error(&out);
        assert!(
            msg.contains("Brave Search answered HTTP 401")
                && msg.contains("check BRAVE_SEARCH_API_KEY"),
            "{msg}"
        );
        assert!(!out.to_string().contains("not-the-key"), "{out}");
    }
);

db_test!(
    a_search_provider_on_a_private_address_is_refused_unless_the_operator_allows_it,
    |backend| {
        let (addr, seen) = start_fake().await;
        let app = app!(
            backend,
            Options {
                web_search: Some(searx_at(addr)),
                ..Default::default()
            }
        );
        let (_, key) = admin_with_key(&app).await;
        let msg = tool_error(&search(&app, &key, json!({ "query": "rust" })).await);
        assert!(
            msg.starts_with("refusing to connect to the search provider")
                && msg.contains("--egress-allow-private"),
            "{msg}"
        );
        assert!(
            seen.requests.lock().unwrap().is_empty(),
            "nothing reached the provider"
        );
    }
);

#[test]
fn start_up_refuses_search_settings_that_could_never_work() {
    let parse = |args: &[&str]| {
        let cli = workbench_server::cli::Cli::try_parse_from(
            std::iter::once("workbench").chain(args.iter().copied()),
        )
        .unwrap();
        workbench_server::config::ServerConfig::from_args(&cli.serve)
    };
    let both = parse(&[
        "--searxng-url",
        "https://searx.example",
        "--brave-search-api-key",
        "k",
    ])
    .unwrap_err()
    .to_string();
    assert!(both.contains("not both"), "{both}");
    let private = parse(&["--searxng-url", "http://10.1.2.3:8080"])
        .unwrap_err()
        .to_string();
    assert!(private.contains("--egress-allow-private"), "{private}");
    let allowed = parse(&[
        "--searxng-url",
        "http://10.1.2.3:8080",
        "--egress-allow-private",
        "10.1.2.3",
    ])
    .unwrap();
    assert!(matches!(
        allowed.web_search,
        Some(SearchProvider::Searxng { .. })
    ));
    let creds = parse(&["--searxng-url", "https://u:p@searx.example"])
        .unwrap_err()
        .to_string();
    assert!(
        creds.contains("credentials") && !creds.contains("u:p@"),
        "{creds}"
    );
    let brave = parse(&["--brave-search-api-key", "BSA-distinct-key-77"]).unwrap();
    assert!(matches!(
        brave.web_search,
        Some(SearchProvider::Brave { .. })
    ));
    assert!(
        !format!("{brave:?}").contains("BSA-distinct-key-77"),
        "the key is not in the configuration's debug output"
    );
}
