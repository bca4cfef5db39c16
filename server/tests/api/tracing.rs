//! OpenTelemetry traces (off by default): the real `workbench` binary exporting over OTLP/HTTP
//! to a fake collector on loopback. A caller's `traceparent` is continued by the request span,
//! each execution is a `tool.execute` child carrying tool, surface and outcome (never arguments,
//! results or keys), the trace reaches plugin APIs and upstream MCP servers in `traceparent`,
//! queued spans are sent at shutdown, and with tracing off nothing is sent anywhere.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use axum::Router;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use prost::Message;
use serde_json::{json, Value};

use crate::helpers::temp_dir;
use crate::{fake_upstream, fakes};

/// One exported span, flattened.
#[derive(Debug, Clone)]
struct Exported {
    service: String,
    trace_id: String,
    span_id: String,
    parent_span_id: String,
    name: String,
    attributes: BTreeMap<String, String>,
}

#[derive(Default)]
struct Collected {
    spans: Vec<Exported>,
    /// Every request body as received (protobuf keeps strings as they are).
    raw: Vec<Vec<u8>>,
}

/// A fake OTLP/HTTP collector: `POST /v1/traces` with a protobuf body.
struct Collector {
    addr: SocketAddr,
    got: Arc<Mutex<Collected>>,
}

impl Collector {
    fn spans(&self) -> Vec<Exported> {
        self.got.lock().unwrap().spans.clone()
    }

    fn raw_contains(&self, needle: &str) -> bool {
        self.got
            .lock()
            .unwrap()
            .raw
            .iter()
            .any(|b| b.windows(needle.len()).any(|w| w == needle.as_bytes()))
    }
}

fn text(v: &Option<opentelemetry_proto::tonic::common::v1::AnyValue>) -> String {
    match v.as_ref().and_then(|v| v.value.as_ref()) {
        Some(AnyValue::StringValue(s)) => s.clone(),
        Some(AnyValue::IntValue(i)) => i.to_string(),
        Some(AnyValue::BoolValue(b)) => b.to_string(),
        Some(AnyValue::DoubleValue(d)) => d.to_string(),
        other => format!("{other:?}"),
    }
}

