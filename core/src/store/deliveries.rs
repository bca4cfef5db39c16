//! The outbox of outbound deliveries (webhook events and scheduled callbacks), the history of
//! their attempts, and each project's sealed signing secret. A pending delivery is a row; an
//! instance claims it under a lease (`delivering` until `lease_until`), so several instances
//! and restarts are safe: a lease that runs out means its instance stopped, and the row is
//! claimed again. Claiming is the one engine-specific statement: PostgreSQL skips rows another
//! instance is claiming (`FOR UPDATE SKIP LOCKED`), SQLite has one writer at a time.

use sqlx::FromRow;

use super::delivery_status::{DeliveryKind, DeliveryStatus};
use super::{Db, Engine, Exec};
use crate::Result;

/// One delivery: what to send (sealed), where it is in its life and how the last attempt went.
#[derive(Debug, Clone, PartialEq, Eq, FromRow)]
pub struct DeliveryRow {
    pub id: String,
    pub project_id: String,
    #[sqlx(try_from = "String")]
    pub kind: DeliveryKind,
    /// `confirmation.created`, `callback`.
    pub event: String,
    /// What the delivery is about (a confirmation id; a callback's own id).
    pub subject_id: String,
    /// Where it goes, as people are shown it (a callback's URL as the agent wrote it).
    pub url: String,
    pub method: String,
    /// The vault secret that signs it; None: the project's signing secret.
    pub secret_ref: Option<String>,
    /// `{url, payload}` sealed under `<kind>:<id>`; None for deliveries made before the outbox.
    pub ciphertext: Option<String>,
    pub nonce: Option<String>,
    pub key_version: Option<i64>,
    /// When it was first due (a callback's `scheduled_for`).
    pub due_at: i64,
    #[sqlx(try_from = "String")]
    pub status: DeliveryStatus,
    /// Attempts started (counted when claimed).
    pub attempts: i64,
    pub next_attempt_at: i64,
    pub lease_until: Option<i64>,
    pub response_status: Option<i64>,
    pub error: Option<String>,
    pub delivered_at: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
}

const COLUMNS: &str = "id, project_id, kind, event, subject_id, url, method, secret_ref, ciphertext, nonce, key_version, \
     due_at, status, attempts, next_attempt_at, lease_until, response_status, error, delivered_at, created_at, updated_at";

/// One attempt and how it went (never the body or a secret).
#[derive(Debug, Clone, FromRow, PartialEq, Eq)]
pub struct AttemptRow {
    pub id: String,
    pub delivery_id: String,
    pub attempt: i64,
    pub started_at: i64,
    pub duration_ms: i64,
    pub response_status: Option<i64>,
    pub error: Option<String>,
}

const ATTEMPT_COLUMNS: &str =
    "id, delivery_id, attempt, started_at, duration_ms, response_status, error";

