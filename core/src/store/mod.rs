//! Storage: one `sqlx::Any` pool over SQLite (embedded default) or PostgreSQL (scale-out), one
//! migrations folder, and one module of inline SQL per aggregate. No SQL lives outside this
//! module tree.

pub mod api_keys;
pub mod apps;
pub mod audit;
pub mod backup;
pub mod changes;
pub mod confirmations;
pub mod connections;
pub mod deliveries;
pub mod delivery_status;
pub mod egress;
pub mod email;
pub mod idempotency;
pub mod limit_windows;
pub mod mcp_items;
pub mod mcp_servers;
pub mod mcp_sessions;
pub mod oauth;
pub mod pending_connections;
pub mod policies;
pub mod project_settings;
pub mod projects;
pub mod proxy_tokens;
pub mod schedules;
pub mod script;
pub mod sessions;
pub mod sign_in;
pub mod sso;
pub mod storage_objects;
#[cfg(feature = "test-support")]
pub mod testing;
pub mod tool_calls;
pub mod tool_sets;
pub mod usage;
pub mod users;
pub mod vault;
pub mod vectors;

use std::str::FromStr;
use std::time::Duration;

use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::{Any, AnyPool, ConnectOptions, Connection, Executor, Transaction};

use crate::{Error, Result};

/// Which engine a URL selects. Only a handful of statements differ (how a write transaction
/// begins); everything else is shared SQL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    Sqlite,
    Postgres,
}

/// A transaction on either engine.
pub type Tx = Transaction<'static, Any>;

#[derive(Clone, Debug)]
pub struct Db {
    pool: AnyPool,
    engine: Engine,
    /// The database's change epoch (`changes.rs`), shared by every `Db` on it in the process.
    changes: std::sync::Arc<changes::Changes>,
}

/// Where a SQLite URL points, as one name for every spelling of it (None: in memory).
fn sqlite_file(url: &str) -> Option<std::path::PathBuf> {
    let rest = url.trim_start_matches("sqlite:").trim_start_matches("//");
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    if path.is_empty() || path == ":memory:" || query.split('&').any(|kv| kv == "mode=memory") {
        return None;
    }
    let path = std::path::Path::new(path);
    Some(std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()))
}

/// How long a query waits for a pooled connection before failing.
pub const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations");

/// A SQLite database opened for writing must be writable, and so must its directory (WAL mode
/// keeps `-wal` and `-shm` files beside it): checked up front so that start-up stops with one
/// line naming the problem instead of the pool retrying "unable to open database file".
fn check_sqlite_writable(url: &str) -> Result<()> {
    let rest = url.trim_start_matches("sqlite:").trim_start_matches("//");
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    if path.is_empty()
        || path == ":memory:"
        || query
            .split('&')
            .any(|kv| kv == "mode=ro" || kv == "mode=memory")
    {
        return Ok(());
    }
    let path = std::path::Path::new(path);
    let problem = |what: &str, e: std::io::Error| {
        let why = match e.raw_os_error() {
            Some(30) => "it is on a read-only file system".to_string(),
            _ if e.kind() == std::io::ErrorKind::PermissionDenied => {
                "it is read-only for this user".to_string()
            }
            _ => e.to_string(),
        };
        Error::invalid(format!(
            "cannot open database {}: {what} cannot be written, {why}",
            path.display()
        ))
    };
    if path.exists() {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| problem("the file", e))?;
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    if dir.exists() {
        let probe = dir.join(format!(
            ".{}.write-probe",
            path.file_name().and_then(|n| n.to_str()).unwrap_or("db")
        ));
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&probe)
            .map_err(|e| problem("its directory", e))?;
        let _ = std::fs::remove_file(&probe);
    }
    Ok(())
}

