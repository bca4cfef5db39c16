//! Pending connections: what `connect` mints and the /connect page completes (OAuth state and
//! PKCE verifier included), until it is connected, expires or is reaped.

use sqlx::FromRow;

use super::Exec;
use crate::Result;

pub use workbench_model::connections::PendingStatus;

#[derive(Debug, Clone, FromRow)]
pub struct PendingRow {
    pub id: String,
    pub project_id: String,
    pub user_id: String,
    pub integration: String,
    #[sqlx(try_from = "String")]
    pub status: PendingStatus,
    pub oauth_state: Option<String>,
    pub pkce_verifier: Option<String>,
    pub state_expires_at: Option<i64>,
    pub created_at: i64,
    pub expires_at: i64,
}

const PENDING_COLUMNS: &str =
    "id, project_id, user_id, integration, status, oauth_state, pkce_verifier, state_expires_at, created_at, expires_at";

pub async fn insert<'e>(ex: impl Exec<'e>, r: &PendingRow) -> Result<()> {
    sqlx::query(&format!("INSERT INTO pending_connections ({PENDING_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"))
        .bind(&r.id)
        .bind(&r.project_id)
        .bind(&r.user_id)
        .bind(&r.integration)
        .bind(r.status.as_str())
        .bind(&r.oauth_state)
        .bind(&r.pkce_verifier)
        .bind(r.state_expires_at)
        .bind(r.created_at)
        .bind(r.expires_at)
        .execute(ex)
        .await?;
    Ok(())
}

pub async fn get<'e>(ex: impl Exec<'e>, id: &str) -> Result<Option<PendingRow>> {
    Ok(sqlx::query_as(&format!(
        "SELECT {PENDING_COLUMNS} FROM pending_connections WHERE id = $1"
    ))
    .bind(id)
    .fetch_optional(ex)
    .await?)
}

/// Records a fresh OAuth state and PKCE verifier for a pending connection.
pub async fn set_oauth_state<'e>(
    ex: impl Exec<'e>,
    id: &str,
    state: &str,
    verifier: &str,
    state_expires_at: i64,
) -> Result<()> {
    sqlx::query("UPDATE pending_connections SET oauth_state = $1, pkce_verifier = $2, state_expires_at = $3 WHERE id = $4")
        .bind(state)
        .bind(verifier)
        .bind(state_expires_at)
        .bind(id)
        .execute(ex)
        .await?;
    Ok(())
}

/// Consumes an OAuth state: returns the pending row and clears the state so it cannot be used
/// twice (the conditional update decides between racing callbacks).
pub async fn take_by_state<'e>(
    ex: impl Exec<'e> + Copy,
    state: &str,
) -> Result<Option<PendingRow>> {
    let Some(row) = sqlx::query_as::<_, PendingRow>(&format!(
        "SELECT {PENDING_COLUMNS} FROM pending_connections WHERE oauth_state = $1"
    ))
    .bind(state)
    .fetch_optional(ex)
    .await?
    else {
        return Ok(None);
    };
    let cleared = sqlx::query(
        "UPDATE pending_connections SET oauth_state = NULL WHERE id = $1 AND oauth_state = $2",
    )
    .bind(&row.id)
    .bind(state)
    .execute(ex)
    .await?;
    Ok((cleared.rows_affected() == 1).then_some(row))
}

pub async fn mark_connected<'e>(ex: impl Exec<'e>, id: &str) -> Result<()> {
    sqlx::query("UPDATE pending_connections SET status = 'connected', oauth_state = NULL, pkce_verifier = NULL WHERE id = $1")
        .bind(id)
        .execute(ex)
        .await?;
    Ok(())
}

pub async fn delete<'e>(ex: impl Exec<'e>, id: &str) -> Result<()> {
    sqlx::query("DELETE FROM pending_connections WHERE id = $1")
        .bind(id)
        .execute(ex)
        .await?;
    Ok(())
}

pub async fn delete_before<'e>(ex: impl Exec<'e>, cutoff: i64) -> Result<u64> {
    let r = sqlx::query("DELETE FROM pending_connections WHERE expires_at < $1")
        .bind(cutoff)
        .execute(ex)
        .await?;
    Ok(r.rows_affected())
}
