//! The gateway hot path against a real upstream: @modelcontextprotocol/server-everything (from
//! end2end/node_modules, on loopback) and its `echo`, called directly (an MCP session of our own
//! client, no workbench), through workbench's execute_tools over /mcp, through
//! `POST /v1/tools/invoke`, and (first part only) as a tool set's tool on its own endpoint:
//! sequential p50/p99 over 2,000 calls each, closed-loop throughput at c=8 and c=32 for 10 s
//! each. Workbench runs in a process of its own (this bench started again
//! with `WB_BENCH_SERVE` set), so the CPU it spends per call and its RSS are its own, not the load
//! client's; the upstream's CPU per call is reported beside it.
//! `cargo bench -p workbench-server --bench upstream_latency`.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;

use serde_json::{json, Value};
use workbench_core::upstream::Session;

const WARMUP: usize = 200;
const CALLS: usize = 2000;
const LOAD_FOR: Duration = Duration::from_secs(10);

fn pct(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// A process's resident memory and peak resident memory, MiB.
fn rss_mib(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
            / 1024.0
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// CPU time a process has used, user and system, all threads, ms (clock ticks of 10 ms).
fn cpu_ms(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<f64> = rest
        .split_whitespace()
        .map(|v| v.parse().unwrap_or(0.0))
        .collect();
    // utime and stime are fields 14 and 15 of stat, 12 and 13 after the name.
    (f.get(11).unwrap_or(&0.0) + f.get(12).unwrap_or(&0.0)) * 10.0
}

/// CPU per call of workbench and of the upstream over a measured stretch.
struct Cpu {
    wb: u32,
    upstream: u32,
    at: (f64, f64),
}

impl Cpu {
    fn start(wb: u32, upstream: u32) -> Cpu {
        Cpu {
            wb,
            upstream,
            at: (cpu_ms(wb), cpu_ms(upstream)),
        }
    }

    /// "workbench X ms, upstream Y ms of CPU per call" over `calls` since `start`.
    fn per_call(&self, calls: u64) -> String {
        let n = calls.max(1) as f64;
        format!(
            "CPU/call: workbench {:.3} ms, upstream {:.3} ms",
            (cpu_ms(self.wb) - self.at.0) / n,
            (cpu_ms(self.upstream) - self.at.1) / n
        )
    }
}

type Call = Arc<dyn Fn(u64) -> futures::future::BoxFuture<'static, bool> + Send + Sync>;

async fn sequential(label: &str, call: &Call, pids: (u32, u32)) -> f64 {
    let cpu = Cpu::start(pids.0, pids.1);
    let mut us = Vec::with_capacity(CALLS);
    for i in 0..WARMUP + CALLS {
        let t = Instant::now();
        assert!(call(i as u64).await, "{label}: call failed");
        if i >= WARMUP {
            us.push(t.elapsed().as_micros() as f64);
        }
    }
    us.sort_by(|a, b| a.total_cmp(b));
    let (p50, p99) = (pct(&us, 0.5), pct(&us, 0.99));
    println!(
        "{label:<40} p50 {:>7.3} ms   p99 {:>7.3} ms   {}",
        p50 / 1000.0,
        p99 / 1000.0,
        cpu.per_call((WARMUP + CALLS) as u64)
    );
    p50
}

async fn load(label: &str, call: &Call, concurrency: usize, pids: (u32, u32)) -> f64 {
    let cpu = Cpu::start(pids.0, pids.1);
    let done = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let until = Instant::now() + LOAD_FOR;
    let workers: Vec<_> = (0..concurrency)
        .map(|w| {
            let (call, done, failed) = (call.clone(), done.clone(), failed.clone());
            tokio::spawn(async move {
                let mut i = w as u64 * 1_000_000;
                while Instant::now() < until {
                    if call(i).await {
                        done.fetch_add(1, Ordering::Relaxed);
                    } else {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                    i += 1;
                }
            })
        })
        .collect();
    for w in workers {
        w.await.unwrap();
    }
    let (ok, bad) = (done.load(Ordering::Relaxed), failed.load(Ordering::Relaxed));
    let rate = ok as f64 / LOAD_FOR.as_secs_f64();
    println!(
        "{label:<40} c={concurrency:<3} {rate:>8.0} calls/s   errors {bad}   {}",
        cpu.per_call(ok + bad)
    );
    rate
}

/// The server side: workbench on SQLite with an admin key, its address and key printed as one
/// JSON line, serving until the bench ends it.
async fn serve() {
    let b = common::start("upstream", |o| {
        o.egress_allow_private = vec!["127.0.0.1".parse().unwrap()]
    })
    .await;
    println!("{}", json!({ "addr": b.addr.to_string(), "key": b.key }));
    tokio::signal::ctrl_c().await.ok();
    let _ = std::fs::remove_dir_all(b.dir);
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    if std::env::var_os("WB_BENCH_SERVE").is_some() {
        return serve().await;
    }
    let end2end = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../end2end");
    let entry = end2end.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    if !entry.exists() {
        println!("server-everything is not installed (scripts/setup.sh --with-browser installs it); nothing measured");
        return;
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let _upstream = tokio::process::Command::new("node")
        .arg("--import")
        .arg(end2end.join("upstream/bind-loopback.mjs"))
        .arg(&entry)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("node runs");
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let upstream_url = format!("http://127.0.0.1:{port}/mcp");
    let upstream_pid = _upstream.id().expect("node runs");

    // Workbench in a process of its own: this bench again, serving (see `serve`).
    let mut wb_process = tokio::process::Command::new(std::env::current_exe().unwrap())
        .env("WB_BENCH_SERVE", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("the bench starts again as the server");
    let wb_pid = wb_process.id().unwrap();
    let mut first = String::new();
    tokio::io::AsyncBufReadExt::read_line(
        &mut tokio::io::BufReader::new(wb_process.stdout.take().unwrap()),
        &mut first,
    )
    .await
    .unwrap();
    let started: Value = serde_json::from_str(&first).expect("the server says where it is");
    let (addr, key) = (
        started["addr"].as_str().unwrap().to_owned(),
        started["key"].as_str().unwrap().to_owned(),
    );
    let pids = (wb_pid, upstream_pid);
    let client = reqwest::Client::new();
    let server: Value = client
        .post(format!("http://{addr}/v1/mcp/servers"))
        .bearer_auth(&key)
        .json(&json!({ "name": "everything", "url": upstream_url, "tool_prefix": "ev.", "max_concurrency": 64 }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let server_id = server["id"]
        .as_str()
        .expect("server-everything registers")
        .to_owned();
    // A tool set with the echo, for its own endpoint's row (issue 33).
    let res = client
        .post(format!("http://{addr}/v1/tool-sets"))
        .bearer_auth(&key)
        .json(&json!({ "slug": "bench", "name": "Bench", "tools": [{ "tool": "ev.echo", "name": "echo" }] }))
        .send()
        .await
        .unwrap();
    assert!(res.status().is_success(), "tool set: {}", res.status());
    let idle_rss = rss_mib(wb_pid);

    let session = Arc::new(
        Session::open(
            client.clone(),
            url::Url::parse(&upstream_url).unwrap(),
            None,
            Duration::from_secs(30),
        )
        .await
        .unwrap(),
    );
    let direct: Call = Arc::new(move |i| {
        let s = session.clone();
        Box::pin(async move {
            s.request(
                "tools/call",
                json!({ "name": "echo", "arguments": { "message": format!("m{i}") } }),
                Duration::from_secs(30),
            )
            .await
            .is_ok_and(|r| {
                r["content"][0]["text"]
                    .as_str()
                    .is_some_and(|t| t.ends_with(&format!("m{i}")))
            })
        })
    });
    let (c1, k1, mcp_url) = (client.clone(), key.clone(), format!("http://{addr}/mcp"));
    let via_mcp: Call = Arc::new(move |i| {
        let (c, k, u) = (c1.clone(), k1.clone(), mcp_url.clone());
        Box::pin(async move {
            let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": { "name": "execute_tools", "arguments": { "executions": [{ "tool": "ev.echo", "args": { "message": format!("m{i}") } }] } } });
            let Ok(res) = c
                .post(&u)
                .bearer_auth(&k)
                .header("accept", "application/json, text/event-stream")
                .json(&body)
                .send()
                .await
            else {
                return false;
            };
            let v: Value = res.json().await.unwrap_or_default();
            v["result"]["structuredContent"]["results"][0]["result"]
                .as_str()
                .is_some_and(|t| t.ends_with(&format!("m{i}")))
        })
    });
    let (c2, k2, rest_url) = (
        client.clone(),
        key.clone(),
        format!("http://{addr}/v1/tools/invoke"),
    );
    let via_rest: Call = Arc::new(move |i| {
        let (c, k, u) = (c2.clone(), k2.clone(), rest_url.clone());
        Box::pin(async move {
            let body = json!({ "tool": "ev.echo", "arguments": { "message": format!("m{i}") } });
            let Ok(res) = c.post(&u).bearer_auth(&k).json(&body).send().await else {
                return false;
            };
            let v: Value = res.json().await.unwrap_or_default();
            v["result"]
                .as_str()
                .is_some_and(|t| t.ends_with(&format!("m{i}")))
        })
    });

    let (c3, k3, set_url) = (
        client.clone(),
        key.clone(),
        format!("http://{addr}/mcp/sets/bench"),
    );
    let via_set: Call = Arc::new(move |i| {
        let (c, k, u) = (c3.clone(), k3.clone(), set_url.clone());
        Box::pin(async move {
            let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": { "name": "echo", "arguments": { "message": format!("m{i}") } } });
            let Ok(res) = c
                .post(&u)
                .bearer_auth(&k)
                .header("accept", "application/json, text/event-stream")
                .json(&body)
                .send()
                .await
            else {
                return false;
            };
            let v: Value = res.json().await.unwrap_or_default();
            v["result"]["content"][0]["text"]
                .as_str()
                .is_some_and(|t| t.ends_with(&format!("m{i}")))
        })
    });

    println!(
        "server-everything echo on loopback; workbench on SQLite; sequential, {CALLS} calls each:"
    );
    let d = sequential("direct tools/call", &direct, pids).await;
    let m = sequential("execute_tools over workbench /mcp", &via_mcp, pids).await;
    let r = sequential("POST /v1/tools/invoke", &via_rest, pids).await;
    let t = sequential("tools/call on a tool set's endpoint", &via_set, pids).await;
    println!(
        "added p50: /mcp {:.3} ms, REST {:.3} ms, set {:.3} ms",
        (m - d) / 1000.0,
        (r - d) / 1000.0,
        (t - d) / 1000.0
    );
    println!("closed-loop throughput, {} s each:", LOAD_FOR.as_secs());
    for c in [8, 32] {
        let td = load("direct tools/call", &direct, c, pids).await;
        let tm = load("execute_tools over workbench /mcp", &via_mcp, c, pids).await;
        let tr = load("POST /v1/tools/invoke", &via_rest, c, pids).await;
        let ts = load("tools/call on a tool set's endpoint", &via_set, c, pids).await;
        println!(
            "ratio to direct at c={c}: /mcp {:.2}, REST {:.2}, set {:.2}",
            tm / td,
            tr / td,
            ts / td
        );
    }
    let (rss, peak) = rss_mib(wb_pid);
    println!(
        "workbench's RSS: idle {:.1} MiB, after load {rss:.1} MiB (peak {peak:.1} MiB)",
        idle_rss.0
    );

    // server-everything's echo carries no readOnlyHint, so it counts as `write` and its audit
    // row is written before each call (fail closed). The same with an admin's override to
    // `none`, the path of read-only upstream tools:
    let res = client
        .patch(format!(
            "http://{addr}/v1/mcp/servers/{server_id}/tools/echo"
        ))
        .bearer_auth(&key)
        .json(&json!({ "side_effects": "none" }))
        .send()
        .await
        .unwrap();
    assert!(res.status().is_success(), "override: {}", res.status());
    println!("echo overridden to side_effects none; sequential, {CALLS} calls each:");
    let d = sequential("direct tools/call", &direct, pids).await;
    let m = sequential("execute_tools over workbench /mcp", &via_mcp, pids).await;
    let r = sequential("POST /v1/tools/invoke", &via_rest, pids).await;
    println!(
        "added p50: /mcp {:.3} ms, REST {:.3} ms",
        (m - d) / 1000.0,
        (r - d) / 1000.0
    );
    for c in [8, 32] {
        let td = load("direct tools/call", &direct, c, pids).await;
        let tm = load("execute_tools over workbench /mcp", &via_mcp, c, pids).await;
        let tr = load("POST /v1/tools/invoke", &via_rest, c, pids).await;
        println!(
            "ratio to direct at c={c}: /mcp {:.2}, REST {:.2}",
            tm / td,
            tr / td
        );
    }
    let (rss, peak) = rss_mib(wb_pid);
    println!("workbench's RSS at the end: {rss:.1} MiB (peak {peak:.1} MiB)");
    // SIGINT, so the server removes its temp dir.
    let _ = std::process::Command::new("kill")
        .args(["-INT", &wb_pid.to_string()])
        .status();
    let _ = wb_process.wait().await;
}
