//! Scheduled callbacks, their delivery attempts and each project's sealed signing secret.
//! Claiming due callbacks is the one engine-specific statement: PostgreSQL skips rows another
//! instance is claiming (`FOR UPDATE SKIP LOCKED`), SQLite has one writer at a time.

use sqlx::FromRow;

use super::{Db, Engine, Exec};
use crate::Result;

text_enum! {
    /// Where a callback is in its life.
    pub enum CallbackStatus ("callback status") {
        Scheduled = "scheduled",
        Delivered = "delivered",
        Failed = "failed",
        Cancelled = "cancelled",
    }
}

#[derive(Debug, Clone, FromRow, PartialEq, Eq)]
pub struct CallbackRow {
    pub id: String,
    pub project_id: String,
    pub user_id: String,
    pub api_key_id: Option<String>,
    pub url: String,
    pub method: String,
    /// The agent's template of the payload (references, not values), JSON text.
    pub payload_shown: Option<String>,
    pub ciphertext: String,
    pub nonce: String,
    pub key_version: i64,
    pub scheduled_for: i64,
    #[sqlx(try_from = "String")]
    pub status: CallbackStatus,
    pub attempts: i64,
    pub next_attempt_at: i64,
    pub lease_until: Option<i64>,
    pub response_status: Option<i64>,
    pub error: Option<String>,
    pub delivered_at: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
}

const COLUMNS: &str = "id, project_id, user_id, api_key_id, url, method, payload_shown, ciphertext, nonce, key_version, \
     scheduled_for, status, attempts, next_attempt_at, lease_until, response_status, error, delivered_at, created_at, updated_at";

#[derive(Debug, Clone, FromRow, PartialEq, Eq)]
pub struct AttemptRow {
    pub id: String,
    pub callback_id: String,
    pub attempt: i64,
    pub started_at: i64,
    pub duration_ms: i64,
    pub response_status: Option<i64>,
    pub error: Option<String>,
}

pub async fn insert<'e>(ex: impl Exec<'e>, r: &CallbackRow) -> Result<()> {
    sqlx::query(&format!(
        "INSERT INTO scheduled_callbacks ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)"
    ))
    .bind(&r.id)
    .bind(&r.project_id)
    .bind(&r.user_id)
    .bind(&r.api_key_id)
    .bind(&r.url)
    .bind(&r.method)
    .bind(&r.payload_shown)
    .bind(&r.ciphertext)
    .bind(&r.nonce)
    .bind(r.key_version)
    .bind(r.scheduled_for)
    .bind(r.status.as_str())
    .bind(r.attempts)
    .bind(r.next_attempt_at)
    .bind(r.lease_until)
    .bind(r.response_status)
    .bind(&r.error)
    .bind(r.delivered_at)
    .bind(r.created_at)
    .bind(r.updated_at)
    .execute(ex)
    .await?;
    Ok(())
}

/// Callbacks of a project still to be delivered.
pub async fn count_scheduled<'e>(ex: impl Exec<'e>, project_id: &str) -> Result<i64> {
    let (n,): (i64,) = sqlx::query_as(
        "SELECT COUNT(*) FROM scheduled_callbacks WHERE project_id = $1 AND status = 'scheduled'",
    )
    .bind(project_id)
    .fetch_one(ex)
    .await?;
    Ok(n)
}

/// Claims at most `limit` callbacks due at `now` whose lease (if any) has run out: each gets a
/// lease until `lease_until` and one more attempt counted. Two instances never claim one row
/// while its lease runs.
pub async fn claim_due(
    db: &Db,
    now: i64,
    lease_until: i64,
    limit: i64,
) -> Result<Vec<CallbackRow>> {
    let lock = match db.engine() {
        Engine::Postgres => " FOR UPDATE SKIP LOCKED",
        Engine::Sqlite => "",
    };
    Ok(sqlx::query_as(&format!(
        "UPDATE scheduled_callbacks SET lease_until = $2, attempts = attempts + 1, updated_at = $1 WHERE id IN ( \
           SELECT id FROM scheduled_callbacks WHERE status = 'scheduled' AND next_attempt_at <= $1 \
           AND (lease_until IS NULL OR lease_until < $1) ORDER BY next_attempt_at LIMIT $3{lock}) \
         RETURNING {COLUMNS}"
    ))
    .bind(now)
    .bind(lease_until)
    .bind(limit)
    .fetch_all(db.pool())
    .await?)
}

/// What one attempt ended in.
pub struct Finished<'a> {
    pub status: CallbackStatus,
    pub next_attempt_at: i64,
    pub response_status: Option<i64>,
    pub error: Option<&'a str>,
    pub delivered_at: Option<i64>,
}

