//! What the limiter (core/src/limits) adds to a call in the steady state: a key with no limit
//! and no policy limits (the baseline: the runtime's `block_on` and the lookup), a key with its
//! own per-minute limit, and a policy with three limits that cover the call (per key, per user
//! and per project). The budgets are large, so after the first claim of each window every call
//! is spent from memory; a claim (one database upsert on SQLite) happens once per twentieth of
//! a budget. `cargo bench -p workbench-core --bench limits`.

use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion};
use workbench_core::auth::{Accounts, Principal, Role};
use workbench_core::clock::SystemClock;
use workbench_core::limits::Limits;
use workbench_core::policy::{Applied, Limit, Mode, Policy, ToolAllowlist};
use workbench_core::store::Db;

fn policy(limits: &[&str]) -> Applied {
    Applied::one(Some(Arc::new(Policy {
        id: "pol_bench".into(),
        object: "policy".into(),
        name: "bench".into(),
        tool_allowlist: ToolAllowlist {
            mode: Mode::Open,
            allow: vec![],
            deny: vec![],
            require_confirmation: vec![],
        },
        limits: limits
            .iter()
            .map(|l| Limit::parse_line(l).unwrap())
            .collect(),
        default: true,
        created_at: String::new(),
        updated_at: String::new(),
    })))
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let path = std::env::temp_dir().join(format!(
        "wb-bench-limits-{}.db",
        workbench_core::ids::new_id("b")
    ));
    let (limits, who) = rt.block_on(async {
        let db = Db::connect(&format!("sqlite://{}", path.display()))
            .await
            .unwrap();
        db.migrate().await.unwrap();
        let accounts = Accounts::new(db.clone(), Arc::new(SystemClock));
        let (user, _) = accounts
            .create_user(
                "bench@example.com",
                "correct horse battery staple",
                Some("bench"),
                Role::Admin,
            )
            .await
            .unwrap();
        let mut who: Principal = accounts
            .principal_for_user(&user.id)
            .await
            .unwrap()
            .unwrap();
        who.api_key_id = Some("key_bench".into());
        (Limits::new(db, Arc::new(SystemClock)), who)
    });
    let none = Applied::one(None);
    let three = policy(&[
        "1000000000 calls per minute per key on storage.*",
        "1000000000 calls per day per user",
        "1000000000 calls per month per project",
    ]);
    let mut keyed = who.clone();
    keyed.rate_limit_per_minute = Some(1_000_000_000);
    let mut g = c.benchmark_group("limits_admit");
    g.bench_function("no limits", |b| {
        b.iter(|| {
            rt.block_on(limits.admit(&who, &none, "storage.put"))
                .unwrap()
                .unwrap()
        })
    });
    g.bench_function("key's own per minute", |b| {
        b.iter(|| {
            rt.block_on(limits.admit(&keyed, &none, "storage.put"))
                .unwrap()
                .unwrap()
        })
    });
    g.bench_function("three policy limits", |b| {
        b.iter(|| {
            rt.block_on(limits.admit(&who, &three, "storage.put"))
                .unwrap()
                .unwrap()
        })
    });
    g.finish();
    let _ = std::fs::remove_file(&path);
}

criterion_group!(benches, bench);
criterion_main!(benches);
