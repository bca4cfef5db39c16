//! Webhook deliveries: each event sent to a project's webhook, its attempts and how the last
//! one went (never the body or the signing secret).

use sqlx::FromRow;

use super::Exec;
use crate::Result;

#[derive(Debug, Clone, FromRow, PartialEq, Eq)]
pub struct DeliveryRow {
    pub id: String,
    pub project_id: String,
    pub event: String,
    /// What the event is about (a confirmation id).
    pub subject_id: String,
    pub url: String,
    /// `pending`, `delivered` or `failed`.
    pub status: String,
    pub attempts: i64,
    pub response_status: Option<i64>,
    pub error: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

const COLUMNS: &str = "id, project_id, event, subject_id, url, status, attempts, response_status, error, created_at, updated_at";

pub async fn insert<'e>(ex: impl Exec<'e>, r: &DeliveryRow) -> Result<()> {
    sqlx::query(&format!("INSERT INTO webhook_deliveries ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"))
        .bind(&r.id)
        .bind(&r.project_id)
        .bind(&r.event)
        .bind(&r.subject_id)
        .bind(&r.url)
        .bind(&r.status)
        .bind(r.attempts)
        .bind(r.response_status)
        .bind(&r.error)
        .bind(r.created_at)
        .bind(r.updated_at)
        .execute(ex)
        .await?;
    Ok(())
}

/// Records an attempt's result.
pub async fn update<'e>(
    ex: impl Exec<'e>,
    id: &str,
    status: &str,
    attempts: i64,
    response_status: Option<i64>,
    error: Option<&str>,
    now: i64,
) -> Result<()> {
    sqlx::query("UPDATE webhook_deliveries SET status = $1, attempts = $2, response_status = $3, error = $4, updated_at = $5 WHERE id = $6")
        .bind(status)
        .bind(attempts)
        .bind(response_status)
        .bind(error)
        .bind(now)
        .bind(id)
        .execute(ex)
        .await?;
    Ok(())
}

/// The project's newest deliveries.
pub async fn recent<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    limit: i64,
) -> Result<Vec<DeliveryRow>> {
    Ok(sqlx::query_as(&format!("SELECT {COLUMNS} FROM webhook_deliveries WHERE project_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2"))
        .bind(project_id)
        .bind(limit)
        .fetch_all(ex)
        .await?)
}

/// Deletes at most `limit` of the project's deliveries created before `before`; how many.
pub async fn delete_older<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    before: i64,
    limit: i64,
) -> Result<u64> {
    super::delete_oldest(ex, "webhook_deliveries", project_id, before, limit).await
}
