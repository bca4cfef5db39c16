//! Project-wide scrubbing (D7) at size: 1,000 vault secrets of a project, every encoded form in
//! one Aho-Corasick automaton, scanning a 60,000-character result (the MCP result cap) with
//! and without secrets in it; plus the cost of building the automaton after a vault change and
//! a 10-secret baseline, to show the scan does not grow with the number of secrets.
//! `cargo bench -p workbench-core --bench scrub`.

use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use serde_json::{json, Value};
use workbench_core::vault::{Needles, Scrubber};

fn secrets(n: usize) -> Vec<(String, String)> {
    (0..n)
        .map(|i| {
            (
                format!("SECRET_{i}"),
                format!(
                    "sk_live_{i:05}_{:x}",
                    (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
                ),
            )
        })
        .collect()
}

/// A 60,000-character JSON result: rows of ordinary text, with `leaks` secret values in it.
fn result(values: &[(String, String)], leaks: usize) -> Value {
    let mut rows = Vec::new();
    let mut len = 0;
    let mut i = 0;
    while len < 60_000 {
        let text = if i < leaks {
            format!(
                "row {i}: token {} was used",
                values[(i * 37) % values.len()].1
            )
        } else {
            format!("row {i}: customer paid invoice INV-{i:06} for 42.00 EUR on 2026-11-30")
        };
        len += text.len() + 4;
        rows.push(json!(text));
        i += 1;
    }
    json!({ "rows": rows })
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("scrub_60k_chars");
    for n in [10usize, 1_000] {
        let values = secrets(n);
        let needles = Arc::new(Needles::build(
            values.iter().map(|(a, b)| (a.as_str(), b.as_str())),
        ));
        let scrubber = Scrubber::for_project(needles);
        for leaks in [0usize, 20] {
            let v = result(&values, leaks);
            group.bench_with_input(
                BenchmarkId::new(format!("{n}_secrets"), format!("{leaks}_leaks")),
                &v,
                |b, v| {
                    b.iter(|| {
                        let mut v = v.clone();
                        scrubber.scrub(&mut v);
                        v
                    })
                },
            );
        }
    }
    group.finish();
    c.bench_function("build_automaton_1000_secrets", |b| {
        let values = secrets(1_000);
        b.iter(|| Needles::build(values.iter().map(|(a, b)| (a.as_str(), b.as_str()))))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
