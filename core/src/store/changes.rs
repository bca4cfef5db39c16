//! Change notices: what lets an instance answer from memory (the key → principal cache) and
//! still refuse a revoked key on the very next call.
//!
//! Every write that changes what authentication reads (a key revoked or limited, a policy
//! attached or edited, a secret or credential set, a membership changed) bumps an *epoch*;
//! a cached entry is good only while the epoch it was read under is current.
//!
//! - In one process the write bumps the epoch itself, after it commits and before it
//!   returns ([`Db::changed`](super::Db::changed)). Every `Db` on the same database in the
//!   process shares one epoch, so two services on one SQLite file see each other at once.
//! - On PostgreSQL, triggers on those tables `NOTIFY` the channel `workbench_changes` from
//!   the writing transaction (so any writer counts: another instance, the CLI, plain SQL), and
//!   every instance keeps a `LISTEN` connection that bumps its epoch on each notice. A
//!   heartbeat through the same channel proves the connection alive; while it is down or
//!   silent the instance is *not live*: caches are neither read nor filled, every call reads
//!   the database (fail closed), `/metrics` shows `workbench_change_listener_up 0` and the
//!   log says so. Coming back bumps the epoch, since notices may have been missed.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use std::str::FromStr;

use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use sqlx::AnyPool;

use crate::Result;

/// The notification channel (one per database: every instance of a deployment listens to it).
pub const CHANNEL: &str = "workbench_changes";

/// The listening connection's `application_name` (how an operator, or a test, finds it in
/// `pg_stat_activity`).
pub const LISTENER_NAME: &str = "workbench-changes";

/// How often a listening instance proves its connection alive, and how long without proof it
/// stops trusting its caches.
const HEARTBEAT: Duration = Duration::from_secs(2);
const SILENCE: Duration = Duration::from_secs(6);

/// One database's change epoch, shared by every `Db` on it in this process.
#[derive(Debug)]
pub struct Changes {
    epoch: AtomicU64,
    live: AtomicBool,
    /// PostgreSQL: a listener runs (started once).
    listening: AtomicBool,
}

impl Changes {
    fn new(live: bool) -> Changes {
        Changes {
            epoch: AtomicU64::new(0),
            live: AtomicBool::new(live),
            listening: AtomicBool::new(false),
        }
    }

    /// The epoch to tag a cache read with, or None when caches must not be used (fail closed).
    /// Take it *before* reading the database: a change committed during the read then makes
    /// the entry stale at once.
    pub fn snapshot(&self) -> Option<u64> {
        self.live
            .load(Ordering::Acquire)
            .then(|| self.epoch.load(Ordering::Acquire))
    }

    /// Something changed: every cached entry is stale.
    pub fn bump(&self) {
        self.epoch.fetch_add(1, Ordering::AcqRel);
    }

    /// Whether this instance may answer from its caches (always on SQLite; on PostgreSQL while
    /// the notification connection is up).
    pub fn is_live(&self) -> bool {
        self.live.load(Ordering::Acquire)
    }

    fn set_live(&self, live: bool) {
        // Bump on both edges: entries filled before a gap may have missed a notice.
        if self.live.load(Ordering::Acquire) != live {
            self.bump();
            self.live.store(live, Ordering::Release);
            self.bump();
        }
    }
}

/// The shared `Changes` of the database at `key` (a canonical SQLite path or a PostgreSQL
/// URL); `live` is the initial state of a new one.
pub(super) fn shared(key: &str, live: bool) -> Arc<Changes> {
    static ALL: OnceLock<Mutex<HashMap<String, Weak<Changes>>>> = OnceLock::new();
    let mut all = ALL
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    all.retain(|_, w| w.strong_count() > 0);
    if let Some(c) = all.get(key).and_then(Weak::upgrade) {
        return c;
    }
    let c = Arc::new(Changes::new(live));
    all.insert(key.to_owned(), Arc::downgrade(&c));
    c
}

