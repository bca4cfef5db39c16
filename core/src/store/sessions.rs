//! Portal sessions, kept in the shared database so any instance can serve any browser.

use sqlx::FromRow;

use super::Exec;
use crate::Result;

#[derive(Debug, Clone, FromRow)]
pub struct SessionRow {
    pub id: String,
    pub data: String,
    pub user_id: Option<String>,
    pub expires_at: i64,
}

/// Inserts a new session; false when the id is taken (the caller picks another).
pub async fn create<'e>(ex: impl Exec<'e>, row: &SessionRow) -> Result<bool> {
    let r = sqlx::query(
        "INSERT INTO portal_sessions (id, data, user_id, expires_at) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (id) DO NOTHING",
    )
    .bind(&row.id)
    .bind(&row.data)
    .bind(&row.user_id)
    .bind(row.expires_at)
    .execute(ex)
    .await?;
    Ok(r.rows_affected() == 1)
}

pub async fn save<'e>(ex: impl Exec<'e>, row: &SessionRow) -> Result<()> {
    sqlx::query(
        "INSERT INTO portal_sessions (id, data, user_id, expires_at) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (id) DO UPDATE SET data = excluded.data, user_id = excluded.user_id, \
         expires_at = excluded.expires_at",
    )
    .bind(&row.id)
    .bind(&row.data)
    .bind(&row.user_id)
    .bind(row.expires_at)
    .execute(ex)
    .await?;
    Ok(())
}

/// A live (unexpired) session.
pub async fn load<'e>(ex: impl Exec<'e>, id: &str, now: i64) -> Result<Option<SessionRow>> {
    Ok(sqlx::query_as(
        "SELECT id, data, user_id, expires_at FROM portal_sessions WHERE id = $1 AND expires_at > $2",
    )
    .bind(id)
    .bind(now)
    .fetch_optional(ex)
    .await?)
}

pub async fn delete<'e>(ex: impl Exec<'e>, id: &str) -> Result<()> {
    sqlx::query("DELETE FROM portal_sessions WHERE id = $1")
        .bind(id)
        .execute(ex)
        .await?;
    Ok(())
}

pub async fn delete_expired<'e>(ex: impl Exec<'e>, now: i64) -> Result<u64> {
    let r = sqlx::query("DELETE FROM portal_sessions WHERE expires_at <= $1")
        .bind(now)
        .execute(ex)
        .await?;
    Ok(r.rows_affected())
}

/// Ends every portal session of the user (their account was just linked to an identity).
pub async fn delete_of_user<'e>(ex: impl Exec<'e>, user_id: &str) -> Result<u64> {
    let done = sqlx::query("DELETE FROM portal_sessions WHERE user_id = $1")
        .bind(user_id)
        .execute(ex)
        .await?;
    Ok(done.rows_affected())
}