impl Db {
    /// Opens a pool for `url` (`sqlite://path`, `postgres://…`). A SQLite file is created if
    /// missing and runs in WAL mode with a 10 s busy timeout and foreign keys on.
    pub async fn connect(url: &str) -> Result<Db> {
        sqlx::any::install_default_drivers();
        let engine = if url.starts_with("sqlite:") {
            Engine::Sqlite
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Engine::Postgres
        } else {
            return Err(Error::invalid(format!(
                "unsupported database url scheme in {:?}; use sqlite://FILE or postgres://USER@HOST/DB",
                redact_url(url)
            )));
        };
        let url = match engine {
            Engine::Sqlite if !url.contains("mode=") => {
                let sep = if url.contains('?') { '&' } else { '?' };
                format!("{url}{sep}mode=rwc")
            }
            _ => url.to_string(),
        };
        if engine == Engine::Sqlite {
            check_sqlite_writable(&url)?;
        }
        let options = AnyConnectOptions::from_str(&url)
            .map_err(|e| Error::invalid(format!("bad database url {:?}: {e}", redact_url(&url))))?
            .disable_statement_logging();
        let pool_options = match engine {
            Engine::Sqlite => AnyPoolOptions::new()
                .max_connections(8)
                .min_connections(1)
                .after_connect(|conn, _meta| {
                    Box::pin(async move {
                        conn.execute(
                            "PRAGMA journal_mode = WAL; PRAGMA busy_timeout = 10000; \
                             PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL;",
                        )
                        .await?;
                        Ok(())
                    })
                })
                // SQLite rolls a transaction back by itself when a statement hits a full disk or
                // an I/O error; sqlx still counts it open, its ROLLBACK then fails, and every
                // later BEGIN IMMEDIATE on that connection would be refused. Such a connection
                // is closed instead of going back to the pool. (The ping lets the worker run a
                // dropped transaction's queued ROLLBACK before the count is read again.)
                .after_release(|conn, _meta| {
                    Box::pin(async move {
                        if !conn.is_in_transaction() {
                            return Ok(true);
                        }
                        conn.ping().await?;
                        Ok(!conn.is_in_transaction())
                    })
                }),
            Engine::Postgres => AnyPoolOptions::new().max_connections(16),
        };
        let pool = pool_options
            // While the database is down a request waits this long for a connection, then
            // fails UNAVAILABLE (REST 503) instead of hanging; the pool reconnects on its own.
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .connect_with(options)
            .await
            .map_err(|e| {
                Error::invalid(format!("cannot open database {:?}: {e}", redact_url(&url)))
            })?;
        let changes = match engine {
            Engine::Sqlite => match sqlite_file(&url) {
                Some(file) => changes::shared(&format!("sqlite:{}", file.display()), true),
                None => changes::shared(
                    &format!("memory:{}", crate::crypto::random_base62(16)),
                    true,
                ),
            },
            Engine::Postgres => {
                let c = changes::shared(&url, false);
                changes::listen(&c, url.clone(), pool.clone());
                c
            }
        };
        Ok(Db {
            pool,
            engine,
            changes,
        })
    }

    /// The change epoch caches of this database check (`changes.rs`).
    pub fn changes(&self) -> &changes::Changes {
        &self.changes
    }

    /// Says that a write which changes what authentication reads has committed: caches read
    /// before it are stale from now on, in this process. (On PostgreSQL the triggers tell the
    /// other instances.) Call it after the commit and before returning.
    pub fn changed(&self) {
        self.changes.bump();
    }

    /// Applies every pending migration; a failure names the migration and stops.
    pub async fn migrate(&self) -> Result<()> {
        MIGRATOR
            .run(&self.pool)
            .await
            .map_err(|e| Error::internal(format!("database migration failed: {e}")))?;
        if self.engine == Engine::Postgres {
            changes::install_triggers(&self.pool).await?;
        }
        Ok(())
    }

    pub fn engine(&self) -> Engine {
        self.engine
    }

    pub fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// A transaction for read-then-write work. On SQLite it takes the write lock up front
    /// (`BEGIN IMMEDIATE`), so concurrent writers wait on the busy timeout instead of failing
    /// with SQLITE_BUSY half-way; PostgreSQL uses its default isolation and the statements
    /// themselves are written to be race-free (unique keys, `ON CONFLICT`, conditional updates).
    pub async fn begin_write(&self) -> Result<Tx> {
        let tx = match self.engine {
            Engine::Sqlite => self.pool.begin_with("BEGIN IMMEDIATE").await?,
            Engine::Postgres => self.pool.begin().await?,
        };
        Ok(tx)
    }

    /// True when the database answers a trivial query within 3 s.
    pub async fn ping(&self) -> bool {
        let ping = sqlx::query("SELECT 1").execute(&self.pool);
        matches!(
            tokio::time::timeout(Duration::from_secs(3), ping).await,
            Ok(Ok(_))
        )
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// Hides a password in a database URL before it is shown anywhere.
pub fn redact_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        _ => url.to_string(),
    }
}

/// A re-sealed row (master key rotation): new ciphertext, nonce and key version.
pub struct Resealed<'a> {
    pub old_ciphertext: &'a str,
    pub ciphertext: &'a str,
    pub nonce: &'a str,
    pub key_version: i64,
}

