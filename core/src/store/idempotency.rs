//! Idempotency-Key records (D13), keyed by API key and idempotency key. The primary key makes
//! "first request wins" atomic on both engines, also across instances. A claim is `in_flight`
//! with a lease its instance renews; `done` with a response is finished; `done` without one was
//! interrupted (its lease ran out: the instance running it stopped).

use sqlx::FromRow;

use super::Exec;
use crate::Result;

#[derive(Debug, Clone, FromRow)]
pub struct IdempotencyRow {
    pub api_key_id: String,
    pub idempotency_key: String,
    pub request_hash: String,
    pub state: String,
    pub response_status: Option<i64>,
    pub response_body: Option<String>,
    pub created_at: i64,
    /// Until when the claim's instance vouches for it (None: a claim older than leases).
    pub lease_until: Option<i64>,
}

/// Claims the key for a new request; false when a record exists.
pub async fn claim<'e>(
    ex: impl Exec<'e>,
    api_key_id: &str,
    key: &str,
    request_hash: &str,
    now: i64,
    lease_until: i64,
) -> Result<bool> {
    let r = sqlx::query(
        "INSERT INTO idempotency_keys (api_key_id, idempotency_key, request_hash, state, created_at, lease_until) \
         VALUES ($1, $2, $3, 'in_flight', $4, $5) ON CONFLICT (api_key_id, idempotency_key) DO NOTHING",
    )
    .bind(api_key_id)
    .bind(key)
    .bind(request_hash)
    .bind(now)
    .bind(lease_until)
    .execute(ex)
    .await?;
    Ok(r.rows_affected() == 1)
}

pub async fn get<'e>(
    ex: impl Exec<'e>,
    api_key_id: &str,
    key: &str,
) -> Result<Option<IdempotencyRow>> {
    Ok(sqlx::query_as(
        "SELECT api_key_id, idempotency_key, request_hash, state, response_status, response_body, created_at, lease_until \
         FROM idempotency_keys WHERE api_key_id = $1 AND idempotency_key = $2",
    )
    .bind(api_key_id)
    .bind(key)
    .fetch_optional(ex)
    .await?)
}

pub async fn complete<'e>(
    ex: impl Exec<'e>,
    api_key_id: &str,
    key: &str,
    status: i64,
    body: &str,
) -> Result<()> {
    sqlx::query(
        "UPDATE idempotency_keys SET state = 'done', response_status = $1, response_body = $2 \
         WHERE api_key_id = $3 AND idempotency_key = $4",
    )
    .bind(status)
    .bind(body)
    .bind(api_key_id)
    .bind(key)
    .execute(ex)
    .await?;
    Ok(())
}

/// Extends the lease of a claim still in flight.
pub async fn renew<'e>(
    ex: impl Exec<'e>,
    api_key_id: &str,
    key: &str,
    lease_until: i64,
) -> Result<()> {
    sqlx::query("UPDATE idempotency_keys SET lease_until = $1 WHERE api_key_id = $2 AND idempotency_key = $3 AND state = 'in_flight'")
        .bind(lease_until)
        .bind(api_key_id)
        .bind(key)
        .execute(ex)
        .await?;
    Ok(())
}

/// Closes, with no response, a claim still in flight whose lease ran out before `now` (its
/// instance stopped); a claim created before leases counts as leased until `created_at +
/// legacy_lease_ms`. True when this call closed it.
pub async fn interrupt_expired<'e>(
    ex: impl Exec<'e>,
    api_key_id: &str,
    key: &str,
    now: i64,
    legacy_lease_ms: i64,
) -> Result<bool> {
    let r = sqlx::query(
        "UPDATE idempotency_keys SET state = 'done', response_status = NULL, response_body = NULL \
         WHERE api_key_id = $1 AND idempotency_key = $2 AND state = 'in_flight' \
         AND COALESCE(lease_until, created_at + $3) < $4",
    )
    .bind(api_key_id)
    .bind(key)
    .bind(legacy_lease_ms)
    .bind(now)
    .execute(ex)
    .await?;
    Ok(r.rows_affected() == 1)
}

/// Removes a record created at `created_at` (an expired one) so its key can be claimed again; the timestamp guard keeps two racing cleaners from removing a fresh claim.
pub async fn remove_stale<'e>(
    ex: impl Exec<'e>,
    api_key_id: &str,
    key: &str,
    created_at: i64,
) -> Result<bool> {
    let r = sqlx::query("DELETE FROM idempotency_keys WHERE api_key_id = $1 AND idempotency_key = $2 AND created_at = $3")
        .bind(api_key_id)
        .bind(key)
        .bind(created_at)
        .execute(ex)
        .await?;
    Ok(r.rows_affected() == 1)
}

pub async fn delete_older_than<'e>(ex: impl Exec<'e>, cutoff: i64) -> Result<u64> {
    let r = sqlx::query("DELETE FROM idempotency_keys WHERE created_at < $1")
        .bind(cutoff)
        .execute(ex)
        .await?;
    Ok(r.rows_affected())
}