/// Records attempt `attempt` of callback `a.callback_id` and its outcome. The callback row
/// changes only while it is still this attempt's (not cancelled, not claimed again after the
/// lease ran out): answers whether it did.
pub async fn finish(db: &Db, a: &AttemptRow, f: &Finished<'_>, now: i64) -> Result<bool> {
    let mut tx = db.begin_write().await?;
    sqlx::query(
        "INSERT INTO callback_attempts (id, callback_id, attempt, started_at, duration_ms, response_status, error) \
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(&a.id)
    .bind(&a.callback_id)
    .bind(a.attempt)
    .bind(a.started_at)
    .bind(a.duration_ms)
    .bind(a.response_status)
    .bind(&a.error)
    .execute(&mut *tx)
    .await?;
    let changed = sqlx::query(
        "UPDATE scheduled_callbacks SET status = $1, next_attempt_at = $2, lease_until = NULL, response_status = $3, error = $4, \
         delivered_at = $5, updated_at = $6 WHERE id = $7 AND attempts = $8 AND status = 'scheduled'",
    )
    .bind(f.status.as_str())
    .bind(f.next_attempt_at)
    .bind(f.response_status)
    .bind(f.error)
    .bind(f.delivered_at)
    .bind(now)
    .bind(&a.callback_id)
    .bind(a.attempt)
    .execute(&mut *tx)
    .await?
    .rows_affected()
        == 1;
    tx.commit().await?;
    Ok(changed)
}

pub async fn get<'e>(ex: impl Exec<'e>, project_id: &str, id: &str) -> Result<Option<CallbackRow>> {
    Ok(sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM scheduled_callbacks WHERE project_id = $1 AND id = $2"
    ))
    .bind(project_id)
    .bind(id)
    .fetch_optional(ex)
    .await?)
}

/// A project's callbacks, newest first: all of them, or one user's; optionally one status;
/// older than the `before` cursor (created_at, id).
pub async fn list<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    user_id: Option<&str>,
    status: Option<CallbackStatus>,
    before: Option<(i64, &str)>,
    limit: i64,
) -> Result<Vec<CallbackRow>> {
    let mut sql = format!("SELECT {COLUMNS} FROM scheduled_callbacks WHERE project_id = $1");
    let mut n = 1;
    if user_id.is_some() {
        n += 1;
        sql.push_str(&format!(" AND user_id = ${n}"));
    }
    if status.is_some() {
        n += 1;
        sql.push_str(&format!(" AND status = ${n}"));
    }
    if before.is_some() {
        sql.push_str(&format!(
            " AND (created_at < ${a} OR (created_at = ${a} AND id < ${b}))",
            a = n + 1,
            b = n + 2
        ));
        n += 2;
    }
    sql.push_str(&format!(
        " ORDER BY created_at DESC, id DESC LIMIT ${}",
        n + 1
    ));
    let mut q = sqlx::query_as::<_, CallbackRow>(&sql).bind(project_id);
    if let Some(u) = user_id {
        q = q.bind(u);
    }
    if let Some(s) = status {
        q = q.bind(s.as_str());
    }
    if let Some((t, i)) = before {
        q = q.bind(t).bind(i);
    }
    Ok(q.bind(limit).fetch_all(ex).await?)
}

pub async fn attempts<'e>(ex: impl Exec<'e>, callback_id: &str) -> Result<Vec<AttemptRow>> {
    Ok(sqlx::query_as(
        "SELECT id, callback_id, attempt, started_at, duration_ms, response_status, error FROM callback_attempts \
         WHERE callback_id = $1 ORDER BY attempt, started_at",
    )
    .bind(callback_id)
    .fetch_all(ex)
    .await?)
}

/// The attempts of several callbacks at once (a page of them), in attempt order.
pub async fn attempts_of<'e>(
    ex: impl Exec<'e>,
    callback_ids: &[String],
) -> Result<Vec<AttemptRow>> {
    if callback_ids.is_empty() {
        return Ok(Vec::new());
    }
    let marks: Vec<String> = (1..=callback_ids.len()).map(|i| format!("${i}")).collect();
    let sql = format!(
        "SELECT id, callback_id, attempt, started_at, duration_ms, response_status, error FROM callback_attempts \
         WHERE callback_id IN ({}) ORDER BY callback_id, attempt, started_at",
        marks.join(", ")
    );
    let mut q = sqlx::query_as::<_, AttemptRow>(&sql);
    for id in callback_ids {
        q = q.bind(id);
    }
    Ok(q.fetch_all(ex).await?)
}