/// Replaces the sealing of the row of `table` whose `key_column` is `key`, only if its
/// ciphertext is still what the caller read (no lost update); whether it did. Every sealed
/// table (vault secrets, connections, deliveries, callback signing secrets) has these columns.
pub(crate) async fn reseal_row<'e>(
    ex: impl Exec<'e>,
    table: &'static str,
    key_column: &'static str,
    key: &str,
    r: &Resealed<'_>,
) -> Result<bool> {
    let done = sqlx::query(&format!(
        "UPDATE {table} SET ciphertext = $1, nonce = $2, key_version = $3 WHERE {key_column} = $4 AND ciphertext = $5"
    ))
    .bind(r.ciphertext)
    .bind(r.nonce)
    .bind(r.key_version)
    .bind(key)
    .bind(r.old_ciphertext)
    .execute(ex)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Rows at most in one multi-row statement (`Script::values`): 256 rows of 15 columns stay far
/// below SQLite's 32,766 and PostgreSQL's 65,535 bound parameters.
pub const INSERT_ROWS_MAX: usize = 256;

/// Splits `rows` into runs whose lengths are powers of two (at most `INSERT_ROWS_MAX`), longest
/// first. A multi-row statement then comes in at most nine shapes per table, each prepared once
/// per connection and kept in its statement cache, instead of up to 256 shapes (one per batch
/// length) crowding that cache.
pub fn batches<T>(rows: &[T]) -> impl Iterator<Item = &[T]> {
    let mut rest = rows;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let len = INSERT_ROWS_MAX.min(1 << rest.len().ilog2());
        let (run, tail) = rest.split_at(len);
        rest = tail;
        Some(run)
    })
}

/// A fresh SQLite database in a temporary file named after `name` (not migrated), for unit
/// tests; the file, to remove afterwards.
#[cfg(test)]
pub(crate) async fn temp_sqlite(name: &str) -> (Db, std::path::PathBuf) {
    let path = std::env::temp_dir().join(format!("wb-{name}-{}.db", crate::ids::new_id("t")));
    let db = Db::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    (db, path)
}

/// Shorthand for the generic executor bound every store function takes.
pub trait Exec<'e>: Executor<'e, Database = Any> {}
impl<'e, T: Executor<'e, Database = Any>> Exec<'e> for T {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_are_powers_of_two_longest_first_and_cover_every_row() {
        let rows: Vec<usize> = (0..(INSERT_ROWS_MAX * 2 + 13)).collect();
        let lens: Vec<usize> = batches(&rows).map(<[usize]>::len).collect();
        assert_eq!(lens, vec![INSERT_ROWS_MAX, INSERT_ROWS_MAX, 8, 4, 1]);
        assert_eq!(batches(&rows).flatten().copied().collect::<Vec<_>>(), rows);
        assert_eq!(batches::<usize>(&[]).count(), 0);
    }

    #[test]
    fn redact_url_hides_passwords() {
        assert_eq!(
            redact_url("postgres://u:secret@h/db"),
            "postgres://u:***@h/db"
        );
        assert_eq!(redact_url("sqlite://x.db"), "sqlite://x.db");
    }

    /// A full disk mid-transaction (here SQLite's page limit, which fails the same way:
    /// SQLITE_FULL, and SQLite rolls the transaction back itself) must not leave a pooled
    /// connection that refuses every later write transaction.
    #[tokio::test]
    async fn a_transaction_the_disk_filling_up_rolled_back_does_not_poison_later_writes() {
        let (db, path) = temp_sqlite("full").await;
        sqlx::query("CREATE TABLE filler (v TEXT NOT NULL)")
            .execute(db.pool())
            .await
            .unwrap();
        for round in 0..3 {
            let mut tx = db.begin_write().await.unwrap();
            sqlx::query("PRAGMA max_page_count = 16")
                .execute(&mut *tx)
                .await
                .unwrap();
            let mut full = None;
            for _ in 0..100 {
                if let Err(e) = sqlx::query("INSERT INTO filler (v) VALUES ($1)")
                    .bind("y".repeat(3000))
                    .execute(&mut *tx)
                    .await
                {
                    full = Some(Error::from(e));
                    break;
                }
            }
            let full = full.expect("the page limit is reached");
            assert_eq!(
                full.unavailable_reason(),
                Some("the database's disk is full"),
                "round {round}: {full}"
            );
            drop(tx);
            // Let the dropped transaction's connection go back to (or leave) the pool.
            for _ in 0..500 {
                if db.pool().num_idle() > 0 || db.pool().size() == 0 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            for n in 0..3 {
                let mut tx = db
                    .begin_write()
                    .await
                    .unwrap_or_else(|e| panic!("round {round}, write {n}: {e}"));
                sqlx::query("INSERT INTO filler (v) VALUES ('small')")
                    .execute(&mut *tx)
                    .await
                    .unwrap();
                tx.commit().await.unwrap();
            }
        }
        let (count,): (i64,) = sqlx::query_as("SELECT count(*) FROM filler")
            .fetch_one(db.pool())
            .await
            .unwrap();
        assert_eq!(count, 9, "only the small rows were kept");
        db.pool().close().await;
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    }
}