/// Starts the PostgreSQL listener for `changes` (once per `Changes`): it lives as long as the
/// `Changes` does.
pub(super) fn listen(changes: &Arc<Changes>, url: String, pool: AnyPool) {
    if changes.listening.swap(true, Ordering::AcqRel) {
        return;
    }
    let weak = Arc::downgrade(changes);
    tokio::spawn(async move {
        let mut backoff = Duration::from_millis(200);
        loop {
            if weak.strong_count() == 0 {
                return;
            }
            match run(&weak, &url, &pool).await {
                Ok(()) => return,
                Err(e) => {
                    if let Some(c) = weak.upgrade() {
                        if c.is_live() {
                            tracing::warn!(error = %e, "change notifications lost: every call reads the database until they are back");
                        }
                        c.set_live(false);
                    }
                }
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(5));
        }
    });
}

/// One listening session: Ok when the `Changes` is gone, Err when the connection failed or
/// went silent.
async fn run(weak: &Weak<Changes>, url: &str, pool: &AnyPool) -> Result<()> {
    let options = PgConnectOptions::from_str(url)?.application_name(LISTENER_NAME);
    let own = PgPoolOptions::new()
        .max_connections(1)
        .connect_lazy_with(options);
    let mut listener = PgListener::connect_with(&own).await?;
    listener.ignore_pool_close_event(true);
    listener.listen(CHANNEL).await?;
    let me = format!("hb:{}", crate::crypto::random_base62(12));
    let mut heard = Instant::now();
    let mut tick = tokio::time::interval(HEARTBEAT);
    let mut announced = false;
    loop {
        tokio::select! {
            n = listener.try_recv() => {
                let Some(n) = n? else {
                    return Err(crate::Error::internal("change notification connection closed"));
                };
                let Some(c) = weak.upgrade() else { return Ok(()) };
                if n.payload() == me {
                    heard = Instant::now();
                    if !announced {
                        // Our own heartbeat came back: the channel works end to end.
                        announced = true;
                        c.set_live(true);
                        tracing::info!("change notifications up: caches in use");
                    }
                } else if !n.payload().starts_with("hb:") {
                    c.bump();
                }
            }
            _ = tick.tick() => {
                if weak.strong_count() == 0 {
                    return Ok(());
                }
                if announced && heard.elapsed() > SILENCE {
                    return Err(crate::Error::internal("change notifications went silent"));
                }
                heartbeat(pool, &me).await?;
            }
        }
    }
}

async fn heartbeat(pool: &AnyPool, payload: &str) -> Result<()> {
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(CHANNEL)
        .bind(payload)
        .execute(pool)
        .await?;
    Ok(())
}

/// The PostgreSQL triggers that announce every change authentication depends on, whoever
/// writes it. Statement-level, so a write costs one notice; installed (idempotently, under an
/// advisory lock) after the migrations.
pub(super) async fn install_triggers(pool: &AnyPool) -> Result<()> {
    let mut tx = pool.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock(7215470211)")
        .execute(&mut *tx)
        .await?;
    sqlx::query(&format!(
        "CREATE OR REPLACE FUNCTION workbench_notify_change() RETURNS trigger LANGUAGE plpgsql AS $$ \
         BEGIN PERFORM pg_notify('{CHANNEL}', TG_TABLE_NAME); RETURN NULL; END $$"
    ))
    .execute(&mut *tx)
    .await?;
    for (table, events) in [
        (
            "api_keys",
            "UPDATE OF revoked_at, policy_id, rate_limit_per_minute, tool_sets, user_id, project_id OR DELETE",
        ),
        ("memberships", "INSERT OR UPDATE OR DELETE"),
        ("users", "UPDATE OF email OR DELETE"),
        ("projects", "UPDATE OR DELETE"),
        ("vault_generations", "INSERT OR UPDATE OR DELETE"),
        (
            "oauth_grants",
            "UPDATE OF revoked_at, policy_id, rate_limit_per_minute, user_id, project_id OR DELETE",
        ),
        ("oauth_tokens", "UPDATE OF revoked_at OR DELETE"),
    ] {
        sqlx::query(&format!(
            "CREATE OR REPLACE TRIGGER workbench_changes AFTER {events} ON {table} \
             FOR EACH STATEMENT EXECUTE FUNCTION workbench_notify_change()"
        ))
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(())
}
