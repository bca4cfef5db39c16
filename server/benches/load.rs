//! The load run of docs/benchmarks.md: a real `workbench serve` process (the release binary),
//! driven by 32 concurrent clients with 10,000 execute_tools calls over /mcp and then 10,000
//! REST invokes, on SQLite and on PostgreSQL. Afterwards the server is stopped (it writes its
//! queued records) and the audit log and usage meters are counted: exactly one row and one
//! `tool_call` per call, none lost, none duplicated. Prints throughput, p50/p99, the server's
//! RSS and CPU per call.
//!
//! `cargo bench -p workbench-server --bench load` (both engines; PostgreSQL at
//! `WB_TEST_POSTGRES_URL`, default postgres://postgres@127.0.0.1:5432/test, gets a fresh
//! database). `WB_LOAD_CALLS`, `WB_LOAD_CONCURRENCY` and `WB_LOAD_ENGINES=sqlite,postgres`
//! change the run.

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sqlx::Connection;
use workbench_core::auth::{Principal, Role};
use workbench_core::clock::{Clock, SystemClock};
use workbench_core::metering::Meter;
use workbench_core::{Workbench, WorkbenchOptions};
use workbench_server::keys::Keys;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// CPU seconds (user + system) the process has used, from /proc.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    ticks / 100.0
}

