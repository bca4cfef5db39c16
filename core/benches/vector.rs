//! vector.query latency over 10,000 and 100,000 vectors of 384 dimensions (random unit-ish
//! vectors, metadata on each), through the whole pipeline (`Engine::run`) on SQLite, on a
//! single-threaded runtime: the first query (loads the namespace from the database) and then
//! p50/p99 of 200 queries over the in-memory copy, plain and with a metadata filter.
//! `cargo bench -p workbench-core --bench vector`.

use std::time::Instant;

use serde_json::{json, Value};
use workbench_core::auth::Role;
use workbench_core::engine::{CallOptions, Invocation, Surface};
use workbench_core::{Workbench, WorkbenchOptions};

const DIM: usize = 384;
const QUERIES: usize = 200;

/// xorshift64*: deterministic values without a dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545F4914F6CDD1D) >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }
    fn vector(&mut self) -> Vec<f64> {
        (0..DIM)
            .map(|_| (self.next() * 1000.0).round() / 1000.0)
            .collect()
    }
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let dir = std::env::temp_dir().join(format!("wb-vector-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let wb = Workbench::open(&format!("sqlite://{}", dir.join("wb.db").display()), WorkbenchOptions::default()).await.unwrap();
        let (user, _) = wb.accounts().create_user("bench@example.com", "correct horse battery staple", Some("default"), Role::Admin).await.unwrap();
        let who = wb.accounts().principal_for_user(&user.id).await.unwrap().unwrap();
        let opts = CallOptions::new(Surface::Rest);
        let mut rng = Rng(0x9E3779B97F4A7C15);
        let mut have = 0usize;
        println!("vector.query, {DIM} dimensions, exact cosine top-10, single-threaded runtime, SQLite:");
        for target in [10_000usize, 100_000] {
            let t = Instant::now();
            while have < target {
                let vectors: Vec<Value> = (have..have + 1000)
                    .map(|i| json!({ "id": format!("doc-{i}"), "values": rng.vector(), "metadata": { "text": format!("chunk {i}"), "shard": i % 10 } }))
                    .collect();
                let o = wb.engine().run(&who, Invocation { tool: "vector.upsert".into(), args: json!({ "namespace": "bench", "vectors": vectors }) }, &opts).await;
                assert!(o.result.is_ok(), "{:?}", o.result.err());
                have += 1000;
            }
            println!("  {target:>7} vectors: upserted in batches of 1,000 in {:.1} s", t.elapsed().as_secs_f64());
            // Another instance's write would make this copy stale: drop it by reopening.
            let cold = Workbench::open(&format!("sqlite://{}", dir.join("wb.db").display()), WorkbenchOptions::default()).await.unwrap();
            let q = |v: Vec<f64>, filter: Option<Value>| {
                let mut args = json!({ "namespace": "bench", "vector": v, "top_k": 10 });
                if let Some(f) = filter {
                    args["filter"] = f;
                }
                Invocation { tool: "vector.query".into(), args }
            };
            let t = Instant::now();
            let first = cold.engine().run(&who, q(rng.vector(), None), &opts).await;
            assert!(first.result.is_ok());
            println!("  {target:>7} vectors: first query (loads the namespace) {:.1} ms", t.elapsed().as_secs_f64() * 1000.0);
            for (label, filter) in [("query", None), ("query, filter shard $in [1, 2]", Some(json!({ "shard": { "$in": [1, 2] } })))] {
                let mut ms = Vec::with_capacity(QUERIES);
                for _ in 0..QUERIES {
                    let t = Instant::now();
                    let o = cold.engine().run(&who, q(rng.vector(), filter.clone()), &opts).await;
                    let matches = o.result.as_ref().map(|v| v["matches"].as_array().map(Vec::len).unwrap_or(0)).unwrap_or(0);
                    assert_eq!(matches, 10);
                    ms.push(t.elapsed().as_secs_f64() * 1000.0);
                }
                ms.sort_by(|a, b| a.total_cmp(b));
                println!("  {target:>7} vectors: {label:<32} p50 {:>7.2} ms   p99 {:>7.2} ms", pct(&ms, 0.5), pct(&ms, 0.99));
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    });
}
