//! The record writer: tool_calls rows, audit rows and usage counters reach the database through
//! one background task that commits them in groups, so a call does not wait for its record.
//!
//! What stays synchronous is what atomicity needs: the `running` row a side-effecting tool
//! must have before it runs, idempotency claims, and anything a caller reads back at once
//! (readers call `flush` first). The `running` rows go through a second task of their own
//! ([`Recorder::begin`]): the caller waits until its row is committed, but rows of calls that
//! start together share one transaction (group commit), so under load a write tool costs no
//! dedicated round trip, and a batch of finished records never delays a call's start.
//! Records are queued on a bounded channel: when it is full, callers wait (nothing is dropped). A batch that cannot be
//! committed is retried one record at a time, so one bad record costs only itself; each
//! record that still fails is counted in `AUDIT_WRITE_FAILURES`. On a clean shutdown the
//! server flushes before exiting; a crash loses what was queued but not yet committed (the
//! records of calls that finished in the last few milliseconds).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot};

use crate::metrics::CallMetrics;
use crate::store::script::{Script, WriterConnection};
use crate::store::{self, audit::AuditRow, tool_calls::ToolCallRow, usage::Meter, Db, Engine};
use crate::Result;

/// Records that could not be written since start (read-only tools still ran).
pub static AUDIT_WRITE_FAILURES: AtomicU64 = AtomicU64::new(0);

/// Records queued at most; a full queue makes callers wait. It bounds what a shutdown must
/// still write: the load run (docs/benchmarks.md) saw PostgreSQL commit about 800 records a
/// second while nothing else ran, so 8192 queued records could miss the 10 s shutdown deadline
/// and lose their usage. Batched statements since made the writer alone commit 4,000+ finished
/// records a second there (benches/record_writer.rs); 2048 also keeps what a kill loses small.
pub const QUEUE_CAPACITY: usize = 2048;
/// Records committed in one transaction at most.
pub const BATCH_MAX: usize = 256;

/// How a row reaches its table: a new row, or the end of one written as `running` earlier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    Insert,
    Finish,
}

/// Meters to add for one project, key, tool and day.
#[derive(Debug, Clone)]
pub struct UsageAdd {
    pub project_id: String,
    /// `""` when no API key made the call.
    pub api_key_id: String,
    pub tool: String,
    /// `YYYY-MM-DD` (UTC).
    pub day: String,
    pub meters: Vec<(Meter, i64)>,
}

/// What one event writes: any of a tool_calls row, an audit row and usage counters, committed
/// together.
#[derive(Debug, Clone, Default)]
pub struct Record {
    pub call: Option<(ToolCallRow, Write)>,
    pub audit: Option<(AuditRow, Write)>,
    pub usage: Option<UsageAdd>,
}

enum Job {
    Write(Box<Record>),
    Flush(oneshot::Sender<()>),
}

/// The handle callers queue records on. Cheap to clone; the writer task ends when the last
/// handle is dropped, after writing what was queued.
#[derive(Clone)]
pub struct Recorder {
    tx: mpsc::Sender<Job>,
    /// `running` rows waiting for their group commit, each with its caller's answer.
    begins: mpsc::Sender<(Record, oneshot::Sender<Result<()>>)>,
    /// Every finished call is counted here too, for /metrics.
    metrics: Arc<CallMetrics>,
}

impl Recorder {
    /// Starts the writer task on the current tokio runtime.
    pub fn start(db: Db) -> Recorder {
        let (tx, rx) = mpsc::channel(QUEUE_CAPACITY);
        tokio::spawn(run(db.clone(), rx));
        let (begins, begun) = mpsc::channel(QUEUE_CAPACITY);
        tokio::spawn(run_begins(db, begun));
        Recorder {
            tx,
            begins,
            metrics: Arc::default(),
        }
    }

    pub fn metrics(&self) -> &CallMetrics {
        &self.metrics
    }

    /// Queues a record; waits only while the queue is full.
    pub async fn write(&self, record: Record) {
        if self.tx.send(Job::Write(Box::new(record))).await.is_err() {
            // The writer is gone (only while the runtime shuts down).
            AUDIT_WRITE_FAILURES.fetch_add(1, Ordering::Relaxed);
            tracing::error!("the record writer has stopped; a record was not written");
        }
    }

    /// Commits the `running` rows of a call about to start (with other calls' rows starting at
    /// the same moment) and returns once they are durable; an error means they are not, and the
    /// call must not run.
    pub async fn begin(&self, record: Record) -> Result<()> {
        let (done, wait) = oneshot::channel();
        if self.begins.send((record, done)).await.is_err() {
            return Err(crate::Error::internal("the record writer has stopped"));
        }
        wait.await
            .unwrap_or_else(|_| Err(crate::Error::internal("the record writer has stopped")))
    }

