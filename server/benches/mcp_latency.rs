//! Per-call latency of execute_tools(storage.get) over /mcp, sequential, against the real
//! application on loopback (SQLite in a temp dir), next to the tool's own handler time.
//! `cargo bench -p workbench-server --bench mcp_latency` prints p50/p99 of both and of their
//! difference (what the MCP surface and the pipeline add).

mod common;

use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use workbench_core::engine::{CallOptions, Invocation, Surface};

const WARMUP: usize = 200;
const CALLS: usize = 2000;

fn pct(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn report(label: &str, mut us: Vec<f64>) -> (f64, f64) {
    us.sort_by(|a, b| a.total_cmp(b));
    let (p50, p99) = (pct(&us, 0.50), pct(&us, 0.99));
    println!(
        "{label:<44} p50 {:>8.3} ms   p99 {:>8.3} ms   (n = {})",
        p50 / 1000.0,
        p99 / 1000.0,
        us.len()
    );
    (p50, p99)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let common::Bench {
        wb, key, addr, dir, ..
    } = common::start("mcp", |_| {}).await;

    let key_who = wb.accounts().authenticate_api_key(&key).await.unwrap();
    let put = Invocation {
        tool: "storage.put".into(),
        args: json!({ "key": "bench/object.txt", "content": "x".repeat(1024) }),
    };
    assert!(wb
        .engine()
        .run(&key_who, put, &CallOptions::new(Surface::Rest))
        .await
        .result
        .is_ok());

    // The tool's own time: the handler, as the pipeline measures it.
    let get = || Invocation {
        tool: "storage.get".into(),
        args: json!({ "key": "bench/object.txt" }),
    };
    let mut handler_us = Vec::with_capacity(CALLS);
    let mut pipeline_us = Vec::with_capacity(CALLS);
    for i in 0..WARMUP + CALLS {
        let t = Instant::now();
        let o = wb
            .engine()
            .run(&key_who, get(), &CallOptions::new(Surface::Rest))
            .await;
        assert!(o.result.is_ok());
        if i >= WARMUP {
            handler_us.push(o.duration_us as f64);
            pipeline_us.push(t.elapsed().as_micros() as f64);
        }
    }

    let client = reqwest::Client::new();
    let url = format!("http://{addr}/mcp");
    let body = Arc::new(json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": { "name": "execute_tools", "arguments": { "executions": [{ "tool": "storage.get", "args": { "key": "bench/object.txt" } }] } }
    }));
    // The fast path and, interleaved with it so the machine's noise hits both alike, the same
    // request through rmcp (an Origin header always takes that way).
    let mut total_us = Vec::with_capacity(CALLS);
    let mut rmcp_us = Vec::with_capacity(CALLS);
    let origin = format!("http://{addr}");
    for i in 0..WARMUP + CALLS {
        for through_rmcp in [false, true] {
            let t = Instant::now();
            let mut req = client
                .post(&url)
                .bearer_auth(&key)
                .header("accept", "application/json, text/event-stream")
                .json(&*body);
            if through_rmcp {
                req = req.header("origin", &origin);
            }
            let res = req.send().await.unwrap();
            assert_eq!(res.status(), 200);
            let v: serde_json::Value = res.json().await.unwrap();
            assert_eq!(
                v["result"]["structuredContent"]["results"][0]["result"]["size"],
                1024
            );
            if i >= WARMUP {
                if through_rmcp {
                    &mut rmcp_us
                } else {
                    &mut total_us
                }
                .push(t.elapsed().as_micros() as f64);
            }
        }
    }
    let mut rest_us = Vec::with_capacity(CALLS);
    let invoke = json!({ "tool": "storage.get", "arguments": { "key": "bench/object.txt" } });
    for i in 0..WARMUP + CALLS {
        let t = Instant::now();
        let res = client
            .post(format!("http://{addr}/v1/tools/invoke"))
            .bearer_auth(&key)
            .json(&invoke)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        let _: serde_json::Value = res.json().await.unwrap();
        if i >= WARMUP {
            rest_us.push(t.elapsed().as_micros() as f64);
        }
    }
    let mut me_us = Vec::with_capacity(CALLS);
    for i in 0..WARMUP + CALLS {
        let t = Instant::now();
        let res = client
            .get(format!("http://{addr}/v1/me"))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
        let _ = res.bytes().await.unwrap();
        if i >= WARMUP {
            me_us.push(t.elapsed().as_micros() as f64);
        }
    }
    let mut auth_us = Vec::with_capacity(CALLS);
    for i in 0..WARMUP + CALLS {
        let t = Instant::now();
        wb.accounts().authenticate_api_key(&key).await.unwrap();
        if i >= WARMUP {
            auth_us.push(t.elapsed().as_micros() as f64);
        }
    }
    let mut health_us = Vec::with_capacity(CALLS);
    for i in 0..WARMUP + CALLS {
        let t = Instant::now();
        let res = client
            .get(format!("http://{addr}/healthz"))
            .send()
            .await
            .unwrap();
        let _ = res.bytes().await.unwrap();
        if i >= WARMUP {
            health_us.push(t.elapsed().as_micros() as f64);
        }
    }
    println!("execute_tools(storage.get), 1 KiB object, sequential, SQLite:");
    let (h50, h99) = report("storage.get handler (tool's own time)", handler_us);
    let (t50, t99) = report("execute_tools over /mcp (client round trip)", total_us);
    println!(
        "{:<44} p50 {:>8.3} ms   p99 {:>8.3} ms",
        "added by /mcp + pipeline",
        (t50 - h50) / 1000.0,
        (t99 - h99) / 1000.0
    );
    println!("for comparison:");
    report("engine.run in-process (pipeline + handler)", pipeline_us);
    report("execute_tools over /mcp through rmcp", rmcp_us);
    report("POST /v1/tools/invoke storage.get", rest_us);
    report("GET /v1/me (HTTP + key check only)", me_us);
    report("authenticate_api_key in-process", auth_us);
    report("GET /healthz (HTTP only)", health_us);
    let _ = std::fs::remove_dir_all(dir);
}
