//! Failed sign-in attempts, counted per scope (`acct:<email>`, `ip:<address>`) in a sliding
//! window. Kept in the database so throttling holds across instances.

use super::Exec;
use crate::Result;

/// Locks a scope until the transaction ends (a row upsert: SQLite's write transaction holds
/// everything, PostgreSQL locks the row), so a check and the count that follows are atomic.
pub async fn lock_scope<'e>(ex: impl Exec<'e>, scope: &str, now: i64) -> Result<()> {
    sqlx::query(
        "INSERT INTO sign_in_scopes (scope, touched_at) VALUES ($1, $2) \
         ON CONFLICT (scope) DO UPDATE SET touched_at = excluded.touched_at",
    )
    .bind(scope)
    .bind(now)
    .execute(ex)
    .await?;
    Ok(())
}

/// Removes the attempts of the scope counted at `at` (a sign-in that turned out right; another
/// attempt of the same millisecond is forgiven with it).
pub async fn forget_at<'e>(ex: impl Exec<'e>, scope: &str, at: i64) -> Result<()> {
    sqlx::query("DELETE FROM sign_in_failures WHERE scope = $1 AND at = $2")
        .bind(scope)
        .bind(at)
        .execute(ex)
        .await?;
    Ok(())
}

pub async fn record_failure<'e>(ex: impl Exec<'e>, scope: &str, now: i64) -> Result<()> {
    sqlx::query("INSERT INTO sign_in_failures (scope, at) VALUES ($1, $2)")
        .bind(scope)
        .bind(now)
        .execute(ex)
        .await?;
    Ok(())
}

/// Failures in the scope since `since`, and the oldest of them (for the retry hint).
pub async fn failures_since<'e>(
    ex: impl Exec<'e>,
    scope: &str,
    since: i64,
) -> Result<(i64, Option<i64>)> {
    let row: (i64, Option<i64>) = sqlx::query_as(
        "SELECT CAST(COUNT(*) AS BIGINT), MIN(at) FROM sign_in_failures WHERE scope = $1 AND at > $2",
    )
    .bind(scope)
    .bind(since)
    .fetch_one(ex)
    .await?;
    Ok(row)
}

pub async fn clear<'e>(ex: impl Exec<'e>, scope: &str) -> Result<()> {
    sqlx::query("DELETE FROM sign_in_failures WHERE scope = $1")
        .bind(scope)
        .execute(ex)
        .await?;
    Ok(())
}

pub async fn delete_older_than<'e>(ex: impl Exec<'e> + Copy, cutoff: i64) -> Result<u64> {
    let r = sqlx::query("DELETE FROM sign_in_failures WHERE at <= $1")
        .bind(cutoff)
        .execute(ex)
        .await?;
    sqlx::query("DELETE FROM sign_in_scopes WHERE touched_at <= $1")
        .bind(cutoff)
        .execute(ex)
        .await?;
    Ok(r.rows_affected())
}
