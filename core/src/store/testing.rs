//! Test support, built only with the `test-support` feature (the server's API tests enable it):
//! throwaway PostgreSQL databases per test run, breaking the audit log on purpose to test that
//! side effects fail closed, and databases as an older release left them, to test a migration.
//! Never part of the product.

use sqlx::PgConnection;

use super::Db;
use crate::Result;

/// Drops databases named `<prefix>…` that no session uses (left behind by earlier runs).
pub async fn drop_stale_databases(conn: &mut PgConnection, prefix: &str) -> Result<()> {
    let stale: Vec<(String,)> = sqlx::query_as(
        "SELECT datname FROM pg_database WHERE datname LIKE $1 \
         AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.datname = pg_database.datname)",
    )
    .bind(format!("{}%", prefix.replace('_', "\\_")))
    .fetch_all(&mut *conn)
    .await?;
    for (name,) in stale {
        let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS \"{name}\""))
            .execute(&mut *conn)
            .await;
    }
    Ok(())
}

/// Creates a database; `name` is the caller's own (letters, digits, `_`).
pub async fn create_database(conn: &mut PgConnection, name: &str) -> Result<()> {
    assert!(
        name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
        "a plain database name"
    );
    sqlx::query(&format!("CREATE DATABASE \"{name}\""))
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// Moves the audit log out of the way (`broken: true`) or back, so its writes fail.
pub async fn break_audit_log(db: &Db, broken: bool) -> Result<()> {
    let sql = if broken {
        "ALTER TABLE audit_events RENAME TO audit_events_away"
    } else {
        "ALTER TABLE audit_events_away RENAME TO audit_events"
    };
    sqlx::query(sql).execute(db.pool()).await?;
    Ok(())
}

/// Applies the migrations up to and including `version`, as an older release would have.
pub async fn migrate_up_to(db: &Db, version: i64) -> Result<()> {
    let mut older = sqlx::migrate::Migrator::new(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../migrations"
    )))
    .await
    .map_err(|e| crate::Error::Internal(format!("migrations: {e}")))?;
    let kept: Vec<_> = older
        .migrations
        .iter()
        .filter(|m| m.version <= version)
        .cloned()
        .collect();
    older.migrations = kept.into();
    older
        .run(db.pool())
        .await
        .map_err(|e| crate::Error::Internal(format!("migrations: {e}")))?;
    Ok(())
}

/// Runs one statement of the test's own (rows an older release wrote).
pub async fn execute(db: &Db, sql: &str) -> Result<()> {
    sqlx::query(sql).execute(db.pool()).await?;
    Ok(())
}

/// Whether a table of that name (the test's own, a plain identifier) exists.
pub async fn table_exists(db: &Db, table: &str) -> bool {
    assert!(
        table.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
        "a plain table name"
    );
    sqlx::query(&format!("SELECT COUNT(*) FROM {table}"))
        .execute(db.pool())
        .await
        .is_ok()
}

/// One row of `sso_identities` as stored, for tests that check what is kept (a refresh token
/// never in clear) and what is forgotten.
#[derive(Debug, Clone)]
pub struct StoredIdentity {
    pub provider_id: String,
    pub subject: String,
    pub user_id: String,
    pub checked_at: i64,
    pub refresh_ciphertext: Option<String>,
    pub refresh_nonce: Option<String>,
    pub refresh_key_version: Option<i64>,
    /// Every column of the row that reads as text, whatever columns the table has.
    pub texts: Vec<String>,
}

/// Every row of `sso_identities`, by subject.
pub async fn sso_identities(db: &Db) -> Result<Vec<StoredIdentity>> {
    use sqlx::Row as _;
    let rows = sqlx::query("SELECT * FROM sso_identities ORDER BY subject")
        .fetch_all(db.pool())
        .await?;
    Ok(rows
        .iter()
        .map(|row| StoredIdentity {
            provider_id: row.get("provider_id"),
            subject: row.get("subject"),
            user_id: row.get("user_id"),
            checked_at: row.get("checked_at"),
            refresh_ciphertext: row.get("refresh_ciphertext"),
            refresh_nonce: row.get("refresh_nonce"),
            refresh_key_version: row.get("refresh_key_version"),
            texts: (0..row.len())
                .filter_map(|i| row.try_get::<Option<String>, _>(i).ok().flatten())
                .collect(),
        })
        .collect())
}
