//! How fast the record writer (core/src/audit/writer.rs) commits what finished calls queue, on
//! SQLite and PostgreSQL: records a second for new rows (read-only tools: a tool_calls row, an
//! audit row, usage) and for rows finished after a synchronous `running` row (tools that change
//! things). The load run (docs/benchmarks.md) measures whole calls; this measures the writer
//! alone, which bounds what a shutdown can drain and when callers start waiting for queue room.
//!
//! `cargo bench -p workbench-core --features test-support --bench record_writer`
//! (`WB_BENCH_RECORDS`, default 20000; PostgreSQL at `WB_TEST_POSTGRES_URL`, default
//! postgres://postgres@127.0.0.1:5432/test, gets a fresh database, dropped afterwards).

use std::sync::Arc;
use std::time::Instant;

use sqlx::{Connection, PgConnection};
use workbench_core::audit::{Record, Recorder, UsageAdd, Write};
use workbench_core::auth::{Accounts, Role};
use workbench_core::clock::SystemClock;
use workbench_core::store::{
    self,
    audit::AuditRow,
    tool_calls::{CallStatus, ToolCallRow},
    usage::Meter,
    Db,
};

fn rows(project: &str, user: &str, n: usize, status: CallStatus) -> (ToolCallRow, AuditRow) {
    let id = workbench_core::ids::new_id("tcall");
    let call = ToolCallRow {
        id: id.clone(),
        project_id: project.into(),
        user_id: user.into(),
        api_key_id: None,
        tool: "storage.put".into(),
        status,
        arguments: format!("{{\"key\":\"k{n}\"}}"),
        result: None,
        error: None,
        duration_ms: 0,
        end_user_id: None,
        surface: "mcp".into(),
        created_at: 1_800_000_000_000 + n as i64,
        result_bytes: None,
        idempotency_key: None,
    };
    let audit = AuditRow {
        id: workbench_core::ids::new_id("aud"),
        project_id: project.into(),
        user_id: Some(user.into()),
        api_key_id: None,
        action: "tool.execute".into(),
        tool: Some("storage.put".into()),
        tool_call_id: Some(id),
        status: status.into(),
        error_code: None,
        duration_ms: None,
        end_user_id: None,
        surface: "mcp".into(),
        detail: None,
        created_at: 1_800_000_000_000 + n as i64,
        tool_set: None,
    };
    (call, audit)
}

fn finished(mut call: ToolCallRow, mut audit: AuditRow, write: Write, project: &str) -> Record {
    call.status = CallStatus::Succeeded;
    call.result = Some("{\"ok\":true}".into());
    call.duration_ms = 3;
    call.result_bytes = Some(11);
    audit.status = CallStatus::Succeeded.into();
    audit.duration_ms = Some(3);
    let usage = UsageAdd {
        project_id: project.into(),
        api_key_id: String::new(),
        tool: "storage.put".into(),
        day: "2027-01-15".into(),
        meters: vec![(Meter::ToolCall, 1), (Meter::ToolCallMs, 3)],
    };
    Record {
        call: Some((call, write)),
        audit: Some((audit, write)),
        usage: Some(usage),
    }
}

async fn run(engine: &str, db: Db, n: usize) {
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
    let project = accounts
        .principal_for_user(&user.id)
        .await
        .unwrap()
        .unwrap()
        .project_id;
    let recorder = Recorder::start(db.clone());

    // New rows: queued as fast as the queue takes them, then flushed.
    let records: Vec<Record> = (0..n)
        .map(|i| {
            let (c, a) = rows(&project, &user.id, i, CallStatus::Succeeded);
            finished(c, a, Write::Insert, &project)
        })
        .collect();
    let start = Instant::now();
    for r in records {
        recorder.write(r).await;
    }
    recorder.flush().await;
    let new_rate = n as f64 / start.elapsed().as_secs_f64();

    // Finished after a running row: the running rows are written first (not timed).
    let running: Vec<(ToolCallRow, AuditRow)> = (0..n)
        .map(|i| rows(&project, &user.id, n + i, CallStatus::Running))
        .collect();
    for chunk in running.chunks(store::INSERT_ROWS_MAX) {
        let mut tx = db.begin_write().await.unwrap();
        let calls: Vec<&ToolCallRow> = chunk.iter().map(|(c, _)| c).collect();
        let audits: Vec<&AuditRow> = chunk.iter().map(|(_, a)| a).collect();
        store::tool_calls::insert_many(&mut *tx, &calls)
            .await
            .unwrap();
        store::audit::insert_many(&mut *tx, &audits).await.unwrap();
        tx.commit().await.unwrap();
    }
    let start = Instant::now();
    for (c, a) in running {
        recorder
            .write(finished(c, a, Write::Finish, &project))
            .await;
    }
    recorder.flush().await;
    let finish_rate = n as f64 / start.elapsed().as_secs_f64();

    let usage = store::usage::rows(db.pool(), &project, "2027-01-15", "2027-01-15", None)
        .await
        .unwrap();
    let calls: i64 = usage
        .iter()
        .filter(|u| u.meter == Meter::ToolCall)
        .map(|u| u.value)
        .sum();
    assert_eq!(calls, 2 * n as i64, "every record was written once");
    let failures =
        workbench_core::audit::AUDIT_WRITE_FAILURES.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(failures, 0, "no record failed");
    println!("{engine:<10} {n:>8} {new_rate:>16.0} {finish_rate:>22.0}");
}

fn main() {
    let n: usize = std::env::var("WB_BENCH_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        println!(
            "{:<10} {:>8} {:>16} {:>22}",
            "engine", "records", "new rows rec/s", "finished rows rec/s"
        );
        let path = std::env::temp_dir().join(format!(
            "wb-bench-writer-{}.db",
            workbench_core::ids::new_id("b")
        ));
        run(
            "sqlite",
            Db::connect(&format!("sqlite://{}", path.display()))
                .await
                .unwrap(),
            n,
        )
        .await;
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }

        let base = std::env::var("WB_TEST_POSTGRES_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
        let Ok(mut admin) = PgConnection::connect(&base).await else {
            println!("postgres   skipped: cannot connect to {base}");
            return;
        };
        let name = format!("wb_bench_writer_{}", std::process::id());
        store::testing::create_database(&mut admin, &name)
            .await
            .unwrap();
        let url = format!("{}/{name}", base.rsplit_once('/').unwrap().0);
        let db = Db::connect(&url).await.unwrap();
        run("postgres", db.clone(), n).await;
        db.pool().close().await;
        store::testing::drop_stale_databases(&mut admin, &name)
            .await
            .unwrap();
    });
}
