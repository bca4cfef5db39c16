//! Sender domains a project proves it controls, and one row per message sent for the hourly
//! limit.

use sqlx::FromRow;

use super::Exec;
use crate::Result;

pub use workbench_model::email::DomainStatus;

#[derive(Debug, Clone, FromRow, PartialEq, Eq)]
pub struct DomainRow {
    pub id: String,
    pub project_id: String,
    pub domain: String,
    pub token: String,
    #[sqlx(try_from = "String")]
    pub status: DomainStatus,
    pub created_at: i64,
    pub verified_at: Option<i64>,
    pub last_checked_at: Option<i64>,
    pub last_error: Option<String>,
}

const COLUMNS: &str =
    "id, project_id, domain, token, status, created_at, verified_at, last_checked_at, last_error";

pub async fn insert_domain<'e>(ex: impl Exec<'e>, r: &DomainRow) -> Result<()> {
    sqlx::query(&format!(
        "INSERT INTO email_domains ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
    ))
    .bind(&r.id)
    .bind(&r.project_id)
    .bind(&r.domain)
    .bind(&r.token)
    .bind(r.status.as_str())
    .bind(r.created_at)
    .bind(r.verified_at)
    .bind(r.last_checked_at)
    .bind(&r.last_error)
    .execute(ex)
    .await?;
    Ok(())
}

pub async fn list_domains<'e>(ex: impl Exec<'e>, project_id: &str) -> Result<Vec<DomainRow>> {
    Ok(sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM email_domains WHERE project_id = $1 ORDER BY domain"
    ))
    .bind(project_id)
    .fetch_all(ex)
    .await?)
}

pub async fn get_domain<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    id: &str,
) -> Result<Option<DomainRow>> {
    Ok(sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM email_domains WHERE project_id = $1 AND id = $2"
    ))
    .bind(project_id)
    .bind(id)
    .fetch_optional(ex)
    .await?)
}

pub async fn find_domain<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    domain: &str,
) -> Result<Option<DomainRow>> {
    Ok(sqlx::query_as(&format!(
        "SELECT {COLUMNS} FROM email_domains WHERE project_id = $1 AND domain = $2"
    ))
    .bind(project_id)
    .bind(domain)
    .fetch_optional(ex)
    .await?)
}

/// Records a verification attempt: verified (from `now` on, kept when it already was) or the
/// reason it failed.
pub async fn record_check<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    id: &str,
    now: i64,
    error: Option<&str>,
) -> Result<()> {
    let status = if error.is_none() {
        DomainStatus::Verified
    } else {
        DomainStatus::Pending
    };
    sqlx::query(
        "UPDATE email_domains SET last_checked_at = $3, last_error = $4, \
         verified_at = CASE WHEN $5 = 'verified' THEN COALESCE(verified_at, $3) ELSE verified_at END, \
         status = CASE WHEN status = 'verified' THEN status ELSE $5 END \
         WHERE project_id = $1 AND id = $2",
    )
    .bind(project_id)
    .bind(id)
    .bind(now)
    .bind(error)
    .bind(status.as_str())
    .execute(ex)
    .await?;
    Ok(())
}

pub async fn delete_domain<'e>(ex: impl Exec<'e>, project_id: &str, id: &str) -> Result<bool> {
    let r = sqlx::query("DELETE FROM email_domains WHERE project_id = $1 AND id = $2")
        .bind(project_id)
        .bind(id)
        .execute(ex)
        .await?;
    Ok(r.rows_affected() == 1)
}

/// One message's claim on its project's hourly allowance.
#[derive(Debug, Clone, Copy)]
pub struct SendReservation<'a> {
    pub id: &'a str,
    pub project_id: &'a str,
    pub domain: &'a str,
    pub recipients: i64,
    /// When the message is sent, ms.
    pub now: i64,
    /// Rows older than this are forgotten (the hour before `now`), ms.
    pub window_start: i64,
    /// Messages allowed in the window.
    pub limit: i64,
}

/// Reserves one message of the project's hourly allowance: inserts its row, forgets rows
/// older than the window, then counts. Over the limit, the row is taken back and false is
/// answered. Two racing senders may both be refused at the edge, never both let through.
pub async fn reserve_send<'e, E: Exec<'e> + Copy>(
    ex: E,
    send: &SendReservation<'_>,
) -> Result<bool> {
    let SendReservation {
        id,
        project_id,
        domain,
        recipients,
        now,
        window_start,
        limit,
    } = *send;
    sqlx::query("DELETE FROM email_sends WHERE project_id = $1 AND created_at < $2")
        .bind(project_id)
        .bind(window_start)
        .execute(ex)
        .await?;
    sqlx::query("INSERT INTO email_sends (id, project_id, domain, recipients, created_at) VALUES ($1, $2, $3, $4, $5)")
        .bind(id)
        .bind(project_id)
        .bind(domain)
        .bind(recipients)
        .bind(now)
        .execute(ex)
        .await?;
    if sent_since(ex, project_id, window_start).await? > limit {
        release_send(ex, id).await?;
        return Ok(false);
    }
    Ok(true)
}

/// Takes a reservation back (the server refused the message: nothing was sent).
pub async fn release_send<'e>(ex: impl Exec<'e>, id: &str) -> Result<()> {
    sqlx::query("DELETE FROM email_sends WHERE id = $1")
        .bind(id)
        .execute(ex)
        .await?;
    Ok(())
}

/// Messages the project sent (or is sending) since `since`.
pub async fn sent_since<'e>(ex: impl Exec<'e>, project_id: &str, since: i64) -> Result<i64> {
    let (n,): (i64,) = sqlx::query_as(
        "SELECT COUNT(*) FROM email_sends WHERE project_id = $1 AND created_at >= $2",
    )
    .bind(project_id)
    .bind(since)
    .fetch_one(ex)
    .await?;
    Ok(n)
}

/// When the oldest message in the window was sent (the limit frees up an hour after it).
pub async fn oldest_since<'e>(
    ex: impl Exec<'e>,
    project_id: &str,
    since: i64,
) -> Result<Option<i64>> {
    let (t,): (Option<i64>,) = sqlx::query_as(
        "SELECT MIN(created_at) FROM email_sends WHERE project_id = $1 AND created_at >= $2",
    )
    .bind(project_id)
    .bind(since)
    .fetch_one(ex)
    .await?;
    Ok(t)
}