async fn receive(
    State(got): State<Arc<Mutex<Collected>>>,
    body: Bytes,
) -> ([(&'static str, &'static str); 1], Vec<u8>) {
    let req = ExportTraceServiceRequest::decode(body.as_ref()).expect("an OTLP protobuf export");
    let mut got = got.lock().unwrap();
    got.raw.push(body.to_vec());
    for rs in req.resource_spans {
        let service = rs
            .resource
            .as_ref()
            .and_then(|r| r.attributes.iter().find(|a| a.key == "service.name"))
            .map(|a| text(&a.value))
            .unwrap_or_default();
        for ss in rs.scope_spans {
            for s in ss.spans {
                got.spans.push(Exported {
                    service: service.clone(),
                    trace_id: hex(&s.trace_id),
                    span_id: hex(&s.span_id),
                    parent_span_id: hex(&s.parent_span_id),
                    name: s.name.clone(),
                    attributes: s
                        .attributes
                        .iter()
                        .map(|a| (a.key.clone(), text(&a.value)))
                        .collect(),
                });
            }
        }
    }
    ([("content-type", "application/x-protobuf")], Vec::new())
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

async fn start_collector() -> Collector {
    let got = Arc::new(Mutex::new(Collected::default()));
    let app = Router::new()
        .route("/v1/traces", post(receive))
        .with_state(got.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Collector { addr, got }
}

/// A database with an admin and their API key, made with the CLI as an operator would.
fn provision(dir: &Path) -> (String, String) {
    let url = format!("sqlite://{}?mode=rwc", dir.join("wb.db").display());
    let key = crate::cli::provision_with_cli(&url);
    (url, key)
}

/// The binary serving on a free port, with `extra` flags and environment; its log goes to
/// `<dir>/stderr.log`.
struct Served {
    child: Child,
    base: String,
    log: PathBuf,
}

impl Served {
    async fn start(dir: &Path, db: &str, extra: &[&str], env: &[(&str, &str)]) -> Served {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log = dir.join("stderr.log");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_workbench"));
        cmd.args([
            "serve",
            "--database-url",
            db,
            "--bind",
            &format!("127.0.0.1:{port}"),
            "--egress-allow-private",
            "127.0.0.1",
        ])
        .arg("--data-dir")
        .arg(dir)
        .arg("--site-root")
        .arg(dir.join("site"))
        .args(extra)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap());
        for v in [
            "WB_DATABASE_URL",
            "WB_OTLP_ENDPOINT",
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            "OTEL_SERVICE_NAME",
            "OTEL_BSP_SCHEDULE_DELAY",
        ] {
            cmd.env_remove(v);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        let served = Served {
            child: cmd.spawn().unwrap(),
            base: format!("http://127.0.0.1:{port}"),
            log,
        };
        let http = reqwest::Client::new();
        for _ in 0..300 {
            if http
                .get(served.url("/healthz"))
                .send()
                .await
                .is_ok_and(|r| r.status() == 200)
            {
                return served;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("workbench did not start: {}", served.log());
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGTERM, as systemd stops it, and the wait for it to exit.
    async fn terminate(mut self) -> String {
        let pid = self.child.id().to_string();
        assert!(Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success());
        for _ in 0..600 {
            if self.child.try_wait().unwrap().is_some() {
                return self.log();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let _ = self.child.kill();
        panic!(
            "workbench did not stop within 60 s of SIGTERM: {}",
            self.log()
        );
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An app of the project whose one tool POSTs to the fake API's `/echo`.
fn echo_app(base: &str) -> Value {
    json!({
        "name": "teamecho",
        "display_name": "Echo service",
        "version": "1.0.0",
        "base_url": base,
        "auth": { "type": "none" },
        "tools": [{
            "name": "teamecho_echo_message",
            "description": "Echo a message back through the team's echo service.",
            "side_effects": "none",
            "input_schema": { "type": "object", "required": ["message"], "properties": { "message": { "type": "string" } } },
            "request": { "method": "POST", "path": "/echo", "body": { "message": "$message" } },
            "result": { "fields": ["method", "body"] }
        }]
    })
}

/// The app and the fake upstream (as `fake.`) registered in the key's project.
async fn register_tools(
    wb: &Served,
    key: &str,
    echo: &fakes::FakeApi,
    up: &fake_upstream::FakeUpstream,
) {
    let http = reqwest::Client::new();
    let res = http
        .post(wb.url("/v1/apps"))
        .bearer_auth(key)
        .json(&echo_app(&echo.url("")))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    let server = json!({ "name": "fake", "transport": "http", "url": up.url(), "auth": { "type": "none" }, "timeout_ms": 5000, "max_concurrency": 4 });
    let res = http
        .post(wb.url("/v1/mcp/servers"))
        .bearer_auth(key)
        .json(&server)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
}

/// `execute_tools` over /mcp with the given `traceparent`; the results. A plain call takes the
/// fast path (a task of its own); `_meta` sends it through rmcp's service loop.
async fn execute_traced(
    wb: &Served,
    key: &str,
    traceparent: &str,
    executions: Value,
) -> Vec<Value> {
    execute_traced_with(
        wb,
        key,
        traceparent,
        json!({ "name": "execute_tools", "arguments": { "executions": executions } }),
    )
    .await
}

async fn execute_traced_with(
    wb: &Served,
    key: &str,
    traceparent: &str,
    params: Value,
) -> Vec<Value> {
    let res = reqwest::Client::new()
        .post(wb.url("/mcp"))
        .bearer_auth(key)
        .header("accept", "application/json, text/event-stream")
        .header("traceparent", traceparent)
        .json(&json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let body: Value = res.json().await.unwrap();
    body["result"]["structuredContent"]["results"]
        .as_array()
        .unwrap_or_else(|| panic!("no results in {body}"))
        .clone()
}

/// The `traceparent` the fake API's last `/echo` request carried.
fn echoed_traceparent(echo: &fakes::FakeApi) -> Option<String> {
    let last = echo.state.last.lock().unwrap();
    let (headers, _) = last.as_ref().expect("the app's API was called");
    assert!(
        headers.get_all("traceparent").iter().count() <= 1,
        "one traceparent at most: {headers:?}"
    );
    headers
        .get("traceparent")
        .map(|v| v.to_str().unwrap().to_owned())
}

/// Polls until `ok` holds for the collected spans (the batch goes out every 100 ms here).
async fn wait_for_spans(
    c: &Collector,
    what: &str,
    ok: impl Fn(&[Exported]) -> bool,
) -> Vec<Exported> {
    for _ in 0..300 {
        let spans = c.spans();
        if ok(&spans) {
            return spans;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting for {what}; collected {:#?}", c.spans());
}

const CALLER_SPAN: &str = "00f067aa0ba902b7";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callers_trace_gets_a_span_per_execution_and_reaches_plugin_apis_and_upstreams_without_arguments(
) {
    let dir = temp_dir("traces-on");
    let (db, key) = provision(&dir);
    let collector = start_collector().await;
    let echo = fakes::start().await;
    let up = fake_upstream::start().await;
    let endpoint = format!("http://{}", collector.addr);
    let wb = Served::start(
        &dir,
        &db,
        &["--otlp-endpoint", &endpoint],
        &[("OTEL_BSP_SCHEDULE_DELAY", "100")],
    )
    .await;
    register_tools(&wb, &key, &echo, &up).await;

    // REST invoke, inside the caller's trace.
    let rest_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let rest_argument = "rest-argument-value-7c1d9e";
    let res = reqwest::Client::new()
        .post(wb.url("/v1/tools/invoke"))
        .bearer_auth(&key)
        .header("traceparent", format!("00-{rest_trace}-{CALLER_SPAN}-01"))
        .json(
            &json!({ "tool": "teamecho_echo_message", "arguments": { "message": rest_argument } }),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let call: Value = res.json().await.unwrap();
    assert_eq!(call["status"], "succeeded", "{call}");
    let sent_to_api = echoed_traceparent(&echo).expect("the plugin API got a traceparent");
    let parts: Vec<&str> = sent_to_api.split('-').collect();
    assert_eq!(
        (parts[0], parts[1], parts[3]),
        ("00", rest_trace, "01"),
        "{sent_to_api}"
    );
    assert_ne!(
        parts[2], CALLER_SPAN,
        "the API's parent is workbench's span, not the caller's"
    );

    // A batch over /mcp, inside another trace: an upstream tool, the app's tool, an unknown tool.
    let mcp_trace = "a3ce929d0e0e47364bf92f3577b34da6";
    let mcp_argument = "mcp-argument-value-5e2b8f";
    let out = execute_traced(
        &wb,
        &key,
        &format!("00-{mcp_trace}-{CALLER_SPAN}-01"),
        json!([
            { "tool": "fake.echo", "args": { "message": mcp_argument } },
            { "tool": "teamecho_echo_message", "args": { "message": mcp_argument } },
            { "tool": "no_such_tool_anywhere", "args": {} }
        ]),
    )
    .await;
    assert!(
        out[0]["result"] == format!("Echo: {mcp_argument}")
            && out[1]["result"].is_object()
            && out[2]["code"] == "TOOL_NOT_FOUND",
        "{out:?}"
    );
    let upstream_call = up
        .state
        .traceparents
        .lock()
        .unwrap()
        .iter()
        .rev()
        .find(|(m, _)| m == "tools/call")
        .cloned();
    let upstream_traceparent = upstream_call
        .and_then(|(_, t)| t)
        .expect("the upstream's tools/call carried a traceparent");
    assert_eq!(
        upstream_traceparent.split('-').nth(1),
        Some(mcp_trace),
        "{upstream_traceparent}"
    );

    // The same through rmcp (a `_meta` leaves the fast path).
    let rmcp_trace = "e47364bf92f3577b34da6a3ce929d0e0";
    let params = json!({ "name": "execute_tools", "arguments": { "executions": [{ "tool": "teamecho_echo_message", "args": { "message": mcp_argument } }] }, "_meta": { "progressToken": 7 } });
    let out = execute_traced_with(
        &wb,
        &key,
        &format!("00-{rmcp_trace}-{CALLER_SPAN}-01"),
        params,
    )
    .await;
    assert!(out[0]["result"].is_object(), "{out:?}");

    let done = |spans: &[Exported]| {
        let tools = |trace: &str| {
            spans
                .iter()
                .filter(|s| s.trace_id == trace && s.name == "tool.execute")
                .count()
        };
        let requests = |trace: &str| {
            spans
                .iter()
                .filter(|s| s.trace_id == trace && s.parent_span_id == CALLER_SPAN)
                .count()
        };
        tools(rest_trace) >= 1
            && tools(mcp_trace) >= 3
            && tools(rmcp_trace) >= 1
            && [rest_trace, mcp_trace, rmcp_trace]
                .iter()
                .all(|t| requests(t) == 1)
    };
    let spans = wait_for_spans(&collector, "both traces", done).await;

    // The REST request: one server span continuing the caller's, with the status.
    let request = spans
        .iter()
        .find(|s| s.trace_id == rest_trace && s.parent_span_id == CALLER_SPAN)
        .unwrap();
    assert_eq!(request.service, "workbench");
    assert!(
        request.name.starts_with("POST /v1/tools/invoke"),
        "{request:?}"
    );
    assert_eq!(
        request
            .attributes
            .get("http.response.status_code")
            .map(String::as_str),
        Some("200"),
        "{request:?}"
    );
    assert!(
        request
            .attributes
            .get("request_id")
            .is_some_and(|id| !id.is_empty()),
        "{request:?}"
    );
    let execution = spans
        .iter()
        .find(|s| s.trace_id == rest_trace && s.name == "tool.execute")
        .unwrap();
    assert_eq!(
        execution.parent_span_id, request.span_id,
        "the execution is the request's child"
    );
    let attr = |s: &Exported, k: &str| s.attributes.get(k).cloned().unwrap_or_default();
    assert_eq!(
        (
            attr(execution, "tool.name"),
            attr(execution, "tool.surface"),
            attr(execution, "tool.outcome"),
            attr(execution, "tool.status")
        ),
        (
            "teamecho_echo_message".into(),
            "rest".into(),
            "ok".into(),
            "succeeded".into()
        )
    );
    assert!(
        attr(execution, "tool.duration_ms").parse::<u64>().is_ok(),
        "{execution:?}"
    );
    assert_eq!(
        attr(execution, "tool.call_id"),
        call["id"].as_str().unwrap(),
        "the span names the call the audit log has"
    );
    assert_eq!(
        parts[2], execution.span_id,
        "the plugin API's parent span is the execution's"
    );

    // The batch: one request span, one child per execution, the upstream called inside its own.
    let request = spans
        .iter()
        .find(|s| s.trace_id == mcp_trace && s.parent_span_id == CALLER_SPAN)
        .unwrap();
    assert!(request.name.starts_with("POST"), "{request:?}");
    let executions: Vec<&Exported> = spans
        .iter()
        .filter(|s| s.trace_id == mcp_trace && s.name == "tool.execute")
        .collect();
    assert!(
        executions
            .iter()
            .all(|e| e.parent_span_id == request.span_id && attr(e, "tool.surface") == "mcp"),
        "{executions:#?}"
    );
    let by_tool = |name: &str| {
        *executions
            .iter()
            .find(|e| attr(e, "tool.name") == name)
            .unwrap_or_else(|| panic!("no span for {name}: {executions:#?}"))
    };
    assert_eq!(attr(by_tool("fake.echo"), "tool.outcome"), "ok");
    assert_eq!(
        upstream_traceparent.split('-').nth(2),
        Some(by_tool("fake.echo").span_id.as_str()),
        "the upstream's parent span is its execution's"
    );
    assert_eq!(attr(by_tool("teamecho_echo_message"), "tool.outcome"), "ok");
    let unknown = by_tool("(unknown tool)");
    assert_eq!(
        (attr(unknown, "tool.outcome"), attr(unknown, "tool.status")),
        ("TOOL_NOT_FOUND".into(), "failed".into()),
        "made-up names share one name, as in the metrics"
    );

    let request = spans
        .iter()
        .find(|s| s.trace_id == rmcp_trace && s.parent_span_id == CALLER_SPAN)
        .unwrap();
    let execution = spans
        .iter()
        .find(|s| s.trace_id == rmcp_trace && s.name == "tool.execute")
        .unwrap();
    assert_eq!(
        execution.parent_span_id, request.span_id,
        "rmcp's task keeps the request's span"
    );

    // Never an argument, a made-up tool name, or the API key.
    for needle in [
        rest_argument,
        mcp_argument,
        "no_such_tool_anywhere",
        key.as_str(),
    ] {
        assert!(
            !collector.raw_contains(needle),
            "{needle} reached the collector"
        );
    }
    assert!(wb.terminate().await.contains("exporting traces over OTLP"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_still_queued_at_shutdown_are_exported_before_the_process_exits() {
    let dir = temp_dir("traces-flush");
    let (db, _key) = provision(&dir);
    let collector = start_collector().await;
    let endpoint = format!("http://{}/", collector.addr);
    // A schedule far longer than the test: only the shutdown can send the span.
    let wb = Served::start(
        &dir,
        &db,
        &["--otlp-endpoint", &endpoint],
        &[
            ("OTEL_BSP_SCHEDULE_DELAY", "600000"),
            ("OTEL_SERVICE_NAME", "wb-canary"),
        ],
    )
    .await;
    let trace = "0af7651916cd43dd8448eb211c80319c";
    let res = reqwest::Client::new()
        .get(wb.url("/healthz"))
        .header("traceparent", format!("00-{trace}-b7ad6b7169203331-01"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert!(
        collector.spans().is_empty(),
        "nothing is sent before the schedule or the shutdown"
    );
    let log = wb.terminate().await;
    let spans = collector.spans();
    let request = spans
        .iter()
        .find(|s| s.trace_id == trace)
        .unwrap_or_else(|| panic!("not exported at shutdown: {spans:#?}\n{log}"));
    assert_eq!(
        (request.parent_span_id.as_str(), request.service.as_str()),
        ("b7ad6b7169203331", "wb-canary"),
        "OTEL_SERVICE_NAME names the service"
    );
    assert!(request.name.starts_with("GET /healthz"), "{request:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_tracing_off_no_trace_context_leaves_and_nothing_is_exported() {
    let dir = temp_dir("traces-off");
    let (db, key) = provision(&dir);
    let collector = start_collector().await;
    let echo = fakes::start().await;
    let up = fake_upstream::start().await;
    let wb = Served::start(&dir, &db, &[], &[("OTEL_BSP_SCHEDULE_DELAY", "100")]).await;
    register_tools(&wb, &key, &echo, &up).await;
    let traceparent = format!("00-4bf92f3577b34da6a3ce929d0e0e4736-{CALLER_SPAN}-01");
    let res = reqwest::Client::new()
        .post(wb.url("/v1/tools/invoke"))
        .bearer_auth(&key)
        .header("traceparent", &traceparent)
        .json(&json!({ "tool": "teamecho_echo_message", "arguments": { "message": "hello" } }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(
        echoed_traceparent(&echo),
        None,
        "the caller's trace context is not passed on either"
    );
    let out = execute_traced(
        &wb,
        &key,
        &traceparent,
        json!([{ "tool": "fake.echo", "args": { "message": "hello" } }]),
    )
    .await;
    assert_eq!(out[0]["result"], "Echo: hello", "{out:?}");
    let sent = up.state.traceparents.lock().unwrap().clone();
    assert!(sent.iter().any(|(m, _)| m == "tools/call"), "{sent:?}");
    assert!(
        sent.iter().all(|(_, t)| t.is_none()),
        "no traceparent to the upstream: {sent:?}"
    );
    let log = wb.terminate().await;
    assert!(!log.contains("exporting traces"), "{log}");
    assert!(
        collector.spans().is_empty() && !collector.raw_contains("workbench"),
        "nothing was exported"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_unusable_otlp_endpoint_is_named_at_start_with_the_other_problems() {
    use clap::Parser;
    use workbench_server::config::{otlp_traces_endpoint, ServerConfig};
    let cli = |args: &[&str]| {
        workbench_server::cli::Cli::try_parse_from(
            std::iter::once("workbench").chain(args.iter().copied()),
        )
        .unwrap()
    };
    let err = ServerConfig::from_args(
        &cli(&[
            "--otlp-endpoint",
            "ftp://collector:4318",
            "--metrics-token",
            "short",
        ])
        .serve,
    )
    .unwrap_err()
    .to_string();
    assert_eq!(err.lines().count(), 2, "{err}");
    assert!(
        err.lines()
            .any(|l| l.starts_with("invalid --otlp-endpoint (WB_OTLP_ENDPOINT)")),
        "{err}"
    );
    let err = ServerConfig::from_args(
        &cli(&[
            "--otlp-endpoint",
            "http://user:hunter2-secret@collector:4318",
        ])
        .serve,
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("OTEL_EXPORTER_OTLP_HEADERS") && !err.contains("hunter2"),
        "{err}"
    );
    assert!(ServerConfig::from_args(&cli(&["--otlp-endpoint", "not a url"]).serve).is_err());

    let none = |_: &str| None;
    let endpoint = |args: &[&str], env: &dyn Fn(&str) -> Option<String>| {
        otlp_traces_endpoint(&cli(args).serve, env)
            .unwrap()
            .map(|u| u.to_string())
    };
    assert_eq!(endpoint(&[], &none), None, "off by default");
    assert_eq!(
        endpoint(&["--otlp-endpoint", "http://collector:4318"], &none).as_deref(),
        Some("http://collector:4318/v1/traces")
    );
    assert_eq!(
        endpoint(
            &["--otlp-endpoint", "https://otel.example.com/otlp/v1/traces"],
            &none
        )
        .as_deref(),
        Some("https://otel.example.com/otlp/v1/traces")
    );
    let standard =
        |k: &str| (k == "OTEL_EXPORTER_OTLP_ENDPOINT").then(|| "http://agent:4318".to_owned());
    assert_eq!(
        endpoint(&[], &standard).as_deref(),
        Some("http://agent:4318/v1/traces"),
        "the standard variable is honoured"
    );
    assert_eq!(
        endpoint(&["--otlp-endpoint", "http://mine:4318"], &standard).as_deref(),
        Some("http://mine:4318/v1/traces"),
        "the flag wins"
    );
    let per_signal = |k: &str| {
        (k == "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").then(|| "http://agent:4318/custom".to_owned())
    };
    assert_eq!(
        endpoint(&[], &per_signal).as_deref(),
        Some("http://agent:4318/custom"),
        "the per-signal variable is used as is"
    );
}
