//! Per-key call counts in one-minute windows (the per-key rate limit), shared by every instance
//! on the database.

use super::Exec;
use crate::Result;

/// Counts `units` calls of `api_key_id` claimed in the window starting at `window_start`;
/// answers the window's count including them.
pub async fn claim<'e>(
    ex: impl Exec<'e>,
    api_key_id: &str,
    window_start: i64,
    units: i64,
) -> Result<i64> {
    let (n,): (i64,) = sqlx::query_as(
        "INSERT INTO rate_windows (api_key_id, window_start, count) VALUES ($1, $2, $3) \
         ON CONFLICT (api_key_id, window_start) DO UPDATE SET count = rate_windows.count + $3 RETURNING count",
    )
    .bind(api_key_id)
    .bind(window_start)
    .bind(units)
    .fetch_one(ex)
    .await?;
    Ok(n)
}

/// Forgets windows that started before `before`.
pub async fn delete_before<'e>(ex: impl Exec<'e>, before: i64) -> Result<u64> {
    Ok(
        sqlx::query("DELETE FROM rate_windows WHERE window_start < $1")
            .bind(before)
            .execute(ex)
            .await?
            .rows_affected(),
    )
}