    /// Returns once every record queued before this call is committed (or counted as failed).
    pub async fn flush(&self) {
        let (done, wait) = oneshot::channel();
        if self.tx.send(Job::Flush(done)).await.is_ok() {
            let _ = wait.await;
        }
    }
}

async fn run(db: Db, mut rx: mpsc::Receiver<Job>) {
    let mut conn = WriterConnection::new(db);
    let mut jobs = Vec::with_capacity(BATCH_MAX);
    while rx.recv_many(&mut jobs, BATCH_MAX).await > 0 {
        let mut records = Vec::new();
        let mut flushes = Vec::new();
        for job in jobs.drain(..) {
            match job {
                Job::Write(r) => records.push(*r),
                Job::Flush(f) => flushes.push(f),
            }
        }
        if !records.is_empty() {
            write_all(&mut conn, &records).await;
        }
        // A flush answers only after every record queued before it (it came later in the
        // channel, so it is in this batch or a later one).
        for f in flushes {
            let _ = f.send(());
        }
    }
}

/// The group commit of `running` rows: whatever queued while the previous commit ran goes in
/// the next one (no timer: a lone call commits at once), each caller answered after it.
async fn run_begins(db: Db, mut rx: mpsc::Receiver<(Record, oneshot::Sender<Result<()>>)>) {
    const GROUP_MAX: usize = 64;
    let mut conn = WriterConnection::new(db);
    let mut jobs = Vec::with_capacity(GROUP_MAX);
    while rx.recv_many(&mut jobs, GROUP_MAX).await > 0 {
        let (records, answers): (Vec<Record>, Vec<_>) = jobs.drain(..).unzip();
        if records.len() > 1 && commit(&mut conn, &records).await.is_ok() {
            for a in answers {
                let _ = a.send(Ok(()));
            }
            continue;
        }
        // Alone, or the group failed: each on its own, so one bad row costs only its call.
        for (r, a) in records.iter().zip(answers) {
            let _ = a.send(commit(&mut conn, std::slice::from_ref(r)).await);
        }
    }
}

/// One transaction for the batch; when it fails, each record alone.
async fn write_all(conn: &mut WriterConnection, records: &[Record]) {
    if records.len() > 1 {
        match commit(conn, records).await {
            Ok(()) => return,
            Err(e) => {
                tracing::warn!(error = %e, records = records.len(), "a batch of records failed; writing them one by one")
            }
        }
    }
    for r in records {
        if let Err(e) = commit(conn, std::slice::from_ref(r)).await {
            AUDIT_WRITE_FAILURES.fetch_add(1, Ordering::Relaxed);
            let call = r.call.as_ref().map(|(c, _)| c.id.as_str()).or(r
                .audit
                .as_ref()
                .and_then(|(a, _)| a.tool_call_id.as_deref()));
            tracing::error!(error = %e, call_id = ?call, "could not write a record");
        }
    }
}

/// A usage counter's key: (project, api key, tool, day).
type UsageKey<'a> = (&'a str, &'a str, &'a str, &'a str);

/// Records at most in a batch SQLite gets as one joined script (`store::script`): enough for
/// the groups of a few dozen concurrent calls, few enough that the scripts' shapes stay a
/// handful in the writer connection's statement cache. Larger batches amortise their
/// statements' trips anyway.
const JOINED_MAX: usize = 16;