pub async fn insert<'e>(ex: impl Exec<'e>, r: &DeliveryRow) -> Result<()> {
    sqlx::query(&format!(
        "INSERT INTO deliveries ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21)"
    ))
    .bind(&r.id)
    .bind(&r.project_id)
    .bind(r.kind.as_str())
    .bind(&r.event)
    .bind(&r.subject_id)
    .bind(&r.url)
    .bind(&r.method)
    .bind(&r.secret_ref)
    .bind(&r.ciphertext)
    .bind(&r.nonce)
    .bind(r.key_version)
    .bind(r.due_at)
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

/// Claims at most `limit` deliveries due at `now` (pending and due, or claimed under a lease
/// that ran out before `now`): each becomes `delivering` until `lease_until`, with one more
/// attempt counted. Two instances never claim one row while its lease runs.
pub async fn claim_due(
    db: &Db,
    now: i64,
    lease_until: i64,
    limit: i64,
) -> Result<Vec<DeliveryRow>> {
    let lock = match db.engine() {
        Engine::Postgres => " FOR UPDATE SKIP LOCKED",
        Engine::Sqlite => "",
    };
    let rows: Vec<DeliveryRow> = sqlx::query_as(&format!(
        "UPDATE deliveries SET status = 'delivering', lease_until = $2, attempts = attempts + 1, updated_at = $1 WHERE id IN ( \
           SELECT id FROM deliveries WHERE (status = 'pending' AND next_attempt_at <= $1) \
           OR (status = 'delivering' AND lease_until < $1) ORDER BY next_attempt_at LIMIT $3{lock}) \
         RETURNING {COLUMNS}"
    ))
    .bind(now)
    .bind(lease_until)
    .bind(limit)
    .fetch_all(db.pool())
    .await?;
    Ok(rows)
}

/// Claims one delivery if it is pending and due (its first attempt, made at once).
pub async fn claim_one(
    db: &Db,
    id: &str,
    now: i64,
    lease_until: i64,
) -> Result<Option<DeliveryRow>> {
    let row: Option<DeliveryRow> = sqlx::query_as(&format!(
        "UPDATE deliveries SET status = 'delivering', lease_until = $3, attempts = attempts + 1, updated_at = $2 \
         WHERE id = $1 AND status = 'pending' AND next_attempt_at <= $2 RETURNING {COLUMNS}"
    ))
    .bind(id)
    .bind(now)
    .bind(lease_until)
    .fetch_optional(db.pool())
    .await?;
    Ok(row)
}

/// What one attempt ended in.
pub struct Finished<'a> {
    pub status: DeliveryStatus,
    pub next_attempt_at: i64,
    pub response_status: Option<i64>,
    pub error: Option<&'a str>,
    pub delivered_at: Option<i64>,
}

/// Records attempt `a.attempt` of delivery `a.delivery_id` and its outcome. The delivery row
/// changes only while it is still this attempt's (not cancelled, not claimed again after the
/// lease ran out): answers whether it did.
pub async fn finish(db: &Db, a: &AttemptRow, f: &Finished<'_>, now: i64) -> Result<bool> {
    let mut tx = db.begin_write().await?;
    sqlx::query(&format!(
        "INSERT INTO delivery_attempts ({ATTEMPT_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7)"
    ))
    .bind(&a.id)
    .bind(&a.delivery_id)
    .bind(a.attempt)
    .bind(a.started_at)
    .bind(a.duration_ms)
    .bind(a.response_status)
    .bind(&a.error)
    .execute(&mut *tx)
    .await?;
    let changed = sqlx::query(
        "UPDATE deliveries SET status = $1, next_attempt_at = $2, lease_until = NULL, response_status = $3, error = $4, \
         delivered_at = $5, updated_at = $6 WHERE id = $7 AND attempts = $8 AND status = 'delivering'",
    )
    .bind(f.status.as_str())
    .bind(f.next_attempt_at)
    .bind(f.response_status)
    .bind(f.error)
    .bind(f.delivered_at)
    .bind(now)
    .bind(&a.delivery_id)
    .bind(a.attempt)
    .execute(&mut *tx)
    .await?
    .rows_affected()
        == 1;
    tx.commit().await?;
    Ok(changed)
}

pub async fn get<'e>(ex: impl Exec<'e>, project_id: &str, id: &str) -> Result<Option<DeliveryRow>> {
    let row: Option<DeliveryRow> = sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM deliveries WHERE project_id = $1 AND id = $2"
    ))
    .bind(project_id)
    .bind(id)
    .fetch_optional(ex)
    .await?;
    Ok(row)
}

/// A project's newest deliveries of one kind.
pub async fn recent<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    kind: DeliveryKind,
    limit: i64,
) -> Result<Vec<DeliveryRow>> {
    let rows: Vec<DeliveryRow> = sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM deliveries WHERE project_id = $1 AND kind = $2 ORDER BY created_at DESC, id DESC LIMIT $3"
    ))
    .bind(project_id)
    .bind(kind.as_str())
    .bind(limit)
    .fetch_all(ex)
    .await?;
    Ok(rows)
}

