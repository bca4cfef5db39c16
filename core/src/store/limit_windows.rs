//! Counting windows of rate limits and quotas (`limits`): one row per bucket (a key's own
//! limit, or a policy limit for one key, user or project) and window, shared by every instance
//! on the database.

use super::Exec;
use crate::Result;

/// Adds `units` to `bucket`'s window starting at `window_start` (ending at `window_end`);
/// answers the window's count including them. `units` 0 only reads the count.
pub async fn claim<'e>(
    ex: impl Exec<'e>,
    bucket: &str,
    window_start: i64,
    window_end: i64,
    units: i64,
) -> Result<i64> {
    let (n,): (i64,) = sqlx::query_as(
        "INSERT INTO limit_windows (bucket, window_start, window_end, count) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (bucket, window_start) DO UPDATE SET count = limit_windows.count + $4 RETURNING count",
    )
    .bind(bucket)
    .bind(window_start)
    .bind(window_end)
    .bind(units)
    .fetch_one(ex)
    .await?;
    Ok(n)
}

/// Forgets windows that ended before `before`.
pub async fn delete_ended<'e>(ex: impl Exec<'e>, before: i64) -> Result<u64> {
    Ok(
        sqlx::query("DELETE FROM limit_windows WHERE window_end < $1")
            .bind(before)
            .execute(ex)
            .await?
            .rows_affected(),
    )
}