/// Cancels a callback still scheduled; answers whether it was.
pub async fn cancel<'e>(ex: impl Exec<'e>, project_id: &str, id: &str, now: i64) -> Result<bool> {
    Ok(sqlx::query(
        "UPDATE scheduled_callbacks SET status = 'cancelled', lease_until = NULL, updated_at = $3 \
         WHERE project_id = $1 AND id = $2 AND status = 'scheduled'",
    )
    .bind(project_id)
    .bind(id)
    .bind(now)
    .execute(ex)
    .await?
    .rows_affected()
        == 1)
}

/// Deletes at most `limit` of a project's finished callbacks (delivered, failed, cancelled)
/// created before `before`, with their attempts; how many. Waiting callbacks are kept.
pub async fn delete_finished_older<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    before: i64,
    limit: i64,
) -> Result<u64> {
    Ok(sqlx::query(
        "DELETE FROM scheduled_callbacks WHERE id IN (SELECT id FROM scheduled_callbacks WHERE project_id = $1 \
         AND status <> 'scheduled' AND created_at < $2 ORDER BY created_at LIMIT $3)",
    )
    .bind(project_id)
    .bind(before)
    .bind(limit)
    .execute(ex)
    .await?
    .rows_affected())
}

/// Callbacks whose payload is sealed under another key version than `version`.
pub async fn not_on_version<'e>(
    ex: impl Exec<'e>,
    version: i64,
    limit: i64,
) -> Result<Vec<CallbackRow>> {
    Ok(sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM scheduled_callbacks WHERE key_version <> $1 LIMIT $2"
    ))
    .bind(version)
    .bind(limit)
    .fetch_all(ex)
    .await?)
}

/// Re-seals one payload unless it changed meanwhile.
pub async fn reseal<'e>(
    ex: impl Exec<'e>,
    id: &str,
    old_ciphertext: &str,
    ciphertext: &str,
    nonce: &str,
    version: i64,
) -> Result<bool> {
    super::reseal_row(
        ex,
        "scheduled_callbacks",
        "id",
        id,
        &super::Resealed {
            old_ciphertext,
            ciphertext,
            nonce,
            key_version: version,
        },
    )
    .await
}

/// A project's sealed signing secret.
#[derive(Debug, Clone, FromRow, PartialEq, Eq)]
pub struct SigningSecretRow {
    pub project_id: String,
    pub ciphertext: String,
    pub nonce: String,
    pub key_version: i64,
    pub created_at: i64,
}

pub async fn signing_secret<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
) -> Result<Option<SigningSecretRow>> {
    Ok(sqlx::query_as("SELECT project_id, ciphertext, nonce, key_version, created_at FROM callback_signing_secrets WHERE project_id = $1")
        .bind(project_id)
        .fetch_optional(ex)
        .await?)
}

/// Stores the project's signing secret unless one exists (the first instance to make one wins).
pub async fn insert_signing_secret<'e>(ex: impl Exec<'e>, r: &SigningSecretRow) -> Result<()> {
    sqlx::query(
        "INSERT INTO callback_signing_secrets (project_id, ciphertext, nonce, key_version, created_at) VALUES ($1, $2, $3, $4, $5) \
         ON CONFLICT (project_id) DO NOTHING",
    )
    .bind(&r.project_id)
    .bind(&r.ciphertext)
    .bind(&r.nonce)
    .bind(r.key_version)
    .bind(r.created_at)
    .execute(ex)
    .await?;
    Ok(())
}

pub async fn signing_secrets_not_on_version<'e>(
    ex: impl Exec<'e>,
    version: i64,
    limit: i64,
) -> Result<Vec<SigningSecretRow>> {
    Ok(sqlx::query_as(
        "SELECT project_id, ciphertext, nonce, key_version, created_at FROM callback_signing_secrets WHERE key_version <> $1 LIMIT $2",
    )
    .bind(version)
    .bind(limit)
    .fetch_all(ex)
    .await?)
}

pub async fn reseal_signing_secret<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    old_ciphertext: &str,
    ciphertext: &str,
    nonce: &str,
    version: i64,
) -> Result<bool> {
    super::reseal_row(
        ex,
        "callback_signing_secrets",
        "project_id",
        project_id,
        &super::Resealed {
            old_ciphertext,
            ciphertext,
            nonce,
            key_version: version,
        },
    )
    .await
}

/// Callbacks of every project that are due now and not being delivered (for /metrics).
pub async fn count_due(db: &Db, now: i64) -> Result<i64> {
    let (n,): (i64,) = sqlx::query_as(
        "SELECT COUNT(*) FROM scheduled_callbacks WHERE status = 'scheduled' AND next_attempt_at <= $1 AND (lease_until IS NULL OR lease_until < $1)",
    )
    .bind(now)
    .fetch_one(db.pool())
    .await?;
    Ok(n)
}