/// The attempts of several deliveries at once, in attempt order.
pub async fn attempts_of<'e>(
    ex: impl Exec<'e>,
    delivery_ids: &[String],
) -> Result<Vec<AttemptRow>> {
    if delivery_ids.is_empty() {
        return Ok(Vec::new());
    }
    let marks: Vec<String> = (1..=delivery_ids.len()).map(|i| format!("${i}")).collect();
    let sql = format!(
        "SELECT {ATTEMPT_COLUMNS} FROM delivery_attempts WHERE delivery_id IN ({}) \
         ORDER BY delivery_id, attempt, started_at",
        marks.join(", ")
    );
    let mut q = sqlx::query_as::<_, AttemptRow>(&sql);
    for id in delivery_ids {
        q = q.bind(id);
    }
    Ok(q.fetch_all(ex).await?)
}

/// Cancels a delivery not yet finished; answers whether it was.
pub async fn cancel<'e>(ex: impl Exec<'e>, project_id: &str, id: &str, now: i64) -> Result<bool> {
    Ok(sqlx::query(
        "UPDATE deliveries SET status = 'cancelled', lease_until = NULL, updated_at = $3 \
         WHERE project_id = $1 AND id = $2 AND status IN ('pending', 'delivering')",
    )
    .bind(project_id)
    .bind(id)
    .bind(now)
    .execute(ex)
    .await?
    .rows_affected()
        == 1)
}

/// Deliveries of a kind a project has not finished (pending or being delivered).
pub async fn count_unfinished<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    kind: DeliveryKind,
) -> Result<i64> {
    let (n,): (i64,) = sqlx::query_as(
        "SELECT COUNT(*) FROM deliveries WHERE project_id = $1 AND kind = $2 AND status IN ('pending', 'delivering')",
    )
    .bind(project_id)
    .bind(kind.as_str())
    .fetch_one(ex)
    .await?;
    Ok(n)
}

/// Deletes at most `limit` of a project's finished deliveries of `kind` (delivered, failed,
/// cancelled) created before `before`, with their attempts (and a callback's row); how many.
/// Deliveries still waiting are kept whatever their age.
pub async fn delete_finished_older<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    kind: DeliveryKind,
    before: i64,
    limit: i64,
) -> Result<u64> {
    Ok(sqlx::query(
        "DELETE FROM deliveries WHERE id IN (SELECT id FROM deliveries WHERE project_id = $1 AND kind = $2 \
         AND status IN ('delivered', 'failed', 'cancelled') AND created_at < $3 ORDER BY created_at LIMIT $4)",
    )
    .bind(project_id)
    .bind(kind.as_str())
    .bind(before)
    .bind(limit)
    .execute(ex)
    .await?
    .rows_affected())
}

/// Deliveries whose target is sealed under another key version than `version`.
pub async fn not_on_version<'e>(
    ex: impl Exec<'e>,
    version: i64,
    limit: i64,
) -> Result<Vec<DeliveryRow>> {
    let rows: Vec<DeliveryRow> = sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM deliveries WHERE ciphertext IS NOT NULL AND key_version <> $1 LIMIT $2"
    ))
    .bind(version)
    .bind(limit)
    .fetch_all(ex)
    .await?;
    Ok(rows)
}

/// Re-seals one delivery's target unless it changed meanwhile.
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
        "deliveries",
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

/// Deliveries of every project that are due now and not being delivered (for /metrics).
pub async fn count_due(db: &Db, now: i64) -> Result<i64> {
    let (n,): (i64,) = sqlx::query_as(
        "SELECT COUNT(*) FROM deliveries WHERE (status = 'pending' AND next_attempt_at <= $1) \
         OR (status = 'delivering' AND lease_until < $1)",
    )
    .bind(now)
    .fetch_one(db.pool())
    .await?;
    Ok(n)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_and_kind_round_trips_through_its_stored_word() {
        use DeliveryStatus::*;
        for s in [Pending, Delivering, Delivered, Failed, Cancelled] {
            assert_eq!(DeliveryStatus::parse(s.as_str()), Some(s));
        }
        for k in [DeliveryKind::Webhook, DeliveryKind::Callback] {
            assert_eq!(DeliveryKind::parse(k.as_str()), Some(k));
        }
        assert_eq!(DeliveryStatus::parse("scheduled"), None);
    }
}