async fn commit(conn: &mut WriterConnection, records: &[Record]) -> Result<()> {
    // Few statements per table and kind: new rows in multi-row INSERTs, rows written `running`
    // earlier finished by UPDATE … FROM (VALUES …) (`store::batches` sizes both); usage of the
    // batch is summed per counter first: one statement per project, key, tool, day.
    let (mut new_calls, mut done_calls, mut new_audit, mut done_audit) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    // (project, key, tool, day) → meter name → (meter, sum)
    let mut usage: BTreeMap<UsageKey<'_>, BTreeMap<&'static str, (Meter, i64)>> = BTreeMap::new();
    for r in records {
        match &r.call {
            Some((c, Write::Insert)) => new_calls.push(c),
            Some((c, Write::Finish)) => done_calls.push(c),
            None => {}
        }
        match &r.audit {
            Some((a, Write::Insert)) => new_audit.push(a),
            Some((a, Write::Finish)) => done_audit.push(a),
            None => {}
        }
        if let Some(u) = &r.usage {
            let counters = usage
                .entry((&u.project_id, &u.api_key_id, &u.tool, &u.day))
                .or_default();
            for (meter, value) in &u.meters {
                counters.entry(meter.as_str()).or_insert((*meter, 0)).1 += value;
            }
        }
    }
    let sqlite = conn.engine() == Engine::Sqlite;
    let joined = sqlite && records.len() <= JOINED_MAX;
    let mut script = if joined {
        Script::joined()
    } else {
        Script::separate()
    };
    // A large batch on SQLite runs statement by statement in-process, and there one prepared
    // single-row INSERT per row was measured faster than multi-row INSERTs
    // (benches/record_writer.rs); PostgreSQL pays a round trip per statement, so it gets the
    // multi-row form, as does a joined script (one trip whatever it holds). (Calls go in
    // before the audit rows that name them.)
    if sqlite && !joined {
        for c in &new_calls {
            store::tool_calls::push_insert(&mut script, std::slice::from_ref(c));
        }
        for a in &new_audit {
            store::audit::push_insert(&mut script, std::slice::from_ref(a));
        }
    } else {
        for rows in store::batches(&new_calls) {
            store::tool_calls::push_insert(&mut script, rows);
        }
        for rows in store::batches(&new_audit) {
            store::audit::push_insert(&mut script, rows);
        }
    }
    for rows in store::batches(&done_calls) {
        store::tool_calls::push_finish(&mut script, rows);
    }
    for rows in store::batches(&done_audit) {
        store::audit::push_finish_for_calls(&mut script, rows);
    }
    for ((project, key, tool, day), counters) in usage {
        let meters: Vec<(Meter, i64)> = counters.into_values().collect();
        store::usage::push_add(&mut script, project, key, tool, day, &meters);
    }
    conn.transaction(script).await
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::auth::{Accounts, Role};
    use crate::clock::SystemClock;
    use crate::store::{audit::AuditStatus, tool_calls::CallStatus};

    fn record(project_id: &str, n: usize) -> Record {
        let id = crate::ids::new_id("tcall");
        let call = ToolCallRow {
            id: id.clone(),
            project_id: project_id.into(),
            user_id: "usr_x".into(),
            api_key_id: None,
            tool: "storage.get".into(),
            status: CallStatus::Succeeded,
            arguments: format!("{{\"n\":{n}}}"),
            result: None,
            error: None,
            duration_ms: 3,
            end_user_id: None,
            surface: "mcp".into(),
            created_at: 1_000 + n as i64,
            result_bytes: None,
            idempotency_key: None,
        };
        let audit = AuditRow {
            id: crate::ids::new_id("aud"),
            project_id: project_id.into(),
            user_id: Some("usr_x".into()),
            api_key_id: None,
            action: "tool.execute".into(),
            tool: Some("storage.get".into()),
            tool_call_id: Some(id),
            status: AuditStatus::Succeeded,
            error_code: None,
            duration_ms: Some(3),
            end_user_id: None,
            surface: "mcp".into(),
            detail: None,
            created_at: 1_000 + n as i64,
            tool_set: None,
        };
        let usage = UsageAdd {
            project_id: project_id.into(),
            api_key_id: String::new(),
            tool: "storage.get".into(),
            day: "2026-12-01".into(),
            meters: vec![(Meter::ToolCall, 1), (Meter::ToolCallMs, 3)],
        };
        Record {
            call: Some((call, Write::Insert)),
            audit: Some((audit, Write::Insert)),
            usage: Some(usage),
        }
    }

    /// A migrated SQLite database in a temporary file with one admin; its project id; the file.
    async fn database() -> (Db, String, std::path::PathBuf) {
        let (db, path) = store::temp_sqlite("writer").await;
        db.migrate().await.unwrap();
        let accounts = Accounts::new(db.clone(), Arc::new(SystemClock));
        let (user, _) = accounts
            .create_user(
                "writer@example.com",
                "correct horse battery staple",
                Some("p"),
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
        (db, project, path)
    }

    #[tokio::test]
    async fn one_bad_record_costs_only_itself_and_a_flush_waits_for_everything_queued_before_it() {
        let (db, project, path) = database().await;
        let recorder = Recorder::start(db.clone());
        let failures = AUDIT_WRITE_FAILURES.load(Ordering::Relaxed);
        // The middle record names a project that does not exist: its rows break a foreign key.
        for (n, p) in [
            project.as_str(),
            "prj_missing",
            project.as_str(),
            project.as_str(),
        ]
        .into_iter()
        .enumerate()
        {
            recorder.write(record(p, n)).await;
        }
        recorder.flush().await;
        let rows = store::audit::list(db.pool(), &project, &Default::default(), 10)
            .await
            .unwrap();
        assert_eq!(rows.len(), 3, "every good record was written");
        let usage = store::usage::rows(db.pool(), &project, "2026-12-01", "2026-12-01", None)
            .await
            .unwrap();
        let calls: i64 = usage
            .iter()
            .filter(|u| u.meter == Meter::ToolCall)
            .map(|u| u.value)
            .sum();
        let ms: i64 = usage
            .iter()
            .filter(|u| u.meter == Meter::ToolCallMs)
            .map(|u| u.value)
            .sum();
        assert_eq!(
            (calls, ms),
            (3, 9),
            "usage summed per counter, the bad record's not counted"
        );
        assert!(
            AUDIT_WRITE_FAILURES.load(Ordering::Relaxed) > failures,
            "the bad record is counted"
        );
        let _ = std::fs::remove_file(&path);
    }

    #[tokio::test]
    async fn rows_written_running_are_finished_field_for_field_in_one_batch() {
        let (db, project, path) = database().await;
        // Three calls written `running` (as the pipeline does before a side effect)...
        let mut running = Vec::new();
        for n in 0..3 {
            let Record {
                call: Some((mut c, _)),
                audit: Some((mut a, _)),
                ..
            } = record(&project, n)
            else {
                unreachable!()
            };
            (c.status, c.result, c.duration_ms, a.status, a.duration_ms) =
                (CallStatus::Running, None, 0, AuditStatus::Running, None);
            store::tool_calls::insert(db.pool(), &c).await.unwrap();
            store::audit::insert(db.pool(), &a).await.unwrap();
            running.push((c, a));
        }
        // ...then finished, each differently, through the writer in one flush.
        let recorder = Recorder::start(db.clone());
        for (n, (c, a)) in running.iter().enumerate() {
            let mut c = c.clone();
            let mut a = a.clone();
            (c.status, c.result, c.error, c.duration_ms, c.result_bytes) = if n == 1 {
                (
                    CallStatus::Failed,
                    None,
                    Some(format!("{{\"code\":\"TOOL_ERROR\",\"n\":{n}}}")),
                    20 + n as i64,
                    None,
                )
            } else {
                (
                    CallStatus::Succeeded,
                    Some(format!("{{\"n\":{n}}}")),
                    None,
                    10 + n as i64,
                    Some(7 + n as i64),
                )
            };
            a.status = c.status.into();
            a.error_code = (n == 1).then(|| "TOOL_ERROR".to_owned());
            a.duration_ms = Some(c.duration_ms);
            recorder
                .write(Record {
                    call: Some((c, Write::Finish)),
                    audit: Some((a, Write::Finish)),
                    usage: None,
                })
                .await;
        }
        recorder.flush().await;
        for (n, (c, a)) in running.iter().enumerate() {
            let got = store::tool_calls::get(db.pool(), &project, &c.id)
                .await
                .unwrap()
                .unwrap();
            let audit = store::audit::get(db.pool(), &project, &a.id)
                .await
                .unwrap()
                .unwrap();
            if n == 1 {
                assert_eq!(
                    (
                        got.status.as_str(),
                        got.result,
                        got.error.as_deref(),
                        got.duration_ms,
                        got.result_bytes
                    ),
                    (
                        "failed",
                        None,
                        Some("{\"code\":\"TOOL_ERROR\",\"n\":1}"),
                        21,
                        None
                    )
                );
                assert_eq!(
                    (
                        audit.status.as_str(),
                        audit.error_code.as_deref(),
                        audit.duration_ms
                    ),
                    ("failed", Some("TOOL_ERROR"), Some(21))
                );
            } else {
                assert_eq!(
                    (
                        got.status.as_str(),
                        got.result,
                        got.error,
                        got.duration_ms,
                        got.result_bytes
                    ),
                    (
                        "succeeded",
                        Some(format!("{{\"n\":{n}}}")),
                        None,
                        10 + n as i64,
                        Some(7 + n as i64)
                    )
                );
                assert_eq!(
                    (audit.status.as_str(), audit.error_code, audit.duration_ms),
                    ("succeeded", None, Some(10 + n as i64))
                );
            }
            assert_eq!(
                (got.arguments.as_str(), audit.tool_call_id.as_deref()),
                (c.arguments.as_str(), Some(c.id.as_str())),
                "untouched columns stay"
            );
        }
        db.pool().close().await;
        let _ = std::fs::remove_file(&path);
    }
}