/// (current RSS, peak RSS) in MiB, from /proc.
fn rss_mib(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib = |field: &str| {
        status
            .lines()
            .find(|l| l.starts_with(field))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (kib("VmRSS:") / 1024.0, kib("VmHWM:") / 1024.0)
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// One measured surface: its label, the request of call `i`, and what a good answer is.
type Phase = (
    &'static str,
    Arc<dyn Fn(usize) -> reqwest::RequestBuilder + Send + Sync>,
    fn(u16, &Value) -> bool,
);

struct Server {
    child: Child,
    base: String,
}

async fn serve(database_url: &str, data_dir: &std::path::Path) -> Server {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(env!("CARGO_BIN_EXE_workbench"))
        .args([
            "serve",
            "--database-url",
            database_url,
            "--bind",
            &format!("127.0.0.1:{port}"),
        ])
        .arg("--data-dir")
        .arg(data_dir)
        .env_remove("WB_DATABASE_URL")
        .env("WB_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::new();
    for _ in 0..300 {
        if http
            .get(format!("{base}/healthz"))
            .send()
            .await
            .is_ok_and(|r| r.status() == 200)
        {
            return Server { child, base };
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut child = child;
    let _ = child.kill();
    let _ = child.wait();
    panic!("workbench did not start");
}

/// One phase: `calls` requests made by `concurrency` clients; returns per-call latencies (ms).
async fn drive(
    calls: usize,
    concurrency: usize,
    make: Arc<dyn Fn(usize) -> reqwest::RequestBuilder + Send + Sync>,
    check: fn(u16, &Value) -> bool,
) -> (Vec<f64>, Duration) {
    let next = Arc::new(AtomicUsize::new(0));
    let latencies = Arc::new(Mutex::new(Vec::with_capacity(calls)));
    let failures = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let workers: Vec<_> = (0..concurrency)
        .map(|_| {
            let (next, latencies, failures, make) = (
                next.clone(),
                latencies.clone(),
                failures.clone(),
                make.clone(),
            );
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= calls {
                        break;
                    }
                    let t = Instant::now();
                    let res = make(i).send().await.expect("the server answers");
                    let status = res.status().as_u16();
                    let body: Value = res.json().await.unwrap_or(Value::Null);
                    let ms = t.elapsed().as_secs_f64() * 1000.0;
                    if !check(status, &body) && failures.fetch_add(1, Ordering::Relaxed) < 3 {
                        eprintln!("unexpected answer {status}: {body}");
                    }
                    latencies.lock().unwrap().push(ms);
                }
            })
        })
        .collect();
    for w in workers {
        w.await.unwrap();
    }
    let elapsed = started.elapsed();
    assert_eq!(failures.load(Ordering::Relaxed), 0, "every call succeeded");
    let mut l = Arc::try_unwrap(latencies).unwrap().into_inner().unwrap();
    l.sort_by(|a, b| a.total_cmp(b));
    (l, elapsed)
}

async fn count_audit(wb: &Workbench, who: &Principal) -> (usize, usize) {
    let (mut mcp, mut rest) = (0, 0);
    let mut q = workbench_core::audit::AuditQuery::default();
    loop {
        let page = wb.audit().page(who, &q).await.unwrap();
        for e in &page.entries {
            if e.action == "tool.execute" && e.tool.as_deref() == Some("storage.put") {
                match e.surface.as_str() {
                    "mcp" => mcp += 1,
                    "rest" => rest += 1,
                    _ => {}
                }
            }
        }
        match page.next {
            Some(n) => q.cursor = Some(n),
            None => return (mcp, rest),
        }
    }
}

async fn fresh_postgres() -> String {
    let server = std::env::var("WB_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let mut conn = sqlx::PgConnection::connect(&server)
        .await
        .expect("PostgreSQL reachable");
    let name = format!("wbload_{}", std::process::id());
    workbench_core::store::testing::create_database(&mut conn, &name)
        .await
        .unwrap();
    let mut url = url::Url::parse(&server).unwrap();
    url.set_path(&format!("/{name}"));
    url.to_string()
}

async fn run(engine: &str, calls: usize, concurrency: usize) {
    let dir = std::env::temp_dir().join(format!("wb-load-{engine}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let database_url = match engine {
        "sqlite" => format!("sqlite://{}", dir.join("wb.db").display()),
        _ => fresh_postgres().await,
    };
    let data_dir = dir.join("data");
    let keys = Keys::load_or_create(&data_dir).unwrap();
    let wb = Workbench::open(
        &database_url,
        WorkbenchOptions {
            master_keys: keys.master.clone(),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let (user, _) = wb
        .accounts()
        .create_user("load@example.com", "load password 1", None, Role::Admin)
        .await
        .unwrap();
    let admin = wb
        .accounts()
        .principal_for_user(&user.id)
        .await
        .unwrap()
        .unwrap();
    let key = wb
        .accounts()
        .create_api_key(&admin, "load")
        .await
        .unwrap()
        .secret
        .expose()
        .to_owned();
    let server = serve(&database_url, &data_dir).await;
    let pid = server.child.id();
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(concurrency)
        .build()
        .unwrap();

    println!("\n{engine}: {calls} calls per surface at c={concurrency}, tool storage.put (256-byte object)");
    println!(
        "{:<28} {:>10} {:>9} {:>9} {:>9} {:>12} {:>10}",
        "surface", "calls/s", "p50 ms", "p99 ms", "max ms", "CPU ms/call", "RSS MiB"
    );
    let phases: [Phase; 2] = [
        (
            "execute_tools over /mcp",
            {
                let (client, url, key) =
                    (client.clone(), format!("{}/mcp", server.base), key.clone());
                Arc::new(move |i| {
                    client.post(&url).bearer_auth(&key).header("accept", "application/json, text/event-stream").json(&json!({
                        "jsonrpc": "2.0", "id": i, "method": "tools/call",
                        "params": { "name": "execute_tools", "arguments": { "executions": [{ "tool": "storage.put", "args": { "key": format!("mcp/{i}"), "content": "x".repeat(256) } }] } }
                    }))
                })
            },
            |status, v| {
                status == 200
                    && v["result"]["structuredContent"]["results"][0]["result"]["size"] == 256
            },
        ),
        (
            "POST /v1/tools/invoke",
            {
                let (client, url, key) = (
                    client.clone(),
                    format!("{}/v1/tools/invoke", server.base),
                    key.clone(),
                );
                Arc::new(move |i| {
                    client.post(&url).bearer_auth(&key).json(&json!({ "tool": "storage.put", "arguments": { "key": format!("rest/{i}"), "content": "x".repeat(256) } }))
                })
            },
            |status, v| status == 200 && v["result"]["size"] == 256,
        ),
    ];
    for (label, make, check) in phases {
        let cpu0 = cpu_seconds(pid);
        let (l, elapsed) = drive(calls, concurrency, make, check).await;
        let cpu = cpu_seconds(pid) - cpu0;
        let (rss, _) = rss_mib(pid);
        println!(
            "{label:<28} {:>10.0} {:>9.2} {:>9.2} {:>9.2} {:>12.3} {:>10.1}",
            calls as f64 / elapsed.as_secs_f64(),
            pct(&l, 0.5),
            pct(&l, 0.99),
            l[l.len() - 1],
            cpu * 1000.0 / calls as f64,
            rss
        );
    }
    let (_, peak) = rss_mib(pid);
    // SIGTERM: the server drains and writes its queued records before it exits.
    let mut child = server.child;
    assert!(Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap()
        .success());
    assert!(child.wait().unwrap().success());
    let (mcp, rest) = count_audit(&wb, &admin).await;
    let today = workbench_core::clock::rfc3339(SystemClock.now_ms())[..10].to_owned();
    let usage = wb.metering().usage(&admin, &today, &today).await.unwrap();
    let metered: i64 = usage
        .iter()
        .filter(|r| r.meter == Meter::ToolCall && r.tool == "storage.put")
        .map(|r| r.value)
        .sum();
    println!("peak RSS {peak:.1} MiB; audit rows: {mcp} mcp + {rest} rest (expected {calls} each); usage tool_call for storage.put: {metered} (expected {})", 2 * calls);
    assert_eq!(
        (mcp, rest),
        (calls, calls),
        "one audit row per call, none lost or duplicated"
    );
    assert_eq!(metered, 2 * calls as i64, "usage counts every call once");
    wb.db().close().await;
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    // `cargo bench` passes --bench; this is not a libtest harness.
    let calls = env_usize("WB_LOAD_CALLS", 10_000);
    let concurrency = env_usize("WB_LOAD_CONCURRENCY", 32);
    let engines = std::env::var("WB_LOAD_ENGINES").unwrap_or_else(|_| "sqlite,postgres".into());
    for engine in engines.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        assert!(
            matches!(engine, "sqlite" | "postgres"),
            "engines are sqlite and postgres, not {engine}"
        );
        run(engine, calls, concurrency).await;
    }
}
